"""The unified coding framework (MATH.md §2) in simulated time.  Pure: numpy (no Ray).

The storage is kept the runtime's way (its ``UnifiedKeeper``): designed for the first machines,
then, before every step, :func:`~elastic_coded.families.unified.policy.plan_storage` for the
machines present, which re-encodes and re-stores everything when fewer than ``q`` of the
design's servers are left, when machines joined (``grow``), or when the step's inputs do not fit.
A step's Map: the latencies of the design's ``K`` servers drawn by
:func:`~elastic_coded.families.unified.policy.map_latencies` with the runtime's generator
``default_rng([seed, step])``; a live server ``k`` on machine ``n`` finishes at
``lat[k] * time_scale * slowdown[n] / speed[n]``
(:func:`~elastic_coded.schemes.policies.rules.paced`), a server that crashes never does; the
Map ends when the fastest ``q`` have finished
(:func:`~elastic_coded.schemes.policies.rules.quorum_time`).  When crashes leave fewer than ``q``
servers to finish, the runtime finds out once every call has returned or failed (a crash is
noticed at ``crash_at`` of its call's time), re-encodes for the machines left (``plan_storage``:
fewer than ``q`` servers) and runs the step again, drawing the new design's latencies from the
same generator; the step time is then the failed attempt's plus the new Map's.  A step is lost
(``inf``) only when no design fits the machines left.  The step time is the Map's: the Shuffle
and the Reduce are not timed (their communication load ``L(q)`` is the design's, MATH.md §2).

Lies, as the runtime's verified step (``families/unified/verify.py``, ``UnifiedChecks.verify``
and ``_repair``): a lying machine's Map result is wrong, and the product decoded by the Reduce
fails the check only when a liar is among the fastest ``q`` (the servers whose Map results the
Shuffle uses); a liar outside them costs nothing.  The check fails after the Reduce (untimed, so
at the Map's end); every server of the fastest ``q`` then hands over the Map result it kept (a
repair call each, no compute: no time in the compute model), and the liars among them are
caught.  When the coded rows of the honest ones decode
(:func:`~elastic_coded.families.unified.decoding_rows`), the product is decoded again at the
driver (untimed): the lie costs no time.  Otherwise the other servers, in server order, compute
their Map again one after the other (the driver waits for each) until the rows that check
decode: a server whose machine is not present or already caught is skipped, a crashed one fails
at once, one that lies in this step lies again (and is caught); each takes its Map's time of
the step, ``lat[k] * time_scale * slowdown / speed`` (the runtime's emulation does not pace
these calls, ``pace_s = 0``; a real machine takes its Map's time).  When the rows that check
never decode the runtime raises, and the step is lost (``inf``).  The machines are taken as free
at the Map's end (the runtime cancels the calls of the slower servers).

The design is made for ``rows`` rows of ``A`` (default 1: the smallest design, every row count
being padded to the design's multiple); the Map time does not depend on it, the rows moved by a
re-design scale with it (they are reported in the design's coded rows).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ...algebra.fields import field as make_field
from ...errors import ArgumentError, ArgumentTypeError, InternalError
from ...schemes.plan import PlanError
from ...schemes.policies.rules import paced, quorum_time
from .. import SimModel
from . import StorageDesign, decoding_rows
from . import policy as uni

if TYPE_CHECKING:
    from ...sim.results import Record
    from ...sim.runner import _Ctx, _Env
    from ...sim.trace import Trace

__all__ = ["UnifiedVariant", "UnifiedRun", "UnifiedStep", "UnifiedSim", "SIM_MODEL", "map_time",
           "repair"]


@dataclass(frozen=True)
class UnifiedVariant:
    """Policy ``unified`` as the simulator runs it: its options and the rows of ``A`` its
    designs are made for (module docstring)."""

    family: ClassVar[str] = "unified"
    name: str = "unified"
    options: uni.UnifiedOptions = field(default_factory=uni.UnifiedOptions)
    rows: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentError(f"name: a non-empty string, got {self.name!r}")
        if not isinstance(self.options, uni.UnifiedOptions):
            raise ArgumentTypeError(f"options: a UnifiedOptions, got {type(self.options).__name__}")
        if isinstance(self.rows, bool) or not isinstance(self.rows, int) or self.rows < 1:
            raise ArgumentError(f"rows: an int >= 1, got {self.rows!r}")

    @property
    def inputs(self) -> int:
        """Inputs per step (``options.N``, default ``q``), as the runtime's keeper designs."""
        return self.options.N or self.options.q


