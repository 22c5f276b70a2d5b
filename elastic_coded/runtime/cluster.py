"""The driver API: :class:`ElasticCluster`.

Each :meth:`ElasticCluster.multiply` step: the controller plans and validates; the driver encodes
``B`` into the ``K`` coded inputs (put once in the object store and passed by reference), dispatches
one call per machine, decodes each piece from its first ``L`` results as they arrive
(``ray.wait``), re-plans the tasks of a machine that dies mid-step on live machines holding those
rows, cancels what is no longer needed, and returns ``A @ B``.  A step never returns a partial result: it either
decodes every piece or raises, and a failed step leaves the cluster's state as it was.

Planning is pipelined: when a step ends, the plan of the next step of the same policy is asked
for at once, so the controller works while the caller uses the result.  It is used only if no
machine joined, left or failed in between (a membership epoch says so); otherwise it is dropped
(its report of joins and departures carried into the next step) and the step plans afresh.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any, Iterable

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .session import ensure_ray, stop

from ..algebra.fields import field as make_field
from ..algebra.lagrange import lagrange_code
from ..churn import ChurnScript, StepEvents, load_churn, parse_churn
from ..schemes.reference import assemble
from ..schemes.registry import SPECULATION, get_policy
from .controller import Controller, MachineSpec
from .report import StepReport, summarize

__all__ = ["ElasticCluster", "MachineSpec"]

log = logging.getLogger(__name__)


def _check_policy(policy: str) -> None:
    try:
        get_policy(policy)
    except ValueError:
        from ..schemes.registry import POLICIES

        known = sorted(POLICIES) + sorted(OTHER_RUNTIMES)
        raise ValueError(f"policy: unknown policy {policy!r}; known: {known}") from None


def _machine_specs(machines, default_storage: float) -> list[MachineSpec]:
    if isinstance(machines, (int, np.integer)) and not isinstance(machines, bool):
        if machines < 1:
            raise ValueError(f"machines: a positive count, got {machines}")
        return [MachineSpec(f"m{i}", 1.0, default_storage) for i in range(int(machines))]
    out = []
    for i, m in enumerate(machines):
        if isinstance(m, MachineSpec):
            out.append(m)
        elif isinstance(m, dict):
            bad = set(m) - {"id", "speed", "storage", "node"}
            if bad:
                raise ValueError(f"machines[{i}]: unknown keys {sorted(bad)}; known: id, speed, "
                                 f"storage, node")
            out.append(MachineSpec(str(m.get("id", f"m{i}")), float(m.get("speed", 1.0)),
                                   float(m.get("storage", default_storage)), m.get("node")))
        elif isinstance(m, (int, float)) and not isinstance(m, bool):
            out.append(MachineSpec(f"m{i}", float(m), default_storage))
        else:
            raise ValueError(f"machines[{i}]: a dict {{id, speed, storage}}, a speed, or a "
                             f"MachineSpec; got {m!r}")
    for s in out:
        if not (s.speed > 0 and math.isfinite(s.speed)):
            raise ValueError(f"machines: speed of {s.id!r} must be positive and finite, got {s.speed}")
        if not 0 < s.storage <= 1:
            raise ValueError(f"machines: storage of {s.id!r} must lie in (0, 1], got {s.storage}")
    return out


#: Policies run by a runtime of their own (their data layout differs from USCTEC's): the
#: constructor hands over to it, so every policy is reached through ``ElasticCluster(policy=...)``.
OTHER_RUNTIMES = {
    "unified": ("unified_runtime", "UnifiedCluster"),  # MATH.md §2: K, mu, q, field, ...
    "hetero": ("hetero_runtime", "HeteroCluster"),     # MATH.md §3: As (list), a, u, ...
}


def _whole(partial: dict, group_rows: tuple, piece: int, pos: int, rows: tuple, H):
    """``H`` for the task's whole group, or ``None`` while parts of it are missing: a task
    re-planned after a crash may be split by rows over several machines."""
    if tuple(rows) == tuple(group_rows):
        return H
    parts = partial.setdefault((piece, pos), {})
    parts[tuple(rows)] = H
    spans = sorted(parts)
    covered, at = True, group_rows[0]
    for a, b in spans:
        if a > at:
            covered = False
            break
        at = max(at, b)
    if not covered or at < group_rows[1]:
        return None
    # the parts tile the group (re-planned parts never overlap)
    return np.concatenate([parts[sp] for sp in spans], axis=0)


class ElasticCluster:
    """A coded, elastic matrix ``A`` on a Ray cluster.

    ``policy``: ``"usctec"`` (default), the baselines ``"cyclic"``, ``"uncoded"`` and
    ``"speculative"``, or ``"unified"`` / ``"hetero"``, which return a
    :class:`~elastic_coded.runtime.unified_runtime.UnifiedCluster` /
    :class:`~elastic_coded.runtime.hetero_runtime.HeteroCluster` built from the same arguments.

    ``A``: an array, or a path to an ``.npy`` file each worker reads its own rows from (it must be
    readable on every node).  ``machines``: a count, a list of ``{id, speed, storage}`` dicts (or
    speeds, or :class:`MachineSpec`), or ``"auto"`` (one worker per Ray node, or per
    ``cpus_per_worker`` CPUs, following nodes that join and die).  ``time_scale`` > 0 emulates
    speeds: a machine that computes the fraction ``w`` of the step's products takes
    ``w / speed * time_scale`` seconds; with ``0`` machines run at their real speed.  ``churn``: a :class:`~elastic_coded.churn.ChurnScript`, a mapping, or a YAML path.
    ``address``: ``None`` starts an embedded local Ray (``num_cpus``), ``"auto"`` joins a running
    cluster.
    """

    def __new__(cls, A=None, policy: str = "usctec", **kwargs):
        if policy in OTHER_RUNTIMES:
            import importlib

            module, name = OTHER_RUNTIMES[policy]
            impl = getattr(importlib.import_module(f".{module}", __package__), name)
            return impl(A, **kwargs)
        return super().__new__(cls)

    def __init__(self, A, policy: str = "usctec", *, L: int, S: int, machines: Any = 8,
                 field: Any = "real", storage: float = 1.0, placement: str = "design",
                 time_scale: float = 0.0, churn=None, seed: int = 0, learn_speeds: bool = True,
                 allow_lower_S: bool = False, address: str | None = None,
                 num_cpus: int | None = None, cpus_per_worker: float | None = None,
                 ping_timeout: float = 5.0, health_interval: float = 1.0,
                 chunk_rows: int | None = None):
        _check_policy(policy)
        if placement not in ("design", "cyclic"):
            raise ValueError(f"placement: 'design' or 'cyclic', got {placement!r}")
        for name, val, lo in (("L", L, 1), ("S", S, 0)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
                raise ValueError(f"{name}: must be an int >= {lo}, got {val!r}")
        if not (time_scale >= 0 and math.isfinite(time_scale)):
            raise ValueError(f"time_scale: must be finite and >= 0, got {time_scale!r}")
        if not 0 < storage <= 1:
            raise ValueError(f"storage: default storage budget must lie in (0, 1], got {storage!r}")
        self.F = make_field(field)
        self.policy = policy
        self.L, self.S = int(L), int(S)
        self.allow_lower_S = allow_lower_S
        self.time_scale = float(time_scale)
        self.reports: list[StepReport] = []
        self._step = 0
        self._crash_idle: list[str] = []
        self._handles: dict = {}  # machine -> actor handle, cached across steps
        # plans asked for ahead, per policy, with the membership epoch they were asked in
        self._prefetch: dict = {}
        self._epoch = 0
        self._carry = {"joined": (), "left": (), "rows_moved": 0}
        self._present: list | None = None  # machines present at the last step
        self._closed = False
        if churn is None:
            churn = ChurnScript()
        elif isinstance(churn, (str, os.PathLike)):
            churn = load_churn(str(churn))
        elif not isinstance(churn, ChurnScript):
            churn = parse_churn(churn)
        self._churn = churn.generator()

        # A: keep it in the object store once, in row chunks, so repair and joins can read rows.
        if isinstance(A, (str, os.PathLike)):
            path = os.path.abspath(str(A))
            if not os.path.exists(path):
                raise ValueError(f"A: no file at {path!r}")
            mm = np.load(path, mmap_mode="r")
            if mm.ndim != 2:
                raise ValueError(f"A: must be 2-D, the file holds shape {mm.shape}")
            self.shape = mm.shape
            self.F.asarray(np.asarray(mm[:1]), "A")  # dtype check on a row
            source_kind = ("npy", path)
        else:
            A = self.F.asarray(A, "A")
            if A.ndim != 2:
                raise ValueError(f"A: must be 2-D, got shape {A.shape}")
            self.shape = A.shape
            source_kind = None
        q = self.shape[0]
        self._own_ray = ensure_ray(address, num_cpus)
        if source_kind is None:
            step = chunk_rows or max(1, math.ceil(q / 64))
            starts = list(range(0, q, step))
            refs = [ray.put(A[s:s + step]) for s in starts]
            source_kind = ("chunks", starts, refs)
        auto = None
        if isinstance(machines, str):
            if machines != "auto":
                raise ValueError(f"machines: a count, a list, or 'auto'; got {machines!r}")
            auto = {"cpus_per_worker": cpus_per_worker}
            specs: list[MachineSpec] = []
        else:
            specs = _machine_specs(machines, storage)
        # the controller owns the workers: it lives on the driver's node, which outlives the
        # spot and autoscaled nodes that come and go
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.controller = Controller.options(scheduling_strategy=here).remote(
            num_rows=q, L=self.L, S=self.S, field_spec=self.F, source=source_kind,
            time_scale=self.time_scale, placement=placement, seed=seed,
            learn_speeds=learn_speeds, auto=auto, ping_timeout=ping_timeout,
            default_storage=storage, health_interval=health_interval)
        try:
            ray.get(self.controller.start.remote(specs))
        except Exception:
            self.shutdown()
            raise

    # -- membership ------------------------------------------------------------------------------
    def add_machines(self, machines: Iterable) -> int:
        """Start machines (dicts ``{id, speed, storage}`` or :class:`MachineSpec`) and give them
        storage; they are planned in from the next step.  Returns rows copied."""
        specs = _machine_specs(list(machines), 1.0)
        moved = ray.get(self.controller.add_machines.remote(specs))
        self._present = None
        self._epoch += 1
        return moved

    def remove_machine(self, machine: str, crash: bool = False) -> None:
        """Take a machine away: gracefully, or as a crash (killed; detected at the next step)."""
        ray.get(self.controller.remove_machine.remote(machine, crash))
        self._handles.pop(machine, None)
        self._present = None
        self._epoch += 1

    def machines(self) -> list[str]:
        return ray.get(self.controller.snapshot.remote())["machines"]

    def speeds(self) -> dict:
        """Current speed estimates."""
        return ray.get(self.controller.snapshot.remote())["speeds"]

    def placement(self):
        return ray.get(self.controller.snapshot.remote())["placement"]

    def summary(self) -> dict:
        return summarize(self.reports)

    # -- a step ---------------------------------------------------------------------------------------
    def multiply(self, B, policy: str | None = None, events: StepEvents | None = None) -> np.ndarray:
        """``A @ B`` for this step's machines (see the module docstring).

        ``policy`` overrides the cluster's policy for this step; ``events`` replaces the churn
        script's events for this step (benchmarks replay one trace under several policies)."""
        policy = policy or self.policy
        get_policy(policy)
        if self._closed:
            raise RuntimeError("cluster: already shut down")
        B = self.F.asarray(B, "B")
        if B.ndim == 1:
            return self.multiply(B[:, None], policy, events)[:, 0]
        if B.ndim != 2 or B.shape[0] != self.shape[1]:
            raise ValueError(f"B: shape {B.shape} does not fit A {self.shape} "
                             f"(B.shape[0] must equal {self.shape[1]})")
        L_eff = 1 if policy == "uncoded" else self.L
        pad = (-B.shape[1]) % L_eff
        Bp = np.concatenate([B, self.F.zeros((B.shape[0], pad))], axis=1) if pad else B
        ev = self._apply_churn(events)
        Y = self._run_step(Bp, policy, ev)
        return Y[:, :B.shape[1]] if pad else Y

    def _apply_churn(self, ev: StepEvents | None = None) -> StepEvents:
        if self._present is None:
            self._present = self.machines()
        present = self._present
        if ev is None:
            ev = self._churn.events(self._step, present, self.L + self.S)
        for m in ev.leave:
            if m in present:
                self.remove_machine(m)
        if ev.join:
            self.add_machines([MachineSpec(j.id, j.speed, j.storage) for j in ev.join])
        # a crash scheduled for a machine that gets no work this step happens all the same
        self._crash_idle = [m for m in ev.crash if m in present]
        return ev

    def _prepared(self, policy: str):
        """The prefetched plan for ``policy``, or ``None``.  Prefetches asked for before the
        membership last changed are dropped first, their joins, departures and copies carried
        over to the next report."""
        for p, (epoch, ref) in list(self._prefetch.items()):
            if epoch != self._epoch:
                del self._prefetch[p]
                try:
                    self._carry_info(ray.get(ref))
                except Exception:  # it failed: it changed nothing
                    pass
        pre = self._prefetch.pop(policy, None)
        if pre is None:
            return None
        try:
            return ray.get(pre[1])
        except Exception:  # e.g. too few machines: the fresh request reports it
            return None

    def _carry_info(self, info: dict) -> None:
        c = self._carry
        c["joined"] += tuple(info["joined"])
        c["left"] += tuple(info["left"])
        c["rows_moved"] += int(info["rows_moved"])

    def _run_step(self, B: np.ndarray, policy: str, ev: StepEvents) -> np.ndarray:
        t0 = time.perf_counter()
        S_override = None
        info = self._prepared(policy)
        try:
            if info is None:
                info = ray.get(self.controller.prepare_step.remote(policy, None,
                                                                   tuple(self._handles)))
        except ValueError as exc:
            if not self.allow_lower_S or "fewer than L+S" not in str(exc):
                raise
            n = len(self.machines())
            if n < self.L:
                raise
            S_override = n - self.L
            log.warning("running step %d with S=%d (fewer machines than L+S)", self._step, S_override)
            info = ray.get(self.controller.prepare_step.remote(policy, S_override,
                                                               tuple(self._handles)))
        if any(self._carry.values()):
            info = dict(info, joined=self._carry["joined"] + tuple(info["joined"]),
                        left=self._carry["left"] + tuple(info["left"]),
                        rows_moved=self._carry["rows_moved"] + int(info["rows_moved"]))
            self._carry = {"joined": (), "left": (), "rows_moved": 0}
        plan = info["plan"]
        self._handles.update(info["handles"])
        # forget machines that are gone, so a reused id never reaches a stale handle
        self._handles = {m: self._handles[m] for m in plan.available}
        handles = self._handles
        self._present = list(plan.available)
        code = lagrange_code(self.F, plan.L, plan.S)
        t1 = time.perf_counter()
        coded = code.encode(B)
        num_cols = B.shape[1] // plan.L
        refs = {}
        t2 = time.perf_counter()

        def ref(pos):
            if pos not in refs:
                refs[pos] = ray.put(coded[pos])
            return refs[pos]

        pending: dict = {}  # ObjectRef -> (machine, tasks)
        tasks_of = plan.tasks()
        positions_alive = {pi: set(range(plan.K)) for pi in range(len(plan.pieces))}

        def dispatch(machine, handle, tasks, crash_at=None):
            used = sorted({t[1] for t in tasks})
            arg = {p: i for i, p in enumerate(used)}
            call = [(t[0], arg[t[1]], t[2], t[3]) for t in tasks]
            h = handle if handle is not None else handles[machine]
            r = h.compute.remote(self._step, call, B.shape[1], float(ev.slow.get(machine, 1.0)),
                                 0.0, crash_at, *[ref(p) for p in used])
            pending[r] = (machine, tasks, time.perf_counter())
            return r

        for m, ts in tasks_of.items():
            dispatch(m, handles[m], [(t.piece, t.position, t.rows, t.cols) for t in ts],
                     0.5 if m in ev.crash else None)
        for m in self._crash_idle:
            if m not in tasks_of and m in handles:
                ray.kill(handles[m], no_restart=True)
        results: dict[int, dict] = {pi: {} for pi in range(len(plan.pieces))}
        partial: dict = {}  # (piece, position) -> {rows: H} for tasks re-planned in parts
        used_by: dict[int, tuple] = {}
        decoded: dict[int, np.ndarray] = {}
        failed: list[str] = []
        recovered: set[int] = set()
        finished: dict[str, dict] = {}
        t_decode = 0.0
        slowest = 0.0
        rows_done = 0
        wasted = 0
        t_last = t2
        spec = SPECULATION.get(policy)
        speculated: set = set()  # refs that got a backup copy, and the copies themselves
        done_times: list[float] = []
        backups = 0
        try:
            while len(decoded) < len(plan.pieces):
                if not pending:
                    raise RuntimeError("step: results ran out before every piece decoded")
                timeout = None
                if spec and done_times:
                    limit = spec * float(np.median(done_times))
                    due = [t for r, (_, _, t) in pending.items() if r not in speculated]
                    if due:
                        timeout = max(0.0, min(due) + limit - time.perf_counter())
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
                if not ready:
                    backups += self._speculate(pending, speculated, limit, info["holders"],
                                               decoded, dispatch)
                    continue
                r = ready[0]
                machine, tasks, t_sent = pending.pop(r)
                try:
                    out = ray.get(r)
                except ray.exceptions.RayActorError:
                    failed.append(machine)
                    lost = []
                    for piece, pos, rows, cols in tasks:
                        if piece in decoded:
                            continue
                        positions_alive[piece].discard(pos)
                        lost.append((piece, pos, rows, cols))
                    # re-plan every lost task at once on live holders of its rows: waiting for
                    # the remaining results would stake the piece on machines that may straggle
                    redo = lost
                    if redo:
                        recovered.update(t[0] for t in redo)
                        assign = ray.get(self.controller.recover.remote(redo, failed, plan.S))
                        for m2, (h2, ts2) in assign.items():
                            for t in ts2:
                                positions_alive[t[0]].add(t[1])
                            dispatch(m2, h2, ts2)
                    else:
                        ray.get(self.controller.mark_dead.remote([machine]))
                    continue
                done_times.append(time.perf_counter() - t_sent)
                finished.setdefault(machine, out)
                rows_done += out["rows"]
                useful = False
                for (piece, pos, rows, _), H in zip(tasks, out["results"]):
                    if piece in decoded:
                        continue
                    H = _whole(partial, plan.groups[plan.pieces[piece].group].rows, piece, pos,
                               rows, H)
                    if H is None:  # a part of a re-planned task; the rest is still to come
                        useful = True
                        continue
                    results[piece][pos] = (machine, H)
                    useful = True
                    if len(results[piece]) == plan.L:
                        td = time.perf_counter()
                        decoded[piece] = code.decode({p: h for p, (_, h) in results[piece].items()})
                        t_decode += time.perf_counter() - td
                        used_by[piece] = tuple(mm for mm, _ in results[piece].values())
                if useful:
                    slowest = max(slowest, out["elapsed_s"])
                    t_last = time.perf_counter()
                else:
                    wasted += out["rows"]
        finally:
            leftover = list(pending)
            for r in leftover:
                ray.cancel(r)
        stragglers = tuple(sorted({pending[r][0] for r in leftover}))
        wasted += sum(sum(t[2][1] - t[2][0] for t in pending[r][1]) for r in leftover)
        # results that arrived but were not among the first L of their pieces
        needed = {m for ms in used_by.values() for m in ms}
        wasted += sum(o["rows"] for m, o in finished.items() if m not in needed)
        Y = assemble(plan, decoded, num_cols, self.F.dtype)
        t_end = time.perf_counter()
        # speeds: measured where a result came back, an upper bound where it was cancelled
        # (work is in units of the whole step's products, so estimates share the speeds' units)
        measured = {}
        scale = self.time_scale if self.time_scale > 0 else 1.0
        for m, o in finished.items():
            if o["work"] > 0:
                measured[m] = (o["work"] * scale / o["elapsed_s"], "value")
        for r in leftover:
            m, tasks, t_sent = pending[r]
            work = sum((t[2][1] - t[2][0]) for t in tasks) * num_cols / (plan.num_rows * B.shape[1])
            measured[m] = (work * scale / max(1e-9, t_end - t_sent), "upper")
        report = StepReport(
            step=self._step, policy=policy, plan=plan, available=plan.available,
            joined=info["joined"], left=info["left"], failed=tuple(failed), stragglers=stragglers,
            decoded_by=used_by, recovered_pieces=tuple(sorted(recovered)),
            rows_moved=int(info["rows_moved"]), wasted_rows=int(wasted),
            total_rows=int(rows_done + sum(sum(t[2][1] - t[2][0] for t in pending[r][1])
                                           for r in leftover)),
            t_plan=t1 - t0, t_encode=t2 - t1, t_compute=t_last - t2, t_decode=t_decode,
            t_total=t_end - t0, slowest_needed_s=slowest, c_plan=plan.c_int, backups=backups)
        self.controller.report.remote(policy, measured, report.t_total, t_decode, len(stragglers))
        self.reports.append(report)
        self._step += 1
        gone = set(failed) | set(self._crash_idle)
        self._present = [m for m in plan.available if m not in gone]
        if gone:
            self._epoch += 1
        if S_override is None:
            # plan the next step of this policy now, while the caller works on this result
            self._prefetch[policy] = (self._epoch, self.controller.prepare_step.remote(
                policy, None, tuple(self._handles)))
        return Y

    @staticmethod
    def _speculate(pending: dict, speculated: set, limit: float, holders: dict, decoded: dict,
                   dispatch) -> int:
        """Launch a backup copy of every task running longer than ``limit`` seconds on the least
        busy other machine storing its rows.  Returns how many copies were launched."""
        now = time.perf_counter()
        busy: dict = {}
        for m, _, _ in pending.values():
            busy[m] = busy.get(m, 0) + 1
        launched = 0
        for r, (m, tasks, t_sent) in list(pending.items()):
            if r in speculated or now - t_sent < limit:
                continue
            speculated.add(r)
            for task in tasks:
                if task[0] in decoded:
                    continue
                others = [h for h in holders.get(task[0], []) if h != m]
                if not others:
                    continue
                target = min(others, key=lambda h: (busy.get(h, 0), h))
                busy[target] = busy.get(target, 0) + 1
                speculated.add(dispatch(target, None, [task]))
                launched += 1
        return launched

    # -- lifecycle --------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the workers and the controller (and the embedded Ray, if this cluster started it)."""
        if self._closed:
            return
        self._closed = True
        try:
            ray.get(self.controller.shutdown.remote(), timeout=30)
        except Exception:  # the controller kills the workers; if it is gone they are too
            pass
        stop([self.controller], self._own_ray)

    def __enter__(self) -> "ElasticCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"<ElasticCluster {self.shape[0]}x{self.shape[1]} over {self.F.name}, "
                f"policy={self.policy}, L={self.L}, S={self.S}, steps={self._step}>")
