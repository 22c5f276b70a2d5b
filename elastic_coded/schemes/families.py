"""Storage families: what each scheme stores on the machines present, and its step plan.  Pure:
no Ray.

One small class per storage family, each a thin adapter over the scheme's pure functions, all
answering the :class:`Family` protocol: the USCTEC family's here (over
:mod:`elastic_coded.families.usctec`), the other two in their family's folder
(:mod:`elastic_coded.families.unified.store`, :mod:`elastic_coded.families.hetero.store`).  A
family holds its storage (a placement, or the scheme's storage) and nothing else: every other
input is an argument (the machines present with their budgets and speeds, :class:`Present`) or
fixed when it is made (:class:`Setup`).  What a call changes is returned as data, a
:class:`Change`: moves ``(source, start, stop, machine)`` of rows to send, the rows each machine
keeps when it must drop some, and the coded sources to put first (:class:`PutSource`).  The
runtime (:mod:`elastic_coded.runtime.storage`) applies them; a unit test reads them.

Families are made by name through the family registry (:mod:`elastic_coded.families`,
:func:`make_family`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from ..errors import ArgumentError, PlanError
from ..families.hetero.policy import Ranges
from ..families.usctec import (
    SpeedModel,
    cyclic_placement,
    design_placement,
    extend_placement,
    repair_placement,
    validate,
)
from ..machines import MachineSpec
from .plan import Placement, StepPlan
from .policies.pull import PullPlan
from .registry import get_policy, policy_of, step_code
from .row_units import UnitsFamily, row_units
from .wire import StepRequest

__all__ = ["Present", "PutSource", "Change", "Setup", "Family", "UsctecFamily", "make_usctec",
           "make_family", "no_rescue", "no_holders", "Spans"]

Spans = list[tuple[int, int, list[Hashable]]]   # rows (start, stop) and their holders
_Plan = StepPlan | PullPlan


@dataclass(frozen=True)
class Present:
    """The machines present, in the order a family is to see them, with their storage budgets
    (fractions of the rows) and planning speeds."""

    machines: tuple[Hashable, ...]
    budgets: Mapping[Hashable, float] = field(default_factory=dict)
    speeds: Mapping[Hashable, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "machines", tuple(self.machines))
        for name in ("budgets", "speeds"):
            missing = [m for m in self.machines if m not in getattr(self, name)]
            if missing:
                raise ArgumentError(f"{name}: no entry for machines {missing}; every machine "
                                    f"present needs one")


@dataclass(frozen=True)
class PutSource:
    """A coded source to put before the moves are sent: ``name`` holds ``encode(A)`` for the
    matrix ``A`` of source ``base``; source ``drop`` (the one it replaces) is dropped once it is
    put.  ``if_missing``: only if the runtime does not hold ``name`` already.  ``values_rows``:
    coded rows the moves send, counted (times ``A``'s columns) in the values moved."""

    name: str
    encode: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    base: str = "A"
    drop: str | None = None
    if_missing: bool = False
    values_rows: int = 0


@dataclass(frozen=True)
class Change:
    """What a family call asks of the runtime: ``puts`` first, then ``moves`` ``((source,
    start, stop, machine), ...)``; ``shrink`` ``{machine: {source: ranges kept}}`` for the
    machines that keep fewer rows than they hold; ``redesign``: why the storage was designed
    anew (a re-encoding that replaced a design in force), else ``None``."""

    moves: Sequence[tuple[str, int, int, Any]] = ()   # made a tuple of tuples (Any: a machine)
    shrink: Mapping[Hashable, Mapping[str, Ranges]] = field(default_factory=dict)
    puts: tuple[PutSource, ...] = ()
    redesign: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "moves", tuple(tuple(mv) for mv in self.moves))
        object.__setattr__(self, "puts", tuple(self.puts))

    @property
    def rows(self) -> int:
        """Rows the moves send."""
        return sum(b - a for _, a, b, _ in self.moves)


