"""The one gather loop every scheme's step runs: dispatch :class:`~elastic_coded.schemes.wire.Call`
s, feed results into the scheme's collector as they arrive (``ray.wait``), re-dispatch the work
of machines that die, launch backups when a rule says so, stop as soon as the collector is
complete, and cancel the rest.  It keeps the accounting the step report needs: who straggled,
which machines failed, the products dispatched and wasted, and measured speeds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import ray

from ..errors import StepFailed
from ..schemes.wire import Call, CallResult, packed, result_of
from .drain import is_preempted
from .hosting import MachineHandle

__all__ = ["Gather", "QuorumCollector", "cancel", "Share", "CallRecord"]


@dataclass(frozen=True)
class CallRecord:
    """One call of a step as it ended (the trace's span of it): ``sent`` and ``ended`` are the
    driver's ``perf_counter`` when it was dispatched and when its end was seen; ``out`` the
    machine's answer (``None`` for a call failed or cancelled)."""

    machine: str
    kind: str
    call: Call
    sent: float
    ended: float
    outcome: str
    out: CallResult | None = None


def _consume(fut) -> None:
    fut.exception()  # looked at: Ray does not report it as an unhandled error


def _renumbered(call: Call, used: list) -> Call:
    """``call`` with its tasks' ``arg`` counted among the inputs ``used`` (sent beside it)."""
    if used == list(range(len(used))):  # the inputs sent start at 0 and skip none: as it is
        return call
    arg = {a: i for i, a in enumerate(used)}
    return replace(call, tasks=tuple(replace(t, arg=arg[t.arg]) for t in call.tasks))


def _cancel_stream(gen) -> None:
    """Cancel a batched call no one waits for any more (its machines' calls with it)."""
    try:
        ray.cancel(gen)
    except Exception:  # its process is gone: nothing runs any more
        pass


def cancel(ref) -> None:
    """Cancel a call no one waits for any more.  Its outcome is still consumed when it comes:
    a call that failed first (a machine's crash, :class:`~.worker.MachineDied`) would
    otherwise be printed by Ray as an unhandled error when the reference is dropped."""
    try:
        ray.cancel(ref)
    except Exception:  # its actor is gone: nothing runs any more
        pass
    ref.future().add_done_callback(_consume)


class Share:
    """One machine's share of a worker process's batched call: its key in
    :attr:`Gather.pending` (compared by identity), as an ``ObjectRef`` is for a call alone."""

    __slots__ = ("stream", "machine")

    def __init__(self, stream, machine):
        self.stream, self.machine = stream, machine


class QuorumCollector:
    """Complete once ``need`` calls have finished (unified's Map: the fastest ``q``)."""

    def __init__(self, need: int):
        self.need = need
        self.finished: list[CallResult] = []

    @property
    def done(self) -> bool:
        return len(self.finished) >= self.need

    def add_call(self, out: CallResult) -> bool:
        if self.done:
            return False
        self.finished.append(out)
        return True


@dataclass
class Gather:
    """One step's calls in flight (see the module docstring).

    ``inputs``: the ObjectRefs passed beside each call (by ``arg`` index).  ``handles``:
    ``{machine: actor handle}``.  ``on_lost(machine, call)`` returns ``[(machine, handle,
    Call), ...]`` to dispatch instead of a dead machine's call; ``backup(now)`` (optional) is
    asked, when ``next_backup_s`` elapses with nothing arriving, for calls to launch."""

    inputs: list
    handles: Mapping
    collector: Any  # a QuorumCollector, or a scheme's (LagrangeCollector, ...)
    on_lost: Callable
    backup: Callable | None = None
    pending: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)
    preempted: list = field(default_factory=list)
    """Machines lost mid-step to a preempted node (their error's ``preempted``), not failed."""
    finished: dict = field(default_factory=dict)
    products: int = 0
    wasted: int = 0
    rows_dispatched: int = 0
    slowest: float = 0.0
    done_times: list = field(default_factory=list)
    backups: int = 0
    t_last: float = 0.0
    cols_of: dict = field(default_factory=dict)
    """Columns of each input (by ``arg``), for counting products."""
    weights: Any = None
    """What a row range costs per column (:class:`~elastic_coded.algebra.sparse.RowWeights`:
    its nonzeros for a sparse ``A``); ``None``: its rows."""
    speculated: set = field(default_factory=set)
    streams: dict = field(default_factory=dict)
    """Batched calls in flight: ``{generator: {machine: Share}}`` (:meth:`dispatch_many`)."""
    singles: set = field(default_factory=set)
    """The calls in flight sent alone (:meth:`dispatch`), the keys of :attr:`pending` that are
    ``ObjectRef`` s (the others are :class:`Share` s of :attr:`streams`)."""
    _median: tuple = (0, None)
    busy: dict = field(default_factory=dict)
    """``{machine: [work, seconds]}`` summed over the calls it finished this step (a machine
    computes its calls one at a time, so their busy times add up)."""
    lags: list = field(default_factory=list)
    """Per machine, its first finished call's time from sent to taken minus the machine's busy
    time: what every call pays beside the machine (dispatch, the host's delays, the result's
    way back)."""
    calls: list = field(default_factory=list)
    """Every call of the step as it ended: :class:`CallRecord` s (for the trace)."""
    kind: str = "call"
    """What the calls dispatched now are: ``"call"``, ``"backup"`` or ``"repair"``."""
    t_start: float = 0.0
    """When the gather began waiting (``perf_counter``); ``t_end``: when it stopped."""
    t_end: float = 0.0
    _sent: dict[Any, tuple[str, str, Call, float]] = field(default_factory=dict)

    def sent(self, key, machine, call: Call, now: float) -> None:
        """Note a call dispatched (``key``: its ObjectRef or :class:`Share`)."""
        self._sent[key] = (machine, self.kind, call, now)

    def note(self, key, outcome: str, out: CallResult | None = None) -> None:
        """Note how the call ``key`` ended: ``"used"``, ``"late"`` (its result was not
        needed), ``"failed"`` or ``"cancelled"``."""
        rec = self._sent.pop(key, None)
        if rec is not None:
            machine, kind, call, sent = rec
            self.calls.append(CallRecord(machine, kind, call, sent, time.perf_counter(), outcome,
                                         out))

    def dispatch_many(self, entries: list) -> None:
        """Dispatch ``[(machine, handle, Call), ...]`` with one Ray call per worker process:
        the machines a process hosts run their calls together, and their results stream back
        one by one as they finish (:meth:`~.hosting.Worker.compute_many`).  A process with one
        machine here gets a plain call."""
        by_host: dict = {}
        for m, h, call in entries:
            h = h if h is not None else self.handles[m]
            host = getattr(h, "host", None)
            group = by_host.setdefault(host._actor_id.hex() if host is not None else id(h), [])
            if host is None or any(m == m2 for m2, _, _ in group):
                self.dispatch(m, h, call)  # a plain actor, or a machine's second call: alone
            else:
                group.append((m, h, call))
        for group in by_host.values():
            if not group:
                continue
            if len(group) == 1:
                self.dispatch(*group[0])
                continue
            used = sorted({t.arg for _, _, call in group for t in call.tasks})
            payload, refs = self._packed(tuple((h.machine, call) for m, h, call in group), used)
            gen = group[0][1].host.compute_many.options(num_returns="streaming").remote(
                payload, *refs)
            now = time.perf_counter()
            shares = self.streams[gen] = {}
            for m, _, call in group:
                shares[m] = share = Share(gen, m)
                self.pending[share] = (m, call, now)
                self.sent(share, m, call, now)
                self._count(call)

    def dispatch(self, machine, handle, call: Call):
        """Send ``call`` with only the inputs its tasks use (packed with it, :meth:`_packed`,
        to a hosted machine; to a plain actor, by position, their ``arg`` renumbered)."""
        h = handle if handle is not None else self.handles[machine]
        used = sorted({t.arg for t in call.tasks})
        if isinstance(h, MachineHandle):
            payload, refs = self._packed(call, used)
            ref = h.compute_packed.remote(payload, *refs)
        else:
            ref = h.compute.remote(_renumbered(call, used), *[self.inputs[a] for a in used])
        now = time.perf_counter()
        self.pending[ref] = (machine, call, now)
        self.sent(ref, machine, call, now)
        self.singles.add(ref)
        self._count(call)
        return ref

    def _packed(self, obj, used: list) -> tuple:
        """``(payload, refs)``: ``obj`` pickled once with the inputs ``used`` that travel
        inside it (arrays), the others passed beside it by reference
        (:func:`~elastic_coded.schemes.wire.packed`)."""
        inline = {a: self.inputs[a] for a in used
                  if not isinstance(self.inputs[a], ray.ObjectRef)}
        by_ref = tuple(a for a in used if a not in inline)
        return packed(obj, inline, by_ref), [self.inputs[a] for a in by_ref]

    def _count(self, call: Call) -> None:
        for t in call.tasks:
            self.products += self.task_products(t)
            self.rows_dispatched += t.num_rows

    def task_products(self, t) -> int:
        """The products task ``t`` computes: its rows (or their nonzeros) times its columns."""
        w = t.num_rows if self.weights is None else self.weights.of(t.rows)
        return w * self._cols(t)

    def _cols(self, t) -> int:
        return (t.cols[1] - t.cols[0]) if t.cols is not None else self.cols_of[t.arg]

    def run(self, next_backup_s: Callable | None = None) -> None:
        """Gather until the collector is complete (raises if results run out first)."""
        self.t_last = time.perf_counter()
        self.t_start = self.t_start or self.t_last
        c = self.collector
        try:
            while not c.done:
                if not self.pending:
                    if hasattr(c, "settle"):  # outputs waiting for better results: no more come
                        c.settle()
                        if c.done:
                            break
                    raise StepFailed("step: results ran out before every output decoded")
                timeout = next_backup_s() if next_backup_s is not None else None
                waits = [r for r in self.singles if r in self.pending]
                ready, _ = ray.wait(waits + list(self.streams), num_returns=1, timeout=timeout)
                if not ready:  # a timeout: only asked for with backups on
                    self.kind = "backup"
                    for m, h, call in self.backup(time.perf_counter()) if self.backup else ():
                        self.dispatch(m, h, call)
                        self.backups += 1
                    self.kind = "call"
                    continue
                if ready[0] in self.streams:
                    self._take_stream(ready[0])
                else:
                    self._take(ready[0])
        finally:
            self.t_end = time.perf_counter()
            for r in self.pending:
                self.note(r, "cancelled")
                if not isinstance(r, Share):
                    cancel(r)
            for gen in self.streams:
                _cancel_stream(gen)
            self.streams.clear()

    def _take(self, r) -> None:
        try:
            out: CallResult = result_of(ray.get(r))
        except ray.exceptions.RayActorError as exc:
            self._lost(r, is_preempted(exc))
            return
        self._got(r, out)

    def _take_stream(self, gen) -> None:
        """The next results of a batched call (or its process's death: all its machines')."""
        shares = self.streams[gen]
        try:
            items = result_of(ray.get(next(gen)))
        except StopIteration:
            items = ()
        except ray.exceptions.RayActorError as exc:
            del self.streams[gen]
            for share in shares.values():
                self._lost(share, is_preempted(exc))
            return
        for it in items:
            share = shares.pop(it.machine)
            if it.result is None:
                self._lost(share)  # the machine crashed or left: not a preemption
            else:
                self._got(share, it.result)
        if not items or not shares:  # the call ended: every machine of it answered
            del self.streams[gen]
            for share in shares.values():  # none: a call ends once all its machines answer
                self._lost(share)

    def _lost(self, key, preempted: bool = False) -> None:
        machine, call, _ = self.pending.pop(key)
        self.note(key, "failed")
        self.singles.discard(key)
        (self.preempted if preempted else self.failed).append(machine)
        self.kind = "repair"
        for m2, h2, call2 in self.on_lost(machine, call):
            self.dispatch(m2, h2, call2)
        self.kind = "call"

    def _got(self, key, out: CallResult) -> None:
        machine, call, t_sent = self.pending.pop(key)
        self.singles.discard(key)
        self.done_times.append(time.perf_counter() - t_sent)
        self.finished.setdefault(machine, out)
        self.measure(machine, out, self.done_times[-1])
        c = self.collector
        if hasattr(c, "add_call"):
            useful = c.add_call(out)
        else:
            useful = False
            for task, H in zip(call.tasks, out.results):
                useful |= c.add(machine, task, H)
        self.note(key, "used" if useful else "late", out)
        if useful:
            self.slowest = max(self.slowest, out.elapsed_s)
            self.t_last = time.perf_counter()
        else:
            self.wasted += out.products

    def stragglers(self) -> tuple:
        return tuple(sorted({m for m, _, _ in self.pending.values()}, key=str))

    def leftover_products(self) -> int:
        return sum(self.task_products(t) for _, call, _ in self.pending.values()
                   for t in call.tasks)

    def measure(self, machine, out: CallResult, waited: float) -> None:
        """Count ``out`` (taken ``waited`` s after it was sent) toward ``machine``'s measured
        speed (:meth:`measured_speeds`)."""
        busy = out.busy_s
        if machine not in self.busy:
            self.lags.append(max(0.0, waited - busy))
        acc = self.busy.setdefault(machine, [0.0, 0.0])
        acc[0] += out.work
        acc[1] += busy

    def measured_speeds(self, total_products: int, scale: float) -> dict:
        """``{machine: (speed, 'value' | 'upper')}`` (work in units of the step's products).

        A machine that finished calls this step: their work over their busy time
        (``'value'``).  One that finished none: an upper bound from its oldest call still
        running, which has been at the head of its queue since it was sent, less what every
        call pays beside the machine (the median of :attr:`lags`): ``'upper'``, none when
        that leaves no time.  A call queued behind another bounds nothing: the machine was
        busy with the other one, so its later calls are never used for a bound (they would
        drag a fast machine's estimate down)."""
        lag = statistics.median(self.lags) if self.lags else 0.0
        out = {}
        for m, (work, secs) in self.busy.items():
            if work > 0 and secs > 0:
                out[m] = (work * scale / secs, "value")
        oldest: dict = {}
        for m, call, t_sent in self.pending.values():
            if m not in out and (m not in oldest or t_sent < oldest[m][1]):
                oldest[m] = (call, t_sent)
        now = time.perf_counter()
        for m, (call, t_sent) in oldest.items():
            work = sum(self.task_products(t) for t in call.tasks) / max(1, total_products)
            if work > 0 and now - t_sent - lag > 0:
                out[m] = (work * scale / (now - t_sent - lag), "upper")
        return out

    def median_done(self) -> float | None:
        """The median completed call's time (asked at every wait: kept until a call ends)."""
        n = len(self.done_times)
        if n != self._median[0]:
            self._median = (n, statistics.median(self.done_times) if n else None)
        return self._median[1]
