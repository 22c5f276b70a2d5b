"""A machine's life inside its worker process (called directly, no Ray session): a crash, a
kill or a departure ends the machine, not the process; its rows go, and every call of it,
running or later, raises ``MachineDied``, which callers catch as a dead actor's error."""

import asyncio
import pickle
import time

import numpy as np
import pytest
import ray

from elastic_coded.runtime.worker import Machine, MachineDied
from elastic_coded.schemes.wire import Call, TaskSpec

P = "gf(65521)"


def _run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


def _machine(time_scale=0.0):
    m = Machine("m0", P, speed=1.0, time_scale=time_scale)
    A = np.arange(8 * 3, dtype=np.int64).reshape(8, 3)
    _run(m.store_chunks("A", [(0, 8)], [0], A))
    return m, A


def _call(step=0, **kw):
    return Call(step, (TaskSpec("A", (0, 8), 0, None, 0, 0),), 8 * 2, **kw)


def test_machine_died_is_a_dead_actors_error_and_survives_pickling():
    err = MachineDied("m3", None, "crashed")
    assert isinstance(err, ray.exceptions.ActorDiedError)
    assert isinstance(err, ray.exceptions.RayActorError) and err.preempted is False
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is MachineDied and back.machine == "m3" and "m3" in str(back)


def test_a_scripted_crash_raises_and_every_later_call_raises():
    m, A = _machine()
    B = np.ones((3, 2), dtype=np.int64)
    out = _run(m.compute(_call(), B))
    assert np.array_equal(out.results[0], (A @ B) % 65521)
    with pytest.raises(MachineDied, match="'m0' crashed"):
        _run(m.compute(_call(1, crash_at=0.5), B))
    assert m.dead == "crashed" and m.stored_rows() == 0  # its rows are gone
    for later in (m.compute(_call(2), B), m.ping()):
        with pytest.raises(MachineDied):
            _run(later)


def test_a_dead_machines_error_outside_ray_starts_no_ray(monkeypatch):
    """The error names the actor the machine runs in; outside Ray there is none, and asking
    Ray's runtime context would start Ray (or wait on the GCS of a cluster the host ran
    before: this hung the suite once)."""
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "get_runtime_context",
                        lambda: pytest.fail("asked Ray's runtime context outside Ray"))
    m, _ = _machine()
    m.die()
    err = m.died_error()
    assert err.machine == "m0" and "crashed" in str(err)


def test_die_interrupts_a_paced_call_at_once():
    m, _ = _machine(time_scale=30.0)  # the call would take 30 s
    B = np.ones((3, 2), dtype=np.int64)

    async def scenario():
        task = asyncio.ensure_future(m.compute(_call(), B))
        await asyncio.sleep(0.2)
        t0 = time.perf_counter()
        m.die()
        with pytest.raises(MachineDied):
            await task
        return time.perf_counter() - t0

    assert _run(scenario()) < 1.0


def test_departure_ends_the_machine_as_left():
    m, _ = _machine()
    _run(m.exit())
    assert m.dead == "left"
    with pytest.raises(MachineDied, match="'m0' left"):
        _run(m.keep_only("A", [(0, 2)]))
