"""Calibrate the simulator's runtime cost (:class:`elastic_coded.sim.RuntimeCost`) on this host.

    python -m benchmarks calibrate [--quick] [--out DIR]
    python benchmarks/calibrate.py [--quick] [--machines 8] [--out DIR]

A small real Ray run: ``M``, ``3 M`` and ``9 M`` emulated machines (speed 1) with a tiny
``time_scale``, so that a call's computation is a fraction of a millisecond and a step's time
is the runtime's own.

* ``plan_s``: the median of the reports' ``t_plan`` (the controller's planning, its round trip
  included);
* per call on the driver: ``dynamic`` steps with 1, 4 and 8 chunks per machine (one call per
  chunk, plus its backup copies), their medians fitted by ``t_step = a + b * calls``
  (least squares), at each size; ``b`` grows with the machines the pull loop looks at every
  event: ``scan_s`` is its growth per machine (a least-squares line through the sizes), and
  what is left at no machine is split into ``call_s`` (dispatching) and ``round_trip_s``
  (taking a result in) in the proportion plain Ray shows on this host (``8 M`` calls to one
  actor: the time to submit them against the time to get their results);
* ``machine_s``: the growth per machine of the median ``uncoded`` step from ``M`` to ``9 M``;
* ``worker_call_s``: the median of the reports' ``slowest_needed_s`` at ``M`` (the slowest
  needed call's time on its worker with next to nothing to compute, where the fewest
  processes share the cores: an upper estimate of the worker's own time per call);
* ``step_s``: the median ``uncoded`` step (one call per worker process) at ``M`` less
  ``plan_s``, ``M * machine_s``, its calls' ``call_s + round_trip_s`` and ``worker_call_s``;
* ``decide_s``: the driver's wall time in the coded pull queue's decisions over their count
  (``report.extra`` ``t_decide`` and ``decisions``), pooled over the ``usctec-pull`` steps of
  the host-CPU series below;
* the host floor (every process here shares the host's cores): the whole host's CPU
  (``/proc/stat``) of pull steps whose calls pause as real ones do (a second cluster per size,
  the ideal step ``PACED_S`` = 50 ms, the default deadline: ``dynamic`` at 2 and 8 chunks per
  machine and ``usctec-pull``, whose decoded pieces cancel the copies still running), one
  point per step, fitted by ``host_step_s +
  machines * host_machine_s + calls * host_call_s + cancelled * host_cancel_s`` (non-negative
  least squares over every size, the calls and cancellations from the reports), ``host_cpus``
  the host's cores.  Without ``/proc/stat`` there is no floor (``host_cpus`` 0).

The cost is checked against the ``dynamic`` steps: each point's measured median next to the
cost's prediction (the fixed cost, ``calls * (call_s + round_trip_s)``, ``worker_call_s``, or
the host floor where it is longer).  Writes ``runtime_cost.json`` (what ``RuntimeCost.load``
reads) and ``runtime_cost.md``.  Figures on a shared host are noisy.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from results_io import publish  # noqa: E402

TIME_SCALE = 1e-3
PACED_S = 0.05
"""The ideal step of the host-CPU series (calls that pause as real ones do)."""
CHUNKS = (1, 4, 8)


def _plain_ray_split(n_calls: int) -> float:
    """Of one call's driver cost in plain Ray, the share spent submitting it."""
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        def ping(self, x):
            return x

    a = Echo.remote()
    ray.get(a.ping.remote(0))
    x = np.zeros(64)
    shares = []
    for _ in range(3):
        t0 = time.perf_counter()
        refs = [a.ping.remote(x) for _ in range(n_calls)]
        t1 = time.perf_counter()
        for r in refs:
            ray.get(r)
        t2 = time.perf_counter()
        shares.append((t1 - t0) / max(1e-9, t2 - t0))
    ray.kill(a)
    return float(np.clip(np.median(shares), 0.05, 0.95))


