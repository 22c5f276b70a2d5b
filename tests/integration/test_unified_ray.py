"""The unified coding framework on Ray (MATH.md §2): ``UnifiedCluster`` must return what the
reference executor ``run_in_process`` returns and count the same communication, on the seed's
examples.  (The ``tradeoff`` command line needs no Ray: ``tests/unit/test_cli.py``.)

One Ray session for the module; the Ray tests share one cluster whose servers store each
example's matrix anew (``UnifiedCluster.load``, with K = 4 or 6), since starting a server and
warming up the field arithmetic costs seconds per process on a small machine.
"""

from __future__ import annotations

import json
import time
from fractions import Fraction

import numpy as np
import pytest
import ray

from elastic_coded.algebra import field, relative_error
from elastic_coded.runtime.unified_runtime import UnifiedCluster, UnifiedReport
from elastic_coded.schemes.unified import latency_load, run_in_process

HALF = Fraction(1, 2)
TIME_SCALE = 0.01  # seconds per time unit: steps of 0.05 .. 0.3 s

# (K, q, m, N, values communicated): the seed's worked examples (MATH.md §2).
SEED_RUNS = [
    (4, 4, 12, 4, 12),   # minimum bandwidth code: L = 1
    (4, 2, 12, 4, 24),   # minimum latency code: L = 2
    (6, 4, 20, 12, 84),  # 36 multicast + 48 unicast: L = 4.2
]
# fastest sets forced through ``multiply(X, fastest=...)``
FORCED = {
    (4, 4): [(3, 1, 0, 2)],
    (4, 2): [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (3, 2)],
    (6, 4): [(0, 1, 2, 3), (5, 4, 3, 2), (1, 3, 5, 0)],
}


@pytest.fixture(scope="module")
def cluster(ray_session):
    A = field("gf(2^8)").random((20, 3), np.random.default_rng(0))
    c = UnifiedCluster(A, K=6, mu=HALF, q=4, field="gf(2^8)", time_scale=TIME_SCALE, seed=11)
    yield c
    c.shutdown()


def _check_step(c: UnifiedCluster, A, X, fld, values, forced=None) -> UnifiedReport:
    """One step: exact (or 1e-9) outputs, counts equal to the theory and to the reference."""
    Y = c.multiply(X, fastest=forced)
    rep = c.reports[-1]
    K, q, m, N = c.K, c.q, A.shape[0], X.shape[1]
    if fld.exact:
        assert np.array_equal(Y, fld.matmul(A, X))
    else:
        assert relative_error(Y, A @ X) <= 1e-9
    # the report
    assert rep.step == len(c.reports) - 1 and rep.q == q
    assert len(rep.fastest) == q and sorted(rep.fastest + rep.stragglers) == list(range(K))
    assert len(rep.latencies) == K
    assert rep.model_latency == sorted(rep.latencies)[q - 1]
    assert rep.map_latency_s >= rep.model_latency * TIME_SCALE - 1e-3
    assert rep.map_latency_units == pytest.approx(rep.map_latency_s / TIME_SCALE)
    assert (rep.D, rep.L) == latency_load(K, HALF, N, q)
    assert rep.values_sent == values and rep.load == Fraction(values, m) == rep.L
    assert rep.load_matches
    assert rep.total_s >= rep.map_latency_s + rep.shuffle_s + rep.reduce_s - 1e-6
    if forced is not None:
        assert rep.forced and set(rep.fastest) == set(forced)
        assert all(np.isinf(rep.latencies[k]) for k in rep.stragglers)
    else:
        assert not rep.forced and np.all(np.isfinite(rep.latencies))
    # the reference executor, for the same fastest set, sends and decodes the same
    ref = run_in_process(A, X, K, HALF, q, fld, fastest=rep.fastest)
    assert rep.values_sent == ref.values_sent
    assert rep.values_by_round == ref.values_by_round
    assert rep.values_received == sum(ref.received)
    assert rep.packets == len(ref.plan.transmissions)
    assert fld.equal(Y, ref.outputs)
    json.dumps(rep.to_dict())
    return rep


