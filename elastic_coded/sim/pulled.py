"""The USCTEC family's steps in :func:`~elastic_coded.sim.runner.simulate`: plans dispatched
whole (``usctec``, ``proportional``, ``cyclic``, ``uncoded``, ``speculative``) and pulled
(``usctec-pull``, ``dynamic``, and ``usctec-auto`` with its choice of execution), with the
runtime's cost when one is given.  Pure: no Ray.

``usctec-auto`` chooses each step's execution as the runtime's pull executor does
(:func:`~elastic_coded.families.usctec.pull_step.auto_mode`, from the last steps' history):
``"pull"`` runs :func:`~elastic_coded.sim.pull.pull_step`; ``"eager"`` (the
whole ``(L, S)`` plan) and ``"lean"`` (the whole ``(1, 0)`` plan, with the step deadline's
backups when ``deadline`` is set) run as whole plans.  What the step saw of its stragglers
(:func:`~elastic_coded.families.usctec.pull_step.seen_slowed` over the speeds measured as the
runtime's gather measures them: returned calls, and upper bounds for calls given up) goes into
the history the next step's choice reads (:func:`~.pull_step.history_entry`).

Lies: a step decodes from liars' results as from any, and pays for them as the runtime's
verification does, after the decode (:mod:`~elastic_coded.sim.lagrange_lies`: the pieces that
used a lie repaired from the results that check, with repair calls where too few do;
``details`` ``repairs``, ``repair_calls`` and ``caught``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, overload

import numpy as np

from ..families.usctec import pull as pl
from ..families.usctec import pull_step as ps
from ..families.usctec import validate
from ..schemes.plan import Placement, StepPlan
from ..schemes.registry import policy_of
from .cost import agents_of, dispatch_offsets, driver_finish, two_level_finish
from .executor import Speculation, _Compiled, _execute
from .lagrange_lies import repair_lies
from .learn import _learn
from .pull import pull_products, pull_step

if TYPE_CHECKING:
    from .cost import RuntimeCost
    from .executor import StepOutcome, _PlacementIndex
    from .lagrange_lies import LieRepair
    from .learn import _Learner
    from .plan_cache import PlanCache
    from .results import Record
    from .variants import Variant

__all__ = ["WholeRun", "PulledRun", "MODES"]

_C = TypeVar("_C", "_Compiled", "_PullCompiled")   # a plan compiled
_Index = Callable[[], "_PlacementIndex"]
"""The placement index, built when first asked for (:meth:`~.runner._Storage.index`)."""
_Measured = dict[Hashable, tuple[float, str]]
"""``{machine: (speed, "value" or "upper")}``, as the runtime's gather measures them."""


# what the runs read of the runner's values (:mod:`.runner` imports this module)
class _Ctx(Protocol):
    """One step of the trace (:class:`~.runner._Ctx`)."""

    t: int
    m_idx: int
    present: tuple[str, ...]
    slots: np.ndarray
    crashed: np.ndarray | None
    lying: np.ndarray | None
    moved: dict[str, int]

    @property
    def eff(self) -> np.ndarray: ...


class _Env(Protocol):
    """What every step of every policy shares (:class:`~.runner._Env`)."""

    @property
    def L(self) -> int: ...

    @property
    def S(self) -> int: ...

    @property
    def ts(self) -> float: ...

    @property
    def crash_at(self) -> float: ...

    @property
    def seed(self) -> int: ...

    @property
    def check_plans(self) -> bool: ...

    @property
    def cost(self) -> RuntimeCost | None: ...

    @property
    def deadline(self) -> float | None: ...

    @property
    def pull_options(self) -> pl.PullOptions | None: ...


class _Storage(Protocol):
    """One placement kind's storage (:class:`~.runner._Storage`)."""

    version: int

    @property
    def placement(self) -> Placement: ...
    def index(self) -> _PlacementIndex: ...


MODES = {"pull": 0, "eager": 1, "lean": 2, "whole": 3}
"""How a step ran, as recorded in ``SimResult.details[name]["mode"]``."""


