"""Storage families: what each scheme stores on the machines present, and its step plan.  Pure:
no Ray.

One small class per storage family, each a thin adapter over the scheme's pure functions, all
answering the :class:`Family` protocol, each in its family's folder
(:mod:`elastic_coded.families.usctec.store`, :mod:`elastic_coded.families.unified.store`,
:mod:`elastic_coded.families.hetero.store`); this module holds the protocol and the values its
calls take and return.  A
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
from ..machines import MachineSpec
from .wire import StepRequest

__all__ = ["Present", "PutSource", "Change", "Setup", "Family", "make_family", "no_rescue",
           "no_holders", "Spans"]

Spans = list[tuple[int, int, list[Hashable]]]   # rows (start, stop) and their holders


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


def make_family(name: str, setup: Setup) -> Family:
    """The storage of the registered family ``name``
    (:func:`~elastic_coded.families.family_of`) made with ``setup``."""
    from ..families import family_of

    return cast(Family, family_of(name).make_storage(setup))
