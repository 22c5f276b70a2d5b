"""USCTEC planning (MATH.md §1): optimal loads, filling, placements, per-step plans, validation.

Pure: numpy and scipy only.  Every function takes plain data and returns frozen dataclasses from
:mod:`elastic_coded.schemes.plan`.

Rounding (how a fractional plan becomes integer rows).  Each atom ``a`` (the rows held by the same
available machines, possibly in several blocks) of ``R_a`` rows is cut
into its groups by *cumulative rounding*: group ``g`` gets rows
``round(R_a * sum_{h<=g} gamma_h) - round(R_a * sum_{h<g} gamma_h)``, so every group's row count is
within one row of ``gamma_g * R_a`` and the groups tile the atom exactly (a group crossing a block
boundary of the atom is cut into one group per block).  A machine that belongs to ``G_n`` groups
therefore computes at most ``G_n`` rows more than its fractional share, and

    c_int <= c + max_n G_n / (q * s[n])

(:func:`rounding_bound`).  Columns are not split (``F_g = 1``, every piece covers all ``r/L``
columns), so columns need no rounding.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from .plan import Group, Piece, PlanError, Placement, RowBlock, StepPlan

__all__ = [
    "SpeedModel", "optimal_load", "fill", "cyclic_placement", "filled_placement",
    "design_placement", "plan_step", "validate", "expected_time", "rounding_bound",
    "repair_placement", "extend_placement", "check_speeds", "check_code",
]

_TOL = 1e-9


# ------------------------------------------------------------------------------------------------
# input checks
# ------------------------------------------------------------------------------------------------
def check_code(L, S) -> tuple[int, int]:
    """``L >= 1`` and ``S >= 0`` as ints, or a ValueError naming the bad one."""
    for name, val, lo in (("L", L, 1), ("S", S, 0)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
            raise ValueError(f"{name}: must be an int >= {lo}, got {val!r}")
    return int(L), int(S)


def check_speeds(speeds, n: int | None = None, name: str = "speeds") -> np.ndarray:
    """Speeds as a float array; each must be positive and finite."""
    s = np.asarray(speeds, dtype=np.float64).reshape(-1)
    if n is not None and s.shape[0] != n:
        raise ValueError(f"{name}: expected {n} values (one per machine), got {s.shape[0]}")
    bad = ~(np.isfinite(s) & (s > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}: every speed must be positive and finite; {name}[{i}] = {float(s[i])!r}")
    return s


def _check_enough(n_machines: int, K: int, what: str = "available") -> None:
    if n_machines < K:
        raise ValueError(
            f"{what}: {n_machines} machines, fewer than L+S = {K}; every piece needs L+S "
            f"distinct machines")


# ------------------------------------------------------------------------------------------------
# speeds
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpeedModel:
    """Random speeds: machine ``n`` runs at ``base[n]``, times a log-normal jitter
    (``sigma = jitter``), divided by ``straggle_factor`` with probability ``straggle_prob``
    (independently per machine and draw)."""

    base: tuple
    straggle_prob: float = 0.0
    straggle_factor: float = 5.0
    jitter: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "base", tuple(float(x) for x in check_speeds(self.base, None, "base")))
        if not 0 <= self.straggle_prob <= 1:
            raise ValueError(f"straggle_prob: must lie in [0, 1], got {self.straggle_prob!r}")
        if not (self.straggle_factor >= 1 and math.isfinite(self.straggle_factor)):
            raise ValueError(f"straggle_factor: must be finite and >= 1, got {self.straggle_factor!r}")
        if not (self.jitter >= 0 and math.isfinite(self.jitter)):
            raise ValueError(f"jitter: must be finite and >= 0, got {self.jitter!r}")

    @property
    def mean(self) -> np.ndarray:
        """Expected speeds."""
        b = np.asarray(self.base)
        jit = math.exp(self.jitter ** 2 / 2)
        return b * jit * (1 - self.straggle_prob + self.straggle_prob / self.straggle_factor)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` speed realisations, shape ``(size, N)``."""
        b = np.asarray(self.base)
        s = np.broadcast_to(b, (size, b.size)).copy()
        if self.jitter:
            s *= rng.lognormal(0.0, self.jitter, size=s.shape)
        if self.straggle_prob:
            s /= np.where(rng.random(s.shape) < self.straggle_prob, self.straggle_factor, 1.0)
        return s


