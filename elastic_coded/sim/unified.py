"""The unified coding framework (MATH.md §2) in simulated time.  Pure: numpy (no Ray).

The storage is kept the runtime's way (its ``UnifiedKeeper``): designed for the first machines,
then, before every step, :func:`~elastic_coded.schemes.policies.unified.plan_storage` for the
machines present, which re-encodes and re-stores everything when fewer than ``q`` of the
design's servers are left, when machines joined (``grow``), or when the step's inputs do not fit.
A step's Map: the latencies of the design's ``K`` servers drawn by
:func:`~elastic_coded.schemes.policies.unified.map_latencies` with the runtime's generator
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

The design is made for ``rows`` rows of ``A`` (default 1: the smallest design, every row count
being padded to the design's multiple); the Map time does not depend on it, the rows moved by a
re-design scale with it (they are reported in the design's coded rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..algebra.fields import field as make_field
from ..schemes.plan import PlanError
from ..schemes.policies import unified as uni
from ..schemes.policies.rules import paced, quorum_time

__all__ = ["UnifiedVariant", "UnifiedRun", "UnifiedStep", "map_time"]


@dataclass(frozen=True)
class UnifiedVariant:
    """Policy ``unified`` as the simulator runs it: its options and the rows of ``A`` its
    designs are made for (module docstring)."""

    name: str = "unified"
    options: uni.UnifiedOptions = field(default_factory=uni.UnifiedOptions)
    rows: int = 1

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: a non-empty string, got {self.name!r}")
        if not isinstance(self.options, uni.UnifiedOptions):
            raise TypeError(f"options: a UnifiedOptions, got {type(self.options).__name__}")
        if isinstance(self.rows, bool) or not isinstance(self.rows, int) or self.rows < 1:
            raise ValueError(f"rows: an int >= 1, got {self.rows!r}")

    @property
    def inputs(self) -> int:
        """Inputs per step (``options.N``, default ``q``), as the runtime's keeper designs."""
        return self.options.N or self.options.q


@dataclass(frozen=True)
class UnifiedStep:
    """One simulated unified step."""

    time: float
    """When the fastest ``q`` servers finished their Map (``inf``: lost)."""
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


def _finish(storage, lat, present, speed, slow, crashed, ts: float, crash_at: float) -> list:
    """``[(server, finish or inf, when its call has returned or failed), ...]``."""
    out = []
    for k in storage.live(present):
        mach = storage.servers[k]
        d = paced(float(lat[k]), ts, float(slow.get(mach, 1.0)), float(speed[mach]))
        out.append((k, math.inf, crash_at * d) if mach in crashed else (k, d, d))
    return out


def map_time(storage: uni.UnifiedStorage, lat: np.ndarray, present, speed, slow, crashed,
             time_scale: float) -> float:
    """The Map time of one attempt (module docstring): the ``q``-th smallest finish of the
    live servers; ``speed``/``slow``: ``{machine: value}`` (slowdown default 1), ``crashed``:
    machines that die during the step (``inf`` when fewer than ``q`` others finish)."""
    fin = _finish(storage, lat, present, speed, slow, crashed, time_scale, 0.0)
    return quorum_time([f for _, f, _ in fin], storage.q)


class UnifiedRun:
    """One unified variant over a trace: its storage across steps and each step's Map."""

    def __init__(self, variant: UnifiedVariant, machines, seed: int, time_scale: float,
                 crash_at: float = 0.5):
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

    def _keep(self, present) -> tuple[uni.UnifiedStorage, int, int]:
        """``plan_storage`` for ``present``: the storage, re-encodings (0 or 1), rows moved."""
        old = self.storage
        st, new = uni.plan_storage(self.v.options, self.v.rows, list(present), old,
                                   self.v.inputs, self.F)
        self.storage = st
        redesign = int(new and old is not None)
        return st, redesign, (uni.values_moved(st, 1)[0] if new else 0)

    def step(self, t: int, present, speed, slow, crashed) -> UnifiedStep:
        """Step ``t`` for the machines ``present`` (``speed``, ``slow``: by machine)."""
        redesigns = moved = 0
        start, left = 0.0, list(present)
        for attempt in range(2):
            try:
                st, r, mv = self._keep(left)
            except PlanError:  # too few machines for any design: the runtime fails the step
                st = self.storage
                return UnifiedStep(math.inf, redesigns, moved, st.design.K if st else 0,
                                   st.q if st else 0, len(st.live(present)) if st else 0,
                                   st.design.m if st else 0)
            redesigns, moved = redesigns + r, moved + mv
            live = len(st.live(present)) if attempt == 0 else len(st.live(left))
            lat = uni.map_latencies(st, self.v.inputs, np.random.default_rng([self.seed, t]))
            fin = _finish(st, lat, left, speed, slow, crashed if attempt == 0 else (), self.ts,
                          self.crash_at)
            T = quorum_time([f for _, f, _ in fin], st.q)
            if math.isfinite(T) or attempt:
                return UnifiedStep(start + T, redesigns, moved, st.design.K, st.q, live,
                                   st.design.m)
            # fewer than q finish: known when every call has returned or failed; run again
            # on the machines left, without the crashes
            start = max((done for _, _, done in fin), default=0.0)
            left = [n for n in left if n not in crashed]
        raise AssertionError("unreachable")  # pragma: no cover
