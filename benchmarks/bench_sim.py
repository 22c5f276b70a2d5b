"""Simulator benchmarks: the runtime benchmark's comparisons (``bench_runtime.py``) at scale, in
simulated time, every policy side by side on the same seeded trace.

    python benchmarks/bench_sim.py [--quick] [--out DIR]

``N`` machines (100, 500, 1000, 2000; quick: 100, 500), ``L=4, S=2``, storage budget 0.9 per
machine, the runtime's default placement (``design_placement``) for every policy but ``cec`` (coded
elastic computing as published: cyclic placement, equal loads).  Scenarios, as in the runtime
benchmark:

* ``stragglers``: 2 random machines per step slowed 5x (the churn script's ``stragglers: 2``);
  usctec vs uncoded (wait for all) and vs speculative (uncoded + backup tasks), cyclic, ideal.
* ``heterogeneous``: persistent speeds spread 1..4x (evenly, known to the planner); usctec vs
  cyclic, cec and the ideal bound.
* ``churn``: 20% of machines churning per step (per machine: 5% leave, 5% crash mid-step, and
  joiners worth 10% of the initial machines), plus 2 stragglers per step; usctec vs uncoded, lost
  steps.  Joiners get a storage budget of ``min(0.9, 2 (L+S) / N)`` (the runtime benchmark's 0.9 at
  its 12 machines): a joiner filling 90% of a 2000-machine cluster's rows would make every later
  plan an LP over all of them.
* ``learning``: speeds spread 1..4x but unknown to the planner (every estimate starts at 1),
  learnt by the controller's rule; usctec learning vs usctec with its first estimates, cyclic,
  ideal.  Shows the plan cache at work (re-plans only while the estimates move by more than 5%).
* ``schemes``: the unified framework and heterogeneous masters on ``N`` = 12 and 20 machines
  (quick: 12), steady and under churn (per step 5% chance of a leave, 5% of a crash, 10% of a
  join, one straggler slowed 5x): unified on speed-1 machines waiting for the fastest 2 or 4 of
  its servers (``mu = 1/2``, 4 inputs per step) against MATH.md's ``D(q)``, re-designs and coded
  rows moved (in copies of ``A``); hetero on speeds 1..3x (two masters of 60 and 100 rows, the
  iterated greedy assignment) against its uncoded and unbalanced-coded baselines and the
  model's lower bound.  Their times are in their models' units (not comparable with the USCTEC
  family's).

Step times are reported in units of ``time_scale / N`` (the time a speed-1 machine takes for a
``1/N`` share of ``A @ B``), so rows for different ``N`` compare directly; ratios are of mean step
times on the same trace.  Planning (``plan_step``, the LP) and storage upkeep are measured in wall
time and reported apart.  ``design_placement`` scores its candidates on 8 speed samples (4 from
``N = 1000``; the runtime's controller uses 16).  Writes ``benchmarks/results/sim.json`` and
``sim.md`` (``--quick``: ``sim_quick.*``).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import machine, parser, publish, table  # noqa: E402

from elastic_coded.churn import ChurnScript, RandomChurn  # noqa: E402
from elastic_coded.families.unified import latency_load  # noqa: E402
from elastic_coded.sim import (  # noqa: E402
    HeteroOptions,
    HeteroVariant,
    LinearSpeeds,
    UnifiedOptions,
    UnifiedVariant,
    UniformSpeeds,
    Variant,
    simulate,
)

L, S = 4, 2
K = L + S
STORAGE = 0.9


def _design_samples(N: int) -> int:
    return 8 if N <= 500 else 4


def _scenario(res, N: int, extra: dict | None = None) -> dict:
    """A scenario's summary, times in units of time_scale / N."""
    out = {"N": N, "steps": int(len(res.machines)), "counts": res.counts, "replans": res.replans,
           "wall_s": res.wall, "policies": {}}
    for name, s in res.summary.items():
        row = dict(s)
        for k in ("mean", "median", "p95", "max"):
            row[k + "_share"] = s[k] * N  # time_scale = 1
        row["plan_ms_per_replan"] = (1e3 * float(res.plan_seconds[name].sum()) / s["replans"]
                                     if s["replans"] else None)
        out["policies"][name] = row
    out["storage_ms_per_step"] = {k: float(v.mean() * 1e3) for k, v in res.storage_seconds.items()}
    out["machines"] = {"min": int(res.machines.min()), "max": int(res.machines.max()),
                       "mean": float(res.machines.mean())}
    if extra:
        out.update(extra)
    return out


