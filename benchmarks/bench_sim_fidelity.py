"""The simulator against the runtime: both replay the same seeded straggler and churn traces.

    python benchmarks/bench_sim_fidelity.py [--quick] [--cost FILE] [--out DIR]
    python benchmarks/bench_sim_fidelity.py --resim    # the simulator's columns again

One trace per case (:func:`elastic_coded.sim.make_trace`): ``M`` machines with persistent speeds
1..4, slowdowns from a seeded :class:`~elastic_coded.sim.TraceDelays` table (each step two
random machines 5x slower and, one step in four, a third 20x), and for ``churn`` the churn
script's random events (per machine and step 5% leave, 5% crash mid-step, 5% join).  The
runtime (emulated machines on one embedded Ray, ``time_scale`` = the ideal step times the sum
of the speeds, learning off, the default deadline 3.0) replays the trace's membership events
and slowdowns step by step; the simulator runs the same trace with the same placement rule,
the same deadline and no learning, once with the pure compute model and once with the runtime
cost (``runtime_cost.json`` from ``python -m benchmarks calibrate``, or the defaults).

Cases: ``stragglers`` at ``M`` = 12 and 48 and ideal steps of 50 ms, 357 ms and 1 s;
``churn`` at ``M`` = 12 and 48 and 357 ms.  Each policy runs the trace on its own cluster,
step after step, as a user running it would (:func:`runtime_each`): interleaved on one
cluster, a policy's step began with the last policy's leftovers (a pull step's hundreds of
cancelled calls: 20% of a 50 ms step at 48 machines), and waiting for those to clear left out
a policy's own, which the calibrated cost counts.  The 50 ms cases are run :data:`REPEATS`
times, each policy on a fresh cluster each time, and their steps pooled: one run's ratio to
``dynamic`` is not reproducible to the goal's 15% there.  ``--quick``: ``M`` = 6, 50 ms, 3
steps, stragglers only, one run.

Per policy: the runtime's median step, the simulator's (without and with the cost), their
ratio; each policy's median over ``dynamic``'s in both.  Goals: the ratio to ``dynamic``
within 15% of the runtime's, the absolute median within 20% with the cost; the table says
"no" where missed.  Writes ``sim_fidelity.json``, ``.md`` and ``sim_fidelity.png``.  Runtime
figures on a shared host are noisy.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io as rio  # noqa: E402
from results_io import RESULTS, ROOT, check_product, machine, parser, publish, row  # noqa: E402

POLICIES = ("usctec-auto", "usctec-pull", "usctec", "dynamic", "proportional")
L, S = 4, 2
ROWS, COLS, INPUT_COLS = 1200, 60, 8
WARM = 2
DEADLINE = 3.0
CHURN = {"seed": 5, "random": {"leave": 0.05, "crash": 0.05, "join": 0.05, "per_machine": True,
                               "join_speed": [1, 4], "join_storage": 1.0,
                               "min_machines": L + S + 2}}
RATIO_GOAL, ABS_GOAL = 0.15, 0.20
REPEATS, REPEAT_BELOW_S = 3, 0.1
"""Where the ideal step is under ``REPEAT_BELOW_S`` the runtime replays a case ``REPEATS`` times,
each policy on a fresh cluster each time (the policies in turn, so drift over the case hits
them alike), and the steps of every run are pooled.  There the host is overloaded (a step takes
2-5x its ideal time) and one run's ratio to ``dynamic`` moved from 0.80x to 1.17x between four
runs of the same trace (``usctec-pull``, 48 machines, 50 ms, 12 steps), more than the goal's
15%."""


def slowdown_table(steps: int, M: int, seed: int = 11) -> np.ndarray:
    """The seeded straggler table: per step two machines 5x, one step in four a third 20x."""
    rng = np.random.default_rng(seed)
    out = np.ones((steps, M))
    for t in range(steps):
        pick = rng.choice(M, 3, replace=False)
        out[t, pick[:2]] = 5.0
        if t % 4 == 3:
            out[t, pick[2]] = 20.0
    return out


def make_case(M: int, steps: int, churn: bool):
    from elastic_coded.sim import FixedSpeeds, TraceDelays, make_trace

    n = WARM + steps
    speeds = np.linspace(1.0, 4.0, M)
    # joiners get columns beyond M: slots M.. replay columns M mod M = 0.., so they straggle too
    return make_trace(M, n, L, S, delays=TraceDelays(slowdown_table(n, M)),
                      speeds=FixedSpeeds(tuple(speeds)), churn=CHURN if churn else None,
                      seed=0, storage=1.0)


def _slow(trace, t: int) -> dict:
    present, slots = trace.present(t), trace.slots(t)
    return {m: float(trace.slowdown[t, s]) for m, s in zip(present, slots)
            if trace.slowdown[t, s] != 1.0}


def _events(trace, t: int):
    return replace(trace.events[t], slow=_slow(trace, t))


def _cluster(A, policy, trace, ts):
    from elastic_coded.runtime import ElasticCluster

    ms = [{"id": trace.ids[i], "speed": float(trace.configured[i]), "storage": 1.0}
          for i in range(trace.N)]
    return ElasticCluster(A, policy, L=L, S=S, machines=ms, time_scale=ts, placement="design",
                          num_cpus=os.cpu_count(), learn_speeds=False, allow_lower_S=True,
                          deadline=DEADLINE)


def settle(c, actors=()) -> None:
    """Wait until every worker process of cluster ``c`` (and every actor of ``actors``) has
    answered a call made now: the calls the step before cancelled are gone from its event
    loop, so one policy's leftovers (a pull step's hundreds of cancelled calls) do not land in
    another policy's step (``bench_schedulers``, which interleaves the policies)."""
    import ray

    procs = {h.host._actor_id.hex(): h.host for h in c._handles.values()}
    ray.get([p.hosted.remote() for p in procs.values()]
            + [a.__ray_call__.remote(lambda self: None) for a in actors])


