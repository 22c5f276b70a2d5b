"""Machines at their real speed (no ``time_scale``), real stragglers, against what a user would
run instead.

    python benchmarks/bench_real.py [--quick] [--out DIR] [--machines N] [--steps N]

Workloads (``--quick``: small versions of each):

- ``dense``: ``A @ B``, ``A`` 12,000 x 2,000, ``B`` 2,000 x 16;
- ``sparse_8k`` and ``sparse_1m``: ``A @ x`` on the Google matrix of a power-law graph
  (:func:`elastic_coded.pagerank.power_law_graph`: rows of skewed length) of 8,000 nodes and
  80,000 edges, and of 1,000,000 nodes and 10,000,000 edges;
- ``pagerank``: PageRank to ``1e-10`` on a 300,000-node, 3,000,000-edge power-law graph, each
  power step one matvec (:func:`elastic_coded.pagerank.pagerank`).

Runners, side by side on one Ray session, in rotating blocks of steps on the same seeded inputs
(rotating, so a noisy moment of this shared host is spread over them): the default policy
(``usctec-auto``), ``usctec`` and ``dynamic`` on one cluster (each with its own speed estimates),
the hand-written plain-Ray pull scheduler (``handwritten_dynamic.py``, on the cluster's placement),
the plain-Ray floor (one actor per machine holding one row block, ``x`` put once, one call each) and
numpy / scipy in the driver's one process.  ``L=2, S=1``, ``field="real"``.

Stragglers, real (on the matvec and dense workloads; the same machine ``m0`` of each runner):

- ``stop300``: its worker process stopped (``SIGSTOP``) for the first 300 ms of every step;
- ``duty50``: stopped half the time (40 ms stopped, 40 ms running, throughout);
- ``hog``: a busy process pinned to the core that the process is pinned to;
- ``kill``: its worker process killed (``SIGKILL``) 5 ms into a step; the step decodes from the
  machines left, and the killed machine comes back in a fresh process for the steps after it
  (plain Ray's runners have no recovery: their failure is recorded).

Every product is compared with numpy's / scipy's (relative error at most ``1e-9``); the
machines present are counted after each straggler scenario (none may be excluded for being
slow).  Writes ``real.json``, ``real.md`` and ``real.png`` (``--quick``: ``real_quick.*``).
Ratios, not absolute times, are what the table reports: this host is shared and noisy.
"""

from __future__ import annotations

import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io as rio  # noqa: E402
from real_faults import Hog, Straggler, floor_start, floor_step, pid_of  # noqa: E402
from results_io import RESULTS, parser, publish, row, table  # noqa: E402

L, S = 2, 1
POLICIES = ("usctec-auto", "usctec", "dynamic")
PLAIN = ("hand-written", "plain-floor")
SCENARIOS = ("none", "stop300", "duty50", "hog", "kill")
QUICK_SCENARIOS = ("none", "stop300", "kill")
"""The quick run's (a check that the benchmark runs, in CI): the scenarios the goals read."""
TOL = 1e-9


# -- workloads ---------------------------------------------------------------------------------

def google_matrix(nodes: int, edges: int, seed: int):
    """The Google matrix of a seeded power-law graph, and its dangling nodes."""
    from elastic_coded import pagerank as pr

    return pr.google_matrix(pr.power_law_graph(nodes, edges, seed))


def workloads(quick: bool, rng) -> dict:
    """``{name: (A, inputs)}``; PageRank's entry is ``(M, dangling)``."""
    dn = (3000, 500) if quick else (12000, 2000)
    small = 2000 if quick else 8000
    big = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    pr_n = (50_000, 500_000) if quick else (300_000, 3_000_000)
    Ad = rng.standard_normal(dn)
    As, _ = google_matrix(small, 10 * small, 2)
    Ab, _ = google_matrix(*big, 0)
    return {"dense": (Ad, [rng.standard_normal((dn[1], 16)) for _ in range(4)]),
            "sparse_8k": (As, [rng.random(small) for _ in range(4)]),
            "sparse_1m": (Ab, [rng.random(big[0]) for _ in range(4)]),
            "pagerank": google_matrix(*pr_n, 3)}


# -- one workload ----------------------------------------------------------------------------------

def _err(y, ref) -> float:
    y, ref = np.asarray(y).reshape(ref.shape), np.asarray(ref)
    return float(np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-300))


