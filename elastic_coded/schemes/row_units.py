"""Planning a sparse ``A`` in nonzeros: the USCTEC family over *row units* of equal work.

A plan of the USCTEC family splits rows: its loads ``theta``, its time ``c``, its integer
layout and ``dynamic``'s chunks all count rows.  For a sparse ``A`` the work of a row is its
nonzeros, so the planner is given units instead: consecutive runs of rows holding about the
same nonzeros (cut at the nonzero quantiles, :func:`row_units`), and plans, places and repairs
them exactly as it would rows.  :class:`UnitsFamily` wraps the family and translates what
leaves it (placements, plans, the rows to send or keep) back to rows of ``A``, so the runtime
never sees a unit.  Storage budgets are then fractions of the nonzeros, which is what a
machine's memory holds.

Every unit holds at least one row (the cuts strictly increase), so a unit range and its rows
correspond one to one and nothing planned is ever empty.  A row heavier than a unit stays
whole: its unit is heavier than the others, and the planner counts it as one (the runtime's
row order, :func:`~elastic_coded.algebra.sparse.balanced_order`, keeps such rows apart).
Pure: no Ray.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from ..errors import PlanError
from .plan import Group, Placement, RowBlock, StepPlan

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..families.usctec.pull import PullPlan
    from ..machines import MachineSpec
    from .wire import StepRequest

    # .families imports this module (and the import-cycle test counts type-only imports), so
    # its Change and Present are Any here
    class _Inner(Protocol):
        """The family :class:`UnitsFamily` wraps (a ``UsctecFamily``), as it is used here."""

        name: str
        has_LS: bool
        L: int
        S: int

        @property
        def storage(self) -> Placement | None: ...
        def sources(self) -> tuple[str, ...]: ...
        def start(self, specs: list[MachineSpec]) -> Any: ...
        def join(self, spec: MachineSpec) -> Any: ...
        def forget(self, machine: str) -> None: ...
        def repair(self, present: Any, S: int, n_cols: int | None = None) -> Any: ...
        def rescue(self, m: int, need: int, exclude: set[Hashable], machines: list[Hashable]
                   ) -> Any: ...
        def plan(self, policy: str, present: Any, S: int, request: StepRequest) -> object: ...
        def restore(self, state: Placement | None) -> None: ...
        def members(self) -> tuple[Hashable, ...]: ...
        def state_key(self) -> object: ...

__all__ = ["RowUnits", "row_units", "unit_count", "UnitsFamily", "MIN_UNITS", "ROWS_PER_UNIT",
           "HEAVY_SHARE", "MIN_CUTS", "COUNT_MULTIPLE"]

MIN_UNITS = 16
"""Fewer units than this and the matrix is planned by its rows."""
MIN_CUTS = 64
"""The fewest quantiles cut (where the rows allow): granularity for the planner when a few
heavy rows would make units coarse."""
ROWS_PER_UNIT = 2
"""Rows per unit on average at most: the slack that lets the cuts follow the nonzeros (a unit
per row would leave no choice)."""
COUNT_MULTIPLE = 240
"""The count of units is rounded up to a multiple of this (:func:`row_units`)."""
HEAVY_SHARE = 0.001
"""The share of the heaviest rows a unit may be lighter than (:func:`unit_count`)."""


@dataclass(frozen=True, eq=False)
class RowUnits:
    """Units ``0..n-1`` of the rows of ``A``: unit ``u`` is rows ``edges[u]:edges[u+1]``
    (``edges`` strictly increasing from 0 to the rows of ``A``)."""

    edges: np.ndarray

    @property
    def num_units(self) -> int:
        return int(self.edges.size - 1)

    @property
    def num_rows(self) -> int:
        return int(self.edges[-1])

    def rows(self, a: int, b: int) -> tuple[int, int]:
        """The rows of units ``a:b``."""
        return int(self.edges[a]), int(self.edges[b])

    def unit(self, row: int) -> int:
        """The unit starting at row ``row`` (a unit edge: a :class:`PlanError` otherwise)."""
        u = int(np.searchsorted(self.edges, row))
        if u > self.num_units or self.edges[u] != row:
            raise PlanError(f"row units: row {row} is not where a unit starts")
        return u


def unit_count(nnz: np.ndarray) -> int:
    """How many units for rows of ``nnz`` nonzeros: a unit as heavy as all but the heaviest
    :data:`HEAVY_SHARE` of the rows (so units weigh about the same), at most ``rows /
    ROWS_PER_UNIT`` units and at least :data:`MIN_CUTS`."""
    total, most = int(nnz.sum()), nnz.size // ROWS_PER_UNIT
    step = max(total / most, float(np.quantile(nnz, 1.0 - HEAVY_SHARE, method="lower")))
    return int(min(most, max(MIN_CUTS, total // max(step, 1.0))))


def row_units(prefix: npt.ArrayLike) -> RowUnits | None:
    """Units of about equal nonzeros for rows whose nonzeros before row ``i`` are
    ``prefix[i]`` (a CSR ``indptr``): :func:`unit_count` nonzero quantiles, each cut at
    the row edge nearest it, cuts falling on the same edge merged (a row heavier than a unit
    is a unit of its own, heavier than the others).  ``None`` where fewer than
    :data:`MIN_UNITS` units would be left, or ``A`` has no nonzeros: plan by rows then."""
    prefix = np.asarray(prefix, dtype=np.int64)
    q = int(prefix.size - 1)
    if q // ROWS_PER_UNIT < MIN_UNITS or prefix[-1] <= 0:
        return None
    n = unit_count(np.diff(prefix))
    target = prefix[-1] * np.arange(n + 1, dtype=np.float64) / n
    hi = np.clip(np.searchsorted(prefix, target, side="left"), 1, q)
    lo = hi - 1
    edges = np.where(target - prefix[lo] <= prefix[hi] - target, lo, hi)
    edges[0], edges[-1] = 0, q
    edges = _round_count(prefix, np.unique(edges))
    if edges.size - 1 < MIN_UNITS:
        return None
    return RowUnits(edges.astype(np.int64))


def _round_count(prefix: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``edges`` with cuts added, each splitting one of the heaviest units of several rows at
    the row edge nearest its middle nonzero, until the count of units is a multiple of
    :data:`COUNT_MULTIPLE` (of 12 below 20 times that, of 1 below 120 units, so that at most
    one unit in 20 is split): budgets of 1/2, 1/3, 1/4, 1/5 or 1/8
    are then whole numbers of units, as they are of a round number of rows, and a placement
    whose budgets add up to ``L+S`` exactly stays feasible.  Unchanged when too few units
    have several rows."""
    n = edges.size - 1
    add = (-n) % (COUNT_MULTIPLE if n >= 20 * COUNT_MULTIPLE else 12 if n >= 120 else 1)
    a, b = edges[:-1], edges[1:]
    split = np.flatnonzero(b - a >= 2)
    if add == 0 or split.size < add:
        return edges
    weight = prefix[b[split]] - prefix[a[split]]
    pick = split[np.argsort(-weight, kind="stable")[:add]]
    mid = (prefix[a[pick]] + prefix[b[pick]]) / 2.0
    cut = np.searchsorted(prefix, mid)  # the first row edge at or past the middle
    cut = np.clip(np.where(mid - prefix[cut - 1] < prefix[cut] - mid, cut - 1, cut),
                  a[pick] + 1, b[pick] - 1)
    return np.sort(np.concatenate([edges, cut]))


