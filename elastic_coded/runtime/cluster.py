"""The driver API, one for every policy: :class:`ElasticCluster`.

A step (:meth:`ElasticCluster.multiply`): the churn script's events for the step are applied;
the controller refreshes membership, repairs the storage of the policy's family for the machines
present and plans the step; the driver runs the family's step (:mod:`.steps`: encode, dispatch,
gather the first decodable results with ``ray.wait``, re-dispatch what a crash lost, cancel the
rest, decode) and records a :class:`~.report.StepReport`.  A step never returns a partial
result: it decodes every output or raises.

For the USCTEC family the next step's plan is asked for as a step starts (pipelined planning:
the controller plans it while this step computes); it is used only if no machine joined, left
or failed in between and the step did not fail (a membership epoch says so).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..algebra.fields import field as make_field
from ..algebra.scaling import max_exponent
from ..churn import ChurnScript, load_churn, parse_churn
from ..errors import ArgumentError, ShortOfMachines, StepFailed
from ..machines import MachineSpec, machine_specs
from ..options import split_flat
from ..schemes.policies import family_of, parse_options
from ..schemes.policies.modes import choose_mode, next_mode
from ..schemes.registry import added_policies, policy_of, step_code
from ..schemes.wire import StepMeasured, result_of
from . import blas, inputs
from . import events as churn_events
from . import membership as mem
from .context import ControllerClient, StepContext
from .controller import Controller, StepRequest
from .executors import UnifiedCache, run_step
from .executors.pull import history, pull_pays
from .family_setup import FamilySetup, setup_of
from .hosting import kill, per_process
from .operator import ClusterOperator, check_transpose, start_transposed
from .report import ReportLog, StepReport, summarize_plan
from .session import ensure_ray, stop
from .tracing import Tracer, Tracing
from .verifying import Verifier

__all__ = ["ElasticCluster", "MachineSpec"]

log = logging.getLogger(__name__)


def _check_int(name: str, val, lo: int) -> int:
    if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
        raise ArgumentError(f"{name}: must be an int >= {lo}, got {val!r}")
    return int(val)


def _churn_script(churn) -> ChurnScript:
    """A churn script from ``None``, a YAML path, a mapping or a :class:`ChurnScript`."""
    if churn is None:
        return ChurnScript()
    if isinstance(churn, (str, os.PathLike)):
        return load_churn(str(churn))
    return churn if isinstance(churn, ChurnScript) else parse_churn(churn)


def _option_fields(options) -> dict:
    """The policy's options as a mapping, from ``None``, a mapping or the options dataclass."""
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    raise ArgumentError(f"options: a mapping or the policy's options dataclass, got {options!r}")


PLANS_HELD = 4
"""Plans the driver keeps, so that the controller need not send one again
(:meth:`ElasticCluster._received`)."""


def _no_carry() -> dict:
    """Membership changes not yet reported (a failed step's are carried to the next report)."""
    return {"joined": (), "left": (), "rows_moved": 0, "draining": (), "preempted": (),
            "restarted": (), "not_restarted": ()}


