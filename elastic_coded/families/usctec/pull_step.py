"""How one pull-policy step is laid out and which execution ``usctec-auto`` gives it: the
decisions the runtime's pull executor (:mod:`elastic_coded.families.usctec.executor_pull`) and the
simulator (:mod:`elastic_coded.sim.pull`) both make, written once.  Pure: no Ray.

* :func:`unit_rates`, :func:`expected_seconds`: what a step is expected to take;
* :func:`layout`: the sub-divided plan and its queue (:class:`~.pull.CodedQueue` or
  :class:`~.pull.DynamicQueue`), and :func:`next_lag`, what the next step's coded queue
  expects every call to take beyond its work;
* :func:`pull_pays` and :func:`auto_mode`: ``usctec-auto``'s choice of ``"pull"``,
  ``"eager"`` or ``"lean"`` (:func:`~.pull.choose_mode`, :func:`~.pull.prefer_pull`);
* :func:`seen_slowed` and :func:`history_entry`: the stragglers a step saw, and what it adds
  to the history the next choice reads.

Products are counted as the runtime counts them: ``total`` is the products of the step with
its zero columns (``num_rows * L * columns per coded block``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence, Sized
from typing import Any, cast

import numpy as np

from ...schemes.plan import Placement
from . import pull as pl

__all__ = ["FINE", "unit_rates", "expected_seconds", "layout", "pull_pays", "auto_mode",
           "mode_before_plan", "mode_and_next", "seen_slowed", "history_entry", "tick_of",
           "SLOW_FACTOR", "LATE_FACTOR", "next_lag", "lag_after", "LAG_QUANTILE", "LAG_SAMPLES",
           "LAG_CAP"]

FINE = 3
"""Units per call of planned work: a machine's share comes in ``units`` calls of ``FINE`` units
each, so a machine that runs out of work can take over a third of a call."""

SLOW_FACTOR = 1 / 3
"""A machine that returned at below this fraction of the step's median measured speed (over
its estimate) straggled (:func:`seen_slowed`)."""

LATE_FACTOR = 0.8
"""A call given up after it started whose upper bound on the speed is below this fraction of
the median straggled (:func:`seen_slowed`)."""


LAG_QUANTILE = 0.75
"""The share of a pull step's returned calls whose lag the next step's coded queue allows
every call (:func:`next_lag`)."""

LAG_SAMPLES = 8
"""Returned calls a step needs before its lag replaces the one it was given."""

LAG_CAP = 2.0
"""The lag allowed is at most this many times a call's expected time
(:attr:`~.pull.CodedQueue.batch_s`), so a step where most calls straggled does not blind the
next one to its stragglers.  Twice, not less: at 48 emulated machines on 2 cores and 50 ms
steps, results wait on the host a quarter of the time for 1.5-2.5x a call's expected time
(capped at half a call, ``usctec-pull`` still made 80 backups a step to the simulator's 48)."""


def next_lag(lags: Iterable[float], batch_s: float, prev: float = 0.0) -> float:
    """The seconds the next pull step's coded queue expects every call to take beyond its work
    (:attr:`~.pull.CodedQueue.lag_s`): the :data:`LAG_QUANTILE` quantile of what this step's
    returned calls took beyond their expected time (``lags``, as the driver saw them: the
    trip there and back, the worker's own cost, the driver's delay in taking the result in),
    at least 0 and at most :data:`LAG_CAP` times ``batch_s``; ``prev`` when fewer than
    :data:`LAG_SAMPLES` calls returned.  Without it, a call whose result waits on a busy driver
    looks overdue, is expected to take as long again, and its piece gets a coded backup
    nobody needs (at 48 machines on 2 cores, 2.5x the backups a step needs)."""
    lags = [float(x) for x in lags]
    if len(lags) < LAG_SAMPLES:
        return float(prev)
    q = float(np.quantile(lags, LAG_QUANTILE))
    return min(max(q, 0.0), LAG_CAP * max(float(batch_s), 0.0))


def lag_after(queue: pl.CodedQueue | pl.DynamicQueue, prev: float) -> float:
    """The lag the next pull step allows after a step run by ``queue`` given ``prev``:
    :func:`next_lag` of a coded queue's returned calls; ``prev`` after ``dynamic``'s queue,
    which has no expected times."""
    if isinstance(queue, pl.CodedQueue):
        return next_lag(queue.lags, queue.batch_s, prev)
    return float(prev)


def unit_rates(available: Iterable[Hashable], speeds: Mapping[Hashable, float], per: float
               ) -> dict[Hashable, float]:
    """Products per second expected of each machine before it returns a unit: its speed
    estimate times ``per``, the products per second per unit of speed (emulation: ``total /
    time_scale``; at real speed the last pull step's measured figure)."""
    return {m: float(speeds.get(m, 1.0)) * per for m in available}


def expected_seconds(plan: pl.PullPlan, rates: Mapping[Hashable, float], total: int) -> float:
    """The step's expected time: the slowest machine's planned products over its rate."""
    work: dict[Hashable, float] = {m: 0 for m in plan.available}
    cols = max(1, total // max(1, plan.num_rows))
    for m, ts in plan.tasks().items():
        work[m] = sum(t.rows[1] - t.rows[0] for t in ts) * cols / plan.L
    return max((w / rates[m] for m, w in work.items() if w), default=0.0)


def _units(options: pl.PullOptions, expected: float, machines: int) -> int:
    u = options.units
    # an int unless "auto" (:class:`~.pull.PullOptions` checks it)
    return pl.units_for(expected, machines, options.call_cost_s) if u == "auto" else cast(int, u)


def layout(plan: pl.PullPlan, placement: Placement, total: int, rates: Mapping[Hashable, float],
           options: pl.PullOptions | None = None, lag_s: float = 0.0
           ) -> tuple[Any, pl.CodedQueue | pl.DynamicQueue]:
    """The step's sub-divided plan and its queue: ``dynamic``'s chunks (re-cut when the option
    asks for another count than the plan's) in a :class:`~.pull.DynamicQueue`, or the coded
    plan cut into :data:`FINE` ``*`` units per machine (:func:`~.pull.units_for` when
    ``units="auto"``) in a :class:`~.pull.CodedQueue` whose calls carry about a unit's share of
    the expected time, each expected to take ``lag_s`` seconds beyond its work
    (:func:`next_lag`).  (The plan is a :class:`~.pull.PullPlan`, typed ``Any``: the runtime
    hands it on where a ``StepPlan``'s fields are read, which it has.)"""
    opts = options or pl.PullOptions()
    if plan.copies:
        n = opts.chunks * len(plan.available)
        if n != plan.chunks:
            plan = pl.dynamic_plan(placement, plan.available, plan.speeds, 1, 0, chunks=n)
        units = [pl.Unit(pi, 0, plan.groups[p.group].rows, p.cols)
                 for pi, p in enumerate(plan.pieces)]
        prod: dict[object, int] = {u: u.num_rows * total // plan.num_rows for u in units}
        return plan, pl.DynamicQueue(units, plan.holders, prod)
    expected = expected_seconds(plan, rates, total)
    u = _units(opts, expected, len(plan.available))
    sub, queues = pl.subdivide(plan, FINE * u)
    cols = total // plan.num_rows / plan.L
    prod = {}
    for piece in range(len(sub.pieces)):  # every position: backups use the unplanned ones
        rows = sub.groups[sub.pieces[piece].group].rows
        for pos in range(sub.K):
            prod[pl.Unit(piece, pos, rows, sub.pieces[piece].cols)] = \
                int((rows[1] - rows[0]) * cols)
    return sub, pl.CodedQueue(queues, sub.L, sub.K, sub.holders, prod, dict(rates),
                              batch_s=expected / u, lag_s=lag_s)


def tick_of(queue: object) -> float | None:
    """How often the driver wakes while machines sit idle, so a coded backup can start once a
    unit is overdue: the coded queue's nap (a twentieth of a call's expected time, at least
    5 ms; ``None`` for ``dynamic``'s queue, whose rules look at the clock only when a result
    arrives)."""
    nap: float | None = getattr(queue, "nap_s", None)
    return nap


def pull_pays(L: int, S: int, speeds: Mapping[Hashable, float], total: int, per: float,
              options: pl.PullOptions | None = None) -> bool:
    """``usctec-auto``: whether a step pulls (:func:`~.pull.prefer_pull`), its expected time
    the ``(L, 0)`` work, ``total`` products, spread over the machines' ``speeds`` at ``per``
    products per second per unit of speed.  It needs no plan, so the execution is chosen
    before the plan is made and only that plan is asked for."""
    opts = options or pl.PullOptions()
    expected = total / (per * max(sum(float(v) for v in speeds.values()), 1e-12))
    u = _units(opts, expected, len(speeds))
    return pl.prefer_pull(expected, L, S, len(speeds), u, opts.call_cost_s)


def auto_mode(plan: pl.PullPlan, history: Sequence[tuple[Any, ...]],
              speeds: Mapping[Hashable, float], total: int, per: float,
              options: pl.PullOptions | None = None) -> str:
    """``usctec-auto``'s execution of a step: ``"pull"``, ``"eager"`` (the whole ``(L, S)``
    plan) or ``"lean"`` (the whole ``(1, 0)`` plan), by :func:`~.pull.choose_mode` on
    ``history`` (:func:`history_entry` per recent step) and :func:`pull_pays` over the plan's
    machines.  A plan without the whole plans beside it (``usctec-pull``, ``dynamic``) always
    pulls."""
    if plan.eager is None and plan.lean is None:
        return "pull"
    return mode_before_plan(history, plan.available, speeds, plan.L, plan.S, total, per,
                            options)


def mode_before_plan(history: Sequence[tuple[Any, ...]], machines: Iterable[Hashable],
                     speeds: Mapping[Hashable, float], L: int, S: int, total: int,
                     per: float, options: pl.PullOptions | None = None) -> str:
    """:func:`auto_mode` before the plan is made: over ``machines`` (the step's, an estimate
    of 1.0 where ``speeds`` has none), so that only the chosen execution's plan is asked for,
    as the runtime's driver does."""
    return mode_and_next(history, machines, speeds, L, S, total, per, options)[0]


def mode_and_next(history: Sequence[tuple[Any, ...]], machines: Iterable[Hashable],
                  speeds: Mapping[Hashable, float], L: int, S: int, total: int, per: float,
                  options: pl.PullOptions | None = None) -> tuple[str, str]:
    """``(mode, expected)``: :func:`mode_before_plan`, and the execution the driver then
    expects of the next step (:func:`~.modes.next_mode`: the plan it asks for ahead, while this
    step runs; the next step asks again when it runs another)."""
    est = {m: float(speeds.get(m, 1.0)) for m in machines}
    pays = pull_pays(L, S, est, total, per, options)
    mode = pl.choose_mode(list(history), pays)
    return mode, pl.next_mode(list(history), mode, pays)


def seen_slowed(measured: Mapping[Hashable, tuple[float, str]],
                speeds: Mapping[Hashable, float], factor: float = SLOW_FACTOR,
                late: float = LATE_FACTOR) -> tuple[Hashable, ...]:
    """The step's stragglers as observed, from ``measured``: ``{machine: (speed, "value" |
    "upper")}`` (a speed measured where a call came back, an upper bound where one was given
    up after it started).  Each machine's measured speed over its estimate ``speeds[m]`` is set
    against the median of that ratio over the calls that came back (the median takes out what
    every call pays alike): below ``factor`` of it for a value, below ``late`` of it for an
    upper bound (a machine on time is cancelled before its call is due, so its bound is above
    its speed)."""
    meas = {m: (v / float(speeds[m]), kind) for m, (v, kind) in measured.items()
            if m in speeds and float(speeds[m]) > 0}
    vals = [x for x, kind in meas.values() if kind == "value"]
    med = float(np.median(vals)) if vals else 1.0
    return tuple(sorted((m for m, (x, kind) in meas.items()
                         if x < (factor if kind == "value" else late) * med), key=str))


def history_entry(mode: str | None, slowed: Sized, seconds: float | None = None) -> tuple[Any, ...]:
    """What a step adds to ``usctec-auto``'s history: ``(observed, slowed)``, ``observed``
    false for an ``"eager"`` step (the whole ``(L, S)`` plan cancels its slowest calls about
    when the others finish, so it sees no one); ``(observed, slowed, seconds)`` with the step's
    time, at real speed (:func:`~.modes.choose_mode`)."""
    if seconds is None:
        return (mode != "eager", len(slowed))
    return (mode != "eager", len(slowed), float(seconds))
