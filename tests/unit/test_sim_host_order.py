"""The simulator's host takes the calls waiting for its cores in no particular order
(:func:`elastic_coded.sim.cost.host_wait`): a call that would wait ``W`` first come, first
served waits a uniform share of ``2 W``.  The same mean, so the host's throughput (its floor)
is unchanged; a longer tail of late calls, which the coded queue takes for stragglers, as the
runtime's does on an overloaded host."""

from dataclasses import replace

import numpy as np

from elastic_coded.sim import RuntimeCost, simulate
from elastic_coded.sim.cost import host_wait

# a host the calls overload: 30 ms of CPU a call over 2 cores, for the 10 machines of
# test_sim_pull._pull_case
BUSY = RuntimeCost(step_s=0.0, call_s=1e-4, round_trip_s=1e-4, plan_s=0.0, host_cpus=2,
                   host_call_s=0.03, host_cancel_s=0.005)


class _Half:
    """A generator whose every draw is 0.5: a uniform share of ``2 W`` is then ``W``."""

    def random(self):
        return 0.5


def test_a_wait_is_first_come_without_a_generator_and_a_uniform_share_of_twice_it_with_one():
    assert host_wait(0.01, None) == 0.01
    assert host_wait(-0.5, None) == 0.0 and host_wait(-0.5, np.random.default_rng(0)) == 0.0
    assert host_wait(0.0, np.random.default_rng(0)) == 0.0
    draws = np.array([host_wait(0.01, np.random.default_rng([7, i])) for i in range(20_000)])
    assert draws.min() >= 0.0 and draws.max() < 0.02
    assert abs(draws.mean() - 0.01) < 0.0002            # the first-come wait's mean
    assert abs(np.mean(draws > 0.015) - 0.25) < 0.02     # spread evenly over [0, 2 W)
    again = np.array([host_wait(0.01, np.random.default_rng([7, i])) for i in range(100)])
    assert np.array_equal(again, draws[:100])


def test_the_order_sent_is_the_middle_of_the_uniform_share():
    """A generator drawing 0.5 every time reproduces the step served in the order sent, to
    the last call: the generator changes the waits and nothing else."""
    from test_sim_pull import _pull_case

    for policy in ("usctec-pull", "dynamic"):
        for seed in range(4):
            fifo = _pull_case(policy, seed, BUSY)
            half = _pull_case(policy, seed, BUSY, rng=_Half())
            assert (half.time, half.calls, half.backups, half.cancelled) == \
                (fifo.time, fifo.calls, fifo.backups, fifo.cancelled)


def test_on_an_overloaded_host_calls_come_back_later_at_the_tail(coded_layouts):
    """Served in no particular order, the coded queue sees a longer tail of late calls (the
    95th percentile of what its returned calls took beyond their work) than in the order sent,
    over the same steps; and a host with its cores to spare is not touched by the order."""
    from test_sim_pull import _pull_case

    tails = {}
    for label, rng in (("fifo", lambda s: None), ("any", lambda s: np.random.default_rng(s))):
        coded_layouts.clear()
        for seed in range(6):
            _pull_case("usctec-pull", seed, BUSY, rng=rng(seed))
        tails[label] = np.quantile(np.concatenate([q.lags for _, q in coded_layouts]), 0.95)
    assert tails["any"] > 1.2 * tails["fifo"], tails
    idle = replace(BUSY, host_call_s=1e-7, host_cancel_s=0.0)
    for seed in range(3):
        a = _pull_case("usctec-pull", seed, idle)
        b = _pull_case("usctec-pull", seed, idle, rng=np.random.default_rng(seed))
        assert abs(a.time - b.time) < 1e-5 and a.calls == b.calls


def test_the_runner_draws_each_steps_order_from_its_seed(monkeypatch):
    """``simulate`` gives every pull step the generator of ``[seed, step]`` (so a run repeats
    to the last digit), for each pull policy."""
    from elastic_coded.sim import IIDStragglers, LinearSpeeds, pulled

    seen, real = [], pulled.pull_step

    def spy(*args, rng=None, **kw):
        seen.append(rng.bit_generator.state["state"]["state"])   # before any draw
        return real(*args, rng=rng, **kw)

    monkeypatch.setattr(pulled, "pull_step", spy)

    def run():
        seen.clear()
        res = simulate(12, 4, L=4, S=2, policies=("usctec-pull", "dynamic"), time_scale=0.5,
                       cost=BUSY, baseline=None, speeds=LinearSpeeds(1, 4),
                       delays=IIDStragglers(k=2, factor=5.0), seed=3)
        return res, list(seen)

    (a, first), (b, again) = run(), run()
    want = [np.random.default_rng([3, t]).bit_generator.state["state"]["state"]
            for t in range(4)]
    assert first == again and sorted(first) == sorted(want * 2)
    for p in ("usctec-pull", "dynamic"):
        assert list(a.times[p]) == list(b.times[p])
