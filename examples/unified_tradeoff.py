"""The latency-load tradeoff of the unified coding framework, measured on Ray (MATH.md §2).

K = 6 machines each store half of A (m = 60 rows, over GF(65521)); N = 12 inputs per step.  For
each q (wait for the fastest q servers) a cluster of the one runtime (``ElasticCluster(A,
"unified", mu=, q=, N=)``) stores A designed for that q and runs a few steps.  The table puts beside
the theory:

* Map latency, in time units: the theory's mean D(q); the mean over the steps of the q-th
  smallest drawn latency (the latency model's own draw); and the mean measured wall time to the
  q-th finish divided by the time scale (the model's time plus the runtime's overhead);
* communication: the theory's L(q) and the load measured from the packets the servers sent.

Run:  python examples/unified_tradeoff.py [--steps 8] [--time-scale 0.02] [--plot tradeoff.png]
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import numpy as np
import ray

from elastic_coded.algebra import field
from elastic_coded.families.unified import latency_load, plot_tradeoff, tradeoff
from elastic_coded.runtime import ElasticCluster

K, MU, M, N_COLS, N = 6, Fraction(1, 2), 60, 8, 12
QS = (2, 3, 4, 6)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8, help="steps per q (default 8)")
    ap.add_argument("--time-scale", type=float, default=0.02,
                    help="seconds per time unit of the latency model (default 0.02)")
    ap.add_argument("--plot", metavar="FILE.png", help="also plot theory and measurements")
    args = ap.parse_args()

    F = field("gf(65521)")
    rng = np.random.default_rng(0)
    A = F.random((M, N_COLS), rng)
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows = []
    try:
        for q in QS:
            with ElasticCluster(A, "unified", machines=K, mu=MU, q=q, N=N, field=F,
                                time_scale=args.time_scale, seed=7) as cluster:
                for _ in range(args.steps):
                    X = F.random((N_COLS, N), rng)
                    if not F.equal(cluster.multiply(X), F.matmul(A, X)):
                        raise SystemExit(f"q={q}: wrong result")
                reps = [r.extra for r in cluster.reports]
                D, L = latency_load(K, MU, N, q)
                rows.append({
                    "q": q, "D": float(D),
                    "model": float(np.mean([r["model_latency"] for r in reps])),
                    "measured": float(np.mean([r["map_s"] for r in reps])) / args.time_scale,
                    "L": L, "load": Fraction(reps[0]["values_sent"], M),
                    "values": reps[0]["values_sent"],
                    "match": all(Fraction(r["values_sent"], M) == L for r in reps),
                    "sets": len({frozenset(r["fastest"]) for r in reps}),
                    "step_s": float(np.mean([r.t_total for r in cluster.reports])),
                })
    finally:
        ray.shutdown()

    print(f"Unified coding on Ray: K={K}, mu={MU}, m={M}, N={N}, GF(65521), "
          f"{args.steps} steps per q, time unit = {args.time_scale} s")
    head = ("q", "D(q)", "model", "measured", "L(q)", "load", "values", "match", "sets",
            "step s")
    lines = [head]
    for r in rows:
        lines.append((str(r["q"]), f"{r['D']:.2f}", f"{r['model']:.2f}", f"{r['measured']:.2f}",
                      f"{float(r['L']):.2f}", f"{float(r['load']):.2f}", str(r["values"]),
                      "yes" if r["match"] else "NO", str(r["sets"]), f"{r['step_s']:.3f}"))
    widths = [max(len(line[c]) for line in lines) for c in range(len(head))]
    for i, line in enumerate(lines):
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print("D(q), model, measured: Map latency in time units (theory mean; mean drawn q-th "
          "fastest; mean wall time to the q-th finish / time unit).")
    print("L(q), load: communication in values / m (theory; measured from the packets sent); "
          "sets: distinct fastest sets seen.")
    print(f"total {time.perf_counter() - t0:.1f} s")
    if args.plot:
        plot_tradeoff(tradeoff(K, MU, N), args.plot,
                      measured=[(r["measured"], float(r["load"])) for r in rows])
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
