"""The runtime's own cost, as the simulator charges it: :class:`RuntimeCost`.  Pure.

With ``simulate(..., cost=None)`` a step takes its computation alone (the pure compute model:
planning, dispatch and decoding take no simulated time).  With a :class:`RuntimeCost` a step
also pays what the Ray runtime pays around the computation:

* ``step_s`` once per step (the driver's fixed work: encoding, the report, the verifier's
  bookkeeping, the controller's report call), ``machine_s`` per machine present (what grows
  with the machines: building and dispatching their calls, the plan's and the report's
  tables), and ``plan_s`` for the controller's planning (a round trip to the controller actor
  and the plan, cached or not).  The runtime asks for a step's plan as the step before starts,
  so the simulator's runs charge ``plan_s`` whole on a first step, after a membership change
  (the plan asked ahead is dropped) and after a lost step, and otherwise only what it outlasts
  the step before (:meth:`~elastic_coded.sim.pulled.WholeRun._cost`);
* ``call_s`` on the driver for every call it dispatches, one after another (a whole plan's
  calls go one per worker process of ``per_process`` machines, as
  :meth:`~elastic_coded.runtime.gather.Gather.dispatch_many` batches them; a pull step sends
  every call alone), so a machine's work starts when its call is out;
* ``round_trip_s`` on the driver for every call's result it takes in, one after another (a
  result that arrives while the driver is busy waits).  A whole plan's process streams its
  machines' results back on its one call, and the driver takes each in on its own: at 48
  machines on 2 cores it took 46 streamed results in over 15-18 ms, 0.35-0.4 ms apiece.  The
  deadline's backups of a whole plan go by these times, as the runtime's do (it measures a
  call's time when it takes the result in: :func:`taken_in`);
* ``worker_call_s`` on the machine for every call (the worker's own time taking the call
  in), paid as the call arrives, before it may start: the runtime's worker is an async actor
  and takes a queued call in while it computes the one before, so only a call to an idle
  machine waits for it.  It is not in the busy time a machine's speed and a pull queue's
  rates are measured on (the runtime's emulated machines report their paced time,
  ``CallResult.busy_s``);
* ``scan_s`` per machine present on the driver at every event of a pull step (a result taken
  in, a wake-up): how the driver's cost per result grows with the machines (it waits on every
  call in flight; the loop asks only the machines that may get work,
  :mod:`~elastic_coded.families.usctec.asking`);
* ``decide_s`` on the driver for every decision of a ``usctec-pull`` step's coded queue (a
  ``next_for`` asked, answered or not): its rules (steals, coded backups, naps) are Python the
  driver runs between results, measured by the runtime's pull steps (``report.extra``
  ``t_decide`` over ``decisions``); ``dynamic``'s queue is cheap and part of ``call_s``;
* ``host_cpus``: when every process shares one host's cores (emulated machines on one
  embedded Ray, as in the fidelity benchmark), a step also cannot end before the host has
  done its CPU work: ``host_step_s + machines * host_machine_s + calls * host_call_s +
  cancelled * host_cancel_s`` CPU seconds over ``host_cpus`` cores (:meth:`RuntimeCost.host_floor`:
  the driver's, the controller's, Ray's and the workers' CPU together; on a 2-core host a
  pull step is bound by it, not by the driver alone).  Within a pull step the cores also take
  the calls' CPU in turn: a call starts no sooner than the host has done the work of the calls
  and cancellations sent before it (``host_call_s`` and ``host_cancel_s`` over the cores), so
  the burst of a step's first calls delays them even where the whole step's CPU is below the
  floor.  The cores take the waiting work in no particular order (:func:`host_wait`): the
  operating system runs the driver's, the workers' and Ray's processes as it sees fit, not
  call by call, so a call that would wait ``W`` first come, first served waits a uniform share
  of ``2 W`` (the same mean).  In the order sent, at 48 machines and 50 ms (calls of 25 ms),
  the lateness of the simulator's calls had a short tail (90th, 95th and 99th percentiles 57,
  61 and 72 ms) where the runtime's had a long one (66, 83 and 120 ms), which its coded queue
  takes for stragglers: it made about 270-290 calls a step to the simulator's 252.  In no
  particular order the simulator's percentiles are 66, 82 and 105 ms, and it makes about 300.
  ``0`` (the default): machines have their own CPUs, no floor and no queue.

**Two levels** (``group`` > 0, issue 47's design, not yet in the runtime): machines are grouped
``group`` to an agent (one per Ray node on a cluster), and the driver talks to agents only.  A
whole plan's driver sends one call per agent (``call_s`` each), the agent calls each of its
machines (``agent_call_s`` each, agents in parallel) and takes each result in
(``agent_take_s``), and sends the driver one message at a time carrying every result it has
taken in since the last (a message waits until the driver has taken the one before in, so a
busy driver gets fewer, fuller messages); the driver takes a message in for ``round_trip_s``
plus ``merge_s`` per result in it (what is left of a result's cost on the driver when the agent
has summed its share of the decode: 0 where that share is as cheap as one result).  A pull
step runs its loop in the agents: each agent is its own server for its machines' calls
(``agent_call_s``), results (``agent_take_s``) and the coded queue's decisions (``decide_s``),
and forwards results to the driver the same way; a unit taken from another machine's queue
also costs the driver a ``call_s`` (the driver moves work between agents).  ``machine_s``,
the per-machine building of a step's calls, is paid once per agent on the driver and per
machine in each agent (in parallel).  :meth:`RuntimeCost.two_level` gives the one-level
figures to the agents (the same cost terms, paid where the two levels pay them).

``python -m benchmarks calibrate`` measures the figures on the host with a small Ray run and
writes them to ``benchmarks/results/runtime_cost.json``; :meth:`RuntimeCost.load` reads that
file.  The defaults are figures of the same order as that run on a 2-core host.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from ..errors import ArgumentError

__all__ = ["RuntimeCost", "dispatch_offsets", "driver_finish", "host_wait", "taken_in",
           "agents_of", "agent_messages", "two_level_finish"]


@dataclass(frozen=True)
class RuntimeCost:
    """Seconds the runtime spends around a step's computation (module docstring)."""

    step_s: float = 0.02
    """Fixed cost per step on the driver."""
    call_s: float = 0.002
    """Driver's cost of dispatching one call."""
    round_trip_s: float = 0.002
    """Driver's cost of taking in one result."""
    plan_s: float = 0.005
    """The controller's planning per step (including its round trip)."""
    worker_call_s: float = 0.001
    """A worker's own time per call, paid as the call arrives (module docstring)."""
    per_process: int = 4
    """Machines one worker process hosts (a whole plan's calls are one per process)."""
    machine_s: float = 0.0
    """Cost per step per machine present."""
    scan_s: float = 0.0
    """A pull step's driver cost per machine present at every event."""
    decide_s: float = 0.0
    """The driver's cost of one decision of the coded pull queue."""
    host_cpus: int = 0
    """Cores every process shares (``0``: machines have their own; no host floor)."""
    host_step_s: float = 0.0
    """Host CPU seconds per step, whatever its calls."""
    host_machine_s: float = 0.0
    """Host CPU seconds per step per machine present."""
    host_call_s: float = 0.0
    """Host CPU seconds per call sent (every process's part: submit, run, result)."""
    host_cancel_s: float = 0.0
    """Host CPU seconds a cancelled call costs beyond one that returns."""
    group: int = 0
    """Machines per agent of a two-level step (module docstring); ``0``: one level."""
    agent_call_s: float = 0.0
    """An agent's cost of calling one of its machines (two levels)."""
    agent_take_s: float = 0.0
    """An agent's cost of taking in one of its machines' results (two levels)."""
    merge_s: float = 0.0
    """The driver's cost per machine result inside an agent's message (two levels)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("per_process", "host_cpus", "group"):
                low = 1 if f.name == "per_process" else 0
                if isinstance(v, bool) or not isinstance(v, int) or v < low:
                    raise ArgumentError(f"{f.name}: an int >= {low}, got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                    v >= 0 and math.isfinite(v)):
                raise ArgumentError(f"{f.name}: seconds, a finite number >= 0, got {v!r}")

    @property
    def fixed_s(self) -> float:
        """What every step pays whatever it computes and however many machines: ``step_s +
        plan_s``."""
        return self.step_s + self.plan_s

    def step_cost(self, machines: int) -> float:
        """What a step on ``machines`` machines pays around its calls: ``step_s + plan_s +
        machines * machine_s``; with two levels, ``machine_s`` per agent on the driver and per
        machine of the largest agent in the agents (in parallel)."""
        if self.group and machines:
            agents = -(-machines // self.group)
            return self.fixed_s + (agents + min(self.group, machines)) * self.machine_s
        return self.fixed_s + machines * self.machine_s

    def two_level(self, group: int, merge_s: float = 0.0) -> RuntimeCost:
        """These figures on two levels of ``group`` machines per agent: the agents pay what
        the driver paid per machine call (``call_s``) and per result (``round_trip_s``); the
        driver keeps ``round_trip_s`` per message and ``merge_s`` per result in one."""
        return replace(self, group=group, agent_call_s=self.call_s,
                       agent_take_s=self.round_trip_s, merge_s=merge_s)

    def host_floor(self, machines: int, calls: int, cancelled: int = 0) -> float:
        """The least time a step of ``calls`` calls (``cancelled`` of them cancelled) on
        ``machines`` machines takes when every process shares ``host_cpus`` cores: its host CPU
        over the cores (module docstring); 0 without ``host_cpus``."""
        if not self.host_cpus:
            return 0.0
        cpu = (self.host_step_s + machines * self.host_machine_s + calls * self.host_call_s
               + cancelled * self.host_cancel_s)
        return cpu / self.host_cpus

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RuntimeCost:
        """From a mapping with some of the fields (the others keep their defaults); an
        unknown key is an error naming the known ones."""
        known = {f.name for f in fields(cls)}
        bad = sorted(set(data) - known)
        if bad:
            raise ArgumentError(f"cost: {bad} are not fields of RuntimeCost; known: "
                                f"{sorted(known)}")
        return cls(**dict(data))

    @classmethod
    def load(cls, path: str) -> RuntimeCost:
        """From a calibration results file (``python -m benchmarks calibrate``): its ``cost``
        mapping, or the file's top level when it has none."""
        with open(path) as fh:
            data = json.load(fh)
        return cls.from_dict(data.get("cost", data) if isinstance(data, dict) else data)

    def save(self, path: str, **extra: Any) -> None:
        """Write ``{"cost": fields, **extra}`` as JSON (what :meth:`load` reads)."""
        with open(path, "w") as fh:
            json.dump({"cost": self.to_dict(), **extra}, fh, indent=1)


