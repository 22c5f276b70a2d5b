"""Exactness of ``matmul_mod`` (GF(p) matmul on float64 BLAS) against galois and Python ints."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field, is_prime
from elastic_coded.algebra.gfp_matmul import MAX_PRIME, _mod, matmul_mod, max_chunk

P_2_20 = 1048573            # largest prime below 2^20
P_2_22 = 4194301            # one-limb path with many short chunks
P_2_26 = 2**26 - 5          # too big for one limb: two-limb path
PRIMES = [2, 3, 65521, P_2_20, P_2_26, MAX_PRIME]


@functools.cache
def gf(p):
    galois = pytest.importorskip("galois")
    # "jit-calculate" avoids building 2^20-entry lookup tables; matmul in GF(p) goes through
    # galois' own BLAS/int64/object routine whatever the ufunc mode.
    return galois.GF(p, verify=False, compile="jit-calculate" if p > 65521 else None)


def galois_matmul(a, b, p):
    GF = gf(p)
    return np.asarray(GF(a) @ GF(b), dtype=np.int64)


def exact(a, b, p):
    """Python-int reference."""
    a = np.asarray(a, dtype=np.int64).astype(object)
    b = np.asarray(b, dtype=np.int64).astype(object)
    if 0 in a.shape or 0 in b.shape:
        return np.zeros((a.shape[0], b.shape[1]), dtype=np.int64)
    return np.asarray((a @ b) % p, dtype=np.int64)


def exact_int64(a, b, p):
    """Independent exact reference for larger sizes: 16-bit limbs, int64 matmuls (k < 2^31)."""
    a0, a1, b0, b1 = a & 0xFFFF, a >> 16, b & 0xFFFF, b >> 16
    hi = (a1 @ b1) % p * (2**32 % p) % p
    mid = (a0 @ b1 + a1 @ b0) % p * (2**16 % p) % p
    return (hi + mid + (a0 @ b0) % p) % p


def check(a, b, p, ref=None, **kw):
    out = matmul_mod(a, b, p, **kw)
    assert out.dtype == np.int64
    assert out.shape == (a.shape[0], b.shape[1])
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, exact(a, b, p) if ref is None else ref)


def operands(rng, p, m, k, n, kind):
    if kind == "max":
        return np.full((m, k), p - 1, dtype=np.int64), np.full((k, n), p - 1, dtype=np.int64)
    return rng.integers(0, p, (m, k)), rng.integers(0, p, (k, n))


def test_primes_are_prime():
    assert all(is_prime(p) for p in PRIMES + [P_2_22, 8388593, 16777213])
    assert not any(is_prime(q) for q in range(P_2_20 + 1, 2**20))


@pytest.mark.parametrize("p", PRIMES)
@pytest.mark.parametrize("kind", ["random", "max"])
@pytest.mark.parametrize("shape", [(5, 7, 3), (40, 70, 30), (130, 90, 150), (300, 120, 260)])
def test_matches_galois(p, kind, shape):
    """Tiny (int64), small (one dgemm) and general (workspace) paths against galois."""
    if p > 2**26 and shape[1] > 70:
        shape = (20, 70, 25)  # galois falls back to Python ints here: keep it small
    a, b = operands(np.random.default_rng(p + shape[0]), p, *shape, kind)
    check(a, b, p, ref=galois_matmul(a, b, p))


@pytest.mark.parametrize("p", [3, 65521, MAX_PRIME])
@pytest.mark.parametrize("shape", [(0, 5, 3), (3, 0, 4), (4, 5, 0), (0, 0, 0), (1, 1, 1),
                                   (1, 300, 1), (300, 1, 200), (1, 150, 170), (170, 150, 1),
                                   (2, 3, 700)])
def test_odd_shapes(p, shape):
    a, b = operands(np.random.default_rng(7), p, *shape, "random")
    check(a, b, p)
    a, b = operands(None, p, *shape, "max")
    check(a, b, p)


@pytest.mark.parametrize("p", [2, 65521, P_2_20, P_2_22, P_2_26, MAX_PRIME])
@pytest.mark.parametrize("limbs", [False, True])
@pytest.mark.parametrize("c", [1, 3, 16])
def test_chunk_boundaries(p, limbs, c):
    """Inner dimensions around multiples of a (forced) chunk length, on both paths."""
    if not limbs and max_chunk(p, False) < 1:
        with pytest.raises(ValueError):
            matmul_mod(np.ones((2, 2), np.int64), np.ones((2, 2), np.int64), p, limbs=False)
        return
    rng = np.random.default_rng(c)
    for k in sorted({max(1, c - 1), c, c + 1, 2 * c, 2 * c + 1, 3 * c - 1, 5 * c + 2}):
        for kind in ("random", "max"):
            a, b = operands(rng, p, 9, k, 11, kind)
            check(a, b, p, chunk=c, limbs=limbs)
            check(a, b, p, chunk=c, limbs=limbs, rows=4)


@pytest.mark.parametrize("p", [P_2_20, P_2_22, 8388593])
def test_natural_chunk_boundary(p):
    """All-(p-1) operands at the largest exact one-limb chunk and one past it."""
    kc = max_chunk(p, False)
    assert (kc * (p - 1) ** 2 + p - 1) < 2**51 <= ((kc + 1) * (p - 1) ** 2 + p - 1)
    for k in (kc - 1, kc, kc + 1, 2 * kc + 1):
        for kind in ("max", "random"):
            a, b = operands(np.random.default_rng(k), p, 3, k, 2, kind)
            check(a, b, p, limbs=False)
            check(a, b, p)


def test_natural_chunk_boundary_limbs():
    p = MAX_PRIME
    kc = max_chunk(p, True)
    for k in (kc, kc + 1):
        a, b = operands(None, p, 1, k, 2, "max")
        check(a, b, p)


@pytest.mark.parametrize("p, k", [(P_2_22, 600), (8388593, 100), (8388593, 600),
                                  (16777213, 600), (P_2_26, 600)])
def test_cutover(p, k):
    """Default path (one limb with <= 4 chunks or chunks >= 64 long, else two limbs) and both
    forced paths agree."""
    rng = np.random.default_rng(k)
    a, b = rng.integers(0, p, (30, k)), rng.integers(0, p, (k, 20))
    ref = exact(a, b, p)
    check(a, b, p, ref=ref)
    check(a, b, p, ref=ref, limbs=True)
    if max_chunk(p, False) >= 1:
        check(a, b, p, ref=ref, limbs=False)


@pytest.mark.parametrize("p", [65521, MAX_PRIME])
def test_row_blocks_and_layouts(p):
    rng = np.random.default_rng(11)
    a, b = rng.integers(0, p, (61, 80)), rng.integers(0, p, (80, 47))
    ref = exact(a, b, p)
    for rows in (1, 7, 60, 61, 1000):
        check(a, b, p, ref=ref, rows=rows)
    check(np.asfortranarray(a), np.asfortranarray(b), p, ref=ref)
    check(a, np.ascontiguousarray(b.T).T, p, ref=ref)
    big_a, big_b = rng.integers(0, p, (122, 240)), rng.integers(0, p, (240, 94))
    sa, sb = big_a[::2, ::3], big_b[::3, 1::2]
    check(sa, sb, p)
    check(sa, sb, p, rows=5, chunk=7)
    check(a[::-1], b[:, ::-1], p)
    check(a.astype(np.int32), b, p, ref=ref)


@pytest.mark.parametrize("p", [65521, MAX_PRIME])
def test_default_row_blocks(p):
    """Tall ``a``: the default row blocks split it (two blocks here)."""
    rng = np.random.default_rng(13)
    a, b = rng.integers(0, p, (2500, 1000)), rng.integers(0, p, (1000, 3))
    a[-1] = p - 1
    ref = exact_int64(a, b, p)
    np.testing.assert_array_equal(ref[-3:], exact(a[-3:], b, p))
    check(a, b, p, ref=ref)


def test_threads_and_workspace_reuse():
    """Per-thread workspaces: concurrent calls of different sizes stay exact."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(17)
    jobs = []
    for i in range(12):
        p = (65521, MAX_PRIME, P_2_20)[i % 3]
        m, k, n = (300, 200, 260) if i % 2 else (90, 400, 120)
        jobs.append((rng.integers(0, p, (m, k)), rng.integers(0, p, (k, n)), p))
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda job: matmul_mod(*job), jobs))
    for (a, b, p), out in zip(jobs, outs):
        np.testing.assert_array_equal(out, exact_int64(a, b, p))


