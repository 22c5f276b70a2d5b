"""The driver API, one for every policy: :class:`ElasticCluster`.

A step (:meth:`ElasticCluster.multiply`): the churn script's events for the step are applied;
the controller refreshes membership, repairs the storage of the policy's family for the machines
present and plans the step; the driver runs the family's step (:mod:`.steps`: encode, dispatch,
gather the first decodable results with ``ray.wait``, re-dispatch what a crash lost, cancel the
rest, decode) and records a :class:`~.report.StepReport`.  A step never returns a partial
result: it decodes every output or raises.

For the USCTEC family the next step's plan is asked for as a step ends (pipelined planning); it
is used only if no machine joined, left or failed in between (a membership epoch says so).
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

from ..algebra.fields import field as make_field
from ..algebra.mds import mds_code
from ..churn import ChurnScript, StepEvents, load_churn, parse_churn
from ..machines import MachineSpec, machine_specs
from ..schemes.policies import family_of, parse_options
from ..schemes.policies import hetero as het
from .controller import Controller, StepRequest
from .report import StepReport, summarize
from .session import ensure_ray, stop
from .steps import run_hetero, run_lagrange, run_unified, shuffle_for

__all__ = ["ElasticCluster", "MachineSpec"]

log = logging.getLogger(__name__)

_RUN = {"usctec": run_lagrange, "hetero": run_hetero, "unified": run_unified}


def _check_int(name: str, val, lo: int) -> int:
    if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
        raise ValueError(f"{name}: must be an int >= {lo}, got {val!r}")
    return int(val)


def _matrices(F, As) -> list:
    if isinstance(As, np.ndarray) and As.ndim == 2:
        raise ValueError("A: policy 'hetero' needs a list of matrices, one per master, got one "
                         "2-D array (wrap it in a list for a single master)")
    try:
        mats = list(As)
    except TypeError:
        raise ValueError(f"A: policy 'hetero' needs a list of 2-D matrices, got "
                         f"{type(As).__name__}") from None
    if not mats:
        raise ValueError("A: policy 'hetero' needs at least one matrix (one per master)")
    out = []
    for m, A in enumerate(mats):
        arr = F.asarray(A, f"A[{m}]")
        if arr.ndim != 2 or min(arr.shape) < 1:
            raise ValueError(f"A[{m}]: must be a non-empty 2-D matrix, got shape {arr.shape}")
        out.append(arr)
    return out


def _chunks(A: np.ndarray, chunk_rows: int | None) -> tuple:
    step = chunk_rows or max(1, math.ceil(A.shape[0] / 64))
    starts = list(range(0, A.shape[0], step))
    return ("chunks", starts, [ray.put(A[s:s + step]) for s in starts])


class ElasticCluster:
    """A coded, elastic matrix on a Ray cluster, under any policy.

    ``policy``: ``"usctec"`` (default), its baselines ``"cyclic"``, ``"uncoded"`` and
    ``"speculative"`` (which need ``L`` and ``S``), ``"unified"`` (options ``mu``, ``q``,
    ``N``, ``grow``; ``K`` is the machines present) or ``"hetero"`` (``A`` a list of
    matrices, one per master; options ``assignment``, ``a0``, ``u0``, ``a``, ``u``,
    ``capacity``).  Options are checked by the policy's typed dataclass.

    ``A``: an array, or a path to an ``.npy`` file each worker reads its own rows from.
    ``machines``: a count, a list of ``{id, speed, storage}`` dicts (or speeds, or
    :class:`MachineSpec`), or ``"auto"`` (one worker per Ray node, or per ``cpus_per_worker``
    CPUs, following nodes that join and die).  ``time_scale`` > 0 emulates speeds: a machine
    that computes the fraction ``w`` of a step's products takes ``w / speed * time_scale``
    seconds (``unified`` and ``hetero`` pace by their latency models instead, in units of
    ``time_scale`` seconds); with ``0`` machines run at their real speed.  ``churn``: a
    :class:`~elastic_coded.churn.ChurnScript`, a mapping, or a YAML path.  ``address``: ``None``
    starts an embedded local Ray (``num_cpus``), ``"auto"`` joins a running cluster.
    """

    def __init__(self, A, policy: str = "usctec", *, L: int | None = None, S: int | None = None,
                 machines: Any = 8, field: Any = "real", storage: float = 1.0,
                 placement: str = "design", time_scale: float = 0.0, churn=None, seed: int = 0,
                 learn_speeds: bool = True, allow_lower_S: bool = False,
                 address: str | None = None, num_cpus: int | None = None,
                 cpus_per_worker: float | None = None, ping_timeout: float = 5.0,
                 health_interval: float = 1.0, chunk_rows: int | None = None, **options):
        self.family = family_of(policy)
        self.options = parse_options(policy, options)
        if placement not in ("design", "cyclic"):
            raise ValueError(f"placement: 'design' or 'cyclic', got {placement!r}")
        if self.family == "usctec":
            if L is None or S is None:
                raise ValueError(f"{'L' if L is None else 'S'}: policy {policy!r} needs L and S")
            L, S = _check_int("L", L, 1), _check_int("S", S, 0)
        else:
            if L is not None or S is not None:
                raise ValueError(f"L, S: policy {policy!r} takes no L or S (got L={L!r}, "
                                 f"S={S!r}); see its options")
            L, S = 1, 0
        if not (isinstance(time_scale, (int, float)) and math.isfinite(time_scale)
                and time_scale >= 0):
            raise ValueError(f"time_scale: must be finite and >= 0, got {time_scale!r}")
        if not 0 < storage <= 1:
            raise ValueError(f"storage: default storage budget must lie in (0, 1], got {storage!r}")
        self.F = make_field(field)
        self.policy, self.L, self.S = policy, L, S
        self.allow_lower_S = allow_lower_S
        self.time_scale = float(time_scale)
        self.seed = seed
        self.reports: list[StepReport] = []
        self._step = 0
        self._crash_idle: list[str] = []
        self._handles: dict = {}
        self._prefetch: dict = {}
        self._epoch = 0
        self._carry = {"joined": (), "left": (), "rows_moved": 0}
        self._present: list | None = None
        self._closed = False
        self._shuffles: dict = {}
        self._designs: dict = {}
        churn = ChurnScript() if churn is None else churn
        if isinstance(churn, (str, os.PathLike)):
            churn = load_churn(str(churn))
        elif not isinstance(churn, ChurnScript):
            churn = parse_churn(churn)
        self._churn = churn.generator()
        auto = None
        if isinstance(machines, str) and machines == "auto":
            auto, specs = {"cpus_per_worker": cpus_per_worker}, []
        else:
            specs = machine_specs(machines, storage)
        data = self._load(A)
        self._own_ray = ensure_ray(address, num_cpus)
        try:
            sources, masters = self._sources(data, chunk_rows)
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                  soft=False)
            self.controller = Controller.options(scheduling_strategy=here).remote(
                family=self.family, num_rows=self.shape[0], L=L, S=S, field_spec=self.F,
                sources=sources, time_scale=self.time_scale, placement=placement, seed=seed,
                learn_speeds=learn_speeds, auto=auto, ping_timeout=ping_timeout,
                default_storage=storage, health_interval=health_interval,
                options=self.options, masters=masters)
            ray.get(self.controller.start.remote(specs))
        except BaseException:
            self.shutdown()
            raise

    # -- data ---------------------------------------------------------------------------------
    def _load(self, A):
        """Check ``A`` before Ray starts; returns what :meth:`_sources` puts."""
        if self.family == "hetero":
            mats = _matrices(self.F, A)
            self.shape = (sum(a.shape[0] for a in mats), None)
            self.masters = tuple(a.shape for a in mats)
            return mats
        if isinstance(A, (str, os.PathLike)):
            path = os.path.abspath(str(A))
            if not os.path.exists(path):
                raise ValueError(f"A: no file at {path!r}")
            mm = np.load(path, mmap_mode="r")
            if mm.ndim != 2:
                raise ValueError(f"A: must be 2-D, the file holds shape {mm.shape}")
            self.F.asarray(np.asarray(mm[:1]), "A")  # dtype check on a row
            self.shape = mm.shape
            return ("npy", path)
        A = self.F.asarray(A, "A")
        if A.ndim != 2 or min(A.shape) < 1:
            raise ValueError(f"A: must be a non-empty 2-D array, got shape {A.shape}")
        self.shape = A.shape
        return A

    def _sources(self, data, chunk_rows) -> tuple[dict, tuple]:
        if self.family != "hetero":
            src = data if isinstance(data, tuple) else _chunks(data, chunk_rows)
            return {"A": src}, ()
        L = tuple(a.shape[0] for a in data)
        caps = het.capacities(self.options, L, getattr(self.F, "order", None))
        self._codes = tuple(mds_code(self.F, caps[m], L[m], seed=self.seed + m)
                            for m in range(len(L)))
        return ({het.source_name(m): _chunks(code.encode(a), chunk_rows)
                 for m, (code, a) in enumerate(zip(self._codes, data))}, L)

    # -- membership ------------------------------------------------------------------------------
    def add_machines(self, machines: Iterable) -> int:
        """Start machines (dicts ``{id, speed, storage}`` or :class:`MachineSpec`) and give them
        storage; they are planned in from the next step.  Returns rows copied."""
        specs = machine_specs(list(machines), 1.0)
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

    def _snapshot(self) -> dict:
        return ray.get(self.controller.snapshot.remote())

    def machines(self) -> list[str]:
        return self._snapshot()["machines"]

    def speeds(self) -> dict:
        """Current speed estimates."""
        return self._snapshot()["speeds"]

    def placement(self):
        """The storage in force: a Placement (USCTEC family) or the scheme's storage."""
        return self._snapshot()["placement"]

    def summary(self) -> dict:
        return summarize(self.reports)

    # -- a step ----------------------------------------------------------------------------------
    def _inputs(self, B):
        """The step's inputs, checked; returns them and how to shape the result."""
        if self.family == "hetero":
            M = len(self.masters)
            if isinstance(B, np.ndarray) and M != 1:
                raise ValueError(f"B: policy 'hetero' needs a list of M = {M} inputs")
            xs = list(B) if not isinstance(B, np.ndarray) else [B]
            if len(xs) != M:
                raise ValueError(f"B: needs one input per master, M = {M}, got {len(xs)}")
            out, vec = [], []
            for m, x in enumerate(xs):
                arr = self.F.asarray(x, f"B[{m}]")
                vec.append(arr.ndim == 1)
                arr = arr[:, None] if arr.ndim == 1 else arr
                if arr.ndim != 2 or arr.shape[0] != self.masters[m][1] or arr.shape[1] < 1:
                    raise ValueError(f"B[{m}]: shape {np.shape(x)} does not fit A[{m}] "
                                     f"{self.masters[m]}")
                out.append(arr)
            return out, lambda Y: [y[:, 0] if v else y for y, v in zip(Y, vec)], \
                sum(x.shape[1] for x in out)
        B = self.F.asarray(B, "B")
        vec = B.ndim == 1
        B = B[:, None] if vec else B
        if B.ndim != 2 or B.shape[0] != self.shape[1] or B.shape[1] < 1:
            raise ValueError(f"B: shape {B.shape} does not fit A {self.shape} "
                             f"(B.shape[0] must equal {self.shape[1]}, with >= 1 column)")
        return B, (lambda Y: Y[:, 0]) if vec else (lambda Y: Y), B.shape[1]

    def multiply(self, B, policy: str | None = None, events: StepEvents | None = None):
        """``A @ B`` (``hetero``: ``[A_m @ B_m]``) for this step's machines.

        ``policy`` overrides the cluster's policy for this step (any policy of the same storage
        family); ``events`` replaces the churn script's events for this step."""
        policy = policy or self.policy
        if family_of(policy) != self.family:
            raise ValueError(f"policy: {policy!r} needs {family_of(policy)} storage; this "
                             f"cluster stores for {self.family}")
        if self._closed:
            raise RuntimeError("cluster: already shut down")
        X, shape, n_cols = self._inputs(B)
        L_eff = 1 if policy == "uncoded" else self.L
        pad = (-X.shape[1]) % L_eff if self.family == "usctec" else 0
        if pad:
            X = np.concatenate([X, self.F.zeros((X.shape[0], pad))], axis=1)
        ev = self._apply_churn(events)
        t0 = time.perf_counter()
        prep, S_override = self._prepare(policy, n_cols + pad)
        Y, out = _RUN[self.family](self, X, policy, ev, prep) if self.family == "usctec" else \
            _RUN[self.family](self, X, ev, prep)
        self._finish(policy, out.prep or prep, out, t0, S_override)
        if pad:
            Y = Y[:, :X.shape[1] - pad]
        return shape(Y)

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

    def _prepare(self, policy: str, n_cols: int):
        """The step's plan: a prefetched one if still valid, else asked for now (with a lower
        ``S`` when machines ran short and ``allow_lower_S`` is set)."""
        self._drop_stale_prefetch()
        pre = self._prefetch.pop(policy, None)
        prep = None
        if pre is not None:
            try:
                prep = ray.get(pre[1])
            except Exception:  # e.g. too few machines: the fresh request reports it
                prep = None
        S_override = None
        if prep is None:
            req = StepRequest(self._step, policy, None, n_cols, tuple(self._handles))
            try:
                prep = ray.get(self.controller.prepare_step.remote(req))
            except ValueError as exc:
                if not self.allow_lower_S or "fewer than L+S" not in str(exc):
                    raise
                n = len(self.machines())
                if n < self.L:
                    raise
                S_override = n - self.L
                log.warning("running step %d with S=%d (fewer machines than L+S)", self._step,
                            S_override)
                req = StepRequest(self._step, policy, S_override, n_cols, tuple(self._handles))
                prep = ray.get(self.controller.prepare_step.remote(req))
        self._handles.update(prep.handles)
        self._handles = {m: self._handles[m] for m in prep.speeds}
        self._present = list(prep.speeds)
        return prep, S_override

    def _drop_stale_prefetch(self) -> None:
        for p, (epoch, ref) in list(self._prefetch.items()):
            if epoch != self._epoch:
                del self._prefetch[p]
                try:
                    info = ray.get(ref)
                except Exception:  # it failed: it changed nothing
                    continue
                c = self._carry
                c["joined"] += tuple(info.joined)
                c["left"] += tuple(info.left)
                c["rows_moved"] += int(info.rows_moved)

    def _finish(self, policy: str, prep, out, t0: float, S_override) -> None:
        g = out.gather
        t_end = time.perf_counter()
        stragglers = g.stragglers()
        scale = self.time_scale if self.time_scale > 0 else 1.0
        measured = g.measured_speeds(out.total_products, scale)
        c, self._carry = self._carry, {"joined": (), "left": (), "rows_moved": 0}
        wasted = g.wasted + g.leftover_products()
        plan = prep.plan
        report = StepReport(
            step=self._step, policy=policy, plan=plan, available=tuple(prep.speeds),
            joined=c["joined"] + prep.joined, left=c["left"] + prep.left,
            failed=tuple(dict.fromkeys(g.failed)), stragglers=stragglers,
            decoded_by=out.decoded_by, recovered_pieces=out.recovered,
            rows_moved=c["rows_moved"] + prep.rows_moved, total_rows=int(g.rows_dispatched),
            t_plan=prep.t_plan, t_encode=out.t_encode, t_compute=g.t_last - t0,
            t_decode=out.t_decode, t_total=t_end - t0, slowest_needed_s=g.slowest,
            c_plan=float(getattr(plan, "c_int", 0.0)), backups=g.backups,
            products=int(g.products), wasted_products=int(wasted),
            useful_products=int(out.total_products), redesign=prep.redesign,
            crashed=tuple(self._crash_idle), extra=out.extra)
        self.controller.report.remote(policy, measured, report.t_total, out.t_decode,
                                      len(stragglers))
        self.reports.append(report)
        self._step += 1
        gone = set(g.failed) | set(self._crash_idle)
        # a scripted crash whose call was cancelled (or that had no call) happens all the same
        unseen = [m for m in self._crash_idle if m not in g.failed and m in self._handles]
        for m in unseen:
            ray.kill(self._handles[m], no_restart=True)
        if unseen:
            ray.get(self.controller.mark_dead.remote(unseen))
        self._present = [m for m in prep.speeds if m not in gone]
        if gone:
            self._epoch += 1
        if S_override is None and self.family == "usctec":
            req = StepRequest(self._step, policy, None, 0, tuple(self._handles))
            self._prefetch[policy] = (self._epoch, self.controller.prepare_step.remote(req))

    # -- unified helpers (cached per design) ------------------------------------------------------
    def _shuffle_plan(self, st, Q: tuple, N: int):
        key = (st.version, Q, N)
        if key not in self._shuffles:
            self._shuffles[key] = shuffle_for(st, Q, N)
        return self._shuffles[key]

    def _design_ref(self, st):
        if st.version not in self._designs:
            self._designs = {st.version: ray.put(st.design)}
        return self._designs[st.version]

    # -- lifecycle --------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the workers and the controller (and the embedded Ray, if this cluster started it)."""
        if self._closed:
            return
        self._closed = True
        ctrl = getattr(self, "controller", None)
        if ctrl is not None:
            try:
                ray.get(ctrl.shutdown.remote(), timeout=30)
            except Exception:  # the controller kills the workers; if it is gone they are too
                pass
        stop([ctrl] if ctrl is not None else [], getattr(self, "_own_ray", False))

    def __enter__(self) -> "ElasticCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"<ElasticCluster {self.shape} over {self.F.name}, policy={self.policy}, "
                f"steps={self._step}>")
