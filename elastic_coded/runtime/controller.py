"""The controller actor, one for every scheme: it starts and watches the workers and answers the
driver, delegating the rest to plain-Python managers.

An async actor, so it answers (membership changes, snapshots) while a step runs.  It never
decides anything a plan should say: :class:`~.members.Members` keeps the machines present
(speeds, deaths, what changed), :class:`~.storage.Storage` keeps the scheme's storage family
(:mod:`elastic_coded.schemes.families`) whole for them and plans each step, and
:class:`~.transfer.RayTransfer` is their I/O (rows sent to workers, sources in the object
store).  The controller holds the lock, the health loop, the worker processes
(:class:`~.hosting.HostPool`) and the drain notices (:mod:`.drain`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from typing import cast

import ray

from ..errors import ArgumentError
from ..machines import MachineSpec
from ..schemes.families import Setup, make_family
from ..schemes.policies.rules import REPLAN_SPEED_CHANGE_REAL
from ..schemes.registry import REGISTRY, register_policy
from ..schemes.wire import (
    Joined,
    PreparedStep,
    Reassignment,
    Rescued,
    Snapshot,
    StepMeasured,
    StepRequest,
    packed_reply,
)
from .controller_watch import Watch
from .drain import Drains, draining_nodes
from .health import auto_count, auto_specs, step_metrics
from .hosting import HostPool, kill, orphans, reclaim
from .members import Members
from .restart import MAX_RESTARTS, Restarts
from .storage import Storage
from .transfer import RayTransfer

__all__ = ["Controller", "MachineSpec", "StepRequest", "PreparedStep"]

log = logging.getLogger(__name__)


NODE_CHECK_S = 0.5
"""A step asks Ray's node table and drain notices at most this often (or every health interval,
if shorter): two GCS queries cost the controller 4-5 ms of CPU, as much as a whole short step's
planning, and the deaths they would show are seen sooner by the step's own failed calls (the
health loop checks drains every ``health_interval`` as well)."""


def _locked(method):
    """Run an async controller method under the storage lock (``Controller._lock``)."""
    @functools.wraps(method)
    async def run(self, *args, **kwargs):
        async with self._lock:
            return await method(self, *args, **kwargs)
    return run


@ray.remote(num_cpus=0)
class Controller(Watch):
    """Keeps the cluster's state; see the module docstring."""

    def __init__(self, *, family: str, num_rows: int, L: int, S: int, field_spec, sources: dict,
                 time_scale: float, placement: str = "design", seed: int = 0,
                 learn_speeds: bool = True, auto: dict | None = None, ping_timeout: float = 5.0,
                 default_storage: float = 1.0, health_interval: float = 1.0, options=None,
                 masters: tuple = (), machines_per_process: int = 1, policies: tuple = (),
                 row_prefix=None, max_restarts: int = MAX_RESTARTS):
        from ..algebra.fields import field as make_field

        for p in policies:  # registered in the driver (register_policy): known here too
            if p.name not in REGISTRY:
                register_policy(p)
        self.field_spec = field_spec
        F = make_field(field_spec)
        self.time_scale = float(time_scale)
        self.learn = learn_speeds
        self.auto = auto
        self.ping_timeout = ping_timeout
        self.default_storage = default_storage
        self.hosts = HostPool(machines_per_process)  # the worker processes (:mod:`.hosting`)
        # emulated speeds are already in the plan's units; real ones are calibrated once
        self.members = Members(calibrated=time_scale > 0)
        self.io = RayTransfer(sources, F, self.members, self.hosts)
        fam = make_family(family, Setup(int(num_rows), int(L), int(S), F, seed, options,
                                        placement, tuple(masters), row_prefix))
        self.storage = Storage(fam, self.members, self.io, L=L, S=S)
        if self.time_scale == 0:  # measured speeds are noisy: keep a plan through small moves
            self.storage.replan_speed_change = REPLAN_SPEED_CHANGE_REAL
            self.storage.cost_aware = True
        self.health_interval = health_interval
        self._health: asyncio.Task | None = None
        self.drains = Drains()  # machines planned out for a drain notice (:mod:`.drain`)
        self.restarts = Restarts(limit=int(max_restarts))  # dead processes (:mod:`.restart`)
        self._dead: dict = {}  # machine -> (spec, handle, node) of one dropped mid-step
        # a drain's copies (run by the health loop, possibly mid-step), a step's repair and plan,
        # and mid-step recovery each see the storage whole: one at a time
        self._lock = asyncio.Lock()
        self._auto_count = 0
        self._metrics: dict | None = None
        self._nodes_checked = -math.inf  # when a step last asked Ray's node table

    # -- helpers -------------------------------------------------------------------------------
    async def _spawn(self, specs: list[MachineSpec], prefix: str | None = None) -> None:
        """Start machines ``specs`` in worker processes (:mod:`.hosting`; a new process named
        under ``prefix``) and make them members once they run (on an error, none is left
        running)."""
        placed = [self.hosts.place(s.id, s.node, self.field_spec, s.speed, self.time_scale,
                                   prefix=prefix) for s in specs]
        try:
            await asyncio.gather(*[ref for _, ref in placed])
        except BaseException:
            for s, (h, _) in zip(specs, placed):
                kill(h)
                self.hosts.release(s.id)
            raise
        # members only once hosted: a health ping sent earlier could reach the process before
        # the machine does, and would find it dead
        for s, (h, _) in zip(specs, placed):
            self.members.add(s, h)

    def _drop(self, machine: str, release: bool = True) -> None:
        """Plan ``machine`` out; ``release``: it has ended (its process may stop)."""
        self.storage.drop(machine, release)

    def _apply_deaths(self) -> None:
        """The machines found dead by pings leave now (those of a preempted node noted); those
        whose worker process died are restarted (:mod:`.restart`)."""
        gone = self.members.found_gone  # read as each drops (those replaced since are not)

        def drop(m: str) -> None:
            if m in gone:
                self._note_dead(m)  # its worker process died: restarted once dropped
            self._drop(m)
        self.drains.pending_preempted += self.members.apply_deaths(drop)

    def _auto_specs(self, draining: set) -> list[MachineSpec]:
        auto = cast(dict, self.auto)   # called with auto on
        out = auto_specs(self.members.table, auto.get("cpus_per_worker") or 1.0,
                         self.default_storage, self._auto_count, draining)
        self._auto_count += len(out)
        return out

    # -- membership ----------------------------------------------------------------------------
    async def start(self, specs: list[MachineSpec]) -> tuple:
        """Start the first machines and store their rows.  Returns ``(handles, specs,
        storage)``: the driver's copy, from which a new controller is rebuilt."""
        specs = list(specs)
        if self.auto is not None:
            specs += self._auto_specs(set(draining_nodes()))
        await self._spawn(specs)
        await self.storage.start(specs)
        await self.ping_all()
        self._apply_deaths()
        self._start_health()
        return (self.members.handles(), {m: v.spec for m, v in self.members.table.items()},
                self.storage.snapshot())

    async def adopt(self, members: tuple, storage) -> None:
        """Take over from a controller that died: ``members``
        (:class:`~elastic_coded.schemes.wire.Member`) are the workers still running,
        ``storage`` the family's storage at the last step (the next step's repair restores what
        it misses).  Machines the dead controller left alive that the driver does not know
        (started in the middle of a call) are ended."""
        for w in members:
            self.members.add(w.spec, w.handle, w.speed)
            self.hosts.adopt(w.spec.id, w.handle, w.spec.node)
        for proc, m in await orphans(self.hosts.processes(), self.members.table):
            proc.crash.remote(m)
        self._auto_count = auto_count(self.members.table)
        if storage is not None:
            self.storage.adopt(storage)
        await self.ping_all()
        self._apply_deaths()
        self._start_health()

    @_locked
    async def add_machines(self, specs: list[MachineSpec], token: str | None = None,
                           retried: tuple = ()) -> Joined:
        """Start machines and give them storage; they are planned in from the next step.
        Atomic: on any error every machine of the call is taken back and nothing changes.
        ``token`` names the processes it opens; ``retried``, those of its earlier tries (on
        controllers that died under it), are stopped first (:func:`~.hosting.reclaim`)."""
        reclaim(retried)
        return await self._add_machines(specs, token)

    async def _add_machines(self, specs: list[MachineSpec], prefix: str | None = None) -> Joined:
        ids = [s.id for s in specs]
        clash = sorted(set(ids) & set(self.members.table)) or sorted(
            {i for i in ids if ids.count(i) > 1})
        if clash:
            raise ArgumentError(f"machines: ids {clash} are already present or repeated")
        before, joined, moved_total = self.storage.snapshot(), [], 0
        try:
            for s in specs:
                joined.append(s.id)
                await self._spawn([s], prefix)
                moved_total += await self.storage.join(s)
        except BaseException:
            for m in joined:
                if m in self.members:
                    kill(self.members.remove(m).handle)
                self.hosts.release(m)
            self.storage.restore(before)
            raise
        self.members.pending_joined += joined
        self.members.pending_moved += moved_total
        return Joined(moved_total, self.members.handles(joined))

    @_locked
    async def remove_machine(self, machine: str, crash: bool = False,
                             missing_ok: bool = False) -> bool:
        """Graceful departure (the actor exits) or a crash (killed without notice; gone from
        the membership at once).  ``missing_ok``: a machine already gone is not an error
        (returns ``False``)."""
        if machine not in self.members:
            if missing_ok:
                return False
            raise ArgumentError(f"machine: {machine!r} is not present; present: "
                                f"{sorted(self.members.table)}")
        h = self.members[machine].handle
        if crash:
            kill(h)
            self._drop(machine)
        else:
            self._drop(machine, release=False)
            try:
                await h.exit.remote()
            except Exception:  # the actor exits while answering
                pass
            self.hosts.release(machine)
        return True

    async def mark_dead(self, machines: list[str]) -> None:
        """The machines that died in a step leave; those whose worker process died while its
        node lives are restarted in a fresh one (:mod:`.restart`).  A machine restarted
        before that answers is not dropped: the death seen was of its old process."""
        stale = await self._stale(machines)
        machines = [m for m in machines if m not in stale]
        gone = await self._processes_gone(machines)  # before the drop stops an empty process
        machines = list(dict.fromkeys(list(machines) + sorted(gone)))
        async with self._lock:  # a step is never planned between the drop and the restart
            for m in machines:
                if m in gone:
                    self._note_dead(m)
                self._drop(m)
            back = await self._restartable(machines)
            await self.restarts.run(back, self._add_machines, None, lambda: self.members.table)

    # -- steps ---------------------------------------------------------------------------------
    @_locked
    async def prepare_step(self, request: StepRequest):
        """Refresh membership (deaths, drain notices, new nodes), repair storage, plan and
        validate the step for the machines present: a :class:`PreparedStep`, pickled once
        here when it holds no handles (:func:`~elastic_coded.schemes.wire.packed_reply`; read
        with ``result_of``).  Handles are returned only for machines not in
        ``request.known``."""
        return packed_reply(await self._prepare_step(request))

    async def _prepare_step(self, request: StepRequest) -> PreparedStep:
        t0 = time.perf_counter()
        if request.report is not None:
            self._take(request.report)
        self._apply_deaths()
        if self._dead:
            await self._restart_noted()
        now = time.monotonic()
        if now - self._nodes_checked >= min(NODE_CHECK_S, self.health_interval):
            self._nodes_checked = now
            await self.check_nodes()
        plan, moved = await self.storage.prepare(request)
        present = sorted(self.members.table)
        mem = self.members.table
        draining, preempted = self.drains.take()
        joined, left, pending_moved = self.members.take_pending()
        restarted, not_restarted = self.restarts.take()
        serial = self.storage.plan_serial
        return PreparedStep(
            plan=None if serial in request.held else plan, serial=serial,
            handles=self.members.handles(m for m in present if m not in request.known),
            joined=joined, left=left, rows_moved=int(pending_moved + moved),
            speeds=self.members.speeds(present),
            emulated={m: mem[m].spec.speed for m in present},
            specs={m: mem[m].spec for m in present}, storage=self.storage.snapshot(),
            t_plan=time.perf_counter() - t0, redesign=self.storage.take_redesign(),
            draining=draining, preempted=preempted, restarted=restarted,
            not_restarted=not_restarted)

    @_locked
    async def recover(self, lost: list, dead: list[str]) -> list:
        """USCTEC: re-plan lost tasks (TaskSpecs) on live machines that store their rows, at
        once; only rows no live machine stores are first copied there (storage repaired as far
        as the budgets allow; the full repair waits for the next step).  Returns
        one :class:`~elastic_coded.schemes.wire.Reassignment` per machine.  ``dead`` restarted
        and answering stay (:meth:`mark_dead`)."""
        stale = await self._stale(dead)
        dead = [m for m in dead if m not in stale]
        gone = await self._processes_gone(dead)
        dead = list(dict.fromkeys(list(dead) + sorted(gone)))
        for m in dead:
            if m in gone:
                self._note_dead(m)  # restarted once the step is over (mark_dead)
            self._drop(m)
        self._apply_deaths()
        out = await self.storage.recover(lost)
        return [Reassignment(m, self.members[m].handle, ts) for m, ts in out.items()]

    @_locked
    async def holders_of(self, plan) -> dict | None:
        """``{piece: [present machines storing its rows]}`` for speculative backups."""
        return self.storage.holders_of(plan)

    @_locked
    async def hetero_rescue(self, m: int, need: int, exclude: list, machines: list
                            ) -> Rescued:
        """Heterogeneous masters, mid-step: store ``need`` fresh coded rows of master ``m`` on
        the first live machine of ``machines`` (best first) that takes them."""
        self._apply_deaths()
        n, ranges = await self.storage.rescue(m, need, exclude, machines)
        return Rescued(n, self.members[n].handle, ranges)

    async def report(self, outcome: StepMeasured) -> None:
        """A step's measurements (:class:`~elastic_coded.schemes.wire.StepMeasured`): the speed
        estimates learn from them, the metrics record the step."""
        self._take(outcome)

    def _take(self, outcome: StepMeasured) -> None:
        policy = outcome.policy
        self.storage.step_s = outcome.slowest_s
        if self.learn:
            self.members.learn(outcome.measured)
        try:
            mt = self._metrics = self._metrics or step_metrics()
            mt["step"].observe(outcome.t_total, tags={"policy": policy})
            mt["decode"].observe(outcome.t_decode, tags={"policy": policy})
            if outcome.stragglers:
                mt["stragglers"].inc(outcome.stragglers, tags={"policy": policy})
            mt["machines"].set(len(self.members))
        except Exception as exc:  # metrics are best effort
            log.debug("metrics unavailable: %s", exc)

    async def speed_estimates(self) -> dict:
        """``{machine: SpeedEstimate}`` of the machines present (:meth:`.Members.estimates`)."""
        return self.members.estimates()

    @_locked
    async def restore_speed_estimates(self, estimates: dict) -> None:
        """Put back estimates taken by :meth:`speed_estimates` (:meth:`.Members.restore`)."""
        self.members.restore(estimates)

    async def snapshot(self) -> Snapshot:
        return Snapshot(tuple(sorted(self.members.table)), self.members.speeds(),
                        self.storage.current, self.storage.values_moved)

    async def shutdown(self) -> None:
        if self._health is not None:
            self._health.cancel()
        handles = [m.handle for m in self.members.table.values()]
        handles += [h for h, _, _ in self.drains.retiring.values()]  # kept for a drain
        for h in handles:
            kill(h)
        self.hosts.stop_all()
        self.members.table.clear()
        self.drains.retiring.clear()