def host_busy() -> float | None:
    """CPU seconds the whole host has spent busy (every process, every core) since boot, from
    ``/proc/stat``; ``None`` where it cannot be read."""
    try:
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def _steps(c, B, policy: str, steps: int, chunks=None) -> list:
    """``steps`` steps of ``policy``: ``[(report, host CPU seconds or None), ...]``."""
    from dataclasses import replace

    if chunks is not None:
        c.options = replace(c.options, chunks=chunks)
    out = []
    for _ in range(steps):
        h0 = host_busy()
        c.multiply(B, policy=policy)
        h1 = host_busy()
        out.append((c.reports[-1], None if h0 is None or h1 is None else h1 - h0))
    return out


def measure_at(machines: int, steps: int) -> dict:
    """``dynamic`` at 1, 4 and 8 chunks per machine and ``uncoded``, on ``machines``."""
    from elastic_coded.runtime import ElasticCluster

    rng = np.random.default_rng(0)
    A = rng.standard_normal((60 * machines, 20))
    B = rng.standard_normal((20, 8))
    ms = [{"id": f"m{i}", "speed": 1.0, "storage": 1.0} for i in range(machines)]
    rows = []
    # no step deadline: at this time scale 3x the median call is a fraction of a millisecond,
    # so its backups would be noise, not the cost of a step
    with ElasticCluster(A, "dynamic", L=4, S=2, machines=ms, time_scale=TIME_SCALE,
                        num_cpus=os.cpu_count(), deadline=None) as c:
        for p in ("uncoded", "dynamic"):
            _steps(c, B, p, 2, 4 if p == "dynamic" else None)  # warm-up
        for k in CHUNKS:
            got = _steps(c, B, "dynamic", steps, k)
            reps = [r for r, _ in got]
            calls = [k * machines + r.backups for r in reps]
            rows.append({"chunks_per_machine": k, "calls": float(np.median(calls)),
                         "cancelled": float(np.median([r.extra["cancelled"] for r in reps])),
                         "median_s": float(np.median([r.t_total for r in reps])),
                         "t_plan_s": float(np.median([r.t_plan for r in reps])),
                         "slowest_s": float(np.median([r.slowest_needed_s for r in reps]))})
        whole = [r for r, _ in _steps(c, B, "uncoded", steps)]
    x = np.array([r["calls"] for r in rows])
    y = np.array([r["median_s"] for r in rows])
    b, a = np.polyfit(x, y, 1) if len(set(x.tolist())) > 1 else (0.0, float(y.mean()))
    return {"machines": machines, "dynamic": rows, "host_steps": measure_host(machines, steps),
            "per_call_s": max(float(b), 0.0),
            "intercept_s": float(a), "uncoded_s": float(np.median([r.t_total for r in whole])),
            "t_plan_s": float(np.median([r["t_plan_s"] for r in rows] +
                                        [r.t_plan for r in whole]))}


def measure_host(machines: int, steps: int) -> list:
    """The host CPU of pull steps whose calls pause as real ones do (the ideal step
    ``PACED_S``, the default deadline): ``dynamic`` at 2 and 8 chunks per machine and
    ``usctec-pull`` (whose decoded pieces cancel the copies still running), one row per
    step with its calls and cancellations from the report."""
    from dataclasses import replace

    from elastic_coded.runtime import ElasticCluster

    rng = np.random.default_rng(1)
    A = rng.standard_normal((60 * machines, 20))
    B = rng.standard_normal((20, 8))
    ms = [{"id": f"m{i}", "speed": 1.0, "storage": 1.0} for i in range(machines)]
    out = []
    with ElasticCluster(A, "dynamic", L=4, S=2, machines=ms, time_scale=PACED_S * machines,
                        num_cpus=os.cpu_count()) as c:
        for policy, k in (("dynamic", 2), ("dynamic", 8), ("usctec-pull", None)):
            if k is not None:
                c.options = replace(c.options, chunks=k)
            _steps(c, B, policy, 1)  # warm-up
            out += [{"policy": policy, "chunks_per_machine": k,
                     "calls": float(r.extra["calls"]), "cancelled": float(r.extra["cancelled"]),
                     "decisions": float(r.extra.get("decisions", 0)),
                     "t_decide_s": float(r.extra.get("t_decide", 0.0)),
                     "host_cpu_s": h} for r, h in _steps(c, B, policy, steps)]
    return out