def dispatch_offsets(has_work: np.ndarray, cost: RuntimeCost) -> np.ndarray:
    """When each machine of a whole plan starts computing, and its per-call cost: its worker
    process's call goes out ``call_s`` after the one before (machines in plan order, in
    processes of ``per_process``), and the worker adds ``worker_call_s``.  Machines without
    work get 0."""
    has = np.asarray(has_work, dtype=bool)
    k = np.cumsum(has) - 1
    if cost.group:  # the agent's call, then the agent's to each of its machines in turn
        out = ((k // cost.group + 1) * cost.call_s + (k % cost.group + 1) * cost.agent_call_s
               + cost.worker_call_s)
    else:
        out = (k // cost.per_process + 1) * cost.call_s + cost.worker_call_s
    return np.where(has, out, 0.0)


def agents_of(has_work: np.ndarray, group: int) -> np.ndarray:
    """Each machine's agent in a two-level whole plan: machines with work in plan order,
    ``group`` to an agent (``-1``: no work)."""
    has = np.asarray(has_work, dtype=bool)
    return np.where(has, (np.cumsum(has) - 1) // max(1, group), -1)


def agent_messages(finish: np.ndarray, agent: np.ndarray,
                   cost: RuntimeCost) -> tuple[float, int]:
    """``(driver's time after the last message, messages)``: the results ``finish`` (per
    machine; ``inf``: none) of agents ``agent`` taken in by their agents, ``agent_take_s``
    each in arrival order, and sent on one message at a time (module docstring), which the
    driver takes in one after another for ``round_trip_s`` plus ``merge_s`` per result."""
    f = np.asarray(finish, dtype=np.float64)
    ag = np.asarray(agent)
    ready: dict[int, np.ndarray] = {}
    for a in np.unique(ag[np.isfinite(f) & (ag >= 0)]).tolist():
        ready[a] = taken_in(f[(ag == a) & np.isfinite(f)], cost.agent_take_s)
        ready[a].sort()
    heap = [(float(r[0]), a) for a, r in ready.items() if r.size]
    heapq.heapify(heap)
    nxt = dict.fromkeys(ready, 0)
    d, messages = 0.0, 0
    while heap:
        sent, a = heapq.heappop(heap)
        r, i = ready[a], nxt[a]
        j = int(np.searchsorted(r, sent, side="right"))  # every result taken in by then
        d = max(d, sent) + cost.round_trip_s + cost.merge_s * (j - i)
        messages += 1
        nxt[a] = j
        if j < r.size:  # the next waits until the driver has taken this one in
            heapq.heappush(heap, (max(d, float(r[j])), a))
    return d, messages


def host_wait(fifo_s: float, rng: np.random.Generator | None) -> float:
    """How long a call waits for the host's cores when, served first come, first served, it
    would wait ``fifo_s``: a uniform share of ``2 * fifo_s`` (the same mean; the cores take
    the waiting work in no particular order, module docstring), or ``fifo_s`` itself without
    ``rng`` (in the order sent)."""
    w = max(0.0, float(fifo_s))
    return w if rng is None or w == 0.0 else 2.0 * w * float(rng.random())


def taken_in(finish: np.ndarray, each: float) -> np.ndarray:
    """When the driver has taken in each result (``finish``: when each call returned,
    ``inf``: never), one after another in arrival order, ``each`` seconds apiece."""
    f = np.asarray(finish, dtype=np.float64)
    out = np.full(f.shape, np.inf)
    d = 0.0
    for i in np.argsort(f, kind="stable").tolist():
        if not math.isfinite(f[i]):
            break
        d = max(d, float(f[i])) + each
        out[i] = d
    return out


def driver_finish(finish: np.ndarray, end: float, cost: RuntimeCost) -> float:
    """When the driver has taken in every result of a whole plan that came by ``end`` (the
    step's last needed one), ``round_trip_s`` apiece (each machine's result of a worker
    process's stream is taken in on its own; module docstring), one after another in arrival
    order: the step's end on the driver."""
    f = np.asarray(finish, dtype=np.float64)
    t = taken_in(f[f <= end], cost.round_trip_s)
    return max(float(t.max()), end) if t.size else end


def two_level_finish(finish: np.ndarray, end: float, agent: np.ndarray,
                     cost: RuntimeCost) -> tuple[float, int]:
    """:func:`driver_finish` on two levels: ``(the step's end on the driver, messages)``, the
    results by ``end`` reaching it in its agents' messages (:func:`agent_messages`)."""
    f = np.asarray(finish, dtype=np.float64)
    d, messages = agent_messages(np.where(f <= end, f, np.inf), agent, cost)
    return max(d, end), messages
