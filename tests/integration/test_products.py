"""Honest work: every row-column product dispatched to a worker is counted, narrow inputs are not
padded with zero columns, and the uncoded baselines never pad.  Products are counted against an
independent count from the plan, never below those of ``A @ B`` and never above
``(L_step + S) / L_step`` of them (plus backups)."""

import numpy as np
import pytest

from elastic_coded.algebra import field
from elastic_coded.runtime import ElasticCluster
from elastic_coded.schemes.registry import step_code

pytestmark = pytest.mark.ray

F = field("gf(65521)")
L, S = 4, 2


@pytest.fixture(scope="module")
def clusters(ray_session):
    rng = np.random.default_rng(0)
    A = F.random((96, 8), rng)
    ms = [{"id": f"m{i}", "speed": 1.0 + i % 3, "storage": 1.0} for i in range(8)]
    with ElasticCluster(A, L=L, S=S, machines=ms, field=F, time_scale=0.02,
                        deadline=None) as c:
        yield A, c


@pytest.mark.parametrize("policy", ["usctec", "cyclic", "uncoded", "speculative"])
@pytest.mark.parametrize("r", [1, 2, 8, 5])
def test_products_are_counted_exactly(clusters, policy, r):
    A, c = clusters
    rng = np.random.default_rng(r)
    B = F.random((8,) if r == 1 else (8, r), rng)
    Y = c.multiply(B, policy=policy)
    want = F.matmul(A, B[:, None])[:, 0] if r == 1 else F.matmul(A, B)
    assert np.array_equal(Y, want)
    rep = c.reports[-1]
    L_step, S_step, pad = step_code(policy, L, S, r)
    assert rep.code == (L_step, S_step) and rep.plan.L == L_step
    if r < L:
        assert pad == 0 and (L_step == r or policy in ("uncoded", "speculative"))
    # an independent count from the plan: every piece's machines each multiply its group's
    # rows by one coded block of (r + pad) / L_step columns
    cols = (r + pad) // L_step
    planned = sum(len(p.machines) * (p.rows[1] - p.rows[0]) * cols for p in rep.plan.pieces)
    assert rep.useful_products == A.shape[0] * r
    bound = (L_step + S_step) / L_step * (r + pad) / r
    assert A.shape[0] * r <= rep.products
    if not rep.backups and not rep.recovered_pieces:
        assert rep.products == planned == pytest.approx(bound * A.shape[0] * r)
    assert rep.redundancy == rep.products / rep.useful_products


def test_a_vector_costs_S_plus_one_not_L_plus_S(clusters):
    """The quickstart's shape: one column under L=4, S=2 runs L_step = 1, so every row is
    multiplied by 1 + S = 3 machines, not 6."""
    A, c = clusters
    x = F.random((8,), np.random.default_rng(9))
    c.multiply(x, policy="usctec")
    rep = c.reports[-1]
    assert rep.code == (1, S) and rep.redundancy == 3.0
