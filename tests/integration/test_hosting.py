"""Several machines in one worker process, on real Ray actors: each machine lives and dies on
its own (a crash or a departure ends the machine, never its neighbours), its calls are
cancelled and fail like a dead actor's, a process stops once its last machine is gone, and a
cluster sharing processes stays exact through crashes, departures and joins."""

import time

import numpy as np
import pytest
import ray

from elastic_coded.algebra import field
from elastic_coded.churn import Join, StepEvents
from elastic_coded.runtime import ElasticCluster
from elastic_coded.runtime.hosting import HostPool, MachineHandle, kill
from elastic_coded.schemes.wire import Call, TaskSpec

pytestmark = pytest.mark.ray

P = 65521
F = field(f"gf({P})")


def _place(pool, machine, time_scale):
    h, ready = pool.place(machine, None, F, 1.0, time_scale)
    ray.get(ready)
    return h


def _store(h, A):
    return ray.get(h.store_chunks.remote("A", [(0, A.shape[0])], [0], A))


def _call(rows, step=0, **kw):
    return Call(step, (TaskSpec("A", (0, rows), 0, None, 0, 0),), rows * 2, **kw)


def _alive(host) -> bool:
    try:
        ray.get(host.hosted.remote(), timeout=10)
        return True
    except ray.exceptions.RayActorError:
        return False


def test_machines_share_processes_and_die_alone(ray_session):
    pool = HostPool(2)
    hs = {f"m{i}": _place(pool, f"m{i}", 0.0) for i in range(5)}
    assert len(pool.hosts) == 3 and len({h.host._actor_id for h in hs.values()}) == 3
    A = np.arange(6 * 3, dtype=np.int64).reshape(6, 3) % P
    B = np.ones((3, 2), dtype=np.int64)
    for h in hs.values():
        assert _store(h, A) == 6
    kill(hs["m0"])  # m0 and m1 share a process: m1 lives on
    # kill() does not wait, and an async actor may start a later call first: wait for it
    deadline = time.time() + 20
    while "m0" in ray.get(hs["m0"].host.hosted.remote()) and time.time() < deadline:
        time.sleep(0.05)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(hs["m0"].compute.remote(_call(6), B))
    out = ray.get(hs["m1"].compute.remote(_call(6), B))
    assert out.machine == "m1" and np.array_equal(out.results[0], F.matmul(A, B))
    assert ray.get(hs["m1"].host.hosted.remote()) == ("m1",)
    # a departure ends the machine, not the process
    ray.get(hs["m2"].exit.remote())
    with pytest.raises(ray.exceptions.ActorDiedError):
        ray.get(hs["m2"].ping.remote())
    assert ray.get(hs["m3"].ping.remote())["id"] == "m3"
    # the last machine of a process released: the process stops
    host = hs["m1"].host
    pool.release("m0")
    assert _alive(host)
    pool.release("m1")
    deadline = time.time() + 20
    while _alive(host) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(host) and len(pool.hosts) == 2
    pool.stop_all()


def test_a_machines_calls_are_cancelled_and_a_crash_fails_them_at_once(ray_session):
    pool = HostPool(3)
    a = _place(pool, "a", 20.0)  # paced: a call takes 20 s
    b = _place(pool, "b", 20.0)
    A = np.arange(4 * 3, dtype=np.int64).reshape(4, 3)
    B = np.ones((3, 1), dtype=np.int64)
    _store(a, A), _store(b, A)
    ref = a.compute.remote(_call(4), B)
    time.sleep(0.5)
    ray.cancel(ref)
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(ref, timeout=10)
    ref_b = b.compute.remote(_call(4), B)
    time.sleep(0.5)
    t0 = time.perf_counter()
    kill(b)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(ref_b, timeout=10)
    assert time.perf_counter() - t0 < 5
    assert ray.get(a.ping.remote())["id"] == "a"  # its neighbour answers
    pool.stop_all()


def test_handles_cross_actor_boundaries(ray_session):
    pool = HostPool(2)
    h = _place(pool, "x", 0.0)

    @ray.remote
    def ping_from_a_task(handle: MachineHandle):
        return ray.get(handle.ping.remote())["id"]

    assert ray.get(ping_from_a_task.remote(h)) == "x"
    with pytest.raises(AttributeError):
        _ = h.not_a_method
    pool.stop_all()


def test_cluster_sharing_processes_is_exact_through_churn(ray_session):
    rng = np.random.default_rng(2)
    A = F.random((72, 5), rng)
    ms = [{"id": f"m{i}", "speed": 1.0 + i % 3, "storage": 1.0} for i in range(7)]
    with ElasticCluster(A, "usctec", L=2, S=2, machines=ms, field=F, time_scale=0.1,
                        machines_per_process=3) as c:
        assert len({h.host._actor_id for h in c._handles.values()}) == 3
        events = [StepEvents(), StepEvents(crash=("m1",)), StepEvents(leave=("m4",)),
                  StepEvents(join=(Join("m7", 2.0, 1.0),)), StepEvents(crash=("m2",))]
        for ev in events:
            B = F.random((5, 4), rng)
            assert np.array_equal(c.multiply(B, events=ev), F.matmul(A, B))
        assert set(c.machines()) == {"m0", "m3", "m5", "m6", "m7"}
        alive = [m for m in c.machines() if ray.get(c._handles[m].ping.remote())]
        assert len(alive) == 5


def test_one_ping_answers_for_every_machine_of_a_process(ray_session):
    """The controller pings a process once for all its machines: a crashed one is dead, the
    others answer with their node and rows; a process that is gone is dead for all."""
    import asyncio

    from elastic_coded.runtime.health import ping_process

    pool = HostPool(3)
    hs = {f"m{i}": _place(pool, f"m{i}", 0.0) for i in range(3)}
    host = hs["m0"].host
    _store(hs["m1"], np.ones((4, 2), dtype=np.int64))
    # kill() does not wait, and an async actor may serve the ping first: wait for the crash
    ray.get(hs["m2"].host.crash.remote("m2"))
    got = asyncio.run(ping_process(host, ("m0", "m1", "m2", "never"), 10.0))
    assert got["m2"] == ("dead", False) and got["never"] == ("dead", False)
    assert got["m0"][0] == got["m1"][0] == "ok" and got["m1"][1]["rows"] == 4
    assert got["m0"][1]["node"] == ray.get_runtime_context().get_node_id()
    ray.kill(host)  # the process itself is gone: "gone" (its machines may be restarted)
    # ray.kill only asks; a ping sent at once can still be served, so wait for the death
    deadline = time.monotonic() + 20.0
    got = asyncio.run(ping_process(host, ("m0", "m1"), 10.0))
    while got["m0"][0] == "ok" and time.monotonic() < deadline:
        time.sleep(0.1)
        got = asyncio.run(ping_process(host, ("m0", "m1"), 10.0))
    assert got == {"m0": ("gone", False), "m1": ("gone", False)}
