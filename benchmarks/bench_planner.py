"""USCTEC planner benchmarks: integer rounding against the integer optimum, water-filling
precision, plan_step time vs N, and designed vs cyclic placement.

    python benchmarks/bench_planner.py [--quick]

Writes benchmarks/results/planner.json and planner.md.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import machine, parser, publish, table  # noqa: E402

from elastic_coded.families.usctec import (  # noqa: E402
    SpeedModel,
    cyclic_placement,
    design_placement,
    expected_time,
    fill,
    filled_placement,
    integer_optimum,
    optimal_load,
    plan_step,
    validate,
)
from elastic_coded.families.usctec._fractional import _present_atoms, _step_lp  # noqa: E402
from elastic_coded.families.usctec._layout import _cum_round  # noqa: E402
from elastic_coded.schemes.plan import Placement, RowBlock  # noqa: E402


# ------------------------------------------------------------------------------------------------
# rounding quality
# ------------------------------------------------------------------------------------------------
def _instance(rng, q):
    """A random step: N <= 60 machines, K = L+S <= 12, log-normal (sigma 1) speeds, and one of
    four placements: full storage, filled (replication K..K+3), random blocks on random
    holder sets, and random blocks with some holders away."""
    K = int(rng.integers(1, 13))
    L = int(rng.integers(1, K + 1))
    N = int(rng.integers(K + 1, 61))
    kind = ("full", "filled", "random", "partial")[int(rng.integers(4))]
    avail = list(range(N))
    if kind == "full":
        pl = Placement(q, tuple(avail), (1.0,) * N, (RowBlock(0, q, tuple(avail)),))
    elif kind == "filled":
        R = int(rng.integers(K, min(N, K + 3) + 1))
        shares, _ = optimal_load(rng.lognormal(0, 0.5, N), R, 0)
        pl = filled_placement(q, avail, shares, R, [1.0] * N)
    else:
        cuts = sorted(rng.choice(np.arange(1, q), size=int(rng.integers(0, 12)), replace=False))
        edges = [0, *[int(c) for c in cuts], q]
        pool = [tuple(sorted(rng.choice(N, size=int(rng.integers(K, min(N, 3 * K) + 1)),
                                        replace=False).tolist())) for _ in range(6)]
        pl = Placement(q, tuple(avail), (1.0,) * N, tuple(
            RowBlock(a, b, pool[int(rng.integers(6))]) for a, b in zip(edges[:-1], edges[1:])))
        if kind == "partial":
            for m in rng.permutation(N)[: N // 3].tolist():
                if len(avail) > K and all(len(b.holders) > K for b in pl.blocks if m in b.holders):
                    avail.remove(m)
                    pl = Placement(q, pl.machines, pl.budgets, tuple(
                        RowBlock(b.start, b.stop, tuple(h for h in b.holders if h != m))
                        for b in pl.blocks))
    return pl, avail, rng.lognormal(0.0, 1.0, len(avail)), L, K - L, kind


def _cumulative_c_int(pl, avail, speeds, L, S) -> float:
    """``c_int`` of the rounding used before: each atom's fractional loads filled into groups,
    rows cut by cumulative rounding of the groups' fractions."""
    K, q = L + S, pl.num_rows
    idx = {m: i for i, m in enumerate(avail)}
    holders, w, atoms = _present_atoms(pl, idx, K)
    _, xs = _step_lp(holders, w, np.asarray(speeds), K)
    rows = np.zeros(len(avail))
    for h, wa, x, bs in zip(holders, w, xs, atoms):
        local = np.clip(x / wa, 0, 1)
        groups = fill(local * K / local.sum(), K, tol=1e-10)
        for (_, U), size in zip(groups, _cum_round(sum(b.size for b in bs),
                                                   [g for g, _ in groups])):
            rows[[h[i] for i in U]] += size
    return float(np.max(rows / (q * np.asarray(speeds))))


def _dist(xs) -> dict:
    a = np.asarray(xs)
    return {"median": float(np.median(a)), "p90": float(np.quantile(a, 0.9)),
            "p99": float(np.quantile(a, 0.99)), "max": float(a.max())}


