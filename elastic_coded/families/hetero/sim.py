"""Heterogeneous masters (MATH.md §3) in simulated time.  Pure: numpy and scipy (no Ray).

The storage is kept the runtime's way (its ``HeteroKeeper``): planned for the first machines,
then planned anew (:func:`~elastic_coded.families.hetero.policy.plan_storage`, joiners
``fresh``) whenever :func:`~elastic_coded.schemes.policies.rules.hetero_needs_replan` says so,
with the speed estimates the controller starts with.  A step, as the runtime's ``run_hetero``:

* :func:`~elastic_coded.families.hetero.policy.step_plan` with the runtime's generator
  ``default_rng([seed, step])`` says which master each machine serves and its model time
  ``pace``; a serving machine returns all its coded rows of that master at
  ``pace * time_scale * slowdown``.  As in the runtime, the model (``a``, ``u``) is built on the
  speed estimates the storage was planned with, so speeds other than those do not enter.
* Master ``m`` completes when the distinct coded rows it has received reach ``L_m``; the step
  ends when every master has completed.
* Rows a master lacks are topped up (:func:`~elastic_coded.schemes.policies.rules.top_up`): at
  time 0 where the machines serving it hold fewer than ``L_m`` (a probabilistic draw), and when
  a crash is noticed; the usable machines are asked for rows not yet received or in flight, and
  rows none of them holds are stored afresh (:func:`~elastic_coded.families.hetero.policy.rescue`,
  kept in the storage as the runtime's keeper keeps it).  A top-up call of ``r`` rows takes
  :func:`~elastic_coded.schemes.policies.rules.top_up_time` times ``time_scale``.
* A machine that crashes never returns anything; its death is noticed at ``crash_at`` of its
  first call's duration.  The storage is planned anew before the next step (the machines
  changed).  A rescue that finds no machine or no free coded row loses the step (``inf``), as
  the runtime raises.
* Lies, as the runtime's verified step (``families/hetero/verify.py``, ``HeteroChecks.check``
  and ``_repair``): every master is checked once every master has completed (the step's end);
  master ``m`` fails when a lying machine's rows were among those it had received when it
  completed (its decode used ``L_m`` of them; that the wrong one was among them is taken as
  given, as the trace takes every lie as caught); a liar whose rows no master used costs
  nothing.  The failing masters are repaired one after the other, in master order: the rows
  received for the master (all of them, those that arrived after it completed too) are checked
  by machine, a liar's fail and the liar is caught; while fewer than ``L_m`` check, the machines
  not caught (in id order) are asked for rows of ``m`` they store that are not checked, failed
  or already asked, and when none holds any, fresh coded rows are stored on the first machine not
  caught (:func:`~elastic_coded.families.hetero.policy.rescue`, at most twice per master).  The
  driver waits for each call before the next; a call of ``r`` rows takes
  ``top_up_time * time_scale * slowdown`` (a top-up's model time; the runtime's emulation does
  not pace these calls, ``pace_s = 0``), a crashed machine's fails at once, a liar asked lies
  again and is caught.  The master is then decoded again (untimed); when its rows that check stay
  fewer than ``L_m`` the runtime raises and the step is lost (``inf``).

A machine runs its calls one after the other (as the USCTEC executor's machines do; the
runtime's emulation paces concurrent calls independently).  :func:`hetero_lower_bound` is the
model's floor under every step.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError, InternalError
from ...schemes.plan import PlanError
from ...schemes.policies.rules import hetero_needs_replan, paced, top_up, top_up_time
from .. import SimModel
from . import policy as het

if TYPE_CHECKING:
    from ...sim.results import Record
    from ...sim.runner import _Ctx, _Env
    from ...sim.trace import Trace

__all__ = ["HeteroVariant", "HeteroRun", "HeteroStep", "HeteroOutcome", "HeteroSim", "SIM_MODEL",
           "hetero_step", "hetero_lower_bound"]


@dataclass(frozen=True)
class HeteroVariant:
    """Policy ``hetero`` as the simulator runs it: the masters' row counts ``masters = (L_1,
    ..., L_M)`` and the policy's options."""

    family: ClassVar[str] = "hetero"
    name: str = "hetero"
    masters: tuple[int, ...] = ()
    options: het.HeteroOptions = field(default_factory=het.HeteroOptions)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentError(f"name: a non-empty string, got {self.name!r}")
        ms = tuple(self.masters)
        if not ms or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1
                         for x in ms):
            raise ArgumentError(f"masters: the row counts (L_1, ..., L_M) of at least one master, "
                                f"ints >= 1, got {self.masters!r}")
        object.__setattr__(self, "masters", tuple(int(x) for x in ms))
        if not isinstance(self.options, het.HeteroOptions):
            raise ArgumentTypeError(f"options: a HeteroOptions, got {type(self.options).__name__}")