@dataclass(frozen=True)
class Setup:
    """What a family is made with: the rows of ``A`` (``num_rows``), the code ``(L, S)``, the
    seed, the field, the family's options, the USCTEC placement kind, the masters' row
    counts (hetero) and, for a sparse ``A``, ``row_prefix``: the nonzeros before each row (its
    CSR ``indptr``), which makes the USCTEC family plan in nonzeros (:mod:`.row_units`)."""

    num_rows: int
    L: int
    S: int
    field: Any = None
    seed: int = 0
    options: Any = None
    placement: str = "design"
    masters: tuple[int, ...] = ()
    row_prefix: Any = None


class Family(Protocol):
    """One storage family (see the module docstring).

    ``has_LS``: every row is kept on ``L+S`` machines, so a step needs ``L+S`` present and a
    repair the budgets cannot hold falls back to a lower ``S``.  ``storage``: the storage in
    force (what a snapshot reports).  ``pure_repair`` (optional, default false): a repair is a
    function of the state (``state_key``), the machines present, their budgets and ``S``
    alone, so one that changed nothing need not be made again while none of them changes."""

    name: str
    has_LS: bool

    @property
    def storage(self) -> Any: ...
    def sources(self) -> tuple[str, ...]: ...
    def start(self, specs: list[MachineSpec]) -> Change: ...
    def join(self, spec: MachineSpec) -> Change: ...
    def forget(self, machine: str) -> None: ...
    def repair(self, present: Present, S: int, n_cols: int | None = None) -> Change: ...
    def rescue(self, m: int, need: int, exclude: set[Any], machines: list[Hashable]) -> Change: ...
    def plan(self, policy: str, present: Present, S: int, request: StepRequest) -> Any: ...
    def holders(self, rows: tuple[int, int], present: Iterable[Hashable]) -> Spans: ...
    def snapshot(self) -> Any: ...
    def restore(self, state: Any) -> None: ...
    def members(self) -> tuple[Any, ...]: ...   # machine ids (the runtime's: str)
    def state_key(self) -> object: ...


def no_rescue(name: str, m: int) -> PlanError:
    return PlanError(f"rescue: family {name!r} keeps no coded rows of master {m} to store "
                     f"afresh; only family 'hetero' rescues mid-step")


def no_holders(name: str) -> PlanError:
    return PlanError(f"holders: family {name!r} keeps coded rows, not copies of rows of A; "
                     f"only family 'usctec' answers which machines hold rows")


