"""Monte Carlo of a plan in the model of MATH.md §3, and the baselines it is measured
against: uncoded, and unbalanced (equal-load) coded."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ArgumentError
from ._assignment import Assignment, assignment_from_owner
from ._model import sample_time
from ._plan import approx_completion_time
from ._problem import HeteroProblem, _readonly


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
        raise ArgumentError(f"trials: must be >= 1, got {trials}")
    rng = np.random.default_rng(rng)
    loads = np.asarray(loads)
    if loads.shape != (problem.M, problem.N):
        raise ArgumentError(f"loads: must have shape {(problem.M, problem.N)}, got {loads.shape}")
    if np.any(loads < 0):
        raise ArgumentError("loads: must be >= 0")
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
