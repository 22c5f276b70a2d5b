"""Sketch checks and fault location (algebra/verify.py), every outcome against direct products."""

import itertools
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field
from elastic_coded.algebra.lagrange import lagrange_code
from elastic_coded.algebra.mds import mds_code
from elastic_coded.algebra.verify import (
    FaultLocationError,
    check,
    check_piece,
    default_repeats,
    locate_lagrange,
    locate_mds,
    make_sketch,
)

EXACT = ["gf(2147483647)", "gf(65521)", "gf(2^8)"]
ALL = EXACT + ["real"]


def _nonzero(F, shape, rng):
    """A random array with no zero entry (a corruption that changes every entry it touches)."""
    if F.exact:
        return rng.integers(1, F.order, size=shape, dtype=np.int64)
    return rng.standard_normal(shape) + np.sign(rng.standard_normal(shape))


def _corrupt(F, X, rng, entries):
    X = X.copy()
    flat = X.reshape(-1)
    where = rng.choice(flat.size, size=min(entries, flat.size), replace=False)
    flat[where] = F.add(flat[where], _nonzero(F, len(where), rng))
    return X


def _rows(draw, m):
    a = draw(st.integers(0, m - 1))
    return a, draw(st.integers(a + 1, m))


# -- sketch checks ---------------------------------------------------------------------------------
@st.composite
def _problems(draw, specs):
    F = field(draw(st.sampled_from(specs)))
    m, n, r = draw(st.integers(1, 40)), draw(st.integers(1, 12)), draw(st.integers(1, 6))
    block = draw(st.one_of(st.none(), st.integers(1, 45)))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    A, B = F.random((m, n), rng), F.random((n, r), rng)
    return F, A, B, block, _rows(draw, m), rng


@given(problem=_problems(ALL), seed=st.integers(0, 2**31))
@settings(max_examples=80, deadline=None)
def test_honest_products_always_pass(problem, seed):
    F, A, B, block, (a, b), _ = problem
    sk = make_sketch(F, A, seed=seed, block=block)
    Y = F.matmul(A, B)
    assert check(sk, B, Y)
    res = check(sk, B, Y[a:b], rows=(a, b))
    assert res.ok and res.residual <= res.tolerance


@given(problem=_problems(EXACT), seed=st.integers(0, 2**31), entries=st.integers(1, 5))
@settings(max_examples=80, deadline=None)
def test_corruptions_are_always_caught_in_finite_fields(problem, seed, entries):
    F, A, B, block, (a, b), rng = problem
    sk = make_sketch(F, A, seed=seed, block=block)
    Y = F.matmul(A, B)[a:b]
    bad = _corrupt(F, Y, rng, entries)
    assert not np.array_equal(bad, Y)
    res = check(sk, B, bad, rows=(a, b))
    assert not res.ok and res.residual >= 1


def test_sketch_from_block_sums_equals_direct_sketch():
    """The bracket U[:, a:b] A[a:b] from block sums is exactly the direct product (GF(p)), and
    whole blocks are never read from A again (overwriting them leaves aligned checks intact)."""
    F = field(65521)
    rng = np.random.default_rng(4)
    A, B = F.random((30, 9), rng), F.random((9, 4), rng)
    Y = F.matmul(A, B)
    sk = make_sketch(F, A.copy(), seed=1, block=5)
    for a, b in itertools.combinations(range(31), 2):
        U = sk.U[:, a:b]
        assert np.array_equal(F.matmul(U, Y[a:b]), F.matmul(F.matmul(U, A[a:b]), B))
        assert check(sk, B, Y[a:b], rows=(a, b))
    sk.A[5:25] = 0  # the sketch keeps a reference: rows 5..24 are whole blocks
    assert check(sk, B, Y[5:25], rows=(5, 25))
    assert check(sk, B, Y[0:30])


def test_false_accept_rate_is_one_over_q_per_row():
    """GF(7) with t = 1: a fixed wrong Y passes for about 1/7 of the sketches."""
    F = field(7)
    rng = np.random.default_rng(0)
    A, B = F.random((6, 5), rng), F.random((5, 3), rng)
    bad = _corrupt(F, F.matmul(A, B), rng, 2)
    passed = np.mean([check(make_sketch(F, A, t=1, seed=s), B, bad).ok for s in range(1400)])
    assert 0.10 <= passed <= 0.19
    assert np.mean([check(make_sketch(F, A, t=2, seed=s), B, bad).ok for s in range(1400)]) < 0.05


