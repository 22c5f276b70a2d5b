"""What a runtime executes (MATH.md §3): integer loads from the Theorem-1 loads, their
expectation-model completion time, and the plan of ``(worker, coded rows)`` per master."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize

from ...errors import ArgumentError
from ._assignment import Assignment, _make_assignment
from ._model import _as_float, expected_results, optimal_load
from ._problem import HeteroProblem


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
        raise ArgumentError(f"k: must have shape {(problem.M, problem.N)}, got {k.shape}")
    if t is None:
        if isinstance(assignment, Assignment):
            times = np.asarray(assignment.t_star, dtype=np.float64)
        else:
            t_star = _make_assignment(problem, k, "probabilistic", "given").t_star
            times = np.asarray(t_star, dtype=np.float64)
    else:
        if not (math.isfinite(t) and t > 0):
            raise ArgumentError(f"t: must be positive and finite, got {float(t)!r}")
        times = np.full(problem.M, float(t))
    loads = np.zeros((problem.M, problem.N), dtype=np.int64)
    for m in range(problem.M):
        mask = k[m] > 0
        if not np.any(mask):
            raise ArgumentError(f"assignment: master {m} has no worker, so it cannot get "
                                f"{int(problem.L[m])} coded rows")
        if not math.isfinite(times[m]):
            raise ArgumentError(f"assignment: master {m} has t* = inf")
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

        def g(t: float, *, km: np.ndarray = km, lm: np.ndarray = lm, am: np.ndarray = am,
              um: np.ndarray = um, L: float = L) -> float:  # this master's arrays
            return float(np.sum(km * expected_results(t, lm, am, um))) - L

        hi = float(np.max(am * lm)) + 1e-12
        while g(hi) < 0:
            hi *= 2.0
        out[m] = optimize.brentq(g, 0.0, hi, xtol=1e-15, rtol=1e-13, maxiter=500)
    return out


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

    def __post_init__(self) -> None:
        if self.policy not in ("dedicated", "probabilistic"):
            raise ArgumentError(f"policy: must be 'dedicated' or 'probabilistic', got "
                                f"{self.policy!r}")
        M = len(self.L)
        if len(self.tasks) != M or len(self.probabilities) != M or len(self.t_star) != M:
            raise ArgumentError(f"tasks/probabilities/t_star: need one entry per master (M={M})")
        share = np.zeros(self.n_workers)
        for m, (entries, probs) in enumerate(zip(self.tasks, self.probabilities)):
            if len(entries) != len(probs):
                raise ArgumentError(f"probabilities[{m}]: needs one entry per task of master {m}")
            workers = [wk for wk, _ in entries]
            if len(set(workers)) != len(workers):
                raise ArgumentError(f"tasks[{m}]: a worker appears twice")
            for (wk, rows), p in zip(entries, probs):
                if not 0 <= wk < self.n_workers:
                    raise ArgumentError(f"tasks[{m}]: worker {wk} outside [0, {self.n_workers})")
                if rows < 1:
                    raise ArgumentError(f"tasks[{m}]: worker {wk} has {rows} rows (need >= 1)")
                if not 0 < p <= 1:
                    raise ArgumentError(f"probabilities[{m}]: {p} outside (0, 1]")
                if self.policy == "dedicated" and p != 1.0:
                    raise ArgumentError("probabilities: a dedicated plan has probability 1.0 only")
                share[wk] += p
            if self.code_length(m) < self.L[m]:
                raise ArgumentError(f"tasks[{m}]: {self.code_length(m)} coded rows < L[{m}] = "
                                    f"{self.L[m]}: master {m} could never decode")
        if np.any(share > 1 + 1e-9):
            raise ArgumentError(f"tasks: worker {int(np.argmax(share))} serves more than "
                                "one master")

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
        raise ArgumentError(f"loads: must have shape {(problem.M, problem.N)}, got {loads.shape}")
    if loads.dtype.kind not in "iu" and not np.all(loads == np.floor(loads)):
        raise ArgumentError("loads: must be whole numbers (see integer_loads)")
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
