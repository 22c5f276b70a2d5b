"""``simulate``: policies side by side on one seeded trace.  Pure: numpy and scipy (no Ray).

Every policy sees the same trace (:mod:`elastic_coded.sim.trace`: the machines present at each
step, their speeds and slowdowns, crashes and joins) and keeps its storage the way the runtime's
controller keeps it for that storage family.

**USCTEC family** (every registry policy: ``usctec-auto``, ``usctec-pull``, ``usctec``,
``dynamic``, ``proportional``, ``cyclic``, ``uncoded``, ``speculative``, or any
:class:`~elastic_coded.sim.variants.Variant`).  Each step: the storage placement kept the
runtime's way (``extend_placement`` for joiners, then ``repair_placement`` with the machines'
storage budgets, whenever membership changes), the plan from the same policy function the runtime
calls (``schemes.registry``) fetched through a :class:`~elastic_coded.sim.plan_cache.PlanCache`, and
the step executed in simulated time: a whole plan by :mod:`elastic_coded.sim.executor`, a pulled
one by :mod:`elastic_coded.sim.pull`, ``usctec-auto`` by the execution it chooses
(:mod:`elastic_coded.sim.pulled`); with ``cost``, the runtime's own cost on top
(:mod:`elastic_coded.sim.cost`).  Speed estimates start at
each machine's configured speed; with learning on they follow the controller's rule
(:mod:`elastic_coded.schemes.speeds`: the upper median of a window of the measured ``work /
elapsed`` of machines that returned and the upper bounds ``work / step time`` of those
cancelled).  As in
the runtime, where one cluster (one placement) serves every policy, the built-in policies run on
the designed placement (``design_placement``), except ``usctec-cyclic`` and ``cec`` which run on
the cyclic placement of coded elastic computing.

**Unified** (``"unified"`` with ``unified_options``, or
:class:`~elastic_coded.families.unified.sim.UnifiedVariant`): coded storage re-designed by
the runtime's rule, the Map's drawn latencies, the fastest ``q``
(:mod:`elastic_coded.families.unified.sim`).

**Heterogeneous masters** (``"hetero"`` with ``masters`` and ``hetero_options``, or
:class:`~elastic_coded.families.hetero.sim.HeteroVariant`): per-master coded rows re-planned
when the machines change, each master complete at ``L_m`` rows, top-ups after crashes
(:mod:`elastic_coded.families.hetero.sim`).

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

import inspect
import math
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from ..families import family_of
from ..families.hetero.policy import HeteroOptions
from ..families.unified.policy import UnifiedOptions
from ..families.usctec.pull import PullOptions
from ..families.usctec.store import UsctecFamily
from ..machines import MachineSpec
from ..options import RunOptions
from ..schemes.families import Present
from ..schemes.plan import Placement
from ..schemes.registry import ideal_time
from .cost import RuntimeCost
from .executor import _PlacementIndex
from .groups import RUN_FIELDS, from_groups
from .learn import _Learner
from .models import Model
from .plan_cache import PlanCache
from .pulled import PulledRun, WholeRun
from .results import Record, SimResult, summarize_times
from .trace import Churn, Speeds, Trace, make_trace
from .variants import (
    BOUNDS,
    VARIANTS,
    FamilyOptions,
    SimPolicy,
    Variant,
    resolve_policies,
)

__all__ = ["Variant", "VARIANTS", "BOUNDS", "SimResult", "simulate",
           "summarize_times"]


Estimates = float | Sequence[float] | np.ndarray
"""The speeds the controller starts with: one for every machine, or one per initial machine."""
RunGroup = RunOptions | Mapping[str, Any]
"""``simulate``'s ``run``: a :class:`~elastic_coded.options.RunOptions` or its fields."""