def _take(comp: _Compiled | _PullCompiled, ctx: _Ctx) -> np.ndarray | None:
    """Positions of the plan's machines in the step's present order (``None``: the same)."""
    take = comp.take.get(ctx.m_idx)
    if take is None and ctx.m_idx not in comp.take:
        avail = comp.plan.available
        take = (None if avail == ctx.present
                else np.array([ctx.present.index(m) for m in avail], dtype=np.int64))
        comp.take[ctx.m_idx] = take
    return take


@overload
def _sel(arr: np.ndarray, take: np.ndarray | None) -> np.ndarray: ...


@overload
def _sel(arr: None, take: np.ndarray | None) -> None: ...


def _sel(arr: np.ndarray | None, take: np.ndarray | None) -> np.ndarray | None:
    if arr is None or take is None:
        return arr
    out: np.ndarray = arr[take]
    return out


def run_whole(comp: _Compiled, index: _Index, eff: np.ndarray, lost: np.ndarray | None,
              est: np.ndarray, env: _Env, spec: Speculation | None,
              cost: RuntimeCost | None = None) -> tuple[StepOutcome, float]:
    """A whole plan's step: its outcome, and its time with the runtime cost (``cost``, by
    default the simulation's, if any), at least the host floor of its calls (one per worker
    process, plus copies and re-dispatches)."""
    cost = env.cost if cost is None else cost
    offset = dispatch_offsets(comp.work > 0, cost) if cost is not None else None
    each = cost.round_trip_s if cost is not None else 0.0
    out = _execute(comp, index, eff, lost, est, env.ts, env.crash_at, spec, offset, each)
    t = out.time
    if cost is not None and math.isfinite(t):
        has = int(np.count_nonzero(comp.work > 0))
        if cost.group:  # two levels: the results reach the driver in their agents' messages
            t = two_level_finish(out.finish, t, agents_of(comp.work > 0, cost.group), cost)[0]
            calls = -(-has // cost.group) + out.copies + out.redispatched
        else:
            t = driver_finish(out.finish, t, cost)
            calls = -(-has // cost.per_process) + out.copies + out.redispatched
        t = max(t + cost.step_cost(comp.n), cost.host_floor(comp.n, calls))
    return out, t


def lie_cost(comp: _Compiled, index: _Index, out: StepOutcome, t: float,
             lying: np.ndarray | None, eff: np.ndarray, crashed: np.ndarray | None, env: _Env,
             rec: Record, name: str, step: int) -> float:
    """A whole-plan step's time ``t`` with what its lies cost (module docstring), recorded."""
    if lying is None or not lying.any():
        return t
    fix = repair_lies(comp, index, out.finish, out.time, lying, eff, env.ts, crashed, env.cost)
    _record_lies(rec, name, step, fix)
    return t + (fix.time - out.time) if math.isfinite(fix.time) else math.inf


def _record_lies(rec: Record, name: str, step: int, fix: LieRepair) -> None:
    for key, v in (("repairs", fix.repairs), ("repair_calls", fix.calls),
                   ("caught", len(fix.caught))):
        rec.detail(name, key, step, v)


def whole_measured(comp: _Compiled, out: StepOutcome, eff: np.ndarray, lost: np.ndarray | None,
                   ts: float, T: float, avail: tuple[Hashable, ...]) -> _Measured:
    """The speeds a whole step's gather measures: ``work * time_scale / busy`` of the calls
    that returned by ``T`` ("value": the machine's effective speed, as its busy time leaves
    out the worker's own cost, as the runtime's emulated machines report it), and ``work *
    time_scale / T`` of those still running ("upper"); crashed machines tell nothing."""
    res: _Measured = {}
    for i in np.flatnonzero(comp.work > 0):
        if lost is not None and lost[i]:
            continue
        work = float(comp.work[i])
        if out.finish[i] <= T:
            res[avail[i]] = (float(eff[i]), "value")
        elif T > 0:
            res[avail[i]] = (work * ts / T, "upper")
    return res


class WholeRun:
    """A policy whose plan is dispatched whole: plans through the cache, steps in the
    executor (:func:`run_whole`)."""

    def __init__(self, v: Variant, store: _Storage, cache: PlanCache, est: _Learner | None,
                 configured: np.ndarray, env: _Env) -> None:
        self.v, self.store, self.cache, self.est, self.configured = v, store, cache, est, configured
        self.env = env
        self._members: int | None = None

    def _cost(self, ctx: _Ctx, rec: Record, asked_again: bool = False) -> RuntimeCost | None:
        """The runtime cost of this step: the planning is asked for as the step before starts
        and made while it computes (the runtime's prefetch), so it costs only what it outlasts
        that step, unless the membership changed since (the prefetched plan is dropped and the
        step waits for a whole new one), the step before was lost, this is the first, or
        (``asked_again``) the plan asked ahead was for another execution."""
        c = self.env.cost
        same, self._members = self._members == ctx.m_idx, ctx.m_idx
        if c is None or ctx.t == 0 or not same or asked_again:
            return c
        prev = float(rec.times[self.v.name][ctx.t - 1])
        return replace(c, plan_s=max(0.0, c.plan_s - prev)) if math.isfinite(prev) else c

    def _estimates(self, ctx: _Ctx) -> np.ndarray:
        cur: np.ndarray = (self.est.speed if self.est is not None else self.configured)[ctx.slots]
        return cur

    def _plan(self, ctx: _Ctx, rec: Record, cur: np.ndarray, compile_fn: Callable[[Any], _C],
              modes: tuple[str, ...] | None = None) -> _C:
        v, st, env = self.v, self.store, self.env

        def build() -> StepPlan | pl.PullPlan:
            kw = {} if modes is None else {"modes": modes}
            plan = v.plan_fn()(st.placement, ctx.present, cur, env.L, env.S, **kw)
            check = plan.base if isinstance(plan, pl.PullPlan) else plan
            if env.check_plans and check is not None:   # (the whole plans are checked as made)
                validate(check, st.placement)
            return plan

        comp, hit, secs = self.cache.get((v.plan_key, st.version, ctx.m_idx, modes),
                                         None if v.speed_blind else cur, build, compile_fn)
        rec.plan_s[v.name][ctx.t] = secs
        rec.replans[v.name] += 0 if hit else 1
        return comp

    def _record(self, ctx: _Ctx, rec: Record, t: float, mode: str) -> None:
        n = self.v.name
        rec.times[n][ctx.t] = t
        rec.rows_moved[n][ctx.t] = ctx.moved.get(self.v.placement, 0)
        rec.detail(n, "mode", ctx.t, MODES[mode])

    def step(self, ctx: _Ctx, rec: Record) -> None:
        env, name = self.env, self.v.name
        cur = self._estimates(ctx)
        comp = self._plan(ctx, rec, cur, _Compiled)
        take = _take(comp, ctx)
        e, c = _sel(ctx.eff, take), _sel(ctx.crashed, take)
        spec = self.v.speculation
        if spec is None and env.deadline is not None and comp.K == 1:
            spec = Speculation(env.deadline)
        out, t = run_whole(comp, self.store.index, e, c, _sel(cur, take), env, spec,
                           self._cost(ctx, rec))
        t = lie_cost(comp, self.store.index, out, t, _sel(ctx.lying, take), e, c, env, rec,
                     name, ctx.t)
        self._record(ctx, rec, t, "whole")
        rec.recovered[name][ctx.t] = len(out.recovered)
        rec.copies[name][ctx.t] = out.copies
        rec.redispatched[name][ctx.t] = out.redispatched
        rec.detail(name, "calls", ctx.t, int(np.count_nonzero(comp.work > 0)) + out.copies +
                   out.redispatched)
        if self.est is not None and math.isfinite(out.time) and out.time > 0:
            _learn(self.est, ctx.slots if take is None else ctx.slots[take], comp, out, e, c,
                   env.ts)


class _PullCompiled:
    """A :class:`~elastic_coded.families.usctec.pull.PullPlan` and, for ``usctec-auto``, its
    whole plans compiled."""

    def __init__(self, plan: pl.PullPlan) -> None:
        self.plan = plan
        self.eager = _Compiled(plan.eager) if plan.eager is not None else None
        self.lean = _Compiled(plan.lean) if plan.lean is not None else None
        self.take: dict[int, np.ndarray | None] = {}


class PulledRun(WholeRun):
    """A pull policy (module docstring)."""

    def __init__(self, v: Variant, store: _Storage, cache: PlanCache, est: _Learner | None,
                 configured: np.ndarray, env: _Env) -> None:
        super().__init__(v, store, cache, est, configured, env)
        self.history: deque[tuple[bool, int]] = deque(maxlen=2 * pl.PROBE_EVERY)
        self.chooses = bool(policy_of(v.plan).modes)
        self._expected: str | None = None   # the execution whose plan was asked for ahead
        self.lag_s = 0.0        # what the last coded pull step's calls took beyond their work

    def step(self, ctx: _Ctx, rec: Record) -> None:
        env, name, t = self.env, self.v.name, ctx.t
        cur = self._estimates(ctx)
        modes: tuple[str, ...] | None
        mode, modes, missed = "pull", None, False
        if self.chooses:   # usctec-auto: the execution first, then its plan alone
            total = pull_products(self.store.placement.num_rows, env.L)
            mode, expected = ps.mode_and_next(self.history, ctx.present,
                                              dict(zip(ctx.present, cur.tolist())), env.L,
                                              env.S, total, total / env.ts, env.pull_options)
            missed = self._expected is not None and mode != self._expected
            self._expected, modes = expected, (mode,)
            rec.detail(name, "asked_again", t, float(missed))
        cost = self._cost(ctx, rec, asked_again=missed)
        comp = self._plan(ctx, rec, cur, _PullCompiled, modes)
        plan = comp.plan
        take = _take(comp, ctx)
        avail = plan.available
        e, c, est = _sel(ctx.eff, take), _sel(ctx.crashed, take), _sel(cur, take)
        est_map = dict(zip(avail, est.tolist()))
        if mode == "pull":
            crashed = () if c is None else tuple(m for m, x in zip(avail, c) if x)
            lie = _sel(ctx.lying, take)
            out = pull_step(plan, self.store.placement, dict(zip(avail, e.tolist())), est_map,
                            env.ts, crashed=crashed, options=env.pull_options, cost=cost,
                            crash_at=env.crash_at,
                            lying=() if lie is None else tuple(m for m, x in zip(avail, lie) if x),
                            lag_s=self.lag_s, rng=np.random.default_rng([env.seed, t]))
            T, measured, self.lag_s = out.time, out.measured, out.lag_s
            if out.lies is not None:
                _record_lies(rec, name, t, out.lies)
            rec.copies[name][t] = out.backups
            rec.detail(name, "calls", t, out.calls)
            rec.detail(name, "stolen", t, out.stolen)
            rec.detail(name, "cancelled", t, out.cancelled)
            rec.detail(name, "messages", t, out.messages)
        else:
            # the plan of the mode chosen is made (modes)
            whole = cast(_Compiled, comp.eager if mode == "eager" else comp.lean)
            spec = Speculation(env.deadline) if mode == "lean" and env.deadline else None
            res, T = run_whole(whole, self.store.index, e, c, est, env, spec, cost)
            measured = whole_measured(whole, res, e, c, env.ts, res.time, avail)
            T = lie_cost(whole, self.store.index, res, T, _sel(ctx.lying, take), e, c, env,
                         rec, name, t)
            rec.copies[name][t] = res.copies
            rec.recovered[name][t] = len(res.recovered)
            rec.redispatched[name][t] = res.redispatched
            rec.detail(name, "calls", t, int(np.count_nonzero(whole.work > 0)) + res.copies +
                       res.redispatched)
        self._record(ctx, rec, T, mode)
        if self.chooses:
            self.history.append(ps.history_entry(mode, ps.seen_slowed(measured, est_map)))
        if self.est is not None and math.isfinite(T):
            slots = ctx.slots if take is None else ctx.slots[take]
            slot_of = dict(zip(avail, slots.tolist()))
            for m, (val, kind) in measured.items():
                self.est.observe(slot_of[m], float(val), kind)
