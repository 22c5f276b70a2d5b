"""Every policy against what a Ray user would write instead, side by side on the same seeded
traces, at two step sizes.

    python benchmarks/bench_schedulers.py [--quick] [--workers 12] [--sizes 0.05,1.0]

The baselines that count:

* ``dynamic``: cut the rows into equal chunks, two chunks in flight per machine, each machine
  pulling the next chunk among the rows it stores, and once none is left a backup copy of each
  chunk still running; the first copy wins (Dask's work stealing plus Spark's speculation, by
  hand).  Tuned: the best of 2, 4 and 8 chunks per machine in each scenario and step size.
* ``proportional``: uncoded, rows split in proportion to the speed estimates, wait for all.
* ``hand-written``: the same scheduler as ``dynamic`` written in plain Ray, outside this
  runtime (``handwritten_dynamic.py``), on the same placement and emulation rule (fixed
  membership only).

against the default ``usctec-auto`` and the other policies (``usctec-pull``, ``usctec`` with
the whole plan at once, ``speculative``, ``uncoded``, ``cyclic``).

Setup (the emulation rule of every runtime benchmark): ``N`` machines with persistent speeds
1..4, a call taking ``work / speed * time_scale * slow`` seconds, ``work`` its products over
those of ``A @ B``; ``L=4, S=2``, storage budget 1.0, designed placement, speeds learnt.  The
step size is the *ideal step*: ``A @ B`` spread perfectly over the machines' speeds, no
redundancy (``time_scale / sum of speeds``).  Scenarios:

* ``stragglers``: two random machines slowed 5x every step and, one step in four, a third 20x;
* ``heterogeneous``: the persistent speeds only;
* ``churn``: the stragglers plus machines leaving, crashing mid-step and joining (about 15% of
  the machines per step), each policy on its own cluster fed the same churn script.

In ``stragglers`` and ``heterogeneous`` every policy runs every step of the trace on one
cluster, interleaved, so a noisy moment hits them all, each step once every worker process has
answered a call made after the step before (so a pull step's cancelled calls do not run into
the next policy's step); each keeps its own learnt speeds
(``speed_estimates`` / ``restore_speed_estimates`` around its steps), as if it ran alone.
Shared, one trace step's stragglers would be measured once per policy, so a one-step straggler
would fill every machine's window of recent measurements and be planned slow at the next
step, which hurts the policies that plan with the learnt speeds and not the others.

Per policy: median, mean and p95 step time, the ratio of the median to the best baseline's,
the median ratio to the *ideal bound* of each step (its work over the sum of the speeds of the
machines present, each divided by its slowdown), and the products computed over those of
``A @ B``.  Every product is checked against numpy.  Writes ``benchmarks/results/schedulers
.json``, ``.md`` and ``schedulers.png`` (``schedulers_TAG.*`` for a ``--tag`` or ``--quick``
run).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io as rio  # noqa: E402
from results_io import check_product, machine, parser, publish, row, table, yes  # noqa: E402

L, S = 4, 2
CODED = ("usctec-auto", "usctec-pull", "usctec", "cyclic")
UNCODED = ("speculative", "uncoded", "proportional")
CHUNKS = (2, 4, 8)
BASELINES = ("dynamic", "proportional")
DEFAULT = "usctec-auto"


def _speeds(n: int) -> np.ndarray:
    return np.linspace(1.0, 4.0, n)


def _slowdowns(n_steps: int, machines: list, seed: int, stragglers: bool) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n_steps):
        if not stragglers:
            out.append({})
            continue
        pick = rng.choice(len(machines), 3, replace=False)
        slow = {machines[pick[0]]: 5.0, machines[pick[1]]: 5.0}
        if k % 4 == 3:
            slow[machines[pick[2]]] = 20.0
        out.append(slow)
    return out


def _ideal(report, emulated: dict, slow: dict, ts: float) -> float:
    """The step's ideal bound: its work over the speeds present, each over its slowdown."""
    eff = sum(emulated[m] / slow.get(m, 1.0) for m in report.available if m in emulated)
    return ts / eff


def _row(reports, ideals, times=None) -> dict:
    """A run's figures: from its ``reports``, or from its step ``times`` alone (no work)."""
    t = np.array([r.t_total for r in reports] if times is None else times)
    work = [r.products / r.useful_products for r in reports]
    return {**rio.stats(t), "over_ideal_median": float(np.median(t / np.array(ideals))),
            "work": float(np.mean(work)) if work else float("nan"),
            "modes": sorted({r.extra.get("mode", "") for r in reports} - {""})}


