"""Executing StepPlans in simulated time.  Pure: numpy (plans come from the same scheme functions
the runtime calls; no Ray).

**Time.**  ``time_scale`` is the runtime's: the seconds a speed-1 machine takes for the whole step's
products ``q x r``.  A task of ``rows`` rows over ``cols`` of the ``r/L`` coded columns is the work
``rows * cols / (q * r)``; a machine computes all its tasks of a step and returns them together at

    finish[n] = work[n] / (speed[n] / slowdown[n]) * time_scale

(``work[n]`` summed over its tasks), as the runtime's worker paces it.  A plan's ``c_int`` is in
units of ``q v r / L`` products, so with no slowdowns a USCTEC step takes ``c_int * time_scale / L``
(:func:`time_unit`).  Planning, encoding and decoding take no simulated time (planning time is
measured and reported apart).

**A step** (:func:`step_time`; :func:`step_time_reference` is the same in plain Python, the
semantics every faster path must match).  A piece decodes at the ``L``-th smallest finish time
among its machines; the step ends when every piece has decoded.

**Crashes and recovery**, as the runtime's driver does them.  A machine that crashes never returns;
its failure is noticed at ``crash_at`` (0.5) of the time it would have taken.  Then every task it
held in a piece not yet decoded is re-dispatched at once, by the runtime's rule
(:func:`~elastic_coded.schemes.policies.rules.assign_recovery`): the task's rows cut into spans of
common holders (:meth:`~elastic_coded.schemes.plan.Placement.holders_of`; one span unless churn
split them), each span to the live holder with the least ``rows assigned in this recovery / speed
estimate``, then smallest id; a holder computes its part after what it already has to do (a
machine does one thing at a time; the runtime's emulation paces concurrent calls independently,
which would let the extra task overlap), and the task is back when its last part is.  The piece
decodes from its first ``L`` results among the live originals and the re-dispatched tasks.
Holders are taken among the machines that do not crash in this step, and storage repair during
the step is not modelled (the placement at the start of the step serves); if a lost span has no
live holder the step is lost (``time = inf``), as the runtime raises.

**Speculative backups** (:class:`Speculation`, on a plan with ``L = 1, S = 0``: the uncoded split),
as the runtime's ``speculative`` policy does them.  Every task starts at 0; once a fraction
``quantile`` of the tasks has completed (the runtime: any one), a machine still running after
``multiplier`` times the median duration of the completed tasks gets a copy of each of its tasks not
yet done, on the other holder of the task's rows with the fewest calls in flight (then smallest id),
machine by machine in dispatch order (:func:`~elastic_coded.schemes.policies.rules.backup_copies`);
the first copy to finish wins.  With every task starting together this happens at one time ``t*``,
computed exactly (:func:`~elastic_coded.schemes.policies.rules.speculation_start`).  A copy starts
at ``t*`` or when its machine is free, whichever is later, and uses only the time left after the
machine's own and recovery work, so speculation never delays anything and a speculative step is
never slower than the uncoded one on the same trace.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from ..schemes.plan import Placement, PlanError, StepPlan
from ..schemes.policies.rules import assign_recovery, backup_copies, speculation_start
from .cost import taken_in

__all__ = ["Speculation", "StepOutcome", "step_time", "time_unit"]


"""Registry policies whose plans ignore speed estimates (their cache key leaves them out)."""

MachineValues = Mapping[Hashable, float] | Sequence[float] | np.ndarray
"""One value per machine of a plan's ``available``: a mapping, or a sequence in that order."""
Span = tuple[int, int, list[Hashable]]
"""Rows ``(start, stop)`` and their present holders (``Placement.holders_of``)."""
_Spans = Callable[[tuple[int, int]], list[tuple[int, int, list[int]]]]
"""``rows -> [(start, stop, [plan positions of live holders]), ...]``."""


def time_unit(plan: StepPlan, time_scale: float = 1.0) -> float:
    """Seconds per unit of the plan's ``c`` (``q v r / L`` products at speed 1)."""
    return time_scale / plan.L


