"""Sparse matrix-vector products on real Ray actors, against what a user would do instead.

    python benchmarks/bench_sparse.py [--quick] [--out DIR] [--machines N] [--cpus N]

The matrix is the Google matrix of the PageRank job's power-law graph
(:func:`elastic_coded.pagerank.power_law_graph`): 1,000,000 nodes and 10,000,000 edges
(``--quick``: 100,000 and 1,000,000).  Side by side on the same matrix and the same seeded
vectors, machines at their real speed (``time_scale=0``), ``L=2, S=1``:

- scipy's single-process ``A @ x`` (what a user of scipy writes; the driver's own process);
- the cluster storing ``A`` sparse, ``usctec-auto`` (the default) and the uncoded ``dynamic``
  baseline: the median step as the caller sees it (``t_total``) and its compute phase;
- where the dense matrix fits (a graph of 8,000 nodes, ``--quick`` 2,000, same density):
  numpy's dense ``A @ x``, scipy's sparse one, and the cluster storing ``A`` dense and sparse.

Memory per worker: the bytes of the CSR rows each machine stores (data, column indices and row
pointers, 8 bytes each), from the placement in force, against the same rows dense.  Every
product is checked against scipy's (relative error below 1e-12).  Writes ``sparse.json`` and
``sparse.md`` (``--quick``: ``sparse_quick.*``).
"""

from __future__ import annotations

import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import RESULTS, parser, publish, start_ray, table, yes  # noqa: E402

L, S = 2, 1


def _median_s(fn, reps: int) -> float:
    fn()  # warm
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _memory(c, A) -> dict:
    """CSR bytes each machine stores (and the same rows dense), from the placement."""
    w = c._loaded.weights
    out = {}
    for m in c.machines():
        rows = c.placement().rows_of(m)
        nnz = sum(w.of(r) for r in rows)
        n_rows = sum(b - a for a, b in rows)
        out[m] = {"rows": n_rows, "nnz": nnz, "csr_bytes": 16 * nnz + 8 * (n_rows + len(rows)),
                  "dense_bytes": 8 * n_rows * A.shape[1]}
    return out


def _cluster_run(A, policy: str, machines: int, xs: list) -> dict:
    """Median step of ``policy`` on a cluster storing ``A`` (sparse or dense) over ``xs``."""
    from elastic_coded import ElasticCluster

    ref = [A @ x for x in xs]
    t0 = time.perf_counter()
    with ElasticCluster(A, policy, machines, L=L, S=S, storage=(L + S) / machines) as c:
        t_start = time.perf_counter() - t0
        c.multiply(xs[0])  # warm
        c.reports.clear() if hasattr(c.reports, "clear") else None
        err, tot, comp, prods = 0.0, [], [], []
        for x, y0 in zip(xs, ref):
            y = c.multiply(x)
            err = max(err, float(np.linalg.norm(y - y0) / np.linalg.norm(y0)))
            r = c.reports[-1]
            tot.append(r.t_total)
            comp.append(r.t_compute)
            prods.append(r.products)
        mem = _memory(c, A) if hasattr(A, "nnz") else None
    return {"policy": policy, "sparse": hasattr(A, "nnz"), "t_start_s": t_start,
            "median_step_s": float(np.median(tot)), "median_compute_s": float(np.median(comp)),
            "products_per_step": float(np.median(prods)), "max_rel_error": err,
            "memory": mem}