class UsctecFamily:
    """Uncoded rows of ``A`` (source ``"A"``) on every machine, within its budget (MATH.md §1)."""

    name = "usctec"
    has_LS = True
    pure_repair = True

    def __init__(self, num_rows: int, L: int, S: int, field: Any, seed: int = 0,
                 placement_kind: str = "design"):
        self.q, self.L, self.S, self.F, self.seed = int(num_rows), int(L), int(S), field, seed
        self.kind = placement_kind
        self.placement: Placement | None = None

    @property
    def storage(self) -> Placement | None:
        return self.placement

    @property
    def _placed(self) -> Placement:
        """The placement, once :meth:`start` (or :meth:`restore`) made one."""
        return cast(Placement, self.placement)

    def sources(self) -> tuple[str, ...]:
        return ("A",)

    def start(self, specs: list[MachineSpec]) -> Change:
        ids = [s.id for s in specs]
        budgets = [s.storage for s in specs]
        if self.kind == "cyclic":
            self.placement = cyclic_placement(
                self.q, ids, self.L, self.S,
                budgets=None if all(b >= 1 for b in budgets) else budgets)
        else:
            model = SpeedModel(tuple(s.speed for s in specs), straggle_prob=0.1,
                               straggle_factor=5.0)
            self.placement = design_placement(self.q, ids, budgets, model, self.L, self.S,
                                              samples=16, seed=self.seed)
        return Change([("A", a, b, m) for m in ids for a, b in self.placement.rows_of(m)])

    def join(self, spec: MachineSpec) -> Change:
        self.placement, moved = extend_placement(self._placed, spec.id, spec.storage)
        return Change([("A", a, b, m) for a, b, m in moved])

    def forget(self, machine: Hashable) -> None:
        """A machine left: its copies are gone now (a later machine of the same id starts
        empty); the next repair restores the replication."""
        self.placement = self._placed.without(machine)

    def snapshot(self) -> Placement | None:
        return self.placement

    def members(self) -> tuple[Hashable, ...]:
        return self._placed.machines

    def restore(self, state: Placement | None) -> None:
        self.placement = state

    def repair(self, present: Present, S: int, n_cols: int | None = None) -> Change:
        """Every row on ``L+S`` of the machines ``present`` within their budgets
        (:func:`~elastic_coded.families.usctec.repair_placement`; a
        :class:`~elastic_coded.errors.BudgetError` when they cannot hold that).  A machine
        whose rows the repair moved elsewhere keeps only its new ranges (``shrink``)."""
        ids = list(present.machines)
        budgets = {m: present.budgets[m] for m in ids}
        before = {m: self._placed.stored_rows(m) for m in ids}
        self.placement, moved = repair_placement(self._placed, ids, self.L, S, budgets)
        got: dict[Hashable, int] = {}
        for a, b, m in moved:
            got[m] = got.get(m, 0) + b - a
        shrink = {m: {"A": tuple(self.placement.rows_of(m))} for m in ids
                  if self.placement.stored_rows(m) < before[m] + got.get(m, 0)}
        return Change([("A", a, b, m) for a, b, m in moved], shrink)

    def rescue(self, m: int, need: int, exclude: set[Hashable], machines: list[Hashable]) -> Change:
        raise no_rescue(self.name, m)

    def plan(self, policy: str, present: Present, S: int, request: StepRequest) -> _Plan:
        """The step's plan for its code (:func:`~elastic_coded.schemes.registry.step_code`:
        fewer column blocks than ``L`` for narrow inputs, never zero columns below ``L``)."""
        ids = list(present.machines)
        sp = tuple(present.speeds[m] for m in ids)
        L_step, S_step, _ = step_code(policy, self.L, S, max(1, request.n_cols), self.F)
        modes = getattr(request, "modes", ())
        kw = {"modes": tuple(modes)} if modes and policy_of(policy).modes else {}
        plan: _Plan = get_policy(policy)(self.placement, ids, sp, L_step, S_step, **kw)
        base = cast("StepPlan | None", getattr(plan, "base", plan))
        if base is not None:   # a pull plan: its base (its whole plans: checked)
            validate(base, self._placed)
        return plan

    def holders(self, rows: tuple[int, int], present: Iterable[Hashable]) -> Spans:
        """Present holders of ``rows``, cut at block boundaries (:meth:`Placement.holders_of`)."""
        return self._placed.holders_of(rows, present)

    def state_key(self) -> Placement | None:
        return self.placement


def make_usctec(s: Setup) -> Family:
    """The USCTEC family, over row units of equal nonzeros for a sparse ``A``."""
    units = None if s.row_prefix is None else row_units(s.row_prefix)
    if units is None:
        return UsctecFamily(s.num_rows, s.L, s.S, s.field, s.seed, s.placement)
    if units.num_rows != s.num_rows:
        raise ArgumentError(f"row_prefix: covers {units.num_rows} rows, A has {s.num_rows}")
    inner = UsctecFamily(units.num_units, s.L, s.S, s.field, s.seed, s.placement)
    return UnitsFamily(inner, units)


def make_family(name: str, setup: Setup) -> Family:
    """The storage of the registered family ``name``
    (:func:`~elastic_coded.families.family_of`) made with ``setup``."""
    from ..families import family_of

    return cast(Family, family_of(name).make_storage(setup))
