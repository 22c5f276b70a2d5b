"""Worker processes and the machines they host.

A :class:`Worker` is one Ray actor (one process) hosting up to ``machines_per_process``
:class:`~.worker.Machine` s on one node.  Emulating many machines on one host, a process per
machine costs about 60 MiB each for Ray's and Python's own state; sharing a process keeps only
the rows.  Real machines (``time_scale = 0``, measured speeds) get a process each by default, so
that one machine's compute never slows another's.

Everything else sees a machine through its :class:`MachineHandle`, used like an actor handle:
``h.compute.remote(call, *refs)`` returns an ``ObjectRef``, ``ray.cancel`` cancels it, and a
machine that crashed or left raises :class:`~.worker.MachineDied` (an ``ActorDiedError``) from
every call, as a dead actor would.  A lost process or node fails all its machines' calls with
Ray's own ``ActorDiedError``.  :func:`kill` is ``ray.kill`` for either kind of handle.

:class:`HostPool` (the controller's) places machines in processes, and stops a process once
none of its machines is left.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, cast

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..errors import ArgumentError
from ..machines import per_process
from ..schemes.wire import BatchItem, packed_result, unpacked
from .worker import Machine, MachineDied

__all__ = ["Worker", "MachineHandle", "MachineDied", "HostPool", "kill", "kill_process",
           "clock_offset", "per_process", "reclaim", "orphans"]

#: a machine's methods callable through its handle
METHODS = frozenset({"ping", "store_chunks", "store_npy", "keep_only", "drop_sources",
                     "compute", "compute_packed", "lie", "shuffle_send", "shuffle_receive",
                     "reduce", "map_result", "exit"})


LINGER, LINGER_S = 0.02, 0.001
"""After a hosted machine's result in a batched call, the others finishing within ``LINGER``
of the call's time so far (at most ``LINGER_S`` seconds) are sent with it: a plan gives the
machines of a process about the same finish time, and each message costs the driver more
than this wait costs the step."""


@ray.remote(num_cpus=0)
class Worker:
    """A worker process hosting machines (see the module docstring)."""

    def __init__(self):
        self.machines: dict[str, Machine] = {}

    async def add(self, machine_id: str, field_spec, speed: float, time_scale: float) -> None:
        if machine_id in self.machines and self.machines[machine_id].dead is None:
            raise ArgumentError(f"machine: {machine_id!r} is already hosted here")
        self.machines[machine_id] = Machine(machine_id, field_spec, speed, time_scale)

    async def call(self, machine_id: str, method: str, *args):
        """Run machine ``machine_id``'s ``method`` on ``args``."""
        if method not in METHODS:
            raise ArgumentError(f"method: {method!r} is not a machine's; one of {sorted(METHODS)}")
        m = self.machines.get(machine_id)
        if m is None:
            raise MachineDied(machine_id, ray.get_runtime_context().get_actor_id(), "is unknown")
        m.check_alive()
        return await getattr(m, method)(*args)

    async def compute_many(self, payload: bytes, *refs):
        """Run several hosted machines' calls of one step at once (``payload``: ``((machine,
        Call), ...)`` and the inputs they use, :func:`~elastic_coded.schemes.wire.packed`;
        ``refs``: the inputs sent by reference), each machine at its own pace as if called
        alone.  A streaming generator: it yields a tuple of
        :class:`~elastic_coded.schemes.wire.BatchItem` whenever some finish, so that a fast
        machine's result never waits for a slow one's.  Cancelled, it cancels the calls still
        running (a machine scripted to crash then crashes, as when its own call is
        cancelled)."""
        items, by_arg = unpacked(payload, refs)
        tasks = [asyncio.ensure_future(self._one(mid, call, by_arg)) for mid, call in items]
        pending = set(tasks)
        t0 = time.perf_counter()
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                wait = min(LINGER_S, LINGER * (time.perf_counter() - t0))
                if pending and wait > 0:  # those about to finish go in the same message
                    more, pending = await asyncio.wait(pending, timeout=wait)
                    done |= more
                yield packed_result(tuple(t.result() for t in tasks if t in done))
        finally:
            for t in pending:
                t.cancel()

    async def _one(self, machine_id: str, call, inputs) -> BatchItem:
        m = self.machines.get(machine_id)
        try:
            if m is None:
                raise MachineDied(machine_id, None, "is unknown")
            m.check_alive()
            return BatchItem(machine_id, await m.compute_on(call, inputs))
        except MachineDied as exc:
            return BatchItem(machine_id, died=exc.why)

    async def ping_many(self, machine_ids: tuple) -> dict:
        """``{machine: its ping's answer, or None}`` for hosted machines (``None``: it crashed,
        left or is unknown here): one call for every machine of the process."""
        out = {}
        for mid in machine_ids:
            m = self.machines.get(mid)
            out[mid] = None if m is None or m.dead is not None else await m.ping()
        return out

    async def crash(self, machine_id: str) -> None:
        """End machine ``machine_id`` without notice: its rows are dropped, its running calls
        raise at once, and so do later ones (a bare dead record is kept for them)."""
        m = self.machines.get(machine_id)
        if m is not None:
            m.die()

    async def hosted(self) -> tuple:
        """The machines alive here."""
        return tuple(i for i, m in self.machines.items() if m.dead is None)

    async def clock(self) -> float:
        """This process's wall clock (``time.time()``), to line up its times with the
        driver's (:func:`clock_offset`)."""
        return time.time()


