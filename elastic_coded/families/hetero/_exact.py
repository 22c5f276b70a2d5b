"""Optimal assignments (MATH.md §3): the dedicated optimum by MILP or by trying every
assignment, and the probabilistic assignment by LP; the MILP and the LP share one max-min
model."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from scipy import optimize

from ...errors import ArgumentError, InternalError
from ._assignment import Assignment, assignment_from_k, assignment_from_owner
from ._greedy import _fill_unassigned, _local_search, _sum_values, simple_greedy
from ._problem import HeteroProblem

log = logging.getLogger(__name__)


def _maxmin_model(problem: HeteroProblem
                  ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
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
        raise InternalError(f"exact_assignment: MILP found no solution ({res.message})")
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
        raise ArgumentError(f"problem: M^N = {M}^{N} = {total} assignments exceeds "
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
        raise InternalError(f"probabilistic_assignment: LP failed ({res.message})")
    k = res.x[:nk].reshape(M, N)
    k = np.where(k < 1e-9, 0.0, np.where(k > 1 - 1e-9, 1.0, k))
    col = k.sum(axis=0)
    k = np.where(col[None, :] > 1, k / np.maximum(col, 1.0)[None, :], k)
    info = {"tau_lp": float(res.x[-1]) * scale,
            "fractional_workers": int(np.sum(np.any((k > 0) & (k < 1), axis=0)))}
    return assignment_from_k(problem, k, method="lp", info=info)
