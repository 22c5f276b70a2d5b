"""Sparse ``A`` on real Ray actors: every USCTEC-family policy returns exactly the dense
product in GF(p) from CSR rows, counting nonzeros; an ``.npz`` matrix survives a crash
mid-step; and scipy's ``eigsh``, ``svds`` and ``lsqr`` run on the cluster's
``LinearOperator`` under churn, agreeing with scipy on ``A`` itself."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import cg, eigsh, lsqr, svds

from elastic_coded.algebra import field
from elastic_coded.runtime import ElasticCluster
from elastic_coded.schemes.row_units import row_units

pytestmark = pytest.mark.ray

F = field("gf(65521)")
POLICIES = ["usctec-auto", "usctec", "usctec-pull", "dynamic", "proportional", "cyclic",
            "uncoded", "speculative"]


def _skewed(rng, m, n, p):
    """Integer sparse rows of very different lengths: a few dense rows among sparse ones."""
    A = sp.random(m, n, density=0.05, format="lil", random_state=rng)
    for i in rng.choice(m, 4, replace=False):
        A[i, :] = 1.0
    A = sp.csr_array(A)
    A.data = rng.integers(1, p, A.nnz).astype(np.float64)
    return A


@pytest.fixture(scope="module")
def cl(ray_session):
    rng = np.random.default_rng(0)
    A = _skewed(rng, 160, 40, F.order)
    ms = [{"id": f"m{i}", "speed": 1.0 + i % 3, "storage": 1.0} for i in range(6)]
    with ElasticCluster(A, L=2, S=1, machines=ms, field=F, time_scale=0.2) as c:
        yield A, c


@pytest.mark.parametrize("policy", POLICIES)
def test_sparse_equals_dense_exactly_for_every_policy(cl, policy):
    A, c = cl
    rng = np.random.default_rng(len(policy))
    B = F.random((40, 3), rng)
    assert np.array_equal(c.multiply(B, policy=policy), F.matmul(A.toarray().astype(np.int64), B))
    rep = c.reports[-1]
    assert rep.useful_products == A.nnz * 3  # nonzeros times columns, not rows
    assert rep.products >= rep.useful_products - rep.wasted_products
    assert rep.verified


def test_a_long_sparse_A_is_balanced_by_runs_and_its_products_come_back_in_order(ray_session):
    # 70,003 rows: past ORDER_RUN_FROM, so the rows move in runs of 32 (and 19 rows of tail)
    rng = np.random.default_rng(5)
    A = sp.random(70_003, 30, density=0.02, format="csr", random_state=rng)
    A.data = rng.integers(1, F.order, A.nnz).astype(np.float64)
    dense = A.toarray().astype(np.int64)
    with ElasticCluster(A, L=2, S=1, machines=4, field=F, time_scale=0.0) as c:
        assert c._loaded.run == 32
        for policy in ("usctec-auto", "usctec-pull"):
            x = F.random(30, rng)
            assert np.array_equal(c.multiply(x, policy=policy), F.matmul(dense, x[:, None])[:, 0])
        B = F.random((30, 2), rng)
        assert np.array_equal(c.multiply(B), F.matmul(dense, B))


def test_workers_hold_csr_rows_and_the_vector_product_keeps_its_shape(cl):
    A, c = cl
    x = F.random(40, np.random.default_rng(9))
    y = c.multiply(x)
    assert y.shape == (160,) and np.array_equal(y, F.matmul(A.toarray().astype(np.int64),
                                                            x[:, None])[:, 0])


def test_the_plan_cuts_rows_at_units_of_equal_nonzeros(cl):
    """The controller plans units of equal nonzeros: every block of the placement and every
    group of a plan starts at a unit edge of the reordered rows, and budgets count nonzeros."""
    A, c = cl
    Ap = c._loaded.data
    units = row_units(Ap.indptr)
    assert units is not None and units.num_units < A.shape[0]
    edges = set(units.edges.tolist())
    p = c.placement()
    assert p.num_rows == A.shape[0]
    assert all(b.start in edges and b.stop in edges for b in p.blocks)
    c.multiply(F.random((40, 2), np.random.default_rng(3)), policy="usctec")
    assert all(a in edges and b in edges for a, b in (pc.rows for pc in c.reports[-1].plan.pieces))


def test_npz_matrix_survives_a_crash_mid_step(ray_session, tmp_path):
    rng = np.random.default_rng(2)
    A = _skewed(rng, 90, 30, F.order)
    path = tmp_path / "a.npz"
    sp.save_npz(path, sp.csr_matrix(A))
    ms = [{"id": f"m{i}", "speed": 1.0, "storage": 1.0} for i in range(6)]
    D = A.toarray().astype(np.int64)
    with ElasticCluster(str(path), "usctec", L=2, S=2, machines=ms, field=F,
                        time_scale=0.2) as c:
        B = F.random((30, 2), rng)
        assert np.array_equal(c.multiply(B, events={"crash": "m3"}), F.matmul(D, B))
        assert "m3" not in c.machines()
        B = F.random((30, 2), rng)
        assert np.array_equal(c.multiply(B, events={"crash": "m0"}), F.matmul(D, B))
        assert np.array_equal(c.multiply(B), F.matmul(D, B))  # after the storage's repair


CHURN = {"seed": 3, "events": [{"step": 4, "crash": "m2"}, {"step": 9, "leave": "m5"},
                               {"step": 12, "slow": ["m0", "m1"], "factor": 4, "steps": 3}]}


def test_svds_and_lsqr_through_the_operator_agree_with_scipy_under_churn(ray_session):
    rng = np.random.default_rng(4)
    A = sp.random(200, 120, density=0.05, format="csr", random_state=5)
    ms = [{"id": f"m{i}", "speed": 1.0 + i % 2, "storage": 1.0} for i in range(7)]
    with ElasticCluster(A, L=2, S=1, machines=ms, churn=CHURN, transpose=True) as c:
        op = c.as_linear_operator()
        s = np.sort(svds(op, k=4, tol=1e-12, random_state=1)[1])
        s0 = np.sort(svds(A, k=4, tol=1e-12, random_state=1)[1])
        assert np.abs(s - s0).max() <= 1e-8 * s0.max()
        assert "m2" not in c.machines() and "m2" not in c.transposed.machines()
        b = rng.standard_normal(200)
        x = lsqr(op, b, atol=1e-14, btol=1e-14, iter_lim=500)[0]
        x0 = np.linalg.lstsq(A.toarray(), b, rcond=None)[0]
        assert np.linalg.norm(x - x0) <= 1e-8 * np.linalg.norm(x0)
        assert len(c.reports) > 10 and len(c.transposed.reports) > 10
        assert all(r.verified for r in list(c.reports) + list(c.transposed.reports))


def test_eigsh_and_cg_through_the_operator_agree_with_scipy(ray_session):
    A = sp.random(150, 150, density=0.04, format="csr", random_state=6)
    S = A + A.T
    S = sp.csr_array(S + sp.eye(150) * (abs(S).sum(axis=1).max() + 1.0))  # diagonally dominant
    with ElasticCluster(S, "usctec-pull", L=2, S=1, machines=5) as c:
        w = np.sort(eigsh(c.as_linear_operator(), k=3, tol=1e-12)[0])
        w0 = np.sort(eigsh(S, k=3, tol=1e-12)[0])
        assert np.abs(w - w0).max() <= 1e-8 * np.abs(w0).max()
        b = np.random.default_rng(7).standard_normal(150)
        x, info = cg(c.as_linear_operator(), b, rtol=1e-12, maxiter=500)
        x0 = np.linalg.solve(S.toarray(), b)
        assert info == 0 and np.linalg.norm(x - x0) <= 1e-8 * np.linalg.norm(x0)
        with pytest.raises(ValueError, match="transpose=True"):
            c.as_linear_operator().rmatvec(np.ones(150))


def test_the_pagerank_job_matches_scipys_power_iteration_under_churn(ray_session):
    from elastic_coded.config import parse_config
    from elastic_coded.jobs import run_job

    cfg = parse_config({
        "job": "pagerank", "steps": 100, "matrix": {"nodes": 5000, "edges": 40_000},
        "pagerank": {"damping": 0.85, "tol": 1e-12}, "L": 2, "S": 1, "storage": 0.8,
        "machines": 6, "churn": {"events": [{"step": 3, "crash": "m1"},
                                            {"step": 6, "slow": "m2", "factor": 5}]}})
    res = run_job(cfg)
    assert res.extra["converged"] and res.extra["iterations"] == res.steps_done
    assert res.extra["iterations"] == res.extra["reference_iterations"]
    assert res.exact_steps == res.steps_done and res.answer_error < 1e-12
    # the crash is scripted for m1's call in step 3: a failure mid-step when its result was
    # still needed, otherwise a crash after its call was given up; m1 is gone either way
    assert res.extra["dangling"] > 0 and res.summary["failures"] + res.summary["crashes"] >= 1
    assert all("m1" not in r.available for r in res.reports[4:])
