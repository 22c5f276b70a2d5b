"""The unified coding framework (MATH.md §2): theory, plans, the reference executor."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field, relative_error
from elastic_coded.families.unified import (
    as_mu,
    check_shuffle_plan,
    encode_packet,
    encode_storage,
    latency_load,
    load_breakdown,
    lower_bound,
    map_compute,
    reduce_assignment,
    rows_multiple,
    run_in_process,
    shuffle_plan,
    simulate_map_latency,
    storage_design,
    tradeoff,
)

HALF = Fraction(1, 2)

# (K, mu, N, q, m, values communicated): the seed's worked examples.
SEED_RUNS = [
    (4, HALF, 4, 4, 12, 12),   # minimum bandwidth code: L = 1
    (4, HALF, 4, 2, 12, 24),   # minimum latency code: L = 2
    (6, HALF, 12, 4, 20, 84),  # 36 multicast + 48 unicast: L = 4.2
]


def _data(fld, m, n, N, seed=0):
    rng = np.random.default_rng(seed)
    return fld.random((m, n), rng), fld.random((n, N), rng)


# ------------------------------------------------------------------------------------------------
# theory
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K, mu, N, q, D, L", [
    (4, HALF, 4, 4, Fraction(37, 6), Fraction(1)),        # minimum bandwidth code
    (4, HALF, 4, 2, Fraction(19, 6), Fraction(2)),        # minimum latency code
    (6, HALF, 12, 4, Fraction(117, 10), Fraction(21, 5)),  # L = 4.2
    (4, 0.5, 4, 4, Fraction(37, 6), Fraction(1)),         # mu as a float
    (4, "1/2", 4, 2, Fraction(19, 6), Fraction(2)),       # mu as a string
])
def test_latency_load_seed_examples(K, mu, N, q, D, L):
    assert latency_load(K, mu, N, q) == (D, L)


def test_breakdown_of_the_k6_example():
    b = load_breakdown(6, HALF, 12, 4)
    assert (b.r, b.mu_bar, b.s_q, b.finish) == (2, HALF, 2, "unicast")
    assert b.B == (Fraction(1, 10), Fraction(3, 5), Fraction(3, 10))
    assert b.multicast * 20 == 36 and b.unicast_cost * 20 == 48
    assert b.rounds == (2,)


def test_mu_bar_used_when_mu_q_is_not_an_integer():
    b = load_breakdown(4, HALF, 6, 3)  # mu q = 3/2 -> mu_bar = 1/3
    assert (b.r, b.mu_bar) == (1, Fraction(1, 3))
    assert b.D == HALF * 6 * (1 + Fraction(1, 2) + Fraction(1, 3) + Fraction(1, 4))


@pytest.mark.parametrize("value, K, expected", [
    (0.333, 4, Fraction(1, 3)),   # three decimals of 1/3 mean 1/3
    (0.667, 6, Fraction(2, 3)),
    (1 / 3, 3, Fraction(1, 3)),
    (0.3, 4, Fraction(3, 10)),    # a decimal far from any p/d, d <= K, is kept as typed
    (0.499, 4, Fraction(499, 1000)),
    (np.float64(0.25), 4, Fraction(1, 4)),
    (1, 4, Fraction(1)),
    ("2/3", 3, Fraction(2, 3)),
])
def test_mu_conversion(value, K, expected):
    assert as_mu(value, K) == expected


def test_tradeoff_envelope_and_bound():
    for K, mu, N in [(4, HALF, 4), (6, HALF, 12), (8, Fraction(3, 8), 24), (7, Fraction(2, 7), 7)]:
        t = tradeoff(K, mu, N)
        assert [p.q for p in t.points] == list(range(math.ceil(1 / mu), K + 1))
        for p in t.points:
            assert (p.D, p.L) == latency_load(K, mu, N, p.q)
            assert p.envelope <= p.L                      # envelope below or on every point
            assert p.lower_bound <= p.L                   # the bound never beats the scheme
            assert p.lower_bound == lower_bound(K, mu, N, p.q)
            assert p.on_envelope == (p.envelope == p.L)
        env = t.envelope
        slopes = [(l1 - l0) / (d1 - d0) for (d0, l0), (d1, l1) in zip(env, env[1:])]
        assert all(s0 <= s1 for s0, s1 in zip(slopes, slopes[1:]))  # convex
        assert env[0] == (t.points[0].D, t.points[0].L) and env[-1] == (t.points[-1].D,
                                                                         t.points[-1].L)
    table = tradeoff(4, HALF, 4).table()
    assert "K=4, mu=1/2, N=4" in table and "6.1667" in table and "lower bound" in table


def test_lower_bound_never_exceeds_the_achieved_load():
    for K in range(1, 10):
        for mu in sorted({Fraction(a, d) for d in range(1, K + 1) for a in range(1, d + 1)}):
            for q in range(math.ceil(1 / mu), K + 1):
                assert lower_bound(K, mu, q, q) <= latency_load(K, mu, q, q)[1]


@pytest.mark.parametrize("K, mu, N, q", [(4, HALF, 4, 2), (4, HALF, 4, 4), (6, HALF, 12, 4),
                                         (8, Fraction(1, 4), 8, 5)])
def test_map_latency_monte_carlo(K, mu, N, q):
    D = float(latency_load(K, mu, N, q)[0])
    est = simulate_map_latency(K, mu, N, q, trials=40_000, rng=np.random.default_rng(7))
    assert abs(est - D) <= 0.02 * D


# ------------------------------------------------------------------------------------------------
# the scheme on the seed's examples
# ------------------------------------------------------------------------------------------------

def test_storage_design_of_the_k6_example():
    d = storage_design(6, HALF, 4, 20, field("gf(65521)"))
    assert (d.n_coded, len(d.batches), d.batch_size) == (30, 15, 2)
    assert all(len(rows) == 10 for rows in d.server_rows)
    for b, T in enumerate(d.batches):
        assert len(T) == 2
        for k in range(6):
            assert (set(d.batch_rows(b)) <= set(d.server_rows[k])) == (k in T)
    assert reduce_assignment([0, 1, 2, 3], 12) == ((0, 1, 2), (3, 4, 5), (6, 7, 8), (9, 10, 11))


@pytest.mark.parametrize("fname", ["gf(2^8)", "gf(65521)"])
@pytest.mark.parametrize("K, mu, N, q, m, values", SEED_RUNS)
def test_seed_examples_every_fastest_set(fname, K, mu, N, q, m, values):
    fld = field(fname)
    A, X = _data(fld, m, 5, N)
    Y = fld.matmul(A, X)
    assert latency_load(K, mu, N, q)[1] * m == values
    for Q in itertools.combinations(range(K), q):
        res = run_in_process(A, X, K, mu, q, fld, fastest=Q)
        assert fld.equal(res.outputs, Y), Q
        assert res.values_sent == values and res.load == res.theory.L, Q


def test_k6_example_splits_like_the_seed():
    res = run_in_process(*_data(field("gf(2^8)"), 20, 3, 12), 6, HALF, 4, "gf(2^8)",
                         fastest=[0, 1, 2, 3])
    assert dict(res.values_by_round) == {2: 36, 0: 48}   # 9 x 4 multicast, 12 x 4 unicast
    multicasts = [t for t in res.plan.transmissions if t.round == 2]
    assert len(multicasts) == 12 and all(t.size == 3 and len(t.receivers) == 2
                                         for t in multicasts)
    assert res.map_values == (120,) * 4 and res.received == (30,) * 4


def test_gf2t_packets_are_xors():
    fld = field("gf(2^8)")
    A, X = _data(fld, 12, 4, 4)
    d = storage_design(4, HALF, 4, 12, fld)
    plan = shuffle_plan(d, range(4), 4)
    stored = encode_storage(d, A)
    for t in plan.transmissions:
        mp = map_compute(d, stored[t.sender], X)
        parts = [mp[d.local_index(t.sender, s.rows), list(s.outputs)] for s in t.segments]
        assert np.array_equal(encode_packet(d, t, mp), np.bitwise_xor.reduce(parts))


def test_extra_multicast_round_finishes_when_cheaper():
    K, mu, N, q = 8, HALF, 6, 6
    b = load_breakdown(K, mu, N, q)
    assert b.finish == "multicast" and b.rounds == (3, 2)
    m = rows_multiple(K, mu, N, q)
    fld = field("gf(65521)")
    A, X = _data(fld, m, 2, N)
    Y = fld.matmul(A, X)
    for Q in [(0, 1, 2, 3, 4, 5), (2, 3, 4, 5, 6, 7), (0, 2, 3, 5, 6, 7)]:
        res = run_in_process(A, X, K, mu, q, fld, fastest=Q)
        assert fld.equal(res.outputs, Y) and res.load == b.L


def test_real_field_run():
    fld = field("real")
    for K, mu, N, q, m, values in SEED_RUNS:
        A, X = _data(fld, m, 6, N, seed=3)
        for Q in itertools.combinations(range(K), q):
            res = run_in_process(A, X, K, mu, q, fld, fastest=Q)
            assert relative_error(res.outputs, A @ X) <= 1e-9, (K, q, Q)
            assert res.values_sent == values


def test_check_shuffle_plan_rejects_a_short_plan():
    d = storage_design(6, HALF, 4, 20, field("gf(65521)"))
    plan = shuffle_plan(d, [1, 2, 4, 5], 12)
    check_shuffle_plan(d, plan)
    with pytest.raises(ValueError, match="ends with"):
        check_shuffle_plan(d, replace(plan, transmissions=plan.transmissions[:-1]))


# ------------------------------------------------------------------------------------------------
# randomised: any K <= 8, mu, q, N, fastest set
# ------------------------------------------------------------------------------------------------

def _all_cases(max_coded: int = 240) -> list[tuple[int, Fraction, int, int]]:
    """Every (K <= 8, mu = a/d with d <= K, q, N in {q, 2q}) whose smallest m fits GF(2^8)."""
    cases = []
    for K in range(1, 9):
        for mu in sorted({Fraction(a, d) for d in range(1, K + 1) for a in range(1, d + 1)}):
            for q in range(math.ceil(1 / mu), K + 1):
                for N in (q, 2 * q):
                    if K * rows_multiple(K, mu, N, q) // q <= max_coded:
                        cases.append((K, mu, N, q))
    return cases


_CASES = _all_cases()
_SHUFFLING = [c for c in _CASES if load_breakdown(*c).L > 0]


@st.composite
def unified_cases(draw):
    # Mostly cases with a nontrivial shuffle; the rest (no shuffle needed) from everything.
    K, mu, N, q = draw(st.sampled_from(_SHUFFLING) | st.sampled_from(_CASES))
    m = rows_multiple(K, mu, N, q)
    if 2 * K * m // q <= 240:
        m *= draw(st.integers(1, 2))
    fastest = draw(st.permutations(range(K)))[:q]
    fname = draw(st.sampled_from(["gf(2^8)", "gf(65521)"]))
    return K, mu, N, q, m, tuple(fastest), fname, draw(st.integers(0, 2**16))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(unified_cases())
def test_random_runs_match_the_theory(case):
    K, mu, N, q, m, fastest, fname, seed = case
    fld = field(fname)
    A, X = _data(fld, m, 3, N, seed)
    res = run_in_process(A, X, K, mu, q, fld, fastest=fastest)
    assert fld.equal(res.outputs, fld.matmul(A, X))
    assert res.values_sent == latency_load(K, mu, N, q)[1] * m


# ------------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: latency_load(4, Fraction(1, 5), 4, 4), r"mu: .*1/K = 1/4"),
    (lambda: latency_load(4, 1.5, 4, 4), r"mu: .*<= 1"),
    (lambda: latency_load(4, HALF, 4, 1), r"q: 1 must lie in ceil\(1/mu\)..K = 2..4"),
    (lambda: latency_load(4, HALF, 4, 5), r"q: 5 must lie in"),
    (lambda: latency_load(4, 0.333, 4, 2), r"q: 2 must lie in .*3..4"),
    (lambda: latency_load(4, "one half", 4, 2), r"mu: 'one half'"),
    (lambda: latency_load(4, HALF, 0, 2), r"N: 0 must be >= 1"),
    (lambda: rows_multiple(4, HALF, 6, 4), r"N: 6 must be divisible by q = 4"),
    (lambda: storage_design(6, HALF, 4, 5, "gf(65521)"),
     r"m: 5 does not fit the batches: .*C\(6, 2\) = 15 batches; m must be a multiple of 10"),
    (lambda: shuffle_plan(storage_design(6, HALF, 4, 20, "gf(65521)"), range(4), 6),
     r"N: 6 must be divisible by q = 4"),
    (lambda: shuffle_plan(storage_design(6, HALF, 4, 20, "gf(65521)"), [0, 1, 1, 2], 12),
     r"fastest: .*q = 4 distinct server ids in 0..K-1 = 0..5"),
    (lambda: shuffle_plan(storage_design(6, HALF, 4, 20, "gf(65521)"), [0, 1, 2, 6], 12),
     r"fastest:"),
    (lambda: storage_design(4, HALF, 2, 600, "gf(2^8)"), r"m: the storage code needs .*1200"),
    (lambda: run_in_process(np.zeros((12, 3)), np.zeros((4, 4)), 4, HALF, 4),
     r"A, X: need A \(m x n\) and X \(n x N\)"),
])
def test_bad_input_names_the_parameter_and_rule(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_segment_divisibility_is_enforced():
    # K=4, mu=1/2, q=4: m=6 fills the 6 batches (one row each) but round j=2 splits each set of
    # one value into 2 segments.
    d_bad = storage_design(4, HALF, 4, 6, "gf(65521)")
    with pytest.raises(ValueError, match=r"m: 6 does not fit the shuffle segments.*multiple of "
                                         r"rows_multiple\(K, mu, N, q\) = 12"):
        shuffle_plan(d_bad, range(4), 4)
    assert rows_multiple(4, HALF, 4, 4) == 12 and rows_multiple(6, HALF, 12, 4) == 20


UNIFIED_NAMES = [
    "MuLike", "LoadBreakdown", "TradeoffPoint", "Tradeoff", "StorageDesign", "Segment",
    "Transmission", "ShufflePlan", "RunResult", "as_mu", "load_breakdown", "latency_load",
    "lower_bound", "tradeoff", "rows_multiple", "storage_design", "encode_storage", "map_compute",
    "decoding_rows", "decode_condition", "reduce_assignment", "shuffle_plan", "check_shuffle_plan",
    "encode_packet", "decode_packet", "receive_packet", "reduce_outputs", "reduce_server",
    "reduce_groups", "received_rows", "run_in_process", "simulate_map_latency",
    "sample_map_latencies", "plot_tradeoff"]


def test_package_exports_the_public_names():
    """The package's ``__all__`` is the public surface; each name comes from a topic module."""
    import elastic_coded.families.unified as U

    assert sorted(U.__all__) == sorted(UNIFIED_NAMES)
    for name in U.__all__:
        obj = getattr(U, name)
        if name != "MuLike":  # a typing alias has no module of its own
            assert obj.__module__.startswith("elastic_coded.families.unified._"), name


