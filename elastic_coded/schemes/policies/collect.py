"""Completion rules and decoders: what the step driver feeds each result into.  Pure.

* :class:`LagrangeCollector` (USCTEC and its baselines): piece ``M_{g,f}`` decodes from ``L``
  of its ``L+S`` positions (MATH.md §1): the first ``L``, or in the reals the best-conditioned
  ``L`` in hand, waiting for more while that is worse than its ``patience``; a task re-planned
  after a crash may come back in row parts, which are joined first.
* :class:`MDSCollector` (heterogeneous masters): master ``m`` decodes from any ``L_m`` distinct
  coded rows of ``C{m}`` (MATH.md §3), systematic rows first.

Both return the decoded outputs and who decoded them, and never decode from fewer results than
the rule needs.  Results that arrive after their output decoded are kept aside (``late``, and
every coded row for MDS), so that a decode found wrong by verification can be redone from
others.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from ...algebra.mds import MDSCode
from ..wire import TaskSpec

if TYPE_CHECKING:
    import numpy.typing as npt

    from ...algebra.lagrange import LagrangeCode
    from ..plan import StepPlan

__all__ = ["LagrangeCollector", "MDSCollector", "decode_mds"]


class LagrangeCollector:
    """Results of one USCTEC step, by piece and position.

    ``patience`` (real field only): a piece whose best ``L`` results in hand decode with a
    condition above it waits for more of its results (up to all ``K``) and decodes from the
    best-conditioned ``L`` of them (:meth:`LagrangeCode.best_positions`); :meth:`settle`
    decodes the waiting pieces from what is in hand when no more can come.  ``None``: the first
    ``L`` to arrive."""

    def __init__(self, plan: StepPlan, code: LagrangeCode, patience: float | None = None
                 ) -> None:
        self.plan, self.code = plan, code
        self.patience = None if code.field.exact else patience
        self.results: dict[int, dict[int, tuple[Hashable, np.ndarray]]] = {
            pi: {} for pi in range(len(plan.pieces))}
        self.partial: dict[tuple[int, int], dict[tuple[int, ...], np.ndarray]] = {}
        self.decoded: dict[int, np.ndarray] = {}
        self.used_by: dict[int, tuple[Hashable, ...]] = {}
        self.positions: dict[int, tuple[int, ...]] = {}  # piece -> the positions it decoded from
        # piece -> {position: (machine, H)} after it decoded
        self.late: dict[int, dict[int, tuple[Hashable, np.ndarray]]] = {}
        self.waited = 0  # results taken in beyond the first L of a piece, for its conditioning
        self._identity = code.identity  # a result is its piece's output (LagrangeCode)

    @property
    def done(self) -> bool:
        return len(self.decoded) == len(self.plan.pieces)

    def needs(self, task: TaskSpec) -> bool:
        return task.piece not in self.decoded

    def add(self, machine: Hashable, task: TaskSpec, H: Any) -> bool:
        """File one result; returns whether it was useful (its piece not yet decoded)."""
        pi = task.piece
        group_rows = self.plan.groups[self.plan.pieces[pi].group].rows
        if pi in self.decoded:
            if tuple(task.rows) == tuple(group_rows) and task.position not in self.results[pi]:
                self.late.setdefault(pi, {}).setdefault(task.position, (machine, H))
            return False
        if task.position in self.results[pi]:   # a copy of a position in hand
            return False
        H = self._whole(group_rows, pi, task.position, task.rows, H)
        if H is None:  # a part of a re-planned task; the rest is still to come
            return True
        self.results[pi][task.position] = (machine, H)
        n = len(self.results[pi])
        if n >= self.plan.L:
            self.waited += n > self.plan.L
            self._decode(pi, final=n == self.code.K)
        return True

    def settle(self) -> None:
        """Decode every waiting piece (``L`` or more results) from the best of what it has."""
        for pi, got in self.results.items():
            if pi not in self.decoded and len(got) >= self.plan.L:
                self._decode(pi, final=True)

    def _decode(self, pi: int, final: bool) -> None:
        got = self.results[pi]
        if self._identity:
            p = next(iter(got))
            self.decoded[pi] = np.asarray(got[p][1])[None]
            self.used_by[pi], self.positions[pi] = (got[p][0],), (p,)
            return
        if self.patience is None:
            use = tuple(got)[:self.plan.L]
        else:
            if len(got) == self.plan.L:  # nothing to choose: the (cached) condition
                use = tuple(sorted(got))
                kappa = self.code.decode_condition(use)
            else:
                kappa, use = self.code.best_positions(got, start=self.positions.get(pi))
            self.positions[pi] = use
            if kappa > self.patience and not final:
                return  # wait for more of this piece's results
        self.decoded[pi] = self.code.decode({p: got[p][1] for p in use})
        self.used_by[pi] = tuple(got[p][0] for p in use)
        self.positions[pi] = tuple(use)

    def _whole(self, group_rows: tuple[int, int], piece: int, pos: int, rows: tuple[int, int],
               H: Any) -> Any:
        """``H`` for the task's whole group, or ``None`` while parts of it are missing."""
        if tuple(rows) == tuple(group_rows):
            return H
        parts = self.partial.setdefault((piece, pos), {})
        parts[tuple(rows)] = H
        at = group_rows[0]
        for a, b in sorted(parts):
            if a > at:
                return None
            at = max(at, b)
        if at < group_rows[1]:
            return None
        return np.concatenate([parts[sp] for sp in sorted(parts)], axis=0)