def _speed_samples(speed_model, n: int, samples: int, seed: int) -> np.ndarray:
    if isinstance(speed_model, SpeedModel):
        if len(speed_model.base) != n:
            raise ValueError(f"speed_model: has {len(speed_model.base)} machines, placement has {n}")
        return speed_model.sample(np.random.default_rng(seed), samples)
    arr = np.asarray(speed_model, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != n:
        raise ValueError(
            f"speed_model: a SpeedModel or an array of realisations (samples x {n}), got shape "
            f"{arr.shape}")
    check_speeds(arr.ravel(), None, "speed_model")
    return arr


# ------------------------------------------------------------------------------------------------
# optimal load and filling
# ------------------------------------------------------------------------------------------------
def optimal_load(speeds, L: int, S: int, caps=None) -> tuple[np.ndarray, float]:
    """Water-filling optimum without storage constraints (MATH.md §1): minimise
    ``max theta[n] / s[n]`` s.t. ``sum theta = L+S``, ``0 <= theta <= caps`` (default 1).

    Returns ``(theta, c)`` with ``theta[n] = min(caps[n], c * s[n])``.
    """
    L, S = check_code(L, S)
    K = L + S
    s = check_speeds(speeds)
    _check_enough(s.size, K, "speeds")
    cap = np.ones_like(s) if caps is None else np.asarray(caps, dtype=np.float64).reshape(-1)
    if cap.shape != s.shape:
        raise ValueError(f"caps: expected {s.size} values, got {cap.size}")
    if np.any(~np.isfinite(cap)) or np.any(cap < 0) or np.any(cap > 1):
        raise ValueError(f"caps: each cap must lie in [0, 1], got {cap.tolist()}")
    if cap.sum() < K - _TOL:
        raise ValueError(
            f"caps: they sum to {cap.sum():.6g} < L+S = {K}; the machines cannot hold L+S copies")
    # theta(c) = sum min(cap, c s) is piecewise linear and increasing; breakpoints at cap/s.
    order = np.argsort(cap / s)
    bp = (cap / s)[order]
    cap_sorted = cap[order]
    s_sorted = s[order]
    capped = 0.0
    s_free = s_sorted.sum()
    c = float(bp[-1])
    for i in range(s.size):
        # for c in [bp[i-1], bp[i]] machines < i are capped
        c_try = (K - capped) / s_free if s_free > 0 else math.inf
        if c_try <= bp[i] + 1e-15:
            c = c_try
            break
        capped += cap_sorted[i]
        s_free -= s_sorted[i]
    theta = np.minimum(cap, c * s)
    return theta, float(c)


def fill(theta, K: int, tol: float = 1e-12) -> list[tuple[float, tuple[int, ...]]]:
    """Filling (MATH.md §1): groups ``(gamma_g, U_g)`` with ``|U_g| = K``, ``sum gamma = 1`` and
    ``sum_g gamma_g 1[n in U_g] = theta[n]``; at most ``len(theta)`` groups.

    Greedy: with remaining mass ``m`` (initially 1) keep ``max residual <= m`` and
    ``sum residual = K m``; each round take the ``K`` largest residuals and the largest ``gamma``
    keeping the invariant.  Each round zeroes a residual or makes one tight (equal to ``m``, after
    which it is always chosen), so it ends within ``len(theta)`` rounds.
    """
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"K: must be an int >= 1, got {K!r}")
    r = np.asarray(theta, dtype=np.float64).reshape(-1).copy()
    n = r.size
    if n < K:
        raise ValueError(f"theta: has {n} entries, fewer than K = {K}")
    if np.any(~np.isfinite(r)) or np.any(r < -tol) or np.any(r > 1 + tol):
        raise ValueError(f"theta: every entry must lie in [0, 1], got {r.tolist()}")
    total = r.sum()
    if abs(total - K) > 1e-9 * max(1, K):
        raise ValueError(f"theta: must sum to K = {K}, sums to {float(total)!r}")
    r = np.clip(r, 0.0, 1.0)
    m = 1.0
    groups: list[tuple[float, tuple[int, ...]]] = []
    for _ in range(n + 1):
        if m <= tol:
            break
        # K largest residuals (ties: lower index first, for determinism)
        order = np.lexsort((np.arange(n), -r))
        top, rest = order[:K], order[K:]
        gamma = min(float(r[top].min()), m - (float(r[rest].max()) if rest.size else 0.0))
        if gamma <= tol:
            gamma = min(float(r[top].min()), m)  # numerical guard: never stall
            if gamma <= tol:
                break
        groups.append((gamma, tuple(sorted(int(i) for i in top))))
        r[top] -= gamma
        m -= gamma
        r[np.abs(r) <= tol] = 0.0
    if groups and m > 1e-9:
        raise ValueError(f"theta: filling left mass {float(m)!r} unassigned (theta not consistent)")
    # scale away the last floating-point crumbs so gammas sum to 1
    tot = sum(g for g, _ in groups)
    return [(g / tot, u) for g, u in groups]


