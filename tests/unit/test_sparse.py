"""Sparse ``A`` without Ray: exact GF(p) products on every limb path, the fields' checks, the
balanced row order, row weights, sketches, the worker's CSR row storage, and the driver's
loading rules (``.npz``, refusals under the unified and hetero schemes)."""

import asyncio

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from elastic_coded.algebra import field, scaling, sparse
from elastic_coded.algebra.gfp_matmul import matmul_mod
from elastic_coded.algebra.verify import make_sketch
from elastic_coded.runtime.family_setup import setup_of
from elastic_coded.runtime.operator import check_transpose
from elastic_coded.runtime.worker import Machine

P31 = 2147483647


def _int_sparse(rng, m, n, density, p):
    A = sp.random(m, n, density=density, format="csr", random_state=rng)
    A.data = rng.integers(0, p, A.nnz).astype(np.float64)
    return A


def _exact(A, X, p):
    """``A X mod p`` with Python integers (no overflow possible)."""
    D = np.asarray(A.toarray(), dtype=np.int64).astype(object)
    return np.asarray((D.dot(X.astype(object))) % p, dtype=np.int64)


@given(p=st.sampled_from([2, 65521, 1000003, P31]), m=st.integers(1, 12),
       n=st.integers(1, 30), r=st.integers(1, 4), density=st.floats(0.0, 1.0),
       seed=st.integers(0, 2**16))
def test_gfp_sparse_products_are_exact_both_ways(p, m, n, r, density, seed):
    rng = np.random.default_rng(seed)
    F = field(p)
    A = F.asarray(_int_sparse(rng, m, n, density, p), "A")
    X = F.random((n, r), rng)
    assert np.array_equal(F.matmul(A, X), _exact(A, X, p))
    U = F.random((r, m), rng)
    assert np.array_equal(F.matmul(U, A), matmul_mod(U, A.toarray().astype(np.int64), p))


@pytest.mark.parametrize("row_nnz", [3, 40_000, 70_000])
def test_gfp_long_rows_take_the_limb_paths_and_stay_exact(row_nnz):
    # one int64 product (3), dense operand split in 16-bit limbs (40k: k p^2 overflows),
    # both operands split (70k > 2^16 nonzeros in a row)
    rng = np.random.default_rng(row_nnz)
    F = field(P31)
    A = F.asarray(sp.csr_array((np.full(row_nnz, P31 - 1, dtype=np.int64),
                                 rng.permutation(row_nnz), [0, row_nnz]), shape=(1, row_nnz)))
    X = np.full((row_nnz, 2), P31 - 1, dtype=np.int64)
    X[::7, 1] = rng.integers(0, P31, X[::7, 1].size)
    want = [sum(int(a) * int(x) for a, x in zip(A.toarray()[0], X[:, j])) % P31 for j in (0, 1)]
    assert F.matmul(A, X)[0].tolist() == want


def test_real_sparse_products_match_dense():
    rng = np.random.default_rng(1)
    F = field("real")
    A = F.asarray(sp.random(50, 40, density=0.1, random_state=2, format="coo"), "A")
    assert isinstance(A, sp.csr_array) and A.dtype == np.float64
    X = rng.standard_normal((40, 3))
    assert np.allclose(F.matmul(A, X), A.toarray() @ X, rtol=1e-14, atol=1e-14)
    assert np.allclose(F.matmul(X.T, A.T), X.T @ A.toarray().T, rtol=1e-14, atol=1e-14)


def test_bad_sparse_inputs_name_the_rule():
    with pytest.raises(ValueError, match=r"A: a sparse matrix must be 2-D, got 1-D"):
        field("real").asarray(sp.coo_array(np.ones(3)), "A")
    with pytest.raises(TypeError, match="A: complex sparse matrices are not supported"):
        field("real").asarray(sp.eye(3, dtype=complex), "A")
    with pytest.raises(TypeError, match=r"A: sparse matrices are supported over the reals and "
                                        r"GF\(p\), not GF\(2\^8\)"):
        field("gf(2^8)").asarray(sp.eye(3, format="csr"), "A")
    with pytest.raises(ValueError, match=r"A: values must lie in \[0, 7\)"):
        field(7).asarray(sp.csr_array(np.array([[0, 9]])), "A")
    with pytest.raises(TypeError, match="A: GF.7. needs integer values"):
        field(7).asarray(sp.csr_array(np.array([[0, 0.5]])), "A")
    bad = sp.csr_array(np.array([[0.0, 1.0]]))
    bad.data[0] = np.inf
    with pytest.raises(ValueError, match="A: real field values must be finite"):
        field("real").asarray(bad, "A")


