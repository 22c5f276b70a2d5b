"""Worker assignments (MATH.md §3): which workers serve which master, dedicated (0/1) or
probabilistic, with their Theorem-1 times and loads, and the check of an assignment."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError
from ._model import _as_float, optimal_load
from ._problem import HeteroProblem, _readonly


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


def _owner_array(problem: HeteroProblem, owner: Sequence[int] | np.ndarray) -> np.ndarray:
    arr = np.asarray(owner)
    if arr.shape != (problem.N,):
        raise ArgumentError(f"owner: needs one entry per worker (N={problem.N}), "
                            f"got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(arr == np.floor(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ArgumentTypeError(f"owner: needs integer master indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if np.any((arr < -1) | (arr >= problem.M)):
        raise ArgumentError(f"owner: entries must be -1 (unassigned) or a master in [0, "
                            f"{problem.M}), got {arr.tolist()}")
    return arr


def _k_from_owner(M: int, owner: np.ndarray) -> np.ndarray:
    k = np.zeros((M, owner.size))
    used = owner >= 0
    k[owner[used], np.flatnonzero(used)] = 1.0
    return k


def assignment_from_owner(problem: HeteroProblem, owner: Sequence[int] | np.ndarray,
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
        raise ArgumentError(f"k: must have shape (M, N) = {(problem.M, problem.N)}, got {k.shape}")
    if np.any(~np.isfinite(k)) or np.any(k < 0) or np.any(k > 1):
        raise ArgumentError("k: probabilities must lie in [0, 1]")
    col = k.sum(axis=0)
    if np.any(col > 1 + 1e-9):
        n = int(np.argmax(col))
        raise ArgumentError(f"k: a worker serves at most one master in total, "
                            f"got sum_m k[m, {n}] = {col[n]:.6g} > 1")
    return _make_assignment(problem, k, "probabilistic", method, info)


def validate_assignment(problem: HeteroProblem, assignment: Assignment) -> None:
    """Raise ``ValueError`` unless ``assignment`` is valid for ``problem`` (MATH.md §3):
    shapes, ``k`` in [0,1] (0/1 for dedicated), at most one master per worker, every master
    served, and ``t*``, ``t`` and the loads consistent with Theorem 1."""
    k = assignment.k
    if k.shape != (problem.M, problem.N):
        raise ArgumentError(f"assignment: k has shape {k.shape}, problem needs "
                            f"{(problem.M, problem.N)}")
    if assignment.policy not in ("dedicated", "probabilistic"):
        raise ArgumentError(f"assignment: unknown policy {assignment.policy!r}")
    if np.any(k < 0) or np.any(k > 1):
        raise ArgumentError("assignment: k must lie in [0, 1]")
    if assignment.policy == "dedicated" and not np.all((k == 0) | (k == 1)):
        raise ArgumentError("assignment: a dedicated k must be 0/1")
    if np.any(k.sum(axis=0) > 1 + 1e-9):
        raise ArgumentError("assignment: some worker serves more than one master in total")
    empty = np.flatnonzero(k.sum(axis=1) <= 0)
    if empty.size:
        raise ArgumentError(f"assignment: master {int(empty[0])} has no worker")
    ref = _make_assignment(problem, k, assignment.policy, assignment.method)
    if not np.allclose(ref.t_star, assignment.t_star, rtol=1e-9, atol=0):
        raise ArgumentError("assignment: t_star does not match L_m / sum_n k v")
    if not math.isclose(ref.t, assignment.t, rel_tol=1e-9):
        raise ArgumentError("assignment: t must equal max_m t*_m")
    if not np.allclose(ref.loads, assignment.loads, rtol=1e-9, atol=0):
        raise ArgumentError("assignment: loads do not match Theorem 1 at t*_m")
