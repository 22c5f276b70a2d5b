"""The simulator's two-level step (:mod:`elastic_coded.sim.cost`, ``RuntimeCost.group``):
machines grouped under agents, the driver talking to agents only.  Hand-worked examples of the
agents' messages, the invariants of the message model (Hypothesis), and whole simulations:
free agents cost nothing beyond the pure compute, and at a size where the driver is the
bottleneck the two levels cost less than one."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_coded.errors import ArgumentError
from elastic_coded.sim import IIDStragglers, LinearSpeeds, RuntimeCost, simulate
from elastic_coded.sim.cost import (
    agent_messages,
    agents_of,
    dispatch_offsets,
    two_level_finish,
)


def _cost(**kw):
    base = {"step_s": 0.0, "plan_s": 0.0, "call_s": 0.001, "round_trip_s": 0.002,
            "worker_call_s": 0.0, "agent_take_s": 0.001, "group": 2}
    return RuntimeCost(**{**base, **kw})


def test_a_busy_driver_gets_fewer_fuller_messages():
    c = _cost()
    # agent 0: results at 1.000, 1.000, 1.000; agent 1: one at 1.000
    f = np.array([1.0, 1.0, 1.0, 1.0])
    ag = np.array([0, 0, 0, 1])
    # agent 0 takes them in at 1.001, 1.002, 1.003 and sends its first at 1.001 (driver:
    # 1.003); agent 1's (in at 1.001) is taken 1.003-1.005; agent 0's second leaves at 1.003
    # with the two results in by then (driver 1.005-1.007)
    d, messages = agent_messages(f, ag, c)
    assert messages == 3 and d == pytest.approx(1.007)
    # merge_s is paid per result a message carries
    d2, m2 = agent_messages(f, ag, _cost(merge_s=0.0005))
    assert m2 == 3 and d2 == pytest.approx(1.007 + 4 * 0.0005)


def test_the_steps_end_waits_for_the_last_result_to_reach_the_driver():
    c = _cost()
    f = np.array([0.5, 2.0, np.inf, 0.7])
    # the last needed result came at 0.7: only those by then count, 0.5 (agent 0) and 0.7
    # (agent 1), and the step ends when the latter reached the driver
    end, messages = two_level_finish(f, 0.7, agents_of(np.ones(4, bool), 2), c)
    assert messages == 2 and end == pytest.approx(0.7 + 0.001 + 0.002)
    assert two_level_finish(np.array([np.inf]), 1.0, np.array([0]), c) == (1.0, 0)


def test_dispatch_and_step_cost_on_two_levels():
    c = _cost(agent_call_s=0.0005, worker_call_s=0.0001, machine_s=0.01)
    has = np.array([True, False, True, True])
    # the machines with work in plan order, two to an agent: (agent, place) = (0, 0), (0, 1),
    # (1, 0); the agent's call, then its calls to its machines in turn, then the worker's own
    want = [0.001 + 0.0005 + 0.0001, 0.0, 0.001 + 0.001 + 0.0001, 0.002 + 0.0005 + 0.0001]
    assert dispatch_offsets(has, c) == pytest.approx(want)
    assert agents_of(has, 2).tolist() == [0, -1, 0, 1]
    # machine_s: once per agent on the driver, per machine of one agent in the agents
    assert c.step_cost(5) == pytest.approx((3 + 2) * 0.01)
    one = RuntimeCost(machine_s=0.01)
    assert one.step_cost(5) == pytest.approx(one.fixed_s + 0.05)


def test_two_level_takes_the_one_level_figures_to_the_agents():
    c = RuntimeCost(call_s=0.003, round_trip_s=0.004).two_level(16, merge_s=0.0001)
    assert (c.group, c.agent_call_s, c.agent_take_s, c.merge_s) == (16, 0.003, 0.004, 0.0001)
    with pytest.raises(ArgumentError, match=r"^group: an int >= 0, got -1"):
        RuntimeCost(group=-1)
    with pytest.raises(ArgumentError, match=r"^merge_s: seconds"):
        RuntimeCost(merge_s=math.nan)


@given(st.lists(st.tuples(st.floats(0, 5), st.integers(0, 3)), min_size=1, max_size=30),
       st.floats(0, 0.01), st.floats(0, 0.01), st.floats(0, 0.01))
def test_messages_carry_every_result_once_and_the_driver_serves_them_in_turn(
        items, take, rt, merge):
    f = np.array([x for x, _ in items])
    ag = np.array([a for _, a in items])
    c = _cost(agent_take_s=take, round_trip_s=rt, merge_s=merge)
    d, messages = agent_messages(f, ag, c)
    agents = len(set(ag.tolist()))
    assert agents <= messages <= len(items)
    # every message and every result costs the driver its share, one after another
    assert d >= messages * rt + len(items) * merge - 1e-9
    # and the last result is in no sooner than its agent took it in and one message after
    assert d >= float(f.max()) + take + rt - 1e-9


def _sim(N, cost, policies=("usctec", "usctec-pull", "usctec-auto")):
    ts = 0.357 * sum(1.0 + 3.0 * i / (N - 1) for i in range(N))
    return simulate(N, 4, L=4, S=2, policies=policies, baseline=None, seed=3,
                    speeds=LinearSpeeds(1.0, 4.0), delays=IIDStragglers(p=0.05, factor=5),
                    time_scale=ts, deadline=3.0, learn_speeds=True, cost=cost,
                    design_samples=2, storage=min(1.0, 18 / N))


def test_free_agents_cost_nothing_beyond_the_pure_compute():
    free = RuntimeCost(step_s=0, call_s=0, round_trip_s=0, plan_s=0, worker_call_s=0, group=4)
    pure, two = _sim(24, None), _sim(24, free)
    for p in ("usctec", "usctec-pull", "usctec-auto"):
        assert np.allclose(two.times[p], pure.times[p], rtol=1e-9, atol=1e-12), p


def test_where_the_driver_is_the_bottleneck_two_levels_cost_less():
    one = RuntimeCost(round_trip_s=0.002, call_s=0.001, machine_s=0.0005, decide_s=4e-5)
    two = one.two_level(16)
    a, b = _sim(240, one), _sim(240, two)
    for p in ("usctec", "usctec-pull"):
        assert np.median(b.times[p]) < np.median(a.times[p]), p
    msgs = b.details["usctec-pull"]["messages"]
    assert (msgs > 0).all() and (msgs < b.details["usctec-pull"]["calls"]).all()