@given(nnz=st.lists(st.integers(0, 50), min_size=1, max_size=300))
def test_balanced_order_is_a_permutation_spreading_the_heavy_rows(nnz):
    order = sparse.balanced_order(nnz)
    assert sorted(order.tolist()) == list(range(len(nnz)))
    # the heaviest rows (ranks 0 and 1) never sit side by side once there are 4 rows or more
    ranked = np.argsort(-np.asarray(nnz), kind="stable")
    pos = {int(r): i for i, r in enumerate(order)}
    if len(nnz) >= 4:
        assert abs(pos[int(ranked[0])] - pos[int(ranked[1])]) >= len(nnz) // 4


@given(nnz=st.lists(st.integers(0, 50), min_size=1, max_size=300), run=st.integers(2, 40),
       cols=st.integers(1, 3))
def test_balanced_order_by_runs_keeps_runs_whole_and_in_order_inverts_it(nnz, run, cols):
    order = sparse.balanced_order(nnz, run)
    m, full = len(nnz), (len(nnz) // run) * run
    assert sorted(order.tolist()) == list(range(m))
    assert order[full:].tolist() == list(range(full, m))  # the short tail stays last
    starts = order[:full:run]
    assert all(s % run == 0 for s in starts.tolist())
    assert np.array_equal(order[:full], (starts[:, None] + np.arange(run)).ravel())
    if full >= 4 * run:  # the heaviest runs are spread like rows (run 1)
        assert np.array_equal(starts // run, sparse.balanced_order(
            np.asarray(nnz[:full]).reshape(-1, run).sum(axis=1)))
    Y = np.random.default_rng(m).random((m, cols))  # rows in `order`
    want = np.empty_like(Y)
    want[order] = Y
    for r in (run, 1):  # by runs, and row by row (the same permutation)
        assert np.array_equal(sparse.in_order(Y, order, r), want)


