"""The controller actor: membership, speed estimates, storage, and each step's plan.

An async actor, so it answers (membership changes, snapshots) while a step runs.  It never
decides anything a plan should say: it asks the policy (``schemes.registry``) for the plan of the
machines present and validates it (MATH.md §1, (9b)-(9f)) before handing it to the driver.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from dataclasses import dataclass

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..schemes.plan import Placement
from ..schemes.registry import SPECULATION, get_policy
from ..schemes.usctec import (SpeedModel, cyclic_placement, design_placement, extend_placement,
                              repair_placement, validate)
from .worker import Worker

__all__ = ["Controller", "MachineSpec"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MachineSpec:
    """A machine to start: id, (emulated or initial-estimate) speed, storage budget, and the Ray
    node to pin it to (``None``: anywhere)."""

    id: str
    speed: float = 1.0
    storage: float = 1.0
    node: str | None = None


@dataclass
class _Member:
    spec: MachineSpec
    handle: object
    speed_est: float
    node: str | None


@ray.remote(num_cpus=0)
class Controller:
    """Keeps the cluster's state; see the module docstring."""

    def __init__(self, *, num_rows: int, L: int, S: int, field_spec, source, time_scale: float,
                 placement: str = "design", seed: int = 0, learn_speeds: bool = True,
                 auto: dict | None = None, ping_timeout: float = 5.0, default_storage: float = 1.0,
                 health_interval: float = 1.0):
        self.q = int(num_rows)
        self.L, self.S = int(L), int(S)
        self.field_spec = field_spec
        self.source = source  # ("chunks", starts, [refs]) or ("npy", path)
        self.time_scale = float(time_scale)
        self.placement_kind = placement
        self.seed = seed
        self.learn = learn_speeds
        self.auto = auto
        self.ping_timeout = ping_timeout
        self.default_storage = default_storage
        self.members: dict[str, _Member] = {}
        self.placement: Placement | None = None
        self.pending_left: list[str] = []
        self.pending_joined: list[str] = []
        self.pending_moved = 0
        self.health_interval = health_interval
        self._health = None
        self._found_dead: set[str] = set()
        self._plans: dict = {}  # policy -> (key, plan): reused while membership, speeds and
        # storage stay the same
        self._calibrated = time_scale > 0  # emulated speeds are already in the plan's units
        self._auto_count = 0
        self._metrics = None

    # -- helpers -----------------------------------------------------------------------------
    def _spawn(self, spec: MachineSpec):
        opts = {}
        if spec.node is not None:
            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(spec.node, soft=False)
        return Worker.options(**opts).remote(spec.id, self.field_spec, spec.speed,
                                             self.time_scale, self.q)

    async def _store(self, moved) -> list[str]:
        """Send rows ``[(start, stop, machine), ...]`` to their machines.  Returns the machines
        found dead on the way (the caller re-plans storage without them)."""
        by_machine: dict[str, list] = {}
        for a, b, m in moved:
            by_machine.setdefault(m, []).append((a, b))
        calls, who = [], []
        for m, ranges in by_machine.items():
            h = self.members[m].handle
            if self.source[0] == "npy":
                calls.append(h.store_npy.remote(ranges, self.source[1]))
            else:
                starts, refs = self.source[1], self.source[2]
                ends = list(starts[1:]) + [self.q]
                need = [i for i in range(len(starts))
                        if any(a < ends[i] and starts[i] < b for a, b in ranges)]
                calls.append(h.store_chunks.remote(ranges, [starts[i] for i in need],
                                                   *[refs[i] for i in need]))
            who.append(m)
        dead = []
        if calls:
            for m, out in zip(who, await asyncio.gather(*calls, return_exceptions=True)):
                if isinstance(out, ray.exceptions.RayActorError):
                    dead.append(m)
                elif isinstance(out, BaseException):
                    raise out
        return dead

    def _metric(self):
        if self._metrics is None:
            from ray.util import metrics
            self._metrics = {
                "step": metrics.Histogram("elastic_coded_step_seconds", "Step time",
                                          boundaries=[0.01, 0.05, 0.1, 0.5, 1, 5, 10],
                                          tag_keys=("policy",)),
                "decode": metrics.Histogram("elastic_coded_decode_seconds", "Decode time",
                                            boundaries=[0.001, 0.01, 0.1, 1],
                                            tag_keys=("policy",)),
                "stragglers": metrics.Counter("elastic_coded_stragglers", "Straggling results",
                                              tag_keys=("policy",)),
                "machines": metrics.Gauge("elastic_coded_machines", "Machines present"),
            }
        return self._metrics

    # -- membership ----------------------------------------------------------------------------
    async def start(self, specs: list[MachineSpec], budgets_design: bool = True) -> dict:
        """Start the first machines and store their rows."""
        specs = list(specs)
        if self.auto is not None:
            specs += self._auto_specs()
        ids = [s.id for s in specs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"machines: ids must be distinct, got {ids}")
        for s in specs:
            self.members[s.id] = _Member(s, self._spawn(s), s.speed, s.node)
        budgets = [s.storage for s in specs]
        speeds = [s.speed for s in specs]
        if self.placement_kind == "cyclic":
            self.placement = cyclic_placement(self.q, ids, self.L, self.S,
                                              budgets=None if all(b >= 1 for b in budgets) else budgets)
        else:
            model = SpeedModel(tuple(speeds), straggle_prob=0.1, straggle_factor=5.0)
            self.placement = design_placement(self.q, ids, budgets, model, self.L, self.S,
                                              samples=16, seed=self.seed)
        moved = [(a, b, m) for m in ids for a, b in self.placement.rows_of(m)]
        dead = await self._store(moved)
        if dead:
            raise RuntimeError(f"machines {dead} died while receiving their rows")
        await self.ping_all()
        self._apply_deaths()
        if self.health_interval > 0:
            self._health = asyncio.get_event_loop().create_task(self._health_loop())
        return {"machines": ids, "placement": repr(self.placement)}

    def _auto_specs(self) -> list[MachineSpec]:
        """One worker per alive Ray node (or per ``cpus_per_worker`` CPUs) not yet covered."""
        have = {}
        for m in self.members.values():
            if m.node is not None:
                have[m.node] = have.get(m.node, 0) + 1
        speed = (float(np.mean([m.speed_est for m in self.members.values()]))
                 if self.members else 1.0)
        out = []
        per = self.auto.get("cpus_per_worker")
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            nid = node["NodeID"]
            cpus = node.get("Resources", {}).get("CPU", 1)
            want = max(1, int(cpus // per)) if per else 1
            for _ in range(want - have.get(nid, 0)):
                self._auto_count += 1
                out.append(MachineSpec(f"node{self._auto_count}", speed, self.default_storage, nid))
        return out

    async def add_machines(self, specs: list[MachineSpec]) -> int:
        """Start machines and give them storage; they are planned in from the next step."""
        moved_total = 0
        for s in specs:
            if s.id in self.members:
                raise ValueError(f"machines: id {s.id!r} is already present")
            self.members[s.id] = _Member(s, self._spawn(s), s.speed, s.node)
            self.placement, moved = extend_placement(self.placement, s.id, s.storage)
            if await self._store(moved):
                self._drop(s.id)  # died before it could be planned in
                continue
            moved_total += sum(b - a for a, b, _ in moved)
            self.pending_joined.append(s.id)
        self.pending_moved += moved_total
        return moved_total

    async def remove_machine(self, machine: str, crash: bool = False) -> None:
        """Graceful departure (the actor exits) or a crash (killed without notice)."""
        if machine not in self.members:
            raise ValueError(f"machine: {machine!r} is not present; present: {sorted(self.members)}")
        h = self.members[machine].handle
        if crash:
            ray.kill(h, no_restart=True)
        else:
            self._drop(machine)
            try:
                await h.exit.remote()
            except Exception:  # the actor exits while answering
                pass

    def _drop(self, machine: str) -> None:
        if machine in self.members:
            del self.members[machine]
            self.pending_left.append(machine)

    async def mark_dead(self, machines: list[str]) -> None:
        for m in machines:
            self._drop(m)

    async def check_nodes(self) -> None:
        """Drop machines whose Ray node died; in auto mode start workers on new nodes.  Cheap
        (one GCS query), so it runs before every step."""
        alive_nodes = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        for mid, m in list(self.members.items()):
            if m.node is not None and m.node not in alive_nodes:
                self._drop(mid)
        if self.auto is not None:
            new = self._auto_specs()
            if new:
                await self.add_machines(new)

    async def ping_all(self) -> None:
        """Ping every worker; note those whose actor is dead.  A worker slow to answer stays.

        Deaths are only noted here: they take effect (:meth:`_apply_deaths`) at the start of the
        next membership-changing call, so a step's repair and plan never see the membership
        change under them between two awaits."""
        ids = list(self.members)
        answers = await asyncio.gather(
            *[_ping(self.members[i].handle, self.ping_timeout) for i in ids])
        for i, (state, res) in zip(ids, answers):
            if state == "dead":
                self._found_dead.add(i)
            elif state == "ok" and i in self.members and self.members[i].node is None:
                self.members[i].node = res["node"]

    def _apply_deaths(self) -> None:
        for m in sorted(self._found_dead):
            self._drop(m)
        self._found_dead.clear()

    async def _health_loop(self) -> None:
        """Background liveness checks, off the steps' critical path."""
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self.ping_all()
            except Exception as exc:  # keep checking whatever happens
                log.warning("health check failed: %s", exc)

    async def _repair(self, S: int | None = None) -> int:
        """Give every row ``L+S`` holders among the machines present; machines found dead while
        storing are dropped and the repair is redone.  Returns rows copied."""
        copied = 0
        for _ in range(len(self.members) + 1):
            present = list(self.members)
            budgets = {m: self.members[m].spec.storage for m in present}
            before = {m: self.placement.stored_rows(m) for m in present}
            self.placement, moved = repair_placement(self.placement, present, self.L,
                                                     self.S if S is None else S, budgets)
            dead = await self._store(moved)
            copied += sum(b - a for a, b, m in moved if m not in dead)
            if dead:
                for m in dead:
                    self._drop(m)
                continue
            # machines that gave up copies to make room drop those rows
            shrunk = [m for m in present if m in self.members and
                      self.placement.stored_rows(m) < before[m] + sum(
                b - a for a, b, x in moved if x == m)]
            if shrunk:
                await asyncio.gather(*[self.members[m].handle.keep_only.remote(
                    self.placement.rows_of(m)) for m in shrunk], return_exceptions=True)
            return copied
        raise RuntimeError("storage repair did not settle")

    # -- steps ------------------------------------------------------------------------------------
    def _check_count(self, S: int) -> None:
        present = sorted(self.members)
        if len(present) < self.L + S:
            raise ValueError(
                f"machines: {len(present)} present ({present}), fewer than L+S = "
                f"{self.L + S}; add machines, or pass allow_lower_S=True to run with "
                f"S = {max(0, len(present) - self.L)}")

    async def prepare_step(self, policy: str, S: int | None = None, known: tuple = ()) -> dict:
        """Refresh membership, repair storage, plan and validate the step for the machines
        present.  ``S`` overrides the configured ``S`` (opt-in lower redundancy).  Handles are
        returned only for machines not in ``known`` (the driver caches them)."""
        t0 = time.perf_counter()
        self._apply_deaths()
        await self.check_nodes()
        S_eff = self.S if S is None else S
        self._check_count(S_eff)
        moved = self.pending_moved + await self._repair(S_eff)
        present = sorted(self.members)  # a machine found dead while storing is gone now
        self._check_count(S_eff)
        speeds = tuple(self.members[m].speed_est for m in present)
        key = (policy, S_eff, tuple(present), speeds, self.placement)
        cached = self._plans.get(policy)
        if cached is not None and cached[0] == key:
            plan = cached[1]  # nothing changed since it was made and validated
        else:
            plan = get_policy(policy)(self.placement, present, speeds, self.L, S_eff)
            validate(plan, self.placement)
            self._plans[policy] = (key, plan)
        info = {
            "plan": plan,
            "holders": _group_holders(plan, self.placement, present)
            if policy in SPECULATION else None,
            "handles": {m: self.members[m].handle for m in present if m not in known},
            "joined": tuple(self.pending_joined),
            "left": tuple(self.pending_left),
            "rows_moved": moved,
            "t_plan": time.perf_counter() - t0,
        }
        self.pending_joined, self.pending_left, self.pending_moved = [], [], 0
        return info

    async def recover(self, lost: list, dead: list[str], S: int | None = None) -> dict:
        """Re-plan lost tasks ``[(piece, position, rows, cols), ...]`` on live machines that store
        the rows (repairing storage first if needed).  Returns ``{machine: (handle, tasks)}``."""
        for m in dead:
            self._drop(m)
        self._apply_deaths()
        moved = await self._repair(S)
        self.pending_moved += moved
        load = {m: 0 for m in self.members}
        out: dict[str, tuple] = {}
        for piece, pos, rows, cols in lost:
            # after a repair the rows may span blocks with different holders: split the task
            for a, b, holders in _spans(self.placement, rows, self.members):
                if not holders:
                    raise RuntimeError(f"recover: no live machine stores rows {a}:{b}")
                m = min(holders, key=lambda x: (load[x] / self.members[x].speed_est, x))
                load[m] += b - a
                out.setdefault(m, (self.members[m].handle, []))[1].append((piece, pos, (a, b), cols))
        return out

    async def report(self, policy: str, measured: dict, t_total: float, t_decode: float,
                     stragglers: int) -> None:
        """Update speed estimates from ``{machine: measured speed or (bound, 'upper')}``."""
        if self.learn:
            if not self._calibrated:
                # real mode: configured speeds are relative; put them in measured units once
                ratios = [v / self.members[m].speed_est for m, (v, k) in measured.items()
                          if k == "value" and m in self.members and v > 0]
                if ratios:
                    f = float(np.median(ratios))
                    for mem in self.members.values():
                        mem.speed_est *= f
                    self._calibrated = True
            for m, (value, kind) in measured.items():
                if m not in self.members or not np.isfinite(value) or value <= 0:
                    continue
                est = self.members[m].speed_est
                if kind == "upper" and value >= est:
                    continue
                self.members[m].speed_est = 0.5 * est + 0.5 * value
        try:
            mt = self._metric()
            mt["step"].observe(t_total, tags={"policy": policy})
            mt["decode"].observe(t_decode, tags={"policy": policy})
            if stragglers:
                mt["stragglers"].inc(stragglers, tags={"policy": policy})
            mt["machines"].set(len(self.members))
        except Exception as exc:  # metrics are best effort
            log.debug("metrics unavailable: %s", exc)

    async def snapshot(self) -> dict:
        return {
            "machines": sorted(self.members),
            "speeds": {m: v.speed_est for m, v in self.members.items()},
            "placement": self.placement,
        }

    async def shutdown(self) -> None:
        if self._health is not None:
            self._health.cancel()
        for m in list(self.members.values()):
            try:
                ray.kill(m.handle, no_restart=True)
            except Exception:
                pass
        self.members.clear()


async def _ping(handle, timeout: float):
    """``("ok", info)``, ``("dead", None)`` or ``("slow", None)`` (no answer within timeout:
    still counted as present; a failure mid-step is handled by recovery)."""
    async def once():
        return await handle.ping.remote()
    try:
        return "ok", await asyncio.wait_for(once(), timeout)
    except asyncio.TimeoutError:
        return "slow", None
    except ray.exceptions.RayError:
        return "dead", None


def _group_holders(plan, placement: Placement, present) -> dict:
    """``{piece: [present machines storing its rows]}`` (every group lies inside one block)."""
    starts = [b.start for b in placement.blocks]
    present = set(present)
    out = {}
    for pi, piece, group in plan.iter_pieces():
        blk = placement.blocks[bisect.bisect_right(starts, group.rows[0]) - 1]
        out[pi] = [m for m in blk.holders if m in present]
    return out


def _spans(placement: Placement, rows: tuple, present) -> list:
    """``rows`` cut at block boundaries: ``[(start, stop, [present holders]), ...]``, merging
    neighbours that share a present holder set (fewer, larger sub-tasks)."""
    out: list = []
    for blk in placement.blocks:
        a, b = max(blk.start, rows[0]), min(blk.stop, rows[1])
        if a >= b:
            continue
        hs = [m for m in blk.holders if m in present]
        if out and out[-1][1] == a and set(out[-1][2]) & set(hs):
            keep = [m for m in out[-1][2] if m in hs]
            out[-1] = (out[-1][0], b, keep)
        else:
            out.append((a, b, hs))
    return out