@pytest.mark.ray
@pytest.mark.parametrize("fname", ["gf(2^8)", "gf(65521)"])
@pytest.mark.parametrize("K, q, m, N, values", SEED_RUNS)
def test_seed_examples_on_ray(cluster, fname, K, q, m, N, values):
    fld = field(fname)
    rng = np.random.default_rng(q * 100 + m)
    A = fld.random((m, 5), rng)
    c = cluster
    c.load(A, K=K, q=q, field=fname)
    assert (c.K, c.q, c.m, c.n, c.field) == (K, q, m, 5, fld)
    sets = set()
    for _ in range(6):  # random latencies: the fastest set changes from step to step
        rep = _check_step(c, A, fld.random((5, N), rng), fld, values)
        sets.add(frozenset(rep.fastest))
        if len(sets) >= 2 and _ >= 2:
            break
    if q < K:
        assert len(sets) >= 2
    for Q in FORCED[(K, q)]:
        _check_step(c, A, fld.random((5, N), rng), fld, values, forced=Q)


@pytest.mark.ray
def test_forced_stragglers_are_cancelled(cluster):
    c = cluster
    fld = field("gf(65521)")
    rng = np.random.default_rng(5)
    A = fld.random((12, 5), rng)
    c.load(A, K=4, q=2, field=fld)
    before = [s["maps_cancelled"] for s in c.servers_info()]
    _check_step(c, A, fld.random((5, 4), rng), fld, 24, forced=(2, 0))
    deadline = time.monotonic() + 10
    while True:
        after = [s["maps_cancelled"] for s in c.servers_info()]
        if all(after[k] > before[k] for k in (1, 3)) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert after[1] == before[1] + 1 and after[3] == before[3] + 1
    assert after[0] == before[0] and after[2] == before[2]


@pytest.mark.ray
def test_custom_latency_model_decides_the_fastest_set(cluster):
    c = cluster
    fld = field("gf(2^8)")
    rng = np.random.default_rng(6)
    A = fld.random((12, 5), rng)
    c.load(A, K=4, q=2, field=fld)
    c.latency = lambda rng, K, mu, N: [500.0, 2.0, 500.0, 3.0]  # 5 s against 0.03 s
    try:
        rep = _check_step(c, A, fld.random((5, 4), rng), fld, 24)
        assert set(rep.fastest) == {1, 3} and rep.model_latency == 3.0
        c.latency = lambda rng, K, mu, N: [1.0, 2.0]
        with pytest.raises(ValueError, match=r"latency: .* must return K = 4 finite"):
            c.multiply(fld.random((5, 4), rng))
    finally:
        c.latency = "shifted_exp"


@pytest.mark.ray
@pytest.mark.parametrize("K, q, m, N, values", SEED_RUNS)
def test_real_field(cluster, K, q, m, N, values):
    fld = field("real")
    rng = np.random.default_rng(m + q)
    A = fld.random((m, 6), rng)
    c = cluster
    c.load(A, K=K, q=q, field="real")
    for _ in range(2):
        _check_step(c, A, fld.random((6, N), rng), fld, values)
    _check_step(c, A, fld.random((6, N), rng), fld, values, forced=FORCED[(K, q)][-1])


@pytest.mark.ray
def test_one_input_vector_and_m_that_fits_only_some_n(cluster):
    c = cluster
    fld = field("gf(65521)")
    rng = np.random.default_rng(8)
    # K=4, q=4, m=6: the 6 batches hold one row each; N = 8 splits the sets evenly, N = 4 not
    A = fld.random((6, 5), rng)
    c.load(A, K=4, q=4, field=fld)
    _check_step(c, A, fld.random((5, 8), rng), fld, 12)
    with pytest.raises(ValueError, match=r"X: N = 4 inputs do not fit A's m = 6 rows.*"
                                         r"rows_multiple\(K, mu, N, q\) = 12"):
        c.multiply(fld.random((5, 4), rng))
    # K=4, q=2, m=12: one input vector (N = 1) cannot be split over q = 2 reducers
    A = fld.random((12, 5), rng)
    c.load(A, q=2)
    with pytest.raises(ValueError, match=r"N: 1 must be divisible by q = 2"):
        c.multiply(fld.random(5, rng))
    c.redesign(4)
    assert c.q == 4
    with pytest.raises(ValueError, match=r"N: 1 must be divisible by q = 4"):
        c.multiply(fld.random(5, rng))


