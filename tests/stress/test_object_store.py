"""Object-store pressure: an ``A`` of twice the object store's size (Ray started with a small
``object_store_memory``) is stored, through Ray's spilling to disk, and every product is right;
a machine joining afterwards loads its rows the same way."""

import numpy as np
import pytest

from elastic_coded import ElasticCluster

pytestmark = [pytest.mark.ray, pytest.mark.stress, pytest.mark.slow]

STORE = 80 << 20  # bytes: about Ray's smallest object store


@pytest.fixture(scope="module")
def small_store():
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=STORE)
    yield ray
    ray.shutdown()


def _spilled_mib(ray) -> float:
    from ray._private.internal_api import memory_summary

    address = ray.get_runtime_context().gcs_address
    for line in memory_summary(address=address, stats_only=True).splitlines():
        if line.strip().startswith("Spilled"):
            return float(line.split()[1])
    return 0.0


def test_an_A_twice_the_object_store_runs_through_spilling(small_store):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((21_000, 1_000))  # 168 MB: twice the store
    assert A.nbytes >= 2 * STORE
    B = rng.standard_normal((1_000, 3))
    want = A @ B
    with ElasticCluster(A, "usctec", 4, L=2, S=1, run={"time_scale": 0.0},
                        ray={"machines_per_process": 1}) as c:
        for _ in range(3):
            assert np.allclose(c.multiply(B), want, rtol=1e-10, atol=1e-10)
        c.add_machines([{"id": "late", "speed": 1.0}])
        for _ in range(2):
            assert np.allclose(c.multiply(B), want, rtol=1e-10, atol=1e-10)
        assert "late" in c.machines()
        assert _spilled_mib(small_store) > 0  # the store really ran out and spilled