def runtime_each(trace, ts: float, rng) -> dict:
    """Each policy on its own cluster, replaying the trace's membership and slowdowns step by
    step, as a user running it would: each step after its own step before (and what that one
    left running, as the calibrated cost assumes), never after another policy's."""
    A = rng.standard_normal((ROWS, COLS))
    Bs = [rng.standard_normal((COLS, INPUT_COLS)) for _ in range(trace.steps)]
    times, match = {}, {}
    for p in POLICIES:
        out, same = [], 0
        with _cluster(A, p, trace, ts) as c:
            for t, B in enumerate(Bs):
                ev = _events(trace, t)
                same += sorted(set(c.machines()) - set(ev.leave) | {j.id for j in ev.join}) \
                    == list(trace.present(t))
                check_product(c.multiply(B, events=ev), A, B)
                out.append(c.reports[-1].t_total)
        times[p], match[p] = out[WARM:], same / trace.steps
    return {"times": times, "membership_match": match}


def simulated(trace, ts: float, cost) -> dict:
    from elastic_coded.sim import simulate

    res = simulate(trace=trace, L=L, S=S, policies=POLICIES, time_scale=ts, num_rows=ROWS,
                   baseline="dynamic", deadline=DEADLINE, learn_speeds=False, cost=cost,
                   design_samples=16)
    return {p: res.times[p][WARM:].tolist() for p in POLICIES}


def _median(v) -> float:
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else float("nan")


def compare(rt: dict, sim0: dict, sim1: dict, runs: list | None = None) -> dict:
    """Per policy: the medians (the runtime's over every run's steps), their ratios and the
    goals met; with ``runs`` (each run's medians), the ratio to ``dynamic`` of each run."""
    out = {}
    d_rt, d0, d1 = (_median(x["dynamic"]) for x in (rt, sim0, sim1))
    for p in POLICIES:
        r, a, b = _median(rt[p]), _median(sim0[p]), _median(sim1[p])
        row = {"runtime_median_s": r, "sim_median_s": a, "sim_cost_median_s": b,
               "sim_over_runtime": a / r, "sim_cost_over_runtime": b / r,
               "runtime_vs_dynamic": r / d_rt, "sim_vs_dynamic": a / d0,
               "sim_cost_vs_dynamic": b / d1}
        row["vs_dynamic_error"] = row["sim_cost_vs_dynamic"] / row["runtime_vs_dynamic"] - 1
        if runs:
            row["runtime_vs_dynamic_runs"] = [r[p] / r["dynamic"] for r in runs]
        row["ratio_met"] = abs(row["vs_dynamic_error"]) <= RATIO_GOAL
        row["abs_met"] = abs(row["sim_cost_over_runtime"] - 1) <= ABS_GOAL
        out[p] = row
    return out