# ------------------------------------------------------------------------------------------------
# placements
# ------------------------------------------------------------------------------------------------
def _check_rows(num_rows) -> int:
    if isinstance(num_rows, bool) or not isinstance(num_rows, (int, np.integer)) or num_rows < 1:
        raise ValueError(f"num_rows: must be a positive int, got {num_rows!r}")
    return int(num_rows)


def _check_budgets(budgets, n: int, K: int, num_rows: int) -> np.ndarray:
    e = np.asarray(budgets, dtype=np.float64).reshape(-1)
    if e.size == 1 and n > 1:
        e = np.full(n, float(e[0]))
    if e.size != n:
        raise ValueError(f"budgets: expected {n} values (one per machine), got {e.size}")
    if np.any(~np.isfinite(e)) or np.any(e < 0) or np.any(e > 1):
        raise ValueError(f"budgets: each storage budget e[n] must lie in [0, 1], got {e.tolist()}")
    cap_rows = np.floor(e * num_rows + 1e-9)
    if cap_rows.sum() < K * num_rows:
        raise ValueError(
            f"budgets: total storage {e.sum():.6g} (x {num_rows} rows) cannot hold every row "
            f"L+S = {K} times (needs sum(e) >= {K})")
    return e


def _machines(machines, n_default: int | None) -> tuple:
    if machines is None:
        if n_default is None:
            raise ValueError("machines: give the machine ids or their number")
        return tuple(range(n_default))
    if isinstance(machines, (int, np.integer)):
        return tuple(range(int(machines)))
    ms = tuple(machines)
    if len(set(ms)) != len(ms):
        raise ValueError(f"machines: ids must be distinct, got {list(ms)}")
    return ms


def _cum_round(total: int, fractions: Sequence[float]) -> list[int]:
    """Integer parts summing to ``total``, each within 1 of ``total * fraction``."""
    cum = np.concatenate([[0.0], np.cumsum(fractions)])
    cum = cum / cum[-1] if cum[-1] > 0 else cum
    edges = np.rint(cum * total).astype(np.int64)
    edges[-1] = total
    return np.diff(edges).tolist()


def _merge_blocks(blocks: list[RowBlock]) -> tuple:
    out: list[RowBlock] = []
    for b in sorted(blocks, key=lambda b: b.start):
        if b.size <= 0:
            continue
        if out and out[-1].stop == b.start and out[-1].holders == b.holders:
            out[-1] = RowBlock(out[-1].start, b.stop, b.holders)
        else:
            out.append(b)
    return tuple(out)


def _sorted_holders(hs) -> tuple:
    try:
        return tuple(sorted(hs))
    except TypeError:
        return tuple(sorted(hs, key=repr))


def _placement_args(num_rows, machines, L, S) -> tuple[int, int, int, tuple]:
    """Checked ``(L, S, num_rows, machines)`` for a placement: at least ``L+S`` machines."""
    L, S = check_code(L, S)
    num_rows = _check_rows(num_rows)
    ms = _machines(machines, None)
    _check_enough(len(ms), L + S, "machines")
    return L, S, num_rows, ms


def cyclic_placement(num_rows: int, machines, L: int, S: int, budgets=None) -> Placement:
    """Cyclic placement of coded elastic computing (Yang et al., MATH.md §1): rows split into
    ``N`` near-equal sets, set ``i`` on machines ``i, ..., i+K-1 (mod N)``.  Each machine stores
    about ``K/N`` of the rows; ``budgets`` (default: exactly what each machine stores) must allow
    that."""
    L, S, num_rows, ms = _placement_args(num_rows, machines, L, S)
    K, N = L + S, len(ms)
    sizes = _cum_round(num_rows, [1.0] * N)
    need = np.array([sum(sizes[(i - j) % N] for j in range(K)) for i in range(N)])
    if budgets is None:
        e = need / num_rows
    else:
        e = _check_budgets(budgets, N, K, num_rows)
    over = np.flatnonzero(need > np.floor(e * num_rows + 1e-9))
    if over.size:
        i = int(over[0])
        raise ValueError(
            f"budgets: cyclic placement stores {need[i]} of {num_rows} rows on machine {ms[i]!r}, "
            f"above its budget e = {e[i]:.6g}; cyclic needs e[n] >= (L+S)/N = {K / N:.6g}")
    blocks, start = [], 0
    for i, size in enumerate(sizes):
        blocks.append(RowBlock(start, start + size, _sorted_holders(ms[(i + j) % N] for j in range(K))))
        start += size
    return Placement(num_rows, ms, tuple(float(x) for x in e), _merge_blocks(blocks))


