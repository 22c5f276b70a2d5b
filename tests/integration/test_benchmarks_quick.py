"""`python -m benchmarks run --quick` produces well-formed results (not how fast anything is)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_quick_benchmarks_write_well_formed_results(tmp_path):
    import ray

    if ray.is_initialized():
        ray.shutdown()
    out = tmp_path / "results"
    env = dict(os.environ, RAY_ADDRESS="local")
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "run", "--quick", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("planner", "hetero", "sweeps", "unified", "sim_quick", "runtime_quick",
                 "verify_quick", "schedulers_quick", "scale_quick", "sim_fidelity_quick",
                 "sparse_quick", "real_quick", "two_level_quick"):
        with open(out / f"{name}.json") as fh:
            data = json.load(fh)
        assert data, name
        assert (out / f"{name}.md").read_text().startswith("#"), name
    rt = json.loads((out / "runtime_quick.json").read_text())
    for scenario, policies in (("stragglers", ("usctec", "uncoded", "speculative", "cyclic")),
                               ("heterogeneous", ("usctec", "cyclic")),
                               ("churn", ("usctec", "uncoded"))):
        for p in policies:
            assert rt[scenario][p]["median_s"] > 0, (scenario, p)
    assert rt["churn"]["usctec"]["lost_steps"] == 0
    sc = json.loads((out / "schedulers_quick.json").read_text())
    for key in sc["order"]:
        for p in ("usctec-auto", "dynamic", "proportional", "hand-written"):
            assert sc["scenarios"][key][p]["median_s"] > 0, (key, p)
    sk = json.loads((out / "scale_quick.json").read_text())
    for r in sk["sizes"]:  # every policy and Ray's floor ran at every size, and CPU was read
        assert r["ray_floor"]["median_s"] > 0 and r["default_over_floor"] > 0, r["M"]
        for p in ("usctec-auto", "usctec", "dynamic"):
            assert r["policies"][p]["median_s"] > 0, (r["M"], p)
            assert r["policies"][p]["driver_cpu_ms_per_machine"] > 0, (r["M"], p)
    assert [p["M"] for p in sk["planner"]] == [96] and sk["planner"][0]["plan_ms_median"] > 0
    fi = json.loads((out / "sim_fidelity_quick.json").read_text())
    for case in fi["cases"]:  # every policy ran on the runtime and in the simulator
        for p in ("usctec-auto", "usctec-pull", "usctec", "dynamic", "proportional"):
            r = case["policies"][p]
            assert r["runtime_median_s"] > 0 and r["sim_cost_median_s"] > 0, p
    spq = json.loads((out / "sparse_quick.json").read_text())
    for r in spq["large"]["runs"] + spq["small"]["runs"]:  # every product matched scipy's
        assert r["median_step_s"] > 0 and r["max_rel_error"] < 1e-12, r["policy"]
    _check_real(json.loads((out / "real_quick.json").read_text()))
    sw = json.loads((out / "sweeps.json").read_text())
    for key in ("slowdown", "heterogeneity", "churn", "scale"):
        for pt in sw[key]:
            # the ideal bound (with the (L+S)/L redundancy) bounds the coded policies
            assert all(pt["ideal"]["mean"] <= pt[p]["mean"] * (1 + 1e-9)
                       for p in ("usctec", "cyclic"))
    summary = (out / "summary.md").read_text()
    for row in ("plan_step at N=1000", "runtime, 2 stragglers x5: USCTEC / uncoded",
                "hetero masters", "unified K=6: measured load = L(q)",
                "verification per step, real", "scale, M=12: default step / Ray's floor",
                "real speed, 6 machines"):
        assert row in summary, row
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    for png in ("sweep_slowdown.png", "sweep_heterogeneity.png", "sweep_churn.png",
                "sweep_scale.png", "unified_tradeoff.png", "real_quick.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG", png


def _check_real(re_: dict) -> None:
    """bench_real's quick run: every runner ran every scenario on every workload, every product
    of the cluster's policies matched numpy's / scipy's, the killed process's step was exact,
    and PageRank converged to scipy's ranks."""
    policies = ("usctec-auto", "usctec", "dynamic")
    for wl, d in re_["workloads"].items():
        scenarios = [k for k in ("none", "stop300", "duty50", "hog", "kill") if k in d]
        assert scenarios[0] == "none" and len(d["none"]["local"]["times"]) == re_["steps"], wl
        for scen in scenarios:
            for r in policies:
                s = d[scen][r]
                assert "failed" not in s and len(s["times"]) >= re_["steps"], (wl, scen, r)
                assert s["max_error"] <= 1e-9, (wl, scen, r, s["max_error"])
            if scen != "kill":  # a slow machine is never excluded
                assert d[scen]["machines_after"] == re_["machines"], (wl, scen)
        if "kill" in d:
            assert d["kill"]["usctec-auto"]["kill_step_error"] <= 1e-9, wl
            # the killed worker process is restarted (ray.max_restarts): its machine comes back
            assert d["kill"]["machines_after"] == re_["machines"], (wl, d["kill"]["faults"])
            assert d["kill"]["faults"]["restarted"] and not d["kill"]["faults"]["not_restarted"]
    pr = re_["pagerank"]
    for r in policies + ("hand-written", "plain-floor"):
        assert pr[r]["iterations"] == pr["local"]["iterations"], r
        assert pr[r]["max_abs_diff"] <= 1e-9, r
    assert {"dense", "sparse_8k", "sparse_1m"} <= set(re_["workloads"])
    for what, value, target, met in re_["goals"]:
        assert isinstance(what, str) and value > 0 and target > 0 and isinstance(met, bool)
