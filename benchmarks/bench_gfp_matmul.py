"""GF(p) matrix multiplication: ``matmul_mod`` against float64 BLAS and galois.

For each prime (65521, below 2^20, and 2^31 - 1) and shape (squares 64 .. 2048, two skinny
products) it times

    blas    ``a_f64 @ b_f64`` on the same shapes (the throughput ceiling; not exact mod p),
    ours    ``matmul_mod(a, b, p)`` on int64 operands in [0, p),
    galois  ``A @ B`` on prebuilt ``galois.GF(p)`` FieldArrays (skipped where it would take
            more than ~20 s: predicted from its time per multiply-add at smaller sizes),

as the best of a few interleaved repeats, and reports ``blas/ours`` (throughput relative to BLAS,
1.0 = as fast) and ``galois/ours`` (speed-up over galois).  Every result of ours is checked: against
galois where it ran, else on a few rows against Python integers.  A second table (full run only)
times the one-limb and two-limb paths against each other for primes from 2^20 to 2^25, which is
how the cut-over in ``matmul_mod`` was chosen, and a third (full run only) shows p = 3, where
galois switches to exact float32 ``sgemm`` (``k (p-1)^2 <= 2^24``) and ``matmul_mod``, which stays
on float64, can be slower.

    python benchmarks/bench_gfp_matmul.py [--quick] [--write] [--settle S]

On a shared machine each measurement first waits (up to ``--settle`` seconds, 30 by default) for
the CPUs to go idle, so that neighbours' load distorts the ratios less.

The full run writes ``benchmarks/results/gfp_matmul.json`` and ``benchmarks/results/gfp_matmul.md``
and prints the table.  ``--quick`` (small sizes, under 30 s) only prints, unless ``--write``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from elastic_coded.algebra import gfp_matmul as G  # noqa: E402
from elastic_coded.algebra.fields import is_prime  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
PRIMES = [65521, 2**31 - 1]
SQUARES = [64, 128, 256, 512, 1024, 2048]
SKINNY = [(2048, 2048, 16), (4096, 64, 4096)]
QUICK_SQUARES = [64, 128, 256]
QUICK_SKINNY = [(512, 512, 16), (1024, 32, 1024)]
GALOIS_LIMIT_S = 20.0
QUICK_GALOIS_LIMIT_S = 1.5
TINY_P, TINY_P_SQUARES = 3, [256, 512, 1024]
TARGETS = {
    "p=65521: >=0.8x BLAS at squares >=512": (65521, 0.8),
    "p=2^31-1: >=0.2x BLAS at squares >=512": (2**31 - 1, 0.2),
}


def best_of(fns, min_reps=3, max_reps=25, budget_s=2.0):
    """Best time of each callable, run interleaved (so all see the same background load)."""
    times = [[] for _ in fns]
    start = time.perf_counter()
    for rep in range(max_reps):
        for f, ts in zip(fns, times):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        if rep + 1 >= min_reps and time.perf_counter() - start > budget_s:
            break
    return [min(ts) for ts in times]


def cpu_idle(window_s=0.5):
    """Fraction of idle CPU time over ``window_s`` (Linux ``/proc/stat``; None elsewhere)."""
    def snap():
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:]]
        return v[3] + v[4], sum(v)
    try:
        i0, t0 = snap()
        time.sleep(window_s)
        i1, t1 = snap()
    except (OSError, ValueError, IndexError):
        return None
    return (i1 - i0) / max(t1 - t0, 1)


def settle(max_wait_s, threshold=0.9):
    """Wait (up to ``max_wait_s``) for the shared machine to go quiet; returns the idle seen."""
    if max_wait_s <= 0:
        return None
    deadline = time.perf_counter() + max_wait_s
    idle = cpu_idle()
    while idle is not None and idle < threshold and time.perf_counter() < deadline:
        idle = cpu_idle()
    return idle


def exact_rows(a, b, p, rows):
    return np.asarray((a[rows].astype(object) @ b.astype(object)) % p, dtype=np.int64)


def path_of(p, m, k, n):
    if m * k * n <= G._TINY and k * (p - 1) ** 2 < 2**63:
        return "int64"
    if k * (p - 1) ** 2 <= G._F32_EXACT:
        return "float32"
    kc = G.max_chunk(p, False)
    if k <= 4 * kc or kc >= G._MIN_CHUNK:
        return f"1 limb, {-(-k // kc)} chunk(s)"
    return f"2 limbs, {-(-k // G.max_chunk(p, True))} chunk(s)"


def run_prime(p, shapes, galois, rng, galois_limit_s, settle_s):
    GF = galois.GF(p, verify=False, compile="jit-calculate" if p > 2**20 else None)
    rows = []
    galois_rate = None          # seconds per multiply-add, from the largest size run so far
    for m, k, n in shapes:
        a = rng.integers(0, p, (m, k))
        b = rng.integers(0, p, (k, n))
        af, bf = a.astype(np.float64), b.astype(np.float64)
        macs = m * k * n
        ours = G.matmul_mod(a, b, p)
        fns = [lambda af=af, bf=bf: af @ bf, lambda a=a, b=b: G.matmul_mod(a, b, p)]
        predicted = None if galois_rate is None else galois_rate * macs
        t_gal, note = None, ""
        if predicted is not None and predicted > galois_limit_s:
            note = f"skipped (~{predicted:.2g} s predicted)"
            sample = np.sort(rng.choice(m, size=min(m, 4), replace=False))
            np.testing.assert_array_equal(ours[sample], exact_rows(a, b, p, sample))
        else:
            A, B = GF(a), GF(b)
            t0 = time.perf_counter()
            np.testing.assert_array_equal(ours, np.asarray(A @ B, dtype=np.int64))
            t_gal = time.perf_counter() - t0
            galois_rate = t_gal / macs
            if t_gal < 2.0:     # time it interleaved with the others
                fns.append(lambda A=A, B=B: A @ B)
        idle = settle(settle_s)
        times = best_of(fns, min_reps=5, budget_s=1.5 if macs < 2**27 else 10.0)
        t_blas, t_ours = times[:2]
        if len(times) == 3:
            t_gal = min(t_gal, times[2])
        rows.append({
            "p": p, "m": m, "k": k, "n": n, "path": path_of(p, m, k, n),
            "t_blas_s": t_blas, "t_ours_s": t_ours, "t_galois_s": t_gal, "galois_note": note,
            "blas_over_ours": t_blas / t_ours,
            "galois_over_ours": None if t_gal is None else t_gal / t_ours,
            "gflops_ours": 2 * macs / t_ours / 1e9, "cpu_idle_before": idle,
        })
        print(fmt_row(rows[-1]), flush=True)
    return rows


CUTOVER_PRIMES = [1048573, 2097143, 4194301, 5931641, 8388593, 16777213, 33554393]


def run_cutover(rng, settle_s, size=1024):
    """One-limb path (forced: many short chunks) against the two-limb path, square ``size``."""
    rows = []
    for p in CUTOVER_PRIMES:
        assert is_prime(p)
        a = rng.integers(0, p, (size, size))
        b = rng.integers(0, p, (size, size))
        settle(settle_s)
        t1, t2 = best_of([lambda a=a, b=b, p=p: G.matmul_mod(a, b, p, limbs=False),
                          lambda a=a, b=b, p=p: G.matmul_mod(a, b, p, limbs=True)], budget_s=3.0)
        kc = G.max_chunk(p, False)
        rows.append({"p": p, "log2_p": round(float(np.log2(p)), 2), "size": size,
                     "one_limb_chunk": kc, "t_one_limb_s": t1, "t_two_limb_s": t2,
                     "default": path_of(p, size, size, size).split(",")[0]})
        print(f"p={p} chunk {kc}: one limb {t1 * 1e3:.1f} ms, two limbs {t2 * 1e3:.1f} ms, "
              f"default {rows[-1]['default']}", flush=True)
    return rows


def fmt_ms(t):
    return "skipped" if t is None else (f"{t * 1e3:.3f}" if t < 0.1 else f"{t * 1e3:.1f}")


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}"


def fmt_row(r):
    gal = fmt_ms(r["t_galois_s"]) if r["t_galois_s"] is not None else r["galois_note"]
    speed = "-" if r["galois_over_ours"] is None else f"{r['galois_over_ours']:.2f}"
    return (f"| {r['p']} | {r['m']}x{r['k']} @ {r['k']}x{r['n']} | {r['path']} | "
            f"{fmt_ms(r['t_blas_s'])} | {fmt_ms(r['t_ours_s'])} | {gal} | "
            f"{r['blas_over_ours']:.2f} | {speed} |")


HEADER = ("| p | shape | path | BLAS f64 (ms) | ours (ms) | galois (ms) | BLAS/ours "
          "(throughput vs BLAS) | galois/ours (speed-up) |\n|---|---|---|---|---|---|---|---|")


def evaluate(rows):
    out = {}
    for name, (p, ratio) in TARGETS.items():
        sel = [r for r in rows if r["p"] == p and r["m"] == r["k"] == r["n"] and r["m"] >= 512]
        worst = min((r["blas_over_ours"] for r in sel), default=None)
        out[name] = {"worst": worst, "met": None if worst is None else worst >= ratio}
    for p, name in ((65521, "p=65521: never slower than galois (any size)"),
                    (TINY_P, f"p={TINY_P}: never slower than galois (galois on float32)")):
        sel = [r for r in rows if r["p"] == p and r["galois_over_ours"] is not None]
        worst = min((r["galois_over_ours"] for r in sel), default=None)
        out[name] = {"worst": worst, "met": None if worst is None else worst >= 1.0}
    return out


def loadavg():
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine_info():
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None,
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
            "loadavg_start": loadavg()}
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["blas"] = {key: blas.get(key) for key in ("name", "version",
                                                       "openblas configuration")}
    except Exception:  # older numpy: no dict mode
        info["blas"] = None
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in fh
                                      if ln.startswith("model name")), None)
    except OSError:
        info["cpu_model"] = None
    return info


def markdown(info, rows, cutover, targets, quick):
    lines = [
        "# GF(p) matmul: `matmul_mod` vs float64 BLAS vs galois",
        "",
        f"{'Quick run' if quick else 'Full run'}: numpy {info['numpy']}, "
        f"BLAS {(info.get('blas') or {}).get('name')} {(info.get('blas') or {}).get('version')}, "
        f"{info['cpu_count']} CPUs ({info.get('cpu_model')}), galois {info.get('galois')}; "
        f"load average at start {info.get('loadavg_start')}, at end {info.get('loadavg_end')} "
        "(shared machine: each measurement waits up to "
        f"{info.get('settle_s')} s for an idle CPU, then takes the best of several interleaved "
        "repeats).",
        "",
        "Times in ms.  BLAS/ours = throughput relative to `a_f64 @ b_f64` on the same shapes; "
        "galois/ours = speed-up over `galois.GF(p)` FieldArray `@` (arrays prebuilt). "
        "\"skipped\": galois would take more than ~20 s.  For p = 3 (full run) galois multiplies "
        "in float32 (`sgemm`, exact while k (p-1)^2 <= 2^24), `matmul_mod` stays on float64.",
        "",
        HEADER,
        *[fmt_row(r) for r in rows],
        "",
        "## Targets",
        "",
        "| target | worst measured ratio | met |",
        "|---|---|---|",
        *[f"| {name} | {fmt_ratio(t['worst'])} | "
          f"{'-' if t['met'] is None else ('yes' if t['met'] else 'no')} |"
          for name, t in targets.items()],
    ]
    if cutover:
        lines += [
            "",
            "## One limb vs two limbs (cut-over)",
            "",
            "Square 1024 products, one-limb path forced (chunk = longest exact one) against "
            "the two-limb path.",
            "",
            "| p | one-limb chunk | one limb (ms) | two limbs (ms) | default path |",
            "|---|---|---|---|---|",
            *[f"| {c['p']} (2^{c['log2_p']}) | {c['one_limb_chunk']} | "
              f"{c['t_one_limb_s'] * 1e3:.1f} | {c['t_two_limb_s'] * 1e3:.1f} | {c['default']} |"
              for c in cutover],
        ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only (< 30 s)")
    ap.add_argument("--write", action="store_true", help="write the results files in --quick")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settle", type=float, default=None, metavar="S",
                    help="before each measurement wait up to S seconds for an idle CPU "
                    "(default 30, 0 with --quick)")
    args = ap.parse_args(argv)

    import galois  # imported here: it takes a couple of seconds

    rng = np.random.default_rng(args.seed)
    info = machine_info()
    info["galois"] = galois.__version__
    info["settle_s"] = args.settle if args.settle is not None else (0.0 if args.quick else 30.0)
    shapes = ([(s, s, s) for s in (QUICK_SQUARES if args.quick else SQUARES)]
              + (QUICK_SKINNY if args.quick else SKINNY))
    print(HEADER)
    rows = []
    settle_s = info["settle_s"]
    for p in PRIMES:
        rows += run_prime(p, shapes, galois, rng,
                          QUICK_GALOIS_LIMIT_S if args.quick else GALOIS_LIMIT_S, settle_s)
    if not args.quick:
        rows += run_prime(TINY_P, [(s, s, s) for s in TINY_P_SQUARES], galois, rng,
                          GALOIS_LIMIT_S, settle_s)
    cutover = [] if args.quick else run_cutover(rng, settle_s)
    info["loadavg_end"] = loadavg()
    targets = evaluate(rows)
    md = markdown(info, rows, cutover, targets, args.quick)
    print()
    print(md)
    if not args.quick or args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "gfp_matmul.json").write_text(json.dumps(
            {"machine": info, "quick": args.quick, "seed": args.seed, "results": rows,
             "cutover": cutover, "targets": targets}, indent=1) + "\n")
        (RESULTS / "gfp_matmul.md").write_text(md)


if __name__ == "__main__":
    main()
