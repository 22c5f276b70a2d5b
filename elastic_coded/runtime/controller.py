"""The controller actor, one for every scheme: membership, speed estimates, storage, and each
step's plan.

An async actor, so it answers (membership changes, snapshots) while a step runs.  It never
decides anything a plan should say: the scheme's storage keeper (:mod:`.keepers`, over pure
scheme code) says what each machine stores and plans the step for the machines present; the
controller starts and watches the workers, sends them rows, and hands the plan to the driver.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import ray

from ..machines import MachineSpec
from ..errors import BudgetError, PlanError, ShortOfMachines, StepFailed
from ..schemes.policies.rules import assign_recovery
from ..schemes.registry import REGISTRY, register_policy
from ..schemes.wire import Joined, PreparedStep, Reassignment, Rescued, Snapshot, StepRequest
from ..schemes.speeds import SpeedEstimate, new_estimate, observe, rescale
from .drain import Drains, draining_nodes, node_states
from .health import auto_count, auto_specs, ping, step_metrics
from .keepers import make_keeper
from .hosting import HostPool, kill, orphans, reclaim

__all__ = ["Controller", "MachineSpec", "StepRequest", "PreparedStep"]

log = logging.getLogger(__name__)


@dataclass
class _Member:
    spec: MachineSpec
    handle: object
    est: SpeedEstimate
    node: str | None

    @property
    def speed_est(self) -> float:
        """The planning speed: robust to one-step stragglers (:mod:`~elastic_coded.schemes.speeds`)."""
        return self.est.speed


_CHUNKS = 64  # a source goes into the object store in about this many row chunks


def _locked(method):
    """Run an async controller method under the storage lock (``Controller._lock``)."""
    @functools.wraps(method)
    async def run(self, *args, **kwargs):
        async with self._lock:
            return await method(self, *args, **kwargs)
    return run


@ray.remote(num_cpus=0)
class Controller:
    """Keeps the cluster's state; see the module docstring."""

    def __init__(self, *, family: str, num_rows: int, L: int, S: int, field_spec, sources: dict,
                 time_scale: float, placement: str = "design", seed: int = 0,
                 learn_speeds: bool = True, auto: dict | None = None, ping_timeout: float = 5.0,
                 default_storage: float = 1.0, health_interval: float = 1.0, options=None,
                 masters: tuple = (), machines_per_process: int = 1, policies: tuple = ()):
        from ..algebra.fields import field as make_field

        for p in policies:  # registered in the driver (register_policy): known here too
            if p.name not in REGISTRY:
                register_policy(p)
        self.q = int(num_rows)
        self.L, self.S = int(L), int(S)
        self.field_spec = field_spec
        self.F = make_field(field_spec)
        self.sources = dict(sources)  # name -> ("chunks", starts, [refs]) or ("npy", path)
        self.time_scale = float(time_scale)
        self.seed = seed
        self.learn = learn_speeds
        self.auto = auto
        self.ping_timeout = ping_timeout
        self.default_storage = default_storage
        self.members: dict[str, _Member] = {}
        self.hosts = HostPool(machines_per_process)  # the worker processes (:mod:`.hosting`)
        self.keeper = make_keeper(self, family, options, placement, tuple(masters), self.F)
        self.pending_left: list[str] = []
        self.pending_joined: list[str] = []
        self.pending_moved = 0
        self.health_interval = health_interval
        self._health = None
        self._found_dead: set[str] = set()
        self._why: dict = {}  # machine -> the error that showed it dead
        self._found_preempted: set[str] = set()
        self.drains = Drains()  # machines planned out for a drain notice (:mod:`.drain`)
        self._deferred: dict = {}  # shrinks a drain's repair left for the next step's
        # a drain's copies (run by the health loop, possibly mid-step), a step's repair and plan,
        # and mid-step recovery each see the storage whole: one at a time
        self._lock = asyncio.Lock()
        self._plans: dict = {}  # policy -> (key, plan), reused while nothing changed
        self._calibrated = time_scale > 0  # emulated speeds are already in the plan's units
        self._auto_count = 0
        self._metrics = None
        self._redesign: str | None = None
        self.short_S: int | None = None  # the S the budgets allow, when below the configured

    # -- sources -------------------------------------------------------------------------------
    def read_source(self, name: str) -> np.ndarray:
        """The whole matrix of a source (the driver's copy, through the object store)."""
        src = self.sources[name]
        if src[0] == "npy":
            return self.F.asarray(np.load(src[1]), "A")
        return np.concatenate(ray.get(list(src[2])), axis=0)

    def put_source(self, name: str, matrix: np.ndarray) -> None:
        step = max(1, math.ceil(matrix.shape[0] / _CHUNKS))
        starts = list(range(0, matrix.shape[0], step))
        self.sources[name] = ("chunks", starts, [ray.put(matrix[s:s + step]) for s in starts])

    def drop_source(self, name: str) -> None:
        self.sources.pop(name, None)

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
            self.members[s.id] = _Member(s, h, new_estimate(s.speed), s.node)

    def _store_call(self, h, source: str, ranges: list):
        src = self.sources[source]
        if src[0] == "npy":
            return h.store_npy.remote(source, ranges, src[1])
        starts, refs = src[1], src[2]
        ends = list(starts[1:]) + [math.inf]
        need = [i for i in range(len(starts))
                if any(a < ends[i] and starts[i] < b for a, b in ranges)]
        return h.store_chunks.remote(source, ranges, [starts[i] for i in need],
                                     *[refs[i] for i in need])

    async def _store(self, moved) -> list[str]:
        """Send rows ``[(source, start, stop, machine), ...]`` to their machines.  Returns the
        machines found dead on the way (the caller re-plans storage without them)."""
        by: dict = {}
        for src, a, b, m in moved:
            by.setdefault((m, src), []).append((a, b))
        calls, who = [], []
        for (m, src), ranges in by.items():
            self._deferred.pop(m, None)  # rows added: an older keep-only would drop them
            if m in self.members:
                calls.append(self._store_call(self.members[m].handle, src, ranges))
                who.append(m)
        dead = []
        for m, out in zip(who, await asyncio.gather(*calls, return_exceptions=True)):
            if isinstance(out, ray.exceptions.RayActorError):
                self._why[m] = str(out).splitlines()[-1][:300]
                dead.append(m)
            elif isinstance(out, BaseException):
                raise out
        return sorted(set(dead))

    async def _shrink(self, shrink: dict) -> None:
        calls = [self.members[m].handle.keep_only.remote(src, list(rs))
                 for m, by in shrink.items() if m in self.members for src, rs in by.items()]
        await asyncio.gather(*calls, return_exceptions=True)

    # -- membership ----------------------------------------------------------------------------
    async def start(self, specs: list[MachineSpec]) -> tuple:
        """Start the first machines and store their rows.  Returns ``(handles, specs,
        storage)``: the driver's copy, from which a new controller is rebuilt."""
        specs = list(specs)
        if self.auto is not None:
            specs += self._auto_specs(set(draining_nodes()))
        await self._spawn(specs)
        dead = await self._store(self.keeper.start(specs))
        if dead:
            raise StepFailed(f"machines {dead} died while receiving their rows: "
                               f"{[self._why.get(m) for m in dead]}")
        await self.ping_all()
        self._apply_deaths()
        self._start_health()
        return ({m: v.handle for m, v in self.members.items()},
                {m: v.spec for m, v in self.members.items()}, self.keeper.snapshot())

    def _start_health(self) -> None:
        if self.health_interval > 0:
            self._health = asyncio.get_event_loop().create_task(self._health_loop())

    async def adopt(self, members: tuple, storage) -> None:
        """Take over from a controller that died: ``members`` (:class:`~elastic_coded.schemes.wire.Member`)
        are the workers still running, ``storage`` the family's storage at the last step (the
        next step's repair restores what it misses).  Machines the dead controller left alive
        that the driver does not know (started in the middle of a call) are ended."""
        for w in members:
            self.members[w.spec.id] = _Member(w.spec, w.handle, new_estimate(w.speed), w.spec.node)
            self.hosts.adopt(w.spec.id, w.handle, w.spec.node)
        for proc, m in await orphans(self.hosts.processes(), self.members):
            proc.crash.remote(m)
        self._auto_count = auto_count(self.members)
        if storage is not None:
            self.keeper.restore(storage)
            for m in set(self.keeper.members()) - set(self.members):
                self.keeper.forget(m)
        await self.ping_all()
        self._apply_deaths()
        self._start_health()

    def _auto_specs(self, draining: set) -> list[MachineSpec]:
        out = auto_specs(self.members, self.auto.get("cpus_per_worker") or 1.0,
                         self.default_storage, self._auto_count, draining)
        self._auto_count += len(out)
        return out

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
        clash = sorted(set(ids) & set(self.members)) or sorted({i for i in ids if ids.count(i) > 1})
        if clash:
            raise ValueError(f"machines: ids {clash} are already present or repeated")
        before, joined, moved_total = self.keeper.snapshot(), [], 0
        try:
            for s in specs:
                joined.append(s.id)
                await self._spawn([s], prefix)
                moved = self.keeper.join(s)
                if await self._store(moved):
                    raise StepFailed(f"machine {s.id!r} died while receiving its rows")
                moved_total += sum(b - a for _, a, b, _ in moved)
        except BaseException:
            for m in joined:
                if m in self.members:
                    kill(self.members.pop(m).handle)
                self.hosts.release(m)
            self.keeper.restore(before)
            raise
        self.pending_joined += joined
        self.pending_moved += moved_total
        return Joined(moved_total, {m: self.members[m].handle for m in joined})

    @_locked
    async def remove_machine(self, machine: str, crash: bool = False,
                             missing_ok: bool = False) -> bool:
        """Graceful departure (the actor exits) or a crash (killed without notice; gone from
        the membership at once).  ``missing_ok``: a machine already gone is not an error
        (returns ``False``)."""
        if machine not in self.members:
            if missing_ok:
                return False
            raise ValueError(f"machine: {machine!r} is not present; present: {sorted(self.members)}")
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

    def _drop(self, machine: str, release: bool = True) -> None:
        """Plan ``machine`` out; ``release``: it has ended (its process may stop)."""
        if machine in self.members:
            del self.members[machine]
            self.pending_left.append(machine)
            self.keeper.forget(machine)
        if release:
            self.hosts.release(machine)

    async def mark_dead(self, machines: list[str]) -> None:
        for m in machines:
            self._drop(m)

    async def check_nodes(self) -> None:
        """Drop machines whose Ray node died (noting those preempted), plan out those whose
        node is draining (:meth:`_check_drains`); in auto mode start workers on new nodes."""
        alive_nodes, preempted = node_states()
        for mid, m in list(self.members.items()):
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
        new = self.drains.newly_draining(self.members, nodes)
        if not new:
            return nodes
        for m, deadline in new:
            v = self.members[m]
            self.drains.retire(m, v.handle, v.node, deadline)
            self._drop(m, release=False)  # it runs until its node goes
        versions = self.keeper.sources()
        self.pending_moved += await self._repair(
            max(0, min(self.S, len(self.members) - self.L)), shrink_now=False)
        if self.keeper.sources() != versions and versions:
            self._redesign = getattr(self.keeper, "redesigns", [None])[-1]
        late = [m for m, d in new if time.time() > d]
        if late:
            log.warning("machines %s: their rows were copied elsewhere only after their "
                        "node's drain deadline", late)
        return nodes

    async def ping_all(self) -> None:
        """Ping every worker; note those whose actor is dead (a slow answer stays).  Deaths take
        effect at the next membership-changing call (:meth:`_apply_deaths`)."""
        ids = list(self.members)
        answers = await asyncio.gather(
            *[ping(self.members[i].handle, self.ping_timeout) for i in ids])
        for i, (state, res) in zip(ids, answers):
            if state == "dead":
                self._found_dead.add(i)
                if res:  # its node was preempted
                    self._found_preempted.add(i)
            elif state == "ok" and i in self.members and self.members[i].node is None:
                self.members[i].node = res["node"]

    def _apply_deaths(self) -> None:
        for m in sorted(self._found_dead):
            if m in self._found_preempted and m in self.members:
                self.drains.pending_preempted.append(m)
            self._drop(m)
        self._found_dead.clear()
        self._found_preempted.clear()

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self.ping_all()
                async with self._lock:  # a drain notice is acted on at once, even mid-step
                    await self._check_drains()
            except Exception as exc:  # keep checking whatever happens
                log.warning("health check failed: %s", exc)

    async def _repair(self, S: int, request: StepRequest | None = None,
                      shrink_now: bool = True) -> int:
        """Restore the scheme's storage among the machines present, to ``L+S`` holders or, when
        the budgets cannot hold that, as many as they can (``self.short_S`` records the ``S``
        reached, with a warning); machines found dead while storing are dropped and the repair
        is redone.  ``shrink_now=False`` leaves the rows a machine no longer keeps for the next
        repair (a step may be running).  Returns rows copied."""
        copied = 0
        for _ in range(len(self.members) + 2):
            moved, shrink = self._repair_plan(S, request)
            dead = await self._store(moved)
            copied += sum(b - a for _, a, b, m in moved if m not in dead)
            if dead:
                for m in dead:
                    self._drop(m)
                continue
            if shrink and not shrink_now:
                self._deferred.update(shrink)
            elif shrink or self._deferred:
                await self._shrink({**self._deferred, **shrink})
                self._deferred = {}
            return copied
        raise StepFailed("storage: the repair did not settle")

    def _repair_plan(self, S: int, request) -> tuple[list, dict]:
        if self.keeper.family == "unified":
            return self.keeper.repair(S, None if request is None else request.n_cols)
        self.short_S = None
        for s in range(S, -1, -1):
            try:
                out = self.keeper.repair(s)
            except BudgetError:
                if s == 0:
                    raise
                continue
            if s < S:
                self.short_S = s
                log.warning("storage: the budgets of the machines present hold every row only "
                            "L+%d times, not L+S = %d", s, self.L + S)
            return out
        raise AssertionError("unreachable")  # pragma: no cover

    # -- steps ---------------------------------------------------------------------------------
    def _check_count(self, S: int) -> None:
        if self.keeper.family != "usctec":
            return
        present = sorted(self.members)
        if len(present) < self.L + S:
            raise ShortOfMachines(
                f"machines: {len(present)} present ({present}), fewer than L+S = "
                f"{self.L + S}; add machines, or pass allow_lower_S=True to run with "
                f"S = {max(0, len(present) - self.L)}", max(0, len(present) - self.L))
        if self.short_S is not None and self.short_S < S:
            raise ShortOfMachines(
                f"storage: the budgets of the machines present hold every row only "
                f"L+{self.short_S} times, fewer than L+S = {self.L + S}; add machines or "
                f"storage, or pass allow_lower_S=True to run with S = {self.short_S}",
                self.short_S)

    @_locked
    async def prepare_step(self, request: StepRequest) -> PreparedStep:
        """Refresh membership (deaths, drain notices, new nodes), repair storage, plan and
        validate the step for the machines present.  Handles are returned only for machines
        not in ``request.known``."""
        t0 = time.perf_counter()
        self._apply_deaths()
        await self.check_nodes()
        S_eff = self.S if request.S is None else request.S
        self.short_S = None
        self._check_count(S_eff)
        versions = self.keeper.sources()
        S_store = min(self.S, max(S_eff, len(self.members) - self.L))  # as many as can be
        moved = self.pending_moved + await self._repair(S_store, request)
        if self.keeper.sources() != versions and versions:
            self._redesign = getattr(self.keeper, "redesigns", [None])[-1]
        present = sorted(self.members)
        self._check_count(S_eff)
        speeds = {m: self.members[m].speed_est for m in present}
        key = (request.policy, S_eff, request.n_cols, tuple(present), tuple(speeds.values()),
               self.keeper.state_key())
        cached = self._plans.get(request.policy)
        if key[-1] is not None and cached is not None and cached[0] == key:
            plan = cached[1]
        else:
            plan = self.keeper.plan(request.policy, present, speeds, S_eff, request)
            self._plans[request.policy] = (key, plan)
        draining, preempted = self.drains.take()
        out = PreparedStep(
            plan=plan,
            handles={m: self.members[m].handle for m in present if m not in request.known},
            joined=tuple(self.pending_joined), left=tuple(self.pending_left),
            rows_moved=int(moved), speeds=speeds,
            emulated={m: self.members[m].spec.speed for m in present},
            specs={m: self.members[m].spec for m in present}, storage=self.keeper.snapshot(),
            t_plan=time.perf_counter() - t0, redesign=self._redesign, draining=draining,
            preempted=preempted)
        self.pending_joined, self.pending_left, self.pending_moved = [], [], 0
        self._redesign = None
        return out

    @_locked
    async def recover(self, lost: list, dead: list[str]) -> list:
        """USCTEC: re-plan lost tasks (TaskSpecs) on live machines that store their rows, at
        once; only rows no live machine stores are first copied there (storage repaired as far
        as the budgets allow; the full repair waits for the next step).  Returns
        one :class:`~elastic_coded.schemes.wire.Reassignment` per machine."""
        from ..schemes.wire import TaskSpec

        for m in dead:
            self._drop(m)
        self._apply_deaths()
        speeds = {m: v.speed_est for m, v in self.members.items()}
        rows = [t.rows for t in lost]
        try:
            parts = assign_recovery(rows, self.keeper.holders, speeds)
        except PlanError:  # some rows have no live holder left
            self.pending_moved += await self._repair(
                max(0, min(self.S, len(self.members) - self.L)), shrink_now=False)
            parts = assign_recovery(rows, self.keeper.holders, speeds)
        out: dict[str, list] = {}
        for i, a, b, m in parts:
            t = lost[i]
            out.setdefault(m, []).append(
                TaskSpec(t.source, (a, b), t.arg, t.cols, t.piece, t.position))
        return [Reassignment(m, self.members[m].handle, tuple(ts)) for m, ts in out.items()]

    @_locked
    async def holders_of(self, plan) -> dict | None:
        """``{piece: [present machines storing its rows]}`` for speculative backups."""
        out = {}
        for pi, piece, group in plan.iter_pieces():
            spans = self.keeper.holders(group.rows)
            out[pi] = spans[0][2] if len(spans) == 1 else []
        return out

    @_locked
    async def hetero_rescue(self, m: int, need: int, exclude: list, machines: list) -> tuple:
        """Heterogeneous masters, mid-step: store ``need`` fresh coded rows of master ``m`` on
        the first live machine of ``machines`` (best first) that takes them."""
        self._apply_deaths()
        live = [n for n in machines if n in self.members]
        for _ in range(len(live)):
            moves = self.keeper.rescue(m, need, set(exclude), live)
            n = moves[0][3]
            if not await self._store(moves):
                self.pending_moved += sum(b - a for _, a, b, _ in moves)
                return Rescued(n, self.members[n].handle, tuple((a, b) for _, a, b, _ in moves))
            self._drop(n)
            live.remove(n)
        raise StepFailed(f"rescue: no live machine could take master {m}'s coded rows")

    async def report(self, policy: str, measured: dict, t_total: float, t_decode: float,
                     stragglers: int) -> None:
        """Update speed estimates from ``{machine: (value, 'value' | 'upper')}``."""
        if self.learn:
            self._learn(measured)
        try:
            mt = self._metrics = self._metrics or step_metrics()
            mt["step"].observe(t_total, tags={"policy": policy})
            mt["decode"].observe(t_decode, tags={"policy": policy})
            if stragglers:
                mt["stragglers"].inc(stragglers, tags={"policy": policy})
            mt["machines"].set(len(self.members))
        except Exception as exc:  # metrics are best effort
            log.debug("metrics unavailable: %s", exc)

    def _learn(self, measured: dict) -> None:
        if not self._calibrated:
            # real mode: configured speeds are relative; put them in measured units once
            ratios = [v / self.members[m].speed_est for m, (v, k) in measured.items()
                      if k == "value" and m in self.members and v > 0]
            if ratios:
                f = float(np.median(ratios))
                for mem in self.members.values():
                    mem.est = rescale(mem.est, f)
                self._calibrated = True
        for m, (value, kind) in measured.items():
            if m in self.members and np.isfinite(value) and value > 0:
                self.members[m].est = observe(self.members[m].est, value, kind)

    async def snapshot(self) -> Snapshot:
        k = self.keeper
        return Snapshot(tuple(sorted(self.members)),
                        {m: v.speed_est for m, v in self.members.items()},
                        getattr(k, "placement", None) or getattr(k, "storage", None),
                        getattr(k, "values_moved", 0))

    async def shutdown(self) -> None:
        if self._health is not None:
            self._health.cancel()
        handles = [m.handle for m in self.members.values()]
        handles += [h for h, _, _ in self.drains.retiring.values()]  # kept for a drain
        for h in handles:
            kill(h)
        self.hosts.stop_all()
        self.members.clear()
        self.drains.retiring.clear()