@dataclass(frozen=True)
class Speculation:
    """Speculative backup tasks: a task running longer than ``multiplier`` times the median
    completed task's time gets a copy, once a fraction ``quantile`` of the tasks has completed
    (the runtime: ``multiplier`` 1.5, no quantile gate; Spark's defaults: 1.5 and 0.75)."""

    multiplier: float = 1.5
    quantile: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.multiplier, (int, float)) and self.multiplier >= 1
                and math.isfinite(self.multiplier)):
            raise ArgumentError(f"multiplier: a finite number >= 1, got {self.multiplier!r}")
        if not (isinstance(self.quantile, (int, float)) and 0 <= self.quantile <= 1):
            raise ArgumentError(f"quantile: a fraction in [0, 1], got {self.quantile!r}")

    def min_completed(self, n_tasks: int) -> int:
        """Tasks that must have completed before speculation starts."""
        return max(1, math.ceil(self.quantile * n_tasks - 1e-9))


@dataclass(frozen=True)
class StepOutcome:
    """What one simulated step did."""

    time: float
    """When the last piece decoded (``inf``: the step could not complete)."""
    piece_times: np.ndarray = field(repr=False)
    """When each piece decoded (plan order; ``inf``: never)."""
    finish: np.ndarray = field(repr=False)
    """When each machine of ``plan.available`` would return its own tasks (``inf``: crashed; 0:
    no work)."""
    recovered: tuple[int, ...] = ()
    """Pieces left with fewer than ``L`` live results by crashes: they decode only thanks to
    re-dispatched tasks (on a lost step, some could not be re-dispatched)."""
    redispatched: int = 0
    """Tasks re-dispatched after crashes."""
    copies: int = 0
    """Speculative copies launched."""
    t_speculate: float = math.inf
    """When speculation started (``inf``: never)."""


# ------------------------------------------------------------------------------------------------
# helpers shared by both paths
# ------------------------------------------------------------------------------------------------
def _sort_key(ids: Iterable[Hashable]) -> list[Hashable]:
    try:
        return sorted(cast("Iterable[Any]", ids))   # ids that order (else by repr, below)
    except TypeError:
        return sorted(ids, key=repr)


def _task_work(plan: StepPlan) -> list[float]:
    """Work of each piece's task: ``rows * cols / (q * r)`` (module docstring)."""
    width: dict[int, int] = {}
    for p in plan.pieces:
        if p.cols is not None:
            width[p.group] = width.get(p.group, 0) + (p.cols[1] - p.cols[0])
    out = []
    for _pi, piece, grp in plan.iter_pieces():
        frac = 1.0 if piece.cols is None else (piece.cols[1] - piece.cols[0]) / width[piece.group]
        out.append((grp.rows[1] - grp.rows[0]) / plan.num_rows * frac / plan.L)
    return out


def _aligned(values: MachineValues | None, avail: tuple[Hashable, ...], name: str,
             default: float | None) -> np.ndarray:
    """Per-machine values aligned with ``avail``, from a mapping or a sequence."""
    if values is None:
        if default is None:
            raise ArgumentError(f"{name}: required")
        return np.full(len(avail), float(default))
    if isinstance(values, Mapping):
        missing = [m for m in avail if m not in values]
        if missing:
            raise ArgumentError(f"{name}: no value for machines {missing[:5]}")
        arr = np.array([float(values[m]) for m in avail])
    else:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if arr.size != len(avail):
            raise ArgumentError(f"{name}: expected {len(avail)} values (one per available "
                                f"machine), got {arr.size}")
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ArgumentError(f"{name}: every value must be positive and finite, got "
                            f"{arr.tolist()[:8]}")
    return arr


