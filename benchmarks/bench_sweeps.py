"""Simulator sweeps: step time against straggler slowdown, speed heterogeneity, churn rate and N,
every policy on the same seeded trace per point (USCTEC, the baselines and the ideal bound).

    python benchmarks/bench_sweeps.py [--quick] [--out DIR]

Writes sweeps.json (and sweeps.md) in the results folder; ``benchmarks/__main__.py`` draws them.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import parser, publish, pyplot, save, table  # noqa: E402

L, S = 4, 2
POLICIES = ("uncoded", "speculative", "cyclic", "usctec", "ideal")


def _point(N, steps, seed=0, **kw) -> dict:
    from elastic_coded.sim import simulate

    res = simulate(N, steps, L=L, S=S, policies=POLICIES, seed=seed, **kw)
    return {p: {"mean": res.summary[p]["mean"], "median": res.summary[p]["median"]}
            for p in POLICIES}


def run(quick: bool = False, out_dir: str | None = None) -> dict:
    from elastic_coded.churn import ChurnScript, RandomChurn
    from elastic_coded.sim import IIDStragglers, LinearSpeeds

    N = 60 if quick else 200
    steps = 40 if quick else 200
    t0 = time.time()
    res = {"quick": quick, "N": N, "steps": steps, "L": L, "S": S, "policies": list(POLICIES)}
    res["slowdown"] = [
        {"x": f, **_point(N, steps, delays=IIDStragglers(k=2, factor=f))}
        for f in ((1, 5, 10) if quick else (1, 2, 3, 5, 8, 12))]
    res["heterogeneity"] = [
        {"x": r, **_point(N, steps, speeds=LinearSpeeds(1.0, float(r)),
                          delays=IIDStragglers(k=2, factor=5))}
        for r in ((1, 4) if quick else (1, 2, 4, 8))]
    res["churn"] = []
    for rate in ((0.0, 0.2) if quick else (0.0, 0.05, 0.1, 0.2, 0.3)):
        churn = ChurnScript(random=RandomChurn(leave=rate / 4, crash=rate / 4, join=rate / 2,
                                               per_machine=True, min_machines=L + S + 1), seed=3)
        res["churn"].append({"x": rate, **_point(N, steps, churn=churn,
                                                 delays=IIDStragglers(k=2, factor=5))})
    res["N"] = N
    res["scale_steps"] = 30 if quick else 100
    res["scale"] = [
        {"x": n, **_point(n, res["scale_steps"], delays=IIDStragglers(k=max(2, n // 50), factor=5))}
        for n in ((50, 200) if quick else (100, 500, 1000, 2000))]
    res["wall_s"] = time.time() - t0
    return publish(out_dir, "sweeps", res, to_markdown(res))


SWEEPS = (("slowdown", "straggler slowdown factor (2 stragglers per step)"),
          ("heterogeneity", "speed spread (fastest / slowest, persistent)"),
          ("churn", "churn rate (fraction of machines leaving or joining per step)"),
          ("scale", "N machines (N/50 stragglers per step)"))


def to_markdown(res) -> str:
    out = [f"# Simulator sweeps (mean step time, time units; N={res['N']} unless swept, "
           f"{res['steps']} steps, L={res['L']}, S={res['S']})", ""]
    for key, label in SWEEPS:
        out += [f"## {label}", "", *table(["x", *res["policies"], "usctec / uncoded"], "r")]
        for pt in res[key]:
            out.append(f"| {pt['x']} | "
                       + " | ".join(f"{pt[p]['mean']:.4g}" for p in res["policies"])
                       + f" | {pt['usctec']['mean'] / pt['uncoded']['mean']:.2f} |")
        out.append("")
    return "\n".join(out)


# one marker, line style and colour per policy; cyclic's hollow diamonds are drawn larger than
# usctec's triangles so that the two stay visible where their curves coincide
STYLES = {
    "uncoded": dict(color="tab:blue", marker="o", linestyle="-"),
    "speculative": dict(color="tab:orange", marker="s", linestyle="-."),
    "cyclic": dict(color="tab:green", marker="D", linestyle="--", markersize=10,
                   markerfacecolor="none", markeredgewidth=1.5),
    "usctec": dict(color="tab:red", marker="^", linestyle="-", markersize=5, linewidth=2),
    "ideal": dict(color="black", marker="", linestyle=":", linewidth=1.5),
}


def _setup(res, key) -> str:
    """The sweep's setup, one line: what is fixed while ``key`` varies."""
    base = f"simulator, L={res['L']}, S={res['S']}"
    fixed = f"N={res['N']} machines, {res['steps']} steps"
    return {
        "slowdown": f"{base}, {fixed}, 2 stragglers per step slowed by the factor",
        "heterogeneity": f"{base}, {fixed}, speeds spread evenly from 1 to the ratio, "
                         f"2 stragglers x5",
        "churn": f"{base}, {fixed}, 2 stragglers x5; per machine and step, a leave or a "
                 f"crash with probability rate/4 each, a join with rate/2",
        "scale": f"{base}, {res.get('scale_steps', 30 if res['quick'] else 100)} steps, "
                 f"N/50 stragglers x5",
    }[key]


def _coinciding(res, key) -> list[list[str]]:
    """Groups of policies whose mean step times agree (to 0.5%) at every point of the sweep."""
    groups: list[list[str]] = []
    for p in res["policies"]:
        for g in groups:
            if all(abs(pt[p]["mean"] - pt[g[0]]["mean"]) <= 5e-3 * pt[g[0]]["mean"]
                   for pt in res[key]):
                g.append(p)
                break
        else:
            groups.append([p])
    return [g for g in groups if len(g) > 1]


def plot(res, out_dir: str) -> list[str]:
    """One PNG per sweep, every policy on the same axes with its own marker and line style,
    the setup in the title and the curves that coincide named.  Returns the files written."""
    plt = pyplot()
    files = []
    for key, label in SWEEPS:
        fig, ax = plt.subplots(figsize=(7.5, 4.2))
        xs = [pt["x"] for pt in res[key]]
        for p in res["policies"]:
            ax.plot(xs, [pt[p]["mean"] for pt in res[key]], label=p, **STYLES.get(p, {}))
        same = "; ".join(" = ".join(g) for g in _coinciding(res, key))
        ax.set_xlabel(label)
        ax.set_ylabel("mean step time (time units)")
        if key == "scale":
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9,
                  title="policy", title_fontsize=9)
        ax.set_title(f"Mean step time against {label.split(' (')[0]}\n"
                     + textwrap.fill(_setup(res, key), 90)
                     + (f"\ncurves that coincide: {same}" if same else ""), fontsize=9)
        files.append(save(fig, os.path.join(out_dir, f"sweep_{key}.png"), 100))
    return files


if __name__ == "__main__":
    a = parser(__doc__).parse_args()
    run(a.quick, a.out)
