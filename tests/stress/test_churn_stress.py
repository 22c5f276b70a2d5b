"""110 steps under a seeded random churn script: leaves, joins, crashes mid-step, stragglers.
Every step equals A @ B exactly in GF(p); no step is lost; every row keeps L+S holders."""

import numpy as np
import pytest

from elastic_coded.algebra import field, relative_error
from elastic_coded.churn import parse_churn
from elastic_coded.runtime import ElasticCluster

pytestmark = [pytest.mark.ray, pytest.mark.stress]

CHURN = {
    "seed": 3,
    "events": [{"step": 5, "crash": ["m0", "m1", "m2"]}],  # > S losses in one step
    "random": {"leave": 0.06, "crash": 0.06, "join": 0.15, "stragglers": 2, "factor": 5,
               "join_speed": [1, 3], "join_storage": 0.8, "min_machines": 7},
}


@pytest.mark.parametrize("spec, steps", [("gf(2147483647)", 110), ("real", 30)])
def test_random_churn(ray_session, spec, steps):
    F = field(spec)
    rng = np.random.default_rng(0)
    A = F.random((96, 16), rng)
    ms = [{"id": f"m{i}", "speed": 1.0 + (i % 4) * 0.5, "storage": 0.8} for i in range(10)]
    K = 5
    with ElasticCluster(A, "usctec", L=3, S=2, machines=ms, field=F, time_scale=0.02,
                        churn=parse_churn(CHURN), seed=1) as c:
        for step in range(steps):
            B = F.random((16, 3), rng)
            Y = c.multiply(B)
            if F.exact:
                assert np.array_equal(Y, F.matmul(A, B)), f"step {step}"
            else:
                assert relative_error(Y, A @ B) <= 1e-9, f"step {step}"
            # the step ran on a repaired placement: every piece on L+S machines storing its
            # rows; only this step's crashes (repaired before the next step) took copies away
            r = c.reports[-1]
            assert all(len(p.machines) == K for p in r.plan.pieces), f"step {step}"
            lost = len(set(r.failed) | set(r.crashed))
            assert min(c.placement().holders_present(c.machines())) >= K - lost, f"step {step}"
        assert len(c.reports) == steps  # no step lost
        s = c.summary()
        # the script really churned
        least = 3 if steps >= 100 else 1
        assert s["crashes"] >= least and s["joins"] >= least and s["leaves"] >= least
        assert s["stragglers"] > steps