def run_case(name: str, M: int, ideal_s: float, steps: int, cost, rng,
             repeats: int | None = None) -> dict:
    churn = name == "churn"
    trace = make_case(M, steps, churn)
    ts = ideal_s * float(trace.configured[:M].sum())
    if repeats is None:
        repeats = REPEATS if ideal_s < REPEAT_BELOW_S else 1
    t0 = time.time()
    runs = [runtime_each(trace, ts, rng) for _ in range(repeats)]
    rt = {p: [t for r in runs for t in r["times"][p]] for p in POLICIES}
    per_run = [{p: _median(r["times"][p]) for p in POLICIES} for r in runs]
    extra = {"runtime_runs": per_run} if repeats > 1 else {}
    if churn:
        extra["membership_match"] = {p: float(np.mean([r["membership_match"][p] for r in runs]))
                                     for p in POLICIES}
    wall = time.time() - t0
    sim0, sim1 = simulated(trace, ts, None), simulated(trace, ts, cost)
    print(f"  {name} M={M} {ideal_s:g} s: runtime {wall:.0f} s ({repeats} runs)", flush=True)
    return {"name": name, "M": M, "ideal_s": ideal_s, "steps": steps, "repeats": repeats,
            "time_scale": ts, "counts": trace.counts(), "runtime_s": wall,
            "policies": compare(rt, sim0, sim1, per_run if repeats > 1 else None),
            "runtime": rt, "sim": sim0, "sim_cost": sim1, **extra}


def resimulate(res: dict, cost, source: str) -> dict:
    """The simulator's columns of a results file again (the same traces, drawn anew from their
    seeds), with ``cost``; the runtime's figures are kept as measured."""
    for case in res["cases"]:
        trace = make_case(case["M"], case["steps"], case["name"] == "churn")
        sim0 = simulated(trace, case["time_scale"], None)
        sim1 = simulated(trace, case["time_scale"], cost)
        case.update(sim=sim0, sim_cost=sim1,
                    policies=compare(case["runtime"], sim0, sim1, case.get("runtime_runs")))
    res.update(cost=cost.to_dict(), cost_source=source)
    if not res["command"].endswith("(simulator columns: --resim)"):
        res["command"] += " (simulator columns: --resim)"
    return res


def to_markdown(res: dict) -> str:
    c = res["cost"]
    lines = [f"# Simulator against runtime ({res['tag']})", "",
             f"Same seeded traces (TraceDelays stragglers; churn script for `churn`), L={L}, "
             f"S={S}, speeds 1..4, learning off, deadline {DEADLINE:g}, {res['steps']} measured "
             f"steps per policy after {WARM} warm-up steps{_repeats_text(res)}, every runtime "
             f"product checked "
             f"against numpy, on {res['machine']['cpus']} shared CPUs (runtime figures are "
             f"noisy).  Cost: {res['cost_source']} (step {1e3 * c['step_s']:.1f} ms, call "
             f"{1e3 * c['call_s']:.2f} ms, result {1e3 * c['round_trip_s']:.2f} ms, plan "
             f"{1e3 * c['plan_s']:.1f} ms, worker {1e3 * c['worker_call_s']:.2f} ms per call).  "
             f"Goals: ratio to dynamic within {100 * RATIO_GOAL:.0f}% of the runtime's, median "
             f"within {100 * ABS_GOAL:.0f}% with the cost.  Command: `{res['command']}`.", "",
             *rio.table("case | M | ideal | policy | runtime median | sim (compute) | sim "
                        "(cost) | sim cost / runtime | within 20% | runtime / dynamic | sim cost "
                        "/ dynamic | within 15%", "lrrlrrrrcrrc")]
    for case in res["cases"]:
        for p, r in case["policies"].items():
            lines.append(row([
                case["name"], case["M"], f"{case['ideal_s']:g} s", p,
                *(f"{r[k]:.3f} s" for k in ("runtime_median_s", "sim_median_s",
                                             "sim_cost_median_s")),
                f"{r['sim_cost_over_runtime']:.2f}x", rio.yes(r["abs_met"]), _ratio_cell(r),
                f"{r['sim_cost_vs_dynamic']:.2f}x", rio.yes(r["ratio_met"])]))
    n = sum(len(c["policies"]) for c in res["cases"])
    ok_r = sum(r["ratio_met"] for c in res["cases"] for r in c["policies"].values())
    ok_a = sum(r["abs_met"] for c in res["cases"] for r in c["policies"].values())
    lines += ["", f"Met: ratio to dynamic {ok_r}/{n}, absolute median {ok_a}/{n}."]
    return "\n".join(lines) + "\n"


def _repeats_text(res: dict) -> str:
    """What the table's header says of the cases run more than once (:data:`REPEATS`)."""
    more = sorted({c.get("repeats", 1) for c in res["cases"]} - {1})
    if not more:
        return ""
    return (f" (where the ideal step is under {REPEAT_BELOW_S:g} s, {more[0]} runs, each policy on "
            f"a fresh cluster each run, the steps pooled; the runs' ratios to dynamic in "
            f"brackets)")