@dataclass(frozen=True)
class UnifiedStep:
    """One simulated unified step."""

    time: float
    """When the fastest ``q`` servers finished their Map, plus the repair of a lie among them
    (``inf``: lost)."""
    redesigns: int
    """Re-encodings for this step: before it, and after crashes left fewer than ``q``."""
    rows_moved: int
    """Coded rows stored anew for this step."""
    K: int
    q: int
    live: int
    """Servers of the design present (crashing ones included)."""
    m: int = 0
    """Rows of ``A`` the design in force is padded to (rows moved / ``m``: copies of ``A``)."""
    repairs: int = 0
    """Products repaired (0 or 1): a liar was among the fastest ``q`` (module docstring)."""
    repair_calls: int = 0
    """Repair calls: the kept Map results fetched, then the Maps computed again."""
    caught: tuple[Hashable, ...] = ()
    """Machines caught lying in this step."""


_Finish = tuple[int, float, float]
"""``(server, finish or inf, when its call has returned or failed)``."""


def _finish(storage: uni.UnifiedStorage, lat: np.ndarray, present: Iterable[Hashable],
            speed: Mapping[Hashable, float], slow: Mapping[Hashable, float],
            crashed: Container[Hashable], ts: float, crash_at: float) -> list[_Finish]:
    """``[(server, finish or inf, when its call has returned or failed), ...]``."""
    out: list[_Finish] = []
    for k in storage.live(present):
        mach = storage.servers[k]
        d = paced(float(lat[k]), ts, float(slow.get(mach, 1.0)), float(speed[mach]))
        out.append((k, math.inf, crash_at * d) if mach in crashed else (k, d, d))
    return out


def map_time(storage: uni.UnifiedStorage, lat: np.ndarray, present: Iterable[Hashable],
             speed: Mapping[Hashable, float], slow: Mapping[Hashable, float],
             crashed: Container[Hashable], time_scale: float) -> float:
    """The Map time of one attempt (module docstring): the ``q``-th smallest finish of the
    live servers; ``speed``/``slow``: ``{machine: value}`` (slowdown default 1), ``crashed``:
    machines that die during the step (``inf`` when fewer than ``q`` others finish)."""
    fin = _finish(storage, lat, present, speed, slow, crashed, time_scale, 0.0)
    return quorum_time([f for _, f, _ in fin], storage.q)


@dataclass(frozen=True)
class _Repair:
    """What a lie cost one unified step (module docstring)."""

    time: float = 0.0
    """Time after the Map's end (``inf``: the rows that check never decode)."""
    repairs: int = 0
    calls: int = 0
    caught: tuple[Hashable, ...] = ()


def repair(storage: uni.UnifiedStorage, lat: np.ndarray, fin: Sequence[_Finish],
           present: Iterable[Hashable], speed: Mapping[Hashable, float],
           slow: Mapping[Hashable, float], crashed: Iterable[Hashable],
           lying: Iterable[Hashable], time_scale: float) -> _Repair:
    """The detection and repair of lies in one unified Map (module docstring), as the runtime's
    ``UnifiedChecks._repair``: ``fin`` from the Map's finishes (``[(server, finish, _)]``),
    ``present`` the machines with a handle, ``crashed`` those dead, ``lying`` those that lie."""
    lying, d = set(lying), storage.design
    done = sorted((f, k) for k, f, _ in fin if math.isfinite(f))
    Q = [k for _, k in done[:storage.q]]
    if not lying.intersection(storage.servers[k] for k in Q):
        return _Repair()
    caught = [storage.servers[k] for k in Q if storage.servers[k] in lying]
    good = {i for k in Q if storage.servers[k] not in lying
            for a, b in storage.ranges_of(k) for i in range(a, b)}
    calls, extra, present, crashed = len(Q), 0.0, set(present), set(crashed)
    for k in (k for k in range(len(storage.servers)) if k not in Q):
        if _decodes(d, good):
            break
        mach = storage.servers[k]
        if mach not in present or mach in caught:
            continue
        calls += 1
        if mach in crashed:  # dead: the call fails at once
            continue
        extra += paced(float(lat[k]), time_scale, float(slow.get(mach, 1.0)),
                       float(speed[mach]))
        if mach in lying:  # it lies again in this step: caught
            caught.append(mach)
        else:
            good.update(i for a, b in storage.ranges_of(k) for i in range(a, b))
    if not _decodes(d, good):
        extra = math.inf
    return _Repair(extra, 1, calls, tuple(caught))


def _decodes(design: StorageDesign, rows: set[int]) -> bool:
    """Whether the coded ``rows`` decode the product (the driver's ``decoding_rows``)."""
    return decoding_rows(design, sorted(rows)) is not None


