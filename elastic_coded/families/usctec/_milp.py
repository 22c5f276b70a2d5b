"""The integer optimum of a step by a MILP: a yardstick for :func:`plan_step`'s ``c_int`` that
shares nothing with it (no atoms, no flows, no rounding), for tests and benchmarks on small
instances."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from ...schemes.plan import Placement, PlanError
from ._checks import check_code, check_speeds

__all__ = ["integer_optimum"]


def integer_optimum(placement: Placement, available: Iterable[Hashable], speeds: npt.ArrayLike,
                    L: int, S: int,
                    time_limit: float = 60.0) -> float:
    """The best computation time of any plan with whole-column pieces (MATH.md §1 units).

    A plan gives every row ``K = L+S`` distinct available machines storing it, so up to the
    order of its rows it is the integer counts ``y[b, n]``: rows of block ``b`` computed by its
    available holder ``n``; conversely any counts with ``sum_n y[b, n] = K |b|`` and
    ``0 <= y[b, n] <= |b|`` are a plan (lay each block's counts along ``K`` passes over its
    rows).  Machine ``n`` computes ``sum_b y[b, n]`` rows and finishes at that over ``q s[n]``:

        min T  s.t.  sum_n y[b, n] = K |b|,  0 <= y[b, n] <= |b|,  sum_b y[b, n] <= T q s[n],
                     y integer

    over the blocks as the placement lists them, solved by HiGHS to a relative gap of 1e-9.
    """
    L, S = check_code(L, S)
    K = L + S
    avail = tuple(available)
    s = check_speeds(speeds, len(avail))
    q = placement.num_rows
    idx = {m: i for i, m in enumerate(avail)}
    pairs = [(bi, idx[m]) for bi, b in enumerate(placement.blocks) for m in b.holders if m in idx]
    var_b = np.array([p[0] for p in pairs], dtype=np.int64)
    var_m = np.array([p[1] for p in pairs], dtype=np.int64)
    nv, nb, nm = var_b.size, len(placement.blocks), len(avail)
    sizes = np.array([b.size for b in placement.blocks], dtype=float)
    A_eq = sparse.csr_matrix((np.ones(nv), (var_b, np.arange(nv))), shape=(nb, nv + 1))
    A_ub = sparse.csr_matrix(
        (np.r_[np.ones(nv), -q * s], (np.r_[var_m, np.arange(nm)], np.r_[np.arange(nv),
                                                                        np.full(nm, nv)])),
        shape=(nm, nv + 1))
    cost = np.zeros(nv + 1)
    cost[-1] = 1.0
    res = milp(cost, constraints=[LinearConstraint(A_eq, K * sizes, K * sizes),
                                  LinearConstraint(A_ub, -np.inf, 0.0)],
               integrality=np.r_[np.ones(nv), 0.0],
               bounds=Bounds(np.zeros(nv + 1), np.r_[sizes[var_b], np.inf]),
               options={"mip_rel_gap": 1e-9, "time_limit": float(time_limit)})
    if res.status != 0 or res.x is None:
        raise PlanError(f"integer optimum: the MILP did not finish ({res.message})")
    return float(res.fun)