def run(quick: bool, out: str, machines: int = 6, cpus: int | None = None) -> dict:
    from bench_real import google_matrix

    nodes, edges, small, reps = (100_000, 1_000_000, 2000, 5) if quick else \
        (1_000_000, 10_000_000, 8000, 9)
    cpus = cpus or min(16, os.cpu_count() or 2)
    rng = np.random.default_rng(1)
    t0 = time.time()
    A = google_matrix(nodes, edges, 0)[0]
    xs = [rng.random(nodes) for _ in range(reps)]
    ray = start_ray(cpus, fresh=True)
    try:
        big = {"scipy_s": _median_s(lambda: A @ xs[0], reps),
               "runs": [_cluster_run(A, p, machines, xs) for p in ("usctec-auto", "dynamic")]}
        As = google_matrix(small, small * edges // nodes, 2)[0]
        Ad = As.toarray()
        ys = [rng.random(small) for _ in range(reps)]
        dense = {"numpy_dense_s": _median_s(lambda: Ad @ ys[0], reps),
                 "scipy_s": _median_s(lambda: As @ ys[0], reps),
                 "runs": [_cluster_run(M, "usctec-auto", machines, ys) for M in (Ad, As)]}
    finally:
        ray.shutdown()
    res = {"quick": quick, "machines": machines, "cpus": cpus, "L": L, "S": S,
           "host": platform.machine(), "nodes": nodes, "nnz": int(A.nnz), "small_nodes": small,
           "small_nnz": int(As.nnz), "large": big, "small": dense, "wall_s": time.time() - t0}
    return publish(out, "sparse_quick" if quick else "sparse", res, _markdown(res))


def _row(name: str, t: float, base: float, extra: str = "") -> str:
    return (f"| {name} | {t * 1000:.1f} | {t / base:.2f}x | "
            f"{yes(t <= base)} | {extra} |")


HEAD = table("how | ms per matvec | vs scipy | as fast as scipy? | notes", "lrrcl")


def _markdown(res: dict) -> str:
    big, sm = res["large"], res["small"]
    lines = [f"# Sparse matvec: {res['nodes']:,} x {res['nodes']:,}, {res['nnz']:,} nonzeros",
             "", f"{res['machines']} machines at real speed, L={res['L']}, S={res['S']}, "
             f"{res['cpus']} CPUs ({res['host']}); medians of the same seeded vectors. "
             "'As fast as scipy' compares the step as the caller sees it with scipy's "
             "single-process `A @ x` on the driver.", "", *HEAD]
    base = big["scipy_s"]
    lines.append(_row("scipy `A @ x`, one process", base, base))
    for r in big["runs"]:
        mem = r["memory"] or {}
        csr = max((v["csr_bytes"] for v in mem.values()), default=0)
        lines.append(_row(f"cluster, sparse, `{r['policy']}`", r["median_step_s"], base,
                          f"compute phase {r['median_compute_s'] * 1000:.1f} ms; "
                          f"{r['products_per_step']:,.0f} products/step; max CSR per worker "
                          f"{csr / 2**20:,.1f} MiB; error {r['max_rel_error']:.1e}"))
    dense_b = max((v["dense_bytes"] for r in big["runs"] for v in (r["memory"] or {}).values()),
                  default=0)
    lines += ["", f"The same rows dense would take {dense_b / 2**30:,.1f} GiB per worker: the "
              "dense path does not fit at this size.", "",
              f"## Where the dense matrix fits: {res['small_nodes']:,} nodes, "
              f"{res['small_nnz']:,} nonzeros", "", *HEAD]
    base = sm["scipy_s"]
    lines.append(_row("scipy sparse `A @ x`, one process", base, base))
    lines.append(_row("numpy dense `A @ x`, one process", sm["numpy_dense_s"], base))
    for r in sm["runs"]:
        kind = "sparse" if r["sparse"] else "dense"
        lines.append(_row(f"cluster, {kind}, `usctec-auto`", r["median_step_s"], base,
                          f"compute phase {r['median_compute_s'] * 1000:.1f} ms"))
    lines += ["", f"Wall time {res['wall_s']:.0f} s."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = parser(__doc__, RESULTS)
    ap.add_argument("--machines", type=int, default=6)
    ap.add_argument("--cpus", type=int, default=None)
    a = ap.parse_args()
    run(a.quick, a.out if not a.quick else os.path.join(a.out, "quick"), a.machines, a.cpus)


if __name__ == "__main__":
    main()
