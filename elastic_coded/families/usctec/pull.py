"""Pull execution of a step: machines pull small *units* of work as they free up.  Pure: no Ray.

Two policies run this way on the runtime (:mod:`~elastic_coded.families.usctec.executor_pull`
drives them):

* ``usctec`` (the default): the controller's USCTEC plan for ``(L, 0)`` spreads each row group's
  ``L`` Lagrange positions over machines storing it, with loads in proportion to the speed
  estimates (MATH.md §1).  Every group is cut into sub-groups (:func:`subdivide`), so a machine
  holds a short queue of units ``(sub-group, position)``.  The ``S`` redundant positions of the
  code are never dispatched up front: they are *coded backups*, computed by machines that would
  otherwise sit idle, for the pieces whose ``L``-th result is expected last, and useful whoever
  finishes first.  When every position of such a piece is done or under way (two stragglers
  on one piece use up ``S = 2``), the backup is a copy of the position expected last, the first
  copy to arrive counting.  A machine that runs out of work also takes queued units from the
  machine expected to finish last (work stealing).  A machine's rate is the one the step was
  planned with until its first call comes back, then what that call showed (this step's
  slowdown, which the plan cannot know), and after that the mean of the rate and each call's.
  A call's units are expected back when the call ends: its work at the machine's rate, plus
  the lag the last pull step's calls showed
  beyond their work (:func:`~.pull_step.next_lag`); past that it is overdue, expected to take
  as long again as it has so far, and the units queued behind it no longer cover their piece;
  once cancelled, it bounds its machine's rate for the rest of the step (its work over the
  time it ran, less the lag), so a straggler whose units were all outrun is not given the last
  backups at the speed it was planned with.  A machine given nothing *naps* for a twentieth of
  a call's expected time (at least 5 ms) unless one of its calls ends or a machine is lost, so
  steals and backups start at most that late; one with nothing it could do at any time (no
  queue left to steal from, no backup candidate among the pieces it stores) rests until one of
  those pieces changes, and one with no queue left to steal from whose candidates cannot pay
  before a time they bound (:func:`~.queues.pays_no_sooner`: the expected finishes grow at
  most twice as fast as the clock until a call on time falls overdue) naps until then, or
  until one of those pieces changes and its twentieth has passed.
  :class:`CodedQueue` holds the rules.
* ``dynamic``: the baseline a Ray user writes by hand (:class:`DynamicQueue`): ``A``'s rows cut
  into equal uncoded chunks, every machine pulling the next chunk among the rows it stores, and,
  once no chunk is left, a backup copy of each chunk still running on an idle machine that
  stores it; the first copy to arrive wins.

Both queues answer :meth:`next_for` (the next unit for a machine that has room), and are told
what started, finished and was lost (:mod:`.queues`).  Times are seconds of the caller's clock.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

from ...errors import ArgumentError, PlanError
from ...schemes.plan import Group, Piece, Placement, RowBlock, StepPlan, Task
from .modes import (  # noqa: F401
    EAGER_MARGIN,
    EAGER_TRIAL,
    MODES,
    PROBE_EVERY,
    choose_mode,
    next_mode,
    prefer_pull,
)
from .queues import CodedQueue, DynamicQueue  # noqa: F401

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["Unit", "PullPlan", "PullOptions", "subdivide", "units_for", "CodedQueue",
           "DynamicQueue", "chunk_rows", "coded_pull_plan", "dynamic_plan", "prefer_pull",
           "choose_mode", "next_mode", "AUTO_UNITS", "PROBE_EVERY", "EAGER_TRIAL",
           "EAGER_MARGIN", "MODES"]

AUTO_UNITS = (2, 8)
"""The fewest and most units a machine's share is cut into when the count is chosen from the
step's expected time (:func:`units_for`)."""


