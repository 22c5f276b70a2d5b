"""One command for every benchmark:

    python -m benchmarks run [--quick] [--out DIR] [--only planner,runtime,...]
    python -m benchmarks plot [--quick] [--out DIR]    # redraw the PNGs from the JSON results
    python -m benchmarks calibrate [--quick] [--out DIR]   # the simulator's runtime cost
    python -m benchmarks docs [--check]   # the docs' results blocks from the results files

Runs the benchmarks (each also runnable alone as ``python benchmarks/bench_<name>.py``), writes
their ``*.json`` and ``*.md`` results, PNG plots (when matplotlib is installed), and
``summary.md``: the headline figures against their targets, every one read from a results file.
A full run (no ``--quick``) writes into ``benchmarks/results`` and rewrites README's results
table from ``summary.md``; ``--quick`` writes into ``benchmarks/results/quick`` and leaves the
README alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

NAMES = ("planner", "gfp_matmul", "hetero", "sweeps", "unified", "sim", "runtime", "schedulers",
         "verify", "memory", "scale", "sim_fidelity", "sparse", "sim_scale", "real",
         "two_level")


def _script(name: str, quick: bool, out: str) -> None:
    """Benchmarks with their own command line run as a subprocess."""
    cmd = [sys.executable, os.path.join(HERE, f"bench_{name}.py")]
    if quick:
        cmd.append("--quick")
    if name == "hetero":
        cmd += ["--out", out]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"bench_{name}.py failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    if name == "gfp_matmul" and quick:  # its quick mode prints only; keep the table
        with open(os.path.join(out, "gfp_matmul.md"), "w") as fh:
            fh.write(proc.stdout)


def run_one(name: str, quick: bool, out: str) -> None:
    if name in ("gfp_matmul", "hetero"):
        return _script(name, quick, out)
    bench = __import__(f"bench_{name}")  # those with plots draw them when matplotlib is there
    res = bench.run(quick, out, **({"workers": 8 if quick else 12} if name == "runtime" else {}))
    if name in ("sweeps", "unified"):
        _plot(bench.plot, res, out)


def _plot(fn, res, out) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib not installed: plots skipped (pip install -e '.[plot]')")
        return
    for path in fn(res, out):
        print(f"  plot {os.path.relpath(path, ROOT)}")


PLOTTED = ("sweeps", "unified", "schedulers", "sim_fidelity")
"""Benchmarks that draw PNGs, each from its ``NAME.json`` alone."""


def plot_all(out: str, names=PLOTTED) -> int:
    """Redraw every PNG from the results files in ``out``, running no benchmark; 1 if a
    results file is missing."""
    missing = 0
    for name in (n for n in names if n in PLOTTED):
        res = _load(out, f"{name}.json")
        if res is None:
            print(f"  {name}: no {name}.json in {out}; nothing drawn")
            missing += 1
            continue
        _plot(__import__(f"bench_{name}").plot, res, out)
    return 1 if missing else 0


def _load(out: str, name: str):
    for n in (name, name.replace(".json", "_quick.json")):
        path = os.path.join(out, n)
        if os.path.exists(path):
            with open(path) as fh:
                return json.load(fh)
    return None


def _tail_rows(out: str, add) -> None:
    """The summary's last rows: verification, memory and the unified load."""
    ve = _load(out, "verify.json")
    for f in (ve or {}).get("fields", []):
        v = f["check_alone_s"] / f["median_step_off_s"]
        add(f"verification per step, {f['field']}, {f.get('policy', 'usctec')}, A {f['m']}x"
            f"{f['n']}, r={f['r']}: check "
            f"(best) / step (median)", f"{100 * v:.2f}% ({1000 * f['check_alone_s']:.2f} ms; "
            f"t_verify median {1000 * f['median_t_verify_s']:.1f} ms)", "<= 5%", v <= 0.05,
            "verify.json")
    mem = _load(out, "memory.json")
    if mem and "shared" in mem:
        a, b = mem["shared"]["peak_pss_mib"], mem["one_per_process"]["peak_pss_mib"]
        add("quickstart memory, peak PSS summed: shared worker processes / one per machine",
            f"{a:.0f} / {b:.0f} MiB ({mem['shared']['processes_at_peak']} / "
            f"{mem['one_per_process']['processes_at_peak']} processes)", "below one per machine",
            a < b, "memory.json")
    lr = _load(out, "long_run_memory.json")
    if lr:
        ok = max(lr["driver_mb"], lr["worst_worker_mb"]) <= lr["goal_mb"] and lr["store_mb"] <= 1
        add(f"long run, {lr['steps']:,} steps with churn and liars: RSS growth after step "
            f"{lr['warm_up']}, driver / worst worker process; object store",
            f"{lr['driver_mb']:.1f} / {lr['worst_worker_mb']:.1f} MB; "
            f"{lr['store_mb']:+.1f} MB", f"<= {lr['goal_mb']} MB; back to its level", ok,
            "long_run_memory.json")
    sp = _load(out, "sparse.json")
    if sp:
        base, run = sp["large"]["scipy_s"], sp["large"]["runs"][0]
        add(f"sparse matvec {sp['nodes']:,} nodes, {sp['nnz']:,} nonzeros: default step / "
            f"scipy's one-process A @ x", f"{run['median_step_s'] / base:.1f}x "
            f"({1000 * run['median_step_s']:.0f} / {1000 * base:.0f} ms)", "<= 1x",
            run["median_step_s"] <= base, "sparse.json")
    un = _load(out, "unified.json")
    if un:
        ok = all(abs(p["measured_load"] - p["L"]) < 1e-9 for p in un["points"])
        add(f"unified K={un['K']}: measured load = L(q) for q in "
            f"{[p['q'] for p in un['points']]}", "equal" if ok else "differs", "equal", ok,
            "unified.json")


