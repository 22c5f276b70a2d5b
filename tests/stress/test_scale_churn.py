"""96 emulated machines (8 to a worker process) through a crash mid-step, a graceful leave and a
join, under every USCTEC-family execution (whole, pulled, and the default's choice): every step
equals A @ B exactly in GF(p), the crashed machine's work is recovered in its step, and the
membership follows the events."""

import numpy as np
import pytest

from elastic_coded.algebra import field
from elastic_coded.runtime import ElasticCluster

pytestmark = [pytest.mark.ray, pytest.mark.stress]

M = 96
F = field("gf(p)")


def test_96_machines_through_a_crash_a_leave_and_a_join(ray_session):
    rng = np.random.default_rng(5)
    A = F.random((100 * M // 8, 16), rng)
    ms = [{"id": f"m{i}", "speed": 1.0 + (i % 4), "storage": 0.6} for i in range(M)]
    with ElasticCluster(A, "usctec-auto", ms, L=4, S=2, field=F,
                        run={"time_scale": 0.05, "seed": 2},
                        ray={"machines_per_process": 8}) as c:
        script = [("usctec", {}), ("usctec", {"crash": "m7"}), ("usctec-pull", {"crash": "m21"}),
                  ("usctec-auto", {"leave": "m30"}),
                  ("usctec-auto", {"join": {"id": "spot1", "speed": 2.0, "storage": 0.6}}),
                  ("usctec-pull", {}), ("usctec", {})]
        for k, (policy, ev) in enumerate(script):
            B = F.random((16, 8), rng)
            Y = c.multiply(B, policy=policy, events=ev)
            assert np.array_equal(Y, F.matmul(A, B)), f"step {k} ({policy}, {ev})"
            r = c.reports[-1]
            if "crash" in ev:
                assert ev["crash"] in r.failed or ev["crash"] in r.crashed, (k, r.failed)
                assert ev["crash"] not in c.machines()
        present = set(c.machines())
        assert len(present) == M - 3 + 1
        assert {"m7", "m21", "m30"}.isdisjoint(present) and "spot1" in present
        assert "spot1" in c.reports[-1].plan.available