@dataclass(frozen=True)
class HeteroStep:
    """One simulated heterogeneous-masters step."""

    time: float
    """When the last master completed, repairs included (``inf``: lost)."""
    master_times: tuple[float, ...]
    """When each master completed (``inf``: never); a repaired master when its repair ended."""
    replans: int
    """Storage plans made before this step (0 or 1)."""
    rows_moved: int
    """Coded rows stored for this step: by the plan before it and by rescues in it."""
    topped_up: tuple[int, ...] = ()
    """Masters that got top-up calls."""
    top_up_calls: int = 0
    rescued_rows: int = 0
    """Coded rows stored afresh during the step (:func:`~.hetero.rescue`)."""
    lower_bound: float = 0.0
    """:func:`hetero_lower_bound` of the step."""
    t_star: float = 0.0
    """``max_m t*_m`` of the step's assignment, times ``time_scale`` (MATH.md §3)."""
    repairs: int = 0
    """Masters repaired after failing the check (a liar's rows among those they used)."""
    repair_calls: int = 0
    """Calls of the repairs: rows fetched from machines not caught (module docstring)."""
    caught: tuple[Hashable, ...] = ()
    """Machines caught lying in this step."""


def hetero_lower_bound(storage: het.HeteroStorage, live: Iterable[Hashable],
                       slow: Mapping[Hashable, float], time_scale: float) -> float:
    """A floor under the step's time in the model: every call of ``l`` rows of master ``m`` on
    machine ``n`` takes at least ``a[m,n] l time_scale min(1, slowdown[n])`` (the shift of
    ``T = a l + Exp(u/l)``; a top-up's expected time ``(a l + l/u) time_scale`` is more), and a
    machine runs its calls one after the other; so ``L_m`` distinct rows of every master need
    at least the optimum ``t`` of the LP ``sum_n x[m,n] >= L_m``, ``sum_m a[m,n] c_n x[m,n] <=
    t``, ``x >= 0`` over the machines ``live`` (those that do not crash), ``c_n = time_scale
    min(1, slowdown[n])``."""
    from scipy.optimize import linprog

    live = set(live)
    cols = [j for j, n in enumerate(storage.machines) if n in live]
    M, J = len(storage.L), len(cols)
    if not J:
        return math.inf
    c = np.array([time_scale * min(1.0, float(slow.get(storage.machines[j], 1.0)))
                  for j in cols])
    a = storage.problem.a[:, cols] * c[None, :]            # (M, J): time per row
    # variables: x[m, j] (row-major), then t
    A_ub = np.zeros((M + J, M * J + 1))
    for m in range(M):
        A_ub[m, m * J:(m + 1) * J] = -1.0                  # -sum_j x[m, j] <= -L_m
    for j in range(J):
        A_ub[M + j, j:M * J:J] = a[:, j]                   # sum_m a x[m, j] - t <= 0
        A_ub[M + j, -1] = -1.0
    b_ub = np.concatenate([-np.asarray(storage.L, dtype=np.float64), np.zeros(J)])
    obj = np.zeros(M * J + 1)
    obj[-1] = 1.0
    res = linprog(obj, A_ub=A_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if res.status != 0:
        raise InternalError(f"hetero_lower_bound: the LP failed: {res.message}")
    return float(res.x[-1])


@dataclass
class _Call:
    machine: Hashable
    master: int
    rows: frozenset[int]
    at: float
    """When it returns, or (``fails``) when its machine's death is noticed."""
    fails: bool


@dataclass(frozen=True)
class HeteroOutcome:
    """What :func:`hetero_step` did."""

    time: float
    """When the last master completed (``inf``: lost)."""
    master_times: tuple[float, ...]
    topped_up: tuple[int, ...]
    top_up_calls: int
    rescued_rows: int
    storage: het.HeteroStorage = field(repr=False)
    """The storage after the step's rescues."""
    repairs: int = 0
    repair_calls: int = 0
    caught: tuple[Hashable, ...] = ()


class _Step:
    """The state of one step's event simulation (module docstring)."""

    def __init__(self, plan: het.HeteroStepPlan, present: Iterable[Hashable],
                 slow: Mapping[Hashable, float], crashed: Iterable[Hashable], ts: float,
                 crash_at: float) -> None:
        self.st = plan.storage      # the step's storage: what top-ups ask of
        self.keep = plan.storage    # the keeper's, with the step's rescues
        self.L = plan.L
        self.present, self.slow = tuple(present), slow
        self.crashed, self.ts, self.crash_at = set(crashed), ts, crash_at
        self.calls: list[_Call] = []
        self.pending: set[int] = set()
        self.heap: list[tuple[float, int]] = []
        self.free: dict[Hashable, float] = {}
        self.death: dict[Hashable, float] = {}
        self.dead: set[Hashable] = set()
        self.received: list[set[int]] = [set() for _ in self.L]
        # master -> {row: machine}, as collected
        self.got: list[dict[int, Hashable]] = [{} for _ in self.L]
        # master -> the machines decoded from
        self.used: list[frozenset[Hashable]] = [frozenset() for _ in self.L]
        self.caught: list[Hashable] = []
        self.repairs = self.repair_calls = 0
        self.done = [math.inf] * len(self.L)
        self.topped: set[int] = set()
        self.top_up_calls = self.rescued = 0
        self.lost = False

    def dispatch(self, n: Hashable, m: int, ranges: Iterable[tuple[int, int]], t: float,
                 duration: float) -> None:
        start = max(t, self.free.get(n, 0.0))
        self.free[n] = start + duration
        fails = n in self.crashed
        if fails:
            self.death.setdefault(n, start + self.crash_at * duration)
        at = max(t, self.death[n]) if fails else start + duration
        rows = frozenset(i for a, b in ranges for i in range(a, b))
        self.calls.append(_Call(n, m, rows, at, fails))
        self.pending.add(len(self.calls) - 1)
        heapq.heappush(self.heap, (at, len(self.calls) - 1))

    def _ask(self, n: Hashable, m: int, ranges: Sequence[tuple[int, int]], t: float) -> None:
        rows = sum(b - a for a, b in ranges)
        self.dispatch(n, m, ranges, t, paced(top_up_time(self.st, m, n, rows), self.ts))
        self.topped.add(m)
        self.top_up_calls += 1

    def top_up(self, m: int, t: float) -> None:
        have = self.received[m].union(*(self.calls[i].rows for i in self.pending
                                        if self.calls[i].master == m))
        busy = {self.calls[i].machine for i in self.pending}
        usable = [n for n in self.present if n not in self.dead]
        asks, short, order = top_up(self.st, m, have, busy, usable)
        for n, ranges in asks:
            self._ask(n, m, ranges, t)
        if short:
            have |= {i for _, rs in asks for a, b in rs for i in range(a, b)}
            try:
                self.keep, moves = het.rescue(self.keep, m, short, have, order)
            except PlanError:
                self.lost = True
                return
            self.rescued += sum(b - a for _, a, b, _ in moves)
            self._ask(moves[0][3], m, tuple((a, b) for _, a, b, _ in moves), t)

    def run(self, plan: het.HeteroStepPlan) -> None:
        for n, m in plan.serve.items():
            duration = paced(plan.pace[n], self.ts, float(self.slow.get(n, 1.0)))
            self.dispatch(n, m, self.st.rows_of(m, n), 0.0, duration)
        for m in range(len(self.L)):
            self.top_up(m, 0.0)
        while self.heap and not self.lost and not all(map(math.isfinite, self.done)):
            t, i = heapq.heappop(self.heap)
            self.pending.discard(i)
            c = self.calls[i]
            if c.fails:
                self.dead.add(c.machine)
                if not math.isfinite(self.done[c.master]):
                    self.top_up(c.master, t)
            else:
                got = self.got[c.master]
                for i in c.rows:  # the collector keeps rows arriving after completion too
                    got.setdefault(i, c.machine)
                if not math.isfinite(self.done[c.master]):
                    self.received[c.master] |= c.rows
                    if len(self.received[c.master]) >= self.L[c.master]:
                        self.done[c.master] = t
                        self.used[c.master] = frozenset(got.values())

    def repair(self, lying: Iterable[Hashable]) -> None:
        """The check and the repairs after the step (module docstring): each master whose rows
        came from a liar in ``lying`` decoded again, one after the other."""
        lying = set(lying)
        if not lying or self.lost or not all(map(math.isfinite, self.done)):
            return
        t = max(self.done, default=0.0)
        for m in range(len(self.L)):
            if lying.isdisjoint(self.used[m]):
                continue  # its check passes
            self.repairs += 1
            t = self._repair(m, t, lying)
            self.done[m] = t
            if not math.isfinite(t):
                self.lost = True
                return

    def _repair(self, m: int, t: float, lying: set[Hashable]) -> float:
        """Master ``m`` decoded again from rows that check, starting at ``t`` (the runtime's
        ``HeteroChecks._repair``); returns when it is (``inf``: never)."""
        good: set[int] = set()
        bad: set[int] = set()
        for i, n in self.got[m].items():
            (bad if n in lying else good).add(i)
            if n in lying and n not in self.caught:
                self.caught.append(n)
        asked: set[int] = set()
        rescues, Lm = 0, self.L[m]
        while len(good) < Lm:
            usable = [n for n in self.present if n not in self.caught]
            exclude = good | bad | asked
            asks = het.row_asks(self.st, m, Lm - len(good), exclude, usable)
            if not asks and usable and rescues < 2:  # fresh coded rows on a machine not caught
                rescues += 1
                order = sorted((n for n in usable if n not in self.crashed
                                and n in self.st.machines), key=str)
                try:
                    self.keep, moves = het.rescue(self.keep, m, Lm - len(good), exclude, order)
                except PlanError:
                    return math.inf
                self.rescued += sum(b - a for _, a, b, _ in moves)
                asks = [(moves[0][3], tuple((a, b) for _, a, b, _ in moves))]
            if not asks:
                break
            for n, ranges in asks:
                rows = {i for a, b in ranges for i in range(a, b)}
                asked |= rows
                self.repair_calls += 1
                if n in self.crashed:  # dead: the call fails at once
                    continue
                t += paced(top_up_time(self.st, m, n, len(rows)), self.ts,
                           float(self.slow.get(n, 1.0)))
                if n in lying:  # it lies again in this step: caught
                    bad |= rows
                    if n not in self.caught:
                        self.caught.append(n)
                else:
                    good |= rows
        return t if len(good) >= Lm else math.inf


def hetero_step(plan: het.HeteroStepPlan, present: Iterable[Hashable],
                slow: Mapping[Hashable, float] | None = None, crashed: Iterable[Hashable] = (),
                time_scale: float = 1.0, crash_at: float = 0.5, lying: Iterable[Hashable] = ()
                ) -> HeteroOutcome:
    """Simulate one step of ``plan`` (module docstring) for the machines ``present``;
    ``slow``: ``{machine: slowdown}``; ``crashed``: machines that die during the step;
    ``lying``: machines returning wrong results in it."""
    s = _Step(plan, present, slow or {}, crashed, float(time_scale), float(crash_at))
    s.run(plan)
    s.repair(lying)
    done = tuple(s.done)
    T = math.inf if s.lost else max(done, default=0.0)
    return HeteroOutcome(T, done, tuple(sorted(s.topped)), s.top_up_calls, s.rescued, s.keep,
                         s.repairs, s.repair_calls, tuple(s.caught))


class HeteroRun:
    """One hetero variant over a trace: its storage across steps (the runtime's keeper) and
    each step's event simulation."""

    def __init__(self, variant: HeteroVariant, machines: Sequence[Hashable],
                 estimates: Mapping[Hashable, float], seed: int, time_scale: float,
                 crash_at: float) -> None:
        self.v = variant
        self.seed, self.ts, self.crash_at = int(seed), float(time_scale), float(crash_at)
        M = len(variant.masters)
        self.caps = het.capacities(variant.options, variant.masters, None)
        self.explicit = het.explicit_columns(variant.options, M, tuple(machines))
        self.storage: het.HeteroStorage | None = None
        self.est: dict[Hashable, float] = dict(estimates)
        try:
            self._plan(list(machines), ())
        except PlanError:  # too few machines: every step fails until enough are present
            self.storage = None

    def _plan(self, machines: list[Hashable], fresh: Collection[Hashable]) -> int:
        """Plan the storage for ``machines``; returns the rows it moves."""
        speeds = {n: self.est[n] for n in machines}
        self.storage, moves, _ = het.plan_storage(
            self.v.options, self.v.masters, machines, speeds, self.storage, self.explicit,
            self.caps, seed=self.seed, fresh=fresh)
        return sum(b - a for _, a, b, _ in moves)

    def step(self, t: int, present: Iterable[Hashable], estimates: Mapping[Hashable, float],
             slow: Mapping[Hashable, float], crashed: Collection[Hashable],
             fresh: Collection[Hashable] = (), lying: Iterable[Hashable] = ()) -> HeteroStep:
        """Step ``t`` for the machines ``present`` (``fresh``: those that joined before it;
        ``lying``: those returning wrong results in it)."""
        self.est.update(estimates)
        present = list(present)
        moved = replans = 0
        try:
            if hetero_needs_replan(self.storage, present, fresh):
                moved, replans = self._plan(present, fresh), 1
            # planned just above if there was none
            het.check_decodable(cast(het.HeteroStorage, self.storage), present)
        except PlanError:  # too few machines or rows: the runtime fails the step
            return HeteroStep(math.inf, (math.inf,) * len(self.v.masters), replans, moved)
        plan = het.step_plan(cast(het.HeteroStorage, self.storage),
                             np.random.default_rng([self.seed, t]))
        live = [n for n in present if n not in set(crashed)]
        bound = hetero_lower_bound(plan.storage, live, slow, self.ts)
        out = hetero_step(plan, present, slow, crashed, self.ts, self.crash_at, lying)
        self.storage = out.storage
        return HeteroStep(out.time, out.master_times, replans, moved + out.rescued_rows,
                          out.topped_up, out.top_up_calls, out.rescued_rows, bound,
                          max(plan.t_star) * self.ts, out.repairs, out.repair_calls, out.caught)


class HeteroSim:
    """Runs a :class:`HeteroVariant` in :func:`~elastic_coded.sim.runner.simulate`, one
    ``step(ctx, record)`` per step."""

    def __init__(self, v: HeteroVariant, trace: Trace, configured: np.ndarray, env: _Env
                 ) -> None:
        self.name, self.configured = v.name, configured
        ids0 = trace.ids[:trace.N]
        self.run = HeteroRun(v, ids0, dict(zip(ids0, configured[:trace.N].tolist())), env.seed,
                             env.ts, env.crash_at)

    def step(self, ctx: _Ctx, rec: Record) -> None:
        out = self.run.step(ctx.t, ctx.present, ctx.by_machine(self.configured[ctx.slots]),
                            ctx.by_machine(ctx.slowdown), set(ctx.crashed_ids), ctx.joined,
                            ctx.lying_ids)
        n, t = self.name, ctx.t
        rec.times[n][t] = out.time
        rec.redesigns[n][t] = out.replans
        rec.rows_moved[n][t] = out.rows_moved
        rec.recovered[n][t] = len(out.topped_up)
        rec.redispatched[n][t] = out.top_up_calls
        for key, val in (("lower_bound", out.lower_bound), ("t_star", out.t_star),
                         ("topped_up", len(out.topped_up)), ("top_up_calls", out.top_up_calls),
                         ("rescued_rows", out.rescued_rows), ("repairs", out.repairs),
                         ("repair_calls", out.repair_calls), ("caught", len(out.caught))):
            rec.detail(n, key, t, val)


def _variant(options: het.HeteroOptions | None, masters: Sequence[int] | None
             ) -> HeteroVariant:
    if masters is None:
        raise ArgumentError("masters: policy 'hetero' needs the masters' row counts "
                            "masters=(L_1, ..., L_M)")
    return HeteroVariant("hetero", tuple(masters), options or het.HeteroOptions())


SIM_MODEL = SimModel(_variant, HeteroSim)
"""The hetero family in the simulator (its :class:`~elastic_coded.families.Family`'s ``sim``)."""