@dataclass(frozen=True)
class Unit:
    """``A[rows] @ B~_position[:, cols]`` for ``piece`` (an index into the pieces)."""

    piece: int
    position: int
    rows: tuple[int, int]
    cols: tuple[int, int] | None = None

    @property
    def num_rows(self) -> int:
        return self.rows[1] - self.rows[0]


@dataclass(frozen=True)
class PullPlan:
    """A step to execute by pulling: ``base`` is the controller's plan (``L`` positions per
    piece, ``S = 0``), ``S`` the coded backups each piece may get (0: uncoded copies, the
    ``dynamic`` baseline), ``holders[g]`` the present machines storing group ``g`` entirely."""

    base: StepPlan | None
    """``None`` when ``usctec-auto`` was asked only for its whole plans (``modes``)."""
    S: int
    holders: tuple[tuple[Hashable, ...], ...]
    copies: bool = False
    chunks: int = 0
    """``dynamic`` only: the number of equal row chunks asked for (each is also cut at the
    placement's blocks)."""
    eager: StepPlan | None = None
    """``usctec-auto`` only: the USCTEC plan for ``(L, S)``, dispatched whole when the step is
    too short for pulling to pay (:func:`prefer_pull`)."""
    lean: StepPlan | None = None
    """``usctec-auto`` only: the plan for ``(1, 0)`` (the rows split in proportion to the
    speeds, nothing to decode), dispatched whole when no machine straggles."""
    code: tuple[int, ...] = ()
    """``(L, S)`` of the pull code, kept when ``base`` is not planned."""

    L = property(lambda self: self.base.L if self.base is not None else self.code[0])
    K = property(lambda self: self.L + self.S)
    num_rows = property(lambda self: self.any.num_rows)
    available = property(lambda self: self.any.available)
    speeds = property(lambda self: self.any.speeds)
    groups = property(lambda self: self.base.groups)
    pieces = property(lambda self: self.base.pieces)
    c = property(lambda self: self.base.c)
    c_int = property(lambda self: self.base.c_int)

    @property
    def any(self) -> StepPlan:
        """A plan this value holds (they share the rows, machines and speeds)."""
        return next(p for p in (self.base, self.eager, self.lean) if p is not None)

    def has(self, mode: str) -> bool:
        """Whether the plan for ``mode`` (``"pull"``, ``"eager"``, ``"lean"``) was made."""
        return {"pull": self.base, "eager": self.eager, "lean": self.lean}[mode] is not None

    def iter_pieces(self) -> Iterator[tuple[int, Piece, Group]]:
        return cast(StepPlan, self.base).iter_pieces()   # the pull plan, as tasks()

    def tasks(self) -> dict[Hashable, list[Task]]:
        return cast(StepPlan, self.base).tasks()   # the pull plan: the one a step runs

    def __repr__(self) -> str:
        kind = "copies" if self.copies else f"S={self.S} coded backups"
        return f"PullPlan({self.base!r}, {kind})"