class _Storage:
    """One placement kind's storage, kept by the runtime's own storage family
    (:class:`~elastic_coded.families.usctec.store.UsctecFamily`) as membership changes."""

    def __init__(self, family: UsctecFamily, specs: list[MachineSpec]) -> None:
        self.family = family
        family.start(specs)
        self.version = 0
        self.member = -1  # membership index the placement was last brought up to date for
        self._index: _PlacementIndex | None = None

    @property
    def placement(self) -> Placement:
        return cast(Placement, self.family.placement)   # start() made one

    def index(self) -> _PlacementIndex:
        if self._index is None:
            self._index = _PlacementIndex(self.placement)
        return self._index

    def update(self, trace: Trace, t: int, S: int) -> int:
        """Bring the placement up to date for step ``t``, as the controller's storage manager
        does (joins, then a repair for the machines present); returns the rows copied."""
        present = trace.present(t)
        moved = 0
        for j in trace.joined[t]:
            moved += self.family.join(MachineSpec(j.id, 1.0, j.storage)).rows
        if set(self.placement.machines) != set(present):
            budgets: dict[Hashable, float] = {m: float(trace.storage[s])
                                              for m, s in zip(present, trace.slots(t))}
            speeds: dict[Hashable, float] = dict.fromkeys(present, 1.0)   # not read by a repair
            moved += self.family.repair(Present(tuple(present), budgets, speeds), S).rows
        self.version += 1
        self.member = int(trace.member_of[t])
        self._index = None
        return moved


@dataclass
class _Ctx:
    """One step of the trace, as every policy sees it."""

    t: int
    m_idx: int
    present: tuple[str, ...]
    slots: np.ndarray
    speed: np.ndarray
    slowdown: np.ndarray
    crashed: np.ndarray | None
    """Mask over ``present`` (``None``: nobody crashes)."""
    crashed_ids: tuple[str, ...]
    joined: tuple[str, ...]
    lying: np.ndarray | None = None
    """Mask over ``present`` of the machines returning wrong results (``None``: none)."""
    moved: dict[str, int] = field(default_factory=dict)
    """Rows copied for this step, by USCTEC placement kind."""

    @property
    def eff(self) -> np.ndarray:
        eff: np.ndarray = self.speed / self.slowdown
        return eff

    def by_machine(self, values: np.ndarray | Sequence[float]) -> dict[Hashable, float]:
        return dict(zip(self.present, np.asarray(values, dtype=np.float64).tolist()))

    @classmethod
    def of(cls, trace: Trace, t: int) -> _Ctx:
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
    def lying_ids(self) -> tuple[str, ...]:
        """The ids of the machines returning wrong results (the unified and hetero families
        find them by their checks and repair, see :mod:`~elastic_coded.families.unified.sim` and
        :mod:`~elastic_coded.families.hetero.sim`)."""
        if self.lying is None:
            return ()
        return tuple(m for m, lies in zip(self.present, self.lying.tolist()) if lies)


class _Runner(Protocol):
    """What simulates one policy: ``step(ctx, record)`` per step."""

    def step(self, ctx: _Ctx, rec: Record) -> None: ...


class _Bound:
    def __init__(self, name: str, env: _Env) -> None:
        self.name, self.env = name, env

    def step(self, ctx: _Ctx, rec: Record) -> None:
        env = self.env
        if self.name == "ideal":
            rec.times[self.name][ctx.t] = ideal_time(ctx.speed, env.L, env.S) * env.ts
        else:
            live = ctx.eff if ctx.crashed is None else ctx.eff[~ctx.crashed]
            rec.times[self.name][ctx.t] = env.ts / float(live.sum())


@dataclass(frozen=True)
class _Env:
    """What every step of every policy shares."""

    L: int
    S: int
    ts: float
    crash_at: float
    seed: int
    check_plans: bool
    cost: RuntimeCost | None = None
    deadline: float | None = None
    pull_options: PullOptions | None = None


