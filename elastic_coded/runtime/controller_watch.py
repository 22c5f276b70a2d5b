"""The controller's watch over its machines (a base of :class:`~.controller.Controller`): the
health loop's pings, Ray's node table and drain notices, and the machines whose worker process
died, noted for a restart (:mod:`.restart`)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from ..machines import MachineSpec
from .drain import Drains, draining_nodes, node_states
from .health import ping, ping_process
from .hosting import HostPool, MachineHandle, kill
from .members import Members
from .restart import PROBE_S, Restarts, process_dead, process_of
from .storage import Storage

log = logging.getLogger("elastic_coded.runtime.controller")


class Watch:
    """The controller's checks of its machines; the state is the controller's (its
    ``__init__``)."""

    members: Members
    storage: Storage
    hosts: HostPool
    drains: Drains
    restarts: Restarts
    auto: dict | None
    health_interval: float
    ping_timeout: float
    _dead: dict
    _health: asyncio.Task | None
    _lock: asyncio.Lock

    if TYPE_CHECKING:  # the controller's own methods
        def _drop(self, machine: str, release: bool = True) -> None: ...

        def _auto_specs(self, draining: set) -> list[MachineSpec]: ...

        async def _add_machines(self, specs: list[MachineSpec],
                                prefix: str | None = None) -> Any: ...

    def _start_health(self) -> None:
        if self.health_interval > 0:
            self._health = asyncio.get_event_loop().create_task(self._health_loop())

    async def _processes_gone(self, machines: list[str]) -> set:
        """Those of ``machines`` whose worker process died (a crash on purpose ends the machine
        in a live process)."""
        ms = [m for m in machines if m in self.members and self.restarts.limit > 0]
        dead = await asyncio.gather(*[process_dead(self.members[m].handle) for m in ms])
        hosts = {process_of(self.members[m].handle) for m, d in zip(ms, dead) if d}
        # the other machines of a dead process are gone too, whether or not they had a call
        return {m for m, w in self.members.table.items() if process_of(w.handle) in hosts}

    async def _stale(self, machines: list[str]) -> set:
        """Those of ``machines`` restarted before that answer a ping now: a death reported of
        them is of the process they were restarted from (a step's calls to the dead process
        fail after the restart, mid-step), not of the machine present."""
        ms = [m for m in machines if m in self.members and m in self.restarts.counts]
        answers = await asyncio.gather(*[ping(self.members[m].handle, PROBE_S) for m in ms])
        return {m for m, (state, _) in zip(ms, answers) if state == "ok"}

    async def _restart_noted(self) -> None:
        """Restart the machines noted with a dead process (the storage lock held)."""
        back = await self._restartable(list(self._dead))
        await self.restarts.run(back, self._add_machines, None, lambda: self.members.table)

    def _note_dead(self, machine: str) -> None:
        """``machine``'s process died: noted for a restart once it is dropped."""
        if machine in self.members:
            m = self.members[machine]
            self._dead[machine] = (m.spec, m.node)

    async def _restartable(self, machines: list[str]) -> list[MachineSpec]:
        """The specs of ``machines`` noted with a dead process whose node lives, within the
        restart bound (:meth:`.Restarts.allowed`)."""
        noted = [self._dead.pop(m) for m in machines if m in self._dead]
        if not noted:
            return []
        alive_nodes, _ = node_states()
        return [spec for spec, node in noted if (node is None or node in alive_nodes)
                and (spec.node is None or spec.node in alive_nodes)
                and spec.id not in self.members and self.restarts.allowed(spec.id)]

    async def check_nodes(self) -> None:
        """Drop machines whose Ray node died (noting those preempted), plan out those whose
        node is draining (:meth:`_check_drains`); in auto mode start workers on new nodes."""
        alive_nodes, preempted = node_states()
        for mid, m in list(self.members.table.items()):
            if m.node is not None and m.node not in alive_nodes:
                if m.node in preempted:
                    self.drains.pending_preempted.append(mid)
                self._drop(mid)
        for m, h in self.drains.settle(alive_nodes):
            kill(h)  # past its drain deadline (or its node gone): it ends
            self.hosts.release(m)
        draining = await self._check_drains()
        if self.auto is not None:
            new = self._auto_specs(set(draining))
            if new:
                await self._add_machines(new)

    async def _check_drains(self) -> dict:
        """Plan out the machines whose Ray node started draining (a preemption notice, an
        idle termination, ``ray drain-node``), as graceful departures announced ahead: the
        storage is repaired among the machines left at once, so every row has its copies
        elsewhere before the node's deadline; the machine's actor stays until its node goes (a
        step under way, or planned before the notice, may still use it).  Storage a repair
        would shrink is shrunk at the next step's repair, not under a step.  Returns the
        draining nodes ``{node: deadline}``."""
        nodes = draining_nodes()
        new = self.drains.newly_draining(self.members.table, nodes)
        if not new:
            return nodes
        for m, deadline in new:
            v = self.members[m]
            self.drains.retire(m, v.handle, v.node, deadline)
            self._drop(m, release=False)  # it runs until its node goes
        await self.storage.repair_midstep()
        late = [m for m, d in new if time.time() > d]
        if late:
            log.warning("machines %s: their rows were copied elsewhere only after their "
                        "node's drain deadline", late)
        return nodes

    async def ping_all(self, unheard_for: float | None = None) -> None:
        """Ping every worker (``unheard_for``: only those no step had a result of in that many
        seconds, :meth:`.Members.unheard`: steps running show the others alive); note those
        whose actor is dead (a slow answer stays; so does one about a machine restarted in a
        fresh process while the ping was out).  Deaths take effect at the next
        membership-changing call (:meth:`_apply_deaths`)."""
        ids = self.members.ids() if unheard_for is None else self.members.unheard(unheard_for)
        alone: list = []
        hosted: dict = {}  # machines in shared processes: one ping per process
        pinged = {i: self.members[i].handle for i in ids}  # an answer counts for these only
        for i in ids:
            h = self.members[i].handle
            if isinstance(h, MachineHandle):
                host: Any = h.host   # the process's Ray actor handle
                hosted.setdefault(host._actor_id.hex(), (h.host, []))[1].append(i)
            else:
                alone.append(i)
        answers = await asyncio.gather(
            *[ping(self.members[i].handle, self.ping_timeout) for i in alone],
            *[ping_process(host, tuple(ms), self.ping_timeout) for host, ms in hosted.values()])
        for i, (state, res) in zip(alone, answers):
            self.members.note_ping(i, state, res, pinged[i])
        for got in answers[len(alone):]:
            for i, (state, res) in got.items():
                self.members.note_ping(i, state, res, pinged[i])

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self.ping_all(unheard_for=self.health_interval)
                async with self._lock:  # a drain notice is acted on at once, even mid-step
                    await self._check_drains()
            except Exception as exc:  # keep checking whatever happens
                log.warning("health check failed: %s", exc)