def filled_placement(num_rows: int, machines, shares, R: int, budgets) -> Placement:
    """A placement storing ``shares[n]`` of the rows on machine ``n``, every row on exactly ``R``
    machines: the filling of ``shares`` (which must sum to ``R``) turned into row blocks."""
    num_rows = _check_rows(num_rows)
    ms = _machines(machines, None)
    e = np.asarray(budgets, dtype=np.float64)
    groups = fill(shares, R)
    sizes = _cum_round(num_rows, [g for g, _ in groups])
    blocks, start = [], 0
    for (gamma, U), size in zip(groups, sizes):
        blocks.append(RowBlock(start, start + size, _sorted_holders(ms[i] for i in U)))
        start += size
    pl = Placement(num_rows, ms, tuple(float(x) for x in e), _merge_blocks(blocks))
    for i, m in enumerate(ms):
        if pl.stored_rows(m) > math.floor(e[i] * num_rows + 1e-9):
            raise ValueError(f"budgets: machine {m!r} would store {pl.stored_rows(m)} rows, "
                             f"above its budget e = {e[i]:.6g}")
    return pl


def design_placement(num_rows: int, machines, budgets, speed_model, L: int, S: int,
                     samples: int = 64, seed: int = 0, mixes: Sequence[float] = (0.0, 0.5, 1.0),
                     max_extra_replication: int = 3) -> Placement:
    """Heterogeneity-aware placement within budgets ``e[n]`` minimising the sample average of the
    per-step optimum ``c`` over speed realisations (MATH.md §1, expected computation time).

    Candidates: the cyclic placement (when the budgets allow it) and, for replication
    ``R = L+S .. L+S+max_extra_replication`` and each mix ``lam``, the filling of the water-filled
    shares ``min(e[n], c * w[n])`` with weights ``w = lam * E[s] + (1 - lam) * mean(E[s])``.  All
    are scored on the same speed samples and the best is returned, so the result is never worse
    than cyclic on those samples.
    """
    L, S, num_rows, ms = _placement_args(num_rows, machines, L, S)
    K, N = L + S, len(ms)
    e = _check_budgets(budgets, N, K, num_rows)
    draws = _speed_samples(speed_model, N, samples, seed)
    mean_speed = draws.mean(axis=0)
    caps = np.floor(e * num_rows + 1e-9) / num_rows
    candidates: list[Placement] = []
    try:
        candidates.append(cyclic_placement(num_rows, ms, L, S, budgets=e))
    except ValueError:
        pass
    max_R = min(N, int(math.floor(caps.sum() + 1e-9)))
    for R in range(K, min(max_R, K + max_extra_replication) + 1):
        for lam in mixes:
            w = lam * mean_speed + (1 - lam) * mean_speed.mean()
            # shrink the caps by one row per possible group so rounding stays within budget
            margin = np.minimum(caps, N / num_rows)
            for cap_try in (caps, caps - margin):
                if cap_try.sum() < R - 1e-9:
                    continue
                try:
                    shares, _ = optimal_load(w, R, 0, caps=np.clip(cap_try, 0, 1))
                    candidates.append(filled_placement(num_rows, ms, shares, R, e))
                    break
                except ValueError:
                    continue
    if not candidates:
        raise ValueError("budgets: no placement fits these budgets")
    scores = [_mean_c(p, draws, L, S) for p in candidates]
    return candidates[int(np.argmin(scores))]


