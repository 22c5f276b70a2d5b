"""Real node churn on a multi-node Ray cluster on one machine: machines="auto" keeps one worker
per node, a node removed in the middle of a step is a departure, a node added is planned in."""

import threading
import time

import numpy as np
import pytest

from elastic_coded.algebra import field

pytestmark = [pytest.mark.ray, pytest.mark.stress]


@pytest.fixture(scope="module")
def multi_node():
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1,
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3,
                           "health_check_initial_delay_ms": 0}})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(4)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    yield cluster, nodes
    ray.shutdown()
    cluster.shutdown()


def test_nodes_leave_mid_step_and_join(multi_node):
    from elastic_coded.runtime import ElasticCluster

    cluster, nodes = multi_node
    F = field("gf(65521)")
    rng = np.random.default_rng(0)
    A = F.random((60, 8), rng)
    with ElasticCluster(A, L=2, S=1, machines="auto", field=F, time_scale=2.0,
                        learn_speeds=False, health_interval=0.5) as c:
        assert len(c.machines()) == 5  # head + 4 nodes, one worker each
        B = F.random((8, 2), rng)
        assert np.array_equal(c.multiply(B), F.matmul(A, B))

        # remove a node while a step runs
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("Y", c.multiply(B)))
        t.start()
        time.sleep(0.3)
        cluster.remove_node(nodes[0])
        t.join(timeout=120)
        assert not t.is_alive()
        assert np.array_equal(out["Y"], F.matmul(A, B))

        # the dead node's worker is gone by the next steps, and every step stays exact
        deadline = time.time() + 60
        while len(c.machines()) != 4 and time.time() < deadline:
            assert np.array_equal(c.multiply(B), F.matmul(A, B))
        assert len(c.machines()) == 4
        gone = set(c.reports[0].available) - set(c.machines())
        assert len(gone) == 1  # the removed node's worker, detected dead (mid-step or after)
        assert gone <= {m for rep in c.reports for m in rep.failed + rep.left}

        # a node joins: the runtime gives it a worker and storage and plans it in
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        deadline = time.time() + 60
        while time.time() < deadline:
            assert np.array_equal(c.multiply(B), F.matmul(A, B))
            if len(c.reports[-1].available) == 5:
                break
        r = c.reports[-1]
        assert len(r.available) == 5
        joined = [m for rep in c.reports for m in rep.joined]
        assert joined and any(m in r.available for m in joined)
        assert sum(rep.rows_moved for rep in c.reports) > 0


def test_controller_lives_on_the_drivers_node(multi_node):
    """Removing any other node must never take the controller (and the workers it owns) along."""
    import ray
    from ray.util.state import get_actor

    from elastic_coded.runtime import ElasticCluster

    F = field("gf(65521)")
    A = F.random((20, 4), np.random.default_rng(1))
    with ElasticCluster(A, L=2, S=1, machines="auto", field=F, time_scale=0.01) as c:
        info = get_actor(c.controller._actor_id.hex())
        assert info.node_id == ray.get_runtime_context().get_node_id()


@pytest.mark.parametrize("policy", ["unified", "hetero"])
def test_unified_and_hetero_survive_a_node_removed_mid_step(multi_node, policy):
    """One worker per node; a node removed while a step runs: that step and every later one is
    exact, and the storage is re-planned for the machines left."""
    from elastic_coded.runtime import ElasticCluster

    cluster, _ = multi_node
    F = field("gf(65521)")
    rng = np.random.default_rng(2)
    if policy == "unified":
        A = F.random((24, 6), rng)
        kw = {"mu": "1/2", "q": 2, "N": 2}
        B = F.random((6, 2), rng)
        want = [F.matmul(A, B)]
    else:
        A = [F.random((20, 6), rng), F.random((16, 6), rng)]
        kw = {}
        B = [F.random((6, 1), rng), F.random((6, 2), rng)]
        want = [F.matmul(a, b) for a, b in zip(A, B)]

    def exact(Y):
        return all(np.array_equal(y, w) for y, w in zip(Y if policy == "hetero" else [Y], want))

    node = cluster.add_node(num_cpus=1)  # the node this test removes
    cluster.wait_for_nodes()
    with ElasticCluster(A, policy, machines="auto", field=F, time_scale=1.0,
                        learn_speeds=False, health_interval=0.5, **kw) as c:
        before = len(c.machines())
        assert exact(c.multiply(B))
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("Y", c.multiply(B)))
        t.start()
        time.sleep(0.3)
        cluster.remove_node(node)
        t.join(timeout=120)
        assert not t.is_alive() and exact(out["Y"])
        deadline = time.time() + 60
        while len(c.machines()) != before - 1 and time.time() < deadline:
            assert exact(c.multiply(B))
        assert len(c.machines()) == before - 1
        for _ in range(2):
            assert exact(c.multiply(B))
        assert before - 1 == len(c.reports[-1].available)