def _split(a: int, b: int, n: int) -> list[tuple[int, int]]:
    n = max(1, min(n, b - a))
    cuts = [a + (b - a) * i // n for i in range(n + 1)]
    return [(cuts[i], cuts[i + 1]) for i in range(n)]


def subdivide(plan: PullPlan, units: int) -> tuple[PullPlan, dict[Hashable, list[Unit]]]:
    """``plan`` with every group cut into sub-groups, so that each machine's share comes in
    about ``units`` units (a group is cut into ``ceil(units * |group| / rows)`` sub-groups,
    ``rows`` the smallest share of the machines computing it).  Returns the new plan and
    ``{machine: [Unit, ...]}``, every machine's units in order."""
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise ArgumentError(f"units: must be an int >= 1, got {units!r}")
    base = cast(StepPlan, plan.base)   # units cut the pull plan, made for every pull step
    share = base.rows_computed()
    groups: list[Group] = []
    pieces: list[Piece] = []
    holders: list[tuple[Hashable, ...]] = []
    by_group: dict[int, list[Piece]] = {}
    for p in base.pieces:
        by_group.setdefault(p.group, []).append(p)
    for g, grp in enumerate(base.groups):
        mine = by_group.get(g, [])
        least = min((share[m] for p in mine for m in p.machines), default=grp.size)
        n = math.ceil(units * grp.size / max(1, least))
        for a, b in _split(grp.rows[0], grp.rows[1], n):
            gi = len(groups)
            groups.append(Group((a, b), grp.gamma * (b - a) / grp.size, grp.machines))
            holders.append(plan.holders[g])
            pieces.extend(Piece(gi, p.cols, p.machines) for p in mine)
    new_base = replace(base, groups=tuple(groups), pieces=tuple(pieces))
    out = replace(plan, base=new_base, holders=tuple(holders))
    queues: dict[Hashable, list[Unit]] = {m: [] for m in base.available}
    for pi, piece in enumerate(new_base.pieces):
        for pos, m in enumerate(piece.machines):
            queues[m].append(Unit(pi, pos, groups[piece.group].rows, piece.cols))
    return out, {m: q for m, q in queues.items() if q}


def units_for(expected_s: float, machines: int, call_cost_s: float,
              bounds: tuple[int, int] = AUTO_UNITS) -> int:
    """How many units a machine's share is cut into: as many as keep the driver's cost of the
    calls (``call_cost_s`` each, ``machines`` machines) within a quarter of the step's expected
    time ``expected_s``, between ``bounds``."""
    lo, hi = bounds
    if not expected_s > 0 or not call_cost_s > 0:
        return hi
    n = int(0.25 * expected_s / (call_cost_s * max(1, machines)))
    return max(lo, min(hi, n))


def chunk_rows(placement_blocks: Sequence[RowBlock], num_rows: int, chunks: int
               ) -> list[tuple[int, int]]:
    """``dynamic``'s chunks: the rows cut into about ``chunks`` equal ranges, each also cut at
    the placement's block boundaries (a chunk is stored whole by every holder of its block)."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ArgumentError(f"chunks: must be an int >= 1, got {chunks!r}")
    size = max(1, -(-num_rows // chunks))
    cuts = set(range(0, num_rows, size)) | {num_rows}
    cuts |= {blk.start for blk in placement_blocks} | {blk.stop for blk in placement_blocks}
    c = sorted(x for x in cuts if 0 <= x <= num_rows)
    return [(c[i], c[i + 1]) for i in range(len(c) - 1)]


# -- plans and options ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PullOptions:
    """Options of the pull policies (``usctec-pull``, ``dynamic``) on USCTEC storage; every error
    names the key, the value and the rule."""

    units: object = "auto"
    """Units each machine's share is cut into under ``usctec-pull``: an int >= 1, or ``"auto"``
    (:func:`units_for`: from the step's expected time and the driver's cost per call)."""
    chunks: int = 8
    """``dynamic``: row chunks per machine present (the issue's 96 chunks for 12 machines)."""
    depth: int = 2
    """Units in flight per machine (the next one waits on the machine while one computes)."""
    call_cost_s: float = 0.0015
    """The cost of one call (dispatch, wait, result), for ``units="auto"`` and ``usctec-auto``'s
    choice to pull: the calibrated runtime (``benchmarks/results/runtime_cost.md``) pays about
    0.6 ms of driver time a call and, on a 2-core host, 1.8 ms of the host's CPU (0.9 ms of its
    two cores) more.  It was 3 ms when a call cost the driver 3-5x what it does now."""

    def __post_init__(self) -> None:
        if self.units != "auto" and (isinstance(self.units, bool) or
                                     not isinstance(self.units, int) or self.units < 1):
            raise ArgumentError(f"units: must be 'auto' or an int >= 1, got {self.units!r}")
        for name in ("chunks", "depth"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ArgumentError(f"{name}: must be an int >= 1, got {v!r}")
        if not (isinstance(self.call_cost_s, (int, float)) and self.call_cost_s > 0):
            raise ArgumentError(f"call_cost_s: must be a number > 0, got {self.call_cost_s!r}")


def _group_holders(placement: Placement, groups: Iterable[Group], present: Iterable[Hashable]
                   ) -> tuple[tuple[Hashable, ...], ...]:
    """The present machines storing each group's rows entirely: the present holders common
    to every block the rows overlap (the blocks sorted once, each group's found by bisection)."""
    present = set(present)
    blocks = sorted(placement.blocks, key=lambda b: b.start)
    starts = [b.start for b in blocks]
    held = [frozenset(h for h in b.holders if h in present) for b in blocks]
    out: list[tuple[Hashable, ...]] = []
    for grp in groups:
        a, b = grp.rows
        i = max(0, bisect.bisect_right(starts, a) - 1)
        hs: frozenset[Hashable] | None = None
        while i < len(blocks) and blocks[i].start < b:
            if blocks[i].stop > a:
                hs = held[i] if hs is None else hs & held[i]
            i += 1
        out.append(tuple(sorted(hs or (), key=str)))
    return tuple(out)


def coded_pull_plan(placement: Placement, available: Iterable[Hashable], speeds: npt.ArrayLike,
                    L: int, S: int, eager: bool = False, modes: Sequence[str] | None = None
                    ) -> PullPlan:
    """``usctec-pull``: the USCTEC plan for ``(L, 0)`` (each group's ``L`` positions on machines
    storing it, loads in proportion to ``speeds``), with ``S`` coded backups per piece.
    ``eager``: also the plan for ``(L, S)`` and the ``(1, 0)`` one (``usctec-auto``), checked
    against their constraints; ``modes`` (a subset of :data:`MODES`) makes only the plans of
    those executions (the driver asks for the one it will run)."""
    from . import plan_step, validate

    if modes is None:
        modes = MODES if eager else ("pull",)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ArgumentError(f"modes: a non-empty subset of {MODES}, got {tuple(modes)!r}")
    if not eager and tuple(modes) != ("pull",):
        raise ArgumentError(f"modes: {tuple(modes)!r} needs eager=True (usctec-auto)")
    base = plan_step(placement, available, speeds, L, 0) if "pull" in modes else None
    full = plan_step(placement, available, speeds, L, S) if "eager" in modes else None
    lean = plan_step(placement, available, speeds, 1, 0) if "lean" in modes else None
    for p in (full, lean):
        if p is not None:
            validate(p, placement)
    holders = _group_holders(placement, base.groups, tuple(available)) if base else ()
    return PullPlan(base, S, holders, eager=full, lean=lean, code=(L, S))


def dynamic_plan(placement: Placement, available: Iterable[Hashable], speeds: npt.ArrayLike,
                 L: int, S: int, chunks: int | None = None) -> PullPlan:
    """``dynamic``: uncoded chunks of about ``num_rows / chunks`` rows (default 8 per machine),
    cut at the placement's blocks; speeds are not used (the machines' pulling adapts to them)."""
    avail = tuple(available)
    n = chunks if chunks is not None else PullOptions().chunks * len(avail)
    rows = chunk_rows(placement.blocks, placement.num_rows, n)
    groups = tuple(Group(r, (r[1] - r[0]) / placement.num_rows, ()) for r in rows)
    holders = _group_holders(placement, groups, avail)
    for r, h in zip(rows, holders):
        if not h:
            raise PlanError(f"dynamic: no machine present stores rows {r[0]}:{r[1]}")
    groups = tuple(replace(g, machines=h) for g, h in zip(groups, holders))
    pieces = tuple(Piece(g, None, (h[0],)) for g, h in enumerate(holders))
    sp = cast("Iterable[float]", speeds)   # one number per machine
    base = StepPlan(1, 0, placement.num_rows, avail, tuple(float(s) for s in sp), groups,
                    pieces, tuple(0.0 for _ in avail), 0.0, 0.0)
    return PullPlan(base, 0, holders, copies=True, chunks=n)