def simulate(N: int | None = None, steps: int | None = None, *, L: int, S: int,
             policies: Sequence[object] = ("uncoded", "speculative", "cyclic", "usctec", "ideal"),
             delays: Model | None = None, speeds: Speeds | None = None, churn: Churn | None = None,
             seed: int = 0, estimates: Estimates | None = None, num_rows: int | None = None,
             storage: float = 1.0, time_scale: float = 1.0, learn_speeds: bool = False,
             plan_tol: float = 0.05, baseline: str | None = "uncoded", design_samples: int = 8,
             crash_at: float = 0.5, check_plans: bool = False,
             trace: Trace | None = None, unified_options: UnifiedOptions | None = None,
             hetero_options: HeteroOptions | None = None, masters: Sequence[int] | None = None,
             cost: RuntimeCost | None = None, deadline: float | None = None,
             pull_options: PullOptions | None = None, family_options: FamilyOptions | None = None,
             run: RunGroup | None = None, options: object = None) -> SimResult:
    """Run ``policies`` side by side on one trace of ``steps`` steps on ``N`` machines.

    ``policies``: names (:data:`~elastic_coded.sim.variants.VARIANTS`, the bounds ``ideal`` and
    ``lower_bound``, ``"unified"``, ``"hetero"``) or variant values
    (:class:`~elastic_coded.sim.variants.Variant`,
    :class:`~elastic_coded.families.unified.sim.UnifiedVariant`,
    :class:`~elastic_coded.families.hetero.sim.HeteroVariant`, for several configurations side by
    side).  ``unified_options``: the :class:`~elastic_coded.families.unified.policy.UnifiedOptions`
    of ``"unified"`` (default ones); ``masters``: the row counts ``(L_1, ..., L_M)`` of
    ``"hetero"``'s masters (required with it) and ``hetero_options`` its
    :class:`~elastic_coded.families.hetero.policy.HeteroOptions`.  ``L``, ``S``: the USCTEC
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
    (:class:`~elastic_coded.sim.plan_cache.PlanCache`).  ``design_samples``: speed samples
    ``design_placement`` scores candidates on (the runtime uses 16; each costs an LP per
    candidate).  ``crash_at``: when a crash is noticed, as a fraction of the crashed call's
    time.  ``check_plans``: validate every new plan against its placement.

    ``cost``: the runtime's own cost (:class:`~elastic_coded.sim.cost.RuntimeCost`, e.g.
    ``RuntimeCost.load("benchmarks/results/runtime_cost.json")``) charged to every USCTEC-family
    step; ``None``: the pure compute model.  ``deadline``: the runtime's step deadline (its
    ``run.deadline``, 3.0 by default there): a call of the uncoded split (``proportional``,
    ``uncoded``, ``usctec-auto``'s lean steps) still running that many times the median
    completed call's time gets a backup copy; ``None``: none (today's model; the deadline's
    coded backups on coded whole plans are not modelled).  ``pull_options``: the
    :class:`~elastic_coded.families.usctec.pull.PullOptions` of the pull policies (default
    ones).  The pull policies' rules compare times with seconds (a call's cost, a 5 ms
    wake-up): give ``time_scale`` in seconds when they run.  ``family_options``: by family
    name, the options of another registered family the simulator runs by name
    (:func:`~elastic_coded.sim.variants.sim_families`).

    ``run`` and ``options``: the option groups :class:`~elastic_coded.ElasticCluster` takes
    (:mod:`elastic_coded.sim.groups`): ``run`` (a :class:`~elastic_coded.options.RunOptions`)
    sets ``time_scale``, ``seed``, ``storage``, ``learn_speeds`` and ``deadline`` as the
    runtime reads them; ``options`` the policies' options (a ``PullOptions``,
    ``UnifiedOptions`` or ``HeteroOptions``, a sequence of them, or a mapping by family name).
    A setting given both ways is an error.
    """
    if run is not None or options is not None:
        given = {n: v for n, v in locals().items() if n in _GROUPED}
        got = from_groups(run, options, given, _GROUPED)
        time_scale, seed, storage, learn_speeds, deadline = (
            got[n] for n in ("time_scale", "seed", "storage", "learn_speeds", "deadline"))
        pull_options, unified_options = got["pull_options"], got["unified_options"]
        hetero_options, family_options = got["hetero_options"], got["family_options"]
    t_start = time.perf_counter()
    trace = _the_trace(trace, N, steps, L, S, delays, speeds, churn, seed, storage)
    t_trace = time.perf_counter() - t_start
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ArgumentError(f"time_scale: positive and finite, got {time_scale!r}")
    if not 0 <= crash_at <= 1:
        raise ArgumentError(f"crash_at: a fraction in [0, 1], got {crash_at!r}")
    q = int(num_rows) if num_rows is not None else 100 * trace.N
    if q < 1:
        raise ArgumentError(f"num_rows: a positive int, got {num_rows!r}")
    variants = resolve_policies(policies, unified_options, hetero_options, masters,
                                family_options)
    names = tuple(v if isinstance(v, str) else v.name for v in variants)
    if baseline is not None and baseline not in names:
        raise ArgumentError(f"baseline: {baseline!r} is not among the policies {list(names)}")
    if cost is not None and not isinstance(cost, RuntimeCost):
        raise ArgumentTypeError(f"cost: a RuntimeCost or None, got {type(cost).__name__}")
    if deadline is not None and not (isinstance(deadline, (int, float)) and deadline >= 1
                                     and math.isfinite(deadline)):
        raise ArgumentError(f"deadline: a number >= 1 (a multiple of the median completed call's "
                            f"time) or None, got {deadline!r}")
    if pull_options is not None and not isinstance(pull_options, PullOptions):
        raise ArgumentTypeError(f"pull_options: a PullOptions or None, got "
                                f"{type(pull_options).__name__}")
    env = _Env(L, S, float(time_scale), float(crash_at), int(seed), check_plans, cost,
               None if deadline is None else float(deadline), pull_options)
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
                ctx.moved[kind] = st.update(trace, t, S)
                rec.storage_s[kind][t] = time.perf_counter() - t1
        for r in runners:
            r.step(ctx, rec)
    loop = time.perf_counter() - t_loop
    busy = float(sum(a.sum() for a in rec.storage_s.values()) +
                 sum(a.sum() for a in rec.plan_s.values()))
    wall = {"total": time.perf_counter() - t_start, "trace": t_trace, "placement": t_placement,
            "execution": max(0.0, loop - busy)}
    return rec.result(trace.counts(), wall, baseline)


