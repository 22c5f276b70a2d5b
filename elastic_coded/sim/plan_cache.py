"""Plans kept across the simulator's steps: :class:`PlanCache`.  Pure."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, overload

import numpy as np

from ..errors import ArgumentError
from ..schemes.plan import StepPlan
from .executor import _Compiled

__all__ = ["PlanCache"]

_P = TypeVar("_P")   # a plan
_C = TypeVar("_C")   # a plan compiled


class PlanCache:
    """Plans kept across steps so the simulator solves the per-step LP only when something
    changed.

    Key: ``(policy, placement kind, placement version, membership)``; the placement version
    changes whenever storage is repaired or extended, i.e. on every membership change.  Under a
    key, a plan for speed estimates ``s0`` is reused for estimates ``s`` while every machine's
    estimate is within a factor ``1 + tol`` of the one planned for
    (``max |log(s / s0)| <= log(1 + tol)``).  Then the reused plan's ``c`` under ``s`` is within
    ``(1 + tol)^2`` of the optimum for ``s`` (each factor ``1 + tol`` bounds how much the plan's
    time and the optimum can move).  Speed-blind policies (``Policy.speed_blind`` in the registry)
    are keyed without estimates.  Checking against the planned-for vector rather than a fixed
    grid means a small move across a grid line never forces a re-solve and the bound holds from
    the vector actually used.
    At most ``max_entries`` plans are kept (least recently used dropped first).
    """

    def __init__(self, tol: float = 0.05, max_entries: int = 32) -> None:
        if not (isinstance(tol, (int, float)) and tol >= 0 and math.isfinite(tol)):
            raise ArgumentError(f"tol: a finite relative tolerance >= 0, got {tol!r}")
        if not (isinstance(max_entries, int) and max_entries >= 1):
            raise ArgumentError(f"max_entries: an int >= 1, got {max_entries!r}")
        self.tol = float(tol)
        self._log_tol = math.log1p(self.tol)
        self.max_entries = max_entries
        # (key, serial) -> (estimates or None, compiled: any compile_fn's)
        self._store: OrderedDict[tuple[Hashable, int], tuple[np.ndarray | None, Any]] = \
            OrderedDict()
        self._serial = 0
        self.hits = 0
        self.misses = 0
        self.seconds = 0.0

    @overload
    def get(self, key: Hashable, estimates: np.ndarray | None, build: Callable[[], StepPlan],
            compile_fn: None = None) -> tuple[_Compiled, bool, float]: ...

    @overload
    def get(self, key: Hashable, estimates: np.ndarray | None, build: Callable[[], _P],
            compile_fn: Callable[[_P], _C]) -> tuple[_C, bool, float]: ...

    def get(self, key: Hashable, estimates: np.ndarray | None, build: Callable[[], Any],
            compile_fn: Callable[[Any], Any] | None = None) -> tuple[Any, bool, float]:
        """``(compiled plan, hit, planning seconds)``; ``compile_fn`` compiles a new plan
        (default :class:`_Compiled`; a pull plan has its own)."""
        for k, (e, comp) in self._store.items():
            if k[0] != key:
                continue
            if estimates is None or e is None or (
                    e.shape == estimates.shape
                    and float(np.max(np.abs(np.log(estimates / e)), initial=0.0)) <= self._log_tol):
                self._store.move_to_end(k)
                self.hits += 1
                return comp, True, 0.0
        t0 = time.perf_counter()
        plan = build()
        secs = time.perf_counter() - t0
        comp = (compile_fn or _Compiled)(plan)
        self._serial += 1
        self._store[(key, self._serial)] = (None if estimates is None else estimates.copy(), comp)
        while len(self._store) > self.max_entries:
            self._store.popitem(last=False)
        self.misses += 1
        self.seconds += secs
        return comp, False, secs

    def __len__(self) -> int:
        return len(self._store)

    def __repr__(self) -> str:
        return (f"PlanCache(tol={self.tol}, {len(self)} plans, {self.hits} hits, "
                f"{self.misses} misses)")
