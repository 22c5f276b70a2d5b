"""Step reports: one frozen dataclass per step, consumed by progress bars, metrics, the CLI summary
and the benchmarks (DESIGN.md principle 5).  Pure."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from ..errors import ArgumentError

if TYPE_CHECKING:  # the verifier's module starts Ray's; a report needs none
    from .verifying import Verdict

__all__ = ["StepReport", "PlanSummary", "PieceSummary", "summarize_plan", "summarize",
           "ReportLog"]


@dataclass(frozen=True)
class PieceSummary:
    """One output piece of a USCTEC-family plan: its group, rows, columns and the machine at
    each of its positions."""

    group: int
    rows: tuple
    cols: tuple | None
    machines: tuple


@dataclass(frozen=True)
class PlanSummary:
    """What a step's plan said, in a few kilobytes (the plan itself is kept only with
    ``keep_plans=True``, in :attr:`StepReport.full_plan`)."""

    kind: str
    """The plan's class: ``StepPlan``, ``PullPlan`` (USCTEC family), ``HeteroStepPlan`` or
    ``UnifiedStorage``."""
    available: tuple
    """Machines the plan was made for."""
    L: int | None = None
    """USCTEC family: the step's code ``(L, S)`` and ``K = L + S`` (``None`` otherwise)."""
    S: int | None = None
    K: int | None = None
    c_int: float = 0.0
    """The plan's computation time (MATH.md §1 units; ``0.0`` where the plan has none)."""
    groups: int = 0
    """USCTEC family: row groups ``U_g`` (unified: the design's batches)."""
    pieces: tuple = ()
    """USCTEC family: a :class:`PieceSummary` per piece (of the ``(L, S)`` plan for a pull
    plan)."""
    detail: dict = field(default_factory=dict)
    """Hetero: ``assignment``, ``serve`` (machine -> master), ``capacity``; unified:
    ``version``, ``K``, ``q``, ``m``, ``N``, ``servers``, ``reason``."""


def summarize_plan(plan) -> PlanSummary | None:
    """A :class:`PlanSummary` of any family's plan (``None`` for ``None``)."""
    if plan is None:
        return None
    kind = type(plan).__name__
    if hasattr(plan, "design"):  # the unified storage a step runs on
        d = plan.design
        return PlanSummary(kind, tuple(plan.servers), groups=len(d.batches), detail={
            "version": plan.version, "K": d.K, "q": d.q, "m": plan.m, "N": plan.N,
            "servers": tuple(plan.servers), "reason": plan.reason})
    if hasattr(plan, "serve"):  # heterogeneous masters
        st = plan.storage
        return PlanSummary(kind, tuple(plan.available), c_int=float(plan.c_int), detail={
            "assignment": st.assignment.method, "serve": dict(plan.serve),
            "capacity": tuple(st.capacity), "t_star": tuple(plan.t_star)})
    base = getattr(plan, "base", plan)
    pieces = tuple(PieceSummary(p.group, tuple(base.groups[p.group].rows), p.cols,
                                tuple(p.machines)) for p in base.pieces)
    return PlanSummary(kind, tuple(plan.available), plan.L, plan.S, plan.K,
                       float(getattr(plan, "c_int", getattr(base, "c_int", 0.0))),
                       len(base.groups), pieces)


VERDICT_FIELDS = ("verified", "caught", "repaired", "recomputed", "excluded", "condition",
                  "error_bound", "relative_error_bound", "t_verify", "verified_error_bound",
                  "relative_verified_error_bound", "estimated_error",
                  "relative_estimated_error", "improved")
"""The :class:`~elastic_coded.runtime.verifying.Verdict` fields a report reads as its own."""