@pytest.mark.ray
@pytest.mark.parametrize("kwargs, exc, match", [
    ({"K": 0}, ValueError, r"K: 0 must be >= 1"),
    ({"K": 4.0}, TypeError, r"K: must be an int"),
    ({"mu": Fraction(1, 10)}, ValueError, r"mu: .* must satisfy 1/K = 1/4 <= mu <= 1"),
    ({"mu": "half"}, ValueError, r"mu: 'half' is not a number"),
    ({"q": 1}, ValueError, r"q: 1 must lie in ceil\(1/mu\)..K = 2..4"),
    ({"q": 5}, ValueError, r"q: 5 must lie in"),
    ({"A": np.ones((5, 3), dtype=np.int64)}, ValueError, r"m: 5 does not fit the batches"),
    ({"A": np.ones(12, dtype=np.int64)}, ValueError, r"A: must be a non-empty 2-D array"),
    ({"A": np.full((12, 3), 300)}, ValueError, r"A: values must lie in \[0, 256\)"),
    ({"field": "gf(6)"}, ValueError, r"p: 6 is not prime"),
    ({"time_scale": -1.0}, ValueError, r"time_scale: -1.0 must be a finite number >= 0"),
    ({"time_scale": float("nan")}, ValueError, r"time_scale: nan"),
    ({"seed": -3}, ValueError, r"seed: -3 must be an int >= 0"),
    ({"latency": "pareto"}, ValueError, r"latency: 'pareto' must be 'shifted_exp' or a callable"),
])
def test_bad_construction_names_the_parameter_and_rule(ray_session, kwargs, exc, match):
    args = {"A": np.ones((12, 3), dtype=np.int64), "K": 4, "mu": HALF, "q": 4,
            "field": "gf(2^8)", "time_scale": TIME_SCALE}
    args.update(kwargs)
    A = args.pop("A")
    with pytest.raises(exc, match=match):
        UnifiedCluster(A, **args)


@pytest.mark.ray
def test_bad_step_input_names_the_parameter_and_rule(cluster):
    c = cluster
    fld = field("gf(2^8)")
    rng = np.random.default_rng(9)
    A = fld.random((12, 5), rng)
    c.load(A, K=4, q=4, field=fld)
    X = fld.random((5, 4), rng)
    n_reports = len(c.reports)
    with pytest.raises(ValueError, match=r"X: shape \(6, 4\) does not fit A \(12, 5\)"):
        c.multiply(fld.random((6, 4), rng))
    with pytest.raises(ValueError, match=r"N: 6 must be divisible by q = 4"):
        c.multiply(fld.random((5, 6), rng))
    with pytest.raises(TypeError, match=r"X: GF\(2\^8\) needs integer values"):
        c.multiply(np.full((5, 4), 0.5))
    for bad in ([0, 1], [0, 0, 1, 2], [0, 1, 2, 4]):
        with pytest.raises(ValueError, match=r"fastest: .* must be q = 4 distinct server ids "
                                             r"in 0..K-1 = 0..3"):
            c.multiply(X, fastest=bad)
    with pytest.raises(TypeError, match=r"fastest: must be a collection of server ids"):
        c.multiply(X, fastest=3)
    # a bad load leaves the cluster as it was
    with pytest.raises(ValueError, match=r"m: 7 does not fit the batches"):
        c.load(fld.random((7, 5), rng))
    with pytest.raises(ValueError, match=r"q: 1 must lie in"):
        c.redesign(1)
    with pytest.raises(ValueError, match=r"q: 4 must lie in ceil\(1/mu\)..K = 2..3"):
        c.load(A, K=3)
    with pytest.raises(ValueError, match=r"mu: .* must satisfy 1/K = 1/4 <= mu <= 1"):
        c.load(A, mu=Fraction(1, 5))
    assert len(c.reports) == n_reports and (c.K, c.q, c.m) == (4, 4, 12)
    _check_step(c, A, X, fld, 12)


@pytest.mark.ray
def test_lifecycle(ray_session):
    A = np.arange(4.0).reshape(2, 2)
    with UnifiedCluster(A, K=2, mu=HALF, q=2, field="real", time_scale=0.0) as c:
        assert repr(c) == "<UnifiedCluster 2x2 over real: K=2, mu=1/2, q=2, steps=0>"
        X = np.eye(2)
        assert relative_error(c.multiply(X), A) <= 1e-12
        rep = c.reports[0]
        assert np.isnan(rep.map_latency_units) and rep.load_matches
        assert [s["rows"] for s in c.servers_info()] == [1, 1]
    with pytest.raises(RuntimeError, match="already shut down"):
        c.multiply(X)
    c.shutdown()  # idempotent
    assert ray.is_initialized()  # the cluster did not start Ray, so it leaves it running