def _ratio_cell(row: dict) -> str:
    """The runtime's ratio to ``dynamic``, with the range of the runs' ratios where a case was
    run more than once (:data:`REPEATS`)."""
    runs = row.get("runtime_vs_dynamic_runs")
    cell = f"{row['runtime_vs_dynamic']:.2f}x"
    return cell + (f" ({min(runs):.2f}-{max(runs):.2f})" if runs and len(runs) > 1 else "")


def plot(res: dict, out_dir: str) -> list:
    plt = rio.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    marks = dict(zip(POLICIES, "os^Dv"))
    for p in POLICIES:
        rt = [c["policies"][p]["runtime_median_s"] for c in res["cases"]]
        sm = [c["policies"][p]["sim_cost_median_s"] for c in res["cases"]]
        axes[0].loglog(rt, sm, marks[p], label=p, alpha=0.8)
        rr = [c["policies"][p]["runtime_vs_dynamic"] for c in res["cases"]]
        sr = [c["policies"][p]["sim_cost_vs_dynamic"] for c in res["cases"]]
        axes[1].plot(rr, sr, marks[p], label=p, alpha=0.8)
    lo = min(min(a.get_xlim()[0], a.get_ylim()[0]) for a in axes[:1])
    hi = max(max(a.get_xlim()[1], a.get_ylim()[1]) for a in axes[:1])
    axes[0].plot([lo, hi], [lo, hi], "k:", lw=0.8)
    axes[0].set_xlabel("runtime median step (s)")
    axes[0].set_ylabel("simulator median step, with cost (s)")
    lo1, hi1 = axes[1].get_xlim()
    axes[1].plot([lo1, hi1], [lo1, hi1], "k:", lw=0.8)
    axes[1].set_xlabel("runtime: median / dynamic's")
    axes[1].set_ylabel("simulator (cost): median / dynamic's")
    axes[0].legend(fontsize=7)
    fig.suptitle("Simulator vs runtime on the same traces", fontsize=10)
    return [rio.save(fig, os.path.join(out_dir, "sim_fidelity.png"), 120)]


def _cost(path: str | None):
    from elastic_coded.sim import RuntimeCost

    path = path or os.path.join(RESULTS, "runtime_cost.json")
    if os.path.exists(path):
        return RuntimeCost.load(path), os.path.relpath(path, ROOT)
    return RuntimeCost(), "RuntimeCost() defaults (no calibration file)"


def run(quick: bool = False, out_dir: str | None = None, cost_path: str | None = None,
        steps: int | None = None) -> dict:
    steps = steps or (3 if quick else 8)
    if quick:
        cases = [("stragglers", 6, 0.05)]
    else:
        cases = [("stragglers", M, s) for M in (12, 48) for s in (0.05, 0.357, 1.0)]
        cases += [("churn", M, 0.357) for M in (12, 48)]
    cost, source = _cost(cost_path)
    rio.start_ray()
    rng = np.random.default_rng(0)
    t0 = time.time()
    cmd = "python benchmarks/bench_sim_fidelity.py" + (" --quick" if quick else "")
    res = {"tag": "quick" if quick else "full", "steps": steps, "command": cmd,
           "cost": cost.to_dict(), "cost_source": source,
           "cases": [run_case(n, M, s, steps, cost, rng, 1 if quick else None)
                     for n, M, s in cases],
           "machine": machine("ray")}
    res["wall_s"] = time.time() - t0
    name = "sim_fidelity" + ("_quick" if quick else "")
    return publish(out_dir, name, res, to_markdown(res), plot)


if __name__ == "__main__":
    ap = parser(__doc__)
    ap.add_argument("--cost", default=None, help="a runtime_cost.json (default: the calibrated "
                                                 "one in benchmarks/results, else defaults)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--resim", action="store_true",
                    help="recompute the simulator's columns of the results file (after a new "
                         "calibration), keeping the runtime's figures")
    a = ap.parse_args()
    if a.resim:
        import json

        out = a.out or RESULTS
        name = "sim_fidelity" + ("_quick" if a.quick else "")
        with open(os.path.join(out, name + ".json")) as fh:
            res = resimulate(json.load(fh), *_cost(a.cost))
        publish(out, name, res, to_markdown(res), plot)
    else:
        run(a.quick, a.out, a.cost, a.steps)