@dataclass(frozen=True)
class StepReport:
    """What happened in one step."""

    step: int
    """Step index (0-based)."""
    policy: str
    """Policy that planned it."""
    plan: PlanSummary | None = field(repr=False)
    """What was dispatched, in brief (:class:`PlanSummary`): the step's code, pieces and their
    machines (USCTEC family), the assignment (hetero) or the storage design (unified)."""
    available: tuple
    """Machines present when the step was planned."""
    joined: tuple
    """Machines that joined (and got storage) before the step."""
    left: tuple
    """Machines that left before the step (gracefully or detected dead)."""
    failed: tuple
    """Machines that died during the step."""
    stragglers: tuple
    """Machines whose results were not needed (cancelled or late)."""
    decoded_by: dict = field(repr=False)
    """``{output: (machine, ...)}``: whose results decoded each piece (USCTEC), master
    (hetero) or the step (unified: the fastest ``q``)."""
    recovered_pieces: tuple
    """Pieces that lost results to a failure mid-step and had them re-planned on live machines."""
    rows_moved: int
    """Rows copied to machines (storage repair and joins) before or during the step."""
    total_rows: int
    """Rows dispatched in all (computed or cancelled, re-planned work included)."""
    t_plan: float
    t_encode: float
    t_compute: float
    """From dispatch to the last result needed."""
    t_decode: float
    t_total: float
    slowest_needed_s: float
    """Longest worker-side time among the results used (the step's unavoidable compute)."""
    c_plan: float
    """The plan's computation time ``c_int`` (MATH.md §1 units)."""
    backups: int = 0
    """Backup copies launched (speculative execution only)."""
    products: int = 0
    """Row-column products dispatched to workers (computed or cancelled, re-planned work and
    backups included)."""
    wasted_products: int = 0
    """Products whose results were not used (cancelled, or arrived after their output decoded)."""
    useful_products: int = 0
    """Products of the plain product (``A @ B``; hetero: ``sum_m A_m @ B_m``)."""
    redesign: str | None = None
    """Why the storage was re-encoded before this step (unified), or ``None``."""
    code: tuple | None = None
    """``(L, S)`` the step ran with (USCTEC family): ``L`` below the configured one for inputs
    narrower than ``L`` columns (:func:`~elastic_coded.schemes.registry.step_code`), ``S`` lower
    under ``allow_lower_S``."""
    crashed: tuple = ()
    """Machines the churn script crashed in this step (seen mid-step as ``failed``, or, when
    the step no longer needed them, marked dead after it)."""
    draining: tuple = ()
    """Machines whose Ray node started draining (a preemption notice, ``ray drain-node``) since
    the last step: planned out from this step on (they are in ``left``), their rows copied to
    the machines left first (:mod:`~elastic_coded.runtime.drain`)."""
    restarted: tuple = ()
    """Machines whose worker process died and that are back in a fresh one, their storage
    loaded again from the placement, planned in from this step (they are in ``joined`` too)."""
    not_restarted: tuple = ()
    """``(machine, why)``: machines whose worker process died and that stay removed (restarts
    per machine are bounded: ``ray.max_restarts``; or the restart failed)."""
    preempted: tuple = ()
    """Machines lost to a preempted node (their actor error says ``preempted``): mid-step, their
    work re-planned like a failure's but not counted in ``failed``; or found gone before it."""
    extra: dict = field(default_factory=dict, repr=False)
    """Scheme-specific figures (unified: fastest set, load, values sent; hetero: service,
    ``t*``, rescued masters; a pull step: ``mode``, ``units``, ``pieces``, ``calls`` sent,
    ``cancelled``, ``stolen``, ``slowed``, ``decisions``: the queue's ``next_for`` calls and
    ``t_decide``: the driver's wall seconds in them)."""
    verdict: Verdict | None = None
    """What verification found (:class:`~elastic_coded.runtime.verifying.Verdict`; ``None``: no
    verdict, its fields read as their defaults).  Its fields read as the report's own:
    :attr:`verified`, :attr:`caught`, :attr:`repaired`, :attr:`recomputed`, :attr:`excluded`,
    :attr:`condition`, :attr:`error_bound`, :attr:`relative_error_bound`, :attr:`t_verify`,
    :attr:`verified_error_bound`, :attr:`relative_verified_error_bound`,
    :attr:`estimated_error`, :attr:`relative_estimated_error` and :attr:`improved`."""
    full_plan: object = field(default=None, repr=False)
    """The plan itself (a :class:`~elastic_coded.schemes.plan.StepPlan`, a pull plan, a
    :class:`~elastic_coded.families.hetero.policy.HeteroStepPlan` or the unified storage), kept
    only with ``keep_plans=True`` (for debugging: a unified plan holds its generator matrix,
    megabytes); ``None`` otherwise."""

    @property
    def verified(self) -> bool | None:
        """``True`` when the product was checked against the sketch of ``A`` (and repaired if it
        failed) before it was returned; ``None`` when verification is off or not available (the
        unified scheme in the reals).  See :mod:`elastic_coded.runtime.verifying`."""
        return self.verdict.verified if self.verdict is not None else None

    @property
    def caught(self) -> tuple:
        """Machines whose results were found wrong in this step."""
        return self.verdict.caught if self.verdict is not None else ()

    @property
    def repaired(self) -> tuple:
        """Outputs (pieces; hetero: masters) decoded again from results that check."""
        return self.verdict.repaired if self.verdict is not None else ()

    @property
    def recomputed(self) -> int:
        """Results computed again to repair wrong outputs."""
        return self.verdict.recomputed if self.verdict is not None else 0

    @property
    def excluded(self) -> tuple:
        """Machines removed after this step, caught returning wrong results in too many steps."""
        return self.verdict.excluded if self.verdict is not None else ()

    @property
    def condition(self) -> float | None:
        """Real field: the largest decode condition number among the step's outputs."""
        return self.verdict.condition if self.verdict is not None else None

    @property
    def error_bound(self) -> float | None:
        """A bound on ``||Y - A B||_F`` (``0.0`` over finite fields; ``None``: none known)."""
        return self.verdict.error_bound if self.verdict is not None else None

    @property
    def relative_error_bound(self) -> float | None:
        """``error_bound / ||Y||_F`` (hetero: the largest over the masters)."""
        return self.verdict.relative_error_bound if self.verdict is not None else None

    @property
    def t_verify(self) -> float:
        """Seconds spent checking (and repairing) the product."""
        return self.verdict.t_verify if self.verdict is not None else 0.0

    @property
    def verified_error_bound(self) -> float | None:
        """Real field: a bound on ``||Y - A B||_F`` whatever the machines did, lies included (from
        the residual of the check that accepted ``Y``; it fails with probability about ``1e-13``),
        at least ``error_bound``, which assumes every result was computed honestly."""
        return self.verdict.verified_error_bound if self.verdict is not None else None

    @property
    def relative_verified_error_bound(self) -> float | None:
        """``verified_error_bound / ||Y||_F``."""
        return self.verdict.relative_verified_error_bound if self.verdict is not None else None

    @property
    def estimated_error(self) -> float | None:
        """Real field, verified: an estimate of ``||Y - A B||_F`` itself, from the residual of the
        check that accepted ``Y`` (``||U E||_F / sqrt(t)``, whose mean square is ``||E||_F^2``)."""
        return self.verdict.estimated_error if self.verdict is not None else None

    @property
    def relative_estimated_error(self) -> float | None:
        """``estimated_error / ||Y||_F``: what the cluster's ``tolerance`` is held to."""
        return self.verdict.relative_estimated_error if self.verdict is not None else None

    @property
    def improved(self) -> tuple:
        """Pieces decoded again from better-conditioned results because the estimate exceeded the
        tolerance."""
        return self.verdict.improved if self.verdict is not None else ()

    @property
    def redundancy(self) -> float:
        """Products dispatched over those of the plain product."""
        return self.products / self.useful_products if self.useful_products else 0.0

    @property
    def overhead_s(self) -> float:
        """Runtime overhead: total step time minus the slowest needed worker's time."""
        return self.t_total - self.slowest_needed_s

    def to_dict(self) -> dict:
        """The report's fields by name (the verdict's fields in its place), for JSON."""
        d: dict = {}
        for f in fields(self):
            if f.name == "verdict":
                d.update({v: getattr(self, v) for v in VERDICT_FIELDS})
            elif f.name not in ("plan", "full_plan"):
                d[f.name] = getattr(self, f.name)
        d["decoded_by"] = {str(k): list(v) for k, v in self.decoded_by.items()}
        d["groups"] = self.plan.groups if self.plan is not None else 0
        d["overhead_s"] = self.overhead_s
        d["redundancy"] = self.redundancy
        return d