@pytest.mark.parametrize("spec, t", [("gf(2147483647)", 2), ("gf(65521)", 2), ("gf(2^8)", 4),
                                     ("gf(2)", 30), ("real", 8)])
def test_default_repeats(spec, t):
    F = field(spec)
    assert default_repeats(F) == t
    if F.exact:
        assert F.order ** -t <= 1e-9 < F.order ** -(t - 1) or t == 2


@pytest.mark.parametrize("shape", [(200, 300, 40), (64, 64, 1), (500, 20, 7)])
def test_real_tolerance_accepts_honest_and_rejects_perturbations(shape):
    m, n, r = shape
    rng = np.random.default_rng(m + n + r)
    A, B = rng.standard_normal((m, n)) * 1e3, rng.standard_normal((n, r))
    sk = make_sketch("real", A, seed=7)
    Y = A @ B
    a, b = m // 5, m - 3
    honest = check(sk, B, Y[a:b], rows=(a, b))
    assert honest.ok and honest.tolerance < 1e-8 * honest.scale
    for _ in range(20):
        E = rng.standard_normal((b - a, r)) * (rng.random((b - a, r)) < 0.05)
        if not E.any():
            continue
        E *= 40 * honest.tolerance / np.linalg.norm(E)
        assert not check(sk, B, Y[a:b] + E, rows=(a, b)).ok
    rank_one = np.outer(rng.standard_normal(b - a), rng.standard_normal(r))
    rank_one *= 40 * honest.tolerance / np.linalg.norm(rank_one)
    assert not check(sk, B, Y[a:b] + rank_one, rows=(a, b)).ok


@pytest.mark.parametrize("spec", ALL)
def test_check_piece_over_every_straggler_pattern(spec):
    """A decoded piece (rows of a group, some columns of each block) passes for every pattern
    of (6, 3); a corrupted one fails."""
    F = field(spec)
    rng = np.random.default_rng(9)
    code = lagrange_code(F, 6, 3)
    A, B = F.random((25, 11), rng), F.random((11, 6 * 4), rng)
    sk = make_sketch(F, A, seed=3, block=4)
    rows, cols = (5, 19), (1, 3)
    H = {i: F.matmul(A[5:19], code.encode(B)[i][:, 1:3]) for i in range(code.K)}
    for P in itertools.combinations(range(code.K), code.L):
        dec = code.decode({p: H[p] for p in P})
        assert check_piece(sk, code, B, dec, rows, cols, positions=P)
    P = (0, 2, 3, 5, 7, 8)
    dec = code.decode({p: H[p] for p in P})
    want = np.stack([F.matmul(A[5:19], B[:, 4 * l + 1:4 * l + 3]) for l in range(6)])
    assert F.equal(dec, want, rtol=1e-9)
    bad = dec.copy()
    bad[4, 3, 1] = F.add(bad[4, 3, 1], 1 if F.exact else 1e-3 * np.abs(dec).max())
    assert not check_piece(sk, code, B, bad, rows, cols, positions=P)


def test_real_piece_check_passes_ill_conditioned_decodes():
    """The worst straggler pattern of (16, 8) decodes to ~2e-7; its check still passes, and its
    tolerance, set by the condition, is reported relative to the result."""
    F = field("real")
    code = lagrange_code(F, 16, 8, "chebyshev")
    _, P = code.worst_decode_condition(samples=200)
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((60, 50)), rng.standard_normal((50, 32))
    H = {p: A @ code.encode(B)[p] for p in P}
    dec = code.decode(H)
    res = check_piece(make_sketch(F, A, seed=1), code, B, dec, (0, 60), positions=P)
    assert res.ok and res.residual > 0
    # the same result claimed to come from a well-conditioned pattern is far outside its bound
    good = (0, 1, 3, 5, 6, 8, 10, 11, 13, 14, 15, 17, 19, 20, 22, 23)
    assert code.decode_condition(good) < 10
    assert not check_piece(make_sketch(F, A, seed=1), code, B, dec, (0, 60), positions=good).ok