def bench_rounding(qs=(100, 1000), instances=60, seed=0):
    """``c_int`` of plan_step and of the previous cumulative rounding, over the integer optimum
    (a MILP, :func:`integer_optimum`), on the same random instances."""
    out = []
    for q in qs:
        rng = np.random.default_rng(seed + q)
        ours, cum, over_c, plan_ms, worst, by_kind = [], [], [], [], None, {}
        for _ in range(instances):
            pl, avail, s, L, S, kind = _instance(rng, q)
            t = time.process_time()
            plan = plan_step(pl, avail, s, L, S)
            plan_ms.append(1000 * (time.process_time() - t))
            validate(plan, pl)
            opt = integer_optimum(pl, avail, s, L, S)
            ours.append(plan.c_int / opt)
            cum.append(_cumulative_c_int(pl, avail, s, L, S) / opt)
            over_c.append(plan.c_int / plan.c)
            k = by_kind.setdefault(kind, {"instances": 0, "ours_max": 1.0, "cumulative_max": 1.0})
            k["instances"] += 1
            k["ours_max"] = max(k["ours_max"], ours[-1])
            k["cumulative_max"] = max(k["cumulative_max"], cum[-1])
            if worst is None or ours[-1] > worst["ratio"]:
                worst = {"ratio": ours[-1], "kind": kind, "N": len(avail), "L": L, "S": S}
        out.append({"q": q, "instances": instances, "ours_over_opt": _dist(ours),
                    "cumulative_over_opt": _dist(cum), "ours_over_c": _dist(over_c),
                    "worst": worst, "plan_ms": _dist(plan_ms), "by_kind": by_kind})
        print(f"rounding q={q}: c_int/opt max {max(ours):.6f} (cumulative rounding: max "
              f"{max(cum):.3f}, median {np.median(cum):.4f})", flush=True)
    return out


