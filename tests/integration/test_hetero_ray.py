"""Heterogeneous masters on shared workers, on real Ray actors (MATH.md §3): every master's
``A_m x_m`` exact in GF(p) for every assignment method, to 1e-9 in the reals, probabilistic steps
that re-dispatch when too few workers draw a master, a worker dying mid-run, and clear errors."""

import math

import numpy as np
import pytest

from elastic_coded.algebra import field, relative_error
from elastic_coded.runtime.hetero_runtime import HeteroCluster, HeteroReport
from elastic_coded.schemes.hetero import HeteroProblem, assignment_from_k, random_problem

pytestmark = pytest.mark.ray

F = field("gf(65521)")
TIME_SCALE = 0.2  # seconds per model time unit: t* is about 0.3 units here


def _inputs(rng, cols, field_=F):
    """A vector for master 0, a matrix for the others."""
    return [field_.random((s,), rng) if m == 0 else field_.random((s, 2), rng)
            for m, s in enumerate(cols)]


def _check_report(c: HeteroCluster, r: HeteroReport):
    assert r.t_star == c.plan.t_star and r.method == c.assignment.method
    assert r.policy == c.plan.policy
    for m in range(c.M):
        holders = set(c.plan.workers(m))
        used = set(r.decoded_by[m])
        assert used <= holders and sum(c.loads[m, n] for n in used) >= c.L[m]
        assert not used & set(r.cancelled[m])
        assert set(r.cancelled[m]) <= holders and set(r.redispatched[m]) <= holders
        # a worker returns no earlier than its drawn time: measured >= model
        assert math.isfinite(r.model_time[m]) and r.model_time[m] > 0
        assert r.completion_units[m] >= r.model_time[m] - 0.01
        assert r.completion_units[m] == pytest.approx(r.completion_s[m] / c.time_scale)
        assert r.decoded_s[m] >= r.completion_s[m]
    if r.policy == "dedicated":
        owner = {n: m for m in range(c.M) for n in c.plan.workers(m)}
        assert r.served == tuple(owner.get(n, -1) for n in range(c.N))
        assert r.rescued == ()


@pytest.fixture(scope="module")
def gf_cluster(ray_session):
    """Two masters (30 and 40 rows) on five shared workers over GF(65521)."""
    rng = np.random.default_rng(0)
    As = [F.random((30, 6), rng), F.random((40, 5), rng)]
    with HeteroCluster(As, field=F, n_workers=5, time_scale=TIME_SCALE, seed=3) as c:
        yield c, As


@pytest.mark.parametrize("method", ["iterated_greedy", "simple_greedy", "exact",
                                    "probabilistic"])
def test_every_master_exact_in_gfp_for_every_assignment(gf_cluster, method):
    c, As = gf_cluster
    c.replan(method)
    assert c.plan.policy == ("probabilistic" if method == "probabilistic" else "dedicated")
    rng = np.random.default_rng(1)
    for _ in range(3):
        xs = _inputs(rng, c.cols)
        ys = c.multiply(xs)
        assert ys[0].shape == (30,) and ys[1].shape == (40, 2)
        assert np.array_equal(ys[0], F.matmul(As[0], xs[0][:, None])[:, 0])
        assert np.array_equal(ys[1], F.matmul(As[1], xs[1]))
        _check_report(c, c.reports[-1])
    s = c.summary()
    assert s["steps"] == 3 and s["t_star"] == c.t
    assert 0 <= s["fraction_by_t_star"] <= s["model_fraction_by_t_star"] + 1e-12 <= 1 + 1e-12
    assert s["mean_completion"] >= s["mean_model_completion"] - 0.01


def test_probabilistic_step_redispatches_a_master_too_few_workers_drew(gf_cluster):
    c, As = gf_cluster
    # every worker serves either master with probability 1/2: a master is often drawn by too
    # few workers to decode, which the model alone counts as never finishing
    c.replan(assignment_from_k(c.problem, np.full((c.M, c.N), 0.5), method="coin"))
    assert c.simulate(4000, rng=0).p_never > 0.05
    rng = np.random.default_rng(2)
    reps = []
    for _ in range(8):
        xs = _inputs(rng, c.cols)
        ys = c.multiply(xs)
        assert np.array_equal(ys[0], F.matmul(As[0], xs[0][:, None])[:, 0])
        assert np.array_equal(ys[1], F.matmul(As[1], xs[1]))
        r = c.reports[-1]
        _check_report(c, r)
        reps.append(r)
    rescued = [r for r in reps if r.rescued]
    assert rescued, "no step needed a re-dispatch: pick another seed"
    for r in rescued:
        for m in r.rescued:
            drew = [n for n in c.plan.workers(m) if r.served[n] == m]
            assert sum(c.loads[m, n] for n in drew) < c.L[m]
            assert not set(r.redispatched[m]) & set(drew)