class _PlacementIndex:
    """Which machines store a row range, by bisection over the placement's blocks: the fast path
    of :meth:`~elastic_coded.schemes.plan.Placement.holders_of` (same answers, tested)."""

    def __init__(self, placement: Placement) -> None:
        blocks = sorted(placement.blocks, key=lambda b: b.start)
        self.starts: list[int] = [b.start for b in blocks]
        self.stops: list[int] = [b.stop for b in blocks]
        self.holders: list[tuple[Hashable, ...]] = [tuple(b.holders) for b in blocks]

    def spans(self, rows: tuple[int, int], present: Container[Hashable]) -> list[Span]:
        """``Placement.holders_of(rows, present)``; ``present`` a set."""
        a0, b0 = rows
        i = max(0, bisect.bisect_right(self.starts, a0) - 1)
        out: list[Span] = []
        while i < len(self.starts) and self.starts[i] < b0:
            a, b = max(self.starts[i], a0), min(self.stops[i], b0)
            if a < b:
                hs = [m for m in self.holders[i] if m in present]
                if out and out[-1][1] == a and set(out[-1][2]) & set(hs):
                    out[-1] = (out[-1][0], b, [m for m in out[-1][2] if m in hs])
                else:
                    out.append((a, b, hs))
            i += 1
        return out


# ------------------------------------------------------------------------------------------------
# the vectorised path
# ------------------------------------------------------------------------------------------------
class _Compiled:
    """A plan as arrays: machine work, a padded ``(pieces x K)`` index array, ranks for ties."""

    def __init__(self, plan: StepPlan) -> None:
        self.plan = plan
        avail = plan.available
        self.n = n = len(avail)
        self.pos = {m: i for i, m in enumerate(avail)}
        self.L, self.K = plan.L, plan.K
        order = _sort_key(avail)
        self.rank = np.empty(n, dtype=np.int64)
        for r, m in enumerate(order):
            self.rank[self.pos[m]] = r
        kmax = max((len(p.machines) for p in plan.pieces), default=0)
        # padded with n: a sentinel machine that never finishes
        idx = np.full((len(plan.pieces), kmax), n, dtype=np.int64)
        for pi, p in enumerate(plan.pieces):
            idx[pi, :len(p.machines)] = [self.pos[m] for m in p.machines]
        self.piece_idx = idx
        self.task_work = np.asarray(_task_work(plan))
        self.work = np.bincount(idx.ravel(), weights=np.repeat(self.task_work, kmax),
                                minlength=n + 1)[:n]
        self._pieces_of: dict[int, list[int]] | None = None
        # membership index -> positions of avail in the present order (None: the same)
        self.take: dict[int, np.ndarray | None] = {}

    def pieces_of(self, i: int) -> list[int]:
        """Pieces machine ``i`` works on, in plan order (its task order)."""
        if self._pieces_of is None:
            po: dict[int, list[int]] = {}
            for pi, p in enumerate(self.plan.pieces):
                for m in p.machines:
                    po.setdefault(self.pos[m], []).append(pi)
            self._pieces_of = po
        return self._pieces_of.get(i, [])


def _execute(comp: _Compiled, index: Callable[[], _PlacementIndex], eff: np.ndarray,
             crashed: np.ndarray | None, est: np.ndarray, ts: float, crash_at: float,
             spec: Speculation | None, offset: np.ndarray | None = None,
             each: float = 0.0) -> StepOutcome:
    """One step of ``comp`` with effective speeds ``eff`` (speed / slowdown, aligned with the
    plan's machines).  ``index()`` gives the placement index (built only when needed).
    ``offset``: seconds added to each machine's own call (the runtime cost's dispatch and
    worker time, :func:`~elastic_coded.sim.cost.dispatch_offsets`); ``each``: the driver's
    time to take in one result (the cost's ``round_trip_s``), so that
    speculation goes by the call times the driver sees."""
    L = comp.L
    f = comp.work / eff * ts
    if offset is not None:
        f = f + offset
    f_live = f if crashed is None else np.where(crashed, np.inf, f)
    T = np.append(f_live, np.inf)[comp.piece_idx]
    if T.shape[1] == 1:
        kth = T[:, 0].copy()
    elif L == 1:
        kth = T.min(axis=1)
    else:
        kth = np.partition(T, L - 1, axis=1)[:, L - 1]
    free = f_live.copy()
    recovered: tuple[int, ...] = ()
    redispatched = 0
    lost = False
    if crashed is not None and crashed.any():
        recovered, redispatched, lost = _recover(comp, index, kth, f, f_live, crashed, free, eff,
                                                 est, ts, crash_at)
    copies, t_spec = 0, math.inf
    if spec is not None and not lost:
        copies, t_spec = _speculate(comp, index, kth, f, crashed, free, eff, ts, crash_at, spec,
                                    each)
    if lost:
        step = math.inf
    else:
        step = float(kth.max()) if kth.size else 0.0
    return StepOutcome(step, kth, f_live, recovered, redispatched, copies, t_spec)