# ------------------------------------------------------------------------------------------------
# per-step plan
# ------------------------------------------------------------------------------------------------
def _step_lp(blocks_holders: list[list[int]], w: np.ndarray, s: np.ndarray, K: int):
    """MATH.md §1, with storage constraints: minimise ``c`` s.t. for every atom ``a``
    ``sum_{n in H_a} x[a,n] = K w_a``, ``0 <= x[a,n] <= w_a``, ``sum_a x[a,n] <= c s[n]``.

    ``blocks_holders[a]`` lists machine indices (into ``s``).  Returns ``(c, x)`` with ``x`` a list
    of arrays aligned with ``blocks_holders``.
    """
    n_mach = s.size
    counts = np.array([len(h) for h in blocks_holders])
    nx = int(counts.sum())
    atom_of = np.repeat(np.arange(len(blocks_holders)), counts)
    mach_of = np.concatenate([np.asarray(h, dtype=np.int64) for h in blocks_holders])
    cost = np.zeros(nx + 1)
    cost[-1] = 1.0
    idx = np.arange(nx)
    A_eq = sparse.csr_matrix((np.ones(nx), (atom_of, idx)), shape=(len(blocks_holders), nx + 1))
    A_ub = sparse.csr_matrix(
        (np.concatenate([np.ones(nx), -s]),
         (np.concatenate([mach_of, np.arange(n_mach)]), np.concatenate([idx, np.full(n_mach, nx)]))),
        shape=(n_mach, nx + 1))
    ub = np.concatenate([w[atom_of], [np.inf]])
    res = linprog(cost, A_ub=A_ub, b_ub=np.zeros(n_mach), A_eq=A_eq, b_eq=K * w,
                  bounds=np.stack([np.zeros(nx + 1), ub], axis=1), method="highs")
    if res.status != 0:
        raise PlanError(f"per-step LP failed: {res.message}")
    x = np.clip(res.x[:-1], 0.0, None)
    return float(res.x[-1]), np.split(x, np.cumsum(counts)[:-1])


def _present_atoms(placement: Placement, avail_index: dict, K: int):
    """Atoms (MATH.md §1): the rows held by exactly the same *available* machines.  Blocks with
    the same available holders form one atom, however scattered (churn fragments blocks), so the
    LP has one row per atom.  Returns ``(holders, weights, blocks)`` per atom: holder indices
    into ``avail_index``, the atom's fraction of the rows, and its blocks."""
    atoms: dict[tuple, list] = {}
    for b in placement.blocks:
        h = tuple(sorted(avail_index[m] for m in b.holders if m in avail_index))
        if len(h) < K:
            raise ValueError(
                f"available: rows {b.start}:{b.stop} have {len(h)} available holders "
                f"({[m for m in b.holders if m in avail_index]}), fewer than L+S = {K}; repair the "
                f"placement (repair_placement) before planning")
        atoms.setdefault(h, []).append(b)
    holders = [list(h) for h in atoms]
    blocks = list(atoms.values())
    weights = np.array([sum(b.size for b in bs) / placement.num_rows for bs in blocks])
    return holders, weights, blocks


def _mean_c(placement: Placement, draws: np.ndarray, L: int, S: int) -> float:
    K = L + S
    idx = {m: i for i, m in enumerate(placement.machines)}
    holders, w, _ = _present_atoms(placement, idx, K)
    return float(np.mean([_step_lp(holders, w, d, K)[0] for d in draws]))


def plan_step(placement: Placement, available, speeds, L: int, S: int) -> StepPlan:
    """The per-step plan for the ``available`` machines with realised ``speeds`` (MATH.md §1).

    Solves the storage-constrained LP exactly (a single atom held by everyone reduces to
    :func:`optimal_load`), fills each atom's loads into groups of ``L+S`` machines, and rounds
    rows cumulatively (module docstring).  Each group is one piece over all columns.
    """
    L, S = check_code(L, S)
    K = L + S
    if not isinstance(placement, Placement):
        raise TypeError(f"placement: expected a Placement, got {type(placement).__name__}")
    avail = tuple(available)
    if len(set(avail)) != len(avail):
        raise ValueError(f"available: machine ids must be distinct, got {list(avail)}")
    unknown = [m for m in avail if m not in placement.machines]
    if unknown:
        raise ValueError(f"available: machines {unknown} are not in the placement")
    _check_enough(len(avail), K)
    s = check_speeds(speeds, len(avail))
    idx = {m: i for i, m in enumerate(avail)}
    holders, w, atoms = _present_atoms(placement, idx, K)
    if len(atoms) == 1 and len(holders[0]) == len(avail):
        theta, c = optimal_load(s, L, S)
        xs = [theta * w[0]]
        holders = [list(range(len(avail)))]
    else:
        c, xs = _step_lp(holders, w, s, K)
    theta = np.zeros(len(avail))
    groups: list[Group] = []
    for bs, h, wa, x in zip(atoms, holders, w, xs):
        theta[h] += x
        local = np.clip(x / wa, 0.0, 1.0)
        local *= K / local.sum()
        if local.max() > 1:  # numerical crumbs only
            local = np.minimum(local, 1.0)
            local *= K / local.sum()
        fills = fill(local, K, tol=1e-10)
        sizes = _cum_round(sum(b.size for b in bs), [g for g, _ in fills])
        # lay the groups along the atom's rows, block after block; a group that crosses a block
        # boundary becomes one group per block (row ranges stay contiguous)
        spans = [[b.start, b.stop] for b in bs]
        for (_, U), size in zip(fills, sizes):
            machines = tuple(avail[h[i]] for i in U)
            while size > 0:
                a, stop = spans[0]
                take = min(size, stop - a)
                groups.append(Group((a, a + take), take / placement.num_rows, machines))
                size -= take
                spans[0][0] += take
                if spans[0][0] == stop:
                    spans.pop(0)
    pieces = tuple(Piece(g, None, grp.machines) for g, grp in enumerate(groups))
    rows = np.zeros(len(avail))
    for grp in groups:
        for m in grp.machines:
            rows[idx[m]] += grp.size
    c_int = float(np.max(rows / placement.num_rows / s))
    return StepPlan(L, S, placement.num_rows, avail, tuple(float(x) for x in s), tuple(groups),
                    pieces, tuple(float(x) for x in theta), float(c), c_int)