def _variants():
    """(label, policy, chunks per machine or None) for every run of a step."""
    out = [(p, p, None) for p in CODED + UNCODED]
    out += [(f"dynamic/{k}", "dynamic", k) for k in CHUNKS]
    return out


def _multiply(c, B, policy, chunks, ev, learnt=None, lab=None):
    """One step of ``policy``; with ``learnt`` (``{label: speed estimates}``), on the speeds
    run ``lab`` learnt from its own steps alone."""
    if chunks is not None:
        c.options = replace(c.options, chunks=chunks)
    if learnt is not None and lab in learnt:
        c.restore_speed_estimates(learnt[lab])
    Y = c.multiply(B, policy=policy, events=ev)
    if learnt is not None:
        learnt[lab] = c.speed_estimates()
    return Y


def fixed_membership(n, steps, ideal_s, rng, stragglers: bool) -> dict:
    """One cluster, every policy on every step of the same trace (interleaved, so a noisy
    moment hits them all)."""
    import handwritten_dynamic as hw
    import ray
    from bench_sim_fidelity import settle

    from elastic_coded.churn import StepEvents
    from elastic_coded.runtime import ElasticCluster

    sp = _speeds(n)
    ts = ideal_s * sp.sum()
    ms = [{"id": f"m{i}", "speed": float(s), "storage": 1.0} for i, s in enumerate(sp)]
    emulated = {m["id"]: m["speed"] for m in ms}
    A = rng.standard_normal((1200, 60))
    slows = _slowdowns(steps, list(emulated), 11, stragglers)
    runs = {lab: [] for lab, _, _ in _variants()}
    plain = {f"hand-written/{k}": [] for k in CHUNKS}
    ideals = []
    with ElasticCluster(A, L=L, S=S, machines=ms, time_scale=ts, placement="design",
                        num_cpus=os.cpu_count()) as c:
        placement = c.placement()
        actors = hw.start(A, placement, emulated, ts)
        cuts = {k: hw.chunks_of(placement, k * n) for k in CHUNKS}
        B = rng.standard_normal((60, 8))
        learnt: dict = {}  # each run's own speed estimates (see the module docstring)
        for _ in range(2):  # warm-up (actors, first plans, speeds) on the first step's trace
            for lab, p, k in _variants():
                _multiply(c, B, p, k, StepEvents(slow=slows[0]), learnt, lab)
            for k in CHUNKS:
                hw.step(actors, cuts[k], B, slows[0], A.shape[0])
        for step, slow in enumerate(slows):
            B = rng.standard_normal((60, 8))
            for lab, p, k in _variants():
                settle(c)  # the step before's cancelled calls are gone (bench_sim_fidelity)
                check_product(_multiply(c, B, p, k, StepEvents(slow=slow), learnt, lab), A, B)
                runs[lab].append(c.reports[-1])
            for k in CHUNKS:
                settle(c, actors.values())
                t = time.perf_counter()
                Y = hw.step(actors, cuts[k], B, slow, A.shape[0])
                plain[f"hand-written/{k}"].append(time.perf_counter() - t)
                check_product(Y, A, B)
            ideals.append(_ideal(c.reports[-1], emulated, slow, ts))
            print(f"\r  {'stragglers' if stragglers else 'heterogeneous'} {ideal_s:g} s: step "
                  f"{step + 1}/{steps}", end="", flush=True)
        for a in actors.values():
            ray.kill(a)
    print()
    out = {lab: _row(r, ideals) for lab, r in runs.items()}
    out.update({lab: _row((), ideals, t) for lab, t in plain.items()})
    return out