def test_reals_to_1e9_and_a_dead_worker_is_replaced(ray_session):
    rng = np.random.default_rng(4)
    As = [rng.standard_normal((24, 7)), rng.standard_normal((18, 4))]
    drawn = random_problem(2, 4, 5)
    with HeteroCluster(As, a=drawn.a, u=drawn.u, time_scale=TIME_SCALE, seed=1) as c:
        assert c.N == 4 and c.L == (24, 18)
        for _ in range(3):
            xs = _inputs(rng, c.cols, c.F)
            ys = c.multiply(xs)
            assert relative_error(ys[0], As[0] @ xs[0]) <= 1e-9
            assert relative_error(ys[1], As[1] @ xs[1]) <= 1e-9
            _check_report(c, c.reports[-1])
        # every worker holds blocks of both masters, and either master decodes without worker 0
        c.replan(assignment_from_k(c.problem, np.full((2, 4), 0.5)))
        for m in range(2):
            assert c.plan.code_length(m) - c.loads[m, 0] >= c.L[m]
        c.crash_worker(0)
        failed = []
        for _ in range(4):
            xs = _inputs(rng, c.cols, c.F)
            ys = c.multiply(xs)
            assert relative_error(ys[0], As[0] @ xs[0]) <= 1e-9
            assert relative_error(ys[1], As[1] @ xs[1]) <= 1e-9
            r = c.reports[-1]
            failed += r.failed
            assert all(0 not in ws for ws in r.decoded_by)
        assert failed == [0]  # found dead once, then left out
        with pytest.raises(RuntimeError, match="dead"):
            c.replan("simple_greedy")


def test_model_figures_and_reports(gf_cluster):
    c, _ = gf_cluster
    c.replan("iterated_greedy")
    sim = c.simulate(2000, rng=0)
    assert sim.t_ref == c.t and sim.p_never == 0 and sim.mean > 0
    assert c.summary() == {"steps": 0, "t_star": c.t}
    c.multiply(_inputs(np.random.default_rng(5), c.cols))
    d = c.reports[-1].to_dict()
    assert d["t"] == c.t and d["rescued"] == () and len(d["completion_units"]) == c.M
    assert "HeteroCluster" in repr(c)


def test_bad_inputs_name_the_parameter(gf_cluster):
    c, _ = gf_cluster
    with pytest.raises(ValueError, match=r"^xs: needs one input per master, M = 2, got 1"):
        c.multiply([np.zeros(6, dtype=np.int64)])
    with pytest.raises(ValueError, match=r"^xs\[1\]: shape \(6,\) does not fit A_1"):
        c.multiply([np.zeros(6, dtype=np.int64), np.zeros(6, dtype=np.int64)])
    with pytest.raises(ValueError, match=r"^n: 9 must be a worker index"):
        c.crash_worker(9)
    with pytest.raises(ValueError, match=r"^assignment: 'fastest' is not a known method"):
        c.replan("fastest")


A2 = [np.ones((4, 3)), np.ones((5, 3))]
P2 = random_problem(2, 4, 0)


@pytest.mark.parametrize("kwargs, match", [
    ({"As": []}, r"^As: needs at least one matrix"),
    ({"As": np.ones((4, 3))}, r"^As: needs a sequence of matrices"),
    ({"As": [np.ones(4)]}, r"^As\[0\]: must be a non-empty 2-D matrix"),
    ({"assignment": "fastest"}, r"^assignment: 'fastest' is not a known method"),
    ({"time_scale": 0}, r"^time_scale: 0 must be a finite number > 0"),
    ({"seed": -1}, r"^seed: -1 must be an int >= 0"),
    ({"n_workers": 2}, r"^n_workers: 2 must be an int >= 3"),
    ({"a": P2.a}, r"^u: give both a and u"),
    ({"a": P2.a, "u": P2.u, "n_workers": 5}, r"^n_workers: 5 must equal the model's N = 4"),
    ({"a": P2.a[:, :2], "u": P2.u[:, :2]}, r"^N: needs more workers than masters"),
    ({"problem": P2}, r"^problem: its L = \[\d+, \d+\] must equal the row counts of As, "
                      r"\[4, 5\]"),
    ({"problem": HeteroProblem(L=[4, 5], a=P2.a, u=P2.u), "a": P2.a, "u": P2.u},
     r"^problem: give either problem or a and u"),
    ({"field": "gf(7)"}, r"^field: GF\(7\) has 7 elements, too few for master 0's MDS code "
                         r"of length \d+"),
])
def test_bad_construction_raises_before_starting_anything(kwargs, match):
    kw = {"As": A2, **kwargs}
    with pytest.raises(ValueError, match=match):
        HeteroCluster(kw.pop("As"), **kw)