def _live_spans(comp: _Compiled, index: Callable[[], _PlacementIndex],
                crashed: np.ndarray | None) -> _Spans:
    """``rows -> [(start, stop, [plan positions of live holders]), ...]``."""
    idx = index()
    avail = comp.plan.available
    live = {m for i, m in enumerate(avail) if crashed is None or not crashed[i]}
    return lambda rows: [(a, b, [comp.pos[m] for m in hs]) for a, b, hs in idx.spans(rows, live)]


def _recover(comp: _Compiled, index: Callable[[], _PlacementIndex], kth: np.ndarray,
             f: np.ndarray, f_live: np.ndarray, crashed: np.ndarray, free: np.ndarray,
             eff: np.ndarray, est: np.ndarray, ts: float, crash_at: float
             ) -> tuple[tuple[int, ...], int, bool]:
    """Re-dispatch the tasks of crashed machines (module docstring; the targets by
    :func:`~elastic_coded.schemes.policies.rules.assign_recovery`); updates ``kth`` and ``free``
    in place.  Returns ``(recovered pieces, tasks re-dispatched, lost)``."""
    plan, L, n = comp.plan, comp.L, comp.n
    events = sorted((crash_at * f[i], int(comp.rank[i]), int(i))
                    for i in np.flatnonzero(crashed) if comp.work[i] > 0)
    affected = sorted({p for _, _, i in events for p in comp.pieces_of(i)})
    results = {p: sorted(f_live[j] for j in comp.piece_idx[p] if j < n and not crashed[j])
               for p in affected}
    short = tuple(p for p in affected if len(results[p]) < L)
    spans = _live_spans(comp, index, crashed) if events else None
    redone = 0
    for t, _, i in events:
        # tasks of pieces not decoded before the crash was noticed
        lost = [p for p in comp.pieces_of(i) if len(results[p]) < L or results[p][L - 1] > t]
        rows = [plan.groups[plan.pieces[p].group].rows for p in lost]
        try:
            # spans is made whenever there are events
            parts = assign_recovery(rows, cast(_Spans, spans), est, comp.rank)
        except PlanError:
            kth[list(short)] = np.inf
            return short, redone, True
        done = [t] * len(lost)
        for k, a, b, h in parts:
            size = rows[k][1] - rows[k][0]
            free[h] = max(t, free[h]) + comp.task_work[lost[k]] * (b - a) / size / eff[h] * ts
            done[k] = max(done[k], free[h])
        for k, p in enumerate(lost):
            bisect.insort(results[p], done[k])
        redone += len(lost)
    for p in affected:
        kth[p] = results[p][L - 1]
    return short, redone, False


