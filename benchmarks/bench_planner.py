"""USCTEC planner benchmarks: plan_step time vs N, and designed vs cyclic placement.

    python benchmarks/bench_planner.py [--quick]

Writes benchmarks/results/planner.json and planner.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from elastic_coded.schemes.usctec import (SpeedModel, cyclic_placement,  # noqa: E402
                                          design_placement, expected_time, plan_step, validate)

from results_io import write_results  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def bench_plan_step(sizes, L=4, S=2, repeats=5, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for N in sizes:
        pl = cyclic_placement(max(12 * N, 1200), range(N), L, S)
        times, vtimes = [], []
        for _ in range(repeats):
            s = rng.uniform(1, 4, N)
            t = time.perf_counter()
            plan = plan_step(pl, range(N), s, L, S)
            times.append(time.perf_counter() - t)
            t = time.perf_counter()
            validate(plan, pl)
            vtimes.append(time.perf_counter() - t)
        rows.append({"N": N, "plan_ms_median": 1000 * float(np.median(times)),
                     "plan_ms_max": 1000 * float(np.max(times)),
                     "validate_ms_median": 1000 * float(np.median(vtimes)),
                     "groups": len(plan.groups), "c": plan.c, "c_int": plan.c_int})
        print(f"plan_step N={N:5d}: {rows[-1]['plan_ms_median']:8.1f} ms "
              f"(validate {rows[-1]['validate_ms_median']:.1f} ms)", flush=True)
    return rows


def bench_design(ratios, N=12, L=4, S=2, samples=64, eval_samples=400, seed=0):
    """Designed vs cyclic placement, expected computation time E[c] (MATH.md §1) on speeds with
    half the machines ``ratio`` times faster, 10% stragglers slowed 5x.  Two storage settings:
    equal total storage (every row stored exactly L+S times, budgets up to 2(L+S)/N per machine)
    and full budgets e = 2(L+S)/N (the design may replicate more)."""
    K = L + S
    rows = []
    for ratio in ratios:
        base = tuple([1.0] * (N // 2) + [float(ratio)] * (N - N // 2))
        model = SpeedModel(base, straggle_prob=0.1, straggle_factor=5.0)
        budgets = [min(1.0, 2 * K / N)] * N
        cyc = cyclic_placement(1200, range(N), L, S, budgets=budgets)
        eq = design_placement(1200, range(N), budgets, model, L, S, samples=samples, seed=seed,
                              max_extra_replication=0)
        full = design_placement(1200, range(N), budgets, model, L, S, samples=samples,
                                seed=seed)
        # evaluate on fresh samples, not the ones the design was chosen on
        ev = dict(samples=eval_samples, seed=seed + 1000)
        e_cyc = expected_time(cyc, model, L, S, **ev)
        e_eq = expected_time(eq, model, L, S, **ev)
        e_full = expected_time(full, model, L, S, **ev)
        rows.append({"speed_ratio": ratio, "cyclic": e_cyc, "design_equal_storage": e_eq,
                     "design_full_budget": e_full, "ratio_equal_storage": e_eq / e_cyc,
                     "ratio_full_budget": e_full / e_cyc,
                     "storage_cyclic": sum(cyc.stored_rows(m) for m in range(N)) / 1200,
                     "storage_equal": sum(eq.stored_rows(m) for m in range(N)) / 1200,
                     "storage_full": sum(full.stored_rows(m) for m in range(N)) / 1200})
        print(f"design ratio {ratio}: cyclic {e_cyc:.4f}, design (equal storage) {e_eq:.4f} "
              f"({e_eq / e_cyc:.2f}x), design (full budget) {e_full:.4f} ({e_full / e_cyc:.2f}x)",
              flush=True)
    return rows


def to_markdown(res) -> str:
    out = ["# USCTEC planner benchmarks", "",
           f"Machine: {res['machine']['cpus']} CPUs, Python {res['machine']['python']}, "
           f"numpy {res['machine']['numpy']}. Command: `python benchmarks/bench_planner.py"
           f"{' --quick' if res['quick'] else ''}`.", "",
           "## plan_step time (cyclic placement, L=4, S=2, speeds U(1,4))", "",
           "| N | plan_step median (ms) | max (ms) | validate (ms) | groups |",
           "|---:|---:|---:|---:|---:|"]
    for r in res["plan_step"]:
        out.append(f"| {r['N']} | {r['plan_ms_median']:.1f} | {r['plan_ms_max']:.1f} | "
                   f"{r['validate_ms_median']:.1f} | {r['groups']} |")
    out += ["", "Target: under 200 ms at N = 1000.", "",
            "## Designed vs cyclic placement: E[c] (lower is better), N=12, L=4, S=2", "",
            "Half the machines are `ratio` times faster; 10% stragglers slowed 5x. Budgets "
            "e = 2(L+S)/N = 1.0 per machine. *Equal storage*: the design stores every row exactly "
            "L+S times, like cyclic. *Full budget*: the design may use more replication.", "",
            "| speed ratio | cyclic | design, equal storage | ratio | design, full budget | ratio |",
            "|---:|---:|---:|---:|---:|---:|"]
    for r in res["design"]:
        out.append(f"| {r['speed_ratio']} | {r['cyclic']:.4f} | {r['design_equal_storage']:.4f} | "
                   f"{r['ratio_equal_storage']:.2f}x | {r['design_full_budget']:.4f} | "
                   f"{r['ratio_full_budget']:.2f}x |")
    return "\n".join(out) + "\n"


def run(quick: bool = False, out_dir: str | None = None) -> dict:
    out_dir = out_dir or os.path.join(HERE, "results")
    os.makedirs(out_dir, exist_ok=True)
    sizes = [10, 100, 500, 1000] if quick else [10, 50, 100, 200, 500, 1000, 2000]
    res = {
        "quick": quick,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "numpy": np.__version__},
        "plan_step": bench_plan_step(sizes, repeats=3 if quick else 5),
        "design": bench_design([1, 2, 4, 8], samples=16 if quick else 64,
                               eval_samples=100 if quick else 400),
    }
    md = to_markdown(res)
    write_results(out_dir, "planner", res, md)
    print(md)
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    run(a.quick, a.out)