class UnifiedRun:
    """One unified variant over a trace: its storage across steps and each step's Map."""

    def __init__(self, variant: UnifiedVariant, machines: Iterable[Hashable], seed: int,
                 time_scale: float, crash_at: float = 0.5) -> None:
        self.v = variant
        self.seed = int(seed)
        self.ts, self.crash_at = float(time_scale), float(crash_at)
        self.F = make_field("real")
        self.storage: uni.UnifiedStorage | None = None
        try:
            self.storage, _ = uni.plan_storage(variant.options, variant.rows, list(machines),
                                               None, variant.inputs, self.F)
        except PlanError:  # too few machines: every step fails until enough are present
            pass

    def _keep(self, present: Iterable[Hashable]) -> tuple[uni.UnifiedStorage, int, int]:
        """``plan_storage`` for ``present``: the storage, re-encodings (0 or 1), rows moved."""
        old = self.storage
        st, new = uni.plan_storage(self.v.options, self.v.rows, list(present), old,
                                   self.v.inputs, self.F)
        self.storage = st
        redesign = int(new and old is not None)
        return st, redesign, (uni.values_moved(st, 1)[0] if new else 0)

    def step(self, t: int, present: Sequence[Hashable], speed: Mapping[Hashable, float],
             slow: Mapping[Hashable, float], crashed: Collection[Hashable],
             lying: Collection[Hashable] = ()) -> UnifiedStep:
        """Step ``t`` for the machines ``present`` (``speed``, ``slow``: by machine;
        ``crashed``: machines that die in it, ``lying``: those returning wrong results)."""
        redesigns = moved = 0
        start, left = 0.0, list(present)
        for attempt in range(2):
            try:
                st, r, mv = self._keep(left)
            except PlanError:  # too few machines for any design: the runtime fails the step
                cur = self.storage
                return UnifiedStep(math.inf, redesigns, moved, cur.design.K if cur else 0,
                                   cur.q if cur else 0, len(cur.live(present)) if cur else 0,
                                   cur.design.m if cur else 0)
            redesigns, moved = redesigns + r, moved + mv
            live = len(st.live(present)) if attempt == 0 else len(st.live(left))
            lat = uni.map_latencies(st, self.v.inputs, np.random.default_rng([self.seed, t]))
            dead = crashed if attempt == 0 else ()
            fin = _finish(st, lat, left, speed, slow, dead, self.ts, self.crash_at)
            T = quorum_time([f for _, f, _ in fin], st.q)
            if math.isfinite(T) or attempt:
                rep = (repair(st, lat, fin, left, speed, slow, dead, lying, self.ts)
                       if math.isfinite(T) and lying else _Repair())
                return UnifiedStep(start + T + rep.time, redesigns, moved, st.design.K, st.q,
                                   live, st.design.m, rep.repairs, rep.calls, rep.caught)
            # fewer than q finish: known when every call has returned or failed; run again
            # on the machines left, without the crashes
            start = max((done for _, _, done in fin), default=0.0)
            left = [n for n in left if n not in crashed]
        raise InternalError("unreachable")  # pragma: no cover


class UnifiedSim:
    """Runs a :class:`UnifiedVariant` in :func:`~elastic_coded.sim.runner.simulate`, one
    ``step(ctx, record)`` per step."""

    def __init__(self, v: UnifiedVariant, trace: Trace, configured: np.ndarray, env: _Env
                 ) -> None:
        self.name = v.name
        self.run = UnifiedRun(v, trace.ids[:trace.N], env.seed, env.ts, env.crash_at)

    def step(self, ctx: _Ctx, rec: Record) -> None:
        out = self.run.step(ctx.t, ctx.present, ctx.by_machine(ctx.speed),
                            ctx.by_machine(ctx.slowdown), set(ctx.crashed_ids), ctx.lying_ids)
        n, t = self.name, ctx.t
        rec.times[n][t] = out.time
        rec.redesigns[n][t] = out.redesigns
        rec.rows_moved[n][t] = out.rows_moved
        for key in ("K", "q", "live", "m", "repairs", "repair_calls"):
            rec.detail(n, key, t, getattr(out, key))
        rec.detail(n, "caught", t, len(out.caught))


def _variant(options: uni.UnifiedOptions | None, masters: Sequence[int] | None
             ) -> UnifiedVariant:
    return UnifiedVariant("unified", options or uni.UnifiedOptions())


SIM_MODEL = SimModel(_variant, UnifiedSim)
"""The unified family in the simulator (its :class:`~elastic_coded.families.Family`'s ``sim``)."""