def test_check_errors():
    F = field(65521)
    A = F.random((5, 4), np.random.default_rng(0))
    sk = make_sketch(F, A, seed=0)
    B, Y = F.zeros((4, 2)), F.zeros((5, 2))
    with pytest.raises(ValueError, match=r"rows: need 0 <= start < stop <= 5, got \(3, 3\)"):
        check(sk, B, Y[:0], rows=(3, 3))
    with pytest.raises(ValueError, match="rows: must be a pair"):
        check(sk, B, Y, rows=3)
    with pytest.raises(ValueError, match=r"B: must be 2-D with 4 rows"):
        check(sk, F.zeros((3, 2)), Y)
    with pytest.raises(ValueError, match=r"Y: must have shape \(2, 2\)"):
        check(sk, B, Y, rows=(1, 3))
    with pytest.raises(ValueError, match=r"values must lie in \[0, 65521\)"):
        check(sk, B, Y - 1)
    with pytest.raises(ValueError, match="t: must be an int >= 1, got 0"):
        make_sketch(F, A, t=0)
    with pytest.raises(ValueError, match="block: must be an int >= 1"):
        make_sketch(F, A, block=0)
    with pytest.raises(ValueError, match="A: must be a non-empty 2-D matrix"):
        make_sketch(F, np.zeros((0, 3), np.int64))
    real = make_sketch("real", np.ones((3, 2)), seed=0)
    with pytest.raises(ValueError, match="condition: must be >= 1"):
        check(real, np.ones((2, 1)), np.ones((3, 1)), condition=0.0)
    code = lagrange_code("real", 2, 1)
    with pytest.raises(ValueError, match="positions: a real-field piece check needs"):
        check_piece(real, code, np.ones((2, 2)), np.ones((2, 3, 1)), (0, 3))
    with pytest.raises(ValueError, match=r"cols: need 0 <= start < stop <= 1"):
        check_piece(real, code, np.ones((2, 2)), np.ones((2, 3, 1)), (0, 3), (0, 2), (0, 1))


# -- fault location --------------------------------------------------------------------------------
def _lagrange_results(F, L, S, rng, rows=6, inner=5, width=2):
    """A code over F, every position's honest result {position: H}, and the blocks A B_l."""
    code = lagrange_code(F, L, S)
    A, B = F.random((rows, inner), rng), F.random((inner, L * width), rng)
    coded = code.encode(B)
    H = {i: F.matmul(A, coded[i]) for i in range(code.K)}
    want = np.stack([F.matmul(A, B[:, l * width:(l + 1) * width]) for l in range(L)])
    return code, H, want


@given(spec=st.sampled_from(EXACT), L=st.integers(1, 8), S=st.integers(1, 8),
       seed=st.integers(0, 2**31), data=st.data())
