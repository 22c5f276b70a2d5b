"""Lagrange and MDS codes: round trips over every field under straggler patterns."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field, relative_error
from elastic_coded.algebra.lagrange import lagrange_code
from elastic_coded.algebra.mds import MDSCode, mds_code

FIELDS = ["real", "gf(65521)", "gf(2147483647)", "gf(2^8)", "gf(2^16)"]


def _check_lagrange(F, L, S, subsets, rng, rows=5, inner=7, width=3):
    code = lagrange_code(F, L, S)
    A = F.random((rows, inner), rng)
    B = F.random((inner, L * width * code.width), rng)  # a complex code: column pairs
    expected = F.matmul(A, B)
    coded = code.encode(B)
    H = {i: F.matmul(A, coded[i]) for i in range(code.K)}
    worst = 0.0
    for sub in subsets:
        dec = code.decode({i: H[i] for i in sub})
        got = np.concatenate(list(dec), axis=1)
        if F.exact:
            assert np.array_equal(got, expected), sub
        else:
            worst = max(worst, relative_error(got, expected))
    return worst


@pytest.mark.parametrize("spec", FIELDS)
@pytest.mark.parametrize("L, S", [(1, 0), (1, 3), (3, 2), (4, 4)])
def test_lagrange_every_straggler_pattern(spec, L, S):
    F = field(spec)
    subsets = itertools.combinations(range(L + S), L)
    worst = _check_lagrange(F, L, S, subsets, np.random.default_rng(L * 10 + S))
    assert worst <= 1e-9


def test_lagrange_real_worst_case_error_L8_S4():
    """Every one of the C(12, 8) = 495 straggler patterns decodes to 1e-9 in the reals."""
    F = field("real")
    worst = _check_lagrange(F, 8, 4, itertools.combinations(range(12), 8),
                            np.random.default_rng(0), rows=20, inner=30)
    assert worst <= 1e-9


@given(L=st.integers(1, 8), S=st.integers(0, 4), seed=st.integers(0, 2**31),
       spec=st.sampled_from(FIELDS))
def test_lagrange_random_patterns(L, S, seed, spec):
    rng = np.random.default_rng(seed)
    F = field(spec)
    subsets = [tuple(rng.permutation(L + S)[:L]) for _ in range(3)]
    assert _check_lagrange(F, L, S, subsets, rng) <= 1e-9


def test_lagrange_points_distinct_and_disjoint():
    for spec in FIELDS:
        code = lagrange_code(field(spec), 5, 3)
        pts = list(code.alphas) + list(code.betas)
        assert len(set(pts)) == len(pts)


def test_lagrange_encode_matches_eq2_directly():
    """eq. 2 written out term by term in GF(p)."""
    p = 65521
    F = field(p)
    code = lagrange_code(F, 3, 2)
    rng = np.random.default_rng(1)
    B = F.random((4, 6), rng)
    blocks = [B[:, 2 * l:2 * l + 2] for l in range(3)]
    for i, a in enumerate(code.alphas):
        want = np.zeros((4, 2), dtype=np.int64)
        for l, bl in enumerate(code.betas):
            coef = 1
            for k, bk in enumerate(code.betas):
                if k != l:
                    coef = coef * (a - bk) * pow(int(bl - bk) % p, -1, p) % p
            want = (want + blocks[l] * coef) % p
        assert np.array_equal(code.encode(B)[i], want)


@given(L=st.integers(1, 6), S=st.integers(0, 3), r=st.integers(1, 13),
       seed=st.integers(0, 2**31), spec=st.sampled_from(FIELDS + ["rotation"]))
@settings(max_examples=60)
def test_lagrange_encode_of_a_short_B_equals_the_encode_of_B_padded_with_zeros(L, S, r, seed,
                                                                               spec):
    # a matvec's one column for L = 2: the zero blocks are left out of the products
    code = lagrange_code("real", L, S, points="rotation") if spec == "rotation" \
        else lagrange_code(field(spec), L, S)
    F = code.field
    rng = np.random.default_rng(seed)
    B = F.random((7, r), rng) if F.exact else rng.standard_normal((7, r))
    cols = r + (-r) % (L * code.width)
    padded = np.concatenate([B, F.zeros((7, cols - r))], axis=1)
    assert np.array_equal(code.encode(B, cols=cols), code.encode(padded))
    P = [L + S - 1, 0]  # some positions only
    assert np.array_equal(code.encode(B, P, cols=cols), code.encode(padded, P))


def test_lagrange_errors():
    code = lagrange_code("gf(7)", 2, 1)
    with pytest.raises(ValueError, match="divisible by L=2"):
        code.encode(np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="^cols: 2 is fewer than B's 4 columns"):
        code.encode(np.zeros((2, 4), np.int64), cols=2)
    with pytest.raises(ValueError, match="at least L=2"):
        code.decode({0: np.zeros((1, 1), np.int64)})
    with pytest.raises(ValueError, match="S: must be an int >= 0"):
        lagrange_code("real", 2, -1)


@pytest.mark.parametrize("spec", FIELDS)
def test_mds_every_erasure_pattern(spec):
    F = field(spec)
    rng = np.random.default_rng(3)
    code = mds_code(F, 7, 4)
    data = F.random((4, 3, 2), rng)
    coded = code.encode(data)
    for sub in itertools.combinations(range(7), 4):
        got = code.decode(sub, coded[list(sub)])
        assert F.equal(got, data, rtol=1e-9), sub


@given(k=st.integers(1, 12), extra=st.integers(0, 8), seed=st.integers(0, 2**31),
       spec=st.sampled_from(FIELDS))
def test_mds_random_patterns(k, extra, seed, spec):
    F = field(spec)
    rng = np.random.default_rng(seed)
    code = mds_code(F, k + extra, k)
    data = F.random((k, 3), rng)
    coded = code.encode(data)
    sub = sorted(rng.permutation(k + extra)[:k].tolist())
    assert F.equal(code.decode(sub, coded[sub]), data, rtol=1e-8)


def test_mds_errors():
    with pytest.raises(ValueError, match="n >= k"):
        mds_code("real", 2, 3)
    with pytest.raises(ValueError, match="n <= 4"):
        mds_code("gf(2^2)", 5, 2)
    code = mds_code("gf(7)", 4, 2)
    with pytest.raises(ValueError, match="distinct"):
        code.decode([1, 1], np.zeros((2, 1), np.int64))


# ------------------------------------------------------------------------------------------------
# MDSCode.decode_any: any >= k received rows, systematic ones preferred
# ------------------------------------------------------------------------------------------------

ANY_FIELDS = ["gf(65521)", "gf(2^8)", "real"]


def _products(F, code, rng, inner=5, width=3):
    """A (k x inner) MDS-coded by rows, times x: the coded products and the direct product."""
    A = F.random((code.k, inner), rng)
    x = F.random((inner, width), rng)
    return F.matmul(code.encode(A), x), F.matmul(A, x)


def _assert_decodes(F, got, want):
    if F.exact:
        assert np.array_equal(got, want)
    else:
        assert relative_error(got, want) <= 1e-9


@pytest.mark.parametrize("spec", ANY_FIELDS)
@settings(deadline=None)
@given(k=st.integers(1, 10), extra=st.integers(0, 8), seed=st.integers(0, 2**31))
def test_decode_any_random_subsets_match_the_direct_product(spec, k, extra, seed):
    F = field(spec)
    rng = np.random.default_rng(seed)
    code = mds_code(F, k + extra, k, seed=seed % 1000)
    products, want = _products(F, code, rng)
    received = rng.permutation(k + extra)[:int(rng.integers(k, k + extra + 1))]  # any order
    got, used = code.decode_any(received.tolist(), products[received])
    _assert_decodes(F, got, want)
    # k distinct positions into the received list: systematic rows first, each part by index
    assert len(used) == k and len(set(used)) == k
    picked = [int(received[j]) for j in used]
    systematic = sorted(int(i) for i in received if i < k)
    assert picked[:len(systematic)] == systematic
    assert picked[len(systematic):] == sorted(picked[len(systematic):])
    assert set(picked[len(systematic):]) <= set(sorted(int(i) for i in received if i >= k))


@pytest.mark.parametrize("spec", ANY_FIELDS)
def test_decode_any_every_erasure_pattern(spec):
    """Every received set of every size from k to n, for a [7, 4] code."""
    F = field(spec)
    code = mds_code(F, 7, 4)
    products, want = _products(F, code, np.random.default_rng(7))
    for size in range(4, 8):
        for sub in itertools.combinations(range(7), size):
            rows = list(reversed(sub))
            got, used = code.decode_any(rows, products[rows])
            _assert_decodes(F, got, want)
            sel = [rows[j] for j in used]
            _assert_decodes(F, code.decode(sel, products[sel]), want)


@pytest.mark.parametrize("spec", ANY_FIELDS)
def test_decode_any_systematic_rows_need_no_solve(spec):
    """All k data rows received: they are the answer, whatever parity rows came too."""
    F = field(spec)
    code = mds_code(F, 9, 5)
    products, want = _products(F, code, np.random.default_rng(1))
    rows = [8, 3, 0, 6, 4, 1, 2]
    got, used = code.decode_any(rows, products[rows])
    assert np.array_equal(got, products[:5])
    _assert_decodes(F, got, want)
    assert [rows[j] for j in used] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("spec", ANY_FIELDS)
def test_decode_any_non_systematic_generator(spec):
    """A generator with no unit rows (G R, R invertible) decodes through the full inverse."""
    F = field(spec)
    rng = np.random.default_rng(5)
    base = mds_code(F, 8, 4)
    while True:
        R = F.random((4, 4), rng)
        try:
            F.solve(R, F.eye(4))
        except np.linalg.LinAlgError:
            continue
        G = F.matmul(base.generator, R)
        if not np.any((G != 0).sum(axis=1) == 1):
            break
    code = MDSCode(F, 8, 4, G)
    products, want = _products(F, code, rng)
    rows = [7, 2, 5, 0, 6]
    got, used = code.decode_any(rows, products[rows])
    _assert_decodes(F, got, want)
    assert [rows[j] for j in used] == [0, 2, 5, 6]


def test_decode_any_trailing_shapes_and_vectors():
    F = field("gf(65521)")
    rng = np.random.default_rng(2)
    code = mds_code(F, 6, 3)
    data = F.random((3, 2, 4), rng)
    coded = code.encode(data)
    got, _ = code.decode_any([5, 1, 4, 2], coded[[5, 1, 4, 2]])
    assert np.array_equal(got, data)
    vec = F.random((3,), rng)
    got, used = code.decode_any([4, 3, 0], code.encode(vec)[[4, 3, 0]])
    assert np.array_equal(got, vec) and used == (2, 1, 0)


def test_decode_any_errors():
    code = mds_code("gf(7)", 5, 3)
    vals = np.zeros((4, 2), np.int64)
    with pytest.raises(ValueError, match=r"indices: need at least k=3 distinct coded rows, got 2"):
        code.decode_any([0, 1], vals[:2])
    with pytest.raises(ValueError, match=r"got 4 \(3 distinct\)"):
        code.decode_any([0, 1, 1, 2], vals)
    with pytest.raises(ValueError, match=r"outside 0..4"):
        code.decode_any([0, 1, 5], vals[:3])
    with pytest.raises(ValueError, match=r"values: needs one row per index \(3\)"):
        code.decode_any([0, 1, 2], vals)


@pytest.mark.parametrize("spec", FIELDS)
@pytest.mark.parametrize("L, S", [(1, 0), (1, 2), (2, 1)])
def test_an_identity_code_is_one_whose_every_coded_block_is_the_input(spec, L, S):
    """``LagrangeCode.identity`` (nothing to decode: the collector and ``decode`` pass a
    result through) holds exactly where every coded block equals the input."""
    F = field(spec)
    code = lagrange_code(F, L, S)
    B = F.random((4, L * 2 * code.width), np.random.default_rng(3))
    coded = code.encode(B)
    assert code.identity == (L == 1 and all(np.array_equal(c, B) for c in coded))
    if code.identity:
        H = F.random((3, B.shape[1]), np.random.default_rng(4))
        assert np.array_equal(code.decode({code.K - 1: H})[0], H)