def test_small_dtypes_and_lists():
    check(np.array([[1, 2]], dtype=np.uint8), np.array([[2], [1]], dtype=np.int16), 3)
    np.testing.assert_array_equal(matmul_mod([[1, 2], [0, 1]], [[1], [1]], 5), [[3], [1]])


def test_bad_arguments():
    one = np.ones((2, 2), np.int64)
    with pytest.raises(ValueError):
        matmul_mod(one, np.ones((3, 2), np.int64), 5)
    with pytest.raises(ValueError):
        matmul_mod(np.ones(2, np.int64), one, 5)
    with pytest.raises(ValueError):
        matmul_mod(one, one, 1)
    with pytest.raises(ValueError):
        matmul_mod(one, one, MAX_PRIME + 2)


@pytest.mark.parametrize("p", [2, 3, 65521, P_2_20, P_2_26, MAX_PRIME])
def test_mod_kernel_exact_up_to_2_51(p):
    """The reduction step itself, at and around its exactness bound and multiples of p."""
    top = 2**51 - 1
    q = top // p
    xs = {0, 1, p - 1, p, p + 1, top, top - 1, q * p, q * p - 1, (q - 1) * p, (q - 1) * p + p - 1}
    rng = np.random.default_rng(p)
    xs.update(int(v) for v in rng.integers(0, 2**51, 200))
    xs.update(int(v) * p + r for v in rng.integers(0, q, 50) for r in (0, p - 1))
    x = np.array(sorted(v for v in xs if 0 <= v <= top), dtype=np.float64)
    want = np.array([int(v) % p for v in x.astype(np.int64)])
    t = np.empty_like(x)
    for offset in (0.0, float(2**52)):
        _mod(x + offset, t, p, offset)
        np.testing.assert_array_equal((t - offset).astype(np.int64), want)


