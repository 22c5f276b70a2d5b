"""What verification costs per step, on real Ray actors: the same steps with ``verify`` on and
off, and with a lying machine.

    python benchmarks/bench_verify.py [--quick] [--out DIR] [--cpus N]

For each field (the reals and ``GF(2^31 - 1)``) and scheme (``usctec-auto``, ``L=4, S=2``;
``unified``, ``mu=1/2, q=4, N=r``): two clusters on one Ray session, ``verify=True`` and
``verify=False``, 8 machines, ``A`` (``m x n``; USCTEC stores it in full on every machine),
machines at their real speed (``time_scale=0``); the same inputs ``B`` (``n x r``) are fed to
both, alternating steps, after warm-up steps.  Per step: ``t_total`` (the step, as the caller
sees it), ``t_verify`` (the check, included in ``t_total``) and the driver's own ``A @ B`` for
scale.  Then steps with one machine lying (``corrupt``, the others slowed 3x so that its results
are decoded from): ``t_verify`` is then the repair (USCTEC: each result of the wrong pieces
checked, the missing positions computed again and checked, the pieces decoded again; unified:
the Map results of the fastest servers fetched and checked, the product decoded from rows that
check; a lie no Reduce uses is harmless and is not caught).  Every product is checked against the
driver's own (in the reals: within 1e-9, or for unified within the step's reported bound; its
Reed-Solomon storage code is run at a smaller ``m``: its real decodes grow ill-conditioned with
``m``, and its Reduce's solve in GF(p) is slow at large ``m``).

Writes ``verify.json`` and ``verify.md`` (``--quick``: ``verify_quick.*``, smaller, fewer
steps, and ``unified`` in GF(p) only).  Under a minute either way.
"""

from __future__ import annotations

import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import RESULTS, parser, publish, row, start_ray, table  # noqa: E402

L, S, MACHINES = 4, 2, 8


def _steps(clusters: dict, B, steps: int) -> dict:
    """Alternate ``steps`` steps on each cluster; per cluster the step and check times."""
    out = {k: {"t_total": [], "t_verify": []} for k in clusters}
    for _ in range(steps):
        for k, (c, _) in clusters.items():
            c.multiply(B)
            r = c.reports[-1]
            out[k]["t_total"].append(r.t_total)
            out[k]["t_verify"].append(r.t_verify)
    return out


def _lying(c, A, B, F, steps: int) -> dict:
    """Steps with one machine lying (a different one each step), the others slowed 3x."""
    from elastic_coded.churn import StepEvents
    from elastic_coded.runtime.verifying import ToleranceExceeded

    ids = c.machines()
    t_tot, t_ver, rec, caught = [], [], [], 0
    for k in range(steps):
        liar = ids[k % len(ids)]
        ev = StepEvents(slow={m: 3.0 for m in ids if m != liar}, corrupt=(liar,))
        try:
            Y = c.multiply(B, events=ev)
        except ToleranceExceeded:  # a lie the check let through, too far off for the tolerance
            caught += 1
            continue
        r = c.reports[-1]
        _same(F, Y, A, B, r)
        t_tot.append(r.t_total)
        t_ver.append(r.t_verify)
        rec.append(r.recomputed)
        caught += liar in r.caught
    return {"steps": steps, "caught": caught, "median_t_total_s": float(np.median(t_tot)),
            "median_t_verify_s": float(np.median(t_ver)),
            "median_recomputed": float(np.median(rec))}


def _best(fn, reps: int = 15) -> float:
    """Best of ``reps`` timings (the shared CPUs' noise removed as far as it goes)."""
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def _check_alone(c, A, B, F) -> float:
    """The whole-product check by itself (the driver's sketch, no Ray), best of 15."""
    from elastic_coded.algebra.verify import check

    Y, sk = F.matmul(A, B), c._verifier.sketches[0]
    return _best(lambda: check(sk, B, Y, condition=30.0, extra_terms=10 * L))


def _same(F, Y, A, B, report=None) -> None:
    if F.exact:
        assert np.array_equal(Y, F.matmul(A, B)), "wrong product"
        return
    err = np.linalg.norm(Y - A @ B)
    if report is not None and report.verified:  # lies included: the verified bound holds
        assert err <= report.verified_error_bound, "beyond the verified bound"
    if report is None or report.policy != "unified":
        assert err <= 1e-9 * np.linalg.norm(A @ B), "wrong product"


def _cluster(A, F, policy: str, on: bool, r: int):
    from elastic_coded.runtime import ElasticCluster

    ms = [{"id": f"m{i}", "speed": 1.0, "storage": 1.0} for i in range(MACHINES)]
    if policy == "unified":
        return ElasticCluster(A, "unified", machines=ms, field=F, verify=on, exclude_after=None,
                              mu="1/2", q=4, N=r)
    return ElasticCluster(A, policy, L=L, S=S, machines=ms, field=F, verify=on, deadline=None,
                          exclude_after=None)