class Runners:
    """Every runner of one workload, on one Ray session."""

    def __init__(self, A, machines: int):
        import handwritten_dynamic as hw
        from bench_sim_fidelity import settle

        from elastic_coded import ElasticCluster

        self.A, self.hw, self._settle = A, hw, settle
        self.c = ElasticCluster(A, "usctec-auto", machines, L=L, S=S,
                                run={"storage": min(1.0, (L + S + 1) / machines)})
        pl = self.c.placement()
        speeds = {m: 1.0 for m in pl.machines}
        self.hw_actors = hw.start(A, pl, speeds, 0.0)
        self.chunks = hw.chunks_of(pl, 4 * machines)
        self.floor = floor_start(A, machines)
        self.learnt: dict = {}
        self.last = ""  # the policy of the cluster's last step
        self.broken: dict = {}  # runner -> why it failed (a plain runner after a kill)

    def pids(self) -> dict:
        """The process of machine ``m0`` in each runner."""
        h = self.c._handles["m0"]
        cl = pid_of(getattr(h, "host", h))
        return {**{p: cl for p in POLICIES}, "hand-written": pid_of(self.hw_actors["m0"]),
                "plain-floor": pid_of(self.floor[0])}

    def settle(self) -> None:
        self._settle(self.c, [a for r, acts in (("hand-written", self.hw_actors.values()),
                                                ("plain-floor", self.floor))
                              if r not in self.broken for a in acts])

    def step(self, runner: str, x):
        if runner in POLICIES:
            c = self.c
            if runner in self.learnt and self.last != runner:  # its own estimates, of the
                here = set(c.machines())                         # machines still present
                c.restore_speed_estimates({m: v for m, v in self.learnt[runner].items()
                                           if m in here})
            self.last = runner
            y = c.multiply(x, policy=runner)
            self.learnt[runner] = c.speed_estimates()
            return y
        if runner == "hand-written":
            X = x.reshape(x.shape[0], -1)
            return self.hw.step(self.hw_actors, self.chunks, X, {}, self.A.shape[0])
        return floor_step(self.floor, x)

    def close(self) -> None:
        import ray

        for a in list(self.hw_actors.values()) + self.floor:
            ray.kill(a)
        self.c.shutdown()


def _timed(fn, x):
    t0 = time.perf_counter()
    y = fn(x)
    return y, time.perf_counter() - t0


ROUNDS = 3
"""Each scenario runs every runner in ``ROUNDS`` blocks (rotating which goes first): one untimed
step, then its timed steps back to back, so each step follows its own runner's step before (and
what that step left running: a coded step's redundant results still computing), never another
runner's; the processes settle between blocks."""


def _block(rs: Runners, r: str, kind: str, xs: list, refs: list, steps: range, fault,
           out: dict) -> None:
    """Runner ``r``'s steps ``steps`` (the first one untimed), faults around each hit step."""
    for n, i in enumerate(steps):
        if r in rs.broken:
            return
        x, ref = xs[i % len(xs)], refs[i % len(xs)]
        hit = kind != "kill" or (i == 1 and r in ("usctec-auto",) + PLAIN)
        if hit and n > 0:
            fault.before()
        try:
            y, t = _timed(lambda v: rs.step(r, v), x)
        except Exception as exc:  # a plain runner whose actor died: no recovery
            rs.broken[r] = out["failed"] = type(exc).__name__
            return
        finally:
            if hit and n > 0:
                fault.after()
        if n == 0:
            continue  # its leftovers land in the first timed step, as in a loop of steps
        out["times"].append(t)
        out["max_error"] = max(out["max_error"], _err(y, ref))
        if kind == "kill" and i == 1 and r == "usctec-auto":
            out["kill_step_error"] = _err(y, ref)


