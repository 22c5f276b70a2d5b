"""A scheme added from outside the package runs through the real runtime: the toy replication
family (tests/unit/replication_family.py), registered with one line, on real Ray actors in one
shared session: exact products in GF(p), a machine crashing mid-step and one joining."""

import pathlib
import sys

import numpy as np
import pytest

from elastic_coded.algebra import field
from elastic_coded.churn import StepEvents
from elastic_coded.runtime import ElasticCluster

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "unit"))
import replication_family as rf  # noqa: E402

pytestmark = pytest.mark.ray

F = field("gf(65521)")


@pytest.fixture(scope="module")
def copies(ray_session):
    ray_session.cloudpickle.register_pickle_by_value(rf)  # the controller learns the family
    rf.register()
    yield rf
    rf.unregister()


def test_the_toy_family_multiplies_through_the_runtime(copies):
    rng = np.random.default_rng(0)
    A = F.random((40, 6), rng)
    with ElasticCluster(A, "replication", machines=3, field="gf(65521)") as c:
        for step in range(3):
            B = F.random((6, 2), rng)
            ev = StepEvents(crash=("m1",)) if step == 1 else None
            assert np.array_equal(c.multiply(B, events=ev), F.matmul(A, B)), f"step {step}"
        c.add_machines([{"id": "m9"}])
        B = F.random((6, 1), rng)
        assert np.array_equal(c.multiply(B), F.matmul(A, B))
        r = c.reports[-1]
        assert r.policy == "replication" and len(r.decoded_by[0]) == 1
        assert set(c.placement()) >= {"m0", "m2", "m9"}
        crashed = c.reports[1]
        assert "m1" in crashed.failed + crashed.crashed and "m1" not in c.machines()