def _runners(variants: Sequence[SimPolicy], trace: Trace, stores: dict[str, _Storage],
             cache: PlanCache, configured: np.ndarray, learn_speeds: bool, env: _Env
             ) -> list[_Runner]:
    """One runner per variant, each with the storage its family keeps."""
    out: list[_Runner] = []
    for v in variants:
        if isinstance(v, str):
            out.append(_Bound(v, env))
        elif isinstance(v, Variant):
            learns = not v.speed_blind and (v.learn if v.learn is not None else learn_speeds)
            run = PulledRun if v.pulls else WholeRun
            out.append(run(v, stores[v.placement], cache,
                           _Learner(configured) if learns else None, configured, env))
        else:  # a family's own variant: its simulator model runs it
            out.append(family_of(v.family).sim_model().runner(v, trace, configured, env))
    return out


def _the_trace(trace: Trace | None, N: int | None, steps: int | None, L: int, S: int,
               delays: Model | None, speeds: Speeds | None, churn: Churn | None, seed: int,
               storage: float) -> Trace:
    if trace is None:
        if N is None or steps is None:
            raise ArgumentError("N, steps: give both, or a trace")
        return make_trace(N, steps, L, S, delays=delays, speeds=speeds, churn=churn, seed=seed,
                          storage=storage)
    if not isinstance(trace, Trace):
        raise ArgumentTypeError(f"trace: a Trace from make_trace, got {type(trace).__name__}")
    if (trace.L, trace.S) != (L, S):
        raise ArgumentError(f"trace: drawn for L={trace.L}, S={trace.S}, not L={L}, S={S}")
    return trace


def _estimates(trace: Trace, estimates: Estimates | None) -> np.ndarray:
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
        raise ArgumentError(f"estimates: a number or {N0} values, got {est0.size}")
    if not np.all(np.isfinite(configured) & (configured > 0)):
        raise ArgumentError("estimates: every estimate must be positive and finite")
    return configured


def _placements(variants: Sequence[SimPolicy], trace: Trace, q: int, configured: np.ndarray,
                env: _Env, design_samples: int) -> dict[str, _Storage]:
    """The USCTEC family's initial placements, as the controller designs them."""
    N0, L, S = trace.N, env.L, env.S
    ids0 = trace.ids[:N0]
    budgets0 = [float(b) for b in trace.storage[:N0]]
    stores: dict[str, _Storage] = {}
    kinds = {v.placement for v in variants if isinstance(v, Variant)}
    specs = [MachineSpec(m, float(x), b) for m, x, b in zip(ids0, configured[:N0], budgets0)]
    for kind in ("cyclic", "design"):
        if kind in kinds:
            stores[kind] = _Storage(UsctecFamily(q, L, S, None, env.seed, kind,
                                                 design_samples=design_samples), specs)
    return stores


_GROUPED = {n: p.default for n, p in inspect.signature(simulate).parameters.items()
            if n in RUN_FIELDS + ("pull_options", "unified_options", "hetero_options",
                                  "family_options")}
"""The parameters of :func:`simulate` that ``run`` and ``options`` set, with their defaults."""