def test_balanced_order_by_runs_evens_out_a_large_matrix_whose_dense_rows_come_first():
    nnz = np.r_[np.full(1 << 16, 100), np.full(1 << 16, 1)]
    c = np.concatenate([[0], np.cumsum(nnz[sparse.balanced_order(nnz, 32)])])
    tenths = np.diff(c[::nnz.size // 10][:11]) / (nnz.sum() / 10)
    assert tenths.min() > 0.99 and tenths.max() < 1.01


def test_balanced_order_evens_out_a_matrix_whose_dense_rows_come_first():
    # half the rows dense, then half nearly empty: by rows, the first half of the machines
    # would do all the work; in the balanced order every tenth of the rows holds about a tenth
    nnz = np.r_[np.full(5000, 100), np.full(5000, 1)]
    c = np.concatenate([[0], np.cumsum(nnz[sparse.balanced_order(nnz)])])
    tenths = np.diff(c[::1000]) / (nnz.sum() / 10)
    assert tenths.min() > 0.99 and tenths.max() < 1.01
    c0 = np.concatenate([[0], np.cumsum(nnz)])
    assert (np.diff(c0[::1000]) / (nnz.sum() / 10)).max() > 1.9


def test_row_weights_count_rows_or_nonzeros():
    A = sp.csr_array(np.array([[1, 0, 2], [0, 0, 0], [3, 4, 5]], dtype=float))
    w = sparse.weights_of(A)
    assert (w.total, w.of((0, 2)), w.of((1, 3)), w.of((2, 2))) == (5, 2, 3, 0)
    d = sparse.weights_of(np.zeros((4, 2)))
    assert (d.total, d.of((1, 3))) == (4, 2)


def test_scaling_and_norms_see_a_sparse_matrix_like_its_dense_copy():
    A = sp.csr_array(np.array([[0, 3e300, 0], [-1e-300, 0, 2.0]]))
    D = A.toarray()
    assert scaling.exponent(A) == scaling.exponent(D)
    assert scaling.max_exponent(A) == scaling.max_exponent(D)
    assert scaling.norm(A) == scaling.norm(D)
    assert np.array_equal(scaling.scaled(A, 10).toarray(), scaling.scaled(D, 10))


@pytest.mark.parametrize("spec", ["real", "gf(2147483647)"])
def test_a_sparse_sketch_is_the_dense_sketch(spec):
    F = field(spec)
    rng = np.random.default_rng(4)
    A = _int_sparse(rng, 60, 25, 0.1, 1000)
    S, D = make_sketch(F, F.asarray(A, "A"), seed=5), make_sketch(F, A.toarray(), seed=5)
    assert np.allclose(S.UA, D.UA, rtol=1e-13) if not F.exact else np.array_equal(S.UA, D.UA)
    assert S.block == 60  # one block: a sparse sketch keeps no dense block sums


def _run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


def test_the_worker_stores_merges_and_drops_csr_row_blocks():
    F = field(65521)
    rng = np.random.default_rng(6)
    A = F.asarray(_int_sparse(rng, 40, 7, 0.3, 65521), "A")
    w = Machine("m0", "gf(65521)")
    _run(w.store_chunks("A", [(0, 10)], [0, 20], A[0:20], A[20:40]))
    _run(w.store_chunks("A", [(10, 25), (30, 40)], [0, 20], A[0:20], A[20:40]))
    rows = w._rows("A", (5, 22))
    assert sp.issparse(rows) and np.array_equal(rows.toarray(), A[5:22].toarray())
    _run(w.keep_only("A", [(2, 12), (30, 33)]))
    assert w.stored_rows() == 13
    assert np.array_equal(w._rows("A", (30, 33)).toarray(), A[30:33].toarray())
    with pytest.raises(KeyError, match="does not store rows 12:14 of A"):
        w._rows("A", (12, 14))


def test_the_driver_loads_sparse_and_npz_in_the_balanced_order(tmp_path):
    F = field("real")
    A = sp.random(30, 9, density=0.2, random_state=3, format="csc")
    loaded = setup_of("usctec").load(F, A)
    assert loaded.shape == (30, 9) and sp.issparse(loaded.data)
    assert np.array_equal(loaded.data.toarray(), A.toarray()[loaded.order])
    assert loaded.weights.total == A.nnz
    path = tmp_path / "a.npz"
    sp.save_npz(path, sp.csr_matrix(A))
    again = setup_of("usctec").load(F, str(path))
    assert np.array_equal(again.data.toarray(), loaded.data.toarray())
    X, shape, cols = setup_of("usctec").inputs(F, loaded, np.ones(9))
    assert np.allclose(shape(F.matmul(loaded.data, X)), A.toarray() @ np.ones(9))
    with pytest.raises(ValueError, match="A: no file at"):
        setup_of("usctec").load(F, str(tmp_path / "missing.npz"))
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="does not hold a sparse matrix written by"):
        setup_of("usctec").load(F, str(tmp_path / "junk.npz"))


def test_unified_and_hetero_refuse_sparse_naming_the_memory_it_would_take():
    A = sp.random(1000, 200, density=0.01, random_state=1, format="csr")
    with pytest.raises(ValueError, match=r"A: policy 'unified' codes A itself .* 1\.5 MiB "
                                         r"per copy .*A\.toarray\(\)"):
        setup_of("unified").load(field("real"), A)
    with pytest.raises(ValueError, match=r"A\[1\]: policy 'hetero' codes A itself"):
        setup_of("hetero").load(field("real"), [np.ones((3, 2)), A])
    with pytest.raises(ValueError, match="transpose: policy 'unified' codes A itself"):
        check_transpose("unified", False)


def test_the_cluster_refuses_sparse_and_transpose_under_unified_before_ray_starts():
    from elastic_coded.runtime import ElasticCluster

    A = sp.random(40, 10, density=0.2, random_state=1, format="csr")
    with pytest.raises(ValueError, match="transpose: policy 'unified' codes A itself"):
        ElasticCluster(A.toarray(), "unified", machines=4, transpose=True)
    with pytest.raises(ValueError, match="A: policy 'unified' codes A itself"):
        ElasticCluster(A, "unified", machines=4)
    with pytest.raises(ValueError, match="transpose: .yes. must be True or False"):
        ElasticCluster(A, L=2, S=1, machines=4, transpose="yes")


def test_pagerank_config_keys_are_checked():
    from elastic_coded.config import ConfigError, parse_config

    cfg = parse_config({"job": "pagerank", "matrix": {"nodes": 1000, "edges": 5000}})
    assert (cfg.rows, cfg.cols, cfg.edges, cfg.damping, cfg.tol) == (1000, 1000, 5000, 0.85,
                                                                      1e-10)
    with pytest.raises(ConfigError, match="'pagerank.damping': 1.0 must be < 1"):
        parse_config({"job": "pagerank", "pagerank": {"damping": 1.0}})
    with pytest.raises(ConfigError, match="unknown keys \\['rows'\\] for job 'pagerank'"):
        parse_config({"job": "pagerank", "matrix": {"rows": 10}})
    with pytest.raises(ConfigError, match="'pagerank'.*is only for job 'pagerank'"):
        parse_config({"job": "matmul", "pagerank": {"damping": 0.5}})
    with pytest.raises(ConfigError, match="'field'.*must be 'real' for job 'pagerank'"):
        parse_config({"job": "pagerank", "field": "gf(p)"})
