"""Step reports: one frozen dataclass per step, consumed by progress bars, metrics, the CLI summary
and the benchmarks (DESIGN.md principle 5).  Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

__all__ = ["StepReport", "summarize"]


@dataclass(frozen=True)
class StepReport:
    """What happened in one step."""

    step: int
    """Step index (0-based)."""
    policy: str
    """Policy that planned it."""
    plan: object = field(repr=False)
    """The :class:`~elastic_coded.schemes.plan.StepPlan` dispatched."""
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
    """``{piece: (machine, ...)}``: whose results decoded each piece."""
    recovered_pieces: tuple
    """Pieces that lost results to a failure mid-step and had them re-planned on live machines."""
    rows_moved: int
    """Rows copied to machines (storage repair and joins) before or during the step."""
    wasted_rows: int
    """Rows multiplied (or planned and cancelled) whose results were not used."""
    total_rows: int
    """Rows multiplied or planned in all."""
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

    @property
    def overhead_s(self) -> float:
        """Runtime overhead: total step time minus the slowest needed worker's time."""
        return self.t_total - self.slowest_needed_s

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("plan")
        d["decoded_by"] = {str(k): list(v) for k, v in self.decoded_by.items()}
        d["groups"] = len(self.plan.groups)
        d["overhead_s"] = self.overhead_s
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
        "joins": int(sum(len(r.joined) for r in reports)),
        "leaves": int(sum(len(r.left) for r in reports)),
        "recovered_pieces": int(sum(len(r.recovered_pieces) for r in reports)),
        "rows_moved": int(sum(r.rows_moved for r in reports)),
        "wasted_fraction": float(sum(r.wasted_rows for r in reports)
                                 / max(1, sum(r.total_rows for r in reports))),
    }