# ------------------------------------------------------------------------------------------------
# water-filling precision
# ------------------------------------------------------------------------------------------------
def bench_water_filling(trials=2000, seed=0):
    """``|sum theta - (L+S)| / (L+S)`` for speeds log-uniform over 1e-5..1e5 (spreads up to
    1e10), with and without caps; every theta must fill and every full-storage plan must pass."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    fills = plans = 0
    for t in range(trials):
        N = int(rng.integers(2, 201))
        K = int(rng.integers(1, min(N, 12) + 1))
        L = int(rng.integers(1, K + 1))
        s = 10.0 ** rng.uniform(-5, 5, N)
        caps = None
        if t % 2:
            caps = np.minimum(1.0, rng.uniform(0, 1, N) * K / 0.5 / N)
            if caps.sum() < K:
                caps = None
        theta, _ = optimal_load(s, L, K - L, caps=caps)
        worst = max(worst, abs(math.fsum(theta) - K) / K)
        fill(theta, K)
        fills += 1
        if t % 10 == 0:
            pl = Placement(100, tuple(range(N)), (1.0,) * N, (RowBlock(0, 100, tuple(range(N))),))
            validate(plan_step(pl, range(N), s, L, K - L), pl)
            plans += 1
    print(f"water-filling: max |sum theta - (L+S)|/(L+S) = {worst:.2e} over {trials} trials",
          flush=True)
    return {"trials": trials, "max_rel_error": worst, "fills_ok": fills, "plans_ok": plans}


# ------------------------------------------------------------------------------------------------
# planning time
# ------------------------------------------------------------------------------------------------
def _time_plans(pl, N, L, S, rng, repeats):
    wall, cpu = [], []
    for _ in range(repeats):
        s = rng.uniform(1, 4, N)
        t0, c0 = time.perf_counter(), time.process_time()
        plan = plan_step(pl, range(N), s, L, S)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    t = time.perf_counter()
    validate(plan, pl)
    v = time.perf_counter() - t
    return {"N": N, "plan_ms_median": 1000 * float(np.median(wall)),
            "plan_ms_max": 1000 * float(np.max(wall)),
            "cpu_ms_median": 1000 * float(np.median(cpu)),
            "validate_ms": 1000 * v, "blocks": len(pl.blocks), "groups": len(plan.groups),
            "c": plan.c, "c_int": plan.c_int}


def bench_plan_step(sizes, L=4, S=2, repeats=5, seed=0):
    """plan_step time on the cyclic placement (every block on exactly L+S machines) and on a
    filled placement with replication L+S+1 (shares from speeds U(1,4); the LP and the
    max-flow search both run); q = max(12 N, 1200) rows, speeds U(1,4)."""
    rng = np.random.default_rng(seed)
    cyc, filled = [], []
    for N in sizes:
        q = max(12 * N, 1200)
        cyc.append(_time_plans(cyclic_placement(q, range(N), L, S), N, L, S, rng, repeats))
        shares, _ = optimal_load(rng.uniform(1, 4, N), L + S + 1, 0)
        pl = filled_placement(q, range(N), shares, L + S + 1, [1.0] * N)
        filled.append(_time_plans(pl, N, L, S, rng, repeats))
        print(f"plan_step N={N:5d}: cyclic {cyc[-1]['plan_ms_median']:7.1f} ms "
              f"(cpu {cyc[-1]['cpu_ms_median']:.1f}), filled {filled[-1]['plan_ms_median']:7.1f} "
              f"ms (cpu {filled[-1]['cpu_ms_median']:.1f})", flush=True)
    return cyc, filled


# ------------------------------------------------------------------------------------------------
# designed vs cyclic placement
# ------------------------------------------------------------------------------------------------
def bench_design(ratios, N=12, L=4, S=2, samples=64, eval_samples=400, seed=0):
    """Designed vs cyclic placement, expected computation time E[c] (MATH.md §1) on speeds with
    half the machines ``ratio`` times faster, 10% stragglers slowed 5x.  Two storage settings:
    equal total storage (every row stored exactly L+S times, budgets up to 2(L+S)/N per machine)
    and full budgets e = 2(L+S)/N (the design may replicate more)."""
    rows = []
    for ratio in ratios:
        base = tuple([1.0] * (N // 2) + [float(ratio)] * (N - N // 2))
        model = SpeedModel(base, straggle_prob=0.1, straggle_factor=5.0)
        budgets = [min(1.0, 2 * (L + S) / N)] * N
        cyc = cyclic_placement(1200, range(N), L, S, budgets=budgets)
        eq = design_placement(1200, range(N), budgets, model, L, S, samples=samples, seed=seed,
                              max_extra_replication=0)
        full = design_placement(1200, range(N), budgets, model, L, S, samples=samples,
                                seed=seed)
        # evaluate on fresh samples, not the ones the design was chosen on
        ev = dict(samples=eval_samples, seed=seed + 1000)
        e_cyc, e_eq, e_full = (expected_time(p, model, L, S, **ev) for p in (cyc, eq, full))
        rows.append({"speed_ratio": ratio, "cyclic": e_cyc, "design_equal_storage": e_eq,
                     "design_full_budget": e_full, "ratio_equal_storage": e_eq / e_cyc,
                     "ratio_full_budget": e_full / e_cyc,
                     **{f"storage_{k}": sum(p.stored_rows(m) for m in range(N)) / 1200
                        for k, p in (("cyclic", cyc), ("equal", eq), ("full", full))}})
        print(f"design ratio {ratio}: cyclic {e_cyc:.4f}, design (equal storage) {e_eq:.4f} "
              f"({e_eq / e_cyc:.2f}x), design (full budget) {e_full:.4f} ({e_full / e_cyc:.2f}x)",
              flush=True)
    return rows


# ------------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------------
def _md_rounding(res) -> list[str]:
    out = ["## Integer rounding: c_int over the integer optimum", "",
           f"{res['rounding'][0]['instances']} random steps per row count q: N <= 60 machines, "
           "L+S <= 12, speeds log-normal (sigma 1); full storage, filled (replication L+S..L+S+3),"
           " random blocks, and random blocks with holders away. The integer optimum is a MILP "
           "over integer rows per (block, machine), solved by HiGHS (`integer_optimum`). "
           "*Cumulative*: the rounding used before (fill each atom, cut rows by cumulative "
           "rounding of the group fractions).", "",
           *table("q | plan_step: median | p90 | max | cumulative: median | p90 | max | "
                  "c_int / c (max) | plan_step ms (median / max)", "r")]
    for r in res["rounding"]:
        o, c = r["ours_over_opt"], r["cumulative_over_opt"]
        out.append(f"| {r['q']} | {o['median']:.6f} | {o['p90']:.6f} | {o['max']:.6f} | "
                   f"{c['median']:.4f} | {c['p90']:.4f} | {c['max']:.3f} | "
                   f"{r['ours_over_c']['max']:.3f} | {r['plan_ms']['median']:.1f} / "
                   f"{r['plan_ms']['max']:.1f} |")
    out += ["", "Worst ratio by placement (plan_step / cumulative):", ""]
    for r in res["rounding"]:
        out.append(f"- q = {r['q']}: " + ", ".join(
            f"{kind} ({k['instances']}) {k['ours_max']:.6f} / {k['cumulative_max']:.3f}"
            for kind, k in sorted(r["by_kind"].items())))
    wf = res["water_filling"]
    out += ["", "Targets: within 2% of the integer optimum at q = 1000, 5% at q = 100.", "",
            "## Water-filling precision", "",
            f"{wf['trials']} trials, N = 2..200, L+S <= 12, speeds log-uniform over 1e-5..1e5 "
            f"(spreads up to 1e10), caps on half: max |sum theta - (L+S)| / (L+S) = "
            f"{wf['max_rel_error']:.2e} (target 1e-12); {wf['fills_ok']} fills and "
            f"{wf['plans_ok']} full-storage plans, none refused.", ""]
    return out


def _md_plan_step(res) -> list[str]:
    out = ["## plan_step time (L=4, S=2, speeds U(1,4), q = max(12 N, 1200) rows)", "",
           "Wall time (median of the repeats; this machine's 2 cores are shared, so CPU time is "
           "given too). *Cyclic*: every block on exactly L+S machines (no LP, nothing to round). "
           "*Filled*: replication L+S+1, so the LP and the max-flow search both run.", "",
           *table("N | cyclic: wall ms | cpu ms | groups | filled: wall ms | cpu ms | blocks | "
                  "groups | c_int / c | validate ms", "r")]
    for c, f in zip(res["plan_step"], res["plan_step_filled"]):
        out.append(f"| {c['N']} | {c['plan_ms_median']:.1f} | {c['cpu_ms_median']:.1f} | "
                   f"{c['groups']} | {f['plan_ms_median']:.1f} | {f['cpu_ms_median']:.1f} | "
                   f"{f['blocks']} | {f['groups']} | {f['c_int'] / f['c']:.4f} | "
                   f"{f['validate_ms']:.1f} |")
    out += ["", "Targets: under 200 ms at N = 1000, under 1 s at N = 10,000.", ""]
    return out


def to_markdown(res) -> str:
    out = ["# USCTEC planner benchmarks", "",
           f"Machine: {res['machine']['cpus']} CPUs, Python {res['machine']['python']}, "
           f"numpy {res['machine']['numpy']}. Command: `python benchmarks/bench_planner.py"
           f"{' --quick' if res['quick'] else ''}`.", ""]
    out += _md_rounding(res) + _md_plan_step(res)
    out += ["## Designed vs cyclic placement: E[c] (lower is better), N=12, L=4, S=2", "",
            "Half the machines are `ratio` times faster; 10% stragglers slowed 5x. Budgets "
            "e = 2(L+S)/N = 1.0 per machine. *Equal storage*: the design stores every row exactly "
            "L+S times, like cyclic. *Full budget*: the design may use more replication.", "",
            *table("speed ratio | cyclic | design, equal storage | ratio | design, full budget "
                   "| ratio", "r")]
    for r in res["design"]:
        out.append(f"| {r['speed_ratio']} | {r['cyclic']:.4f} | {r['design_equal_storage']:.4f} | "
                   f"{r['ratio_equal_storage']:.2f}x | {r['design_full_budget']:.4f} | "
                   f"{r['ratio_full_budget']:.2f}x |")
    return "\n".join(out) + "\n"


def run(quick: bool = False, out_dir: str | None = None) -> dict:
    sizes = [100, 1000, 2000] if quick else [100, 1000, 2000, 5000, 10000]
    t0 = time.perf_counter()
    cyc, filled = bench_plan_step(sizes, repeats=3 if quick else 5)
    res = {
        "quick": quick,
        "machine": machine("numpy"),
        "rounding": bench_rounding(instances=10 if quick else 60),
        "water_filling": bench_water_filling(trials=200 if quick else 2000),
        "plan_step": cyc,
        "plan_step_filled": filled,
        "design": bench_design([1, 2, 4, 8], samples=16 if quick else 64,
                               eval_samples=100 if quick else 400),
    }
    res["wall_s"] = time.perf_counter() - t0
    return publish(out_dir, "planner", res, to_markdown(res))


if __name__ == "__main__":
    a = parser(__doc__).parse_args()
    run(a.quick, a.out)
