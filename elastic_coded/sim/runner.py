"""``simulate``: policies side by side on one seeded trace.  Pure: numpy and scipy (no Ray).

Every policy sees the same trace (:mod:`elastic_coded.sim.trace`: the machines present at each
step, their speeds and slowdowns, crashes and joins) and keeps its storage the way the runtime's
controller keeps it for that storage family.

**USCTEC family** (``usctec``, ``cyclic``, ``uncoded``, ``speculative``, or any
:class:`~elastic_coded.sim.variants.Variant`).  Each step: the storage placement kept the
runtime's way (``extend_placement`` for joiners, then ``repair_placement`` with the machines'
storage budgets, whenever membership changes), the plan from the same policy function the runtime
calls (``schemes.registry``) fetched through a :class:`~elastic_coded.sim.executor.PlanCache`, and
the step executed in simulated time (:mod:`elastic_coded.sim.executor`).  Speed estimates start at
each machine's configured speed; with learning on they follow the controller's rule
(:mod:`elastic_coded.schemes.speeds`: the upper median of a window of the measured ``work /
elapsed`` of machines that returned and the upper bounds ``work / step time`` of those
cancelled).  As in
the runtime, where one cluster (one placement) serves every policy, the built-in policies run on
the designed placement (``design_placement``), except ``usctec-cyclic`` and ``cec`` which run on
the cyclic placement of coded elastic computing.

**Unified** (``"unified"`` with ``unified_options``, or
:class:`~elastic_coded.sim.unified.UnifiedVariant`): coded storage re-designed by the runtime's
rule, the Map's drawn latencies, the fastest ``q`` (:mod:`elastic_coded.sim.unified`).

**Heterogeneous masters** (``"hetero"`` with ``masters`` and ``hetero_options``, or
:class:`~elastic_coded.sim.hetero.HeteroVariant`): per-master coded rows re-planned when the
machines change, each master complete at ``L_m`` rows, top-ups after crashes
(:mod:`elastic_coded.sim.hetero`).

Time units follow the runtime's pacing: the USCTEC family's ``time_scale`` is the seconds a
speed-1 machine takes for all of ``A @ B``; unified and hetero pace by their latency models, in
units of ``time_scale`` (so their times compare with each other's, not with the USCTEC family's).
Unified and hetero plan with the speeds the machines are configured with (the runtime's
estimates before any learning); learning applies to the USCTEC family.

Bounds of the USCTEC family, reported like policies:

- ``ideal``: the step's work with the ``(L+S)/L`` redundancy over the sum of the present machines'
  base speeds (``schemes.registry.ideal_time`` times ``time_scale``): a coded step with perfectly
  balanced loads and nothing straggling.  A reference, not a theorem: with nothing straggling the
  uncoded split (no redundancy) beats it.
- ``lower_bound``: ``time_scale / sum(speed / slowdown)`` over the machines that do not crash: the
  products of ``A B`` computed at the machines' realised speeds with no redundancy at all; no
  policy can beat it in any step.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..schemes.policies.hetero import HeteroOptions
from ..schemes.policies.unified import UnifiedOptions
from ..schemes.registry import ideal_time
from ..schemes.speeds import new_estimate, observe
from ..schemes.usctec import (SpeedModel, cyclic_placement, design_placement, extend_placement,
                              repair_placement, validate)
from .executor import PlanCache, _Compiled, _execute, _PlacementIndex
from .hetero import HeteroRun, HeteroVariant
from .results import Record, SimResult, summarize_times
from .trace import Trace, make_trace
from .unified import UnifiedRun, UnifiedVariant
from .variants import BOUNDS, SCHEMES, VARIANTS, Variant, resolve_policies

__all__ = ["Variant", "VARIANTS", "BOUNDS", "SCHEMES", "SimResult", "simulate",
           "summarize_times"]


class _Storage:
    """One placement kind's storage, kept the runtime's way as membership changes."""

    def __init__(self, placement):
        self.placement = placement
        self.version = 0
        self.member = -1  # membership index the placement was last brought up to date for
        self._index = None

    def index(self) -> _PlacementIndex:
        if self._index is None:
            self._index = _PlacementIndex(self.placement)
        return self._index

    def update(self, trace: Trace, t: int, L: int, S: int) -> int:
        """Bring the placement up to date for step ``t``; returns the rows copied."""
        present = trace.present(t)
        moved = 0
        for j in trace.joined[t]:
            self.placement, mv = extend_placement(self.placement, j.id, j.storage)
            moved += sum(b - a for a, b, _ in mv)
        if set(self.placement.machines) != set(present):
            budgets = {m: float(trace.storage[s]) for m, s in zip(present, trace.slots(t))}
            self.placement, mv = repair_placement(self.placement, present, L, S, budgets)
            moved += sum(b - a for a, b, _ in mv)
        self.version += 1
        self.member = int(trace.member_of[t])
        self._index = None
        return moved


@dataclass
class _Ctx:
    """One step of the trace, as every policy sees it."""

    t: int
    m_idx: int
    present: tuple
    slots: np.ndarray
    speed: np.ndarray
    slowdown: np.ndarray
    crashed: np.ndarray | None
    """Mask over ``present`` (``None``: nobody crashes)."""
    crashed_ids: tuple
    joined: tuple
    lying: np.ndarray | None = None
    """Mask over ``present`` of the machines returning wrong results (``None``: none)."""
    moved: dict = field(default_factory=dict)
    """Rows copied for this step, by USCTEC placement kind."""

    @property
    def eff(self) -> np.ndarray:
        return self.speed / self.slowdown

    def by_machine(self, values) -> dict:
        return dict(zip(self.present, np.asarray(values, dtype=np.float64).tolist()))

    @classmethod
    def of(cls, trace: Trace, t: int) -> "_Ctx":
        m_idx = int(trace.member_of[t])
        present, slots = trace.members[m_idx], trace.member_slots[m_idx]
        crashed = None
        if trace.crashed[t]:
            crashed = np.zeros(len(present), dtype=bool)
            crashed[[present.index(m) for m in trace.crashed[t]]] = True
        lying = None
        if trace.corrupt and trace.corrupt[t]:
            liars = set(trace.corrupt[t])
            lying = np.array([m in liars for m in present], dtype=bool)
        return cls(t, m_idx, present, slots, trace.speed[t, slots], trace.slowdown[t, slots],
                   crashed, tuple(trace.crashed[t]), tuple(j.id for j in trace.joined[t]),
                   lying=lying)

    @property
    def lost(self) -> np.ndarray | None:
        """Machines whose results the USCTEC family cannot use: crashed, or caught lying (their
        work is redone on other holders, costed as a crash's)."""
        if self.lying is None:
            return self.crashed
        return self.lying if self.crashed is None else self.crashed | self.lying


class _Usctec:
    """A USCTEC-family variant: plans through the cache, steps in the executor."""

    def __init__(self, v: Variant, store: _Storage, cache: PlanCache, est, configured, env):
        self.v, self.store, self.cache, self.est, self.configured = v, store, cache, est, configured
        self.env = env

    def step(self, ctx: _Ctx, rec: Record) -> None:
        v, st, env, name, t = self.v, self.store, self.env, self.v.name, ctx.t
        cur = (self.est.speed if self.est is not None else self.configured)[ctx.slots]

        def build():
            plan = v.plan_fn()(st.placement, ctx.present, cur, env.L, env.S)
            if env.check_plans:
                validate(plan, st.placement)
            return plan

        comp, hit, secs = self.cache.get((v.plan_key, st.version, ctx.m_idx),
                                         None if v.speed_blind else cur, build)
        rec.plan_s[name][t] = secs
        rec.replans[name] += 0 if hit else 1
        take = comp.take.get(ctx.m_idx)
        if take is None:
            avail = comp.plan.available
            take = (None if avail == ctx.present
                    else np.array([ctx.present.index(m) for m in avail], dtype=np.int64))
            comp.take[ctx.m_idx] = take
        e = ctx.eff if take is None else ctx.eff[take]
        lost = ctx.lost
        c = lost if (take is None or lost is None) else lost[take]
        out = _execute(comp, st.index, e, c, cur if take is None else cur[take], env.ts,
                       env.crash_at, v.speculation)
        rec.times[name][t] = out.time
        rec.recovered[name][t] = len(out.recovered)
        rec.copies[name][t] = out.copies
        rec.redispatched[name][t] = out.redispatched
        rec.rows_moved[name][t] = ctx.moved.get(v.placement, 0)
        if self.est is not None and math.isfinite(out.time) and out.time > 0:
            _learn(self.est, ctx.slots if take is None else ctx.slots[take], comp, out, e, c,
                   env.ts)


class _Bound:
    def __init__(self, name: str, env):
        self.name, self.env = name, env

    def step(self, ctx: _Ctx, rec: Record) -> None:
        env = self.env
        if self.name == "ideal":
            rec.times[self.name][ctx.t] = ideal_time(ctx.speed, env.L, env.S) * env.ts
        else:
            live = ctx.eff if ctx.crashed is None else ctx.eff[~ctx.crashed]
            rec.times[self.name][ctx.t] = env.ts / float(live.sum())


class _Unified:
    def __init__(self, v: UnifiedVariant, trace: Trace, env):
        self.name = v.name
        self.run = UnifiedRun(v, trace.ids[:trace.N], env.seed, env.ts, env.crash_at)

    def step(self, ctx: _Ctx, rec: Record) -> None:
        out = self.run.step(ctx.t, ctx.present, ctx.by_machine(ctx.speed),
                            ctx.by_machine(ctx.slowdown), set(ctx.crashed_ids))
        n, t = self.name, ctx.t
        rec.times[n][t] = out.time
        rec.redesigns[n][t] = out.redesigns
        rec.rows_moved[n][t] = out.rows_moved
        for key in ("K", "q", "live", "m"):
            rec.detail(n, key, t, getattr(out, key))


class _Hetero:
    def __init__(self, v: HeteroVariant, trace: Trace, configured: np.ndarray, env):
        self.name, self.configured = v.name, configured
        ids0 = trace.ids[:trace.N]
        self.run = HeteroRun(v, ids0, dict(zip(ids0, configured[:trace.N].tolist())), env.seed,
                             env.ts, env.crash_at)

    def step(self, ctx: _Ctx, rec: Record) -> None:
        out = self.run.step(ctx.t, ctx.present, ctx.by_machine(self.configured[ctx.slots]),
                            ctx.by_machine(ctx.slowdown), set(ctx.crashed_ids), ctx.joined)
        n, t = self.name, ctx.t
        rec.times[n][t] = out.time
        rec.redesigns[n][t] = out.replans
        rec.rows_moved[n][t] = out.rows_moved
        rec.recovered[n][t] = len(out.topped_up)
        rec.redispatched[n][t] = out.top_up_calls
        for key, val in (("lower_bound", out.lower_bound), ("t_star", out.t_star),
                         ("topped_up", len(out.topped_up)), ("top_up_calls", out.top_up_calls),
                         ("rescued_rows", out.rescued_rows)):
            rec.detail(n, key, t, val)


@dataclass(frozen=True)
class _Env:
    """What every step of every policy shares."""

    L: int
    S: int
    ts: float
    crash_at: float
    seed: int
    check_plans: bool


def simulate(N: int | None = None, steps: int | None = None, *, L: int, S: int,
             policies: Sequence = ("uncoded", "speculative", "cyclic", "usctec", "ideal"),
             delays=None, speeds=None, churn=None, seed: int = 0, estimates=None,
             num_rows: int | None = None, storage: float = 1.0, time_scale: float = 1.0,
             learn_speeds: bool = False, plan_tol: float = 0.05, baseline: str | None = "uncoded",
             design_samples: int = 8, crash_at: float = 0.5, check_plans: bool = False,
             trace: Trace | None = None, unified_options: UnifiedOptions | None = None,
             hetero_options: HeteroOptions | None = None, masters=None) -> SimResult:
    """Run ``policies`` side by side on one trace of ``steps`` steps on ``N`` machines.

    ``policies``: names (:data:`~elastic_coded.sim.variants.VARIANTS`, the bounds ``ideal`` and
    ``lower_bound``, ``"unified"``, ``"hetero"``) or variant values
    (:class:`~elastic_coded.sim.variants.Variant`,
    :class:`~elastic_coded.sim.unified.UnifiedVariant`,
    :class:`~elastic_coded.sim.hetero.HeteroVariant`, for several configurations side by
    side).  ``unified_options``: the :class:`~elastic_coded.schemes.policies.unified.UnifiedOptions`
    of ``"unified"`` (default ones); ``masters``: the row counts ``(L_1, ..., L_M)`` of
    ``"hetero"``'s masters (required with it) and ``hetero_options`` its
    :class:`~elastic_coded.schemes.policies.hetero.HeteroOptions`.  ``L``, ``S``: the USCTEC
    family's code, and the floor ``L+S`` on the machines churn leaves (every family's).

    ``delays``/``speeds``: models from :mod:`elastic_coded.sim.models` (or an array of ``N``
    speeds); ``churn``: a churn script; ``seed`` drives the models (the churn script has its own
    seed, as in the runtime) and, like the runtime's cluster seed, the unified and hetero draws
    of step ``t`` (``default_rng([seed, t])``) and hetero's planner.  Or pass a ready ``trace``
    (then ``N``, ``steps``, the models and the churn come from it).  ``estimates``: the speeds
    the controller starts with (default the true base speeds, as in the runtime, whose machines
    are configured with their speed); a number means every machine.  ``num_rows``: rows of
    ``A`` of the USCTEC family (default ``100 N``).  ``storage``: every initial machine's
    budget.  ``plan_tol``: the plan cache's tolerance
    (:class:`~elastic_coded.sim.executor.PlanCache`).  ``design_samples``: speed samples
    ``design_placement`` scores candidates on (the runtime uses 16; each costs an LP per
    candidate).  ``crash_at``: when a crash is noticed, as a fraction of the crashed call's
    time.  ``check_plans``: validate every new plan against its placement.
    """
    t_start = time.perf_counter()
    trace = _the_trace(trace, N, steps, L, S, delays, speeds, churn, seed, storage)
    t_trace = time.perf_counter() - t_start
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale: positive and finite, got {time_scale!r}")
    if not 0 <= crash_at <= 1:
        raise ValueError(f"crash_at: a fraction in [0, 1], got {crash_at!r}")
    q = int(num_rows) if num_rows is not None else 100 * trace.N
    if q < 1:
        raise ValueError(f"num_rows: a positive int, got {num_rows!r}")
    variants = resolve_policies(policies, unified_options, hetero_options, masters)
    names = tuple(v if isinstance(v, str) else v.name for v in variants)
    if baseline is not None and baseline not in names:
        raise ValueError(f"baseline: {baseline!r} is not among the policies {list(names)}")
    env = _Env(L, S, float(time_scale), float(crash_at), int(seed), check_plans)
    configured = _estimates(trace, estimates)

    t0 = time.perf_counter()
    stores = _placements(variants, trace, q, configured, env, design_samples)
    runners = _runners(variants, trace, stores, PlanCache(plan_tol), configured, learn_speeds,
                       env)
    t_placement = time.perf_counter() - t0

    rec = Record(names, trace.steps, tuple(stores))
    t_loop = time.perf_counter()
    for t in range(trace.steps):
        ctx = _Ctx.of(trace, t)
        rec.machines[t] = len(ctx.present)
        for kind, st in stores.items():
            if st.member != ctx.m_idx:
                t1 = time.perf_counter()
                ctx.moved[kind] = st.update(trace, t, L, S)
                rec.storage_s[kind][t] = time.perf_counter() - t1
        for r in runners:
            r.step(ctx, rec)
    loop = time.perf_counter() - t_loop
    busy = float(sum(a.sum() for a in rec.storage_s.values()) +
                 sum(a.sum() for a in rec.plan_s.values()))
    wall = {"total": time.perf_counter() - t_start, "trace": t_trace, "placement": t_placement,
            "execution": max(0.0, loop - busy)}
    return rec.result(trace.counts(), wall, baseline)


def _runners(variants, trace: Trace, stores: dict, cache: PlanCache, configured: np.ndarray,
             learn_speeds: bool, env: _Env) -> list:
    """One runner per variant, each with the storage its family keeps."""
    out = []
    for v in variants:
        if isinstance(v, str):
            out.append(_Bound(v, env))
        elif isinstance(v, Variant):
            learns = not v.speed_blind and (v.learn if v.learn is not None else learn_speeds)
            out.append(_Usctec(v, stores[v.placement], cache,
                               _Learner(configured) if learns else None, configured, env))
        elif isinstance(v, UnifiedVariant):
            out.append(_Unified(v, trace, env))
        else:
            out.append(_Hetero(v, trace, configured, env))
    return out


def _the_trace(trace, N, steps, L, S, delays, speeds, churn, seed, storage) -> Trace:
    if trace is None:
        if N is None or steps is None:
            raise ValueError("N, steps: give both, or a trace")
        return make_trace(N, steps, L, S, delays=delays, speeds=speeds, churn=churn, seed=seed,
                          storage=storage)
    if not isinstance(trace, Trace):
        raise TypeError(f"trace: a Trace from make_trace, got {type(trace).__name__}")
    if (trace.L, trace.S) != (L, S):
        raise ValueError(f"trace: drawn for L={trace.L}, S={trace.S}, not L={L}, S={S}")
    return trace


def _estimates(trace: Trace, estimates) -> np.ndarray:
    """The speed estimates the controller starts with, by slot."""
    configured = trace.configured.copy()
    if estimates is None:
        return configured
    N0 = trace.N
    est0 = np.asarray(estimates, dtype=np.float64).reshape(-1)
    if est0.size == 1:
        configured[:] = float(est0[0])
    elif est0.size == N0:
        configured[:N0] = est0
    else:
        raise ValueError(f"estimates: a number or {N0} values, got {est0.size}")
    if not np.all(np.isfinite(configured) & (configured > 0)):
        raise ValueError("estimates: every estimate must be positive and finite")
    return configured


def _placements(variants, trace: Trace, q: int, configured: np.ndarray, env: _Env,
                design_samples: int) -> dict:
    """The USCTEC family's initial placements, as the controller designs them."""
    N0, L, S = trace.N, env.L, env.S
    ids0 = trace.ids[:N0]
    budgets0 = [float(b) for b in trace.storage[:N0]]
    stores: dict[str, _Storage] = {}
    kinds = {v.placement for v in variants if isinstance(v, Variant)}
    if "cyclic" in kinds:
        stores["cyclic"] = _Storage(cyclic_placement(
            q, ids0, L, S, budgets=None if all(b >= 1 for b in budgets0) else budgets0))
    if "design" in kinds:
        model = SpeedModel(tuple(float(x) for x in configured[:N0]), straggle_prob=0.1,
                           straggle_factor=5.0)
        stores["design"] = _Storage(design_placement(q, ids0, budgets0, model, L, S,
                                                     samples=design_samples, seed=env.seed))
    return stores


class _Learner:
    """The controller's speed estimates, by slot (:mod:`elastic_coded.schemes.speeds`: each
    machine's window of observations, planned with at its upper median)."""

    def __init__(self, configured: np.ndarray):
        self.est = [new_estimate(float(v)) for v in configured]
        self.speed = np.array([e.speed for e in self.est])

    def observe(self, slot: int, value: float, kind: str) -> None:
        self.est[slot] = observe(self.est[slot], value, kind)
        self.speed[slot] = self.est[slot].speed


def _learn(learner: _Learner, slots: np.ndarray, comp: _Compiled, out, eff: np.ndarray,
           crashed: np.ndarray | None, ts: float) -> None:
    """What the controller learns from a step (``Controller.report``): the measured speed of
    machines that returned (``"value"``) and the bound ``work / step time`` of those cancelled
    (``"upper"``); crashed machines tell nothing."""
    work, f, T = comp.work, out.finish, out.time
    has = work > 0
    if crashed is not None:
        has &= ~crashed
    for i in np.flatnonzero(has):
        if f[i] <= T:
            learner.observe(int(slots[i]), float(eff[i]), "value")
        else:
            learner.observe(int(slots[i]), float(work[i] * ts / T), "upper")