def _node_of(c, machine):
    return c._specs[machine].node  # the driver's copy of the machine's spec (auto: its node)


def _step_while(c, B, action, wait_s=0.3):
    """Run a step in a thread and ``action()`` while it runs; returns the step's product."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("Y", c.multiply(B)))
    t.start()
    time.sleep(wait_s)
    action()
    t.join(timeout=120)
    assert not t.is_alive()
    return out["Y"]


def test_drained_node_is_planned_out_and_a_preempted_one_is_not_a_failure(multi_node):
    """A node drained with a deadline (Ray's drain API, as for a spot preemption notice) in the
    middle of a step: its machine is planned out, its rows copied to the others, before the
    node goes; a node taken at once after its notice (the deadline already passed) while a
    step runs is reported preempted, not failed.  No step is lost and none is wrong."""
    from elastic_coded.runtime import ElasticCluster
    from elastic_coded.runtime.drain import drain_node

    cluster, _ = multi_node
    notice, sudden = cluster.add_node(num_cpus=1), cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    F = field("gf(65521)")
    rng = np.random.default_rng(3)
    A = F.random((84, 6), rng)
    B = F.random((6, 2), rng)
    want = F.matmul(A, B)
    # cyclic placement: every row on exactly L+S = 3 machines, so a machine planned out leaves
    # rows that must be copied
    with ElasticCluster(A, L=2, S=1, machines="auto", field=F, placement="cyclic",
                        time_scale=6.0, learn_speeds=False, health_interval=0.5,
                        deadline=None) as c:
        assert np.array_equal(c.multiply(B), want)
        m_notice = next(m for m in c.machines() if _node_of(c, m) == notice.node_id)
        m_sudden = next(m for m in c.machines() if _node_of(c, m) == sudden.node_id)

        # a preemption notice with 60 s to go, in the middle of a step
        assert np.array_equal(_step_while(c, B, lambda: drain_node(notice.node_id, 60)), want)
        for _ in range(4):
            assert np.array_equal(c.multiply(B), want)
            if m_notice in c.reports[-1].draining:
                break
        drained = c.reports[-1]
        assert m_notice in drained.draining and m_notice in drained.left
        assert m_notice not in drained.available and drained.rows_moved > 0
        placement = c.placement()
        assert m_notice not in placement.machines
        assert placement.min_replication() >= 3  # L+S copies of every row, on the others
        cluster.remove_node(notice)  # the node goes: nothing is lost, nothing fails
        assert np.array_equal(c.multiply(B), want)

        # a node preempted while a step runs, its notice too short to act on
        def preempt():
            drain_node(sudden.node_id, -1)
            cluster.remove_node(sudden)
        assert np.array_equal(_step_while(c, B, preempt), want)
        for _ in range(3):
            assert np.array_equal(c.multiply(B), want)
        reps = list(c.reports)
        assert m_sudden in {m for r in reps for m in r.preempted}
        assert not {m_notice, m_sudden} & {m for r in reps for m in r.failed}
        assert m_notice not in {m for r in reps[reps.index(drained):] for m in r.available}
        assert m_sudden not in c.reports[-1].available
        s = c.summary()
        assert s["drains"] >= 1 and s["preemptions"] >= 1 and s["failures"] == 0


def test_a_killed_process_on_a_live_node_comes_back_on_that_node(multi_node):
    """SIGKILL of one node's worker process (the node lives): the step it dies in is exact, and
    its machine comes back in a fresh process on the same node, its storage loaded again."""
    import os
    import signal

    import ray

    from elastic_coded.runtime import ElasticCluster

    F = field("gf(65521)")
    rng = np.random.default_rng(1)
    A = F.random((60, 8), rng)
    B = F.random((8, 2), rng)
    with ElasticCluster(A, L=2, S=1, machines="auto", field=F, run={"time_scale": 0.5},
                        ray={"health_interval": 0.5}) as c:
        assert np.array_equal(c.multiply(B), F.matmul(A, B))
        victim = sorted(c.machines())[-1]
        host = c._handles[victim].host
        node = ray.get(host.__ray_call__.remote(
            lambda self: ray.get_runtime_context().get_node_id()))
        pid = int(ray.get(host.__ray_call__.remote(lambda self: os.getpid())))
        os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        seen = []
        for _ in range(30):
            assert np.array_equal(c.multiply(B), F.matmul(A, B))
            seen.append((c.reports[-1].failed, c.reports[-1].restarted))
            if victim in c.machines() and any(victim in r.restarted for r in c.reports):
                break
        assert any(victim in r.restarted for r in c.reports), f"not restarted: {seen}"
        fresh = c._handles[victim].host
        assert fresh != host
        assert ray.get(fresh.__ray_call__.remote(
            lambda self: ray.get_runtime_context().get_node_id())) == node
        for _ in range(3):
            assert np.array_equal(c.multiply(B), F.matmul(A, B))
