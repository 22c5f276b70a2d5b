"""PageRank's pure parts: the synthetic power-law graph, its Google matrix, and the power method
against the dominant eigenvector of the dense Google matrix and a direct linear solve."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded import pagerank as pr


def _dense_google(M, dangling, d):
    n = M.shape[0]
    return d * (M.toarray() + np.outer(np.full(n, 1 / n), dangling)) + (1 - d) / n


def _dense_m(adj):
    """M from its definition, entry by entry, on a dense copy of the adjacency."""
    A = adj.toarray() != 0
    out = A.sum(axis=1)
    M = np.zeros(A.shape)
    for j, i in zip(*np.nonzero(A)):
        M[i, j] = 1.0 / out[j]
    return M, out == 0


def test_the_graph_is_reproducible_heavy_tailed_and_has_dangling_nodes():
    a = pr.power_law_graph(20_000, 200_000, seed=1)
    assert isinstance(a, sp.csr_array) and a.dtype == np.float64
    b = pr.power_law_graph(20_000, 200_000, seed=1)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert (a != pr.power_law_graph(20_000, 200_000, seed=2)).nnz > 0
    assert a.shape == (20_000, 20_000) and 0.8 * 200_000 < a.nnz <= 200_000
    assert a.diagonal().sum() == 0 and set(np.unique(a.data)) == {1.0}
    a.sum_duplicates()
    assert a.nnz == b.nnz  # no duplicates were left to merge
    indeg = np.bincount(a.indices, minlength=a.shape[0])
    outdeg = np.diff(a.indptr)
    assert indeg.max() > 20 * indeg.mean()
    assert outdeg.max() < indeg.max() / 5  # out-degrees milder than in-degrees
    assert 1000 < (outdeg == 0).sum() < 0.5 * a.shape[0]  # dangling, but not most


def test_a_steeper_exponent_gives_a_lighter_tail():
    heavy = pr.power_law_graph(20_000, 200_000, seed=3, exponent=2.1)
    light = pr.power_law_graph(20_000, 200_000, seed=3, exponent=3.5)
    assert np.bincount(heavy.indices).max() > 5 * np.bincount(light.indices).max()


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 60), edges=st.integers(0, 400), seed=st.integers(0, 2**32))
def test_any_small_graph_is_a_simple_digraph(nodes, edges, seed):
    a = pr.power_law_graph(nodes, edges, seed=seed)
    assert a.shape == (nodes, nodes) and a.nnz <= edges
    assert a.diagonal().sum() == 0 and np.all(a.data == 1.0)
    assert a.has_canonical_format
    if nodes >= 2:
        assert np.diff(a.indptr)[np.diff(a.indptr) == 0].size >= 1  # someone dangles


def test_the_google_matrix_is_column_stochastic_off_the_dangling_nodes():
    M, dangling = pr.google_matrix(pr.power_law_graph(3000, 20_000, seed=3))
    assert isinstance(M, sp.csr_array) and M.dtype == np.float64
    cols = np.asarray(M.sum(axis=0)).ravel()
    assert np.allclose(cols[~dangling], 1.0, rtol=0, atol=1e-12)
    assert np.all(cols[dangling] == 0) and dangling.dtype == bool and dangling.any()


@pytest.mark.parametrize("fmt", ["coo", "csc", "lil", "dok"])
def test_the_google_matrix_follows_its_definition_for_any_sparse_input(fmt):
    rng = np.random.default_rng(7)
    dense = (rng.random((40, 40)) < 0.1) * rng.integers(1, 5, (40, 40))
    adj = sp.coo_matrix(dense).asformat(fmt)
    M, dangling = pr.google_matrix(adj)
    M_ref, d_ref = _dense_m(adj)
    assert isinstance(M, sp.csr_array) and np.array_equal(dangling, d_ref)
    assert np.allclose(M.toarray(), M_ref, rtol=1e-15, atol=0)


def test_duplicates_and_explicit_zeros_are_one_edge_and_none():
    # edge 0 -> 1 stored twice, 0 -> 2 once, an explicit zero at 1 -> 2
    adj = sp.coo_array(([1.0, 1.0, 3.0, 0.0], ([0, 0, 0, 1], [1, 1, 2, 2])), shape=(3, 3))
    M, dangling = pr.google_matrix(adj)
    M_ref, d_ref = _dense_m(sp.coo_array(([1.0, 1.0], ([0, 0], [1, 2])), shape=(3, 3)))
    assert np.array_equal(M.toarray(), M_ref) and np.array_equal(dangling, d_ref)


@pytest.mark.parametrize("damping", [0.5, 0.85, 0.95])
def test_pagerank_is_the_dominant_eigenvector_of_the_google_matrix(damping):
    M, dangling = pr.google_matrix(pr.power_law_graph(200, 900, seed=4))
    assert dangling.any()
    out = pr.reference_pagerank(M, dangling, damping, tol=1e-14, max_iter=2000)
    w, V = np.linalg.eig(_dense_google(M, dangling, damping))
    top = np.argmax(np.real(w))
    assert abs(w[top] - 1) < 1e-10
    v = np.real(V[:, top])
    v /= v.sum()
    assert out.converged and np.abs(out.ranks - v).sum() < 1e-9
    assert np.all(out.ranks > 0) and abs(out.ranks.sum() - 1) < 1e-12


@settings(max_examples=30, deadline=None)
@given(nodes=st.integers(1, 40), edges=st.integers(0, 300), seed=st.integers(0, 10**6),
       damping=st.floats(0.05, 0.95))
def test_pagerank_solves_the_linear_system_on_any_small_graph(nodes, edges, seed, damping):
    M, dangling = pr.google_matrix(pr.power_law_graph(nodes, edges, seed=seed))
    out = pr.reference_pagerank(M, dangling, damping, tol=1e-13, max_iter=5000)
    # (I - d M - d/n 1 dangling^T) r = (1 - d)/n 1
    A = np.eye(nodes) - damping * (M.toarray() + np.outer(np.full(nodes, 1 / nodes), dangling))
    r = np.linalg.solve(A, np.full(nodes, (1 - damping) / nodes))
    assert out.converged and np.abs(out.ranks - r).sum() < 1e-10
    assert abs(out.ranks.sum() - 1) < 1e-12 and np.all(out.ranks > 0)


def test_pagerank_with_any_matvec_is_the_reference_bit_for_bit():
    M, dangling = pr.google_matrix(pr.power_law_graph(500, 3000, seed=5))
    seen = []
    a = pr.pagerank(lambda r: M @ r, 500, dangling,
                    callback=lambda i, r, res: seen.append((i, r.sum(), res)))
    b = pr.reference_pagerank(M, dangling)
    assert np.array_equal(a.ranks, b.ranks) and a.residuals == b.residuals
    assert a.converged and a.iterations == b.iterations == len(seen) > 5
    assert [s[0] for s in seen] == list(range(1, a.iterations + 1))
    assert tuple(s[2] for s in seen) == a.residuals and a.residuals[-1] < 1e-10
    assert all(abs(s[1] - 1) < 1e-12 for s in seen)


def test_pagerank_stops_at_max_iter_unconverged_and_renormalises():
    M, dangling = pr.google_matrix(pr.power_law_graph(300, 2000, seed=8))
    out = pr.pagerank(lambda r: 1.01 * (M @ r), 300, dangling, tol=1e-300, max_iter=7)
    assert out.iterations == 7 == len(out.residuals) and not out.converged
    assert abs(out.ranks.sum() - 1) < 1e-12  # a 1% too large matvec does not drift


def test_the_update_keeps_the_total_rank():
    M, dangling = pr.google_matrix(pr.power_law_graph(400, 3000, seed=9))
    r = np.random.default_rng(0).random(400)
    r /= r.sum()
    nxt = pr.pagerank_update(M @ r, r, dangling, 0.85)
    assert abs(nxt.sum() - 1) < 1e-12 and np.all(nxt >= 0.15 / 400 - 1e-15)
    expect = 0.85 * (M @ r) + 0.85 * r[dangling].sum() / 400 + 0.15 / 400
    assert np.allclose(nxt, expect, rtol=1e-14, atol=0)


def test_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match=r"adj: must be square .* got shape \(2, 3\)"):
        pr.google_matrix(sp.csr_array(np.ones((2, 3))))
    with pytest.raises(TypeError, match="adj: must be a SciPy sparse"):
        pr.google_matrix(np.ones((2, 2)))
    for d in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match=rf"damping: must be a number in \(0, 1\), got {d}"):
            pr.pagerank(lambda r: r, 3, np.zeros(3, bool), damping=d)
        with pytest.raises(ValueError, match="damping: must be a number in"):
            pr.pagerank_update(np.ones(3), np.ones(3), np.zeros(3, bool), d)
    with pytest.raises(ValueError, match="nodes: must be an int >= 1, got 0"):
        pr.power_law_graph(0, 10)
    with pytest.raises(TypeError, match="nodes: must be an int, got 2.5"):
        pr.power_law_graph(2.5, 10)
    with pytest.raises(ValueError, match="edges: must be an int >= 0, got -1"):
        pr.power_law_graph(10, -1)
    with pytest.raises(ValueError, match="exponent: must be > 1"):
        pr.power_law_graph(10, 10, exponent=1.0)
    with pytest.raises(ValueError, match="dangling: must be a boolean mask of 3 nodes"):
        pr.pagerank(lambda r: r, 3, np.zeros(4, bool))
    with pytest.raises(ValueError, match="tol: must be > 0, got 0"):
        pr.pagerank(lambda r: r, 3, np.zeros(3, bool), tol=0)
    with pytest.raises(ValueError, match="max_iter: must be an int >= 1, got 0"):
        pr.pagerank(lambda r: r, 3, np.zeros(3, bool), max_iter=0)
    with pytest.raises(ValueError, match="Mr: must have the shape of r"):
        pr.pagerank(lambda r: r[:2], 3, np.zeros(3, bool))
    with pytest.raises(ValueError, match="matvec: gave ranks summing to nan at iteration 1"):
        pr.pagerank(lambda r: r * np.nan, 3, np.zeros(3, bool))


def test_save_and_load_round_trip(tmp_path):
    M, dangling = pr.google_matrix(pr.power_law_graph(400, 2000, seed=6))
    path = pr.save_graph(tmp_path / "g", M, dangling)
    assert path.endswith("g.npz") and sorted(p.name for p in tmp_path.iterdir()) == ["g.npz"]
    M2, d2 = pr.load_graph(path)
    assert isinstance(M2, sp.csr_array) and M2.dtype == np.float64
    assert (M2 != M).nnz == 0 and np.array_equal(d2, dangling) and d2.any()
    a, b = pr.reference_pagerank(M, dangling), pr.reference_pagerank(M2, d2)
    assert np.array_equal(a.ranks, b.ranks)


def test_save_and_load_refuse_what_is_not_a_google_matrix(tmp_path):
    M, dangling = pr.google_matrix(pr.power_law_graph(100, 500, seed=6))
    with pytest.raises(ValueError, match="dangling: must be the all-zero columns of M"):
        pr.save_graph(tmp_path / "g.npz", M, ~dangling)
    with pytest.raises(ValueError, match="M: must be a Google matrix .* column"):
        pr.save_graph(tmp_path / "g.npz", 2 * M)
    sp.save_npz(tmp_path / "adj.npz", sp.csr_matrix(pr.power_law_graph(100, 500, seed=6)))
    with pytest.raises(ValueError, match="adj.npz': must be a Google matrix"):
        pr.load_graph(tmp_path / "adj.npz")
