"""Real-field Lagrange decodes: condition numbers, the rounding-error bound, and point sets."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field
from elastic_coded.algebra.lagrange import (
    AUTO_LIMIT,
    REAL_POINT_SETS,
    UNIT_ROUNDOFF,
    conditions,
    gamma,
    lagrange_code,
    rounding_bound,
    worst_condition,
)

REAL = field("real")
CHEBYSHEV_SETS = ("chebyshev", "chebyshev-interleaved", "chebyshev2-interleaved")


def _real_form(M):
    """A complex matrix as real 2x2 rotation-scaling blocks, written out entry by entry."""
    if not np.iscomplexobj(M):
        return M
    out = np.zeros((2 * M.shape[0], 2 * M.shape[1]))
    for i, j in itertools.product(range(M.shape[0]), range(M.shape[1])):
        a, b = M[i, j].real, M[i, j].imag
        out[2 * i:2 * i + 2, 2 * j:2 * j + 2] = [[a, -b], [b, a]]
    return out


def _direct_condition(code, P):
    """|| |D_P| |E_P| ||_2 from the code's own decode and encode matrices (their real form)."""
    D = _real_form(code.decode_matrix(P))
    E = _real_form(code.encode_matrix[list(P)])
    return np.linalg.norm(np.abs(D) @ np.abs(E), 2)


def _decode_error(code, P, rng, rows=24, inner=40, width=3):
    A = rng.standard_normal((rows, inner))
    B = rng.standard_normal((inner, code.L * width * code.width))
    coded = code.encode(B)
    Y = np.concatenate(list(code.decode({p: A @ coded[p] for p in P})), axis=1)
    return A, B, float(np.linalg.norm(Y - A @ B))


@given(L=st.integers(1, 8), S=st.integers(0, 6), seed=st.integers(0, 2**31),
       points=st.sampled_from(REAL_POINT_SETS))
@settings(max_examples=60, deadline=None)
def test_condition_matches_matrices_and_bounds_error(L, S, seed, points):
    rng = np.random.default_rng(seed)
    code = lagrange_code(REAL, L, S, points)
    P = tuple(sorted(rng.permutation(L + S)[:L].tolist()))
    kappa = code.decode_condition(P)
    assert kappa >= 1.0 - 1e-12
    direct = _direct_condition(code, P)
    if code.generator is None:  # closed-form decode
        assert kappa == pytest.approx(direct, rel=1e-9)
    else:  # a numerical inverse: its measured residual is added
        assert kappa >= direct * (1 - 1e-9)
        assert code.conditions([P])[0] == pytest.approx(direct, rel=1e-9)
    A, B, err = _decode_error(code, P, rng)
    assert err <= code.error_bound(P, A.shape[1], np.linalg.norm(A), np.linalg.norm(B))


@pytest.mark.parametrize("L, S", [(8, 4), (8, 8), (12, 12), (16, 8), (16, 10), (20, 8)])
def test_error_runs_at_unit_roundoff_times_condition(L, S):
    """At the worst pattern the measured relative error is within 20x of u * kappa either way,
    and below the rigorous bound."""
    code = lagrange_code(REAL, L, S)
    kappa, P = code.worst_decode_condition(samples=300)
    A, B, err = _decode_error(code, P, np.random.default_rng(L * 100 + S), rows=40, inner=80)
    rel = err / np.linalg.norm(A @ B)
    assert 0.05 <= rel / (UNIT_ROUNDOFF * kappa) <= 20
    assert err <= code.error_bound(P, 80, np.linalg.norm(A), np.linalg.norm(B))


def test_worst_condition_exhaustive_is_the_maximum():
    code = lagrange_code(REAL, 5, 3)
    every = [code.decode_condition(P) for P in itertools.combinations(range(8), 5)]
    worst, P = code.worst_decode_condition()
    assert worst == pytest.approx(max(every), rel=1e-12)
    assert code.decode_condition(P) == pytest.approx(worst, rel=1e-12)


@pytest.mark.parametrize("points", CHEBYSHEV_SETS + ("roots-of-unity", "rotation"))
def test_worst_condition_search_finds_the_exhaustive_worst(points):
    """Without enumeration (exhaustive=0) the search reaches the true worst of C(16, 8) for
    the polynomial codes (worst at contiguous runs), and a lower bound for the random one."""
    code = lagrange_code(REAL, 8, 8, points)
    exact, _ = code.worst_decode_condition()
    found, P = code.worst_decode_condition(exhaustive=0, samples=200, seed=5)
    if points == "rotation":
        assert 0.1 * exact <= found <= exact * (1 + 1e-9)
    else:
        assert found == pytest.approx(exact, rel=1e-9)
    assert code.conditions([P])[0] == pytest.approx(found, rel=1e-12)


def test_chebyshev_is_the_best_chebyshev_set_where_conditioning_matters():
    """In the exhaustive sweep, wherever some Chebyshev set's worst case exceeds 1e3,
    "chebyshev" has the lowest worst case of the three (module docstring)."""
    checked = 0
    for L in range(2, 9):
        for S in range(1, 7):
            if math.comb(L + S, L) > 5000:
                continue
            w = {p: lagrange_code(REAL, L, S, p).worst_decode_condition()[0]
                 for p in CHEBYSHEV_SETS}
            if max(w.values()) > 1e3:
                checked += 1
                assert w["chebyshev"] <= min(w.values()), (L, S, w)
    assert checked >= 10