_COUNTS = {  # summary key -> what one report adds
    "stragglers": lambda r: len(r.stragglers), "failures": lambda r: len(r.failed),
    "crashes": lambda r: len(r.crashed), "joins": lambda r: len(r.joined),
    "drains": lambda r: len(r.draining), "preemptions": lambda r: len(r.preempted),
    "leaves": lambda r: len(r.left), "recovered_pieces": lambda r: len(r.recovered_pieces),
    "rows_moved": lambda r: r.rows_moved, "products": lambda r: r.products,
    "wasted_products": lambda r: r.wasted_products,
    "useful_products": lambda r: r.useful_products,
    "redesigns": lambda r: r.redesign is not None,
    "caught": lambda r: len(r.caught), "repaired": lambda r: len(r.repaired),
}


def _summary(steps: int, tot, over, counts: dict) -> dict:
    import numpy as np

    if not steps:
        return {"steps": 0}
    tot = np.asarray(tot, dtype=np.float64)  # a list or an array('d')
    out = {"steps": steps, "median_step_s": float(np.median(tot)),
           "mean_step_s": float(tot.mean()), "p95_step_s": float(np.percentile(tot, 95)),
           "median_overhead_s": float(np.median(over))}
    out.update({k: int(v) for k, v in counts.items()
                if k not in ("wasted_products", "useful_products")})
    out["wasted_fraction"] = float(counts["wasted_products"] / max(1, counts["products"]))
    out["redundancy"] = float(counts["products"] / max(1, counts["useful_products"]))
    return out


