"""Unified coding framework: measured (latency, load) points against the theory's envelope.

    python benchmarks/bench_unified.py [--quick] [--out DIR]

For K=6, mu=1/2, N=12, m=60 over GF(65521), each q in 2..6: the communication load counted from
the packets the scheme actually sends (a multicast once) and the Map latency (the q-th fastest of
the shifted-exponential draws), beside D(q), L(q), the envelope and the lower bound.  Full runs
measure on Ray (``ElasticCluster(A, "unified", ...)``, one cluster per q); ``--quick`` measures with
the in-process executor and a Monte Carlo of the latency model (no Ray).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import parser, publish, table  # noqa: E402

K, MU, N, M = 6, 0.5, 12, 60


def run(quick: bool = False, out_dir: str | None = None) -> dict:
    from elastic_coded.algebra import field
    from elastic_coded.families.unified import (
        latency_load,
        run_in_process,
        simulate_map_latency,
        tradeoff,
    )

    F = field("gf(65521)")
    rng = np.random.default_rng(0)
    A = F.random((M, 8), rng)
    X = F.random((8, N), rng)
    t0 = time.time()
    tr = tradeoff(K, MU, N)
    points = []
    qs = [q for q in range(2, K + 1) if N % q == 0]
    for q in qs:
        D, Lq = latency_load(K, MU, N, q)
        if not quick:
            load, latency = _on_ray(A, X, F, q)
            how = "ray"
        else:
            out = run_in_process(A, X, K, MU, q, field=F)
            assert np.array_equal(out.outputs, F.matmul(A, X))
            load = float(out.load)
            latency = float(simulate_map_latency(K, MU, N, q, 2000, np.random.default_rng(q)))
            how = "in-process + Monte Carlo"
        points.append({"q": q, "D": float(D), "L": float(Lq), "measured_latency": latency,
                       "measured_load": load, "how": how,
                       "envelope": float(next(p.envelope for p in tr.points if p.q == q)),
                       "lower_bound": float(next(p.lower_bound for p in tr.points if p.q == q))})
    res = {"quick": quick, "K": K, "mu": MU, "N": N, "m": M, "points": points,
           "wall_s": time.time() - t0}
    return publish(out_dir, "unified", res, to_markdown(res))


def _on_ray(A, X, F, q: int, time_scale: float = 0.05) -> tuple[float, float]:
    """Mean measured load and Map latency (time units) over 6 steps on the one runtime."""
    from elastic_coded.runtime import ElasticCluster

    with ElasticCluster(A, "unified", machines=K, mu=MU, q=q, N=N, field=F,
                        time_scale=time_scale, seed=1) as cluster:
        for _ in range(6):
            assert np.array_equal(cluster.multiply(X), F.matmul(A, X))
        reps = [r.extra for r in cluster.reports]
    return (float(np.mean([r["load"] for r in reps])),
            float(np.mean([r["map_s"] for r in reps])) / time_scale)


def to_markdown(res) -> str:
    keys = ("D", "measured_latency", "L", "measured_load", "envelope", "lower_bound")
    out = [f"# Unified scheme: K={res['K']}, mu={res['mu']}, N={res['N']}, m={res['m']}", "",
           *table("q | D(q) | measured latency | L(q) | measured load | envelope | lower bound "
                  "| measured by", "rrrrrrrl",
                  ([p["q"], *(f"{p[k]:.3f}" for k in keys), p["how"]] for p in res["points"]))]
    return "\n".join(out) + "\n"


def plot(res, out_dir: str) -> list[str]:
    """The theory's points, envelope and lower bound with the measured points, each joined to
    its q, and the setup in the title.  Returns the file written."""
    from fractions import Fraction

    from elastic_coded.families.unified import plot_tradeoff, tradeoff

    tr = tradeoff(res["K"], res["mu"], res["N"])
    how = {"ray": "on Ray, mean of 6 steps"}
    how = ", ".join(sorted({how.get(p["how"], p["how"]) for p in res["points"]}))
    ran = {p["q"] for p in res["points"]}
    skipped = [p.q for p in tr.points if p.q not in ran]
    note = (f"; q={','.join(map(str, skipped))} not run (N={res['N']} is not a multiple)"
            if skipped else "")
    path = os.path.join(out_dir, "unified_tradeoff.png")
    plot_tradeoff(tr, path,
                  measured={p["q"]: (p["measured_latency"], p["measured_load"])
                            for p in res["points"]},
                  title="Unified coding: Map latency against Shuffle load, per q",
                  caption=f"K={res['K']} servers, mu={Fraction(res['mu']).limit_denominator()}, "
                          f"N={res['N']} inputs, m={res['m']} rows, GF(65521)\nmeasured {how}"
                          f"{note}")
    return [path]


if __name__ == "__main__":
    a = parser(__doc__).parse_args()
    run(a.quick, a.out)