def test_schemes_module_does_not_import_ray():
    code = ("import sys, elastic_coded.families.unified; "
            "sys.exit('ray' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("K, mu, q, N, Q", [(6, "1/2", 4, 4, (0, 2, 3, 5)),
                                            (4, "1/2", 2, 4, (1, 3)), (6, "1/3", 3, 6, (0, 1, 4))])
def test_reduce_groups_name_m_distinct_rows_the_shuffle_delivers_for_every_output(K, mu, q, N, Q):
    """Each output of a fastest server is decoded from ``m`` distinct coded rows: its own rows
    first, the rest among those the Shuffle sends it; every output is in exactly one group."""
    from elastic_coded.families.unified import received_rows, reduce_groups, rows_multiple

    m = rows_multiple(K, mu, N, q)
    d = storage_design(K, mu, q, m, "gf(65537)")
    plan = shuffle_plan(d, Q, N)
    for k in Q:
        got = received_rows(plan, k)
        groups = reduce_groups(d, plan, k)
        assert (sorted(c for cs in groups.values() for c in cs)
                == list(range(len(plan.outputs_of(k)))))
        own = set(d.server_rows[k])
        for rows, cols in groups.items():
            assert len(rows) == len(set(rows)) == d.m
            for c in cols:
                o = plan.outputs_of(k)[c]
                assert all(r in own or r in got.get(o, ()) for r in rows)