def run_scenario(rs: Runners, kind: str, xs: list, steps: int, local) -> dict:
    """``{runner: {"times": [...], "max_error": e, ...}, "local": {"times": [...]}}``.  A
    ``kill`` hits the default's process in its second timed step (the cluster's other policies
    run on the machines left) and each plain runner's own in its second timed step."""
    runners = POLICIES + PLAIN
    pids = rs.pids()
    refs = [local(x) for x in xs]
    out: dict = {r: {"times": [], "max_error": 0.0} for r in runners}
    out["local"] = {"times": []}
    faults = {pid: Straggler(kind, pid) for pid in set(pids.values())}
    hog = Hog(pids.values()) if kind == "hog" else None
    for f in faults.values():
        f.start()
    per = -(-(steps + (3 if kind == "kill" else 0)) // ROUNDS)
    seen = rs.c.reports.steps
    try:
        for k in range(ROUNDS):
            order = ("local",) + runners[k % len(runners):] + runners[:k % len(runners)]
            span = range(k * per - 1, (k + 1) * per) if k else range(-1, per)
            for r in order:
                if r == "local":
                    out["local"]["times"] += [_timed(local, xs[i % len(xs)])[1]
                                              for i in span[1:]]
                    continue
                _block(rs, r, kind, xs, refs, span, faults[pids[r]], out[r])
                if kind not in ("kill", "duty50"):
                    rs.settle()
    finally:
        for f in faults.values():
            f.stop()
        if hog is not None:
            hog.stop()
    out["machines_after"] = len(rs.c.machines())
    if kind == "kill":  # what the cluster's reports said of the kill (a machine not back: why)
        new = rs.c.reports[seen - rs.c.reports.steps:] if rs.c.reports.steps > seen else []
        out["faults"] = {k: [str(v) for r in new for v in getattr(r, k)]
                         for k in ("failed", "restarted", "not_restarted")}
    return out


PAGERANK_WARM = 5
"""Matvecs each PageRank runner makes, in turns, before any is timed: the first steps of a new
cluster pay its processes' first calls (several times a later step's time), which one
warm-up matvec before each run left to whichever runner went first."""


def pagerank_run(M, dangling, machines: int, quick: bool) -> dict:
    """PageRank to 1e-10 with each runner's matvec (one run each, after :data:`PAGERANK_WARM`
    warm-up matvecs of every runner, in turns, and one more of its own just before)."""
    from elastic_coded import pagerank as pr

    rs = Runners(M, machines)
    try:
        t0 = time.perf_counter()
        ref = pr.reference_pagerank(M, dangling)
        out = {"local": {"s": time.perf_counter() - t0, "iterations": ref.iterations}}
        x = np.full(M.shape[0], 1.0 / M.shape[0])
        for _ in range(PAGERANK_WARM):
            for r in POLICIES + PLAIN:
                rs.step(r, x)
        for r in POLICIES + PLAIN:
            rs.step(r, x)
            t0 = time.perf_counter()
            got = pr.pagerank(lambda v, r=r: np.ravel(rs.step(r, v)), M.shape[0], dangling)
            out[r] = {"s": time.perf_counter() - t0, "iterations": got.iterations,
                      "max_abs_diff": float(np.max(np.abs(got.ranks - ref.ranks)))}
            rs.settle()
    finally:
        rs.close()
    return out


def workload_run(A, xs, machines: int, steps: int, scenarios) -> dict:
    local = (lambda x: A @ x)
    rs = Runners(A, machines)
    try:
        for r in POLICIES + PLAIN:  # warm-up: plans, speed estimates, the actors' first calls
            for x in xs[:2]:
                rs.step(r, x)
        return {k: run_scenario(rs, k, xs, steps, local) for k in scenarios}
    finally:
        rs.close()


def run(quick: bool, out: str, machines: int = 6, steps: int | None = None,
        cpus: int | None = None) -> dict:
    steps = steps or (3 if quick else 9)
    cpus = cpus or os.cpu_count() or 2
    rng = np.random.default_rng(7)
    t0 = time.time()
    wl = workloads(quick, rng)
    ray = rio.start_ray(max(cpus, machines + 2), fresh=True)
    res = {"quick": quick, "machines": machines, "cpus": os.cpu_count(), "L": L, "S": S,
           "steps": steps, "host": platform.machine(), "workloads": {}}
    try:
        for name in ("dense", "sparse_8k", "sparse_1m"):
            A, xs = wl[name]
            scen = (QUICK_SCENARIOS if quick else SCENARIOS) if name in ("dense", "sparse_1m") \
                else ("none",)
            res["workloads"][name] = {"shape": list(A.shape), "nnz": int(getattr(A, "nnz", 0)),
                                      **workload_run(A, xs, machines, steps, scen)}
            print(f"{name}: done at {time.time() - t0:.0f} s", file=sys.stderr)
        M, dangling = wl["pagerank"]
        res["pagerank"] = {"nodes": M.shape[0], "nnz": int(M.nnz),
                           **pagerank_run(M, dangling, machines, quick)}
    finally:
        ray.shutdown()
    res["wall_s"] = time.time() - t0
    res["goals"] = goals(res)
    return publish(out, "real_quick" if quick else "real", res, markdown(res), plot)


# -- figures -------------------------------------------------------------------------------------

def med(xs) -> float:
    return float(np.median(xs)) if len(xs) else float("nan")


def ratio(res: dict, wl: str, runner: str, scen: str = "none", base: str = "local") -> float:
    s = res["workloads"][wl][scen]
    return med(s[runner]["times"]) / med(s[base]["times"])


def goals(res: dict) -> list:
    """``[(what, measured, target, met)]``: the issue's goals, from this run."""
    w = res["workloads"]
    g = []
    r = ratio(res, "sparse_1m", "usctec-auto")
    g.append(("sparse 1M matvec: default / scipy one process", r, 1.0, r <= 1.0))
    r = ratio(res, "sparse_8k", "usctec-auto", base="plain-floor")
    g.append(("sparse 8k matvec: default / plain-Ray floor", r, 2.0, r <= 2.0))
    r = ratio(res, "dense", "usctec-auto")
    g.append(("dense A @ B: default / numpy", r, 1.6, r <= 1.6))
    for wl in ("sparse_1m", "dense"):
        st, none = w[wl]["stop300"]["usctec-auto"], w[wl]["none"]["usctec-auto"]
        r = med(st["times"]) / med(none["times"])
        ok = r <= 1.5 and st["max_error"] <= TOL and w[wl]["stop300"]["machines_after"] \
            == res["machines"]
        g.append((f"{wl}: default, one process stopped 300 ms a step / unstopped", r, 1.5, ok))
        k = w[wl]["kill"]["usctec-auto"]
        after = med(k["times"][2:]) / med(none["times"])
        ok = k.get("kill_step_error", 1.0) <= TOL and k["max_error"] <= TOL \
            and "failed" not in k and len(k["times"]) > 2
        target = res["machines"] / (res["machines"] - 1) * 1.25
        g.append((f"{wl}: default, a worker process killed: steps after / before (the kill "
                  f"step exact and every later step run: {'yes' if ok else 'no'})", after,
                  target, ok and after <= target))
    return g


def markdown(res: dict) -> str:
    ms = res["machines"]
    lines = [f"# Real speed: {ms} machines on {res['cpus']} CPUs ({res['host']}), L={L}, S={S}",
             "", "Machines at their real speed, median step as the caller sees it over "
             f"{res['steps']} steps, as a ratio to numpy / scipy in one process on the same "
             "inputs (in rotating blocks of steps, each runner's steps back to back). Errors: the "
             "largest relative error of any product against numpy / scipy.", "",
             *table(["workload", "straggler", *POLICIES, *PLAIN, "max error"],
                    "ll" + "r" * (len(POLICIES + PLAIN) + 1))]
    for wl, d in res["workloads"].items():
        for scen in SCENARIOS:
            if scen not in d:
                continue
            s = d[scen]
            cells = []
            for r in POLICIES + PLAIN:
                cells.append(f"fails ({s[r]['failed']})" if "failed" in s[r] and not
                             s[r]["times"] else f"{ratio(res, wl, r, scen):.2f}x")
            err = max(s[r]["max_error"] for r in POLICIES)
            lines.append(row([wl, scen, *cells, f"{err:.1e}"]))
    p = res["pagerank"]
    lines += ["", f"PageRank to 1e-10, {p['nodes']:,} nodes, {p['nnz']:,} nonzeros "
              f"(scipy: {p['local']['iterations']} iterations): time / scipy's, largest "
              "difference of a rank from scipy's", "",
              *table("runner | time / scipy | iterations | max diff", "lrrr")]
    for r in POLICIES + PLAIN:
        lines.append(f"| {r} | {p[r]['s'] / p['local']['s']:.2f}x | {p[r]['iterations']} | "
                     f"{p[r]['max_abs_diff']:.1e} |")
    lines += ["", "## Goals", "", *table("goal | measured | target | met", "lrrc", (
        [what, f"{v:.2f}x", f"<= {t:.2f}x", rio.yes(ok)] for what, v, t, ok in res["goals"]))]
    lines += ["", f"Wall time {res['wall_s']:.0f} s."]
    return "\n".join(lines) + "\n"


def plot(res: dict, out: str) -> None:
    plt = rio.pyplot()
    runners = POLICIES + PLAIN
    rows = [(wl, s) for wl, d in res["workloads"].items() for s in SCENARIOS if s in d]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    w = 0.8 / len(runners)
    for i, r in enumerate(runners):
        vals = [ratio(res, wl, r, s) if res["workloads"][wl][s][r]["times"] else 0.0
                for wl, s in rows]
        ax.bar(np.arange(len(rows)) + i * w, vals, w, label=r)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(rows)) + 0.4 - w / 2)
    ax.set_xticklabels([f"{wl}\n{s}" for wl, s in rows], fontsize=7)
    ax.set_ylabel("median step / numpy or scipy")
    ax.set_yscale("log")
    ax.set_title(f"Real speed, {res['machines']} machines on {res['cpus']} CPUs "
                 "(0: the runner failed)")
    ax.legend(fontsize=8)
    rio.save(fig, os.path.join(out, "real_quick.png" if res["quick"] else "real.png"), 110)


def main() -> None:
    ap = parser(__doc__, RESULTS)
    ap.add_argument("--machines", type=int, default=6)
    ap.add_argument("--steps", type=int, default=None)
    a = ap.parse_args()
    run(a.quick, a.out if not a.quick else os.path.join(a.out, "quick"), a.machines, a.steps)


if __name__ == "__main__":
    main()
