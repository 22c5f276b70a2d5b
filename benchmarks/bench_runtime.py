"""Runtime benchmarks on real Ray actors: USCTEC against what users would run instead, side by
side on the same seeded trace.

    python benchmarks/bench_runtime.py [--quick] [--workers 12] [--cpus N]

Scenarios (N emulated machines, L=4, S=2, speeds emulated by pacing, ``time_scale`` seconds per
unit of work, the whole ``A @ B`` being one unit):

* ``stragglers``: 2 random machines per step slowed 5x; policies usctec, uncoded (wait for all),
  speculative (uncoded + backup tasks), cyclic (coded elastic computing, equal loads).
* ``heterogeneous``: persistent speeds spread 1..4x; usctec (designed placement) vs cyclic, and
  the ideal bound (total work with the (L+S)/L redundancy over the sum of speeds).
* ``churn``: 20% of machines churning per step (10% leave or crash, 10% join) on top of the 2
  stragglers per step; usctec vs uncoded, each on its own cluster fed the same churn script.

Every step's product is checked against numpy.  Writes benchmarks/results/runtime.json and
runtime.md (or runtime_<tag>.*).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io as rio  # noqa: E402
from results_io import check_product, machine, parser, publish, stats, table  # noqa: E402

L, S = 4, 2


def _trace(n_steps, machines, stragglers=2, factor=5.0, seed=0):
    """Per-step events for a fixed membership: the same list is replayed for every policy."""
    from elastic_coded.churn import ChurnScript, RandomChurn

    run = ChurnScript(random=RandomChurn(stragglers=stragglers, factor=factor),
                      seed=seed).generator()
    return [run.events(k, machines, L + S) for k in range(n_steps)]


def _stats(reports) -> dict:
    over = np.array([r.overhead_s for r in reports])
    return {**stats([r.t_total for r in reports]), "median_overhead_s": float(np.median(over)),
            "median_slowest_needed_s": float(np.median([r.slowest_needed_s for r in reports])),
            "median_plan_s": float(np.median([r.t_plan for r in reports])),
            "median_decode_s": float(np.median([r.t_decode for r in reports])),
            "failures": int(sum(len(r.failed) for r in reports)),
            "backups": int(sum(r.backups for r in reports))}


def _ray_floor(c, plan, B, reps: int = 15) -> float:
    """Ray's own fan-out floor beside a step: the same actors, the same coded-input payloads
    (one object-store put per position, each machine passed the positions its tasks use), one
    call each with no work, gathered with ``ray.wait`` one by one as the step gathers.  Median
    seconds over ``reps`` fan-outs."""
    import ray

    from elastic_coded.algebra.lagrange import lagrange_code
    from elastic_coded.schemes.wire import Call

    coded = lagrange_code(c.F, plan.L, plan.S).encode(B[:, :B.shape[1] - B.shape[1] % plan.L])
    uses = {m: sorted({t.position for t in ts}) for m, ts in plan.tasks().items()}
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        refs = [ray.put(coded[p]) for p in range(plan.K)]
        pending = [c._handles[m].compute.remote(Call(-1, (), 1), *[refs[p] for p in ps])
                   for m, ps in uses.items()]
        while pending:
            _, pending = ray.wait(pending, num_returns=1)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def scenario_stragglers(n, steps, ts, rng, real=False):
    from elastic_coded.runtime import ElasticCluster

    A = rng.standard_normal((1200, 400 if real else 60))
    ms = [{"id": f"m{i}", "speed": 1.0, "storage": 0.9} for i in range(n)]
    trace = _trace(steps, [m["id"] for m in ms], seed=1)
    policies = ["usctec", "uncoded", "speculative", "cyclic"]
    out = {p: [] for p in policies}
    with ElasticCluster(A, L=L, S=S, machines=ms, time_scale=0.0 if real else ts,
                        learn_speeds=False, placement="design", keep_plans=True) as c:
        B = rng.standard_normal((A.shape[1], 8))
        for p in policies:  # warm-up: actor start, first plans
            c.multiply(B, policy=p, events=trace[0])
        for k, ev in enumerate(trace):
            B = rng.standard_normal((A.shape[1], 8))
            for p in policies:
                check_product(c.multiply(B, policy=p, events=ev), A, B)
                out[p].append(c.reports[-1])
            print(f"\r  stragglers: step {k + 1}/{steps}", end="", flush=True)
        placement = c.placement()
        floor = _ray_floor(c, out["usctec"][-1].full_plan, B)
    print()
    res = {p: _stats(r) for p, r in out.items()}
    u = res["usctec"]
    decode = float(np.median([r.t_decode for r in out["usctec"]]))
    res["ray_floor"] = {"median_s": floor, "decode_median_s": decode,
                        "overhead_over_floor": u["median_overhead_s"] / (floor + decode)}
    # the simulator on the same plans and the same trace: how close is its model to the runtime?
    from elastic_coded.sim import Speculation, step_time

    for p, reports in out.items():
        sim = [step_time(r.full_plan, placement, {m: 1.0 for m in r.plan.available},
                         slowdowns={m: float(ev.slow.get(m, 1.0)) for m in r.plan.available},
                         time_scale=0.0 + (1.0 if real else ts),
                         speculation=Speculation(1.5) if p == "speculative" else None).time
               for r, ev in zip(reports, trace)]
        res[p]["sim_mean_s"] = float(np.mean(sim))
        res[p]["sim_over_runtime_mean"] = float(np.mean(sim)) / res[p]["mean_s"]
        res[p]["sim_over_runtime_compute"] = float(np.mean(sim)) / float(
            np.mean([r.t_compute for r in reports]))
    return res


def scenario_heterogeneous(n, steps, ts, rng):
    from elastic_coded.churn import StepEvents
    from elastic_coded.runtime import ElasticCluster
    from elastic_coded.schemes.registry import ideal_time

    A = rng.standard_normal((1200, 60))
    speeds = np.linspace(1.0, 4.0, n)
    ms = [{"id": f"m{i}", "speed": float(s), "storage": 0.9} for i, s in enumerate(speeds)]
    out = {"usctec": [], "cyclic": []}
    with ElasticCluster(A, L=L, S=S, machines=ms, time_scale=ts, learn_speeds=False,
                        placement="design") as c:
        B = rng.standard_normal((60, 8))
        for p in out:
            c.multiply(B, policy=p, events=StepEvents())
        for k in range(steps):
            B = rng.standard_normal((60, 8))
            for p in out:
                check_product(c.multiply(B, policy=p, events=StepEvents()), A, B)
                out[p].append(c.reports[-1])
            print(f"\r  heterogeneous: step {k + 1}/{steps}", end="", flush=True)
    print()
    res = {p: _stats(r) for p, r in out.items()}
    res["ideal"] = {"median_s": ideal_time(speeds, L, S) * ts}
    res["usctec_compute"] = {
        "median_s": float(np.median([r.slowest_needed_s for r in out["usctec"]]))}
    return res


def scenario_churn(n, steps, ts, rng):
    from elastic_coded.churn import parse_churn
    from elastic_coded.runtime import ElasticCluster

    churn = {"seed": 5, "random": {"leave": 0.05, "crash": 0.05, "join": 0.10, "per_machine": True,
                                   "stragglers": 2, "factor": 5, "join_speed": [1, 1],
                                   "join_storage": 0.9, "min_machines": L + S + 1}}
    A = rng.standard_normal((1200, 60))
    Bs = [rng.standard_normal((60, 8)) for _ in range(steps)]
    res = {}
    for p in ("usctec", "uncoded"):
        ms = [{"id": f"m{i}", "speed": 1.0, "storage": 0.9} for i in range(n)]
        with ElasticCluster(A, p, L=L, S=S, machines=ms, time_scale=ts, learn_speeds=False,
                            churn=parse_churn(churn)) as c:
            for k, B in enumerate(Bs):
                check_product(c.multiply(B), A, B)
                print(f"\r  churn ({p}): step {k + 1}/{steps}", end="", flush=True)
            print()
            st = _stats(c.reports)
            s = c.summary()
            st.update({"lost_steps": steps - len(c.reports), "joins": s["joins"],
                       "leaves": s["leaves"], "crashes": s["failures"],
                       "churn_per_step": (s["joins"] + s["leaves"] + s["failures"]) / steps / n})
            res[p] = st
    return res


def to_markdown(res) -> str:
    m = res["machine"]
    st, he, ch = res["stragglers"], res["heterogeneous"], res["churn"]
    r = lambda a, b: a / b  # noqa: E731
    lines = [
        f"# Runtime benchmark ({res['tag']})", "",
        f"{res['workers']} emulated machines (Ray actors) on {m['cpus']} CPUs, L={L}, S={S}, "
        f"time_scale {res['time_scale']} s per unit of work, {res['steps']} steps per policy, "
        f"every product checked against numpy. Command: `{res['command']}`.", "",
        "## 2 random stragglers per step, slowed 5x (same trace for every policy)", "",
        *table("policy | median step (s) | mean (s) | p95 (s) | median overhead (ms) | vs "
               "uncoded | vs speculative", "lrrrrrr")]
    for p in ("usctec", "uncoded", "speculative", "cyclic"):
        lines.append(f"| {p} | {st[p]['median_s']:.3f} | {st[p]['mean_s']:.3f} | "
                     f"{st[p]['p95_s']:.3f} | {1000 * st[p]['median_overhead_s']:.1f} | "
                     f"{r(st[p]['median_s'], st['uncoded']['median_s']):.2f}x | "
                     f"{r(st[p]['median_s'], st['speculative']['median_s']):.2f}x |")
    lines += ["", "Simulator on the same plans and trace (mean step time, "
                  "sim / runtime): " + ", ".join(
        f"{p} {st[p]['sim_over_runtime_mean']:.2f} (vs dispatch-to-decode "
        f"{st[p]['sim_over_runtime_compute']:.2f})" for p in ("usctec", "uncoded", "speculative",
                                                              "cyclic")) + "."]
    u, fl = st["usctec"], st["ray_floor"]
    lines += ["", f"USCTEC runtime overhead (step time minus the slowest needed worker's time): "
              f"median {1000 * u['median_overhead_s']:.1f} ms on a median step of "
              f"{1000 * u['median_s']:.0f} ms.  Ray's own floor in the same run (the same actors "
              f"and payloads, one empty call each, gathered one by one): "
              f"{1000 * fl['median_s']:.1f} ms, plus decode {1000 * fl['decode_median_s']:.1f} ms; "
              f"overhead / (floor + decode) = {fl['overhead_over_floor']:.2f}x (target <= 1.5x: "
              f"{'met' if fl['overhead_over_floor'] <= 1.5 else 'no'}).",
              "", "## Persistent speeds spread 1..4x", "",
              *table("policy | median step (s) | vs cyclic | vs ideal bound", "lrrr")]
    for p in ("usctec", "cyclic"):
        lines.append(f"| {p} | {he[p]['median_s']:.3f} | "
                     f"{r(he[p]['median_s'], he['cyclic']['median_s']):.2f}x | "
                     f"{r(he[p]['median_s'], he['ideal']['median_s']):.2f}x |")
    lines.append(f"| ideal bound | {he['ideal']['median_s']:.3f} | | 1.00x |")
    lines += ["", f"USCTEC's compute alone (slowest needed worker): "
              f"{he['usctec_compute']['median_s']:.3f} s = "
              f"{he['usctec_compute']['median_s'] / he['ideal']['median_s']:.2f}x the ideal bound.",
              "", "## 20% of machines churning per step (plus 2 stragglers per step)", "",
              *table("policy | median step (s) | vs uncoded | lost steps | joins | leaves | "
                     "crashes | churn/step", "lrrrrrrr")]
    for p in ("usctec", "uncoded"):
        c = ch[p]
        lines.append(f"| {p} | {c['median_s']:.3f} | "
                     f"{r(c['median_s'], ch['uncoded']['median_s']):.2f}x | {c['lost_steps']} | "
                     f"{c['joins']} | {c['leaves']} | {c['crashes']} | "
                     f"{100 * c['churn_per_step']:.0f}% |")
    return "\n".join(lines) + "\n"


def run(quick: bool = False, out_dir: str | None = None, workers: int = 12,
        num_cpus: int | None = None, tag: str = "", real: bool = False) -> dict:
    steps = 4 if quick else 25
    ts = 1.0 if quick else 2.0
    rng = np.random.default_rng(0)
    rio.start_ray(num_cpus)
    t0 = time.time()
    cmd = "python benchmarks/bench_runtime.py" + (" --quick" if quick else "") + \
        (f" --workers {workers}" if workers != 12 else "")
    res = {"tag": tag or ("quick" if quick else "full"), "quick": quick, "workers": workers,
           "steps": steps, "time_scale": ts, "command": cmd,
           "machine": machine("ray")}
    res["stragglers"] = scenario_stragglers(workers, steps, ts, rng, real=real)
    # compute per step grows with time_scale while the runtime overhead does not: the
    # heterogeneous scenario runs at 2x the time scale (its steps are short: work / sum of speeds)
    res["heterogeneous"] = scenario_heterogeneous(workers, steps, 2 * ts, rng)
    res["churn"] = scenario_churn(workers, steps, ts / 2, rng)
    res["wall_s"] = time.time() - t0
    name = "runtime" + (f"_{tag}" if tag else ("_quick" if quick else ""))
    return publish(out_dir, name, res, to_markdown(res))


if __name__ == "__main__":
    ap = parser(__doc__)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--cpus", type=int, default=None)
    ap.add_argument("--tag", default="")
    ap.add_argument("--real", action="store_true",
                    help="straggler scenario at real compute speed (time_scale 0, larger A): "
                         "for a machine with a core per worker")
    a = ap.parse_args()
    run(a.quick, a.out, a.workers, a.cpus, a.tag, real=a.real)
