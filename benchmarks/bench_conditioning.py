"""Numerical conditioning of real-field decodes, and the cost of checking a step.

    python benchmarks/bench_conditioning.py [--quick] [--out DIR]

**Conditioning.**  For ``(L, S)`` in (8,4), (8,8), (12,12), (16,8), (16,10), (20,8) and each point
set, the worst-case decode condition ``kappa(P) = || |D_P| |E_P| ||_2`` over the straggler patterns
``P`` (``lagrange.search_worst``: every pattern up to 20000 of them, else 2000 random ones, every
contiguous run of stragglers and a swap ascent: a lower bound on the true worst, found exact
wherever enumeration could check it), the median over random patterns, and the relative error
``||Y - A B||_F / ||A B||_F`` measured at the worst pattern and over 100 random ones (``A``
64 x 128 and ``B`` 128 x 8L, standard normal).  Point sets:

* ``chebyshev`` (the default), ``chebyshev-interleaved`` (the former default),
  ``chebyshev2-interleaved``: the real field's sets (``lagrange.py``);
* ``roots-of-unity``: ``alpha`` the ``K``-th roots of unity, ``beta`` the ``L``-th roots turned by
  ``pi / lcm(K, L)`` (half the grids' common angle step), in complex arithmetic.  **Benchmark
  only**: the real field holds float64, so the runtime cannot use these points as they are
  (packing column pairs as complex numbers would carry them, at the price of pieces with even
  column bounds);
* ``gaussian [I; G]``: not a Lagrange code: the systematic real MDS code of ``mds.py`` (``G``
  seeded standard normal / sqrt(L)) as the encode matrix.  A is stored uncoded here, so any
  matrix whose ``L x L`` row subsets are invertible can encode ``B``; shown for reference.

**Check cost.**  For a few shapes ``A (m x n) @ B (n x r)``: the step's product, a whole-result
sketch check (``rows=None``) and a check of the middle third of the rows (a piece), against the
product of that third; and the one-off ``make_sketch``.  Each shape first waits (full run: up to
10 s) for the shared CPUs to go idle, then takes the best of at least 5 interleaved repeats; reals (``t = 8``) and
``GF(2^31 - 1)`` (``t = 2``).  And ``locate_lagrange`` against ``decode`` on one piece.

Writes ``benchmarks/results/conditioning.json`` and ``conditioning.md`` (``--quick``:
``conditioning_quick.*``: fewer patterns and smaller shapes).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from elastic_coded.algebra import field  # noqa: E402
from elastic_coded.algebra.lagrange import (REAL_POINT_SETS, _basis_matrix, conditions,  # noqa: E402
                                            lagrange_code, search_worst)
from elastic_coded.algebra.mds import mds_code  # noqa: E402
from elastic_coded.algebra.verify import check, locate_lagrange, make_sketch  # noqa: E402
from bench_gfp_matmul import best_of, settle  # noqa: E402
from results_io import write_results  # noqa: E402

CASES = [(8, 4), (8, 8), (12, 12), (16, 8), (16, 10), (20, 8)]
KNOWN = {(8, 8): "1.1e-10", (16, 8): "2.6e-7", (12, 12): "> 1e-6", (16, 10): "> 1e-6",
         (20, 8): "> 1e-6"}  # worst relative errors reported before this benchmark (old default)
SHAPES = [(2048, 2048, 256), (8192, 512, 64), (1024, 4096, 1024)]
QUICK_SHAPES = [(512, 512, 64), (2048, 256, 16)]
SETTLE_S = 10.0  # full run: wait up to this long for an idle CPU before each shape


# -- encode matrices ---------------------------------------------------------------------------------
class _Scheme:
    """A K x L encode matrix E (rows: positions) with decode D_P = E_P^{-1}."""

    def __init__(self, name, E, alphas=None, betas=None):
        self.name, self.E, self.alphas, self.betas = name, E, alphas, betas
        self.K, self.L = E.shape

    def cond(self, P):
        if self.alphas is not None:
            return conditions(self.alphas, self.betas, P)
        EP = self.E[P]
        return np.linalg.norm(np.abs(np.linalg.inv(EP)) @ np.abs(EP), ord=2, axis=(1, 2))

    def decode_matrix(self, P):
        if self.alphas is not None:
            chosen = np.asarray(self.alphas)[list(P)]
            return _basis_matrix(None, chosen, np.asarray(self.betas))
        return np.linalg.inv(self.E[list(P)])


def schemes(L: int, S: int):
    K = L + S
    for pts in REAL_POINT_SETS:
        code = lagrange_code("real", L, S, pts)
        yield _Scheme(pts, code.encode_matrix, code.alphas, code.betas)
    alphas = np.exp(2j * np.pi * np.arange(K) / K)
    betas = np.exp(2j * np.pi * np.arange(L) / L + 1j * np.pi / math.lcm(K, L))
    yield _Scheme("roots-of-unity", _basis_matrix(None, betas, alphas), alphas, betas)
    yield _Scheme("gaussian [I; G]", mds_code("real", K, L, seed=0).generator)


def measured_errors(sch: _Scheme, patterns, rng) -> list[float]:
    A = rng.standard_normal((64, 128))
    B = rng.standard_normal((128, 8 * sch.L))
    blocks = B.reshape(128, sch.L, 8).transpose(1, 0, 2).reshape(sch.L, -1)
    coded = (sch.E @ blocks).reshape(sch.K, 128, 8)
    H = np.stack([A @ c for c in coded])  # (K, 64, 8): real A times (maybe complex) coded input
    exact = A @ B
    out = []
    for P in patterns:
        D = sch.decode_matrix(P)
        Y = (D @ H[list(P)].reshape(sch.L, -1)).reshape(sch.L, 64, 8)
        Y = Y.transpose(1, 0, 2).reshape(64, -1)
        out.append(float(np.linalg.norm(Y - exact) / np.linalg.norm(exact)))
    return out


def conditioning(quick: bool) -> list[dict]:
    rows = []
    samples = 300 if quick else 2000
    for L, S in CASES:
        K = L + S
        rng = np.random.default_rng(L * 100 + S)
        rand = np.sort(np.argsort(rng.random((100, K)), axis=1)[:, :L], axis=1)
        for sch in schemes(L, S):
            t0 = time.perf_counter()
            worst, P = search_worst(sch.cond, K, L, exhaustive=2000 if quick else 20000,
                                    samples=samples, seed=1)
            med = float(np.median(sch.cond(rand)))
            errs = measured_errors(sch, [P] + [tuple(p) for p in rand], np.random.default_rng(7))
            rows.append({"L": L, "S": S, "points": sch.name, "worst_condition": worst,
                         "worst_pattern": list(P), "exhaustive": math.comb(K, L) <= (
                             2000 if quick else 20000),
                         "median_condition": med, "error_at_worst": errs[0],
                         "max_error_random": max(errs[1:]), "seconds": time.perf_counter() - t0})
            print(f"  L={L:2d} S={S:2d} {sch.name:24s} worst {worst:9.3g}  err {errs[0]:8.2g}",
                  flush=True)
    return rows


# -- check cost ------------------------------------------------------------------------------------
def check_cost(quick: bool) -> list[dict]:
    rows = []
    for spec in ("real", "gf(2147483647)"):
        F = field(spec)
        for m, n, r in (QUICK_SHAPES if quick else SHAPES):
            rng = np.random.default_rng(m + n + r)
            A, B = F.random((m, n), rng), F.random((n, r), rng)
            t0 = time.perf_counter()
            sk = make_sketch(F, A, seed=0)
            t_sketch = time.perf_counter() - t0
            Y = F.matmul(A, B)
            a, b = m // 3, 2 * m // 3
            Yp = Y[a:b]
            res, res_p = check(sk, B, Y), check(sk, B, Yp, rows=(a, b))
            idle = settle(0 if quick else SETTLE_S)
            t_mm, t_piece_mm, t_check, t_piece = best_of(
                [lambda: F.matmul(A, B), lambda: F.matmul(A[a:b], B), lambda: check(sk, B, Y),
                 lambda: check(sk, B, Yp, rows=(a, b))], min_reps=5, budget_s=3.0)
            assert res.ok and res_p.ok
            rows.append({"field": F.name, "m": m, "n": n, "r": r, "t": sk.t, "block": sk.block,
                         "matmul_s": t_mm, "check_s": t_check, "check_over_matmul": t_check / t_mm,
                         "piece_matmul_s": t_piece_mm, "piece_check_s": t_piece,
                         "piece_check_over_matmul": t_piece / t_piece_mm, "sketch_s": t_sketch,
                         "relative_tolerance": res.tolerance / res.scale if res.scale else 0.0,
                         "cpu_idle_before": idle})
            print(f"  {F.name} {m}x{n}x{r}: check/matmul {t_check / t_mm:.3f}, "
                  f"piece {t_piece / t_piece_mm:.3f}", flush=True)
    return rows


def locate_cost(quick: bool) -> list[dict]:
    rows = []
    F = field("gf(2147483647)")
    for L, S in ((8, 4), (20, 8)):
        code = lagrange_code(F, L, S)
        rng = np.random.default_rng(L + S)
        w, v, c = (64, 64, 8) if quick else (256, 256, 32)
        A, B = F.random((w, v), rng), F.random((v, L * c), rng)
        coded = code.encode(B)
        H = {i: F.matmul(A, coded[i]) for i in range(code.K)}
        for p in rng.choice(code.K, size=S // 2, replace=False).tolist():
            H[p] = F.add(H[p], F.random(H[p].shape, rng))
        out = locate_lagrange(code, H, seed=0)
        t_dec, t_loc = best_of([lambda: code.decode(dict(list(H.items())[:L])),
                                lambda: locate_lagrange(code, H, seed=0)], budget_s=1.0)
        rows.append({"L": L, "S": S, "liars": S // 2, "piece": [w, c], "decode_s": t_dec,
                     "locate_s": t_loc, "located": len(out.faulty)})
    return rows


# -- report ----------------------------------------------------------------------------------------
def to_markdown(res: dict) -> str:
    lines = ["# Decode conditioning and check cost", "",
             f"`{res['command']}` ({res['wall_s']:.0f} s, {res['machine']['cpus']} CPUs).", "",
             "## Worst-case decode condition and relative error", "",
             "`kappa = || |D_P| |E_P| ||_2` (the rounding-error amplification, lagrange.py); "
             "worst over straggler patterns (exact where marked *, else the search's lower "
             "bound), median over 100 random patterns; relative errors of `A @ B` measured at the "
             "worst pattern and the maximum over the 100 random ones.", "",
             "| L | S | points | worst kappa | median kappa | error at worst | max error (random) |",
             "|---|---|---|---|---|---|---|"]
    for r in res["conditioning"]:
        star = "*" if r["exhaustive"] else ""
        lines.append(f"| {r['L']} | {r['S']} | {r['points']} | {r['worst_condition']:.3g}{star} | "
                     f"{r['median_condition']:.3g} | {r['error_at_worst']:.2g} | "
                     f"{r['max_error_random']:.2g} |")
    lines += ["", "Where a row has no *, the worst case is the search's lower bound: random "
              "patterns, contiguous straggler runs and a swap ascent.  That search is built for "
              "point sets whose worst patterns are structured (Chebyshev: a run of stragglers at "
              "one end; checked against enumeration in the tests); for the unstructured "
              "`gaussian [I; G]` the true worst over all patterns can be well above it.  "
              "`roots-of-unity` runs in complex arithmetic and `gaussian [I; G]` is not a "
              "Lagrange code: neither is available to the real-field runtime as it stands.",
              "", "Default against the former default (worst kappa, old / new):", ""]
    by = {(r["L"], r["S"], r["points"]): r for r in res["conditioning"]}
    for L, S in CASES:
        old, new = by[(L, S, "chebyshev-interleaved")], by[(L, S, "chebyshev")]
        roots = by[(L, S, "roots-of-unity")]
        lines.append(f"- ({L},{S}): {old['worst_condition'] / new['worst_condition']:.2f}x lower "
                     f"(errors at worst {old['error_at_worst']:.2g} -> {new['error_at_worst']:.2g};"
                     f" previously reported {KNOWN.get((L, S), 'n/a')}); complex roots of unity "
                     f"{new['worst_condition'] / roots['worst_condition']:.3g}x lower still.")
    lines += ["", "## Cost of a sketch check against the step's product", "",
              "| field | m x n x r | t | matmul s | check s | check/matmul | piece matmul s | "
              "piece check s | piece check/matmul | make_sketch s | tolerance / scale | CPU idle |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["check_cost"]:
        lines.append(f"| {r['field']} | {r['m']}x{r['n']}x{r['r']} | {r['t']} | "
                     f"{r['matmul_s']:.4f} | {r['check_s']:.5f} | {r['check_over_matmul']:.4f} | "
                     f"{r['piece_matmul_s']:.4f} | {r['piece_check_s']:.5f} | "
                     f"{r['piece_check_over_matmul']:.4f} | {r['sketch_s']:.3f} | "
                     f"{r['relative_tolerance']:.2g} | "
                     f"{'-' if r['cpu_idle_before'] is None else format(r['cpu_idle_before'], '.2f')} |")
    lines += ["", "The piece is the middle third of the rows (a check of `A[m/3:2m/3] @ B`).  "
              "`tolerance / scale` is the real check's rigorous tolerance relative to the result "
              "(plain product, condition 1).  CPU idle: the idle fraction seen just before timing (shared "
              "machine).", "",
              "## Fault location (GF(2^31-1), one piece)", "",
              "| L | S | liars | piece (rows x cols) | decode s | locate_lagrange s | located |",
              "|---|---|---|---|---|---|---|"]
    for r in res["locate_cost"]:
        lines.append(f"| {r['L']} | {r['S']} | {r['liars']} | {r['piece'][0]}x{r['piece'][1]} | "
                     f"{r['decode_s']:.4f} | {r['locate_s']:.4f} | {r['located']} |")
    return "\n".join(lines) + "\n"


def run(quick: bool = False, out_dir: str | None = None) -> dict:
    out_dir = out_dir or os.path.join(HERE, "results")
    t0 = time.perf_counter()
    res = {"quick": quick,
           "command": "python benchmarks/bench_conditioning.py" + (" --quick" if quick else ""),
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "numpy": np.__version__}}
    print("conditioning:", flush=True)
    res["conditioning"] = conditioning(quick)
    print("check cost:", flush=True)
    res["check_cost"] = check_cost(quick)
    res["locate_cost"] = locate_cost(quick)
    res["wall_s"] = time.perf_counter() - t0
    md = to_markdown(res)
    write_results(out_dir, "conditioning_quick" if quick else "conditioning", res, md)
    print(md)
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer patterns, smaller shapes")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    a = ap.parse_args()
    run(a.quick, a.out)