def test_field_matmul_uses_it():
    F = field("gf(65521)")
    rng = np.random.default_rng(5)
    a, b = F.random((33, 70), rng), F.random((70, 21), rng)
    np.testing.assert_array_equal(F.matmul(a, b), galois_matmul(a, b, 65521))
    big = field("gfp")
    a, b = big.random((12, 30), rng), big.random((30, 9), rng)
    np.testing.assert_array_equal(big.matmul(a, b), exact(a, b, big.p))


@st.composite
def problems(draw):
    p = draw(st.sampled_from([2, 3, 5, 251, 65521, P_2_20, P_2_22, P_2_26, MAX_PRIME]))
    m, k, n = (draw(st.integers(0, 9)) for _ in range(3))
    elems = st.one_of(st.integers(0, p - 1), st.just(p - 1))
    a = np.array(draw(st.lists(elems, min_size=m * k, max_size=m * k)), dtype=np.int64)
    b = np.array(draw(st.lists(elems, min_size=k * n, max_size=k * n)), dtype=np.int64)
    kw = draw(st.sampled_from([{}, {"chunk": 1}, {"chunk": 2, "rows": 1}, {"limbs": True},
                               {"limbs": True, "chunk": 3, "rows": 2}, {"rows": 3}]))
    return a.reshape(m, k), b.reshape(k, n), p, kw


@settings(max_examples=300, deadline=None)
@given(problems())
def test_property_matches_python_ints(problem):
    a, b, p, kw = problem
    check(a, b, p, **kw)


@pytest.mark.parametrize("p, k", [(2, 1000), (3, 4000), (5, 1 << 16), (5, 1 << 20)])
def test_float32_path_for_tiny_primes_is_exact(p, k):
    """k (p-1)^2 <= 2^24: the float32 path (the last case sits exactly on the bound); all-(p-1)
    rows and columns give the largest sums.  Reference: int64, exact at these sizes."""
    rng = np.random.default_rng(k)
    a = rng.integers(0, p, (7, k))
    b = rng.integers(0, p, (k, 5))
    a[0] = p - 1
    b[:, 0] = p - 1
    assert np.array_equal(matmul_mod(a, b, p), (a @ b) % p)