def churn(n, steps, ideal_s, rng) -> dict:
    """Each policy on its own cluster, the same churn script and slowdowns."""
    from elastic_coded.churn import StepEvents, parse_churn
    from elastic_coded.runtime import ElasticCluster

    sp = _speeds(n)
    ts = ideal_s * sp.sum()
    A = rng.standard_normal((1200, 60))
    Bs = [rng.standard_normal((60, 8)) for _ in range(steps + 2)]
    spec = {"seed": 5, "random": {"leave": 0.05, "crash": 0.05, "join": 0.05,
                                  "per_machine": True, "join_speed": [1, 4],
                                  "join_storage": 1.0, "min_machines": L + S + 2}}
    out = {}
    for lab, p, k in _variants():
        ms = [{"id": f"m{i}", "speed": float(s), "storage": 1.0} for i, s in enumerate(sp)]
        emulated = {m["id"]: m["speed"] for m in ms}
        script = parse_churn(spec).generator()
        with ElasticCluster(A, p, L=L, S=S, machines=ms, time_scale=ts, placement="design",
                            num_cpus=os.cpu_count(), allow_lower_S=True) as c:
            if k is not None:
                c.options = replace(c.options, chunks=k)
            slows = _slowdowns(steps, sorted(c.machines()), 11, True)
            for B in Bs[:2]:  # warm-up on the first step's slowdowns
                c.multiply(B, events=StepEvents(slow=slows[0]))
            reports, ideals = [], []
            for step, B in enumerate(Bs[2:]):
                ev = script.events(step, c.machines(), L + S)
                for j in ev.join:
                    emulated[j.id] = j.speed
                present = [m for m in c.machines() if m not in ev.leave]
                slow = {m: f for m, f in slows[step].items() if m in present}
                ev = replace(ev, slow=slow)
                check_product(c.multiply(B, events=ev), A, B)
                reports.append(c.reports[-1])
                ideals.append(_ideal(c.reports[-1], emulated, slow, ts))
            s = c.summary()
        row = _row(reports, ideals)
        row.update({"joins": s["joins"], "leaves": s["leaves"], "crashes": s["failures"]})
        out[lab] = row
        print(f"\r  churn {ideal_s:g} s: {lab} done", end="", flush=True)
    print()
    return out


def _best(res: dict, name: str) -> dict:
    """``name`` (``dynamic`` or ``hand-written``): the best chunk count's figures, and which."""
    lab = min((f"{name}/{k}" for k in CHUNKS), key=lambda x: res[x]["median_s"])
    return dict(res[lab], chunks_per_machine=int(lab.split("/")[1]))


def finish(res: dict) -> dict:
    res["dynamic"] = _best(res, "dynamic")
    bases = list(BASELINES)
    if any(k.startswith("hand-written/") for k in res):
        res["hand-written"] = _best(res, "hand-written")
        bases.append("hand-written")
    best = min(bases, key=lambda p: res[p]["median_s"])
    res["best_baseline"] = best
    for _lab, r in res.items():
        if isinstance(r, dict) and "median_s" in r:
            r["vs_best_baseline"] = r["median_s"] / res[best]["median_s"]
    return res


def to_markdown(res: dict) -> str:
    m = res["machine"]
    lines = [f"# Policies against the hand-written baselines ({res['tag']})", "",
             f"{res['workers']} emulated machines (Ray actors, speeds 1..4) on {m['cpus']} CPUs, "
             f"L={L}, S={S}, storage 1.0, {res['steps']} steps per policy after 2 warm-up "
             f"steps (on the first step's slowdowns), every product checked against numpy.  "
             f"Step size = the ideal step (no redundancy, perfect split over the speeds).  "
             f"`dynamic` is the best of {', '.join(str(k) for k in CHUNKS)} chunks per "
             f"machine; `hand-written` is the same scheduler written in plain Ray outside this "
             f"runtime "
             f"(`benchmarks/handwritten_dynamic.py`, fixed membership only: it has no "
             f"elasticity), best of the same chunk counts.  The best baseline is the fastest "
             f"of `dynamic`, `proportional` and `hand-written`.  Command: "
             f"`{res['command']}`.", ""]
    lines += table("scenario | ideal step | default (usctec-auto) median | best baseline | its "
                   "median | default / best baseline | default / ideal bound | met (<= 1.0x)",
                   "lrrlrrrc")
    for key in res["order"]:
        sc = res["scenarios"][key]
        d, b = sc[DEFAULT], sc[sc["best_baseline"]]
        lines.append(row([sc["name"], f"{sc['ideal_s']:g} s", f"{d['median_s']:.3f} s",
                          sc["best_baseline"], f"{b['median_s']:.3f} s",
                          f"{d['vs_best_baseline']:.2f}x", f"{d['over_ideal_median']:.2f}x",
                          yes(d["vs_best_baseline"] <= 1.0)]))
    for key in res["order"]:
        sc = res["scenarios"][key]
        lines += ["", f"## {sc['name']}, ideal step {sc['ideal_s']:g} s", "",
                  *table("policy | median (s) | mean (s) | p95 (s) | vs best baseline | vs "
                         "ideal bound | work (products / A@B)", "lrrrrrr")]
        labs = [DEFAULT] + [p for p in CODED + UNCODED if p != DEFAULT] + ["dynamic"]
        labs += ["hand-written"] if "hand-written" in sc else []
        for lab in labs:
            r = sc[lab]
            name = lab + (f" ({r['chunks_per_machine']} chunks/machine)"
                          if lab in ("dynamic", "hand-written") else "")
            if r.get("modes"):
                name += f" [{'/'.join(r['modes'])}]"
            work = "-" if r["work"] != r["work"] else f"{r['work']:.2f}"
            lines.append(f"| {name} | {r['median_s']:.3f} | {r['mean_s']:.3f} | "
                         f"{r['p95_s']:.3f} | {r['vs_best_baseline']:.2f}x | "
                         f"{r['over_ideal_median']:.2f}x | {work} |")
    return "\n".join(lines) + "\n"


