"""PageRank's pure parts: the synthetic power-law graph, its Google matrix, and the power method
against the dominant eigenvector of the dense Google matrix."""

import numpy as np
import pytest
import scipy.sparse as sp

from elastic_coded import pagerank as pr


def test_the_graph_is_reproducible_heavy_tailed_and_has_dangling_nodes():
    a = pr.power_law_graph(20_000, 200_000, seed=1)
    assert (a != pr.power_law_graph(20_000, 200_000, seed=1)).nnz == 0
    assert (a != pr.power_law_graph(20_000, 200_000, seed=2)).nnz > 0
    assert a.shape == (20_000, 20_000) and 0.8 * 200_000 < a.nnz <= 200_000
    assert a.diagonal().sum() == 0 and set(np.unique(a.data)) == {1.0}
    indeg = np.asarray(a.sum(axis=0)).ravel()
    assert indeg.max() > 20 * indeg.mean()
    assert (np.diff(a.indptr) == 0).sum() > 1000  # dangling


def test_the_google_matrix_is_column_stochastic_off_the_dangling_nodes():
    M, dangling = pr.google_matrix(pr.power_law_graph(3000, 20_000, seed=3))
    assert isinstance(M, sp.csr_array) and M.dtype == np.float64
    cols = np.asarray(M.sum(axis=0)).ravel()
    assert np.allclose(cols[~dangling], 1.0) and np.all(cols[dangling] == 0)
    assert dangling.any()


def _dense_google(M, dangling, d):
    n = M.shape[0]
    return d * (M.toarray() + np.outer(np.full(n, 1 / n), dangling)) + (1 - d) / n


@pytest.mark.parametrize("damping", [0.5, 0.85, 0.95])
def test_pagerank_is_the_dominant_eigenvector_of_the_google_matrix(damping):
    M, dangling = pr.google_matrix(pr.power_law_graph(200, 900, seed=4))
    out = pr.reference_pagerank(M, dangling, damping, tol=1e-14, max_iter=2000)
    w, V = np.linalg.eig(_dense_google(M, dangling, damping))
    v = np.real(V[:, np.argmax(np.real(w))])
    v /= v.sum()
    assert out.converged and np.abs(out.ranks - v).sum() < 1e-9
    assert np.all(out.ranks > 0) and abs(out.ranks.sum() - 1) < 1e-12


def test_pagerank_with_any_matvec_is_the_reference_bit_for_bit():
    M, dangling = pr.google_matrix(pr.power_law_graph(500, 3000, seed=5))
    seen = []
    a = pr.pagerank(lambda r: M @ r, 500, dangling, callback=lambda i, r, res: seen.append(i))
    b = pr.reference_pagerank(M, dangling)
    assert np.array_equal(a.ranks, b.ranks) and a.iterations == b.iterations == len(seen)
    assert all(x > y for x, y in zip(a.residuals, a.residuals[1:])) or a.iterations < 3


def test_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="adj: must be square"):
        pr.google_matrix(sp.csr_array(np.ones((2, 3))))
    for d in (0, 1, 1.5):
        with pytest.raises(ValueError, match="damping: must be a number in"):
            pr.pagerank(lambda r: r, 3, np.zeros(3, bool), damping=d)
    with pytest.raises(ValueError, match="nodes: must be an int >= 2"):
        pr.power_law_graph(1, 10)
    with pytest.raises(ValueError, match="edges: must be an int >= 0"):
        pr.power_law_graph(10, -1)
    with pytest.raises(ValueError, match="dangling: a boolean mask of 3 nodes"):
        pr.pagerank(lambda r: r, 3, np.zeros(4, bool))


def test_save_and_load_round_trip(tmp_path):
    M, dangling = pr.google_matrix(pr.power_law_graph(400, 2000, seed=6))
    pr.save_graph(tmp_path / "g.npz", M)
    M2, d2 = pr.load_graph(tmp_path / "g.npz")
    assert (M2 != M).nnz == 0 and np.array_equal(d2, dangling)
