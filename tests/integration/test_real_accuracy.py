"""Never a wrong number in the reals, on real Ray: USCTEC at ``(L, S) = (20, 12)`` on 36
machines with six stragglers a step, with the defaults (the rotation code, the 1e-9
tolerance).  Every product returned is within 1e-9 of ``A @ B``, or the step raised."""

import numpy as np
import pytest

from elastic_coded.churn import StepEvents
from elastic_coded.runtime import ElasticCluster
from elastic_coded.runtime.verifying import ToleranceExceeded

pytestmark = pytest.mark.ray

IDS = [f"m{i}" for i in range(36)]


def test_usctec_20_12_never_returns_a_product_off_by_more_than_1e9(ray_session):
    rng = np.random.default_rng(20)
    A = rng.standard_normal((720, 64))
    ms = [{"id": m, "speed": 1.0 + i % 4, "storage": 1.0} for i, m in enumerate(IDS)]
    worst, returned, raised = 0.0, 0, 0
    with ElasticCluster(A, "usctec", L=20, S=12, machines=ms, time_scale=0.01,
                        deadline=None, machines_per_process=6) as c:
        for _step in range(4):
            B = rng.standard_normal((64, 40))
            slow = rng.choice(IDS, size=6, replace=False)
            try:
                Y = c.multiply(B, events=StepEvents(slow={m: 8.0 for m in slow}))
            except ToleranceExceeded:
                raised += 1
                continue
            returned += 1
            rel = np.linalg.norm(Y - A @ B) / np.linalg.norm(A @ B)
            worst = max(worst, rel)
            r = c.reports[-1]
            assert r.code == (20, 12) and r.verified
            assert r.relative_estimated_error <= 1e-9
    assert returned >= 1 and worst <= 1e-9, (worst, returned, raised)
