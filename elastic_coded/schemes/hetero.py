"""Heterogeneous masters on heterogeneous workers: assignment and load allocation (MATH.md §3).

``M`` masters each compute ``A_m x_m`` (``L_m`` rows, MDS-coded); ``N > M`` workers are shared.
Worker ``n`` computing ``l`` coded rows for master ``m`` takes ``T = a[m,n]*l + Exp(rate u[m,n]/l)``
and returns all ``l`` results at once.  The planner chooses

* which workers serve which master: *dedicated* (each worker serves at most one master; a max-min
  allocation, solved by the seed's two greedy algorithms or exactly by a MILP) or *probabilistic*
  (worker ``n`` serves master ``m`` with probability ``k[m,n]``; an LP);
* how many coded rows each worker computes (Theorem 1: ``l* = u t / (W - 1)`` with the Lambert-W
  constant ``W``), then rounded to integers.

Everything here is pure numpy/scipy.  The result a runtime needs is a :class:`HeteroPlan`: for each
master the list of ``(worker, coded rows)``.  :func:`simulate` runs an assignment and its
loads against the model (Monte Carlo).

Conventions: ``v[m,n] = u/W`` is the worker value of MATH.md §3 (expected results per unit time at
the optimal load); ``w[m,n] = v[m,n] / L_m`` is the item value of the max-min allocation, so a
master's sum value is ``V_m = sum_{n in Omega_m} w[m,n] = 1 / t*_m``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import optimize
from scipy.special import lambertw

__all__ = [
    # processing-time model
    "cdf", "expected_results", "sample_time",
    # Theorem 1
    "lambert_W", "optimal_load", "worker_value", "t_star",
    # problem and assignments
    "HeteroProblem", "random_problem", "Assignment", "assignment_from_owner",
    "assignment_from_k", "validate_assignment",
    # dedicated assignment
    "best_value_assignment", "simple_greedy", "iterated_greedy", "exact_assignment",
    "exhaustive_assignment",
    # probabilistic assignment
    "probabilistic_assignment",
    # integer loads, plans, simulation
    "integer_loads", "approx_completion_time", "HeteroPlan", "make_plan", "SimulationResult",
    "simulate",
    # baselines
    "even_split_owner", "uncoded_baseline", "unbalanced_coded_baseline",
]

log = logging.getLogger(__name__)

_TINY = np.finfo(np.float64).tiny


# =============================================================================================
# Processing-time model
# =============================================================================================

def _as_float(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name}: needs a real number or array, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def cdf(t: Any, l: Any, a: Any, u: Any) -> np.ndarray:
    """``Pr[T <= t]`` for ``l`` rows: ``1 - exp(-(u/l)(t - a l))`` for ``t >= a l``, else 0.

    MATH.md §3, processing time.  Broadcasts.  A worker with ``l = 0`` rows is done at once
    (probability 1), though it returns no result.
    """
    t, l, a, u = (_as_float(x, n) for x, n in ((t, "t"), (l, "l"), (a, "a"), (u, "u")))
    t, l, a, u = np.broadcast_arrays(t, l, a, u)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        slack = t - a * l
        p = -np.expm1(-(u / l) * slack)
    p = np.where(slack >= 0, p, 0.0)
    p = np.where(l > 0, p, 1.0)
    return np.clip(p, 0.0, 1.0)


def expected_results(t: Any, l: Any, a: Any, u: Any) -> np.ndarray:
    """``E[X(t)] = l * Pr[T <= t]``: the results one worker returns by ``t`` (MATH.md §3)."""
    return _as_float(l, "l") * cdf(t, l, a, u)


def sample_time(l: Any, a: Any, u: Any, rng: np.random.Generator) -> np.ndarray:
    """Draw ``T = a l + Exp(rate u / l)`` (MATH.md §3); ``l = 0`` gives ``T = 0``."""
    l, a, u = (_as_float(x, n) for x, n in ((l, "l"), (a, "a"), (u, "u")))
    if np.any(l < 0):
        raise ValueError("l: row counts must be >= 0")
    l, a, u = np.broadcast_arrays(l, a, u)
    return a * l + rng.standard_exponential(l.shape) * (l / u)


# =============================================================================================
# Theorem 1: optimal load and worker value
# =============================================================================================

def _phi(y: np.ndarray) -> np.ndarray:
    """``y - log(1 + y)`` without cancellation for small ``y``."""
    y = np.asarray(y, dtype=np.float64)
    out = np.empty_like(y)
    small = y < 0.25
    ys = y[small]
    acc = np.zeros_like(ys)
    power = ys * ys
    for k in range(2, 42):
        acc += (1.0 if k % 2 == 0 else -1.0) * power / k
        power = power * ys
    out[small] = acc
    yb = y[~small]
    out[~small] = yb - np.log1p(yb)
    return out


def _w_minus_one(eps: np.ndarray) -> np.ndarray:
    """``W - 1`` where ``W = -W_{-1}(-exp(-(1 + eps)))``, i.e. the root ``y > 0`` of
    ``y - log(1 + y) = eps``; accurate to full precision for every ``eps >= 0``."""
    eps = np.asarray(eps, dtype=np.float64)
    y = np.zeros_like(eps)
    small = eps < 1e-2
    # Near the branch point -1/e: W = 1 + q + q^2/3 + 11/72 q^3 + ..., q = sqrt(2(1 + e z)).
    q = np.sqrt(-2.0 * np.expm1(-eps[small]))
    y[small] = q + q**2 / 3 + 11 / 72 * q**3 + 43 / 540 * q**4 + 769 / 17280 * q**5
    big = ~small
    c = 1.0 + eps[big]
    with np.errstate(all="ignore"):
        w0 = -np.real(lambertw(-np.exp(-c), k=-1))
    # exp(-c) underflows for c > ~745: use the asymptotic root of W - log W = c.
    asym = c + np.log(c) + np.log(c) / c
    w0 = np.where(np.isfinite(w0) & (w0 > 1.0), w0, asym)
    y[big] = w0 - 1.0
    # Newton on phi(y) = eps (convex, increasing): two or three steps reach full precision.
    pos = y > 0
    for _ in range(4):
        yp = y[pos]
        step = (_phi(yp) - eps[pos]) * (1.0 + yp) / yp
        y[pos] = np.maximum(yp - step, yp * 1e-3)
    return y


def _check_au(a: Any, u: Any) -> tuple[np.ndarray, np.ndarray]:
    a = _as_float(a, "a")
    u = _as_float(u, "u")
    for name, x in (("a", a), ("u", u)):
        if np.any(~np.isfinite(x)) or np.any(x < 0):
            raise ValueError(f"{name}: must be finite and >= 0 (model parameters, MATH.md §3)")
    return np.broadcast_arrays(a, u)


def lambert_W(a: Any, u: Any) -> np.ndarray:
    """``W = -W_{-1}(-exp(-(1 + a u)))`` (> 1), the Theorem-1 constant (MATH.md §3).

    Computed with ``scipy.special.lambertw(k=-1)`` and polished by Newton steps on the
    equivalent ``W - log W = 1 + a u``.  As ``a u -> 0`` the argument tends to ``-1/e`` and
    ``W -> 1`` (a branch-point series is used there); ``a u = 0`` gives exactly 1.
    """
    a, u = _check_au(a, u)
    return 1.0 + _w_minus_one(a * u)


def optimal_load(a: Any, u: Any, t: Any) -> np.ndarray:
    """``l* = u t / (W - 1)``: the load maximising ``l Pr[T <= t]`` (MATH.md §3, Theorem 1).

    ``a u = 0`` (no shift) has no finite maximiser: the result is ``inf``.
    """
    a, u = _check_au(a, u)
    t = _as_float(t, "t")
    if np.any(~np.isfinite(t)) or np.any(t < 0):
        raise ValueError("t: must be finite and >= 0")
    y = _w_minus_one(a * u)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y > 0, u * t / np.where(y > 0, y, 1.0), np.inf)


def worker_value(a: Any, u: Any) -> np.ndarray:
    """``v = u / W``: expected results per unit time at the optimal load (MATH.md §3)."""
    a, u = _check_au(a, u)
    return u / (1.0 + _w_minus_one(a * u))


def t_star(L_m: float, values: Any) -> float:
    """``t*_m = L_m / sum_{n in Omega_m} v_{m,n}`` (MATH.md §3); ``inf`` for an empty set."""
    total = float(np.sum(_as_float(values, "values")))
    return float(L_m) / total if total > 0 else math.inf


# =============================================================================================
# The problem
# =============================================================================================

def _readonly(x: np.ndarray) -> np.ndarray:
    x = np.array(x, copy=True)
    x.setflags(write=False)
    return x


@dataclass(frozen=True, eq=False)
class HeteroProblem:
    """``M`` masters with ``L[m]`` rows each, ``N > M`` workers, model parameters ``a, u``
    of shape ``(M, N)`` (MATH.md §3)."""

    L: np.ndarray
    """Rows of ``A_m`` per master, shape ``(M,)``, positive whole numbers."""
    a: np.ndarray
    """Minimum processing time per coded row, shape ``(M, N)``, positive."""
    u: np.ndarray
    """Straggling parameter (rate ``u/l`` of the exponential tail), shape ``(M, N)``, positive."""

    def __post_init__(self):
        L = _as_float(self.L, "L")
        a = _as_float(self.a, "a")
        u = _as_float(self.u, "u")
        if L.ndim != 1 or L.size == 0:
            raise ValueError(f"L: must be a non-empty 1-D sequence (rows per master), "
                             f"got shape {L.shape}")
        M = L.size
        for name, x in (("a", a), ("u", u)):
            if x.ndim != 2 or x.shape[0] != M:
                raise ValueError(f"{name}: must have shape (M, N) = ({M}, N) to match L, "
                                 f"got shape {x.shape}")
        if a.shape != u.shape:
            raise ValueError(f"u: shape {u.shape} must equal a's shape {a.shape}")
        N = a.shape[1]
        if N <= M:
            raise ValueError(f"N: needs more workers than masters (N > M), got N={N}, M={M}")
        for name, x in (("L", L), ("a", a), ("u", u)):
            bad = ~np.isfinite(x) | (x <= 0)
            if np.any(bad):
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ValueError(f"{name}: every entry must be positive and finite, "
                                 f"got {name}{list(idx)} = {float(x[idx])!r}")
        if np.any(L != np.floor(L)):
            m = int(np.argwhere(L != np.floor(L))[0][0])
            raise ValueError(f"L: rows per master must be whole numbers, "
                             f"got L[{m}] = {float(L[m])!r}")
        object.__setattr__(self, "L", _readonly(L))
        object.__setattr__(self, "a", _readonly(a))
        object.__setattr__(self, "u", _readonly(u))

    @property
    def M(self) -> int:
        return int(self.L.size)

    @property
    def N(self) -> int:
        return int(self.a.shape[1])

    @cached_property
    def W(self) -> np.ndarray:
        """Theorem-1 constants, shape ``(M, N)``."""
        return _readonly(lambert_W(self.a, self.u))

    @cached_property
    def v(self) -> np.ndarray:
        """Worker values ``v = u / W``, shape ``(M, N)``."""
        return _readonly(worker_value(self.a, self.u))

    @cached_property
    def w(self) -> np.ndarray:
        """Max-min item values ``w[m,n] = v[m,n] / L_m``."""
        return _readonly(self.v / self.L[:, None])

    def __repr__(self) -> str:
        return (f"<HeteroProblem: M={self.M} masters, N={self.N} workers, "
                f"L={[int(x) for x in self.L]}>")


def random_problem(M: int, N: int, rng: Any = None, *,
                   L_range: tuple[int, int] = (500, 2000)) -> HeteroProblem:
    """A random heterogeneous instance (the benchmark's generator).

    Per-row times ``a[m,n] = 1e-3 * d_m * c_n * e_mn`` seconds with task sizes
    ``d_m ~ U[0.5, 2]``, worker slowness ``c_n`` log-uniform on ``[1, 10]`` and pair noise
    ``e_mn ~ U[0.8, 1.25]``; straggling ``u[m,n] = 1 / (a[m,n] g_n)`` with ``g_n`` log-uniform
    on ``[0.5, 5]`` (the exponential tail's mean is ``g_n`` times the shift); ``L_m`` uniform
    on ``L_range``.
    """
    rng = np.random.default_rng(rng)
    d = rng.uniform(0.5, 2.0, size=M)
    c = np.exp(rng.uniform(np.log(1.0), np.log(10.0), size=N))
    e = rng.uniform(0.8, 1.25, size=(M, N))
    g = np.exp(rng.uniform(np.log(0.5), np.log(5.0), size=N))
    a = 1e-3 * d[:, None] * c[None, :] * e
    u = 1.0 / (a * g[None, :])
    L = rng.integers(L_range[0], L_range[1] + 1, size=M)
    return HeteroProblem(L=L, a=a, u=u)


# =============================================================================================
# Assignments
# =============================================================================================

@dataclass(frozen=True, eq=False)
class Assignment:
    """A worker assignment with its Theorem-1 loads (MATH.md §3)."""

    policy: str
    """``"dedicated"`` (``k`` is 0/1) or ``"probabilistic"`` (``k`` holds probabilities)."""
    method: str
    """The algorithm that produced it (``"simple_greedy"``, ``"milp"``, ...)."""
    k: np.ndarray
    """``k[m,n]``: 1 (or the probability) if worker ``n`` serves master ``m``; shape ``(M, N)``."""
    t_star: tuple[float, ...]
    """Per master ``t*_m = L_m / sum_n k[m,n] v[m,n]`` (``inf`` for a master without workers)."""
    t: float
    """``max_m t*_m``: the approximate completion time of the system."""
    loads: np.ndarray
    """Real Theorem-1 loads ``l*[m,n] = u t*_m / (W - 1)`` where ``k > 0``, else 0."""
    info: Mapping[str, Any] = field(default_factory=dict)
    """Solver details (iterations, MILP status and bound, ...)."""

    @property
    def owner(self) -> tuple[int, ...]:
        """Per worker its master, or -1 (unassigned, or a fractional probabilistic worker)."""
        out = []
        for n in range(self.k.shape[1]):
            ms = np.flatnonzero(self.k[:, n] >= 1.0)
            out.append(int(ms[0]) if ms.size else -1)
        return tuple(out)

    @property
    def value(self) -> float:
        """The max-min objective ``min_m sum_n k[m,n] w[m,n] = 1 / t``."""
        return 0.0 if not math.isfinite(self.t) else 1.0 / self.t

    def __repr__(self) -> str:
        ts = ", ".join(f"{x:.4g}" for x in self.t_star)
        extra = f" owner={list(self.owner)}" if self.policy == "dedicated" else ""
        return f"<Assignment {self.policy}/{self.method}: t={self.t:.6g} t*=[{ts}]{extra}>"


def _make_assignment(problem: HeteroProblem, k: np.ndarray, policy: str, method: str,
                     info: Mapping[str, Any] | None = None) -> Assignment:
    k = np.asarray(k, dtype=np.float64)
    sums = (k * problem.v).sum(axis=1)
    with np.errstate(divide="ignore"):
        ts = np.where(sums > 0, problem.L / np.where(sums > 0, sums, 1.0), np.inf)
    loads = np.zeros_like(k)
    for m in range(problem.M):
        if math.isfinite(ts[m]):
            mask = k[m] > 0
            loads[m, mask] = optimal_load(problem.a[m, mask], problem.u[m, mask], ts[m])
    return Assignment(policy=policy, method=method, k=_readonly(k),
                      t_star=tuple(float(x) for x in ts), t=float(np.max(ts)),
                      loads=_readonly(loads), info=MappingProxyType(dict(info or {})))


def _owner_array(problem: HeteroProblem, owner: Sequence[int]) -> np.ndarray:
    arr = np.asarray(owner)
    if arr.shape != (problem.N,):
        raise ValueError(f"owner: needs one entry per worker (N={problem.N}), "
                         f"got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(arr == np.floor(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"owner: needs integer master indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if np.any((arr < -1) | (arr >= problem.M)):
        raise ValueError(f"owner: entries must be -1 (unassigned) or a master in [0, {problem.M}), "
                         f"got {arr.tolist()}")
    return arr


def _k_from_owner(M: int, owner: np.ndarray) -> np.ndarray:
    k = np.zeros((M, owner.size))
    used = owner >= 0
    k[owner[used], np.flatnonzero(used)] = 1.0
    return k


def assignment_from_owner(problem: HeteroProblem, owner: Sequence[int],
                          method: str = "given", info: Mapping[str, Any] | None = None
                          ) -> Assignment:
    """A dedicated :class:`Assignment` from each worker's master (-1: unassigned)."""
    arr = _owner_array(problem, owner)
    return _make_assignment(problem, _k_from_owner(problem.M, arr), "dedicated", method, info)


def assignment_from_k(problem: HeteroProblem, k: Any, method: str = "given",
                      info: Mapping[str, Any] | None = None) -> Assignment:
    """A probabilistic :class:`Assignment` from ``k[m,n] in [0, 1]``, ``sum_m k[m,n] <= 1``."""
    k = _as_float(k, "k")
    if k.shape != (problem.M, problem.N):
        raise ValueError(f"k: must have shape (M, N) = {(problem.M, problem.N)}, got {k.shape}")
    if np.any(~np.isfinite(k)) or np.any(k < 0) or np.any(k > 1):
        raise ValueError("k: probabilities must lie in [0, 1]")
    col = k.sum(axis=0)
    if np.any(col > 1 + 1e-9):
        n = int(np.argmax(col))
        raise ValueError(f"k: a worker serves at most one master in total, "
                         f"got sum_m k[m, {n}] = {col[n]:.6g} > 1")
    return _make_assignment(problem, k, "probabilistic", method, info)


def validate_assignment(problem: HeteroProblem, assignment: Assignment) -> None:
    """Raise ``ValueError`` unless ``assignment`` is valid for ``problem`` (MATH.md §3):
    shapes, ``k`` in [0,1] (0/1 for dedicated), at most one master per worker, every master
    served, and ``t*``, ``t`` and the loads consistent with Theorem 1."""
    k = assignment.k
    if k.shape != (problem.M, problem.N):
        raise ValueError(f"assignment: k has shape {k.shape}, problem needs "
                         f"{(problem.M, problem.N)}")
    if assignment.policy not in ("dedicated", "probabilistic"):
        raise ValueError(f"assignment: unknown policy {assignment.policy!r}")
    if np.any(k < 0) or np.any(k > 1):
        raise ValueError("assignment: k must lie in [0, 1]")
    if assignment.policy == "dedicated" and not np.all((k == 0) | (k == 1)):
        raise ValueError("assignment: a dedicated k must be 0/1")
    if np.any(k.sum(axis=0) > 1 + 1e-9):
        raise ValueError("assignment: some worker serves more than one master in total")
    empty = np.flatnonzero(k.sum(axis=1) <= 0)
    if empty.size:
        raise ValueError(f"assignment: master {int(empty[0])} has no worker")
    ref = _make_assignment(problem, k, assignment.policy, assignment.method)
    if not np.allclose(ref.t_star, assignment.t_star, rtol=1e-9, atol=0):
        raise ValueError("assignment: t_star does not match L_m / sum_n k v")
    if not math.isclose(ref.t, assignment.t, rel_tol=1e-9):
        raise ValueError("assignment: t must equal max_m t*_m")
    if not np.allclose(ref.loads, assignment.loads, rtol=1e-9, atol=0):
        raise ValueError("assignment: loads do not match Theorem 1 at t*_m")


# ---------------------------------------------------------------------------------------------
# Dedicated assignment: max-min allocation
# ---------------------------------------------------------------------------------------------

def _sum_values(w: np.ndarray, owner: np.ndarray) -> np.ndarray:
    V = np.zeros(w.shape[0])
    used = owner >= 0
    np.add.at(V, owner[used], w[owner[used], np.flatnonzero(used)])
    return V


def _leximin_better(new: np.ndarray, old: np.ndarray, rtol: float = 1e-12) -> bool:
    """True when the sorted sum values ``new`` beat ``old`` lexicographically (the min first)."""
    a = np.sort(new)
    b = np.sort(old)
    tol = rtol * max(float(np.max(np.abs(b))), float(np.max(np.abs(a))), _TINY)
    for x, y in zip(a, b):
        if x > y + tol:
            return True
        if x < y - tol:
            return False
    return False


def _fill_unassigned(w: np.ndarray, owner: np.ndarray, order: Sequence[int] | None = None
                     ) -> np.ndarray:
    """Give unassigned workers away greedily: the poorest master takes its best one (Alg. 2)."""
    owner = owner.copy()
    V = _sum_values(w, owner)
    free = [int(n) for n in (order if order is not None else np.flatnonzero(owner < 0))]
    while free:
        m = int(np.argmin(V))
        j = int(np.argmax(w[m, free]))
        n = free.pop(j)
        owner[n] = m
        V[m] += w[m, n]
    return owner


def best_value_assignment(problem: HeteroProblem) -> Assignment:
    """Algorithm 1's initialisation: each worker to the master where its value is highest.

    Uses the max-min item values ``w = v / L_m`` (see the module docstring).  May leave a
    master without workers (then ``t = inf``).
    """
    owner = np.argmax(problem.w, axis=0).astype(np.int64)
    return assignment_from_owner(problem, owner, method="best_value")


def simple_greedy(problem: HeteroProblem) -> Assignment:
    """Algorithm 2 of the seed (largest value first), MATH.md §3.

    Initialisation: masters in index order each take the free worker of largest value for
    them.  Main loop: the master with the smallest sum value ``V_m`` takes the free worker of
    largest value ``w[m,n]`` for it, until every worker is assigned.  ``O(N^2)``.
    """
    w = problem.w
    owner = -np.ones(problem.N, dtype=np.int64)
    free = list(range(problem.N))
    for m in range(problem.M):
        j = int(np.argmax(w[m, free]))
        owner[free.pop(j)] = m
    owner = _fill_unassigned(w, owner, order=free)
    return assignment_from_owner(problem, owner, method="simple_greedy")


def _insertion_pass(w: np.ndarray, owner: np.ndarray, V: np.ndarray) -> bool:
    """Move each worker to the poorest other master when that improves the sorted values."""
    changed = False
    M = w.shape[0]
    if M < 2:
        return False
    for n in range(owner.size):
        m1 = int(owner[n])
        if m1 < 0:
            continue
        others = np.delete(np.arange(M), m1)
        m2 = int(others[np.argmin(V[others])])
        new = V.copy()
        new[m1] -= w[m1, n]
        new[m2] += w[m2, n]
        if _leximin_better(new, V):
            owner[n] = m2
            V[:] = _sum_values(w, owner)  # recompute: no drift
            changed = True
    return changed


def _interchange_pass(w: np.ndarray, owner: np.ndarray, V: np.ndarray) -> bool:
    """Swap two workers of different masters when the sorted values improve and the total
    value grows (``w[m1,n1] + w[m2,n2] < w[m1,n2] + w[m2,n1]``), as in the seed."""
    changed = False
    N = owner.size
    for n1 in range(N):
        m1 = int(owner[n1])
        if m1 < 0:
            continue
        n2s = np.flatnonzero((owner >= 0) & (owner != m1))
        n2s = n2s[n2s > n1]
        if n2s.size == 0:
            continue
        m2s = owner[n2s]
        gain = (w[m1, n2s] + w[m2s, n1]) - (w[m1, n1] + w[m2s, n2s])
        v1 = V[m1] - w[m1, n1] + w[m1, n2s]
        v2 = V[m2s] - w[m2s, n2s] + w[m2s, n1]
        vmin = V.min()
        tol = 1e-12 * max(float(V.max()), _TINY)
        cand = np.flatnonzero((gain > tol) & (v1 >= vmin - tol) & (v2 >= vmin - tol))
        for j in cand:
            n2 = int(n2s[j])
            m2 = int(owner[n2])
            if m2 == m1 or owner[n1] != m1:
                continue
            if (w[m1, n2] + w[m2, n1]) - (w[m1, n1] + w[m2, n2]) <= tol:
                continue
            new = V.copy()
            new[m1] += w[m1, n2] - w[m1, n1]
            new[m2] += w[m2, n1] - w[m2, n2]
            if _leximin_better(new, V):
                owner[n1], owner[n2] = m2, m1
                V[:] = _sum_values(w, owner)
                changed = True
                break  # n1 moved: go on with the next n1
    return changed


def _local_search(w: np.ndarray, owner: np.ndarray, max_rounds: int = 1000) -> np.ndarray:
    """Insertion and interchange, repeated until neither changes anything (a local optimum)."""
    owner = owner.copy()
    V = _sum_values(w, owner)
    for _ in range(max_rounds):
        a = _insertion_pass(w, owner, V)
        b = _interchange_pass(w, owner, V)
        if not (a or b):
            break
    return owner


def iterated_greedy(problem: HeteroProblem, rng: Any = 0, *, max_iter: int = 200,
                    patience: int = 30, destroy_fraction: float = 0.3) -> Assignment:
    """Algorithm 1 of the seed (iterated greedy), MATH.md §3.

    Start from :func:`best_value_assignment`; then repeat (a) insertion and interchange until
    a local optimum, (b) exploration: remove ``ceil(destroy_fraction * N)`` random workers and
    give them back greedily, in random order, each to the currently poorest master.  (Giving
    the poorest master its *best* removed worker instead tends to rebuild the same local
    optimum: on small instances it found the optimum several times less often.)  A new local
    optimum replaces the current one unless it is worse.  Stops after ``max_iter`` iterations or
    ``patience`` iterations without improving the best.  Returns the best local optimum found,
    i.e. the assignment before an exploration, never the explored one.

    Comparisons use the leximin order of the sum values (the min first, ties broken by the
    next smallest): it refines the seed's "min V_m improved" and lets moves that lift one of
    several tied poorest masters count.
    """
    if max_iter < 0 or patience < 1:
        raise ValueError(f"max_iter/patience: need max_iter >= 0 and patience >= 1, "
                         f"got {max_iter}, {patience}")
    if not 0 < destroy_fraction <= 1:
        raise ValueError(f"destroy_fraction: must lie in (0, 1], got {destroy_fraction}")
    rng = np.random.default_rng(rng)
    w = problem.w / float(problem.w.max())  # scale-free comparisons
    init = best_value_assignment(problem)
    current = _local_search(w, np.asarray(init.owner, dtype=np.int64))
    best = current.copy()
    Vbest = _sum_values(w, best)
    d = max(1, math.ceil(destroy_fraction * problem.N))
    stall = 0
    it = 0
    improvements = 0
    for it in range(1, max_iter + 1):
        explored = current.copy()
        removed = rng.choice(problem.N, size=d, replace=False)
        explored[removed] = -1
        V = _sum_values(w, explored)
        for n in rng.permutation(removed):  # greedy give-back: the poorest master takes it
            m = int(np.argmin(V))
            explored[n] = m
            V[m] += w[m, n]
        candidate = _local_search(w, explored)
        Vc = _sum_values(w, candidate)
        if not _leximin_better(_sum_values(w, current), Vc):
            current = candidate
        if _leximin_better(Vc, Vbest):
            best, Vbest = candidate.copy(), Vc
            stall = 0
            improvements += 1
        else:
            stall += 1
            if stall >= patience:
                break
    info = {"iterations": it, "improvements": improvements, "init_t": init.t}
    return assignment_from_owner(problem, best, method="iterated_greedy", info=info)


def _maxmin_model(problem: HeteroProblem):
    """The max-min allocation model shared by the exact MILP and the probabilistic LP: variables
    ``k[m, n]`` (flattened) and ``z``; minimise ``-z`` s.t. ``z - sum_n k[m,n] w[m,n] <= 0``
    (all m) and ``sum_m k[m,n] <= 1`` (all n).  ``w`` is scaled by its maximum for the solver.
    Returns ``(w, scale, c, A_ub, b_ub)``."""
    M, N = problem.M, problem.N
    scale = float(problem.w.max())
    w = problem.w / scale
    nk = M * N
    c = np.zeros(nk + 1)
    c[-1] = -1.0
    A = np.zeros((M + N, nk + 1))
    for m in range(M):
        A[m, m * N:(m + 1) * N] = -w[m]
        A[m, -1] = 1.0
    for n in range(N):
        A[M + n, [m * N + n for m in range(M)]] = 1.0
    return w, scale, c, A, np.r_[np.zeros(M), np.ones(N)]


def exact_assignment(problem: HeteroProblem, *, time_limit: float | None = None,
                     mip_rel_gap: float = 1e-9) -> Assignment:
    """The dedicated optimum by MILP (``scipy.optimize.milp``, HiGHS), MATH.md §3.

    maximise ``z`` s.t. ``sum_n k[m,n] w[m,n] >= z`` (all m), ``sum_m k[m,n] <= 1`` (all n),
    ``k`` binary.  Workers the solver leaves idle are then given away greedily and the result
    polished by insertion/interchange (neither can lower the min).  With ``time_limit`` the
    result may be suboptimal: ``info["optimal"]`` and ``info["upper_bound_value"]`` say so.
    """
    M, N = problem.M, problem.N
    w, scale, c, A, b = _maxmin_model(problem)
    nk = M * N
    constraints = [optimize.LinearConstraint(A, -np.inf, b)]
    integrality = np.r_[np.ones(nk), 0.0]
    ub = np.r_[np.ones(nk), float(w.sum(axis=1).min())]
    # HiGHS's MIP presolve has returned suboptimal points marked optimal on tiny instances of
    # this model (a known class of HiGHS presolve bugs); without presolve it is correct.
    options: dict[str, Any] = {"mip_rel_gap": mip_rel_gap, "presolve": False}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    res = optimize.milp(c, integrality=integrality, bounds=optimize.Bounds(np.zeros(nk + 1), ub),
                        constraints=constraints, options=options)
    if res.x is None:
        raise RuntimeError(f"exact_assignment: MILP found no solution ({res.message})")
    k = np.rint(res.x[:nk]).reshape(M, N)
    owner = -np.ones(N, dtype=np.int64)
    for n in range(N):
        ms = np.flatnonzero(k[:, n] > 0.5)
        if ms.size:
            owner[n] = ms[0]
    owner = _local_search(w, _fill_unassigned(w, owner))
    # Safety net: never return less than the greedy heuristics find.
    greedy = np.asarray(simple_greedy(problem).owner, dtype=np.int64)
    v_milp, v_greedy = _sum_values(w, owner).min(), _sum_values(w, greedy).min()
    if v_greedy > v_milp * (1 + 1e-9):
        log.warning("exact_assignment: MILP min value %.12g below simple greedy's %.12g; "
                    "using the greedy assignment", v_milp, v_greedy)
        owner = greedy
    bound = getattr(res, "mip_dual_bound", None)
    info = {"optimal": bool(res.status == 0), "status": res.message,
            "upper_bound_value": (None if bound is None else float(-bound) * scale)}
    return assignment_from_owner(problem, owner, method="milp", info=info)


def exhaustive_assignment(problem: HeteroProblem, *, max_combinations: int = 2_000_000
                          ) -> Assignment:
    """The dedicated optimum by trying all ``M^N`` ways to give every worker a master.

    Giving an idle worker to any master never lowers the min, so using every worker loses
    nothing.  A cross-check for :func:`exact_assignment` on tiny instances.
    """
    M, N = problem.M, problem.N
    total = M**N
    if total > max_combinations:
        raise ValueError(f"problem: M^N = {M}^{N} = {total} assignments exceeds "
                         f"max_combinations={max_combinations}")
    w = problem.w / float(problem.w.max())
    powers = M ** np.arange(N, dtype=np.int64)
    best_val, best_code = -1.0, 0
    chunk = 1 << 16
    for start in range(0, total, chunk):
        codes = np.arange(start, min(total, start + chunk), dtype=np.int64)
        owners = (codes[:, None] // powers[None, :]) % M
        V = np.stack([(w[m][None, :] * (owners == m)).sum(axis=1) for m in range(M)], axis=1)
        mins = V.min(axis=1)
        j = int(np.argmax(mins))
        if mins[j] > best_val:
            best_val, best_code = float(mins[j]), int(codes[j])
    owner = (best_code // powers) % M
    return assignment_from_owner(problem, owner, method="exhaustive",
                                 info={"combinations": total})


# ---------------------------------------------------------------------------------------------
# Probabilistic assignment
# ---------------------------------------------------------------------------------------------

def probabilistic_assignment(problem: HeteroProblem) -> Assignment:
    """Probabilistic assignment by the LP of MATH.md §3 (``scipy.optimize.linprog``, HiGHS).

    maximise ``tau`` s.t. ``sum_n k[m,n] v[m,n] >= tau L_m`` (all m), ``sum_m k[m,n] <= 1``,
    ``0 <= k <= 1``; ``t = 1 / tau``.

    Why this form: the seed's problem (expectation constraint, loads relaxed to reals) is
    ``min t`` s.t. ``sum_n k[m,n] l[m,n] Pr[T_{m,n} <= t] >= L_m``.  It is non-convex jointly in
    ``(k, l, t)``, hence the published paper's successive convex approximation.  But for any
    fixed ``t`` each term is maximised over ``l`` by Theorem 1's ``l*`` whatever ``k`` is, with
    value ``v t``; so a point ``(k, l, t)`` is feasible iff ``t sum_n k v >= L_m`` for all m, and
    with ``tau = 1/t`` that is the LP above.  The LP is therefore the *global* optimum of the
    same problem (an SCA can at best match it).  Every dedicated assignment is a feasible
    ``k``, so this ``t`` is a lower bound on every dedicated ``t``.  A vertex solution has at
    most ``M - 1`` workers split between masters; all others serve one master or none.
    """
    M, N = problem.M, problem.N
    w, scale, c, A, b = _maxmin_model(problem)
    nk = M * N
    bounds = [(0.0, 1.0)] * nk + [(0.0, None)]
    res = optimize.linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"probabilistic_assignment: LP failed ({res.message})")
    k = res.x[:nk].reshape(M, N)
    k = np.where(k < 1e-9, 0.0, np.where(k > 1 - 1e-9, 1.0, k))
    col = k.sum(axis=0)
    k = np.where(col[None, :] > 1, k / np.maximum(col, 1.0)[None, :], k)
    info = {"tau_lp": float(res.x[-1]) * scale,
            "fractional_workers": int(np.sum(np.any((k > 0) & (k < 1), axis=0)))}
    return assignment_from_k(problem, k, method="lp", info=info)


# =============================================================================================
# Integer loads and the expectation-model completion time
# =============================================================================================

def integer_loads(assignment: Assignment | Any, problem: HeteroProblem,
                  t: float | None = None) -> np.ndarray:
    """Integer loads ``l[m,n]`` from the Theorem-1 loads, with ``sum_n l[m,n] >= L_m``.

    ``assignment`` is an :class:`Assignment` or a ``k`` array.  The real loads are ``l*`` at
    each master's ``t*_m`` (or at the common time ``t`` when given), rounded to the nearest
    integer; a master whose rounded code length falls short of ``L_m`` (possible only for
    small loads, or a ``t`` below ``t*_m``) gets extra rows one at a time, best worker first.

    What rounding costs: ``l*`` maximises ``E[X(t)] = l Pr[T <= t]`` and
    ``d^2 E/dl^2 = -(W - 1)^2 / (W l*)`` there, so a change ``|delta| <= 1/2`` lowers a
    worker's expected results by at most ``(W - 1) delta^2 / (2 l*^2) <= (W - 1) / (8 l*^2)``
    relative: a master's expectation-model time grows by about that much (``2.5e-5`` for
    ``W = 3``, ``l* = 100``; see :func:`approx_completion_time`).  Rounding never endangers
    decodability: ``sum_n l*[m,n] > L_m`` at ``t*_m`` because each ``Pr[T <= t] < 1``.
    """
    k = assignment.k if isinstance(assignment, Assignment) else _as_float(assignment, "k")
    if k.shape != (problem.M, problem.N):
        raise ValueError(f"k: must have shape {(problem.M, problem.N)}, got {k.shape}")
    if t is None:
        if isinstance(assignment, Assignment):
            times = np.asarray(assignment.t_star, dtype=np.float64)
        else:
            times = _make_assignment(problem, k, "probabilistic", "given").t_star
            times = np.asarray(times, dtype=np.float64)
    else:
        if not (math.isfinite(t) and t > 0):
            raise ValueError(f"t: must be positive and finite, got {float(t)!r}")
        times = np.full(problem.M, float(t))
    loads = np.zeros((problem.M, problem.N), dtype=np.int64)
    for m in range(problem.M):
        mask = k[m] > 0
        if not np.any(mask):
            raise ValueError(f"assignment: master {m} has no worker, so it cannot get "
                             f"{int(problem.L[m])} coded rows")
        if not math.isfinite(times[m]):
            raise ValueError(f"assignment: master {m} has t* = inf")
        real = optimal_load(problem.a[m], problem.u[m], times[m]) * mask
        loads[m] = np.rint(real).astype(np.int64)
        deficit = int(problem.L[m]) - int(loads[m].sum())
        if deficit > 0:
            order = np.flatnonzero(mask)[np.argsort(-(k[m] * problem.v[m])[mask], kind="stable")]
            extra = np.zeros(problem.N, dtype=np.int64)
            base, rest = divmod(deficit, order.size)
            extra[order] = base
            extra[order[:rest]] += 1
            loads[m] += extra
    return loads


def approx_completion_time(problem: HeteroProblem, k: Assignment | Any, loads: Any
                           ) -> np.ndarray:
    """Per master the smallest ``t`` with ``E[X_m(t)] = sum_n k l Pr[T <= t] >= L_m``.

    The paper's approximate completion time for given (e.g. integer) loads, MATH.md §3;
    ``inf`` when ``sum_n k l <= L_m`` (the expectation never reaches ``L_m``).
    """
    k = k.k if isinstance(k, Assignment) else _as_float(k, "k")
    loads = _as_float(loads, "loads")
    out = np.full(problem.M, np.inf)
    for m in range(problem.M):
        mask = (k[m] > 0) & (loads[m] > 0)
        km, lm, am, um = k[m, mask], loads[m, mask], problem.a[m, mask], problem.u[m, mask]
        L = float(problem.L[m])
        if np.sum(km * lm) <= L * (1 + 1e-12):
            continue

        def g(t: float) -> float:
            return float(np.sum(km * expected_results(t, lm, am, um))) - L

        hi = float(np.max(am * lm)) + 1e-12
        while g(hi) < 0:
            hi *= 2.0
        out[m] = optimize.brentq(g, 0.0, hi, xtol=1e-15, rtol=1e-13, maxiter=500)
    return out


# =============================================================================================
# The plan a runtime executes
# =============================================================================================

@dataclass(frozen=True)
class HeteroPlan:
    """What each master sends where: ``tasks[m] = ((worker, coded rows), ...)`` (MATH.md §3).

    Master ``m`` MDS-codes its ``L[m]`` rows into ``code_length(m)`` coded rows, sends the
    ``rows`` of each entry to that worker, and decodes from the first ``L[m]`` results.  For a
    probabilistic plan ``probabilities[m][i]`` is the chance that ``tasks[m][i]``'s worker
    serves ``m`` in a step (each worker draws one master, or none, per step); all 1.0 for a
    dedicated plan.
    """

    policy: str
    L: tuple[int, ...]
    n_workers: int
    tasks: tuple[tuple[tuple[int, int], ...], ...]
    probabilities: tuple[tuple[float, ...], ...]
    t_star: tuple[float, ...]
    """Per master the expectation-model completion time of these integer loads."""

    def __post_init__(self):
        if self.policy not in ("dedicated", "probabilistic"):
            raise ValueError(f"policy: must be 'dedicated' or 'probabilistic', got {self.policy!r}")
        M = len(self.L)
        if len(self.tasks) != M or len(self.probabilities) != M or len(self.t_star) != M:
            raise ValueError(f"tasks/probabilities/t_star: need one entry per master (M={M})")
        share = np.zeros(self.n_workers)
        for m, (entries, probs) in enumerate(zip(self.tasks, self.probabilities)):
            if len(entries) != len(probs):
                raise ValueError(f"probabilities[{m}]: needs one entry per task of master {m}")
            workers = [wk for wk, _ in entries]
            if len(set(workers)) != len(workers):
                raise ValueError(f"tasks[{m}]: a worker appears twice")
            for (wk, rows), p in zip(entries, probs):
                if not 0 <= wk < self.n_workers:
                    raise ValueError(f"tasks[{m}]: worker {wk} outside [0, {self.n_workers})")
                if rows < 1:
                    raise ValueError(f"tasks[{m}]: worker {wk} has {rows} rows (need >= 1)")
                if not 0 < p <= 1:
                    raise ValueError(f"probabilities[{m}]: {p} outside (0, 1]")
                if self.policy == "dedicated" and p != 1.0:
                    raise ValueError("probabilities: a dedicated plan has probability 1.0 only")
                share[wk] += p
            if self.code_length(m) < self.L[m]:
                raise ValueError(f"tasks[{m}]: {self.code_length(m)} coded rows < L[{m}] = "
                                 f"{self.L[m]}: master {m} could never decode")
        if np.any(share > 1 + 1e-9):
            raise ValueError(f"tasks: worker {int(np.argmax(share))} serves more than one master")

    @property
    def M(self) -> int:
        return len(self.L)

    def workers(self, m: int) -> tuple[int, ...]:
        return tuple(wk for wk, _ in self.tasks[m])

    def code_length(self, m: int) -> int:
        """Coded rows of master ``m`` (the MDS code is ``(code_length, L[m])``)."""
        return int(sum(rows for _, rows in self.tasks[m]))

    def __repr__(self) -> str:
        parts = []
        for m in range(self.M):
            items = []
            for (wk, rows), p in zip(self.tasks[m], self.probabilities[m]):
                items.append(f"w{wk}:{rows}" + ("" if p == 1.0 else f"@{p:.3g}"))
            parts.append(f"  master {m} (L={self.L[m]}, n={self.code_length(m)}, "
                         f"t*={self.t_star[m]:.4g}): " + ", ".join(items))
        head = f"HeteroPlan({self.policy}, M={self.M}, N={self.n_workers}"
        return head + ("\n" + "\n".join(parts) + "\n)" if parts else ")")


def make_plan(problem: HeteroProblem, assignment: Assignment, loads: Any) -> HeteroPlan:
    """The runtime's plan: per master the ``(worker, coded rows)`` with ``k > 0`` and rows > 0."""
    loads = np.asarray(loads)
    if loads.shape != (problem.M, problem.N):
        raise ValueError(f"loads: must have shape {(problem.M, problem.N)}, got {loads.shape}")
    if loads.dtype.kind not in "iu" and not np.all(loads == np.floor(loads)):
        raise ValueError("loads: must be whole numbers (see integer_loads)")
    loads = loads.astype(np.int64)
    k = assignment.k
    tasks, probs = [], []
    for m in range(problem.M):
        idx = np.flatnonzero((k[m] > 0) & (loads[m] > 0))
        tasks.append(tuple((int(n), int(loads[m, n])) for n in idx))
        probs.append(tuple(float(k[m, n]) for n in idx))
    ts = approx_completion_time(problem, k, loads)
    return HeteroPlan(policy=assignment.policy, L=tuple(int(x) for x in problem.L),
                      n_workers=problem.N, tasks=tuple(tasks), probabilities=tuple(probs),
                      t_star=tuple(float(x) for x in ts))


# =============================================================================================
# Monte Carlo
# =============================================================================================

@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Monte Carlo completion times of a plan in the model of MATH.md §3."""

    trials: int
    mean_per_master: tuple[float, ...]
    """Mean time at which master ``m`` holds ``L_m`` results (``inf`` if some trial never does)."""
    mean: float
    """Mean time at which every master can decode (the max over masters, per trial); ``inf``
    when some trial never decodes (possible for a probabilistic assignment)."""
    mean_decoded: float
    """``mean`` over the trials in which every master decodes."""
    stderr: float
    """Standard error of ``mean_decoded``."""
    t_ref: float
    p_by_t_ref: float
    """Fraction of trials in which every master decodes by ``t_ref``."""
    p_never: float
    """Fraction of trials in which some master never gets ``L_m`` results."""
    samples: np.ndarray = field(repr=False)
    """Completion time per trial and master, shape ``(trials, M)``."""


def simulate(problem: HeteroProblem, assignment: Assignment, loads: Any, trials: int = 10_000,
             rng: Any = None, *, t_ref: float | None = None) -> SimulationResult:
    """Draw the model's processing times and find when each master can decode (MATH.md §3).

    Worker ``n`` computing ``l[m,n]`` rows for master ``m`` returns them all at
    ``T = a l + Exp(rate u/l)``; master ``m`` decodes at the first time the returned rows
    reach ``L_m``.  For a probabilistic assignment each worker draws, per trial, master ``m``
    with probability ``k[m,n]`` (or none).  ``t_ref`` defaults to ``assignment.t``.
    """
    if trials < 1:
        raise ValueError(f"trials: must be >= 1, got {trials}")
    rng = np.random.default_rng(rng)
    loads = np.asarray(loads)
    if loads.shape != (problem.M, problem.N):
        raise ValueError(f"loads: must have shape {(problem.M, problem.N)}, got {loads.shape}")
    if np.any(loads < 0):
        raise ValueError("loads: must be >= 0")
    k = assignment.k
    M, N = problem.M, problem.N
    if assignment.policy == "probabilistic":
        cum = np.cumsum(k, axis=0)  # (M, N)
        draw = rng.random((trials, N))
        choice = (draw[:, None, :] >= cum[None, :, :]).sum(axis=1)  # M means "none"
    else:
        choice = None
    done = np.full((trials, M), np.inf)
    for m in range(M):
        idx = np.flatnonzero((k[m] > 0) & (loads[m] > 0))
        if idx.size == 0:
            continue
        l = loads[m, idx].astype(np.float64)
        times = sample_time(np.broadcast_to(l, (trials, idx.size)), problem.a[m, idx],
                            problem.u[m, idx], rng)
        if choice is not None:
            times = np.where(choice[:, idx] == m, times, np.inf)
        order = np.argsort(times, axis=1)
        sorted_t = np.take_along_axis(times, order, axis=1)
        cum_rows = np.cumsum(l[order], axis=1)
        enough = cum_rows >= problem.L[m]
        first = np.argmax(enough, axis=1)
        ok = enough[np.arange(trials), first]
        done[:, m] = np.where(ok, sorted_t[np.arange(trials), first], np.inf)
    overall = done.max(axis=1)
    finite = np.isfinite(overall)
    t_ref = float(assignment.t if t_ref is None else t_ref)
    stderr = (float(overall[finite].std(ddof=1) / math.sqrt(finite.sum()))
              if finite.sum() > 1 else math.nan)
    return SimulationResult(
        trials=int(trials),
        mean_per_master=tuple(float(x) for x in done.mean(axis=0)),
        mean=float(overall.mean()),
        mean_decoded=float(overall[finite].mean()) if finite.any() else math.inf,
        stderr=stderr,
        t_ref=t_ref,
        p_by_t_ref=float(np.mean(overall <= t_ref)),
        p_never=float(np.mean(~finite)),
        samples=_readonly(done),
    )


# =============================================================================================
# Baselines
# =============================================================================================

def even_split_owner(problem: HeteroProblem) -> tuple[int, ...]:
    """Workers divided evenly among masters, ignoring their speeds: worker ``n`` serves
    master ``n mod M`` (instances are random, so this is a random split)."""
    return tuple(n % problem.M for n in range(problem.N))


def uncoded_baseline(problem: HeteroProblem) -> tuple[Assignment, np.ndarray]:
    """Uncoded: even worker split, each master's ``L_m`` rows split as evenly as integers
    allow over its workers; a master waits for all of them.  Returns the assignment
    (its ``t_star`` is Theorem 1's for the split, for reference) and the integer loads."""
    asg = assignment_from_owner(problem, even_split_owner(problem), method="uncoded")
    loads = np.zeros((problem.M, problem.N), dtype=np.int64)
    for m in range(problem.M):
        idx = np.flatnonzero(asg.k[m] > 0)
        base, rest = divmod(int(problem.L[m]), idx.size)
        loads[m, idx] = base
        loads[m, idx[:rest]] += 1
    return asg, loads


def unbalanced_coded_baseline(problem: HeteroProblem, *, max_redundancy: float = 4.0,
                              grid: int = 120) -> tuple[Assignment, np.ndarray]:
    """Unbalanced coded: even worker split, MDS coding with the *same* load on every worker
    of a master, decoded from the first ``L_m`` results.

    The common load is chosen per master to minimise the expectation-model time
    (:func:`approx_completion_time`) over ``ceil(L_m/|Omega_m|) .. max_redundancy`` times that:
    the best equal-load code, so gains measured against it are conservative.
    """
    asg = assignment_from_owner(problem, even_split_owner(problem), method="unbalanced_coded")
    loads = np.zeros((problem.M, problem.N), dtype=np.int64)
    for m in range(problem.M):
        idx = np.flatnonzero(asg.k[m] > 0)
        lo = math.ceil(problem.L[m] / idx.size)
        cands = np.unique(np.rint(np.geomspace(lo, max(lo + 1, max_redundancy * lo), grid))
                          ).astype(np.int64)
        best_l, best_t = int(cands[-1]), math.inf
        for l in cands:
            trial = np.zeros((problem.M, problem.N), dtype=np.int64)
            trial[m, idx] = l
            t = approx_completion_time(problem, asg.k, trial)[m]
            if t < best_t:
                best_l, best_t = int(l), float(t)
        loads[m, idx] = best_l
    return asg, loads