def _mean(sc, name):
    return sc["policies"][name]["mean"]


def scenario_stragglers(N: int, steps: int) -> dict:
    churn = ChurnScript(random=RandomChurn(stragglers=2, factor=5), seed=1)
    res = simulate(N, steps, L=L, S=S, churn=churn, storage=STORAGE, seed=1,
                   policies=("usctec", "uncoded", "speculative", "cyclic", "ideal"),
                   design_samples=_design_samples(N))
    sc = _scenario(res, N)
    sc["ratios"] = {"usctec/uncoded": _mean(sc, "usctec") / _mean(sc, "uncoded"),
                    "usctec/speculative": _mean(sc, "usctec") / _mean(sc, "speculative"),
                    "speculative/uncoded": _mean(sc, "speculative") / _mean(sc, "uncoded")}
    return sc


def scenario_heterogeneous(N: int, steps: int) -> dict:
    res = simulate(N, steps, L=L, S=S, speeds=LinearSpeeds(1.0, 4.0), storage=STORAGE, seed=2,
                   policies=("usctec", "cyclic", "cec", "usctec-cyclic", "ideal"),
                   baseline="cyclic", design_samples=_design_samples(N))
    sc = _scenario(res, N)
    sc["ratios"] = {"usctec/cyclic": _mean(sc, "usctec") / _mean(sc, "cyclic"),
                    "usctec/cec": _mean(sc, "usctec") / _mean(sc, "cec"),
                    "usctec/ideal": _mean(sc, "usctec") / _mean(sc, "ideal")}
    return sc


def scenario_churn(N: int, steps: int) -> dict:
    churn = ChurnScript(random=RandomChurn(
        leave=0.05, crash=0.05, join=0.10, per_machine=True, stragglers=2, factor=5,
        join_speed=(1.0, 1.0), join_storage=min(0.9, 2 * K / N), min_machines=K + 1), seed=5)
    res = simulate(N, steps, L=L, S=S, churn=churn, storage=STORAGE, seed=5,
                   policies=("usctec", "uncoded", "ideal"), design_samples=_design_samples(N))
    c = res.counts
    sc = _scenario(res, N, {"churn_per_step": (c["joins"] + c["leaves"] + c["crashes"])
                            / steps / N})
    sc["ratios"] = {"usctec/uncoded": _mean(sc, "usctec") / _mean(sc, "uncoded"),
                    "usctec/uncoded (median)": sc["policies"]["usctec"]["median"]
                    / sc["policies"]["uncoded"]["median"]}
    return sc


def scenario_learning(N: int, steps: int) -> dict:
    res = simulate(N, steps, L=L, S=S, speeds=LinearSpeeds(1.0, 4.0), storage=STORAGE, seed=3,
                   estimates=1.0, learn_speeds=True, plan_tol=0.05,
                   policies=("usctec", Variant("usctec-static", "usctec", "design", learn=False),
                             "cyclic", "ideal"),
                   baseline="cyclic", design_samples=_design_samples(N))
    sc = _scenario(res, N)
    t = res.times["usctec"]
    settled = int(np.argmax(t <= t[-1] * (1 + 1e-9)))
    sc["ratios"] = {"usctec/cyclic": _mean(sc, "usctec") / _mean(sc, "cyclic"),
                    "usctec/usctec-static": _mean(sc, "usctec") / _mean(sc, "usctec-static"),
                    "usctec/ideal": _mean(sc, "usctec") / _mean(sc, "ideal")}
    sc["settled_step"] = settled
    return sc


MASTERS = (60, 100)
UNIFIED = (UnifiedVariant("unified-q2", UnifiedOptions(mu="1/2", q=2, N=4)),
           UnifiedVariant("unified-q4", UnifiedOptions(mu="1/2", q=4, N=4)))
HETERO = (HeteroVariant("hetero", MASTERS),
          HeteroVariant("hetero-uncoded", MASTERS, HeteroOptions(assignment="uncoded")),
          HeteroVariant("hetero-unbalanced", MASTERS, HeteroOptions(assignment="unbalanced_coded")))