def rounding_bound(plan: StepPlan) -> float:
    """Upper bound on ``c_int - c`` from cumulative rounding: ``max_n G_n / (q s[n])``."""
    count = {m: 0 for m in plan.available}
    for g in plan.groups:
        for m in g.machines:
            count[m] += 1
    return max(count[m] / (plan.num_rows * s) for m, s in zip(plan.available, plan.speeds))


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------
def validate(plan: StepPlan, placement: Placement, num_cols: int | None = None) -> None:
    """Check every constraint (9b)-(9f) of the USCTEC seed; raise :class:`PlanError` naming the
    violated one.  ``num_cols`` (``r/L``) is needed only when pieces split the columns."""
    q = placement.num_rows
    # (9b) storage budgets
    stored = _stored_ranges(placement)
    for m, e in zip(placement.machines, placement.budgets):
        starts, stops = stored.get(m, ([], []))
        rows = sum(b - a for a, b in zip(starts, stops))
        if rows > math.floor(e * q + 1e-9):
            raise PlanError(f"(9b) storage: machine {m!r} stores {rows} rows, "
                            f"above its budget e = {e} of {q} rows")
    if plan.num_rows != q:
        raise PlanError(f"(9c) rows: plan covers {plan.num_rows} rows, placement has {q}")
    # (9c) groups partition the rows; gammas sum to 1
    spans = sorted(g.rows for g in plan.groups)
    pos = 0
    for a, b in spans:
        if a != pos or b <= a:
            raise PlanError(f"(9c) rows: groups do not partition rows 0:{q} (gap or overlap at "
                            f"row {min(a, pos)})")
        pos = b
    if pos != q:
        raise PlanError(f"(9c) rows: groups cover rows 0:{pos}, not 0:{q}")
    gsum = sum(g.gamma for g in plan.groups)
    if abs(gsum - 1) > 1e-6:
        raise PlanError(f"(9c) gamma: partitioning vector sums to {float(gsum)!r}, not 1")
    # (9d) pieces of each group cover all columns
    by_group: dict[int, list] = {g: [] for g in range(len(plan.groups))}
    for p in plan.pieces:
        if not 0 <= p.group < len(plan.groups):
            raise PlanError(f"(9d) columns: piece names group {p.group}, plan has "
                            f"{len(plan.groups)}")
        by_group[p.group].append(p.cols)
    for g, cols in by_group.items():
        if not cols:
            raise PlanError(f"(9d) columns: group {g} has no piece")
        if None in cols:
            if len(cols) != 1:
                raise PlanError(f"(9d) columns: group {g} mixes a whole-column piece with others")
            continue
        if num_cols is None:
            raise PlanError("(9d) columns: pieces split columns; pass num_cols to validate")
        pos = 0
        for a, b in sorted(cols):
            if a != pos or b <= a:
                raise PlanError(f"(9d) columns: pieces of group {g} do not tile 0:{num_cols}")
            pos = b
        if pos != num_cols:
            raise PlanError(f"(9d) columns: pieces of group {g} cover 0:{pos}, not 0:{num_cols}")
    # (9e) P subset of U, U available and storing A_g; (9f) |P| = L+S distinct
    avail = set(plan.available)
    for pi, piece, grp in plan.iter_pieces():
        if len(piece.machines) != plan.K or len(set(piece.machines)) != plan.K:
            raise PlanError(f"(9f) redundancy: piece {pi} has machines {list(piece.machines)}, "
                            f"needs L+S = {plan.K} distinct ones")
        if not set(piece.machines) <= set(grp.machines):
            raise PlanError(f"(9e) selection: piece {pi} uses machines outside U_g of group "
                            f"{piece.group}")
    for gi, grp in enumerate(plan.groups):
        if len(set(grp.machines)) < plan.K:
            raise PlanError(f"(9f) redundancy: group {gi} has {len(set(grp.machines))} machines, "
                            f"fewer than L+S = {plan.K}")
        for m in grp.machines:
            if m not in avail:
                raise PlanError(f"(9e) selection: group {gi} uses machine {m!r}, not available")
            if not _covers(stored.get(m, ([], [])), grp.rows):
                raise PlanError(f"(9e) storage: machine {m!r} does not store rows "
                                f"{grp.rows[0]}:{grp.rows[1]} of group {gi}")