@overload
def decode_mds(code: MDSCode, got: Mapping[int, tuple[Hashable, Any]],
               rows: Literal[False] = False) -> tuple[np.ndarray, tuple[Hashable, ...]]: ...
@overload
def decode_mds(code: MDSCode, got: Mapping[int, tuple[Hashable, Any]], rows: Literal[True]
               ) -> tuple[np.ndarray, tuple[Hashable, ...], tuple[int, ...]]: ...
@overload
def decode_mds(code: MDSCode, got: Mapping[int, tuple[Hashable, Any]], rows: bool = False
               ) -> tuple[np.ndarray, tuple[Hashable, ...]] | tuple[
                   np.ndarray, tuple[Hashable, ...], tuple[int, ...]]: ...
def decode_mds(code: MDSCode, got: Mapping[int, tuple[Hashable, Any]], rows: bool = False
               ) -> tuple[np.ndarray, tuple[Hashable, ...]] | tuple[
                   np.ndarray, tuple[Hashable, ...], tuple[int, ...]]:
    """``A_m x_m`` from coded rows ``got = {index: (machine, value row)}`` (at least ``k``),
    systematic rows first (:meth:`~elastic_coded.algebra.mds.MDSCode.decode_any`).  Returns the
    data and the machines whose rows were used (and, with ``rows``, the coded rows used)."""
    idx = sorted(got)
    vals = np.stack([np.asarray(got[i][1]) for i in idx])
    data, used = code.decode_any(idx, vals)
    machines = tuple(sorted({got[idx[j]][0] for j in used}, key=str))
    return (data, machines, tuple(idx[j] for j in used)) if rows else (data, machines)


class MDSCollector:
    """Results of one heterogeneous-masters step, by master and coded row."""

    def __init__(self, L: tuple[int, ...], codes: tuple[MDSCode, ...]) -> None:
        self.L, self.codes = L, codes
        # master -> {coded row: (machine, value row)}
        self.rows: list[dict[int, tuple[Hashable, np.ndarray]]] = [{} for _ in L]
        self.decoded: dict[int, np.ndarray] = {}
        self.used_by: dict[int, tuple[Hashable, ...]] = {}
        self.used_rows: dict[int, tuple[int, ...]] = {}  # master -> the coded rows its decode used

    @property
    def done(self) -> bool:
        return len(self.decoded) == len(self.L)

    def needs(self, task: TaskSpec) -> bool:
        return task.piece not in self.decoded

    def have(self, m: int) -> set[int]:
        return set(self.rows[m])

    def add(self, machine: Hashable, task: TaskSpec, H: npt.ArrayLike) -> bool:
        m = task.piece
        got = self.rows[m]
        for i, row in enumerate(np.asarray(H)):
            got.setdefault(task.rows[0] + i, (machine, row))
        if m in self.decoded:
            return False
        if len(got) >= self.L[m]:
            self.decoded[m], self.used_by[m], self.used_rows[m] = decode_mds(
                self.codes[m], got, rows=True)
        return True