def measure(sizes=(8, 24), steps: int = 8) -> dict:
    """The cost from two or more cluster sizes (module docstring)."""
    import ray

    from elastic_coded.machines import per_process
    from elastic_coded.sim import RuntimeCost

    pts = [measure_at(M, steps) for M in sizes]
    share = _plain_ray_split(8 * sizes[0])
    lo, hi = pts[0], pts[-1]
    dM = max(1, hi["machines"] - lo["machines"])
    # the per-call cost grows with the machines the pull loop looks at, at every event: a
    # least-squares line through every size (two sizes alone let one noisy point set it)
    Ms = np.array([p["machines"] for p in pts], dtype=np.float64)
    scan, b0 = np.polyfit(Ms, [p["per_call_s"] for p in pts], 1)
    scan = max(0.0, float(scan))
    b0 = max(0.0, float(np.mean([p["per_call_s"] for p in pts]) - scan * Ms.mean()))
    hosted = per_process(None, TIME_SCALE)
    # the smallest size's: fewest processes share the cores there (the larger sizes' slowest
    # calls measure the host's contention, which the host floor charges)
    worker = float(np.median([r["slowest_s"] for r in pts[0]["dynamic"]]))
    host = _host_fit(pts)
    # the coded queue's decisions: their wall time on the driver over their count, pooled
    # over every usctec-pull step (the largest size, with the most decisions, weighs most)
    coded = [r for p in pts for r in p["host_steps"] if r["policy"] == "usctec-pull"]
    n_dec = sum(r["decisions"] for r in coded)
    decide = sum(r["t_decide_s"] for r in coded) / n_dec if n_dec else 0.0
    plan_s = float(np.median([p["t_plan_s"] for p in pts]))
    def calls_cost(M):
        return -(-M // hosted) * b0

    # a whole step's cost beyond its calls: step_s + M * machine_s through the two sizes (a
    # negative intercept is taken as 0, the slope then through the larger size)
    y = [p["uncoded_s"] - plan_s - calls_cost(p["machines"]) - worker for p in (lo, hi)]
    per_machine = max(0.0, (y[1] - y[0]) / dM)
    step_s = y[0] - per_machine * lo["machines"]
    if step_s < 0:
        step_s, per_machine = 0.0, max(0.0, y[1] / hi["machines"])
    cost = RuntimeCost(step_s=step_s, call_s=share * b0, round_trip_s=(1 - share) * b0,
                       plan_s=plan_s, worker_call_s=worker, per_process=hosted,
                       machine_s=per_machine, scan_s=scan, decide_s=decide,
                       **({"host_cpus": os.cpu_count() or 1, "host_step_s": host[0],
                           "host_machine_s": host[1], "host_call_s": host[2],
                           "host_cancel_s": host[3]} if host else {}))
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
            "time_scale": TIME_SCALE,
            "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
                     "ray": ray.__version__}}


def _host_fit(pts: list) -> tuple | None:
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


def to_markdown(res: dict, command: str) -> str:
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


def run(quick: bool = False, out_dir: str | None = None, machines: int = 8) -> dict:
    import ray

    out_dir = out_dir or os.path.join(HERE, "results")
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False,
                 log_to_driver=False)
    res = measure((4, 8) if quick else (machines, 3 * machines, 9 * machines), 3 if quick else 8)
    cmd = "python -m benchmarks calibrate" + (" --quick" if quick else "")
    name = "runtime_cost" + ("_quick" if quick else "")
    return publish(out_dir, name, res, to_markdown(res, cmd))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--machines", type=int, default=8)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    run(a.quick, a.out, a.machines)
