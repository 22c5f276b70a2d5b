"""Past one driver, in the simulator: the step on one level against two (agents of ``group``
machines between the driver and the machines; ``RuntimeCost.two_level``).

    python benchmarks/bench_two_level.py [--quick] [--sizes 1000,10000] [--steps 8,10]
                                         [--groups 16,32,64] [--out DIR]

The setting of the issue that asked for it: ``N`` machines with speeds 1..4 (evenly spread),
each 5x slower with probability 2% per step, ``L = 4, S = 2``, every machine storing
``min(1, 3 (L+S) / N)`` of the rows, the ideal step 357 ms, deadline 3.0, learning on, no
churn.  Per size, on one seeded trace: the pure compute model, the calibrated runtime cost
(``runtime_cost.json``; machines with their own cores, ``host_cpus`` 0) on one level, and the
same figures on two levels for each ``group`` (the agents pay what the driver paid per machine,
the driver ``round_trip_s`` per agent message and ``merge_s = 0`` per result in one: the
agents sum their share of the decode).  The two levels are a model of a design the runtime
does not have yet.  Per policy: the median step, its ratio to the pure compute's median (the
goals: ``usctec-auto`` <= 1.3x and ``usctec-pull`` <= 2.0x at 1,000; <= 1.5x and <= 2.5x at
10,000), and the driver's messages per pull step.  Writes ``two_level.json`` and
``two_level.md`` (quick: 100 machines, 3 steps, groups of 8, ``two_level_quick``).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import ints, parser, publish, row, table, yes  # noqa: E402

POLICIES = ("usctec-auto", "usctec-pull")
L, S, IDEAL_S = 4, 2, 0.357
GOALS = {1000: {"usctec-auto": 1.3, "usctec-pull": 2.0},
         10000: {"usctec-auto": 1.5, "usctec-pull": 2.5}}


def one_size(N: int, steps: int, groups, cost, seed: int = 7) -> dict:
    from elastic_coded.sim import IIDStragglers, LinearSpeeds, make_trace, simulate

    st = min(1.0, 3 * (L + S) / N)
    trace = make_trace(N, steps, L, S, delays=IIDStragglers(p=0.02, factor=5),
                       speeds=LinearSpeeds(1.0, 4.0), seed=seed, storage=st)
    ts = IDEAL_S * float(trace.configured[:N].sum())
    out: dict = {"N": N, "steps": steps, "runs": {}}
    for label, c in [("pure", None), ("one level", cost)] + [
            (f"two levels, {g} a group", cost.two_level(g)) for g in groups]:
        t0 = time.perf_counter()
        res = simulate(trace=trace, L=L, S=S, policies=POLICIES, time_scale=ts, baseline=None,
                       deadline=3.0, learn_speeds=True, cost=c, design_samples=2)
        pull = res.details["usctec-pull"]
        out["runs"][label] = {
            "wall_s": time.perf_counter() - t0,
            "median_s": {p: res.summary[p]["median"] for p in POLICIES},
            "pull_messages": float(np.median(pull["messages"])) if "messages" in pull else None,
            "pull_calls": float(np.median(pull["calls"]))}
        print(f"  N={N} {label}: {out['runs'][label]['wall_s']:.0f} s", flush=True)
    pure = out["runs"]["pure"]["median_s"]
    for label, r in out["runs"].items():
        r["ratio"] = {p: r["median_s"][p] / pure[p] for p in POLICIES}
        goal = GOALS.get(N)
        r["met"] = None if goal is None or label == "pure" else {
            p: r["ratio"][p] <= goal[p] for p in POLICIES}
    return out


def to_markdown(res: dict) -> str:
    lines = ["# Past one driver: one level against two (simulated)", "",
             f"Speeds 1..4, 2% of the machines 5x slower per step, L={L}, S={S}, ideal step "
             f"{IDEAL_S * 1e3:.0f} ms, deadline 3.0, learning on, no churn; cost: "
             f"{res['cost_source']} with host_cpus 0.  The two levels are a model (the runtime "
             f"has one level).  Command: `{res['command']}`.", "",
             *table("N | steps | run | usctec-auto | usctec-pull | goal met (auto / pull) | "
                    "driver messages per pull step (calls) | wall", "rrlrrcrr")]
    for sz in res["sizes"]:
        for label, r in sz["runs"].items():
            cells = [f"{r['median_s'][p]:.3f} s ({r['ratio'][p]:.2f}x)" for p in POLICIES]
            met = "-" if r["met"] is None else " / ".join(yes(r["met"][p]) for p in POLICIES)
            msgs = "-" if r["pull_messages"] is None else f"{r['pull_messages']:.0f}"
            lines.append(row([sz["N"], sz["steps"], label, *cells, met,
                              f"{msgs} ({r['pull_calls']:.0f})", f"{r['wall_s']:.0f} s"]))
    return "\n".join(lines) + "\n"


def run(quick: bool = False, out_dir: str | None = None, sizes=None, steps=None,
        groups=None) -> dict:
    from bench_sim_fidelity import _cost

    sizes = sizes or ((100,) if quick else (1000, 10000))
    steps = steps or ((3,) if quick else (8, 10))
    groups = groups or ((8,) if quick else (16, 32, 64))
    if len(steps) != len(sizes):
        raise ValueError(f"steps: one count per size ({len(sizes)}), got {steps!r}")
    cost, source = _cost(None)
    cost = replace(cost, host_cpus=0)
    res = {"command": " ".join(["python benchmarks/bench_two_level.py"] + sys.argv[1:]),
           "cost": cost.to_dict(), "cost_source": source, "groups": list(groups),
           "sizes": [one_size(N, k, groups, cost) for N, k in zip(sizes, steps)]}
    return publish(out_dir, "two_level" + ("_quick" if quick else ""), res, to_markdown(res))


if __name__ == "__main__":
    ap = parser(__doc__)
    for flag in ("--sizes", "--steps", "--groups"):
        ap.add_argument(flag, default=None)
    a = ap.parse_args()
    run(a.quick, a.out, ints(a.sizes), ints(a.steps), ints(a.groups))
