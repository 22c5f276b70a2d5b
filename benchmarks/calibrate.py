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

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import machine, parser, publish, start_ray  # noqa: E402

from elastic_coded.sim.calibration import (  # noqa: E402
    TIME_SCALE,
    fit,
    host_busy,
    to_markdown,
)

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
    """The cost from two or more cluster sizes (module docstring;
    :func:`elastic_coded.sim.calibration.fit`)."""
    pts = [measure_at(M, steps) for M in sizes]
    share = _plain_ray_split(8 * sizes[0])
    res = fit(pts, share, tuple(sizes), steps, TIME_SCALE)
    res["host"] = machine("ray")
    return res


def run(quick: bool = False, out_dir: str | None = None, machines: int = 8) -> dict:
    start_ray()
    res = measure((4, 8) if quick else (machines, 3 * machines, 9 * machines), 3 if quick else 8)
    cmd = "python -m benchmarks calibrate" + (" --quick" if quick else "")
    name = "runtime_cost" + ("_quick" if quick else "")
    return publish(out_dir, name, res, to_markdown(res, cmd))


if __name__ == "__main__":
    ap = parser(__doc__)
    ap.add_argument("--machines", type=int, default=8)
    a = ap.parse_args()
    run(a.quick, a.out, a.machines)