def run_field(name: str, m: int, n: int, r: int, steps: int, seed: int = 0,
              policy: str = "usctec-auto") -> dict:
    from elastic_coded.algebra import field

    F = field(name)
    rng = np.random.default_rng(seed)
    A = F.random((m, n), rng) if F.exact else rng.standard_normal((m, n))
    B = F.random((n, r), rng) if F.exact else rng.standard_normal((n, r))
    clusters = {}
    try:
        t0 = time.perf_counter()
        for on in (True, False):
            clusters["on" if on else "off"] = (_cluster(A, F, policy, on, r), on)
        t_start = time.perf_counter() - t0
        _steps(clusters, B, 2)  # warm-up
        res = _steps(clusters, B, steps)
        for c, _ in clusters.values():
            _same(F, c.multiply(B), A, B, c.reports[-1])
        t_local, t_check = _best(lambda: F.matmul(A, B)), _check_alone(clusters["on"][0], A, B, F)
        lying = _lying(clusters["on"][0], A, B, F, max(3, steps // 3))
        cond = clusters["on"][0].reports[-1].condition
        bound = clusters["on"][0].reports[-1].relative_error_bound
        vbound = clusters["on"][0].reports[-1].relative_verified_error_bound
    finally:
        for c, _ in clusters.values():
            c.shutdown()
    on = res["on"]
    med = {k: float(np.median(v["t_total"])) for k, v in res.items()}
    tv = float(np.median(on["t_verify"]))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"policy": policy, "field": F.name, "m": m, "n": n, "r": r, "steps": steps,
            "median_step_on_s": med["on"], "median_step_off_s": med["off"],
            "median_t_verify_s": tv, "verify_over_step": tv / med["on"],
            "step_on_over_off": med["on"] / med["off"], "local_matmul_s": t_local,
            "verify_over_local_matmul": tv / t_local, "clusters_start_s": t_start,
            "min_t_verify_s": float(np.min(on["t_verify"])), "check_alone_s": t_check,
            "check_alone_over_local_matmul": t_check / t_local, "load_average": load,
            "lying": lying, "condition": cond, "relative_error_bound": bound,
            "relative_verified_error_bound": vbound}


def _markdown(res: dict) -> str:
    lines = ["# What verification costs per step", "",
             f"`python benchmarks/bench_verify.py{' --quick' if res['quick'] else ''}` "
             f"({res['cpus']} CPUs, {MACHINES} machines, real speed; usctec-auto with L={L}, "
             f"S={S}, unified with mu=1/2, q=4, N=r).  Medians over the steps; `t_verify` is "
             "inside the step time.", "",
             *table("scheme | field | A | r | step, verify off (s) | step, verify on (s) | on / "
                    "off | t_verify (s) | t_verify / step | best t_verify (s) | check alone, "
                    "best (s) | check alone / driver's A @ B | one liar: step (s) | one liar: "
                    "t_verify (s) | liar caught | recomputed", "l")]
    for f in res["fields"]:
        ly = f["lying"]
        lines.append(row([
            f["policy"], f["field"], f"{f['m']}x{f['n']}", f["r"], f"{f['median_step_off_s']:.4f}",
            f"{f['median_step_on_s']:.4f}", f"{f['step_on_over_off']:.2f}",
            f"{f['median_t_verify_s']:.5f}", f"{100 * f['verify_over_step']:.2f}%",
            f"{f['min_t_verify_s']:.5f}", f"{f['check_alone_s']:.5f}",
            f"{f['check_alone_over_local_matmul']:.3f}", f"{ly['median_t_total_s']:.4f}",
            f"{ly['median_t_verify_s']:.4f}", f"{ly['caught']}/{ly['steps']}",
            f"{ly['median_recomputed']:.0f}"]))
    lines += ["", "Load average (1 min) during the runs: " +
              ", ".join(f"{f['load_average']:.1f}" for f in res["fields"]
                        if f["load_average"] is not None) +
              f" on {res['cpus']} CPUs: the step and `t_verify` medians carry the noise of "
              "shared CPUs; the best figures and the check alone show the cost itself.", "",
              "Real field, the last step: decode condition, relative error bound (honest "
              "machines) and relative verified bound (whatever the machines did): " +
              "; ".join(f"{f['policy']} {f['condition']:.3g}, {f['relative_error_bound']:.2e} "
                        f"and {f['relative_verified_error_bound']:.2e} (A {f['m']}x{f['n']})"
                        for f in res["fields"] if f["condition"] is not None) + ".", ""]
    return "\n".join(lines)


def run(quick: bool, out: str, cpus: int | None = None) -> dict:
    cpus = cpus or min(4, os.cpu_count() or 2)
    m, n, r, steps = (1024, 256, 8, 4) if quick else (4096, 1024, 16, 10)
    ray = start_ray(cpus, fresh=True)
    t0 = time.time()
    try:
        fields = [run_field(name, m, n, r, steps) for name in ("real", "gf(p)")]
        um = 120 if quick else 240  # its real decodes stay usable; its GF(p) Reduce is slow
        # quick (CI's check that it runs): unified in GF(p) alone, two clusters' start fewer
        fields += [run_field(name, um, n, r, steps, policy="unified")
                   for name in (("gf(p)",) if quick else ("real", "gf(p)"))]
    finally:
        ray.shutdown()
    res = {"quick": quick, "cpus": cpus, "machine": platform.machine(), "L": L, "S": S,
           "machines": MACHINES, "fields": fields, "wall_s": time.time() - t0}
    return publish(out, "verify_quick" if quick else "verify", res, _markdown(res))


def main(argv=None) -> int:
    ap = parser(__doc__, RESULTS)
    ap.add_argument("--cpus", type=int, default=None)
    a = ap.parse_args(argv)
    run(a.quick, a.out, a.cpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