def _scheme_rows(res, N: int) -> dict:
    """The scheme variants' summaries, with the theory each is read against."""
    out = {}
    for name, s in res.summary.items():
        row, det = dict(s), res.details[name]
        v = next(v for v in UNIFIED + HETERO if v.name == name)
        if isinstance(v, UnifiedVariant):
            row["D_theory"] = float(latency_load(N, v.options.mu, v.inputs, v.options.q)[0])
            row["copies_moved"] = float((res.rows_moved[name] / det["m"]).sum())
        else:
            row["lower_bound_mean"] = float(det["lower_bound"].mean())
            row["t_star_mean"] = float(det["t_star"].mean())
            row["rescued_rows"] = int(det["rescued_rows"].sum())
        out[name] = row
    return out


def scenario_schemes(N: int, steps: int) -> dict:
    """Unified on speed-1 machines (so D(q) applies), hetero on speeds 1..3x; both steady and
    on the same churn script."""
    churn = ChurnScript(random=RandomChurn(leave=0.05, crash=0.05, join=0.10, stragglers=1,
                                           factor=5, min_machines=N // 2), seed=7)
    out = {"N": N, "steps": steps}
    for name, ch in (("steady", None), ("churn", churn)):
        t0 = time.perf_counter()
        ru = simulate(N, steps, L=L, S=S, churn=ch, seed=3, policies=UNIFIED, baseline=None)
        rh = simulate(N, steps, L=L, S=S, churn=ch, seed=3, speeds=UniformSpeeds(1.0, 3.0),
                      policies=HETERO, baseline=None)
        out[name] = {"counts": rh.counts, "policies": {**_scheme_rows(ru, N),
                                                       **_scheme_rows(rh, N)},
                     "wall_s": {"total": time.perf_counter() - t0}}
    return out


def _f(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"


def _md_stragglers(rows: list) -> list:
    lines = ["## 2 random stragglers per step, slowed 5x", "",
             *table("N | steps | usctec | uncoded | speculative | cyclic | ideal | usctec / "
                    "uncoded | usctec / speculative | plan ms/step (usctec) | per re-plan | "
                    "wall s", "r")]
    for sc in rows:
        p = sc["policies"]
        lines.append(
            f"| {sc['N']} | {sc['steps']} | {p['usctec']['mean_share']:.3f} | "
            f"{p['uncoded']['mean_share']:.3f} | {p['speculative']['mean_share']:.3f} | "
            f"{p['cyclic']['mean_share']:.3f} | {p['ideal']['mean_share']:.3f} | "
            f"{sc['ratios']['usctec/uncoded']:.2f}x | {sc['ratios']['usctec/speculative']:.2f}x | "
            f"{p['usctec']['plan_ms']:.2f} | {_f(p['usctec']['plan_ms_per_replan'], 0)} | "
            f"{sc['wall_s']['total']:.1f} |")
    return lines


def _md_heterogeneous(rows: list) -> list:
    lines = ["", "## Persistent speeds spread 1..4x (known to the planner)", "",
             *table("N | steps | usctec | cyclic | cec | usctec-cyclic | ideal | usctec / cyclic "
                    "| usctec / cec | usctec / ideal | wall s", "r")]
    for sc in rows:
        p = sc["policies"]
        lines.append(
            f"| {sc['N']} | {sc['steps']} | {p['usctec']['mean_share']:.3f} | "
            f"{p['cyclic']['mean_share']:.3f} | {p['cec']['mean_share']:.3f} | "
            f"{p['usctec-cyclic']['mean_share']:.3f} | {p['ideal']['mean_share']:.3f} | "
            f"{sc['ratios']['usctec/cyclic']:.2f}x | {sc['ratios']['usctec/cec']:.2f}x | "
            f"{sc['ratios']['usctec/ideal']:.2f}x | {sc['wall_s']['total']:.1f} |")
    return lines


def _md_churn(rows: list) -> list:
    lines = ["", "## 20% of machines churning per step (plus 2 stragglers per step)", "",
             *table("N | steps | usctec | uncoded | usctec / uncoded | median ratio | lost steps "
                    "(usctec / uncoded) | joins / leaves / crashes | churn per step | pieces "
                    "short of L (usctec) | plan ms/step (usctec / uncoded) | storage ms/step | "
                    "wall s", "r")]
    for sc in rows:
        p, c = sc["policies"], sc["counts"]
        stor = sum(sc["storage_ms_per_step"].values())
        lines.append(
            f"| {sc['N']} | {sc['steps']} | {p['usctec']['mean_share']:.3f} | "
            f"{p['uncoded']['mean_share']:.3f} | {sc['ratios']['usctec/uncoded']:.2f}x | "
            f"{sc['ratios']['usctec/uncoded (median)']:.2f}x | "
            f"{p['usctec']['lost']} / {p['uncoded']['lost']} | "
            f"{c['joins']} / {c['leaves']} / {c['crashes']} | {100 * sc['churn_per_step']:.0f}% | "
            f"{p['usctec']['recovered']} | {p['usctec']['plan_ms']:.0f} / "
            f"{p['uncoded']['plan_ms']:.0f} | {stor:.0f} | {sc['wall_s']['total']:.1f} |")
    return lines


def _md_learning(rows: list) -> list:
    lines = ["", "## Speeds spread 1..4x, learnt (estimates start at 1; plan cache tolerance 5%)",
             "", *table("N | steps | usctec (learning) | usctec (first estimates) | cyclic | "
                        "ideal | usctec / cyclic | settled by step | re-plans | plan ms/step | "
                        "per re-plan | wall s", "r")]
    for sc in rows:
        p = sc["policies"]
        lines.append(
            f"| {sc['N']} | {sc['steps']} | {p['usctec']['mean_share']:.3f} | "
            f"{p['usctec-static']['mean_share']:.3f} | {p['cyclic']['mean_share']:.3f} | "
            f"{p['ideal']['mean_share']:.3f} | {sc['ratios']['usctec/cyclic']:.2f}x | "
            f"{sc['settled_step']} | {p['usctec']['replans']} | {p['usctec']['plan_ms']:.2f} | "
            f"{_f(p['usctec']['plan_ms_per_replan'], 0)} | {sc['wall_s']['total']:.1f} |")
    return lines


def _md_schemes(rows: list) -> list:
    lines = ["", "## Unified and heterogeneous masters, steady and under churn", "",
             "Mean step times in the models' time units (`time_scale` = 1). Unified: the Map "
             "(fastest q of the servers, mu = 1/2, 4 inputs), MATH.md's D(q) for K = N beside it; "
             "re-designs and coded rows moved in copies of A. Hetero: masters of 60 and 100 rows; "
             "the model's lower bound and t* of the assignment beside it.", "",
             *table("N | trace | joins / leaves / crashes | unified q=2 (D) | q=4 (D) | "
                    "re-designs | copies of A moved (q=2 / q=4) | hetero | uncoded | unbalanced "
                    "coded | lower bound | t* | re-plans | rescued rows | lost | wall s",
                    "rl" + "r" * 14)]
    for sc in rows:
        for name in ("steady", "churn"):
            r = sc[name]
            p, c = r["policies"], r["counts"]
            u2, u4, h = p["unified-q2"], p["unified-q4"], p["hetero"]
            lost = sum(row["lost"] for row in p.values())
            lines.append(
                f"| {sc['N']} | {name} | {c['joins']} / {c['leaves']} / {c['crashes']} | "
                f"{u2['mean']:.3f} ({u2['D_theory']:.3f}) | {u4['mean']:.3f} "
                f"({u4['D_theory']:.3f}) | {u2['redesigns']} | {u2['copies_moved']:.1f} / "
                f"{u4['copies_moved']:.1f} | {h['mean']:.3f} | "
                f"{p['hetero-uncoded']['mean']:.3f} | {p['hetero-unbalanced']['mean']:.3f} | "
                f"{h['lower_bound_mean']:.3f} | {h['t_star_mean']:.3f} | {h['redesigns']} | "
                f"{h['rescued_rows']} | {lost} | {r['wall_s']['total']:.1f} |")
    return lines


def _md_speed(sp: dict | None) -> list:
    if not sp:
        return []
    w = sp["wall_s"]
    return ["", "## Simulator speed", "",
            f"N = {sp['N']} machines x {sp['steps']} steps, 2 stragglers per step, four "
            f"policies (usctec, uncoded, speculative, cyclic) and the ideal bound, no "
            f"learning: **{w['total']:.1f} s** wall "
            f"(trace {w['trace']:.2f} s, initial placement {w['placement']:.2f} s, "
            f"planning {w['planning']:.2f} s for {sum(sp['replans'].values())} solves, "
            f"execution {w['execution']:.2f} s = "
            f"{1e6 * w['execution'] / sp['steps'] / 4:.0f} us per policy-step)."]


def to_markdown(res: dict) -> str:
    m = res["machine"]
    lines = [
        f"# Simulator benchmark ({'quick' if res['quick'] else 'full'})", "",
        f"`elastic_coded.sim` executing the runtime's StepPlans in simulated time; L={L}, S={S}, "
        f"storage {STORAGE} per machine, the designed placement for every policy but `cec`. "
        f"{m['cpus']} CPUs, Python {m['python']}, numpy {m['numpy']}, scipy {m['scipy']}. "
        f"Command: `{res['command']}`; {res['wall_s']:.0f} s in all.", "",
        "Step times in units of `time_scale / N` (a speed-1 machine's time for a 1/N share of "
        "`A @ B`); ratios of mean step times on the same trace. `plan ms/step`: measured "
        "planning wall time (LP) per step, amortised by the plan cache; `per re-plan`: one "
        "solve.", ""]
    lines += _md_stragglers(res["stragglers"]) + _md_heterogeneous(res["heterogeneous"])
    lines += _md_churn(res["churn"]) + _md_learning(res["learning"])
    lines += _md_schemes(res.get("schemes", [])) + _md_speed(res.get("speed"))
    return "\n".join(lines) + "\n"


def run(quick: bool = False, out_dir: str | None = None) -> dict:
    """Run the benchmark; write ``sim.json`` and ``sim.md`` to ``out_dir`` (default
    ``benchmarks/results``); print the table; return the results."""
    t0 = time.perf_counter()
    Ns = (100, 500) if quick else (100, 500, 1000, 2000)
    # churn re-plans every step (membership changes every step) and its placement fragments as
    # joiners split blocks, so each solve grows: fewer steps there
    steps = ({"stragglers": 200, "heterogeneous": 50, "learning": 60,
              "churn": {100: 40, 500: 15}} if quick else
             {"stragglers": 1000, "heterogeneous": 200, "learning": 200,
              "churn": {100: 100, 500: 40, 1000: 25, 2000: 15}})
    scheme_Ns, scheme_steps = ((12,), 100) if quick else ((12, 20), 300)
    res = {"quick": quick, "L": L, "S": S, "storage": STORAGE, "Ns": list(Ns), "steps": steps,
           "command": "python benchmarks/bench_sim.py" + (" --quick" if quick else ""),
           "machine": machine("numpy", "scipy")}
    for name, fn in (("stragglers", scenario_stragglers), ("heterogeneous", scenario_heterogeneous),
                     ("churn", scenario_churn), ("learning", scenario_learning)):
        res[name] = []
        for N in Ns:
            n_steps = steps[name][N] if isinstance(steps[name], dict) else steps[name]
            print(f"  {name}: N={N}, {n_steps} steps ...", end="", flush=True)
            sc = fn(N, n_steps)
            print(f" {sc['wall_s']['total']:.1f} s", flush=True)
            res[name].append(sc)
    res["schemes"] = []
    for N in scheme_Ns:
        print(f"  schemes: N={N}, {scheme_steps} steps ...", end="", flush=True)
        t1 = time.perf_counter()
        res["schemes"].append(scenario_schemes(N, scheme_steps))
        print(f" {time.perf_counter() - t1:.1f} s", flush=True)
    speed = [sc for sc in res["stragglers"] if sc["N"] == 1000]
    if speed:
        res["speed"] = speed[0]
    res["wall_s"] = time.perf_counter() - t0
    return publish(out_dir, "sim_quick" if quick else "sim", res, to_markdown(res))


if __name__ == "__main__":
    a = parser(__doc__, quick_help="N = 100, 500 and fewer steps (< 60 s)",
               out_help="results folder (default benchmarks/results)").parse_args()
    run(a.quick, a.out)
