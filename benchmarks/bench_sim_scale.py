"""The five policies side by side in the simulator from 12 to 10,000 machines, under churn.

    python benchmarks/bench_sim_scale.py [--quick] [--sizes 12,100,1000,10000] [--steps 30,30,30,10]
                                         [--out DIR]

``usctec-auto`` (the default), ``usctec``, ``usctec-pull``, ``dynamic`` and ``proportional`` on
one seeded trace per size: ``N`` machines with persistent speeds 1..4 (evenly spread), each
machine independently 5x slower with probability 2% per step, and the churn script's random
events per machine and step (1% leave, 1% crash mid-step, 2% join; joiners' speeds 1..4),
``L = 4, S = 2``, every machine storing ``min(1, 3 (L+S) / N)`` of the rows (``100 N`` rows),
the ideal step 357 ms at every size (``time_scale = 0.357 s`` times the sum of the speeds), the
runtime's deadline 3.0, learning on.  30 steps at ``N <= 1000``, 10 at 10,000 (quick: 12 and
100, 5 steps); ``--steps`` sets the steps per size (a goal counts only at its own step count).

Each size runs twice on the same trace: with the pure compute model and with the calibrated
runtime cost (``runtime_cost.json``, ``python -m benchmarks calibrate``; its defaults when
missing), without its host floor (``host_cpus`` 0: ``N`` machines do not share one host's
cores; the driver's and the workers' own costs stay).  Per policy: the median step, its ratio to
``dynamic``'s, and the growth of the median from the smallest size.  The simulator's own wall time
per size is measured (goals: ``N = 1,000`` for 30 steps under 3 minutes, ``N = 10,000`` for 10 steps
under 2 minutes, each run; the table says "no" where missed).  Writes ``sim_scale.json`` and
``sim_scale.md``.  Wall times on a shared host are noisy.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import ints, machine, parser, publish, row, table, yes  # noqa: E402

POLICIES = ("usctec-auto", "usctec", "usctec-pull", "dynamic", "proportional")
L, S = 4, 2
IDEAL_S = 0.357
GOALS = {1000: (30, 180.0), 10000: (10, 120.0)}


def _steps(N: int) -> int:
    return 10 if N >= 10000 else 30


def _storage(N: int) -> float:
    return min(1.0, 3 * (L + S) / N)


def one_size(N: int, steps: int, cost, seed: int = 7) -> dict:
    from elastic_coded.churn import ChurnScript, RandomChurn
    from elastic_coded.sim import IIDStragglers, LinearSpeeds, make_trace, simulate

    st = _storage(N)
    churn = ChurnScript(random=RandomChurn(
        leave=0.01, crash=0.01, join=0.02, per_machine=True, join_speed=(1.0, 4.0),
        join_storage=st, min_machines=L + S + 2), seed=seed)
    t0 = time.perf_counter()
    trace = make_trace(N, steps, L, S, delays=IIDStragglers(p=0.02, factor=5),
                       speeds=LinearSpeeds(1.0, 4.0), churn=churn, seed=seed, storage=st)
    ts = IDEAL_S * float(trace.configured[:N].sum())
    out = {"N": N, "steps": steps, "storage": st, "time_scale": ts, "counts": trace.counts()}
    for label, c in (("compute", None), ("cost", cost)):
        t1 = time.perf_counter()
        pols = POLICIES
        res = simulate(trace=trace, L=L, S=S, policies=pols, time_scale=ts,
                       baseline="dynamic", deadline=3.0, learn_speeds=True, cost=c,
                       design_samples=2 if N >= 1000 else 8)
        out[label] = {"wall_s": time.perf_counter() - t1, "sim_wall": res.wall,
                      "policies": {p: {"median_s": res.summary[p]["median"],
                                       "mean_s": res.summary[p]["mean"],
                                       "vs_dynamic": res.summary[p]["ratio_median"],
                                       "lost": res.summary[p]["lost"],
                                       "replans": res.summary[p]["replans"],
                                       "plan_ms": res.summary[p]["plan_ms"]}
                                   for p in pols}}
        modes = res.details["usctec-auto"]["mode"]
        out[label]["auto_modes"] = {m: int(np.count_nonzero(modes == k))
                                    for m, k in (("pull", 0), ("eager", 1), ("lean", 2))}
        print(f"  N={N} ({label}): {out[label]['wall_s']:.1f} s", flush=True)
    out["wall_s"] = time.perf_counter() - t0
    goal = GOALS.get(N)
    out["goal_s"] = goal[1] if goal and steps >= goal[0] else None
    out["met_runs"] = None if out["goal_s"] is None else \
        {label: out[label]["wall_s"] <= out["goal_s"] and len(out[label]["policies"]) ==
         len(POLICIES) for label in ("compute", "cost")}   # a policy left out: not met
    out["met"] = None if out["goal_s"] is None else \
        out["wall_s"] <= out["goal_s"] and all(out["met_runs"].values())
    return out


def growth(res: dict) -> None:
    """Each policy's median over its median at the smallest size."""
    first = res["sizes"][0]
    for sz in res["sizes"]:
        for label in ("compute", "cost"):
            for p, r in sz[label]["policies"].items():
                r["growth"] = r["median_s"] / first[label]["policies"][p]["median_s"]