# -- translation: units -> rows (and back for a placement) ---------------------------------------

def placement_rows(units: RowUnits, p: Placement) -> Placement:
    blocks = tuple(RowBlock(*units.rows(b.start, b.stop), b.holders) for b in p.blocks)
    return Placement(units.num_rows, p.machines, p.budgets, blocks)


def placement_units(units: RowUnits, p: Placement) -> Placement:
    if p.num_rows != units.num_rows:
        raise PlanError(f"row units: a placement of {p.num_rows} rows, the units cover "
                        f"{units.num_rows}")
    blocks = tuple(RowBlock(units.unit(b.start), units.unit(b.stop), b.holders)
                   for b in p.blocks)
    return Placement(units.num_units, p.machines, p.budgets, blocks)


def _step_rows(units: RowUnits, plan: StepPlan | None) -> StepPlan | None:
    if plan is None:
        return None
    groups = tuple(Group(units.rows(*g.rows), g.gamma, g.machines) for g in plan.groups)
    return replace(plan, num_rows=units.num_rows, groups=groups)


def plan_rows(units: RowUnits, plan: object) -> StepPlan | PullPlan | None:
    """``plan`` (a :class:`StepPlan`, or a pull plan holding some) over rows of ``A``."""
    from ..families.usctec.pull import PullPlan

    if isinstance(plan, StepPlan):
        return _step_rows(units, plan)
    if isinstance(plan, PullPlan):
        return replace(plan, base=_step_rows(units, plan.base),
                       eager=_step_rows(units, plan.eager), lean=_step_rows(units, plan.lean))
    raise PlanError(f"row units: a sparse A is planned in nonzeros, and plans of type "
                    f"{type(plan).__name__} cannot be translated to rows; use a built-in "
                    f"USCTEC-family policy")


