"""Storage placements (MATH.md §1): cyclic, filled, and designed for random speeds; the expected
computation time they give."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

from ...errors import BudgetError
from ...schemes.plan import Placement, RowBlock
from ._checks import _check_budgets, _check_rows, _machines, _placement_args, check_code
from ._fractional import _mean_c
from ._layout import _cum_round, _merge_blocks, _sorted_holders
from ._load import fill, optimal_load
from ._speed_model import SpeedModel, _speed_samples

__all__ = ["cyclic_placement", "filled_placement", "design_placement", "expected_time"]


def cyclic_placement(num_rows: int, machines: int | Iterable[Hashable], L: int, S: int,
                     budgets: npt.ArrayLike | None = None) -> Placement:
    """Cyclic placement of coded elastic computing (Yang et al., MATH.md §1): rows split into
    ``N`` near-equal sets, set ``i`` on machines ``i, ..., i+K-1 (mod N)``.  Each machine stores
    about ``K/N`` of the rows; ``budgets`` (default: exactly what each machine stores) must allow
    that."""
    L, S, num_rows, ms = _placement_args(num_rows, machines, L, S)
    K, N = L + S, len(ms)
    sizes = np.array(_cum_round(num_rows, [1.0] * N))
    # machine i stores the sets i-K+1 .. i (mod N)
    need = cast(np.ndarray, sum(np.roll(sizes, j) for j in range(K)))  # K >= 1: an array
    if budgets is None:
        e = need / num_rows
    else:
        e = _check_budgets(budgets, N, K, num_rows)
    over = np.flatnonzero(need > np.floor(e * num_rows + 1e-9))
    if over.size:
        i = int(over[0])
        raise BudgetError(
            f"budgets: cyclic placement stores {need[i]} of {num_rows} rows on machine {ms[i]!r}, "
            f"above its budget e = {e[i]:.6g}; cyclic needs e[n] >= (L+S)/N = {K / N:.6g}")
    blocks, start = [], 0
    for i, size in enumerate(sizes.tolist()):
        blocks.append(RowBlock(start, start + size,
                               _sorted_holders(ms[(i + j) % N] for j in range(K))))
        start += size
    return Placement(num_rows, ms, tuple(float(x) for x in e), _merge_blocks(blocks))


def filled_placement(num_rows: int, machines: int | Iterable[Hashable], shares: npt.ArrayLike,
                     R: int, budgets: npt.ArrayLike) -> Placement:
    """A placement storing ``shares[n]`` of the rows on machine ``n``, every row on exactly ``R``
    machines: the filling of ``shares`` (which must sum to ``R``) turned into row blocks."""
    num_rows = _check_rows(num_rows)
    ms = _machines(machines, None)
    e = np.asarray(budgets, dtype=np.float64)
    groups = fill(shares, R)
    sizes = _cum_round(num_rows, [g for g, _ in groups])
    blocks, start = [], 0
    for (_gamma, U), size in zip(groups, sizes):
        blocks.append(RowBlock(start, start + size, _sorted_holders(ms[i] for i in U)))
        start += size
    pl = Placement(num_rows, ms, tuple(float(x) for x in e), _merge_blocks(blocks))
    stored = pl.rows_by_machine()
    for i, m in enumerate(ms):
        if stored.get(m, 0) > math.floor(e[i] * num_rows + 1e-9):
            raise BudgetError(f"budgets: machine {m!r} would store {stored[m]} rows, "
                             f"above its budget e = {e[i]:.6g}")
    return pl


def _filled_candidates(num_rows: int, ms: tuple[Hashable, ...], e: npt.NDArray[np.float64],
                       mean_speed: np.ndarray, K: int, mixes: Sequence[float],
                       max_extra_replication: int) -> list[Placement]:
    """The filled placements :func:`design_placement` scores: replication ``R`` and mix ``lam``."""
    N = len(ms)
    caps = np.floor(e * num_rows + 1e-9) / num_rows
    out: list[Placement] = []
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
                    out.append(filled_placement(num_rows, ms, shares, R, e))
                    break
                except ValueError:
                    continue
    return out


def _wrapped(num_rows: int, ms: tuple[Hashable, ...], e: npt.NDArray[np.float64],
             K: int) -> list[Placement]:
    """Every row on ``K`` machines within the budgets in whole rows, whenever they hold ``K``
    copies (``[]`` when not): McNaughton's wrap-around rule.  The machines' whole-row budgets
    (at most ``num_rows`` each, the last ones cut so they sum to ``K * num_rows``) are laid end
    to end on ``K * num_rows`` slots, and row ``r`` is held by the owners of slots ``r``,
    ``r + num_rows``, ...; a run of at most ``num_rows`` slots holds a row once at most."""
    left, runs = K * num_rows, []   # (first slot, slots) of each machine
    for i, cap in enumerate(np.minimum(np.floor(e * num_rows + 1e-9), num_rows).astype(int)):
        take = min(int(cap), left)
        runs.append((K * num_rows - left, take, i))
        left -= take
    if left:
        return []
    starts = [a for a, _, _ in runs]
    owner = [i for _, _, i in runs]
    cuts = sorted({0, num_rows} | {a % num_rows for a, c, _ in runs if c}
                  | {(a + c) % num_rows for a, c, _ in runs if c})
    blocks = []
    for a, b in zip(cuts, cuts[1:]):
        holders = [ms[owner[int(np.searchsorted(starts, a + j * num_rows, "right")) - 1]]
                   for j in range(K)]
        blocks.append(RowBlock(a, b, _sorted_holders(holders)))
    return [Placement(num_rows, ms, tuple(float(x) for x in e), _merge_blocks(blocks))]


def design_placement(num_rows: int, machines: int | Iterable[Hashable], budgets: npt.ArrayLike,
                     speed_model: SpeedModel | npt.ArrayLike, L: int, S: int,
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
    candidates: list[Placement] = []
    try:
        candidates.append(cyclic_placement(num_rows, ms, L, S, budgets=e))
    except ValueError:
        pass
    candidates += _filled_candidates(num_rows, ms, e, draws.mean(axis=0), K, mixes,
                                     max_extra_replication)
    if not candidates:   # budgets too tight for the fillings' rounding: whole rows, wrapped
        candidates += _wrapped(num_rows, ms, e, K)
    if not candidates:
        raise BudgetError("budgets: no placement fits these budgets")
    scores = [_mean_c(p, draws, L, S) for p in candidates]
    return candidates[int(np.argmin(scores))]


def expected_time(placement: Placement, speed_model: SpeedModel | npt.ArrayLike, L: int, S: int,
                  samples: int = 200, seed: int = 0) -> float:
    """Monte Carlo estimate of ``E_s[c]`` with every machine of the placement available and the
    per-step optimum for each speed realisation (MATH.md §1, expected computation time)."""
    L, S = check_code(L, S)
    draws = _speed_samples(speed_model, len(placement.machines), samples, seed)
    return _mean_c(placement, draws, L, S)