@settings(max_examples=50, deadline=None)
def test_lagrange_liars_up_to_the_correctable_number_are_located(spec, L, S, seed, data):
    F, rng = field(spec), np.random.default_rng(seed)
    code, H, want = _lagrange_results(F, L, S, rng)
    n = data.draw(st.integers(L + 1, L + S))  # the results that arrived
    got = {int(p): H[int(p)] for p in rng.permutation(L + S)[:n]}
    liars = data.draw(st.integers(0, (n - L) // 2))
    lying = set(rng.choice(sorted(got), size=liars, replace=False).tolist())
    for p in lying:
        got[p] = _corrupt(F, got[p], rng, data.draw(st.integers(1, got[p].size)))
    out = locate_lagrange(code, got, seed=seed)
    assert set(out.faulty) == lying
    assert set(out.trusted) == set(got) - lying and set(out.used) <= set(out.trusted)
    assert np.array_equal(out.decoded, want)


@given(spec=st.sampled_from(EXACT), L=st.integers(1, 6), S=st.integers(2, 8),
       seed=st.integers(0, 2**31), data=st.data())
@settings(max_examples=50, deadline=None)
def test_lagrange_liars_beyond_the_correctable_are_detected_never_decoded(spec, L, S, seed, data):
    """With max_faults = f, f < e <= n - L - f liars always raise."""
    F, rng = field(spec), np.random.default_rng(seed)
    code, H, _ = _lagrange_results(F, L, S, rng)
    n = L + S
    f = data.draw(st.integers(0, (S - 1) // 2))
    e = data.draw(st.integers(f + 1, n - L - f))
    got = dict(H)
    for p in rng.choice(n, size=e, replace=False).tolist():
        got[p] = _corrupt(F, got[p], rng, 1)
    with pytest.raises(FaultLocationError, match="cannot be"):
        locate_lagrange(code, got, max_faults=f, seed=seed)


def test_lagrange_random_liars_in_any_number_never_decode_wrongly():
    """Random (not colluding) corruption of any number of results over GF(2^31 - 1): the outcome
    is the right product with the liars named, or an error."""
    F = field("gf(2147483647)")
    rng = np.random.default_rng(11)
    code, H, want = _lagrange_results(F, 4, 6, rng)
    outcomes = set()
    for e in range(0, 11):
        for _ in range(4):
            got = dict(H)
            lying = set(rng.choice(10, size=e, replace=False).tolist())
            for p in lying:
                got[p] = _corrupt(F, got[p], rng, 3)
            try:
                out = locate_lagrange(code, got, seed=e)
            except FaultLocationError:
                outcomes.add("raised")
                assert e > 3
                continue
            outcomes.add("located")
            assert set(out.faulty) == lying and np.array_equal(out.decoded, want)
    assert outcomes == {"raised", "located"}


def test_colluding_liars_beyond_the_distance_are_not_detectable():
    """The documented limit: n - L + 1 - f colluders sending a consistent other product look
    like f liars among honest results, so only a sketch check can catch them."""
    F = field(65521)
    rng = np.random.default_rng(3)
    code = lagrange_code(F, 3, 4)  # n = 7, L = 3, f = 2
    A, B, B2 = F.random((6, 5), rng), F.random((5, 6), rng), F.random((5, 6), rng)
    honest, other = code.encode(B), code.encode(B2)
    got = {p: F.matmul(A, (other if p < 5 else honest)[p]) for p in range(7)}  # 5 colluders
    out = locate_lagrange(code, got, seed=1)
    assert set(out.faulty) == {5, 6}
    assert np.array_equal(out.decoded, np.stack([F.matmul(A, B2[:, 2 * l:2 * l + 2])
                                                 for l in range(3)]))


def test_honest_results_have_no_faults():
    for spec in ALL:
        F = field(spec)
        code, H, want = _lagrange_results(F, 5, 4, np.random.default_rng(1))
        out = locate_lagrange(code, H, seed=2)
        assert out.faulty == () and out.trusted == tuple(range(9))
        assert F.equal(out.decoded, want, rtol=1e-9)


@pytest.mark.parametrize("L, S, liars", [(4, 4, 1), (6, 4, 2), (8, 4, 2), (3, 6, 3)])
def test_real_lagrange_liars_are_located(L, S, liars):
    F = field("real")
    rng = np.random.default_rng(L + S)
    code, H, want = _lagrange_results(F, L, S, rng, rows=10, inner=20)
    for trial in range(5):
        got = dict(H)
        lying = set(rng.choice(L + S, size=liars, replace=False).tolist())
        for p in lying:  # relative error 1e-4 in a few entries
            X = got[p].copy()
            X.reshape(-1)[rng.choice(X.size, 3, replace=False)] += 1e-4 * np.abs(X).max()
            got[p] = X
        out = locate_lagrange(code, got, seed=trial)
        assert set(out.faulty) == lying
        assert F.equal(out.decoded, want, rtol=1e-8)
    f = (S - 1) // 2  # f + 1 liars are within the detectable n - L - f
    got = {p: H[p] + (p <= f) * 1e-3 * rng.standard_normal(H[p].shape) for p in H}
    with pytest.raises(FaultLocationError, match="cannot be located"):
        locate_lagrange(code, got, max_faults=f, seed=1)


@given(spec=st.sampled_from(ALL), k=st.integers(1, 8), extra=st.integers(1, 8),
       seed=st.integers(0, 2**31), data=st.data())
@settings(max_examples=50, deadline=None)
def test_mds_liars_are_located(spec, k, extra, seed, data):
    F, rng = field(spec), np.random.default_rng(seed)
    code = mds_code(F, k + extra, k, seed=seed % 100)
    msg = F.random((k, 3, 2), rng)
    coded = code.encode(msg)
    idx = sorted(rng.permutation(k + extra)[:data.draw(st.integers(k + 1, k + extra))].tolist())
    n = len(idx)
    rows = coded[idx].copy()
    liars = data.draw(st.integers(0, (n - k) // 2 if F.exact else min(2, (n - k) // 2)))
    lying = rng.choice(n, size=liars, replace=False).tolist()
    for j in lying:
        if F.exact:
            rows[j] = _corrupt(F, rows[j], rng, data.draw(st.integers(1, 6)))
        else:
            rows[j] = rows[j] + 1e-3 * (1 + np.abs(rows[j]).max()) * _nonzero(F, rows[j].shape, rng)
    out = locate_mds(code, idx, rows, seed=seed)
    assert set(out.faulty) == {idx[j] for j in lying}
    assert F.equal(out.decoded, msg, rtol=1e-7)
    if F.exact and n - k >= 1:  # one more liar than max_faults = 0 allows: detected
        rows2 = coded[idx].copy()
        rows2[0] = _corrupt(F, rows2[0], rng, 1)
        with pytest.raises(FaultLocationError):
            locate_mds(code, idx, rows2, max_faults=0, seed=seed)


def test_locate_errors():
    F = field(65521)
    code, H, _ = _lagrange_results(F, 3, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="results: need more than k=3 results"):
        locate_lagrange(code, {p: H[p] for p in (0, 1, 2)})
    with pytest.raises(ValueError, match=r"max_faults: at most floor\(\(n - k\) / 2\) = 1"):
        locate_lagrange(code, H, max_faults=2)
    with pytest.raises(ValueError, match="results: positions must be distinct in 0..4"):
        locate_lagrange(code, {0: H[0], 1: H[1], 2: H[2], 9: H[3]})
    with pytest.raises(ValueError, match=r"results: every entry must have shape \(6, 2\)"):
        locate_lagrange(code, {**H, 4: H[4][:, :1]})
    with pytest.raises(ValueError, match="projections: must be an int >= 1"):
        locate_lagrange(code, H, projections=0)
    m = mds_code(F, 6, 3)
    with pytest.raises(ValueError, match="indices: must be distinct in 0..5"):
        locate_mds(m, [0, 0, 1, 2], np.zeros((4, 2), np.int64))
    with pytest.raises(ValueError, match=r"coded: needs 4 rows"):
        locate_mds(m, [0, 1, 2, 3], np.zeros((3, 2), np.int64))
    real = lagrange_code("real", 10, 14)
    with pytest.raises(ValueError, match="max_faults: 7 among 24 results means"):
        locate_lagrange(real, {p: np.zeros((1, 1)) for p in range(24)})
    with pytest.raises(ValueError, match="rtol: must be > 0"):
        locate_lagrange(lagrange_code("real", 2, 2), {p: np.zeros((1, 1)) for p in range(4)},
                        rtol=0)


def test_verify_does_not_import_ray():
    code = "import sys, elastic_coded.algebra.verify; sys.exit(1 if 'ray' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@given(seed=st.integers(0, 2**31), rank=st.integers(1, 3),
       scale=st.sampled_from([1e-14, 1e-12, 1e-10, 1e-8, 1e-6]),
       condition=st.sampled_from([1.0, 1e3, 1e6]))
@settings(max_examples=80, deadline=None)
def test_an_accepted_product_is_within_its_accepted_error_whatever_the_perturbation(
        seed, rank, scale, condition):
    """The check accepts some perturbations smaller than its tolerance allows for, lies
    included; whatever it accepts is within ``accepted_error()`` (the verified bound), which is
    at least the honest error, and an honest product's is small next to the result."""
    rng = np.random.default_rng(seed)
    R = field("real")
    A = rng.standard_normal((120, 30))
    B = rng.standard_normal((30, 5))
    sk = make_sketch(R, A, seed=seed + 1)
    Y = A @ B
    honest = check(sk, B, Y, condition=condition, extra_terms=10)
    assert honest and honest.accepted_error() >= np.linalg.norm(Y - A @ B)
    assert honest.accepted_error() <= 1e-6 * np.linalg.norm(Y)
    E = rng.standard_normal((120, rank)) @ rng.standard_normal((rank, 5))
    E *= scale * np.linalg.norm(Y) / np.linalg.norm(E)
    res = check(sk, B, Y + E, condition=condition, extra_terms=10)
    if res:
        assert np.linalg.norm(E) <= res.accepted_error()
    exact = make_sketch("gf(65521)", np.ones((4, 2), np.int64), seed=seed)
    exact_res = check(exact, np.ones((2, 1), np.int64), np.full((4, 1), 2, np.int64))
    assert exact_res.accepted_error() == 0
