"""The simulator's runtime cost fitted from a calibration run's measurements (pure: no Ray).

``python -m benchmarks calibrate`` (``benchmarks/calibrate.py``) measures the steps of a small
real Ray run on the host; :func:`fit` turns its points into a
:class:`~elastic_coded.sim.cost.RuntimeCost` and the check of that cost against the measured
steps, :func:`host_fit` fits the host's CPU per step, machine, call and cancellation, and
:func:`to_markdown` writes the results table.  The benchmark's docstring says what each figure
measures.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..machines import per_process
from .cost import RuntimeCost

__all__ = ["TIME_SCALE", "host_busy", "host_fit", "fit", "to_markdown"]

TIME_SCALE = 1e-3
"""The calibration run's time scale: a call's computation is a fraction of a millisecond."""


def host_busy() -> float | None:
    """CPU seconds the whole host has spent busy (every process, every core) since boot, from
    ``/proc/stat``; ``None`` where it cannot be read."""
    try:
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def fit(pts: list[dict[str, Any]], share: float, sizes: tuple[int, ...], steps: int,
        time_scale: float = TIME_SCALE) -> dict[str, Any]:
    """The cost from the points of two or more cluster sizes (``share``: of one call's driver
    cost in plain Ray, the part spent submitting it): the results a calibration writes, less
    the host's description."""
    lo, hi = pts[0], pts[-1]
    dM = max(1, hi["machines"] - lo["machines"])
    # the per-call cost grows with the machines the pull loop looks at, at every event: a
    # least-squares line through every size (two sizes alone let one noisy point set it)
    Ms = np.array([p["machines"] for p in pts], dtype=np.float64)
    scan, b0 = np.polyfit(Ms, [p["per_call_s"] for p in pts], 1)
    scan = max(0.0, float(scan))
    b0 = max(0.0, float(np.mean([p["per_call_s"] for p in pts]) - scan * Ms.mean()))
    hosted = per_process(None, time_scale)
    # the smallest size's: fewest processes share the cores there (the larger sizes' slowest
    # calls measure the host's contention, which the host floor charges)
    worker = float(np.median([r["slowest_s"] for r in pts[0]["dynamic"]]))
    host = host_fit(pts)
    # the coded queue's decisions: their wall time on the driver over their count, pooled
    # over every usctec-pull step (the largest size, with the most decisions, weighs most)
    coded = [r for p in pts for r in p["host_steps"] if r["policy"] == "usctec-pull"]
    n_dec = sum(r["decisions"] for r in coded)
    decide = sum(r["t_decide_s"] for r in coded) / n_dec if n_dec else 0.0
    plan_s = float(np.median([p["t_plan_s"] for p in pts]))
    def calls_cost(M: int) -> float:
        return -(-M // hosted) * b0

    # a whole step's cost beyond its calls: step_s + M * machine_s through the two sizes (a
    # negative intercept is taken as 0, the slope then through the larger size)
    y = [p["uncoded_s"] - plan_s - calls_cost(p["machines"]) - worker for p in (lo, hi)]
    per_machine = max(0.0, (y[1] - y[0]) / dM)
    step_s = y[0] - per_machine * lo["machines"]
    if step_s < 0:
        step_s, per_machine = 0.0, max(0.0, y[1] / hi["machines"])
    floor: dict[str, Any] = ({"host_cpus": os.cpu_count() or 1, "host_step_s": host[0],
                              "host_machine_s": host[1], "host_call_s": host[2],
                              "host_cancel_s": host[3]} if host else {})
    cost = RuntimeCost(step_s=step_s, call_s=share * b0, round_trip_s=(1 - share) * b0,
                       plan_s=plan_s, worker_call_s=worker, per_process=hosted,
                       machine_s=per_machine, scan_s=scan, decide_s=decide, **floor)
    check = []
    for p in pts:
        M = p["machines"]
        for r in p["dynamic"]:
            check.append({"policy": "dynamic", "machines": M,
                          "chunks_per_machine": r["chunks_per_machine"],
                          "measured_median_s": r["median_s"],
                          "predicted_s": max(cost.host_floor(M, r["calls"], r["cancelled"]),
                                             cost.step_cost(M) + r["calls"] * (b0 + scan * M)
                                             + worker)})
        check.append({"policy": "uncoded", "machines": M, "measured_median_s": p["uncoded_s"],
                      "predicted_s": max(cost.host_floor(M, -(-M // hosted)),
                                         cost.step_cost(M) + calls_cost(M) + worker)})
    return {"cost": cost.to_dict(), "fit": {"per_call_s": b0, "submit_share": share,
                                            "scan_s": scan, "machine_s": per_machine,
                                            "decide_s": decide,
                                            "host": host},
            "points": pts, "check": check, "sizes": list(sizes), "steps": steps,
            "time_scale": time_scale}


def host_fit(pts: list[dict[str, Any]]) -> tuple[float, ...] | None:
    """``(host_step_s, host_machine_s, host_call_s, host_cancel_s)``: the host CPU of every
    step of :func:`measure_host`, fitted by ``a + b * machines + c *
    calls + d * cancelled`` (least squares, each term at least 0); ``None`` where the host's
    CPU cannot be read."""
    rows = [(p["machines"], r["calls"], r["cancelled"], r["host_cpu_s"])
            for p in pts for r in p["host_steps"]]
    if not rows or any(h is None for *_, h in rows):
        return None
    from scipy.optimize import nnls

    X = np.array([[1.0, m, k, x] for m, k, x, _ in rows])
    coef, _ = nnls(X, np.array([h for *_, h in rows]))
    return tuple(float(c) for c in coef)


def to_markdown(res: dict[str, Any], command: str) -> str:
    c = res["cost"]
    lines = ["# Runtime cost, calibrated on this host", "",
             f"{', '.join(map(str, res['sizes'][:-1]))} and {res['sizes'][-1]} emulated "
             f"machines, time_scale {res['time_scale']:g} (next to no computation), "
             f"{res['steps']} steps per point on {res['host']['cpus']} CPUs (shared: noisy).  "
             f"Command: `{command}`.", "",
             "| field | value |", "|---|---:|"]
    lines += [f"| {k} | {v:.4g} |" for k, v in c.items()]
    lines += ["", "| check | machines | measured (s) | the cost's prediction (s) |",
              "|---|---:|---:|---:|"]
    for ch in res["check"]:
        what = ch["policy"] + (f", {ch['chunks_per_machine']} chunks per machine"
                               if "chunks_per_machine" in ch else "")
        lines.append(f"| {what} | {ch['machines']} | {ch['measured_median_s']:.4f} | "
                     f"{ch['predicted_s']:.4f} |")
    return "\n".join(lines) + "\n"