def change_rows(units: RowUnits, change: Any) -> Any:  # a .families.Change
    moves = tuple((src, *units.rows(a, b), m) for src, a, b, m in change.moves)
    shrink = {m: {src: tuple(units.rows(a, b) for a, b in ranges)
                  for src, ranges in kept.items()}
              for m, kept in change.shrink.items()}
    return replace(change, moves=moves, shrink=shrink)


class UnitsFamily:
    """A USCTEC family planning :class:`RowUnits` (module docstring): ``inner`` is the family
    made for ``units.num_units`` rows; what it returns is translated to rows of ``A``.

    Budgets that hold every row ``L+S`` times in nonzeros but not in whole units (the count
    of units is a multiple of 240 from 4,800 units, of 12 from 120, so this takes budgets such
    as 1/7 adding up to ``L+S`` exactly) become ``min(1, e + 1/units)`` for the inner family, a
    machine then holding up to one unit more than ``e``; the placement reports these
    budgets.  (The slack is not given always: a designed placement with it can differ from
    the one for exact budgets.)"""

    def __init__(self, inner: _Inner, units: RowUnits):
        self.inner, self.units = inner, units
        self.name, self.has_LS = inner.name, inner.has_LS
        # (the inner placement, it over rows)
        self._cache: tuple[Placement | None, Placement | None] = (None, None)
        self._slack = False  # budgets given a unit of slack (class docstring)

    @property
    def storage(self) -> Placement | None:
        p = self.inner.storage
        if p is None:
            return None
        if self._cache[0] is not p:
            self._cache = (p, placement_rows(self.units, p))
        return self._cache[1]

    def sources(self) -> tuple[str, ...]:
        return self.inner.sources()

    def _budget(self, e: float) -> float:
        return min(1.0, float(e) + 1.0 / self.units.num_units) if self._slack else float(e)

    def _need_slack(self, budgets: Iterable[float], K: int) -> bool:
        n = self.units.num_units
        whole = sum(math.floor(float(e) * n + 1e-9) for e in budgets)
        return whole < K * n <= sum(float(e) for e in budgets) * n + 1e-6

    def start(self, specs: list[MachineSpec]) -> Any:
        self._slack = self._need_slack([s.storage for s in specs], self.inner.L + self.inner.S)
        specs = [replace(s, storage=self._budget(s.storage)) for s in specs]
        return change_rows(self.units, self.inner.start(specs))

    def join(self, spec: MachineSpec) -> Any:
        return change_rows(self.units, self.inner.join(replace(spec, storage=self._budget(
            spec.storage))))

    def forget(self, machine: str) -> None:
        self.inner.forget(machine)

    def repair(self, present: Any, S: int, n_cols: int | None = None) -> Any:
        self._slack = self._slack or self._need_slack(present.budgets.values(),
                                                      self.inner.L + S)
        present = replace(present, budgets={m: self._budget(e)
                                            for m, e in present.budgets.items()})
        return change_rows(self.units, self.inner.repair(present, S, n_cols))

    def rescue(self, m: int, need: int, exclude: set[Hashable], machines: list[Hashable]
               ) -> Any:
        return self.inner.rescue(m, need, exclude, machines)  # raises: usctec does not rescue

    def plan(self, policy: str, present: Any, S: int, request: StepRequest
             ) -> StepPlan | PullPlan | None:
        return plan_rows(self.units, self.inner.plan(policy, present, S, request))

    def holders(self, rows: tuple[int, int], present: Iterable[Hashable]
                ) -> list[tuple[int, int, list[Hashable]]]:
        return cast(Placement, self.storage).holders_of(rows, present)

    def snapshot(self) -> Placement | None:
        return self.storage

    def restore(self, state: Placement | None) -> None:
        self.inner.restore(None if state is None else placement_units(self.units, state))

    def members(self) -> tuple[Hashable, ...]:
        return self.inner.members()

    def state_key(self) -> object:
        return self.inner.state_key()