def to_markdown(res: dict) -> str:
    c = res["cost"]
    lines = [f"# The policies at scale in the simulator ({res['tag']})", "",
             f"Speeds 1..4, 2% of the machines 5x slower per step, churn per machine and step "
             f"1% leave / 1% crash / 2% join, L={L}, S={S}, ideal step {IDEAL_S * 1e3:.0f} ms at "
             f"every size, deadline 3.0, learning on.  Cost: {res['cost_source']} (step "
             f"{1e3 * c['step_s']:.1f} ms, call {1e3 * c['call_s']:.2f} ms, result "
             f"{1e3 * c['round_trip_s']:.2f} ms, plan {1e3 * c['plan_s']:.1f} ms, worker "
             f"{1e3 * c['worker_call_s']:.2f} ms, per machine present "
             f"{1e3 * c.get('machine_s', 0.0):.2f} ms a step and, in a pull step, "
             f"{1e3 * c.get('scan_s', 0.0):.4f} ms per machine present at every event, "
             f"{1e3 * c.get('decide_s', 0.0):.3f} ms per decision of the coded queue).  Wall "
             f"times on a shared host (noisy).  "
             f"Command: `{res['command']}`.", "",
             "A goal is met per run (one run: the five policies side by side on the trace) and "
             "for both runs together.", "",
             *table("N | steps | compute run | cost run | both runs | goal | met per run "
                    "(compute / cost) | met, both | churn events", "rrrrrrccr")]
    for sz in res["sizes"]:
        ev = sz["counts"]
        goal = "-" if sz["goal_s"] is None else f"{sz['goal_s']:.0f} s"
        yn = (lambda v: "-" if v is None else yes(v))
        runs = sz.get("met_runs") or {}
        per = "-" if not runs else f"{yn(runs['compute'])} / {yn(runs['cost'])}"
        lines.append(row([sz["N"], sz["steps"], *(f"{w:.1f} s" for w in (
            sz["compute"]["wall_s"], sz["cost"]["wall_s"], sz["wall_s"])), goal, per,
            yn(sz["met"]), ev["joins"] + ev["leaves"] + ev["crashes"]]))
    for label, title in (("compute", "pure compute model"), ("cost", "with the runtime cost")):
        lines += ["", f"## Median step, {title}", "", *table(["N", *POLICIES], "r")]
        for sz in res["sizes"]:
            lines.append(row([sz["N"], *(f"{r['median_s']:.3f} s ({r['vs_dynamic']:.2f}x dyn, "
                                         f"{r['growth']:.2f}x N={res['sizes'][0]['N']})"
                                         for r in (sz[label]["policies"][p] for p in POLICIES))]))
    return "\n".join(lines) + "\n"


def run(quick: bool = False, out_dir: str | None = None, sizes=None, steps=None) -> dict:
    from bench_sim_fidelity import _cost

    sizes = sizes or ((12, 100) if quick else (12, 100, 1000, 10000))
    steps = steps or tuple(5 if quick else _steps(N) for N in sizes)
    if len(steps) != len(sizes):
        raise ValueError(f"steps: one count per size ({len(sizes)}), got {steps!r}")
    cost, source = _cost(None)
    cost = replace(cost, host_cpus=0)   # machines with their own cores (module docstring)
    cmd = " ".join(["python benchmarks/bench_sim_scale.py"] + sys.argv[1:])
    t0 = time.time()
    res = {"tag": "quick" if quick else "full", "command": cmd, "cost": cost.to_dict(),
           "cost_source": source,
           "sizes": [one_size(N, k, cost) for N, k in zip(sizes, steps)],
           "machine": machine()}
    growth(res)
    res["wall_s"] = time.time() - t0
    return publish(out_dir, "sim_scale" + ("_quick" if quick else ""), res, to_markdown(res))


if __name__ == "__main__":
    ap = parser(__doc__)
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--steps", default=None)
    a = ap.parse_args()
    run(a.quick, a.out, ints(a.sizes), ints(a.steps))
