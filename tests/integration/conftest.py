import pytest


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray session per test module (starting Ray costs seconds)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
