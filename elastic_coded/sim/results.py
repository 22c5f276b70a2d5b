"""What :func:`~elastic_coded.sim.runner.simulate` returns, and the per-step record it fills.
Pure: numpy."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["SimResult", "Record", "summarize_times"]


def summarize_times(times: np.ndarray | Sequence[float]) -> dict[str, float]:
    """``mean``, ``median``, ``p95``, ``max`` of the completed steps, and ``lost`` (steps that
    could not complete)."""
    t = np.asarray(times, dtype=np.float64)
    ok = t[np.isfinite(t)]
    if not ok.size:
        return {"mean": math.nan, "median": math.nan, "p95": math.nan, "max": math.nan,
                "lost": int(t.size)}
    return {"mean": float(ok.mean()), "median": float(np.median(ok)),
            "p95": float(np.percentile(ok, 95)), "max": float(ok.max()),
            "lost": int(t.size - ok.size)}


@dataclass(frozen=True)
class SimResult:
    """Per-step times of every policy on one trace, and their summary."""

    names: tuple[str, ...]
    times: dict[str, np.ndarray] = field(repr=False)
    """``{name: (steps,) step times}`` (``inf``: the step could not complete)."""
    plan_seconds: dict[str, np.ndarray] = field(repr=False)
    """``{name: (steps,) measured planning seconds}`` (0 when the plan came from the cache)."""
    storage_seconds: dict[str, np.ndarray] = field(repr=False)
    """``{placement kind: (steps,) measured seconds of extend/repair}``."""
    recovered: dict[str, np.ndarray] = field(repr=False)
    """``{name: (steps,) pieces that crashes left short of L live results}``."""
    redispatched: dict[str, np.ndarray] = field(repr=False)
    """``{name: (steps,) tasks re-dispatched after crashes}``."""
    copies: dict[str, np.ndarray] = field(repr=False)
    """``{name: (steps,) speculative copies launched}``."""
    replans: dict[str, int]
    """``{name: plans solved}`` (cache misses; policies sharing a plan function and placement
    share plans, the first to ask pays)."""
    machines: np.ndarray = field(repr=False)
    """``(steps,)`` machines present."""
    counts: dict[str, int]
    """Churn totals (joins, leaves, crashes, membership changes)."""
    wall: dict[str, float]
    """Measured seconds: ``total``, ``trace``, ``placement`` (initial), ``storage``, ``planning``,
    ``execution``."""
    baseline: str | None
    summary: dict[str, dict[str, float | None]]
    """``{name: summarize_times(...) + ratio_mean, ratio_median (to the baseline), plan_ms (mean
    planning ms per step), replans, recovered, redispatched, copies, redesigns, rows_moved}``."""
    redesigns: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    """``{name: (steps,) storage re-designs}``: unified's re-encodings (before the step, and
    after crashes left fewer than ``q``) and hetero's re-plans (before the step); 0 for the
    USCTEC family, whose placement is repaired in place."""
    rows_moved: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    """``{name: (steps,) rows stored anew for the step}``: USCTEC-family rows copied by
    ``extend_placement``/``repair_placement`` (shared by the policies on one placement kind),
    unified's coded rows of a new design, hetero's coded rows sent by its re-plan and its
    rescues."""
    details: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    """``{name: {key: (steps,) array}}`` per scheme: unified ``K``, ``q``, ``live`` (servers of
    the design present), ``m`` (rows the design is padded to); hetero ``lower_bound``
    (:func:`~elastic_coded.families.hetero.sim.hetero_lower_bound`), ``t_star``, ``topped_up``
    (masters), ``top_up_calls``, ``rescued_rows``."""

    def __repr__(self) -> str:
        steps = len(self.machines)
        parts = ", ".join(f"{n}={self.summary[n]['mean']:.4g}" for n in self.names)
        return f"SimResult({steps} steps, mean times: {parts})"

    def to_dict(self) -> dict[str, object]:
        """The summary and totals as plain JSON-able data."""
        return {"names": list(self.names), "baseline": self.baseline, "summary": self.summary,
                "replans": self.replans, "counts": self.counts, "wall": self.wall,
                "steps": int(len(self.machines))}


class Record:
    """Every policy's per-step arrays, filled as the steps run; :meth:`result` sums them up."""

    def __init__(self, names: tuple[str, ...], steps: int, kinds: Iterable[str] = ()) -> None:
        self.names, self.steps = names, steps

        def per(dtype: npt.DTypeLike = np.float64) -> dict[str, np.ndarray]:
            return {n: np.zeros(steps, dtype=dtype) for n in names}

        self.times, self.plan_s = per(), per()
        self.recovered, self.redispatched, self.copies = (per(np.int64), per(np.int64),
                                                          per(np.int64))
        self.redesigns, self.rows_moved = per(np.int64), per(np.int64)
        self.replans = {n: 0 for n in names}
        self.storage_s = {k: np.zeros(steps) for k in kinds}
        self.details: dict[str, dict[str, np.ndarray]] = {}
        self.machines = np.zeros(steps, dtype=np.int64)

    def detail(self, name: str, key: str, t: int, value: float) -> None:
        self.details.setdefault(name, {}).setdefault(key, np.zeros(self.steps))[t] = value

    def result(self, counts: dict[str, int], wall: dict[str, float], baseline: str | None
               ) -> SimResult:
        summary: dict[str, dict[str, float | None]] = {}
        base = summarize_times(self.times[baseline]) if baseline is not None else None
        for n in self.names:
            s: dict[str, Any] = summarize_times(self.times[n])  # more entries below, None too
            s["ratio_mean"] = (s["mean"] / base["mean"]) if base and base["mean"] > 0 else None
            s["ratio_median"] = ((s["median"] / base["median"]) if base and base["median"] > 0
                                 else None)
            s["plan_ms"] = float(self.plan_s[n].mean() * 1e3) if self.steps else 0.0
            s["replans"] = self.replans[n]
            for key, arr in (("recovered", self.recovered), ("redispatched", self.redispatched),
                             ("copies", self.copies), ("redesigns", self.redesigns),
                             ("rows_moved", self.rows_moved)):
                s[key] = int(arr[n].sum())
            summary[n] = s
        wall = dict(wall, storage=float(sum(a.sum() for a in self.storage_s.values())),
                    planning=float(sum(a.sum() for a in self.plan_s.values())))
        return SimResult(self.names, self.times, self.plan_s, self.storage_s, self.recovered,
                         self.redispatched, self.copies, self.replans, self.machines, counts,
                         wall, baseline, summary, self.redesigns, self.rows_moved, self.details)
