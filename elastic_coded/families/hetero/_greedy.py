"""Dedicated assignment by the seed's greedy heuristics (MATH.md §3): the best-value start,
Algorithm 2 (simple greedy) and Algorithm 1 (iterated greedy with insertion, interchange and
exploration), on the max-min item values ``w = v / L_m``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ArgumentError
from ._assignment import Assignment, assignment_from_owner
from ._problem import HeteroProblem

_TINY = np.finfo(np.float64).tiny


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

    Uses the max-min item values ``w = v / L_m`` (see :mod:`elastic_coded.families.hetero`).  May
    leave a master without workers (then ``t = inf``).
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
        raise ArgumentError(f"max_iter/patience: need max_iter >= 0 and patience >= 1, "
                            f"got {max_iter}, {patience}")
    if not 0 < destroy_fraction <= 1:
        raise ArgumentError(f"destroy_fraction: must lie in (0, 1], got {destroy_fraction}")
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
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is read after the loop)
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