def plot(res: dict, out_dir: str) -> list:
    plt = rio.pyplot()
    keys = res["order"]
    labs = [p for p in (DEFAULT, "usctec-pull", "usctec", "speculative", "dynamic",
                        "proportional", "hand-written")
            if all(p in res["scenarios"][k] for k in keys)]
    fig, ax = plt.subplots(figsize=(9, 4.8))
    x = np.arange(len(keys))
    w = 0.8 / len(labs)
    for i, lab in enumerate(labs):
        vals = [res["scenarios"][k][lab]["vs_best_baseline"] for k in keys]
        ax.bar(x + (i - len(labs) / 2 + 0.5) * w, vals, w, label=lab,
               hatch=["", "//", "..", "xx", "\\\\", "--", "++"][i], edgecolor="black",
               linewidth=0.4)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{res['scenarios'][k]['name']}\n{res['scenarios'][k]['ideal_s']:g} s"
                        for k in keys], fontsize=8)
    ax.set_ylabel("median step / best baseline's")
    ax.set_title(f"{res['workers']} emulated machines, speeds 1..4, L={L}, S={S}: median step "
                 f"time over the best hand-written baseline", fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    tag = res.get("tag", "full")
    return [rio.save(fig, os.path.join(out_dir, "schedulers.png" if tag == "full" else
                                   f"schedulers_{tag}.png"), 120)]


def run(quick: bool = False, out_dir: str | None = None, workers: int = 12,
        sizes: tuple = (0.05, 1.0), tag: str = "", steps: int | None = None) -> dict:
    global CODED, UNCODED, CHUNKS
    steps = steps or (2 if quick else 12)
    scenarios = ("stragglers", "heterogeneous", "churn")
    if quick:  # well-formed results in seconds (the test suite runs it), not figures
        sizes, workers, scenarios = (0.05,), min(workers, 6), scenarios[:2]
        CODED, UNCODED, CHUNKS = ("usctec-auto", "usctec"), ("proportional",), (4,)
    rng = np.random.default_rng(0)
    rio.start_ray()
    t0 = time.time()
    cmd = "python benchmarks/bench_schedulers.py" + (" --quick" if quick else "") + \
        (f" --workers {workers}" if workers != 12 else "") + \
        (f" --sizes {','.join(f'{x:g}' for x in sizes)}" if tuple(sizes) != (0.05, 1.0) else "") + \
        (f" --steps {steps}" if steps else "") + (f" --tag {tag}" if tag else "")
    res = {"tag": tag or ("quick" if quick else "full"), "workers": workers, "steps": steps,
           "sizes": list(sizes), "command": cmd, "scenarios": {}, "order": [],
           "machine": machine("ray")}
    for name, fn in (("stragglers", lambda s: fixed_membership(workers, steps, s, rng, True)),
                     ("heterogeneous", lambda s: fixed_membership(workers, steps, s, rng, False)),
                     ("churn", lambda s: churn(workers, steps, s, rng))):
        if name not in scenarios:
            continue
        for size in sizes:
            key = f"{name}@{size:g}"
            sc = finish(fn(size))
            sc.update({"name": name, "ideal_s": size})
            res["scenarios"][key] = sc
            res["order"].append(key)
    res["wall_s"] = time.time() - t0
    name = "schedulers" + (f"_{tag}" if tag else ("_quick" if quick else ""))
    return publish(out_dir, name, res, to_markdown(res), plot)


if __name__ == "__main__":
    ap = parser(__doc__)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--sizes", default="0.05,1.0")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    run(a.quick, a.out, a.workers, tuple(float(x) for x in a.sizes.split(",")), a.tag, a.steps)