def _stored_ranges(placement: Placement) -> dict:
    """``{machine: (starts, stops)}`` of its merged stored row ranges."""
    out: dict = {}
    for blk in placement.blocks:
        for m in blk.holders:
            starts, stops = out.setdefault(m, ([], []))
            if stops and stops[-1] == blk.start:
                stops[-1] = blk.stop
            else:
                starts.append(blk.start)
                stops.append(blk.stop)
    return out


def _covers(ranges: tuple, rows: tuple) -> bool:
    starts, stops = ranges
    i = bisect.bisect_right(starts, rows[0]) - 1
    return i >= 0 and stops[i] >= rows[1]


# ------------------------------------------------------------------------------------------------
# expected time
# ------------------------------------------------------------------------------------------------
def expected_time(placement: Placement, speed_model, L: int, S: int, samples: int = 200,
                  seed: int = 0) -> float:
    """Monte Carlo estimate of ``E_s[c]`` with every machine of the placement available and the
    per-step optimum for each speed realisation (MATH.md §1, expected computation time)."""
    L, S = check_code(L, S)
    draws = _speed_samples(speed_model, len(placement.machines), samples, seed)
    return _mean_c(placement, draws, L, S)


# ------------------------------------------------------------------------------------------------
# elasticity: storage repair and joining machines
# ------------------------------------------------------------------------------------------------
def repair_placement(placement: Placement, present, L: int, S: int,
                     budgets: dict | None = None) -> tuple[Placement, list[tuple[int, int, Hashable]]]:
    """Drop machines not ``present`` and give every row at least ``L+S`` present holders, adding
    copies on present machines within their budgets (most spare room first).  When that greedy
    gets stuck, every block is re-placed at once by :func:`_rebalance` (fewest rows moved).

    Returns the new placement and the copies made as ``(start, stop, machine)``.
    ``budgets`` maps present machines missing from the placement to their budgets (joiners).
    """
    L, S = check_code(L, S)
    K = L + S
    present = tuple(present)
    _check_enough(len(present), K, "present")
    q = placement.num_rows
    e = {m: b for m, b in zip(placement.machines, placement.budgets)}
    e.update(budgets or {})
    missing = [m for m in present if m not in e]
    if missing:
        raise ValueError(f"budgets: no storage budget for machines {missing}")
    pset = set(present)
    cap = {m: math.floor(e[m] * q + 1e-9) for m in present}
    blocks = [RowBlock(b.start, b.stop, _sorted_holders(h for h in b.holders if h in pset))
              for b in placement.blocks]
    used = {m: 0 for m in present}
    for b in blocks:
        for h in b.holders:
            used[h] += b.size
    moved: list[tuple[int, int, Hashable]] = []
    queue = sorted(blocks, key=lambda b: b.start)
    done: list[RowBlock] = []
    while queue:
        b = queue.pop(0)
        if len(b.holders) >= K:
            done.append(b)
            continue
        cands = [m for m in present if m not in b.holders and cap[m] - used[m] > 0]
        if not cands:
            # the greedy is stuck: re-place every block at once, moving as few rows as possible
            return _rebalance(placement, blocks, present, cap, K, e)
        m = max(cands, key=lambda x: (cap[x] - used[x], -present.index(x)))
        take = min(cap[m] - used[m], b.size)
        used[m] += take
        moved.append((b.start, b.start + take, m))
        queue.insert(0, RowBlock(b.start, b.start + take, _sorted_holders(b.holders + (m,))))
        if take < b.size:
            queue.insert(1, RowBlock(b.start + take, b.stop, b.holders))
    new = Placement(q, present, tuple(float(e[m]) for m in present), _merge_blocks(done))
    return new, moved


