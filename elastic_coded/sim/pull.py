"""Pull steps (``usctec-pull``, ``dynamic``, ``usctec-auto`` when it pulls) in simulated time.
Pure: no Ray.

The step runs the runtime's own pull loop
(:class:`~elastic_coded.families.usctec.pull_loop.PullLoop`) over an event clock (:class:`_Run`,
its backend), with the runtime's own queue
(:class:`~elastic_coded.families.usctec.pull.CodedQueue` or
:class:`~elastic_coded.families.usctec.pull.DynamicQueue`, laid out by
:func:`~elastic_coded.families.usctec.pull_step.layout`): the loop tells the queue which calls
were sent, finished, cancelled and lost, and asks it for the next call of each machine that may
get work, at every event, machines in plan order, exactly as in the runtime
(:mod:`elastic_coded.families.usctec.executor_pull`).  A machine the queue calls resting (it
would answer nothing) is left out until its rest ends, one of its calls ends or the queue wakes
it, which changes no step (a test checks it against asking everyone) and keeps an event's cost
independent of the machines idle.

* A machine keeps ``depth`` calls in flight and computes them one at a time in arrival order
  (as the runtime's worker does); a call of ``products`` takes ``products / total * time_scale
  * slowdown / speed``, its busy time, from which the queue learns the machine's rate (as the
  runtime's queue does from an emulated machine's paced time).  The cost's ``worker_call_s``
  is paid when the call arrives, before it may start: the runtime's worker is an async actor
  and takes a queued call in while it computes the one before, so a queued call's cost is
  hidden and only a call to an idle machine waits for it.
* A result files its units; a piece decodes at ``L`` distinct positions (one copy for
  ``dynamic``), and the calls the queue then names (:meth:`decoded`) are cancelled: a call
  computing stops at once and frees its machine, one waiting is dropped.
* While a machine has room, may be given work without a call ending (the loop's rule, as in
  the runtime) and the queue is coded, the driver also wakes every
  :func:`~elastic_coded.families.usctec.pull_step.tick_of` seconds (a unit may have become
  overdue, so a coded backup may start), counted from when the driver is free to wait (as
  the runtime's wait with a timeout: a result that arrived while the driver was busy is
  taken at once, and no wake-up is spent meanwhile).
* A crashed machine's first call fails at ``crash_at`` of its duration; the queue gets its
  units back (:meth:`lost`).  A step whose calls run out before every piece decoded is lost
  (``time = inf``): the runtime's driver asks the controller to re-plan such units, copying
  rows where no live machine stores them, which the simulator does not model.
* With a :class:`~elastic_coded.sim.cost.RuntimeCost`, the driver is one server: each call
  sent costs ``call_s``, each result taken in ``round_trip_s``, every event ``scan_s``
  per machine and every decision of the coded queue ``decide_s``, one after another, and
  the queue's clock is the driver's; the step also pays
  :meth:`~elastic_coded.sim.cost.RuntimeCost.step_cost`, and takes at least the host floor
  of its calls and cancellations (:meth:`~elastic_coded.sim.cost.RuntimeCost.host_floor`).
  With ``host_cpus``, the host's cores are a second server: each call sent adds
  ``host_call_s / host_cpus`` of work to it and each cancellation ``host_cancel_s /
  host_cpus``, and a call starts no sooner than the host has done the work sent before it,
  or, given a random generator (the runner gives one a step), after a uniform share of twice
  that wait (the cores take the waiting work in no particular order:
  :func:`~elastic_coded.sim.cost.host_wait`).

* On two levels (``cost.group``, :mod:`~elastic_coded.sim.agents`) the loop runs in the
  agents: a call costs its machine's agent ``agent_call_s`` (and the driver a ``call_s`` when
  it carries units planned on another agent's machines), a result the agent's
  ``agent_take_s``, a decision the agent's ``decide_s``; a result reaches the driver in its
  agent's message, and the piece it completes decodes, and its other calls are cancelled, on
  the driver's clock.

Times are seconds when ``time_scale`` is (the coded rules compare them with seconds: the cost
of a call ``call_cost_s`` and the 5 ms wake-up floor).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..families.usctec import pull as pl
from ..families.usctec import pull_step as ps
from ..families.usctec.pull_loop import Event, PullLoop
from ..schemes.plan import Placement
from .agents import Agents
from .cost import RuntimeCost, host_wait
from .lagrange_lies import Decoded, LieRepair, repair

__all__ = ["PullOutcome", "pull_step", "pull_total", "pull_products"]

_Info = list[Any]
"""A call in flight: ``[machine, units, start, finish, duration, version, arrival, crashes]``
(a list, updated in place on the hot path)."""


def pull_total(plan: pl.PullPlan, columns: int = 8) -> int:
    """The products a simulated pull step counts (the runtime's ``padded``): ``columns`` input
    columns padded to a multiple of ``L``, times the rows."""
    return pull_products(plan.num_rows, plan.L, columns)


def pull_products(num_rows: int, L: int, columns: int = 8) -> int:
    """:func:`pull_total` before the plan is made."""
    return num_rows * (columns + (-columns) % L)


@dataclass(frozen=True)
class PullOutcome:
    """What one simulated pull step did."""

    time: float
    """When the last piece decoded (``inf``: lost), the cost's fixed part included."""
    calls: int
    """Calls sent."""
    units: int
    """Units run (every unit of every call sent, cancelled or not)."""
    backups: int
    """Coded backups (``usctec-pull``) or backup copies (``dynamic``) the queue gave."""
    stolen: int
    """Units taken from another machine's queue (``usctec-pull``)."""
    cancelled: int
    """Calls cancelled after their pieces decoded."""
    measured: dict[Hashable, tuple[float, str]] = field(repr=False)
    """``{machine: (speed, "value")}`` for every machine that returned a call (its first), as
    the runtime's gather measures it (``work * time_scale / elapsed``)."""
    ran: tuple[tuple[Hashable, tuple[int, int]], ...] = field(repr=False, default=())
    """``(machine, rows)`` of every unit sent, when asked for (``record=True``)."""
    filed: tuple[tuple[float, Hashable, pl.Unit], ...] = field(repr=False, default=())
    """``(time, machine, unit)`` of every result taken in, in order (``record=True``)."""
    decoded_at: dict[int, float] = field(repr=False, default_factory=dict)
    """``{piece: time}`` each piece of :attr:`plan` decoded (``record=True``)."""
    plan: pl.PullPlan | None = field(repr=False, default=None)
    """The sub-divided plan the units refer to (``record=True``)."""
    wakes: tuple[tuple[float, float], ...] = field(repr=False, default=())
    """``(driver's time, next result due)`` of every wake-up (``record=True``)."""
    lies: LieRepair | None = None
    """What the step's liars cost (:mod:`~elastic_coded.sim.lagrange_lies`), if any lied."""
    decisions: int = 0
    """The queue's ``next_for`` calls (each costs the driver ``decide_s`` for a coded
    queue)."""
    lag_s: float = 0.0
    """The lag the next pull step allows every call
    (:func:`~elastic_coded.families.usctec.pull_step.next_lag`, as the runtime learns it)."""
    messages: int = 0
    """Two levels (``cost.group``): the agents' messages the driver took in."""


class _Machine:
    __slots__ = ("calls", "free")

    def __init__(self) -> None:
        self.calls: list[int] = []      # [key, ...] in arrival order
        self.free = 0.0      # when it finishes what it holds


class _Run:
    """One pull step's state: the queue, the machines' calls, the driver's clock; the backend
    (:class:`~elastic_coded.families.usctec.pull_loop.PullBackend`) the one pull loop runs the
    step over."""

    def __init__(self, sub: pl.PullPlan, q: pl.CodedQueue | pl.DynamicQueue,
                 eff: dict[Hashable, float], ts: float, total: int, depth: int,
                 crashed: set[Hashable], crash_at: float, cost: RuntimeCost | None, record: bool,
                 lying: frozenset[Hashable] = frozenset(),
                 rng: np.random.Generator | None = None) -> None:
        self.sub, self.q, self.eff, self.ts, self.total, self.depth = sub, q, eff, ts, total, depth
        self.rng = rng           # the host's order of service (None: the order sent)
        self.crashed, self.crash_at, self.cost, self.record = crashed, crash_at, cost, record
        self.machines = {m: _Machine() for m in sub.available}
        self.order = tuple(sub.available)
        self.loop = PullLoop(self, q, self.order, depth, ps.tick_of(q))
        self.now = 0.0           # the driver's clock as the loop sees it
        self.info: dict[int, _Info] = {}  # key -> [machine, units, start, finish, ...]
        self.heap: list[tuple[float, int, int, int]] = []  # (when, seq, key, version)
        self.seq = 0
        self.driver = 0.0
        self.host = 0.0          # when the host's cores have done the CPU work sent so far
        self.have: dict[int, set[int]] = {}     # piece -> positions filed
        self.decoded: set[int] = set()
        self.need = q.need
        self.n_pieces = len(sub.pieces)
        self.sent_first: set[Hashable] = set()
        self.scan = cost.scan_s * len(self.order) if cost is not None else 0.0
        # the coded queue's rules cost the driver per decision (dynamic's are in call_s)
        self.decide = cost.decide_s if cost is not None and isinstance(q, pl.CodedQueue) else 0.0
        self.calls = self.units = 0
        # two levels (cost.group): the agents' servers and messages (:mod:`.agents`)
        self.agents = (Agents(self.order, cost, self._home) if cost is not None and cost.group
                       else None)
        self.last_decode = 0.0
        self.measured: dict[Hashable, tuple[float, str]] = {}
        self.ran: list[tuple[Hashable, tuple[int, int]]] = []
        self.filed: list[tuple[float, Hashable, pl.Unit]] = []
        self.decoded_at: dict[int, float] = {}
        self.wakes: list[tuple[float, float]] = []
        self.lying = lying
        # with liars: piece -> {position: machine}, first taken in
        self.arrived: dict[int, dict[int, Hashable]] = {}
        self.used: dict[int, list[Hashable]] = {}  # with liars: piece -> machines decoded from

    # -- the machines ----------------------------------------------------------------------
    def _schedule(self, m: Hashable, now: float) -> None:
        """(Re)compute when ``m``'s calls start and end after a change at ``now`` (a call
        already computing keeps its times)."""
        mac = self.machines[m]
        t = now
        for i, key in enumerate(mac.calls):
            inf = self.info[key]
            if inf[2] is not None and inf[2] <= now and i == 0:
                t = inf[3]
                continue
            start = max(t, inf[6])
            inf[2], inf[3] = start, start + inf[4]
            inf[5] += 1
            t = inf[3]
            crash = inf[7]
            when = start + self.crash_at * inf[4] if crash else inf[3]
            heapq.heappush(self.heap, (when, self.seq, key, inf[5]))
            self.seq += 1
        mac.free = t

    @property
    def cancelled(self) -> int:
        return self.loop.cancelled

    def send(self, m: Hashable, units: list[pl.Unit], now: float) -> int:
        c = self.cost
        if c is not None and self.agents is not None:
            arrive, self.driver = self.agents.send(m, units, now, self.driver)
            if c.host_cpus:
                self.host = max(self.host, now) + c.host_call_s / c.host_cpus
                arrive += host_wait(self.host - arrive, self.rng)
            arrive += c.worker_call_s
        elif c is not None:
            self.driver = max(self.driver, now) + c.call_s
            arrive = self.driver
            if c.host_cpus:  # the host's cores take the calls' CPU work, in no set order
                self.host = max(self.host, now) + c.host_call_s / c.host_cpus
                arrive += host_wait(self.host - arrive, self.rng)
            arrive += c.worker_call_s  # taken in even while the call before computes
        else:
            arrive = now
        work = sum(self.q.products[u] for u in units)
        dur = work / self.total * self.ts / self.eff[m]
        key = self.seq
        self.seq += 1
        crash = m in self.crashed and m not in self.sent_first
        self.sent_first.add(m)
        # [machine, units, start, finish, duration, version, arrival, crashes]
        self.info[key] = [m, units, None, None, dur, 0, arrive, crash]
        self.machines[m].calls.append(key)
        self._schedule(m, now)
        self.calls += 1
        self.units += len(units)
        if self.record:
            self.ran.extend((m, u.rows) for u in units)
        return key

    def cancel(self, m: Hashable, key: Hashable, now: float) -> bool | None:
        mac = self.machines[m]
        if key not in mac.calls:
            return None
        mac.calls.remove(key)
        crashes = self.info.pop(key)[7]
        c = self.cost
        if c is not None and c.host_cpus:
            self.host = max(self.host, now) + c.host_cancel_s / c.host_cpus
        if crashes:  # a scripted crash happens even when its call is no longer needed
            return True
        self._schedule(m, now)
        return False

    def lose(self, m: Hashable, now: float, preempted: bool = False) -> None:
        mac = self.machines[m]
        for key in mac.calls:
            self.info.pop(key, None)
        mac.calls = []

    def _home(self, u: pl.Unit) -> Hashable | None:
        """The machine unit ``u``'s position is planned on (``None``: none)."""
        ms = getattr(self.sub.pieces[u.piece], "machines", ())
        return ms[u.position] if u.position < len(ms) else None

    # -- the driver (the loop's backend) --------------------------------------------------
    def room(self, m: Hashable) -> bool:
        return len(self.machines[m].calls) < self.depth

    def done(self) -> bool:
        return len(self.decoded) >= self.n_pieces

    def in_flight(self) -> bool:
        while self.heap and self.heap[0][2] not in self.info:
            heapq.heappop(self.heap)  # a cancelled or lost call
        return bool(self.heap)

    def rescue(self) -> None:
        """Nothing: the runtime re-plans units no live machine stores (module docstring)."""

    def decided(self, m: Hashable | None, now: float, n: int) -> None:
        """The coded queue's decisions cost the driver ``decide_s`` each (on two levels, the
        agent of the machine they sent to; those that sent nothing are made by idle agents:
        not charged)."""
        if not self.decide:
            return
        if self.agents is not None:
            if m is not None:
                self.agents.decided(m, now, n, self.decide)
        else:
            self.driver = max(self.driver, now) + self.decide * n

    def _any_room(self) -> bool:
        dead, depth = self.q.dead, self.depth
        return any(len(mac.calls) < depth and m not in dead for m, mac in self.machines.items())

    def wait(self, timeout: float | None) -> Iterator[Event]:
        """The next call to end (a wake-up first, ``None``, when ``timeout`` passes before it
        and some live machine has room), then every other result back by the driver's time
        after taking it in (the runtime's batched wait)."""
        while True:
            if not self.in_flight():
                return
            when, _, key, ver = self.heap[0]
            # a busy driver starts its wait when free (two levels: the agents wait)
            wait_from = self.now if self.agents is not None else max(self.now, self.driver)
            if timeout is not None and wait_from + timeout < when and self._any_room():
                self.now = wait_from + timeout
                if self.record:
                    self.wakes.append((max(self.now, self.driver), when))
                if self.cost is not None and self.agents is None:
                    self.driver = max(self.driver, self.now) + self.scan
                yield None
                return
            heapq.heappop(self.heap)
            inf = self.info.get(key)
            if inf is not None and inf[5] == ver:
                break
        yield self._arrival(key, when, inf)
        while not self.done() and self.heap and self.heap[0][0] <= self.now:
            when, _, key, ver = heapq.heappop(self.heap)
            inf = self.info.get(key)
            if inf is not None and inf[5] == ver:
                yield self._arrival(key, when, inf)

    def _arrival(self, key: int, when: float, inf: _Info) -> Event:
        """Call ``key``'s end at ``when``: its machine lost (a scripted crash of its first
        call) or its result back."""
        if inf[7]:  # the crash of the machine's first call
            self.now = max(self.now, when)
            return ("lost", inf[0], key, False)
        return ("result", inf[0], key, when)

    def take(self, m: Hashable, key: Hashable, when: float
             ) -> tuple[float, float, float, list[int]]:
        """The result of call ``key``, computed by ``when``, taken in and filed: ``(when the
        driver took it in, the machine's busy time, when the driver decoded, the pieces it
        completed)``.  The busy time is what the runtime's emulated machines report
        (``paced_s``): its speed and the queue's rates are measured on it, not on the worker's
        own cost."""
        inf = self.info.pop(cast(int, key))
        units, dur = inf[1], inf[4]
        self.machines[m].calls.remove(cast(int, key))
        c = self.cost
        if c is not None and self.agents is not None:
            now, at_driver, self.driver = self.agents.take(m, when, self.driver)
        else:
            now = (max(self.driver, when) + c.round_trip_s + self.scan) if c is not None \
                else when
            self.driver = at_driver = max(self.driver, now)
        self.now = max(self.now, now)
        work = sum(self.q.products[u] for u in units) / self.total
        self.measured.setdefault(m, (work * self.ts / dur, "value"))
        pieces = []
        for u in units:
            if self.record:
                self.filed.append((now, m, u))
            if self.lying:
                self.arrived.setdefault(u.piece, {}).setdefault(u.position, m)
            if u.piece in self.decoded:
                continue
            got = self.have.setdefault(u.piece, set())
            got.add(u.position)
            if len(got) >= self.need:
                self.decoded.add(u.piece)
                self.decoded_at[u.piece] = at_driver
                self.last_decode = max(self.last_decode, at_driver)
                if self.lying:
                    self.used[u.piece] = list(self.arrived[u.piece].values())[:self.need]
                pieces.append(u.piece)
        return now, dur, at_driver, pieces

    def run(self) -> float:
        """The step (:class:`~elastic_coded.families.usctec.pull_loop.PullLoop`): when its
        last piece decoded, ``inf`` when it was lost."""
        if not self.loop.run():
            return math.inf  # nothing in flight, pieces left: lost (module docstring)
        return max(self.now, self.last_decode)


def pull_step(plan: pl.PullPlan, placement: Placement, eff: Mapping[Hashable, float],
              estimates: Mapping[Hashable, float], time_scale: float, *,
              crashed: Collection[Hashable] = (), options: pl.PullOptions | None = None,
              cost: RuntimeCost | None = None, crash_at: float = 0.5, total: int | None = None,
              record: bool = False, lying: Iterable[Hashable] = (), lag_s: float = 0.0,
              rng: np.random.Generator | None = None) -> PullOutcome:
    """Simulate one pull step of ``plan`` (module docstring).  ``eff``: each machine's
    effective speed (speed over slowdown) and ``estimates`` the controller's speed estimates,
    mappings over ``plan.available``; ``crashed``: machines that die mid-step (their first
    call fails); ``lying``: machines whose results are wrong (used as any, paid for after the
    decode, :mod:`~elastic_coded.sim.lagrange_lies`).  ``total``: the products of the step
    (:func:`pull_total` by default); ``lag_s``: the lag the coded queue allows every call,
    learnt by the step before (:attr:`PullOutcome.lag_s`); ``rng``: a
    :class:`numpy.random.Generator` for the order in which the host's cores (``cost.host_cpus``)
    take the waiting calls in (:func:`~elastic_coded.sim.cost.host_wait`; ``None``: the order
    sent)."""
    opts = options or pl.PullOptions()
    total = int(total) if total is not None else pull_total(plan)
    rates = ps.unit_rates(plan.available, estimates, total / time_scale)
    sub, q = ps.layout(plan, placement, total, rates, opts, lag_s)
    run = _Run(sub, q, dict(eff), float(time_scale), total, opts.depth, set(crashed), crash_at,
               cost, record, frozenset(lying), rng)
    t = run.run()
    lies = None
    if run.lying:
        lies = repair(_decoded(run), t, set(run.lying), set(crashed), cost)
        t = lies.time
    if cost is not None and math.isfinite(t):
        n = len(plan.available)
        t = max(t + cost.step_cost(n), cost.host_floor(n, run.calls, run.cancelled))
    return PullOutcome(t, run.calls, run.units, q.backups, getattr(q, "stolen", 0),
                       run.cancelled, run.measured, tuple(run.ran), tuple(run.filed),
                       run.decoded_at if record else {}, sub if record else None,
                       tuple(run.wakes), lies, run.loop.asking.asked, ps.lag_after(q, lag_s),
                       run.agents.messages if run.agents is not None else 0)


def _decoded(run: _Run) -> Decoded:
    """What the verification of a pull step sees (:class:`~.lagrange_lies.Decoded`): the
    positions taken in, each a unit's own machine; a position's planned machine and the
    holders of a piece's rows from the sub-divided plan."""
    sub, q = run.sub, run.q
    products = cast("Mapping[pl.Unit, int]", q.products)   # the layout's units
    work = {u.piece: v / run.total * run.ts for u, v in products.items()}

    def planned(pi: int, pos: int) -> Hashable | None:
        ms = getattr(sub.pieces[pi], "machines", ())
        return ms[pos] if pos < len(ms) else None

    return Decoded(run.need, sub.K, dict(run.used), lambda pi: run.arrived.get(pi, {}), planned,
                   lambda pi: sub.holders[sub.pieces[pi].group],
                   lambda pi, m: work[pi] / run.eff[m], str)
