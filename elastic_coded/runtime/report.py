"""Step reports: one frozen dataclass per step, consumed by progress bars, metrics, the CLI summary
and the benchmarks (DESIGN.md principle 5).  Pure."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["StepReport", "summarize"]


@dataclass(frozen=True)
class StepReport:
    """What happened in one step."""

    step: int
    """Step index (0-based)."""
    policy: str
    """Policy that planned it."""
    plan: object = field(repr=False)
    """What was dispatched: a :class:`~elastic_coded.schemes.plan.StepPlan` (USCTEC family), a
    :class:`~elastic_coded.schemes.policies.hetero.HeteroStepPlan`, or the unified storage
    design the step ran on."""
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
    crashed: tuple = ()
    """Machines the churn script crashed in this step (seen mid-step as ``failed``, or, when
    the step no longer needed them, marked dead after it)."""
    extra: dict = field(default_factory=dict, repr=False)
    """Scheme-specific figures (unified: fastest set, load, values sent; hetero: service,
    ``t*``, rescued masters)."""

    @property
    def redundancy(self) -> float:
        """Products dispatched over those of the plain product."""
        return self.products / self.useful_products if self.useful_products else 0.0

    @property
    def overhead_s(self) -> float:
        """Runtime overhead: total step time minus the slowest needed worker's time."""
        return self.t_total - self.slowest_needed_s

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "plan"}
        d["decoded_by"] = {str(k): list(v) for k, v in self.decoded_by.items()}
        d["groups"] = len(getattr(self.plan, "groups", ()))
        d["overhead_s"] = self.overhead_s
        d["redundancy"] = self.redundancy
        return d


def summarize(reports) -> dict:
    """Aggregate figures over a run."""
    import numpy as np

    if not reports:
        return {"steps": 0}
    tot = np.array([r.t_total for r in reports])
    return {
        "steps": len(reports),
        "median_step_s": float(np.median(tot)),
        "mean_step_s": float(tot.mean()),
        "p95_step_s": float(np.percentile(tot, 95)),
        "median_overhead_s": float(np.median([r.overhead_s for r in reports])),
        "stragglers": int(sum(len(r.stragglers) for r in reports)),
        "failures": int(sum(len(r.failed) for r in reports)),
        "crashes": int(sum(len(r.crashed) for r in reports)),
        "joins": int(sum(len(r.joined) for r in reports)),
        "leaves": int(sum(len(r.left) for r in reports)),
        "recovered_pieces": int(sum(len(r.recovered_pieces) for r in reports)),
        "rows_moved": int(sum(r.rows_moved for r in reports)),
        "wasted_fraction": float(sum(r.wasted_products for r in reports)
                                 / max(1, sum(r.products for r in reports))),
        "products": int(sum(r.products for r in reports)),
        "redundancy": float(sum(r.products for r in reports)
                            / max(1, sum(r.useful_products for r in reports))),
        "redesigns": int(sum(r.redesign is not None for r in reports)),
    }