def _speculate(comp: _Compiled, index: Callable[[], _PlacementIndex], kth: np.ndarray,
               f: np.ndarray, crashed: np.ndarray | None, free: np.ndarray, eff: np.ndarray,
               ts: float, crash_at: float, spec: Speculation,
               each: float = 0.0) -> tuple[int, float]:
    """Backup copies (module docstring; the copies by
    :func:`~elastic_coded.schemes.policies.rules.backup_copies`), going by when the driver
    has taken each result in (``each`` apiece, as the runtime's deadline measures a call's
    time); updates ``kth`` and ``free`` in place.  Returns ``(copies, t*)``."""
    if comp.K != 1:
        raise ArgumentError(f"speculation: needs the uncoded split (L=1, S=0), the plan has "
                            f"L={comp.plan.L}, S={comp.plan.S}")
    orig = comp.piece_idx[:, 0]
    f_live = f if crashed is None else np.where(crashed, np.inf, f)
    seen = taken_in(f_live, each) if each > 0 else f_live
    t_star = speculation_start(np.append(seen, np.inf)[orig], spec.multiplier,
                               spec.min_completed(orig.size))
    if not math.isfinite(t_star):
        return 0, t_star
    # calls still in flight at t*: a machine's own call, unless it was taken in or its crash
    # was noticed
    own = seen if crashed is None else np.where(crashed, crash_at * f, seen)
    due = np.flatnonzero((comp.work > 0) & (own > t_star))
    if not due.size:
        return 0, t_star
    busy = (((comp.work > 0) & (own > t_star)).astype(np.int64)
            + (free > np.maximum(f_live, t_star)))
    spans = _live_spans(comp, index, crashed)
    plan = comp.plan
    calls = [(int(i), int(i), comp.pieces_of(int(i))) for i in due]
    holders: dict[int, list[int]] = {}
    for _, _, pieces in calls:
        for p in pieces:
            sp = spans(plan.groups[plan.pieces[p].group].rows)
            holders[p] = sp[0][2] if len(sp) == 1 else []
    copies = backup_copies(calls, holders, dict(enumerate(busy.tolist())),
                           lambda p: kth[p] > t_star, comp.rank)
    for i, k, h in copies:
        p = comp.pieces_of(i)[k]
        free[h] = max(t_star, free[h]) + comp.task_work[p] / eff[h] * ts
        kth[p] = min(kth[p], free[h])
    return len(copies), t_star


# ------------------------------------------------------------------------------------------------
# public single-step entry points
# ------------------------------------------------------------------------------------------------
def _step_inputs(plan: StepPlan, speeds: MachineValues, slowdowns: MachineValues | None,
                 crashed: Iterable[Hashable] | None, estimates: MachineValues | None,
                 time_scale: float, crash_at: float
                 ) -> tuple[tuple[Hashable, ...], np.ndarray, np.ndarray, np.ndarray,
                            set[Hashable]]:
    if not isinstance(plan, StepPlan):
        raise ArgumentTypeError(f"plan: expected a StepPlan, got {type(plan).__name__}")
    avail = plan.available
    sp = _aligned(speeds, avail, "speeds", None)
    sl = _aligned(slowdowns, avail, "slowdowns", 1.0)
    est = sp if estimates is None else _aligned(estimates, avail, "estimates", None)
    crashed = set(crashed or ())
    unknown = crashed - set(avail)
    if unknown:
        raise ArgumentError(f"crashed: machines {sorted(map(str, unknown))[:5]} "
                            "are not in the plan")
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ArgumentError(f"time_scale: positive and finite, got {time_scale!r}")
    if not 0 <= crash_at <= 1:
        raise ArgumentError(f"crash_at: a fraction in [0, 1], got {crash_at!r}")
    return avail, sp, sl, est, crashed


def step_time(plan: StepPlan, placement: Placement, speeds: MachineValues,
              slowdowns: MachineValues | None = None, crashed: Iterable[Hashable] | None = (),
              estimates: MachineValues | None = None, time_scale: float = 1.0,
              crash_at: float = 0.5,
              speculation: Speculation | None = None) -> StepOutcome:
    """Simulate one step of ``plan`` (module docstring), vectorised.

    ``speeds``, ``slowdowns`` (default 1) and ``estimates`` (the controller's speed estimates,
    used only to pick recovery machines; default ``speeds``): one value per machine of
    ``plan.available``, as a sequence in that order or a mapping.  ``crashed``: machines that die
    mid-step.  ``placement``: the storage at the start of the step (for recovery and copies).
    """
    avail, sp, sl, est, crashed = _step_inputs(plan, speeds, slowdowns, crashed, estimates,
                                               time_scale, crash_at)
    comp = _Compiled(plan)
    mask = np.array([m in crashed for m in avail]) if crashed else None
    cache: list[_PlacementIndex] = []

    def index() -> _PlacementIndex:
        if not cache:
            cache.append(_PlacementIndex(placement))
        return cache[0]

    return _execute(comp, index, sp / sl, mask, est, float(time_scale), float(crash_at),
                    speculation)
