"""The driver's step loop: one :meth:`StepLoop.run` per :meth:`ElasticCluster.multiply
<elastic_coded.ElasticCluster.multiply>`.

A step: the churn script's events for the step are applied (:mod:`.events`); the plan is
prepared (:mod:`.planning`: the controller refreshes membership, repairs the storage of the
policy's family for the machines present and plans the step); the family's executor runs it
(:mod:`.executors`: encode, dispatch, gather the first decodable results, re-dispatch what a
crash lost, cancel the rest, decode); the product is verified (:mod:`.verifying`) and a
:class:`~.report.StepReport` recorded (:func:`build_report`).  A step never returns a partial
result: it decodes every output or raises.

Plain Python: the controller is reached through a :class:`~.membership.ControllerLink`, the
executor through ``run``, a scripted crash's worker through ``kill`` (fakes in tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..families.usctec.executor_pull import history
from ..schemes.registry import policy_of
from ..schemes.wire import StepMeasured
from . import inputs
from .context import ControllerClient, StepContext
from .events import ChurnEvents, Membership
from .planning import PlanPipeline
from .report import ReportLog, StepReport
from .tables import DriverTables

__all__ = ["StepSetting", "StepLoop", "build_report"]


@dataclass(frozen=True)
class StepSetting:
    """What a step reads of the cluster, fixed at its start: the field, the family's setup
    (:class:`~.family_setup.FamilySetup`), ``A`` as loaded, the exponent its products are
    scaled by (:func:`~.inputs.scale`), the time scale, seed, deadline, the policy's options,
    the hetero masters' codes, and whether reports keep the whole plan."""

    F: Any
    fam: Any
    loaded: Any
    a_exp: int = 0
    time_scale: float = 0.0
    seed: int = 0
    deadline: float | None = None
    options: Any = None
    codes: tuple = ()
    keep_plans: bool = False


def build_report(*, step: int, policy: str, prep, out, t0: float, t_end: float, carry: dict,
                 crashed: tuple, verdict, summary, keep_plans: bool,
                 takes_LS: bool) -> StepReport:
    """The :class:`~.report.StepReport` of a step that ran ``prep`` with outcome ``out``
    (:class:`~.executors.common.Outcome`) from ``t0`` to ``t_end``: ``carry``, the membership
    changes of plans not used (:meth:`~.planning.PlanPipeline.take_carry`); ``summary``, its
    plan's (:func:`~.report.summarize_plan`)."""
    g, c, plan = out.gather, carry, prep.plan
    return StepReport(
        step=step, policy=policy, plan=summary, full_plan=plan if keep_plans else None,
        available=tuple(prep.speeds), joined=c["joined"] + prep.joined,
        left=c["left"] + prep.left, failed=tuple(dict.fromkeys(g.failed)),
        stragglers=g.stragglers(), decoded_by=out.decoded_by, recovered_pieces=out.recovered,
        rows_moved=c["rows_moved"] + prep.rows_moved, total_rows=int(g.rows_dispatched),
        t_plan=prep.t_plan, t_encode=out.t_encode, t_compute=g.t_last - t0,
        t_decode=out.t_decode, t_total=t_end - t0, slowest_needed_s=g.slowest,
        c_plan=float(getattr(plan, "c_int", 0.0)), backups=g.backups,
        products=int(g.products), wasted_products=int(g.wasted + g.leftover_products()),
        useful_products=int(out.total_products), redesign=prep.redesign,
        crashed=tuple(crashed), extra=out.extra, draining=c["draining"] + prep.draining,
        restarted=c["restarted"] + prep.restarted,
        not_restarted=c["not_restarted"] + prep.not_restarted,
        preempted=tuple(dict.fromkeys(c["preempted"] + prep.preempted + tuple(g.preempted))),
        code=(plan.L, plan.S) if takes_LS else None, verdict=verdict)


def _no_tracer():
    return None


