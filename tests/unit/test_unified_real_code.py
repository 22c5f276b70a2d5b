"""The unified scheme's real storage code (``families/unified/_lanes.py``): one small code per
lane, decodes chosen by the Shuffle plan, and the finite fields' Reed-Solomon code untouched."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field, relative_error
from elastic_coded.algebra.lagrange import rounding_bound, solve_condition
from elastic_coded.families.unified import (
    check_shuffle_plan,
    decode_condition,
    decoding_rows,
    reduce_groups,
    reduce_outputs,
    rows_multiple,
    run_in_process,
    shuffle_plan,
    storage_design,
)
from elastic_coded.families.unified._lanes import lane_code, select
from elastic_coded.families.unified._storage import _mds_generator

HALF = Fraction(1, 2)
REAL = field("real")

# (K, mu, q, m): unicast finish; two lane classes (m / beta not whole); extra multicast round;
# no choice (r = 1, q = K)
CASES = [(6, HALF, 4, 20), (8, HALF, 5, 35), (8, HALF, 6, 126), (10, HALF, 3, 6),
         (7, Fraction(1, 3), 6, 36), (6, HALF, 6, 60)]


def _lane_balanced(d, rows) -> bool:
    counts = np.bincount(np.asarray(rows) % d.batch_size, minlength=d.batch_size)
    return all(counts[c] == d.lanes.data_of(c) for c in range(d.batch_size))


def _bound(d, rows, A, X) -> float:
    return rounding_bound(X.shape[0] + 10 * d.decode_size, decode_condition(d, rows),
                          float(np.linalg.norm(A)), float(np.linalg.norm(X)))


# ------------------------------------------------------------------------------------------------
# the code
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K, mu, q, m", CASES)
def test_generator_is_systematic_and_lane_diagonal(K, mu, q, m):
    d = storage_design(K, mu, q, m, REAL)
    G, beta = d.generator, d.batch_size
    assert G.shape == (d.n_coded, m) and np.array_equal(G[:m], np.eye(m))
    i, j = np.nonzero(G)
    assert np.all(i % beta == j % beta)  # a coded row mixes only the data rows of its lane
    for c in range(beta):
        H = d.lanes.codes[d.lanes.data_of(c)]
        lane_rows = np.arange(d.lanes.nb) * beta + c
        assert np.array_equal(G[np.ix_(lane_rows, lane_rows[:H.shape[1]])], H)


def test_generator_is_the_same_in_every_process():
    """The codes are drawn from seeds derived from the parameters: another process builds the
    same generator, bit for bit."""
    import hashlib
    import subprocess
    import sys

    code = ("import hashlib; from elastic_coded.families.unified import storage_design; "
            "print(hashlib.sha256(storage_design(10, '1/2', 3, 6, 'real').generator.tobytes())"
            ".hexdigest())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    here = hashlib.sha256(storage_design(10, "1/2", 3, 6, "real").generator.tobytes())
    assert out == here.hexdigest()


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), seed=st.integers(0, 2 ** 16))
def test_each_lane_code_is_mds(case, seed):
    """Any d_c rows of lane c decode it (lane-balanced row sets), within their bound."""
    K, mu, q, m = case
    d = storage_design(K, mu, q, m, REAL)
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(d.batch_size):
        picked = rng.choice(d.lanes.nb, d.lanes.data_of(c), replace=False)
        rows.extend(int(b) * d.batch_size + c for b in picked)
    rows = [int(r) for r in rng.permutation(rows)]
    A, X = rng.standard_normal((m, 3)), rng.standard_normal((3, 2))
    V = (d.generator @ A)[rows] @ X
    Y = reduce_outputs(d, rows, V)
    assert np.isfinite(decode_condition(d, rows))
    assert np.linalg.norm(Y - A @ X) <= _bound(d, rows, A, X)


def test_rows_must_be_lane_balanced():
    d = storage_design(6, HALF, 4, 20, REAL)
    rows = list(range(20))
    reduce_outputs(d, rows, np.zeros(20))  # the data rows: balanced
    bad = rows[:-1] + [20]  # lane 1 loses a row, lane 0 gains one
    with pytest.raises(ValueError, match=r"rows: hold 11 rows of lane 0 .* exactly d = 10"):
        reduce_outputs(d, bad, np.zeros(20))
    with pytest.raises(ValueError, match=r"rows: need m = 20 distinct coded rows"):
        reduce_outputs(d, rows[:-1] + [0], np.zeros(20))
    with pytest.raises(ValueError, match=r"m: need 0 < m = 0"):
        lane_code(15, 2, 0)


def test_select_completes_a_decode_and_beats_the_first_rows():
    """select picks count candidates that complete the fixed rows to an invertible decode, in
    the candidates' order; over many random tries it is never worse than its own first
    choice and beats taking the first candidates in the worst case."""
    d = storage_design(10, HALF, 4, 36, REAL)
    H = d.lanes.codes[18]
    rng = np.random.default_rng(5)
    ours, first = [], []
    for _ in range(60):
        perm = [int(b) for b in rng.permutation(45)]
        fixed, cands = perm[:12], perm[12:30]
        got = select(H, fixed, cands, 6)
        assert len(got) == 6 and set(got) <= set(cands)
        assert got == [b for b in cands if b in got]
        ours.append(solve_condition(H[fixed + got]))
        first.append(solve_condition(H[fixed + cands[:6]]))
    assert max(ours) < max(first) and np.median(ours) < np.median(first)
    with pytest.raises(ValueError, match=r"count: 7 rows from 18 candidates cannot complete"):
        select(H, perm[:12], perm[12:30], 7)


# ------------------------------------------------------------------------------------------------
# decoding from any fastest set
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("K, mu, q, m", CASES)
def test_any_q_fastest_servers_decode_within_their_bound(K, mu, q, m):
    """Sets Q of fastest servers (all of them up to 30): a valid plan, lane-balanced decode rows,
    the load of the theory, and outputs within each decode's bound and 1e-9."""
    N = q
    rng = np.random.default_rng(K * 100 + q)
    A, X = rng.standard_normal((m, 4)), rng.standard_normal((4, N))
    Y = A @ X
    sets = list(itertools.combinations(range(K), q))
    for Q in sets[::max(1, len(sets) // 30)]:  # 30 of them at most, spread over all
        res = run_in_process(A, X, K, mu, q, REAL, fastest=Q)
        d, plan = res.design, res.plan
        check_shuffle_plan(d, plan)
        assert res.load == res.theory.L
        assert relative_error(res.outputs, Y) <= 1e-9
        for k in Q:
            (rows, cols), = reduce_groups(d, plan, k).items()
            assert _lane_balanced(d, rows) and len(cols) == N // q
            out = list(plan.outputs_of(k))
            assert np.linalg.norm(res.outputs[:, out] - Y[:, out]) <= _bound(d, rows, A, X[:, out])


def test_worst_decode_condition_at_k10_q4_over_all_fastest_sets():
    """The user's case (K = 10, mu = 1/2, q = 4): the worst lane condition over all 210 fastest
    sets is a few hundred (the Reed-Solomon code over all rows reached 1e17 and beyond)."""
    d = storage_design(10, HALF, 4, 72, REAL)
    conds = [decode_condition(d, rows)
             for Q in itertools.combinations(range(10), 4)
             for rows in shuffle_plan(d, Q, 4).decode_rows]
    assert max(conds) <= 1e3 and len(conds) == 840


def test_decoding_rows_after_losing_servers():
    """The repair's rows: from the rows that check, lane-balanced rows that decode, the data
    rows first; None once a lane has too few."""
    d = storage_design(6, HALF, 4, 20, REAL)
    assert decoding_rows(d, range(d.n_coded)) == list(range(20))
    for left in itertools.combinations(range(6), 4):  # any 4 servers' rows decode
        have = {r for k in left for r in d.server_rows[k]}
        rows = decoding_rows(d, have)
        assert rows is not None and set(rows) <= have and _lane_balanced(d, rows)
        assert np.isfinite(decode_condition(d, rows))
    assert decoding_rows(d, {r for k in (0, 1, 2) for r in d.server_rows[k]}) is not None
    assert decoding_rows(d, {r for k in (0, 1) for r in d.server_rows[k]}) is None
    assert decoding_rows(d, set(range(19))) is None


def test_finite_fields_keep_the_reed_solomon_code():
    for name in ("gf(65521)", "gf(2^8)"):
        F = field(name)
        d = storage_design(6, HALF, 4, 20, F)
        assert d.lanes is None
        assert np.array_equal(d.generator, _mds_generator(F, 30, 20))
        plan = shuffle_plan(d, (0, 2, 3, 5), 4)
        assert plan.decode_rows == () and plan.rows_for(0) is None
        assert decoding_rows(d, range(10, 30)) == list(range(10, 30))
        assert decode_condition(d, range(20)) == 1.0


def test_rows_multiple_values_of_the_user_case():
    # the user's A has 960 rows: the design pads to 972 at K = 10, q = 4
    assert rows_multiple(10, HALF, 4, 4) == 36 and -(-960 // 36) * 36 == 972


# ------------------------------------------------------------------------------------------------
# verification sees a small lie
# ------------------------------------------------------------------------------------------------

def _step_with_a_lie(d, st, A, X, Q, liar, rng):
    """One in-process step whose server ``liar`` adds ``1e-6 max(1, max |H|)`` to one value of
    its first Map task ``H`` (as a lying machine does) for one of its own outputs."""
    from elastic_coded.families.unified import (
        encode_packet,
        encode_storage,
        map_compute,
        receive_packet,
        reduce_server,
    )

    N = X.shape[1]
    plan = shuffle_plan(d, Q, N)
    stored = encode_storage(d, A)
    maps = {k: map_compute(d, stored[k], X) for k in Q}
    a, b = st.ranges_of(liar)[0]
    H = maps[liar]
    H[int(rng.integers(b - a)), plan.outputs_of(liar)[0]] += 1e-6 * max(1.0, float(
        np.max(np.abs(H[:b - a]))))
    got = {k: {} for k in Q}
    for t in plan.transmissions:
        packet = encode_packet(d, t, maps[t.sender])
        for k in t.receivers:
            receive_packet(d, t, k, packet, maps[k], got[k])
    Y = np.zeros((d.m, N))
    for k in Q:
        Y[:, list(plan.outputs_of(k))] = reduce_server(d, plan, k, maps[k], got[k])
    return Y, plan


def test_a_lie_of_1e_6_in_one_map_value_fails_the_check():
    """The user's case (K = 10, mu = 1/2, q = 4, A 972 x 48): one server's Map value off by
    1e-6 of its task's largest reaches the product, and the unified check with the step's
    condition rejects it (with the Reed-Solomon code's conditions, 1e17, it passed)."""
    from elastic_coded.algebra.verify import check
    from elastic_coded.families.unified.policy import UnifiedStorage
    from elastic_coded.families.unified.verify import UnifiedChecks, UnifiedRun
    from elastic_coded.runtime.verifying import Verifier

    rng = np.random.default_rng(0)
    A, X = rng.standard_normal((972, 48)), rng.standard_normal((48, 8))
    d = storage_design(10, HALF, 4, 972, REAL)
    st_ = UnifiedStorage(d, tuple(f"m{k}" for k in range(10)), 0, 972, 8)
    ver = Verifier(REAL, "unified", A, seed=0)
    checks = UnifiedChecks(ver)
    for Q in [(0, 1, 2, 3), (2, 4, 6, 9), (1, 5, 7, 8)]:
        for liar in (Q[0], Q[-1]):
            Y, plan = _step_with_a_lie(d, st_, A, X, Q, liar, rng)
            kappa = checks.condition(UnifiedRun(st_, plan, Q))
            assert kappa < 1e3 and np.linalg.norm(Y - A @ X) > 1e-6
            terms = UnifiedChecks.terms(d)  # 10 d: a lane's 18 rows, not m = 972
            assert check(ver.sketches[0], X, A @ X, condition=kappa, extra_terms=terms)
            assert not check(ver.sketches[0], X, Y, condition=kappa, extra_terms=terms)