def _rebalance(placement: Placement, blocks: list[RowBlock], present: tuple, cap: dict, K: int,
               e: dict) -> tuple[Placement, list]:
    """Re-place every block on exactly ``K`` present machines within ``cap`` rows each, moving as
    few rows as possible.

    A transportation LP over integer row counts ``z[b, m]`` (``sum_m z = K |b|``,
    ``sum_b z <= cap[m]``, ``0 <= z <= |b|``, cost 1 per row on a machine that lacks it); its
    constraint matrix is totally unimodular, so the optimum is integral.  Each block's counts are
    then laid out by McNaughton's wrap-around rule (machine after machine along ``K`` passes over
    the block's rows), so every row gets exactly ``K`` distinct machines.
    """
    q = placement.num_rows
    nb, nm = len(blocks), len(present)
    cost = np.array([[0.0 if m in b.holders else 1.0 for m in present] for b in blocks]).ravel()
    rows_i = np.repeat(np.arange(nb), nm)
    cols_i = np.arange(nb * nm)
    A_eq = sparse.csr_matrix((np.ones(nb * nm), (rows_i, cols_i)), shape=(nb, nb * nm))
    A_ub = sparse.csr_matrix((np.ones(nb * nm), (np.tile(np.arange(nm), nb), cols_i)),
                             shape=(nm, nb * nm))
    sizes = np.array([b.size for b in blocks], dtype=float)
    res = linprog(cost, A_ub=A_ub, b_ub=np.array([cap[m] for m in present], dtype=float),
                  A_eq=A_eq, b_eq=K * sizes, bounds=np.stack([np.zeros(nb * nm),
                                                              np.repeat(sizes, nm)], axis=1),
                  method="highs-ds")
    if res.status != 0:
        raise ValueError(
            f"budgets: the machines present ({list(present)}) cannot hold every row L+S = {K} "
            f"times within their storage budgets")
    z = np.rint(res.x).astype(np.int64).reshape(nb, nm)
    out: list[RowBlock] = []
    moved: list = []
    for bi, b in enumerate(blocks):
        order = sorted(range(nm), key=lambda j: (present[j] not in b.holders, j))
        cuts = {0, b.size}
        spans = []  # (machine, offset start, offset stop) within the block
        pos = 0
        for j in order:
            n = int(z[bi, j])
            while n > 0:
                take = min(n, b.size - pos)
                spans.append((present[j], pos, pos + take))
                cuts.update((pos, pos + take))
                n -= take
                pos = (pos + take) % b.size
        edges = sorted(cuts)
        for lo, hi in zip(edges[:-1], edges[1:]):
            hs = _sorted_holders(m for m, a, c in spans if a <= lo and hi <= c)
            out.append(RowBlock(b.start + lo, b.start + hi, hs))
        for m, a, c in spans:
            if m not in b.holders:
                moved.append((b.start + a, b.start + c, m))
    new = Placement(q, present, tuple(float(e[m]) for m in present), _merge_blocks(out))
    return new, moved


def extend_placement(placement: Placement, machine: Hashable, budget: float
                     ) -> tuple[Placement, list[tuple[int, int, Hashable]]]:
    """Give a joining ``machine`` storage up to its ``budget``: copies of the least-replicated
    blocks first.  Returns the new placement and the copies made."""
    if machine in placement.machines:
        raise ValueError(f"machine: {machine!r} is already in the placement")
    if not (0 <= budget <= 1):
        raise ValueError(f"budget: storage budget must lie in [0, 1], got {budget!r}")
    q = placement.num_rows
    spare = math.floor(budget * q + 1e-9)
    blocks = list(placement.blocks)
    order = sorted(range(len(blocks)), key=lambda i: (len(blocks[i].holders), i))
    moved = []
    new_blocks = list(blocks)
    for i in order:
        if spare <= 0:
            break
        b = blocks[i]
        take = min(spare, b.size)
        spare -= take
        moved.append((b.start, b.start + take, machine))
        new_blocks[i] = None  # type: ignore[call-overload]
        new_blocks.append(RowBlock(b.start, b.start + take, _sorted_holders(b.holders + (machine,))))
        if take < b.size:
            new_blocks.append(RowBlock(b.start + take, b.stop, b.holders))
    pl = Placement(q, placement.machines + (machine,), placement.budgets + (float(budget),),
                   _merge_blocks([b for b in new_blocks if b is not None]))
    return pl, moved