def _real_rows(out: str, add) -> None:
    """The real-speed benchmark's goals (machines at their real speed, real stragglers)."""
    re_ = _load(out, "real.json")
    for what, value, target, met in (re_ or {}).get("goals", []):
        add(f"real speed, {re_['machines']} machines on {re_['cpus']} CPUs: {what}",
            f"{value:.2f}x", f"<= {target:.2f}x", met, "real.json")


def _scale_rows(sk: dict, add) -> None:
    """The scale benchmark's rows: the default's step over Ray's floor at 12 and 96 machines,
    the driver's and controller's CPU per machine at 96, and the pure planner."""
    by_m = {r["M"]: r for r in sk.get("sizes", [])}
    for M in (12, 96):
        r = by_m.get(M)
        if r:
            d = r["policies"]["usctec-auto"]
            add(f"scale, M={M}: default step / Ray's floor (same calls, plain Ray)",
                f"{r['default_over_floor']:.2f}x ({1000 * d['median_s']:.0f} ms; floor "
                f"{1000 * r['ray_floor']['median_s']:.0f} ms)", "<= 1.5x",
                r["default_over_floor"] <= 1.5, "scale.json")
    for M in (96, 192):
        r = by_m.get(M)
        if r and "process_floor" in r:
            sr, cr = r["default_over_process_floor"], r["driver_cpu_over_process_floor"]
            add(f"scale, M={M}: default step / process floor (one call per process); its "
                f"driver's CPU / the floor's", f"{sr:.2f}x / {cr:.2f}x", "<= 1.25x / 1.25x",
                sr <= 1.25 and cr <= 1.25, "scale.json")
    r = by_m.get(96)
    if r:
        dc = r["default_driver_plus_controller_ms_per_machine"]
        fd = r["ray_floor"]["driver_cpu_ms_per_machine"]
        add("scale, M=96: driver + controller CPU per machine per step", f"{dc:.2f} ms (Ray's "
            f"floor's driver alone: {fd:.2f} ms)", "<= 0.3 ms", dc <= 0.3, "scale.json")
    got = [(M, by_m[M]["trace"]) for M in (12, 96) if "trace" in by_m.get(M, {})]
    if got:   # the trace's writer per step over the untraced median step (goal at 96)
        add("scale, M=" + "/".join(str(M) for M, _ in got) + ": the trace's cost per step / "
            "the untraced step", " / ".join(f"{100 * t['cost_fraction']:.2f}% "
                                           f"({t['cost_ms_per_step']:.2f} ms)" for _, t in got),
            "<= 2% at 96", all(t["cost_fraction"] <= 0.02 for M, t in got if M == 96),
            "scale.json")
    for p in sk.get("planner", []):
        goal = 20 if p["M"] <= 96 else 100
        add(f"scale, planning per step (pure planner), M={p['M']}",
            f"{p['plan_ms_median']:.0f} ms", f"<= {goal} ms", p["plan_ms_median"] <= goal,
            "scale.json")


