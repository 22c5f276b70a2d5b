import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=20, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray session per test module (starting Ray costs seconds).  ``address="local"``
    always starts a fresh one, even when another Ray runs on the machine."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


# the longest files start first, so that under xdist (-n 2 --dist loadfile) no worker is left
# running one of them alone at the end (the quick benchmarks alone take about 4 minutes)
SLOW_FIRST = ("integration/test_benchmarks_quick.py", "integration/test_deploy.py",
              "stress/test_soak.py", "stress/test_fault_soak.py", "integration/test_unified_ray.py")


def pytest_collection_modifyitems(items):
    def rank(item):
        path = item.nodeid.split("::")[0]
        return next((i for i, name in enumerate(SLOW_FIRST) if path.endswith(name)),
                    len(SLOW_FIRST))

    items.sort(key=rank)  # stable: the order within a file is kept


@pytest.fixture
def coded_layouts(monkeypatch):
    """Each coded pull step's ``(lag_s it was given, its queue)``, in order, as
    ``pull_step.layout`` makes them (the runtime's executor and the simulator both call it)."""
    from elastic_coded.families.usctec import pull as pl
    from elastic_coded.families.usctec import pull_step as ps

    seen, real = [], ps.layout

    def layout(*args, **kw):
        sub, q = real(*args, **kw)
        if isinstance(q, pl.CodedQueue):
            seen.append((q.lag_s, q))
        return sub, q

    monkeypatch.setattr(ps, "layout", layout)
    return seen


@pytest.fixture
def queue_call_times(monkeypatch):
    """Each call a coded pull queue was told had finished, in order: ``(machine, its
    products, the time the queue was given for it)`` (the runtime's executor and the simulator
    both tell it through ``CodedQueue.finished``)."""
    from elastic_coded.families.usctec import pull as pl

    seen, real = [], pl.CodedQueue.finished

    def finished(self, m, key, now, elapsed):
        work = sum(self.products[r.unit] for r in self.running.get(m, []) if r.key == key)
        seen.append((m, work, elapsed))
        return real(self, m, key, now, elapsed)

    monkeypatch.setattr(pl.CodedQueue, "finished", finished)
    return seen
