"""The levers of the real-speed step: CSR row views with no copy of the nonzeros, a plan kept
while a fresh one would save less than it costs, and a sketch's norms of ``U`` taken once."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import sparse as esp
from elastic_coded.algebra import verify as V
from elastic_coded.algebra.fields import field
from elastic_coded.schemes.policies.rules import keep_plan, speeds_close


def _csr(m=300, n=200, seed=0):
    A = sp.random(m, n, density=0.05, random_state=seed, format="csr")
    return esp.as_field_sparse(field("real"), A)


@given(st.integers(0, 299), st.integers(1, 300))
@settings(max_examples=60, deadline=None)
def test_row_view_is_the_rows_and_shares_their_nonzeros(a, w):
    A = _csr()
    b = min(300, a + w)
    if a >= b:
        return
    v = esp.row_view(A, a, b)
    assert v.shape == (b - a, A.shape[1])
    assert (v != A[a:b]).nnz == 0
    if v.nnz:
        assert np.shares_memory(v.data, A.data) and np.shares_memory(v.indices, A.indices)
    x = np.random.default_rng(a).standard_normal((A.shape[1], 3))
    np.testing.assert_array_equal(field("real").matmul(v, x), A[a:b] @ x)


def test_row_view_exact_over_gfp():
    F = field("gf(65521)")
    rng = np.random.default_rng(1)
    D = rng.integers(0, 65521, (40, 30)) * (rng.random((40, 30)) < 0.2)
    A = esp.as_field_sparse(F, sp.csr_array(D))
    x = rng.integers(0, 65521, (30, 2))
    got = F.matmul(esp.row_view(A, 5, 27), x)
    np.testing.assert_array_equal(got, (D[5:27].astype(object) @ x.astype(object)) % 65521)


def test_row_view_of_a_dense_block_is_its_slice():
    A = np.arange(20.0).reshape(5, 4)
    v = esp.row_view(A, 1, 3)
    assert np.shares_memory(v, A) and v.shape == (2, 4)


def test_keep_plan_follows_speeds_close_without_costs():
    a, b = (1.0, 2.0, 3.0), (1.05, 2.0, 3.2)
    assert keep_plan(a, b, 0.1) == speeds_close(a, b, 0.1)
    assert not keep_plan(a, (2.0, 2.0, 3.0), 0.1)


def test_keep_plan_weighs_the_saving_against_the_planning_cost():
    planned, now = (1.0, 1.0, 1.0), (0.5, 1.0, 1.0)  # one machine at half speed
    # the old plan takes 2 step_s (the slow machine), a fresh one about 1.2 step_s
    assert keep_plan(planned, now, 0.1, step_s=0.001, plan_s=0.01)      # saves 0.8 ms < 10 ms
    assert not keep_plan(planned, now, 0.1, step_s=0.1, plan_s=0.01)    # saves 80 ms > 10 ms
    stopped = (1e-3, 1.0, 1.0)  # a stopped process: orders of magnitude
    assert not keep_plan(planned, stopped, 0.3, step_s=0.001, plan_s=0.01)
    assert not keep_plan(planned, (1.0, 1.0), 0.3, step_s=1.0, plan_s=1.0)  # other machines


def test_sketch_norms_of_U_taken_once_and_equal_to_fresh_ones():
    F = field("real")
    rng = np.random.default_rng(3)
    A = rng.standard_normal((64, 10))
    sk = V.make_sketch(F, A, seed=1)
    B = rng.standard_normal((10, 2))
    r1 = V.check(sk, B, A @ B)
    assert (0, 64) in sk.u_norms
    Us = sk.U
    nU, nU2 = sk.u_norms[(0, 64)]
    assert nU == pytest.approx(np.linalg.norm(Us))
    assert nU2 == pytest.approx(np.linalg.norm(Us, 2))
    r2 = V.check(sk, B, A @ B)
    assert r1.ok and r2.ok and r1.tolerance == r2.tolerance
    bad = A @ B
    bad[3, 1] += 1e-3
    assert not V.check(sk, B, bad)
    V.check(sk, B, (A @ B)[5:20], rows=(5, 20))
    assert (5, 20) in sk.u_norms