@dataclass(frozen=True)
class MachineHandle:
    """A machine, reached through its worker process (used like an actor handle)."""

    host: Any  # the worker process's Ray actor handle
    machine: str

    def __getattr__(self, name: str):
        if name not in METHODS:
            raise AttributeError(name)
        return _Method(self.host, self.machine, name)


@dataclass(frozen=True)
class _Method:
    host: Any
    machine: str
    name: str

    def remote(self, *args):
        return self.host.call.remote(self.machine, self.name, *args)


def clock_offset(handle, timeout: float = 5.0) -> float:
    """The wall clock of ``handle``'s worker process minus the caller's, in seconds, measured
    once by a round trip (its midpoint taken for the moment the process read its clock); 0 for
    a machine not hosted in a worker process, or one that does not answer."""
    host = getattr(handle, "host", None)
    if host is None:
        return 0.0
    t0 = time.time()
    try:
        theirs = ray.get(host.clock.remote(), timeout=timeout)
    except Exception:  # dead or slow: its spans keep the driver's clock
        return 0.0
    return float(theirs) - (t0 + time.time()) / 2


def kill(handle) -> None:
    """Crash a machine (a :class:`MachineHandle`) or stop an actor, without notice; a handle
    already gone is skipped."""
    try:
        if isinstance(handle, MachineHandle):
            handle.host.crash.remote(handle.machine)
        else:
            ray.kill(handle, no_restart=True)
    except Exception:  # already gone
        pass


def kill_process(handle) -> None:
    """Stop the process of a machine (every machine in it) or an actor; gone ones skipped."""
    kill(handle.host if isinstance(handle, MachineHandle) else handle)


class HostPool:
    """Which process hosts each machine (the controller's): a machine goes to a process on its
    node (or, with no node named, to one placed anywhere) with room, or to a new one; a process
    is stopped when the last of its machines is released."""

    def __init__(self, per_process: int):
        self.per = int(per_process)
        self.hosts: dict[str, tuple] = {}   # actor id -> (handle, node, {machines})
        self.where: dict[str, str] = {}     # machine -> actor id
        self._named: dict[str, int] = {}    # name prefix -> processes opened under it

    def place(self, machine_id: str, node: str | None, *init, prefix: str | None = None) -> tuple:
        """Start machine ``machine_id`` (``init``: field, speed, time scale) in a process.
        Returns ``(handle, ref)``: wait for ``ref`` before calling the machine (an async
        actor may start a later call first).  ``prefix``: a process opened for it is named
        ``{prefix}-{n}`` (``n`` = 0, 1, ... per prefix), so that a controller that takes over
        from one that died mid-call can find and stop it (:func:`reclaim`)."""
        key = next((k for k, (_, n, ms) in self.hosts.items()
                    if n == node and len(ms) < self.per), None)
        if key is None:
            opts: dict[str, Any] = {} if node is None else {
                "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
            if prefix is not None:
                opts["name"] = f"{prefix}-{self._named.get(prefix, 0)}"
                self._named[prefix] = self._named.get(prefix, 0) + 1
            # detached: it outlives the controller that started it (the driver replaces a dead
            # controller, and the shutdown stops every worker)
            h = cast(Any, Worker).options(lifetime="detached", **opts).remote()  # Ray's remote
            key = h._actor_id.hex()
            self.hosts[key] = (h, node, set())
        h, _, ms = self.hosts[key]
        ref = h.add.remote(machine_id, *init)
        ms.add(machine_id)
        self.where[machine_id] = key
        return MachineHandle(h, machine_id), ref

    def adopt(self, machine_id: str, handle, node: str | None) -> None:
        """Take over a running machine (from a controller that died)."""
        if isinstance(handle, MachineHandle):
            key = handle.host._actor_id.hex()
            self.hosts.setdefault(key, (handle.host, node, set()))[2].add(machine_id)
            self.where[machine_id] = key

    def release(self, machine_id: str) -> None:
        """The machine ended: forget it, and stop its process if no machine is left there."""
        key = self.where.pop(machine_id, None)
        if key is None:
            return
        h, _, ms = self.hosts[key]
        ms.discard(machine_id)
        if not ms:
            del self.hosts[key]
            kill(h)

    def processes(self) -> list:
        """The worker processes in use (actor handles)."""
        return [h for h, _, _ in self.hosts.values()]

    def stop_all(self) -> None:
        for h, _, _ in self.hosts.values():
            kill(h)
        self.hosts.clear()
        self.where.clear()


def reclaim(prefixes) -> int:
    """Stop the processes named ``{prefix}-0``, ``{prefix}-1``, ... (:meth:`HostPool.place`)
    of each prefix: opened by a controller that died in the middle of the call they were
    opened for, they host only that call's machines, which no one holds a handle to.  Returns
    the processes stopped."""
    stopped = 0
    for prefix in prefixes:
        n = 0
        while True:
            try:
                h = ray.get_actor(f"{prefix}-{n}")
            except ValueError:  # no such process: the call opened no more
                break
            kill(h)
            stopped += 1
            n += 1
    return stopped


async def orphans(processes, keep) -> list:
    """``[(process, machine)]``: machines alive in ``processes`` that are not in ``keep`` (left
    there by a controller that died in the middle of adding them)."""
    import asyncio

    answers = await asyncio.gather(*[p.hosted.remote() for p in processes],
                                   return_exceptions=True)
    return [(p, m) for p, got in zip(processes, answers) if not isinstance(got, BaseException)
            for m in got if m not in keep]