@pytest.mark.parametrize("L, S", [(1, 5), (2, 6), (4, 2), (5, 3), (8, 4), (10, 6), (16, 8)])
def test_auto_keeps_chebyshev_only_where_it_is_well_conditioned(L, S):
    """"auto" is Chebyshev exactly where Chebyshev's worst contiguous decode is within
    AUTO_LIMIT, else a complex code (roots of unity, or the rotation code), whose worst case
    is then lower."""
    auto = lagrange_code(REAL, L, S)
    cheb = lagrange_code(REAL, L, S, "chebyshev")
    worst_cheb, _ = cheb.worst_decode_condition(exhaustive=10000, samples=300)
    if auto.points == "chebyshev":
        assert auto is cheb and auto.width == 1
        assert L == 1 or worst_cheb <= 3 * AUTO_LIMIT
    else:
        assert auto.points in ("roots-of-unity", "rotation") and auto.width == 2
        assert worst_cheb > AUTO_LIMIT
        assert auto.worst_decode_condition(exhaustive=10000, samples=300)[0] < worst_cheb


def test_default_beats_the_former_default_on_the_issue_cases():
    for L, S in [(8, 4), (8, 8), (12, 12), (16, 8), (16, 10), (20, 8)]:
        new = lagrange_code(REAL, L, S).worst_decode_condition(samples=300)[0]
        old = lagrange_code(REAL, L, S, "chebyshev-interleaved").worst_decode_condition(
            samples=300)[0]
        assert new < 0.8 * old, (L, S, new, old)


def test_interleaved_set_is_the_former_default():
    """"chebyshev-interleaved" = K+L first-kind nodes, betas at evenly spread sorted indices."""
    L, S = 6, 5
    K = L + S
    pts = np.sort(REAL.points(K + L))
    idx = np.unique(np.round(np.linspace(0.5, K + L - 1.5, L)).astype(int))
    code = lagrange_code(REAL, L, S, "chebyshev-interleaved")
    assert np.array_equal(code.betas, pts[idx])
    assert np.array_equal(code.alphas, np.delete(pts, idx))


@pytest.mark.parametrize("L, S", [(1, 0), (3, 2), (1, 2), (5, 10), (4, 8), (2, 0), (6, 6)])
def test_chebyshev_grids_never_share_a_point(L, S):
    """K/g and L/g both odd would make the grids meet: the betas are turned apart."""
    code = lagrange_code(REAL, L, S, "chebyshev")
    pts = np.asarray(code.alphas + code.betas)
    gaps = np.abs(pts[:, None] - pts[None, :]) + np.eye(len(pts))
    assert gaps.min() > 1e-6
    assert np.array_equal(code.alphas, np.cos((2 * np.arange(L + S) + 1) * np.pi / (2 * (L + S))))
    assert code.points == "chebyshev"


def test_conditions_with_complex_points():
    """Complex evaluation points (roots of unity): |D||E| on the real form, against numpy's
    inverse of E_P."""
    K, L = 10, 6
    alphas = np.exp(2j * np.pi * np.arange(K) / K)
    betas = np.exp(2j * np.pi * np.arange(L) / L + 1j * np.pi / 30)
    rng = np.random.default_rng(0)
    P = np.sort(np.argsort(rng.random((5, K)), axis=1)[:, :L], axis=1)
    got = conditions(alphas, betas, P)
    for p, g in zip(P, got):
        E = np.array([[np.prod([(alphas[i] - betas[k]) / (betas[l] - betas[k])
                                for k in range(L) if k != l]) for l in range(L)] for i in p])
        D = np.linalg.inv(E)
        Dr, Er = _real_form(D), _real_form(E)
        assert g == pytest.approx(np.linalg.norm(np.abs(Dr) @ np.abs(Er), 2), rel=1e-8)
    worst, Pw = worst_condition(alphas, betas)
    assert worst == pytest.approx(conditions(alphas, betas, [Pw])[0])


def test_gamma_and_rounding_bound():
    assert gamma(10) == pytest.approx(10 * 2.0**-53, rel=1e-12)
    assert gamma(2**53) == math.inf
    assert rounding_bound(100, 2.0, 3.0, 4.0) == pytest.approx(1.01 * gamma(100) * 24)
    with pytest.raises(ValueError, match="condition: must be >= 1"):
        rounding_bound(10, 0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="norm_B: must be a norm"):
        rounding_bound(10, 1.0, 1.0, -1.0)


def test_conditioning_errors():
    with pytest.raises(ValueError, match="points: 'legendre' is not a point set for real"):
        lagrange_code(REAL, 3, 2, "legendre")
    with pytest.raises(ValueError, match="points: 'chebyshev' is not a point set for GF"):
        lagrange_code("gf(65521)", 3, 2, "chebyshev")
    exact = lagrange_code("gf(65521)", 3, 2)
    assert exact.points == "consecutive"
    with pytest.raises(ValueError, match="field: decode conditioning is for the real field"):
        exact.decode_condition((0, 1, 2))
    assert exact.error_bound((0, 1, 2), 10, 1.0, 1.0) == 0.0
    code = lagrange_code(REAL, 3, 2)
    with pytest.raises(ValueError, match="positions: need exactly L=3"):
        code.decode_condition((0, 1))
    with pytest.raises(ValueError, match=r"positions: \[7\] outside 0..4"):
        code.decode_condition((0, 1, 7))
    with pytest.raises(ValueError, match="inner: must be an int >= 0"):
        code.error_bound((0, 1, 2), -1, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"patterns: must have shape \(N, L=3\)"):
        conditions(code.alphas, code.betas, [[0, 1]])
