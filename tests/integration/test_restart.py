"""A worker process killed (SIGKILL) while its node lives: its machines fail the step they die
in, which is still exact, and come back in a fresh process within a few steps, their storage
loaded again; restarts per machine are bounded, and a machine crashed on purpose stays gone."""

import os
import signal
import time

import numpy as np
import pytest

from elastic_coded import ElasticCluster
from elastic_coded.algebra.fields import field

pytestmark = pytest.mark.ray

P = 65521
F = field(P)


def _pid(c, machine):
    import ray

    host = c._handles[machine].host
    return int(ray.get(host.__ray_call__.remote(lambda self: os.getpid())))


def _exact(c, A, B):
    return np.array_equal(np.asarray(c.multiply(B)), F.matmul(A, B))


def _kill_process_of(c, machine):
    pid = _pid(c, machine)
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 10
    while time.time() < deadline:  # gone before the next step (no race with its calls)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _steps_until_back(c, A, B, machines, limit=5):
    for n in range(1, limit + 1):
        assert _exact(c, A, B)
        if set(machines) <= set(c.machines()):
            return n
    return None


def test_a_killed_process_comes_back_with_its_machines(ray_session):
    rng = np.random.default_rng(0)
    A = F.random((64, 6), rng)
    B = F.random((6, 3), rng)
    # allow_lower_S: on a loaded host the dead process's machines may first be dropped as
    # slow (a ping timed out) and come back steps later; in between 4 of 8 are present, fewer
    # than L+S = 5, and a step would be refused (ShortOfMachines) rather than run with S = 1
    with ElasticCluster(A, "usctec", 8, L=3, S=2, field=P,
                        run={"time_scale": 0.05, "allow_lower_S": True},
                        ray={"machines_per_process": 4}) as c:
        assert _exact(c, A, B)
        all_machines = c.machines()
        host = c._handles["m0"].host
        sharing = [m for m in all_machines if c._handles[m].host == host]
        assert len(sharing) == 4
        _kill_process_of(c, "m0")
        # the step the process is found dead in is exact (its 4 machines fail: L+S-4 = 1 left
        # of the 5 a row needs at most, so the step decodes from the other process)
        assert _exact(c, A, B)
        seen = [r for r in c.reports if set(r.failed) | set(r.left)]
        assert seen and set(sharing) <= set(seen[-1].failed) | set(seen[-1].left)
        # within 5 steps alone; on a loaded host a ping of the dead process may time out
        # ("slow") before its death is seen, so allow more steps there
        n = _steps_until_back(c, A, B, sharing, limit=20)
        seen = [(r.failed, r.left, r.restarted, r.not_restarted) for r in c.reports]
        assert n is not None, f"not back within 20 steps: {c.machines()}; reports: {seen}"
        # a machine restarted mid-step is not dropped again by the step's later failed calls
        # to its old process (each leaves once)
        assert all(len(set(r.left)) == len(r.left) for r in c.reports), seen
        assert sorted(c.machines()) == sorted(all_machines)
        for _ in range(5):  # a machine back after a step's start is reported by the next
            restarted = [m for r in c.reports for m in r.restarted]
            if sorted(restarted) == sorted(sharing):
                break
            assert _exact(c, A, B)
        assert sorted(restarted) == sorted(sharing)
        assert all(c._handles[m].host != host for m in sharing)  # a fresh process
        for _ in range(3):
            assert _exact(c, A, B)


def test_a_failed_call_to_the_old_process_does_not_drop_a_machine_restarted_mid_step(
        ray_session):
    # the race a step can hit: its first failed call shows the process dead and restarts its 3
    # machines at once; the failures of its other calls to the dead process come after, and
    # name machines that are back in the fresh process
    rng = np.random.default_rng(2)
    A = F.random((48, 5), rng)
    B = F.random((5, 2), rng)
    with ElasticCluster(A, "usctec", 6, L=2, S=1, field=P, run={"time_scale": 0.02},
                        ray={"machines_per_process": 3}) as c:
        assert _exact(c, A, B)
        host = c._handles["m0"].host
        sharing = [m for m in c.machines() if c._handles[m].host == host]
        _kill_process_of(c, "m0")
        c._ctrl("mark_dead", [sharing[0]])        # the first failure: all 3 restarted
        c._ctrl("recover", [], [sharing[1]])      # a later one, from a call to the old process
        c._ctrl("mark_dead", sorted(sharing))     # the step's end: its failed calls
        assert sorted(c.machines()) == sorted(f"m{i}" for i in range(6))
        # the driver still holds the old handles: its next step's calls to them fail (and are
        # not taken for deaths of the machines back), the step after has the fresh ones
        for _ in range(2):
            assert _exact(c, A, B)
        assert sorted(c.machines()) == sorted(f"m{i}" for i in range(6))
        assert all(c._handles[m].host != host for m in sharing)
        left = sorted(m for r in c.reports for m in r.left)
        assert left == sorted(sharing)  # once, at the restart
        assert sorted(m for r in c.reports for m in r.restarted) == sorted(sharing)


def test_restarts_are_bounded_and_a_scripted_crash_is_not_restarted(ray_session):
    rng = np.random.default_rng(1)
    A = F.random((40, 5), rng)
    B = F.random((5, 2), rng)
    with ElasticCluster(A, "usctec", 6, L=2, S=1, field=P, run={"time_scale": 0.02},
                        ray={"machines_per_process": 1, "max_restarts": 1}) as c:
        assert _exact(c, A, B)
        _kill_process_of(c, "m1")
        assert _exact(c, A, B)
        assert _steps_until_back(c, A, B, ["m1"]) is not None
        _kill_process_of(c, "m1")  # a second death: past max_restarts=1, it stays removed
        for _ in range(4):
            assert _exact(c, A, B)
        assert "m1" not in c.machines()
        refused = [w for r in c.reports for w in r.not_restarted]
        assert [m for m, _ in refused] == ["m1"] and "died 2 times" in refused[0][1]
        # a crash on purpose (the process lives on, hosting no machine) is not restarted
        Y = c.multiply(B, events={"crash": "m2"})
        assert np.array_equal(np.asarray(Y), F.matmul(A, B))
        for _ in range(3):
            assert _exact(c, A, B)
        assert "m2" not in c.machines()
        assert not any("m2" in r.restarted for r in c.reports)
