"""Heterogeneous coded computation: Theorem 1, assignments, loads, plans, Monte Carlo
(MATH.md §3)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import optimize
from scipy.special import lambertw

from elastic_coded.families import hetero as H

# -------------------------------------------------------------------------------------------
# helpers
# -------------------------------------------------------------------------------------------

log_uniform = st.floats(min_value=-3.0, max_value=2.0).map(lambda x: 10.0**x)


def problem_with_values(values, L=None, a=1e-3) -> H.HeteroProblem:
    """A problem whose worker values v[m,n] = u/W equal ``values`` (a fixed)."""
    values = np.asarray(values, dtype=float)
    u = np.empty_like(values)
    for idx, target in np.ndenumerate(values):
        assert target < 1 / a
        u[idx] = optimize.brentq(lambda x, target=target: H.worker_value(a, x) - target,
                                 1e-12, 1e12, xtol=1e-14, rtol=1e-14)
    M = values.shape[0]
    L = np.ones(M) if L is None else L
    return H.HeteroProblem(L=L, a=np.full(values.shape, a), u=u)


@st.composite
def small_problems(draw):
    M = draw(st.integers(1, 3))
    N = draw(st.integers(M + 1, 7))
    seed = draw(st.integers(0, 2**31 - 1))
    return H.random_problem(M, N, seed, L_range=(20, 400))


def numeric_best_load(a: float, u: float, t: float) -> float:
    """argmax_l l Pr[T <= t] by bounded Brent on log l (the support is l < t/a)."""
    def neg(s):
        l = math.exp(s)
        return -float(H.expected_results(t, l, a, u))
    hi = math.log(t / a)
    res = optimize.minimize_scalar(neg, bounds=(hi - 60.0, hi), method="bounded",
                                   options={"xatol": 1e-12, "maxiter": 2000})
    return math.exp(res.x)


# -------------------------------------------------------------------------------------------
# processing-time model and Theorem 1
# -------------------------------------------------------------------------------------------

def test_cdf_is_the_shifted_exponential():
    a, u, l = 0.5, 2.0, 4.0
    assert H.cdf(1.9, l, a, u) == 0.0                           # before the shift a l = 2
    assert H.cdf(2.0, l, a, u) == 0.0
    t = 3.0
    assert H.cdf(t, l, a, u) == pytest.approx(1 - math.exp(-(u / l) * (t - a * l)), rel=1e-15)
    assert H.expected_results(t, l, a, u) == pytest.approx(l * H.cdf(t, l, a, u))
    assert H.cdf(5.0, 0.0, a, u) == 1.0 and H.expected_results(5.0, 0.0, a, u) == 0.0


@settings(max_examples=150, deadline=None)
@given(a=log_uniform, u=log_uniform, t=st.floats(-1.0, 4.0).map(lambda x: 10.0**x))
def test_lambert_load_is_the_numeric_maximiser(a, u, t):
    """l* = u t / (W - 1) maximises l Pr[T <= t] (Theorem 1), to 1e-6 relative."""
    l_star = float(H.optimal_load(a, u, t))
    value = float(H.expected_results(t, l_star, a, u))
    l_num = numeric_best_load(a, u, t)
    assert value >= float(H.expected_results(t, l_num, a, u)) * (1 - 1e-12)
    assert value == pytest.approx(float(H.worker_value(a, u)) * t, rel=1e-9)  # E = v t
    if a * u >= 1e-3:  # flatter optima cannot be located to 1e-6 in double precision
        assert l_num == pytest.approx(l_star, rel=1e-6)
    assert a * l_star < t  # the optimum returns something by t


@pytest.mark.parametrize("au", [0.0, 1e-300, 1e-16, 1e-10, 1e-6, 1e-3, 0.01, 0.1, 1.0, 10.0,
                                1e3, 1e6, 1e12])
def test_lambert_W_solves_its_equation_over_the_whole_range(au):
    W = float(H.lambert_W(au, 1.0))
    assert W >= 1.0
    if au == 0.0:
        assert W == 1.0
        assert float(H.optimal_load(0.0, 1.0, 1.0)) == math.inf
        return
    y = W - 1.0
    y_acc = float(H._w_minus_one(np.array(au)))
    # W - log W = 1 + a u, checked through phi(y) = y - log(1 + y) = a u without cancellation
    assert float(H._phi(np.array([y_acc]))[0]) == pytest.approx(au, rel=1e-12)
    assert y == pytest.approx(y_acc, rel=1e-12, abs=1e-15)
    if 1e-6 <= au <= 700:
        ref = -lambertw(-math.exp(-(1 + au)), k=-1).real
        assert W == pytest.approx(ref, rel=1e-10)


def test_lambert_W_tends_to_one_at_the_branch_point():
    aus = np.array([1e-2, 1e-4, 1e-8, 1e-12, 1e-16])
    W = H.lambert_W(aus, 1.0)
    assert np.all(np.diff(W) < 0) and np.all(W > 1)
    assert W[-1] == pytest.approx(1.0, abs=1e-7)
    # W - 1 ~ sqrt(2 a u) near the branch point
    assert H._w_minus_one(np.array(1e-12)) == pytest.approx(math.sqrt(2e-12), rel=1e-5)


def test_t_star_and_worker_value():
    assert H.t_star(10.0, [1.0, 4.0]) == 2.0
    assert H.t_star(10.0, []) == math.inf
    a, u = 0.3, 2.0
    assert float(H.worker_value(a, u)) == pytest.approx(u / float(H.lambert_W(a, u)))


# -------------------------------------------------------------------------------------------
# validation
# -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    # N must exceed M
    (dict(L=[5, 5], a=np.ones((2, 2)), u=np.ones((2, 2))), r"N: .*N > M.*N=2, M=2"),
    # non-positive a
    (dict(L=[5], a=[[1.0, -0.5]], u=[[1.0, 1.0]]), r"a: .*positive and finite.*a\[0, 1\] = -0.5"),
    # NaN u
    (dict(L=[5], a=[[1.0, 1.0]], u=[[1.0, np.nan]]), r"u: .*positive and finite"),
    # zero L
    (dict(L=[0], a=[[1.0, 1.0]], u=[[1.0, 1.0]]), r"L: .*positive"),
    # fractional L
    (dict(L=[2.5], a=[[1.0, 1.0]], u=[[1.0, 1.0]]), r"L: .*whole numbers.*L\[0\] = 2.5"),
    # a's rows must match L
    (dict(L=[5, 5], a=np.ones((3, 4)), u=np.ones((3, 4))), r"a: must have shape \(M, N\)"),
    # u's shape must match a
    (dict(L=[5], a=np.ones((1, 3)), u=np.ones((1, 4))), r"u: shape"),
    # L must be 1-D
    (dict(L=[[5]], a=np.ones((1, 3)), u=np.ones((1, 3))), r"L: must be a non-empty 1-D"),
])
def test_bad_problem_raises_with_a_clear_message(kwargs, match):
    with pytest.raises(ValueError, match=match):
        H.HeteroProblem(**kwargs)


def test_bad_assignments_and_arguments_raise():
    P = H.random_problem(2, 4, 0)
    with pytest.raises(ValueError, match=r"owner: entries must be -1.*\[0, 2\)"):
        H.assignment_from_owner(P, [0, 1, 2, 0])
    with pytest.raises(ValueError, match=r"owner: needs one entry per worker \(N=4\)"):
        H.assignment_from_owner(P, [0, 1])
    with pytest.raises(ValueError, match=r"k: a worker serves at most one master.*k\[m, 0\]"):
        H.assignment_from_k(P, [[0.7, 0, 0, 1], [0.6, 1, 1, 0]])
    with pytest.raises(ValueError, match=r"k: probabilities must lie in \[0, 1\]"):
        H.assignment_from_k(P, [[-0.1, 0, 0, 1], [0.6, 1, 1, 0]])
    with pytest.raises(ValueError, match="t: must be finite and >= 0"):
        H.optimal_load(1.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="a: must be finite and >= 0"):
        H.lambert_W(-1.0, 1.0)
    with pytest.raises(ValueError, match="patience"):
        H.iterated_greedy(P, patience=0)
    with pytest.raises(ValueError, match="destroy_fraction"):
        H.iterated_greedy(P, destroy_fraction=0.0)
    with pytest.raises(ValueError, match=r"M\^N = 2\^4 = 16 .* max_combinations=10"):
        H.exhaustive_assignment(P, max_combinations=10)
    idle = H.assignment_from_owner(P, [0, 0, 0, -1])
    with pytest.raises(ValueError, match="master 1 has no worker"):
        H.integer_loads(idle, P)
    with pytest.raises(ValueError, match="master 1 has no worker"):
        H.validate_assignment(P, idle)
    with pytest.raises(TypeError, match="needs a real number"):
        H.HeteroProblem(L=["x"], a=[[1.0, 1.0]], u=[[1.0, 1.0]])


# -------------------------------------------------------------------------------------------
# assignments
# -------------------------------------------------------------------------------------------

def test_partition_instance_where_simple_greedy_is_suboptimal():
    """Identical values 3,3,2,2,2 for two masters: largest-value-first gets min 5, optimum 6."""
    P = problem_with_values([[3, 3, 2, 2, 2], [3, 3, 2, 2, 2]])
    sg = H.simple_greedy(P)
    ex = H.exact_assignment(P)
    bf = H.exhaustive_assignment(P)
    ig = H.iterated_greedy(P, rng=1)
    assert sg.value == pytest.approx(5, rel=1e-9) and sg.t == pytest.approx(1 / 5)  # t = L/sum v
    assert ex.value == pytest.approx(6, rel=1e-9) and ex.info["optimal"]
    assert bf.value == pytest.approx(ex.value, rel=1e-12)
    assert ig.value == pytest.approx(6, rel=1e-9)
    assert sorted(sorted(P.v[0][np.asarray(ex.owner) == m].round(9)) for m in range(2)) == \
        [[2, 2, 2], [3, 3]]
    lp = H.probabilistic_assignment(P)
    assert lp.t == pytest.approx(1 / 6, rel=1e-9)  # the LP can split 12 evenly


def test_simple_greedy_follows_algorithm_2():
    """Init: master 0 then master 1 take their best free worker; then the poorest master
    takes its best free worker."""
    v = [[5.0, 1.0, 4.0, 0.5],
         [4.0, 3.0, 1.0, 2.0]]
    P = problem_with_values(v)
    sg = H.simple_greedy(P)
    # init: m0 <- w0 (5); m1 <- w1 (3, w0 taken); V = (5, 3): m1 <- w3 (2); V = (5, 5):
    # tie -> m0 <- w2 (4).
    assert sg.owner == (0, 1, 0, 1)


def test_best_value_initialisation_can_leave_a_master_empty():
    P = problem_with_values([[3.0, 3.0, 3.0], [1.0, 1.0, 1.0]])
    init = H.best_value_assignment(P)
    assert init.owner == (0, 0, 0) and init.t == math.inf
    ig = H.iterated_greedy(P, rng=0)
    assert math.isfinite(ig.t) and ig.info["init_t"] == math.inf
    H.validate_assignment(P, ig)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(P=small_problems(), seed=st.integers(0, 1000))
def test_assignments_on_random_small_instances(P, seed):
    sg = H.simple_greedy(P)
    ig = H.iterated_greedy(P, rng=seed, max_iter=20, patience=5)
    ex = H.exact_assignment(P)
    bf = H.exhaustive_assignment(P)
    lp = H.probabilistic_assignment(P)
    init = H.best_value_assignment(P)
    for asg in (sg, ig, ex, bf, lp):
        H.validate_assignment(P, asg)
    for asg in (sg, ig, ex, bf):
        assert all(o >= 0 for o in asg.owner)  # every worker is used
    assert ex.info["optimal"]
    assert ex.value == pytest.approx(bf.value, rel=1e-9)          # MILP == brute force
    assert ex.value >= sg.value * (1 - 1e-9)
    assert ex.value >= ig.value * (1 - 1e-9)
    assert ig.value >= init.value * (1 - 1e-12)                   # never worse than its init
    assert lp.t <= ex.t * (1 + 1e-9)                              # LP bounds every dedicated t
    assert lp.info["fractional_workers"] <= P.M - 1 or P.M == 1
    for asg in (sg, ig, ex, lp):
        loads = H.integer_loads(asg, P)
        assert loads.dtype.kind == "i" and np.all(loads >= 0)
        assert np.all(loads.sum(axis=1) >= P.L)                   # MDS has enough coded rows
        assert np.all(loads[asg.k == 0] == 0)
        plan = H.make_plan(P, asg, loads)
        assert all(plan.code_length(m) >= P.L[m] for m in range(P.M))


def test_iterated_greedy_is_deterministic_for_a_seed():
    P = H.random_problem(3, 15, 4)
    a = H.iterated_greedy(P, rng=7)
    b = H.iterated_greedy(P, rng=7)
    assert a.owner == b.owner and a.t == b.t


def test_exact_reports_a_bound_and_beats_greedy_on_a_medium_instance():
    P = H.random_problem(3, 14, 11)
    ex = H.exact_assignment(P, time_limit=20)
    ig = H.iterated_greedy(P, rng=0)
    assert ex.value >= ig.value * (1 - 1e-9)
    if ex.info["optimal"]:
        assert ex.info["upper_bound_value"] == pytest.approx(ex.value, rel=1e-6)


def test_assignment_loads_meet_the_expectation_at_t_star():
    P = H.random_problem(3, 10, 2)
    asg = H.iterated_greedy(P, rng=0)
    for m in range(P.M):
        mask = asg.k[m] > 0
        e = H.expected_results(asg.t_star[m], asg.loads[m, mask], P.a[m, mask], P.u[m, mask])
        assert e.sum() == pytest.approx(P.L[m], rel=1e-9)         # E[X_m(t*_m)] = L_m
    assert asg.t == max(asg.t_star)
    assert "iterated_greedy" in repr(asg)


# -------------------------------------------------------------------------------------------
# integer loads, plans
# -------------------------------------------------------------------------------------------

def test_rounding_costs_what_the_docstring_says():
    P = H.random_problem(3, 12, 5, L_range=(2000, 4000))
    asg = H.iterated_greedy(P, rng=0)
    loads = H.integer_loads(asg, P)
    t_int = H.approx_completion_time(P, asg, loads)
    for m in range(P.M):
        mask = asg.k[m] > 0
        bound = float(np.max((P.W[m, mask] - 1) / (8 * asg.loads[m, mask] ** 2)))
        rel = t_int[m] / asg.t_star[m] - 1
        assert -1e-12 <= rel <= 2 * bound + 1e-12


def test_integer_loads_top_up_when_t_is_too_small():
    P = H.random_problem(2, 6, 3)
    asg = H.simple_greedy(P)
    loads = H.integer_loads(asg, P, t=asg.t * 0.05)
    assert np.all(loads.sum(axis=1) >= P.L)
    assert np.all(loads.sum(axis=1) <= P.L + 1)  # topped up exactly to L


def test_plan_is_readable_and_validates():
    P = H.random_problem(2, 5, 0, L_range=(100, 100))
    asg = H.simple_greedy(P)
    plan = H.make_plan(P, asg, H.integer_loads(asg, P))
    text = repr(plan)
    assert text.startswith("HeteroPlan(dedicated, M=2, N=5")
    assert "master 0 (L=100" in text and "w" in text
    assert sorted(w for m in range(2) for w in plan.workers(m)) == list(range(5))
    with pytest.raises(ValueError, match=r"could never decode"):
        H.HeteroPlan("dedicated", (100,), 3, (((0, 10), (1, 20)),), ((1.0, 1.0),), (1.0,))
    with pytest.raises(ValueError, match=r"serves more than one master"):
        H.HeteroPlan("dedicated", (1, 1), 3, (((0, 1),), ((0, 1),)), ((1.0,), (1.0,)),
                     (1.0, 1.0))
    lp = H.probabilistic_assignment(P)
    pplan = H.make_plan(P, lp, H.integer_loads(lp, P))
    assert pplan.policy == "probabilistic"


# -------------------------------------------------------------------------------------------
# Monte Carlo
# -------------------------------------------------------------------------------------------

def test_monte_carlo_matches_the_one_worker_expectation():
    """One worker holding all L rows: completion = T, E[T] = a l + l/u."""
    a, u, L = 0.02, 0.5, 30
    P = H.HeteroProblem(L=[L], a=[[a, 1.0]], u=[[u, 1.0]])
    asg = H.assignment_from_owner(P, [0, -1])
    loads = np.array([[L, 0]])
    res = H.simulate(P, asg, loads, trials=40_000, rng=0)
    expected = a * L + L / u
    assert res.mean == pytest.approx(expected, abs=4 * res.stderr)
    assert res.stderr < 0.01 * expected
    # the decode-by-t fraction is the cdf
    t_ref = a * L + 0.7 * L / u
    res2 = H.simulate(P, asg, loads, trials=40_000, rng=1, t_ref=t_ref)
    assert res2.p_by_t_ref == pytest.approx(float(H.cdf(t_ref, L, a, u)), abs=0.01)
    assert res.p_never == 0.0


def test_monte_carlo_mds_waits_for_enough_rows():
    """Two workers with L rows each (replication): completion = min(T1, T2)."""
    L = 10
    P = H.HeteroProblem(L=[L], a=[[0.1, 0.1, 1.0]], u=[[1.0, 1.0, 1.0]])
    asg = H.assignment_from_owner(P, [0, 0, -1])
    res = H.simulate(P, asg, np.array([[L, L, 0]]), trials=40_000, rng=2)
    # min of two iid (1 + Exp(rate 0.1)) = 1 + Exp(rate 0.2): mean 6
    assert res.mean == pytest.approx(6.0, abs=4 * res.stderr)
    # and never decodes with too few rows
    short = H.simulate(P, asg, np.array([[4, 5, 0]]), trials=100, rng=0)
    assert short.p_never == 1.0 and short.mean == math.inf


def test_probabilistic_workers_draw_their_master():
    """Master 0 can decode only when worker 2 (k = 0.3) chooses it."""
    P = H.HeteroProblem(L=[5, 1], a=[[0.1, 0.1, 0.1]] * 2, u=[[1.0, 1.0, 1.0]] * 2)
    k = np.array([[1.0, 0.0, 0.3], [0.0, 1.0, 0.7]])
    asg = H.assignment_from_k(P, k)
    loads = np.array([[1, 0, 5], [0, 1, 5]])
    res = H.simulate(P, asg, loads, trials=20_000, rng=3)
    assert res.p_never == pytest.approx(0.7, abs=0.015)
    assert np.isfinite(res.samples[:, 0]).mean() == pytest.approx(0.3, abs=0.015)
    assert np.all(np.isfinite(res.samples[:, 1]))
    assert res.mean == math.inf
    decoded = np.isfinite(res.samples).all(axis=1)
    assert res.mean_decoded == pytest.approx(res.samples[decoded].max(axis=1).mean())


def test_end_to_end_ordering_on_a_paper_like_instance():
    P = H.random_problem(3, 24, 9)
    sched = {
        "uncoded": H.uncoded_baseline(P),
        "unbalanced": H.unbalanced_coded_baseline(P),
    }
    ig = H.iterated_greedy(P, rng=0)
    sched["iterated"] = (ig, H.integer_loads(ig, P))
    means = {name: H.simulate(P, a, l, trials=4000, rng=0).mean for name, (a, l) in sched.items()}
    assert means["iterated"] < means["unbalanced"] < means["uncoded"]
    uas, uload = sched["uncoded"]
    assert np.all(uload.sum(axis=1) == P.L)
    bas, bload = sched["unbalanced"]
    for m in range(P.M):
        row = bload[m][bas.k[m] > 0]
        assert np.all(row == row[0]) and row.sum() > P.L[m]


# -------------------------------------------------------------------------------------------
# packaging
# -------------------------------------------------------------------------------------------

HETERO_NAMES = [
    "cdf", "expected_results", "sample_time", "lambert_W", "optimal_load", "worker_value",
    "t_star", "HeteroProblem", "random_problem", "Assignment", "assignment_from_owner",
    "assignment_from_k", "validate_assignment", "best_value_assignment", "simple_greedy",
    "iterated_greedy", "exact_assignment", "exhaustive_assignment", "probabilistic_assignment",
    "integer_loads", "approx_completion_time", "HeteroPlan", "make_plan", "SimulationResult",
    "simulate", "even_split_owner", "uncoded_baseline", "unbalanced_coded_baseline"]


def test_package_exports_the_public_names():
    """The package's ``__all__`` is the public surface; each name comes from a topic module."""
    assert sorted(H.__all__) == sorted(HETERO_NAMES)
    for name in H.__all__:
        obj = getattr(H, name)
        assert obj.__module__.startswith("elastic_coded.families.hetero._"), name


def test_scheme_does_not_import_ray():
    code = ("import sys, elastic_coded.families.hetero; "
            "sys.exit(1 if 'ray' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