def summary(out: str) -> str:
    """The headline table, every figure read from the results files in ``out``."""
    rows = []

    def add(what, value, target, met, source):
        rows.append((what, value, target, "yes" if met else "no", source))

    pl = _load(out, "planner.json")
    if pl:
        n1000 = next((r for r in pl["plan_step"] if r["N"] == 1000), None)
        if n1000:
            add("plan_step at N=1000 (cyclic placement)", f"{n1000['plan_ms_median']:.0f} ms",
                "< 200 ms", n1000["plan_ms_median"] < 200, "planner.json")
        d = {r["speed_ratio"]: r for r in pl["design"]}
        if 4 in d:
            add("designed vs cyclic placement, E[c], speeds 1:4, equal storage",
                f"{d[4]['ratio_equal_storage']:.2f}x", "<= 1x", d[4]["ratio_equal_storage"] <= 1,
                "planner.json")
    gf = _load(out, "gfp_matmul.json")
    if gf and "targets" in gf:
        for k, v in gf["targets"].items():
            if isinstance(v, dict) and v.get("met") is not None:
                worst = v.get("worst")
                add("GF(p) matmul", "-" if worst is None else f"worst {worst:.2f}x", k,
                    bool(v["met"]), "gfp_matmul.json")
    rt = _load(out, "runtime.json")
    for i, (label, sc, base, bound) in enumerate((
            ("2 stragglers x5: USCTEC / uncoded (median step)", "stragglers", "uncoded", 0.4),
            ("2 stragglers x5: USCTEC / speculative", "stragglers", "speculative", 0.6),
            ("speeds 1..4x: USCTEC / cyclic CEC", "heterogeneous", "cyclic", 0.8),
            ("speeds 1..4x: USCTEC / ideal bound", "heterogeneous", "ideal", 1.3),
            ("20% churn per step: USCTEC / uncoded", "churn", "uncoded", 0.6)) if rt else ()):
        r = rt[sc]["usctec"]["median_s"] / rt[sc][base]["median_s"]
        add(f"runtime, {label}", f"{r:.2f}x", f"<= {bound}x", r <= bound, "runtime.json")
        u, fl = rt["stragglers"]["usctec"], rt["stragglers"].get("ray_floor")
        if i == 1 and fl:
            add("runtime overhead / (Ray's fan-out floor + decode), median",
                f"{fl['overhead_over_floor']:.2f}x ({1000 * u['median_overhead_s']:.0f} ms; "
                f"floor {1000 * fl['median_s']:.0f} ms)", "<= 1.5x",
                fl["overhead_over_floor"] <= 1.5, "runtime.json")
    if rt:
        lost = rt["churn"]["usctec"]["lost_steps"]
        add("runtime, 20% churn per step: lost steps", str(lost), "0", lost == 0, "runtime.json")
    # the 179 ms step with stragglers: 0.8x the best baseline (the two-level work's goal; 0.9x
    # before it)
    for name, bound, names in (("schedulers.json", 1.0, None),
                               ("schedulers_179ms.json", 0.8, ("stragglers",))):
        sc = _load(out, name)
        for key in sc["order"] if sc else ():
            s = sc["scenarios"][key]
            if names is not None and s["name"] not in names:
                continue
            d = s["usctec-auto"]
            add(f"runtime, {s['name']}, ideal step {s['ideal_s']:g} s: usctec-auto (default) / "
                f"best baseline ({s['best_baseline']})", f"{d['vs_best_baseline']:.2f}x "
                f"({d['over_ideal_median']:.2f}x ideal)", f"<= {bound}x",
                d["vs_best_baseline"] <= bound, name)
    sk = _load(out, "scale.json")
    if sk:
        _scale_rows(sk, add)
    sm = _load(out, "sim.json")
    if sm:
        for key, ratio, label, bound in (
                ("stragglers", "usctec/uncoded", "2 stragglers x5: USCTEC / uncoded", 0.4),
                ("stragglers", "usctec/speculative", "2 stragglers x5: USCTEC / speculative", 0.6),
                ("heterogeneous", "usctec/cyclic", "speeds 1..4x: USCTEC / cyclic", 0.8),
                ("heterogeneous", "usctec/ideal", "speeds 1..4x: USCTEC / ideal bound", 1.3),
                ("churn", "usctec/uncoded (median)", "20% churn: USCTEC / uncoded (median)", 0.6)):
            got = [(sc["N"], sc["ratios"][ratio]) for sc in sm.get(key, [])
                   if sc.get("ratios", {}).get(ratio) is not None]
            if got:  # one row per figure, the sizes side by side
                add(f"simulator N={'/'.join(str(n) for n, _ in got)}, {label}",
                    " / ".join(f"{v:.3f}x" for _, v in got), f"<= {bound}x",
                    all(v <= bound + 1e-9 for _, v in got), "sim.json")
    fi = _load(out, "sim_fidelity.json")
    if fi:
        rows_ = [r for c in fi["cases"] for r in c["policies"].values()]
        ok_r, ok_a = sum(r["ratio_met"] for r in rows_), sum(r["abs_met"] for r in rows_)
        add("simulator vs runtime, same traces: policy / dynamic within 15% (cases x policies)",
            f"{ok_r}/{len(rows_)}", "all", ok_r == len(rows_), "sim_fidelity.json")
        add("simulator vs runtime, same traces: median within 20% with the calibrated cost",
            f"{ok_a}/{len(rows_)}", "all", ok_a == len(rows_), "sim_fidelity.json")
    ss = _load(out, "sim_scale.json")
    for r in (ss or {}).get("sizes", []):
        if r.get("goal_s"):
            walls = {label: r[label]["wall_s"] for label in ("compute", "cost")}
            left = sorted(set(r["compute"]["policies"]) - set(r["cost"]["policies"]))
            note = f" (cost run without {', '.join(left)})" if left else ""
            add(f"simulator at N={r['N']:,}, {r['steps']} steps, five policies: simulator wall, "
                f"compute / cost model", f"{walls['compute']:.0f} s / {walls['cost']:.0f} s"
                f"{note}", f"< {r['goal_s']:.0f} s each",
                not left and all(w <= r["goal_s"] for w in walls.values()), "sim_scale.json")
    for r in (_load(out, "two_level.json") or {}).get("sizes", []):
        pols = ("usctec-auto", "usctec-pull")
        goal = "<= 1.3x / 2.0x" if r["N"] == 1000 else "<= 1.5x / 2.5x"
        runs = [(label, run) for label, run in r["runs"].items() if run.get("met") is not None]
        for level, group in (("one level", [x for x in runs if x[0] == "one level"]),
                             ("two levels, every group size", [x for x in runs
                                                               if x[0] != "one level"])):
            if not group:
                continue
            value = "; ".join((label.split(", ")[-1] + ": " if len(group) > 1 else "") +
                              " / ".join(f"{run['ratio'][p]:.2f}x" for p in pols)
                              for label, run in group)
            add(f"simulator at N={r['N']:,}, cost on {level} (a model): usctec-auto / "
                f"usctec-pull step / pure compute", value, goal,
                all(all(run["met"].values()) for _, run in group), "two_level.json")
    sw = _load(out, "sweeps.json")
    if sw:
        last = sw["slowdown"][-1]
        v = last["usctec"]["mean"] / last["uncoded"]["mean"]
        add(f"simulator sweep, stragglers x{last['x']}: USCTEC / uncoded", f"{v:.2f}x", "< 1x",
            v < 1, "sweeps.json")
    he = _load(out, "hetero.json")
    if he:
        for inst in he.get("paper_like", []):
            ig = inst.get("schemes", {}).get("iterated_greedy", {})
            red = ig.get("reduction_vs_uncoded")
            red2 = ig.get("reduction_vs_unbalanced_coded")
            if red is not None and red2 is not None:
                add(f"hetero masters {inst.get('M')}x{inst.get('N')}: iterated greedy below "
                    f"uncoded / unbalanced coded", f"{100 * red:.2f}% / {100 * red2:.2f}%",
                    "paper: 80% / 49%", red >= 0.80 and red2 >= 0.49, "hetero.json")
    _real_rows(out, add)
    _tail_rows(out, add)
    lines = ["| figure | measured | target | met | from |", "|---|---:|---:|:---:|---|"]
    lines += [f"| {a} | {b} | {c} | {d} | `benchmarks/results/{e}` |" for a, b, c, d, e in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["run", "summary", "plot", "calibrate", "docs"])
    ap.add_argument("--check", action="store_true",
                    help="docs: change nothing, fail if a doc's results block is stale")
    ap.add_argument("--quick", action="store_true", help="small sizes (under 3 minutes in all)")
    ap.add_argument("--out", default=None, help="results folder")
    ap.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(NAMES)}")
    a = ap.parse_args(argv)
    out = a.out or os.path.join(HERE, "results", "quick" if a.quick else "")
    out = os.path.normpath(out)
    os.makedirs(out, exist_ok=True)
    names = NAMES if a.only is None else tuple(a.only.split(","))
    bad = [n for n in names if n not in NAMES]
    if bad:
        print(f"--only: unknown benchmarks {bad}; known: {list(NAMES)}", file=sys.stderr)
        return 2
    if a.command == "plot":
        return plot_all(out, names)
    if a.command == "docs":  # benchmarks/docs_figures.py
        import docs_figures
        changed = docs_figures.update(ROOT, a.out or os.path.join(HERE, "results"), a.check)
        for path in changed:
            print(f"  {path}: {'stale' if a.check else 'updated'}")
        return 1 if a.check and changed else 0
    if a.command == "calibrate":  # the simulator's RuntimeCost (benchmarks/calibrate.py)
        import calibrate
        calibrate.run(a.quick, a.out or os.path.join(HERE, "results"))
        return 0
    timings = {}
    if a.command == "run":
        for n in names:
            t = time.time()
            print(f"== {n}", flush=True)
            run_one(n, a.quick, out)
            timings[n] = round(time.time() - t, 1)
            print(f"== {n}: {timings[n]} s", flush=True)
    table = summary(out)
    head = ("# Benchmark summary\n\nEvery figure below is read from a results file in this "
            f"folder, written by `python -m benchmarks run{' --quick' if a.quick else ''}`.\n\n")
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write(head + table)
    if timings:
        with open(os.path.join(out, "timings.json"), "w") as fh:
            json.dump(timings, fh, indent=1)
    print(table)
    if not a.quick and a.out is None:
        readme = os.path.join(ROOT, "README.md")
        text = open(readme).read()
        new = re.sub(r"(<!-- results:start -->\n).*?(<!-- results:end -->)",
                     lambda m: m.group(1) + table + "\nFull tables: `benchmarks/results/*.md`; "
                     "plots: `benchmarks/results/*.png`.\n" + m.group(2), text, flags=re.S)
        with open(readme, "w") as fh:
            fh.write(new)
        print("README results table updated")
        import docs_figures
        for path in docs_figures.update(ROOT, out):
            print(f"  {path}: results blocks updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