class StepLoop:
    """The steps of one cluster (module docstring).  ``cluster``: its public membership calls
    (events join and remove machines through them, and the verifier's exclusions);
    ``tracer()``: the trace being written, or ``None``."""

    def __init__(self, setting: StepSetting, *, tables: DriverTables, link: Any,
                 pipeline: PlanPipeline, verifier: Any, churn: ChurnEvents, reports: ReportLog,
                 cluster: Membership, run: Callable, kill: Callable,
                 tracer: Callable[[], Any] = _no_tracer, state: Any = None):
        self.setting, self.tables, self.link, self.pipeline = setting, tables, link, pipeline
        self.verifier, self.churn, self.reports, self.cluster = verifier, churn, reports, cluster
        self.run_step, self.kill, self.tracer, self.state = run, kill, tracer, state
        self.step = 0
        self.pull_rate: float | None = None  # measured by the last pull step at real speed
        self.pull_lag = 0.0  # what the last coded pull step's calls took beyond their work
        self.marks: tuple = ()

    def run(self, B, policy: str, events=None):
        """``A @ B`` for this step's machines (module docstring)."""
        st, tables = self.setting, self.tables
        X, shape, n_cols = st.fam.inputs(st.F, st.loaded, B)
        X, k = inputs.scale(st.F, st.a_exp, X)  # near float64's limits: B 2^-k (inputs)
        ev = self.churn.apply(self.step, tables, self.cluster, events)
        dead = self.verifier.arm(tables.handles, self.step, ev)
        if dead:  # e.g. a liar that crashed in its lying step
            tables.forget(dead)
            self.link.call("mark_dead", dead)
        t0 = time.perf_counter()
        prep, S_override = self.pipeline.prepare(self.step, policy, n_cols)
        t_prep = time.perf_counter()
        if S_override is None and st.fam.prefetches:
            self.pipeline.ask_ahead(self.step, policy, n_cols)
        try:
            ctx = self.context(policy, n_cols)
            Y, out = self.run_step(ctx, X, ev, prep)
            t_ran = time.perf_counter()
            self.pull_rate = out.pull_rate or self.pull_rate
            self.pull_lag = self.pull_lag if out.pull_lag is None else out.pull_lag
            inputs.check_finite(st.F, Y)
            Y = inputs.unscale(self.verifier.verify(ctx, X, Y, out, prep), k)
            inputs.check_finite(st.F, Y)
            self.verifier.last = inputs.unscale_verdict(self.verifier.last, k)
            self.marks = (t0, t_prep, t_ran, time.perf_counter())
        except BaseException:
            tables.epoch += 1  # the step failed: plan it afresh, not from the plan asked ahead
            raise
        self.finish(policy, out.prep or prep, out, t0)
        for m in self.verifier.exclude(tables.handles):
            self.cluster.remove_machine(m)
        return shape(Y)

    def context(self, policy: str, n_cols: int) -> StepContext:
        """What the step's executor and the verifier see of the cluster (:mod:`.context`)."""
        st = self.setting
        client = ControllerClient(self.link.call,
                                  lambda: self.pipeline.prepare(self.step, policy, n_cols)[0],
                                  self.tables.learn)
        return StepContext(
            step=self.step, F=st.F, policy=policy,
            handles=MappingProxyType(self.tables.handles), time_scale=st.time_scale,
            seed=st.seed, deadline=st.deadline, options=st.options,
            ctrl=client, patience=self.verifier.patience, codes=st.codes,
            history=history(self.reports, policy, timed=st.time_scale == 0)
            if policy_of(policy).pulls else (),
            pull_rate=self.pull_rate, pull_lag=self.pull_lag, state=self.state,
            crashed=tuple(self.tables.crash_idle), mode=self.pipeline.mode,
            weights=st.loaded.weights)

    def finish(self, policy: str, prep, out, t0: float) -> None:
        """Record the step: the machines it lost marked dead, its report, its measurements
        for the controller, its trace; the next step's index."""
        st, tables, g = self.setting, self.tables, out.gather
        t_end = time.perf_counter()
        crashed = list(tables.crash_idle)
        gone = set(g.failed) | set(g.preempted) | set(crashed)
        # a scripted crash whose call was cancelled (or that had no call) happens all the same
        for m in [m for m in crashed if m not in g.failed and m in tables.handles]:
            self.kill(tables.handles[m])
        if gone:  # the controller drops them now (a unified Map's failures are seen only here),
            self.link.call("mark_dead", sorted(gone, key=str))  # before the step is recorded
        scale = st.time_scale if st.time_scale > 0 else 1.0
        # speeds are learnt where a call's time follows its products (the USCTEC family); the
        # unified and hetero calls are paced by their latency models, built on the speeds
        # configured, so measuring them would feed the model its own draws
        measured = g.measured_speeds(out.total_products, scale) if st.fam.learns_speeds else {}
        report = build_report(
            step=self.step, policy=policy, prep=prep, out=out, t0=t0, t_end=t_end,
            carry=self.pipeline.take_carry(), crashed=tuple(crashed),
            verdict=self.verifier.last, summary=self.pipeline.summary(prep.plan),
            keep_plans=st.keep_plans, takes_LS=st.fam.takes_LS)
        self.link.tell()  # one not told yet goes first
        self.link.untold = StepMeasured(policy, measured, report.t_total, out.t_decode,
                                        len(report.stragglers), g.slowest)
        self.reports.append(report)
        tracer = self.tracer()
        if tracer is not None:
            tracer.step(report, out, self.marks + (t_end,), tables.handles, tables.specs,
                        self.pipeline.mode)
        self.step += 1
        tables.stepped(prep.speeds, gone)