class ElasticCluster:
    """A coded, elastic matrix on a Ray cluster, under any policy.

    ``policy``: ``"usctec-auto"`` (default: the USCTEC plan each step, run whole or pulled
    in units with coded backups, see :mod:`elastic_coded.schemes.policies.pull`), ``"usctec"``
    (the whole plan at once), ``"usctec-pull"``, the baselines ``"dynamic"``,
    ``"proportional"``, ``"cyclic"``, ``"uncoded"`` and ``"speculative"`` (all need ``L`` and
    ``S``; options ``units``, ``chunks``, ``depth``, ``call_cost_s``), ``"unified"``
    (options ``mu``, ``q``, ``N``, ``grow``; ``K`` is the machines present) or ``"hetero"``
    (``A`` a list of matrices, one per master; options ``assignment``, ``a0``, ``u0``, ``a``, ``u``,
    ``capacity``).  Options are checked by the policy's typed dataclass.

    ``A``: an array, a path to an ``.npy`` file each worker reads its own rows from, a SciPy
    sparse matrix or array (USCTEC family: stored as CSR row blocks, kept sparse on every
    worker, docs/sparse.md) or a path to an ``.npz`` file written by ``scipy.sparse.save_npz``.
    ``machines``: a count, a list of ``{id, speed, storage}`` dicts (or speeds, or
    :class:`MachineSpec`), or ``"auto"`` (one worker per ``ray.cpus_per_worker`` CPUs of every
    Ray node, following nodes that join, drain and die).  ``field``: ``"real"``, ``"gf(p)"``,
    ``"gf(<prime>)"`` or ``"gf(2^T)"``.  ``churn``: a :class:`~elastic_coded.churn.ChurnScript`,
    a mapping, or a YAML path.  ``options``: the policy's options (a mapping or its dataclass).

    The settings come in four groups (:mod:`elastic_coded.options`), each a dataclass, a
    mapping of its fields, or ``None`` for its defaults: ``run``
    (:class:`~elastic_coded.options.RunOptions`: ``time_scale``, ``seed``, ``placement``,
    ``storage``, ``learn_speeds``, ``allow_lower_S``, ``deadline``, ``chunk_rows``,
    ``transpose``), ``verify``
    (:class:`~elastic_coded.options.VerifyOptions`, or ``True``/``False``: ``on``,
    ``tolerance``, ``strict``, ``exclude_after``), ``ray``
    (:class:`~elastic_coded.options.RayOptions`: ``address``, ``num_cpus``,
    ``cpus_per_worker``, ``machines_per_process``, ``ping_timeout``, ``health_interval``) and
    ``report`` (:class:`~elastic_coded.options.ReportOptions`: ``window``, ``file``,
    ``keep_plans``).  The YAML configuration has the same sections.  ``**flat``: the settings as
    flat keywords (``time_scale=0.2``, ``tolerance=None``, ``report_window=50``, ...:
    :data:`~elastic_coded.options.FLAT`) and the policy's options.
    """

    def __init__(self, A, policy: str = "usctec-auto", machines: Any = 8, *,
                 L: int | None = None, S: int | None = None, field: Any = "real", churn=None,
                 options=None, run=None, verify=None, ray=None, report=None, trace=None,
                 **flat):
        groups, rest = split_flat({"run": run, "verify": verify, "ray": ray, "report": report},
                                  flat)
        run, ray_opts, rep = groups["run"], groups["ray"], groups["report"]
        self.run_options, self.ray_options, self.report_options = run, ray_opts, rep
        self.family = family_of(policy)
        if run.transpose:
            check_transpose(policy, self._fam.takes_LS)
        # the cluster of A^T (transpose=True, :mod:`.operator`)
        self.transposed: ElasticCluster | None = None
        self.options = parse_options(policy, {**_option_fields(options), **rest})
        if self._fam.takes_LS:
            if L is None or S is None:
                raise ArgumentError(f"{'L' if L is None else 'S'}: policy {policy!r} needs L and S")
            L, S = _check_int("L", L, 1), _check_int("S", S, 0)
        else:
            if L is not None or S is not None:
                raise ArgumentError(f"L, S: policy {policy!r} takes no L or S (got L={L!r}, "
                                    f"S={S!r}); see its options")
            L, S = 1, 0
        self.deadline, self.keep_plans = run.deadline, rep.keep_plans
        hosted = per_process(ray_opts.machines_per_process, float(run.time_scale))
        self.F = make_field(field)
        self.policy, self.L, self.S = policy, L, S
        self.allow_lower_S = run.allow_lower_S
        self.time_scale = float(run.time_scale)
        self.seed = run.seed
        self.reports = ReportLog(rep.window, rep.file)
        self._step = 0
        self._crash_idle: list[str] = []
        self._handles: dict = {}
        self._prefetch: dict = {}
        # the last step's measurements, until a request carries them
        self._untold: StepMeasured | None = None
        self._plans: dict = {}  # the plans held, by serial number (:meth:`_received`)
        self._summarized: tuple = (None, None)
        self._epoch = 0
        self._carry = _no_carry()
        self._present: list | None = None
        self._applied: tuple | None = None  # (step, events) of the churn applied last
        self._drawn: tuple | None = None    # (step, events) drawn from the churn script
        self._ever: set = set()  # every machine id the cluster has had (churn events name them)
        self._uid, self._adds = mem.new_uid(), 0  # names of the processes adds open
        self._closed = False
        self._tracer: Tracer | None = Tracer(trace) if trace is not None else None
        self._marks: tuple = ()
        self._unified = UnifiedCache()  # Shuffle plans and the stored design (unified)
        self._pull_rate: float | None = None  # measured by the last pull step at real speed
        self._pull_lag = 0.0  # what the last coded pull step's calls took beyond their work
        self._codes: tuple = ()  # hetero: the masters' MDS codes
        self._specs: dict = {}     # the driver's copy of the controller's state, for a revival
        self._speeds: dict = {}
        self._mode: str | None = None  # usctec-auto's execution of the step running
        self._storage = None
        self.revivals = 0
        self._churn = _churn_script(churn).generator()
        auto = None
        if isinstance(machines, str) and machines == "auto":
            auto, specs = {"cpus_per_worker": ray_opts.cpus_per_worker}, []
        else:
            specs = machine_specs(machines, run.storage)
        data = self._load(A)
        self._a_exp = 0 if self.F.exact else max(max_exponent(a) for a in self._loaded.mats)
        self._verifier = Verifier(self.F, self.family, data, groups["verify"])
        self._precheck(specs)
        self._own_ray = ensure_ray(ray_opts.address, ray_opts.num_cpus)
        try:
            sources, masters = self._sources(run.chunk_rows)
            self._ctrl_kwargs = dict(
                family=self.family, num_rows=self.shape[0], L=L, S=S, field_spec=self.F,
                sources=sources, time_scale=self.time_scale, placement=run.placement,
                seed=run.seed, learn_speeds=run.learn_speeds, auto=auto,
                ping_timeout=ray_opts.ping_timeout, default_storage=run.storage,
                health_interval=ray_opts.health_interval, options=self.options,
                max_restarts=ray_opts.max_restarts,
                masters=masters, machines_per_process=hosted, policies=added_policies(),
                row_prefix=self._row_prefix())
            self._start(specs)
            if run.transpose:
                self.transposed = start_transposed(self, dict(
                    policy=policy, machines=machines, churn=churn, run=run,
                    verify=groups["verify"], ray=ray_opts, report=rep))
        except BaseException:
            self.shutdown()
            raise

    # -- data (the family's setup, :mod:`.family_setup`) ------------------------------------------
    @property
    def _fam(self) -> FamilySetup:
        return setup_of(self.family)

    def _row_prefix(self):
        """A sparse ``A``'s nonzeros before each row (the controller's family plans them), or
        ``None``."""
        return getattr(self._loaded.weights, "prefix", None)

    def _load(self, A):
        """Check ``A`` before Ray starts (kept as :attr:`_loaded`); returns its data."""
        loaded = self._loaded = self._fam.load(self.F, A)
        self.shape, self.masters = loaded.shape, loaded.masters
        return loaded.data

    def _precheck(self, specs: list) -> None:
        """What can be checked before Ray starts: enough machines for the code, a field with
        enough points, a plan for the machines given (hetero: the masters' codes made)."""
        self._codes = self._fam.precheck(self.F, self.L, self.S, self.options, self.seed,
                                         self.allow_lower_S, specs, self._loaded)

    def _sources(self, chunk_rows) -> tuple[dict, tuple]:
        return self._fam.sources(self._loaded, chunk_rows, self._codes)

    # -- the controller --------------------------------------------------------------------------
    def _start(self, specs: list) -> None:
        self.controller = self._new_controller()
        self._handles, self._specs, self._storage = ray.get(self.controller.start.remote(specs))
        self._ever.update(self._handles)

    def _new_controller(self):
        # the controller lives on the driver's node, which outlives the spot and autoscaled
        # nodes that come and go
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        return Controller.options(scheduling_strategy=here).remote(**self._ctrl_kwargs)

    def _ctrl(self, method: str, *args):
        """Call the controller; if it died, replace it and call again (:func:`.membership.call`).
        A user error it raises comes back as itself, without Ray's traceback around it."""
        return mem.call(self, method, *args)

    def _tell(self) -> None:
        """Send the last step's measurements not told yet (:meth:`_told` carries them in the
        next request instead, saving the controller a call per step)."""
        untold, self._untold = self._untold, None
        if untold is not None:
            self.controller.report.remote(untold)

    def _told(self):
        """The last step's measurements, for the request about to carry them."""
        untold, self._untold = self._untold, None
        return untold

    def _revive(self) -> None:
        """Replace a controller that died (:func:`.membership.revive`)."""
        mem.revive(self)

    # -- membership ------------------------------------------------------------------------------
    def add_machines(self, machines: Iterable) -> int:
        """Start machines (dicts ``{id, speed, storage}`` or :class:`MachineSpec`) and give them
        storage; they are planned in from the next step.  Atomic: on an error none is added;
        if the controller dies meanwhile, they are added once (:mod:`.membership`).  Returns
        rows copied."""
        machines = list(machines)
        moved = mem.add(self, machines)
        self._ever.update(self._handles)
        if self.transposed is not None:
            moved += self.transposed.add_machines(machines)
        return moved

    def remove_machine(self, machine: str, crash: bool = False) -> None:
        """Take a machine away: gracefully, or as a crash (killed without notice).  Either
        way it is gone from :meth:`machines` at once, and its id can be added again."""
        mem.remove(self, machine, crash)
        if self.transposed is not None and machine in self.transposed.machines():
            self.transposed.remove_machine(machine, crash)

    def _snapshot(self):
        return self._ctrl("snapshot")

    def machines(self) -> list[str]:
        return list(self._snapshot().machines)

    def speeds(self) -> dict:
        """Current speed estimates."""
        return self._snapshot().speeds

    def speed_estimates(self) -> dict:
        """``{machine: SpeedEstimate}``: the recent measurements each planning speed is learnt
        from (:mod:`elastic_coded.schemes.speeds`), to give back later with
        :meth:`restore_speed_estimates`."""
        return self._ctrl("speed_estimates")

    def restore_speed_estimates(self, estimates) -> None:
        """Plan with estimates taken earlier by :meth:`speed_estimates` (machines present only;
        a ``ValueError`` names any other).  A plan asked for ahead is kept: speeds make a plan
        faster or slower, never wrong."""
        self._ctrl("restore_speed_estimates", dict(estimates))

    def placement(self):
        """The storage in force: a Placement (USCTEC family) or the scheme's storage."""
        return self._snapshot().storage

    def summary(self) -> dict:
        """Figures over every step run (not only the reports kept in memory)."""
        return self.reports.summary()

    # -- a step ----------------------------------------------------------------------------------
    def multiply(self, B, policy: str | None = None, events=None):
        """``A @ B`` (``hetero``: ``[A_m @ B_m]``) for this step's machines.

        ``policy`` overrides the cluster's policy for this step (any policy of the same storage
        family); ``events`` replaces the churn script's events for this step: a
        :class:`~elastic_coded.churn.StepEvents` or a mapping in the churn script's form,
        such as ``{"crash": "m4", "slow": ["m1"], "factor": 6}``
        (:func:`~elastic_coded.churn.parse_events`).  The driver's BLAS threads are capped
        meanwhile (``ray.driver_blas_threads``, :mod:`.blas`)."""
        with blas.limited(self.ray_options.driver_blas_threads):
            return self._multiply(B, policy, events)

    def _multiply(self, B, policy, events):
        policy = policy or self.policy
        if family_of(policy) != self.family:
            raise ArgumentError(f"policy: {policy!r} needs {family_of(policy)} storage; this "
                                f"cluster stores for {self.family}")
        if self._closed:
            raise StepFailed("cluster: already shut down")
        X, shape, n_cols = self._fam.inputs(self.F, self._loaded, B)
        X, k = inputs.scale(self.F, self._a_exp, X)  # near float64's limits: B 2^-k (inputs)
        ev = churn_events.apply(self, events)
        dead = self._verifier.arm(self._handles, self._step, ev)
        if dead:  # e.g. a liar that crashed in its lying step
            mem.forget(self, dead)
            self._ctrl("mark_dead", dead)
        t0 = time.perf_counter()
        prep, S_override = self._prepare(policy, n_cols)
        t_prep = time.perf_counter()
        if S_override is None and self._fam.prefetches:
            self._ask_ahead(policy, n_cols)
        try:
            ctx = self._context(policy, n_cols)
            Y, out = run_step(ctx, X, ev, prep)
            t_ran = time.perf_counter()
            self._pull_rate = out.pull_rate or self._pull_rate
            self._pull_lag = self._pull_lag if out.pull_lag is None else out.pull_lag
            inputs.check_finite(self.F, Y)
            Y = inputs.unscale(self._verifier.verify(ctx, X, Y, out, prep), k)
            inputs.check_finite(self.F, Y)
            self._verifier.last = inputs.unscale_verdict(self._verifier.last, k)
            self._marks = (t0, t_prep, t_ran, time.perf_counter())
        except BaseException:
            self._epoch += 1  # the step failed: plan it afresh, not from the plan asked ahead
            raise
        self._finish(policy, out.prep or prep, out, t0, S_override, n_cols)
        for m in self._verifier.exclude(self._handles):
            self.remove_machine(m)
        return shape(Y)

    def _context(self, policy: str, n_cols: int) -> StepContext:
        """What the step's executor and the verifier see of this cluster (:mod:`.context`)."""
        client = ControllerClient(self._ctrl, lambda: self._prepare(policy, n_cols)[0])
        return StepContext(
            step=self._step, F=self.F, policy=policy, handles=self._handles,
            time_scale=self.time_scale, seed=self.seed, deadline=self.deadline,
            options=self.options, ctrl=client, patience=self._verifier.patience,
            codes=self._codes,
            history=history(self.reports, policy) if policy_of(policy).pulls else (),
            pull_rate=self._pull_rate, pull_lag=self._pull_lag, unified=self._unified,
            crashed=tuple(self._crash_idle), mode=self._mode, weights=self._loaded.weights)

    def _prepare(self, policy: str, n_cols: int):
        """The step's plan: a prefetched one if still valid, else asked for now (with a lower
        ``S`` when machines ran short and ``allow_lower_S`` is set)."""
        self._drop_stale_prefetch(n_cols)
        modes = self._modes(policy, n_cols)
        self._mode = modes[0] if modes else None
        pre = self._prefetch.pop(policy, None)
        prep = None
        if pre is not None:
            try:
                prep = self._received(ray.get(pre[2]))
            except Exception:  # e.g. too few machines: the fresh request reports it
                prep = None
            if prep is not None and modes and not prep.plan.has(modes[0]):
                self._carry_over(prep)  # planned for another execution: ask again
                prep = None
        S_override = None
        if prep is None:
            req = StepRequest(self._step, policy, None, n_cols, tuple(self._handles),
                              modes=modes, held=tuple(self._plans), report=self._told())
            try:
                prep = self._received(self._ctrl("prepare_step", req))
            except ShortOfMachines as exc:
                if not (self.allow_lower_S and self._fam.takes_LS):
                    raise
                S_override = exc.S_max
                log.warning("running step %d with S=%d (%s)", self._step, S_override,
                            str(exc).split(";")[0])
                req = StepRequest(self._step, policy, S_override, n_cols, tuple(self._handles),
                                  modes=self._modes(policy, n_cols, S=S_override),
                                  held=tuple(self._plans))
                prep = self._received(self._ctrl("prepare_step", req))
        self._handles.update(prep.handles)
        mem.forget(self, [m for m in self._handles if m not in prep.speeds])
        self._ever.update(prep.speeds)
        self._present = list(prep.speeds)
        self._specs, self._speeds, self._storage = dict(prep.specs), prep.speeds, prep.storage
        return prep, S_override

    def _received(self, reply):
        """A prepared step as the controller sent it (:func:`~elastic_coded.schemes.wire.
        result_of`), the plan filled in from those the driver holds when it was left out
        (``StepRequest.held``); the last :data:`PLANS_HELD` plans received are held.  ``None``
        when that plan is held no more (a plan asked ahead): its changes are carried over and
        the step is asked for again."""
        prep = result_of(reply)
        if prep.plan is None:
            plan = self._plans.get(prep.serial)
            if plan is None:
                self._carry_over(prep)
                return None
            return dataclasses.replace(prep, plan=plan)
        if prep.serial:
            self._plans[prep.serial] = prep.plan
            while len(self._plans) > PLANS_HELD:
                del self._plans[next(iter(self._plans))]
        return prep

    def _summary(self, plan):
        """:func:`.report.summarize_plan`, kept for the plan object last summarized (a plan
        reused while nothing changed is the same object from step to step)."""
        if self._summarized[0] is not plan:
            self._summarized = (plan, summarize_plan(plan))
        return self._summarized[1]

    def _ask_ahead(self, policy: str, n_cols: int) -> None:
        """Ask for the next step's plan (this policy, the same input width) now, so that the
        controller plans it while this step computes; it is used if no machine joins, leaves or
        fails meanwhile (the membership epoch says so), else dropped."""
        req = StepRequest(self._step + 1, policy, None, n_cols, tuple(self._handles), ahead=True,
                          modes=self._modes(policy, n_cols, ahead=True), held=tuple(self._plans),
                          report=self._told())
        self._prefetch[policy] = (self._epoch, n_cols, self.controller.prepare_step.remote(req))

    def _modes(self, policy: str, n_cols: int, ahead: bool = False, S=None) -> tuple:
        """The execution a policy that chooses one each step (``usctec-auto``) will run, so the
        controller makes only its plan (``()``: every plan, before any speed is known).
        ``ahead``: the one expected of the next step
        (:func:`~elastic_coded.schemes.policies.modes.next_mode`)."""
        if not policy_of(policy).modes or not self._speeds or not self._fam.takes_LS:
            return ()
        S = self.S if S is None else S
        L_s, S_s, _ = step_code(policy, self.L, S, max(1, n_cols), self.F)
        hist = history(self.reports, policy)
        w = self._loaded.weights
        pays = pull_pays(self.F, w.total if w else self.shape[0], L_s, S_s, n_cols, self._speeds,
                         self.time_scale, self._pull_rate, self.options)
        mode = choose_mode(list(hist), pays)
        return (next_mode(hist, mode, pays) if ahead else mode,)

    def _drop_stale_prefetch(self, n_cols: int) -> None:
        """Drop plans asked for ahead under another membership or input width (their joins,
        departures and copies carried into the next report)."""
        for p, (epoch, cols, ref) in list(self._prefetch.items()):
            if epoch != self._epoch or cols != n_cols:
                del self._prefetch[p]
                try:
                    info = result_of(ray.get(ref))
                except Exception:  # it failed: it changed nothing
                    continue
                self._carry_over(info)

    def _carry_over(self, info) -> None:
        """A plan not used: its joins, departures and copies go into the next report."""
        c = self._carry
        c["joined"] += tuple(info.joined)
        c["left"] += tuple(info.left)
        c["rows_moved"] += int(info.rows_moved)
        c["draining"] += tuple(info.draining)
        c["preempted"] += tuple(info.preempted)
        c["restarted"] += tuple(info.restarted)
        c["not_restarted"] += tuple(info.not_restarted)

    def _finish(self, policy: str, prep, out, t0: float, S_override, n_cols: int) -> None:
        g = out.gather
        t_end = time.perf_counter()
        gone = set(g.failed) | set(g.preempted) | set(self._crash_idle)
        # a scripted crash whose call was cancelled (or that had no call) happens all the same
        unseen = [m for m in self._crash_idle if m not in g.failed and m in self._handles]
        for m in unseen:
            kill(self._handles[m])
        if gone:  # the controller drops them now (a unified Map's failures are seen only here),
            self._ctrl("mark_dead", sorted(gone, key=str))  # before the step is recorded
        stragglers = g.stragglers()
        scale = self.time_scale if self.time_scale > 0 else 1.0
        # speeds are learnt where a call's time follows its products (the USCTEC family); the
        # unified and hetero calls are paced by their latency models, built on the speeds
        # configured, so measuring them would feed the model its own draws
        measured = g.measured_speeds(out.total_products, scale) if self._fam.learns_speeds \
            else {}
        c, self._carry = self._carry, _no_carry()
        wasted = g.wasted + g.leftover_products()
        plan = prep.plan
        report = StepReport(
            step=self._step, policy=policy, plan=self._summary(plan),
            full_plan=plan if self.keep_plans else None, available=tuple(prep.speeds),
            joined=c["joined"] + prep.joined, left=c["left"] + prep.left,
            failed=tuple(dict.fromkeys(g.failed)), stragglers=stragglers,
            decoded_by=out.decoded_by, recovered_pieces=out.recovered,
            rows_moved=c["rows_moved"] + prep.rows_moved, total_rows=int(g.rows_dispatched),
            t_plan=prep.t_plan, t_encode=out.t_encode, t_compute=g.t_last - t0,
            t_decode=out.t_decode, t_total=t_end - t0, slowest_needed_s=g.slowest,
            c_plan=float(getattr(plan, "c_int", 0.0)), backups=g.backups,
            products=int(g.products), wasted_products=int(wasted),
            useful_products=int(out.total_products), redesign=prep.redesign,
            crashed=tuple(self._crash_idle), extra=out.extra,
            draining=c["draining"] + prep.draining,
            restarted=c["restarted"] + prep.restarted,
            not_restarted=c["not_restarted"] + prep.not_restarted,
            preempted=tuple(dict.fromkeys(c["preempted"] + prep.preempted + tuple(g.preempted))),
            code=(plan.L, plan.S) if self._fam.takes_LS else None,
            **self._verifier.last.fields())
        self._tell()  # one not told yet goes first
        self._untold = StepMeasured(policy, measured, report.t_total, out.t_decode,
                                    len(stragglers), g.slowest)
        self.reports.append(report)
        if self._tracer is not None:
            self._tracer.step(report, out, self._marks + (t_end,), self._handles, self._specs,
                              self._mode)
        self._step += 1
        self._present = [m for m in prep.speeds if m not in gone]
        mem.forget(self, gone)  # out of every driver-side table, now
        if gone:
            self._epoch += 1  # the plan asked for ahead counted them in

    # -- scipy -----------------------------------------------------------------------------------
    def multiply_transpose(self, B):
        """``A^T @ B``: a step of the transposed source (``transpose=True``, :mod:`.operator`)."""
        if self.transposed is None:
            raise ArgumentError("transpose: A^T products need ElasticCluster(..., transpose=True), "
                                "which stores the rows of A^T beside A's")
        return self.transposed.multiply(B)

    def as_linear_operator(self) -> ClusterOperator:
        """``A`` as a ``scipy.sparse.linalg.LinearOperator`` whose products are this cluster's
        steps (``rmatvec``/``rmatmat`` with ``transpose=True``), for ``eigsh``, ``svds``,
        ``lsqr``, ``cg``, ``gmres``... (:class:`~.operator.ClusterOperator`)."""
        if self.family == "hetero":
            raise ArgumentError("as_linear_operator: policy 'hetero' holds one matrix per master, "
                                "not one operator; use multiply")
        return ClusterOperator(self)

    # -- lifecycle --------------------------------------------------------------------------------
    def trace(self, path) -> Tracing:
        """Write a trace of the steps from now on to ``path`` (:mod:`.trace`; Perfetto opens
        it), until the returned handle's ``close()``, the end of its ``with`` block, or the
        cluster's shutdown.  A trace already being written ends here."""
        if self._tracer is not None:
            self._tracer.close()
        self._tracer = Tracer(path)
        return Tracing(self)

    def shutdown(self) -> None:
        """Stop the workers and the controller (and the embedded Ray, if this cluster started
        it)."""
        if self._closed:
            return
        self._closed = True
        tracer, transposed = getattr(self, "_tracer", None), getattr(self, "transposed", None)
        if tracer is not None:
            tracer.close()
        if transposed is not None:
            transposed.shutdown()
        for _, _, ref in getattr(self, "_prefetch", {}).values():
            try:  # collect plans asked for ahead, so that none fails unobserved
                ray.get(ref, timeout=10)
            except Exception:
                pass
        ctrl = getattr(self, "controller", None)
        if ctrl is not None:
            if getattr(self, "_untold", None) is not None:
                self._tell()
            try:
                ray.get(ctrl.shutdown.remote(), timeout=30)
            except Exception:  # a dead controller: the driver stops the workers it knows
                pass
        stop(([ctrl] if ctrl is not None else []) + list(self._handles.values()),
             getattr(self, "_own_ray", False))

    def __enter__(self) -> ElasticCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"<ElasticCluster {self.shape} over {self.F.name}, policy={self.policy}, "
                f"steps={self._step}>")