def summarize(reports) -> dict:
    """Aggregate figures over a run's reports."""
    reports = list(reports)
    counts = {k: sum(f(r) for r in reports) for k, f in _COUNTS.items()}
    return _summary(len(reports), [r.t_total for r in reports],
                    [r.overhead_s for r in reports], counts)


class ReportLog:
    """A run's step reports: the last ``window`` in memory (indexable like a list), running
    aggregates over every step (:meth:`summary`), and, with ``path``, every report appended to a
    JSON-lines file as it is made.  Memory stays bounded however long the run, but for the
    two timings each step adds for the exact medians (16 bytes a step, in ``array('d')``)."""

    def __init__(self, window: int | None = 1000, path: str | None = None):
        from array import array
        from collections import deque

        if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                                   or window < 1):
            raise ArgumentError(f"report_window: {window!r} must be an int >= 1 or None")
        self._kept: deque = deque(maxlen=window)
        self._tot = array("d")  # a float each, not a list's 32 bytes a step
        self._over = array("d")
        self._counts = {k: 0 for k in _COUNTS}
        self.steps = 0
        self.path = path
        if path is not None:
            open(path, "a").close()  # fail now, not after the first step, if it is unwritable

    def append(self, report: StepReport) -> None:
        self._kept.append(report)
        self.steps += 1
        self._tot.append(report.t_total)
        self._over.append(report.overhead_s)
        for k, f in _COUNTS.items():
            self._counts[k] += f(report)
        if self.path is not None:
            import json

            with open(self.path, "a") as fh:
                fh.write(json.dumps(report.to_dict(), default=str) + "\n")

    def summary(self) -> dict:
        return _summary(self.steps, self._tot, self._over, self._counts)

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self):
        return iter(self._kept)

    def __getitem__(self, i):
        return list(self._kept)[i] if isinstance(i, slice) else self._kept[i]

    def __bool__(self) -> bool:
        return bool(self._kept)
