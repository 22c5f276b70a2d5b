"""The driver API, one for every policy: :class:`ElasticCluster`, a façade over plain parts.

* :class:`~.tables.DriverTables`: the driver's copy of the machines;
* :class:`~.membership.ControllerLink`: the controller, replaced when it dies;
* :class:`~.events.ChurnEvents`: the churn script's events, applied once per step;
* :class:`~.planning.PlanPipeline`: a step's plan, asked ahead, held, its execution chosen;
* :class:`~.stepping.StepLoop`: a step, run and recorded as a :class:`~.report.StepReport`.

A step never returns a partial result: it decodes every output or raises (:mod:`.stepping`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ray

from ..algebra.fields import field as make_field
from ..algebra.scaling import max_exponent
from ..errors import ArgumentError, StepFailed
from ..families import family_of as _family
from ..families.usctec.executor_pull import history
from ..machines import MachineSpec
from ..options import split_flat
from ..schemes.policies import family_of, parse_options
from . import blas
from . import membership as mem
from .arguments import churn_script, code_of, controller_kwargs, machines_of, option_fields
from .events import ChurnEvents
from .executors import run_step
from .family_setup import FamilySetup, setup_of
from .hosting import kill, per_process
from .operator import ClusterOperator, check_transpose, start_transposed
from .planning import PlanPipeline, PlanSetting
from .report import ReportLog
from .session import ensure_ray, stop
from .stepping import StepLoop, StepSetting
from .tables import DriverTables
from .tracing import Tracer, Tracing
from .verifying import Verifier

__all__ = ["ElasticCluster", "MachineSpec"]


class ElasticCluster:
    """A coded, elastic matrix on a Ray cluster, under any policy.

    ``policy``: ``"usctec-auto"`` (default: the USCTEC plan each step, run whole or pulled
    in units with coded backups, see :mod:`elastic_coded.families.usctec.pull`), ``"usctec"``
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
        self.options = parse_options(policy, {**option_fields(options), **rest})
        L, S = code_of(policy, self._fam.takes_LS, L, S)
        self.deadline, self.keep_plans = run.deadline, rep.keep_plans
        hosted = per_process(ray_opts.machines_per_process, float(run.time_scale))
        self.F = make_field(field)
        self.policy, self.L, self.S = policy, L, S
        self.allow_lower_S, self.time_scale, self.seed = (run.allow_lower_S,
                                                          float(run.time_scale), run.seed)
        self.reports = ReportLog(rep.window, rep.file)
        self._uid, self._adds = mem.new_uid(), 0  # names of the processes adds open
        self._closed = False
        self._tracer: Tracer | None = Tracer(trace) if trace is not None else None
        self._tables = DriverTables(on_forget=lambda m: self._verifier.forget(m))
        self._link = mem.ControllerLink(lambda: self._new_controller(), self._tables,
                                        on_revived=lambda: self._plans.forget_plans())
        self._churn = ChurnEvents(churn_script(churn).generator(), L + S)
        auto, specs = machines_of(machines, run.storage, ray_opts.cpus_per_worker)
        self._loaded = self._fam.load(self.F, A)  # checked before Ray starts
        self.shape, self.masters = self._loaded.shape, self._loaded.masters
        a_exp = 0 if self.F.exact else max(max_exponent(a) for a in self._loaded.mats)
        self._verifier = Verifier(self.F, self.family, self._loaded.data, groups["verify"])
        # checked before Ray starts: enough machines, field points, a plan (hetero: the codes)
        codes = self._fam.precheck(self.F, L, S, self.options, self.seed, self.allow_lower_S,
                                   specs, self._loaded)
        self._parts(a_exp, codes)
        self._own_ray = ensure_ray(ray_opts.address, ray_opts.num_cpus)
        try:
            sources, masters = self._fam.sources(self._loaded, run.chunk_rows, codes)
            self._ctrl_kwargs = controller_kwargs(
                self, run, ray_opts, sources, masters, auto=auto, machines_per_process=hosted,
                row_prefix=getattr(self._loaded.weights, "prefix", None))
            self._link.start(specs)
            if run.transpose:
                self.transposed = start_transposed(self, dict(
                    policy=policy, machines=machines, churn=churn, run=run,
                    verify=groups["verify"], ray=ray_opts, report=rep))
        except BaseException:
            self.shutdown()
            raise

    @property
    def _fam(self) -> FamilySetup:  # the family's setup (:mod:`.family_setup`)
        return setup_of(self.family)

    def _parts(self, a_exp: int, codes: tuple) -> None:
        """The plan pipeline and the step loop over the tables and the controller link."""
        w = self._loaded.weights
        self._plans = PlanPipeline(
            PlanSetting(self.F, self.L, self.S, self.allow_lower_S, self._fam.takes_LS,
                        w.total if w else self.shape[0], self.time_scale, self.options),
            self._tables, self._link, ray.get,
            history=lambda p: history(self.reports, p, timed=self.time_scale == 0),
            pull_rate=lambda: self._loop.pull_rate)
        self._loop = StepLoop(
            StepSetting(self.F, self._fam, self._loaded, a_exp, self.time_scale, self.seed,
                        self.deadline, self.options, codes, self.keep_plans),
            tables=self._tables, link=self._link, pipeline=self._plans,
            verifier=self._verifier, churn=self._churn, reports=self.reports, cluster=self,
            run=run_step, kill=kill, tracer=lambda: self._tracer, state=self._fam.make_state())

    # -- the parts: the controller, the driver's tables -----------------------------------------
    def _new_controller(self):
        return mem.new_controller(self._ctrl_kwargs)

    @property
    def controller(self):
        """The controller actor (a new one after a revival)."""
        return self._link.handle

    @property
    def revivals(self) -> int:
        """Controllers that died and were replaced."""
        return self._link.revivals

    @property
    def _handles(self) -> dict:  # the driver's ``{machine: worker handle}`` (tests read it)
        return self._tables.handles

    @property
    def _specs(self) -> dict:  # the driver's ``{machine: MachineSpec}`` (tests read it)
        return self._tables.specs

    def _ctrl(self, method: str, *args):
        """A controller call (:meth:`.membership.ControllerLink.call`: revived if it died)."""
        return self._link.call(method, *args)

    # -- membership ------------------------------------------------------------------------------
    def add_machines(self, machines: Iterable) -> int:
        """Start machines (dicts ``{id, speed, storage}`` or :class:`MachineSpec`) and give them
        storage; they are planned in from the next step.  Atomic: on an error none is added;
        if the controller dies meanwhile, they are added once (:mod:`.membership`).  Returns
        rows copied."""
        machines = list(machines)
        self._adds += 1
        moved = mem.add(self._link, machines, f"ec-{self._uid}-a{self._adds}")
        if self.transposed is not None:
            moved += self.transposed.add_machines(machines)
        return moved

    def remove_machine(self, machine: str, crash: bool = False) -> None:
        """Take a machine away: gracefully, or as a crash (killed without notice).  Either
        way it is gone from :meth:`machines` at once, and its id can be added again."""
        mem.remove(self._link, machine, crash)
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
        policy = policy or self.policy
        if family_of(policy) != self.family:
            raise ArgumentError(f"policy: {policy!r} needs {family_of(policy)} storage; this "
                                f"cluster stores for {self.family}")
        if self._closed:
            raise StepFailed("cluster: already shut down")
        with blas.limited(self.ray_options.driver_blas_threads):
            return self._loop.run(B, policy, events)

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
        if _family(self.family).masters:
            raise ArgumentError(f"as_linear_operator: policy {self.policy!r} holds one matrix per "
                                f"master, not one operator; use multiply")
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
        """Stop the workers and the controller (and Ray, if this cluster started it)."""
        if self._closed:
            return
        self._closed = True
        if self._tracer is not None:
            self._tracer.close()
        if self.transposed is not None:
            self.transposed.shutdown()
        self._plans.collect()  # plans asked for ahead: none fails unobserved
        ctrl = self._link.close()
        stop(([ctrl] if ctrl is not None else []) + list(self._tables.handles.values()),
             self._own_ray)

    def __enter__(self) -> ElasticCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"<ElasticCluster {self.shape} over {self.F.name}, policy={self.policy}, "
                f"steps={self._loop.step}>")
