"""The lag a coded pull step allows every call beyond its work (``next_lag``,
``CodedQueue.lag_s``): learnt from the calls a step got back, given to the next step, and
keeping a call whose result merely came back late from counting as overdue; and the simulated
driver taking in every result already back before it asks the machines again, as the
runtime's batched wait does."""

import math

import numpy as np
import pytest
import queue_oracle as oracle
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.families.usctec import design_placement
from elastic_coded.families.usctec import pull as pl
from elastic_coded.families.usctec import pull_step as ps


def test_next_lag_is_a_quantile_of_the_calls_lags_clipped_to_its_cap():
    lags = [0.001 * i for i in range(20)]       # 0 .. 19 ms
    assert ps.next_lag(lags, batch_s=1.0) == pytest.approx(np.quantile(lags, ps.LAG_QUANTILE))
    # too few returned calls: the lag given is kept
    assert ps.next_lag(lags[:ps.LAG_SAMPLES - 1], 1.0, prev=0.004) == 0.004
    assert ps.next_lag(lags[:ps.LAG_SAMPLES], 1.0, prev=0.004) != 0.004
    # calls faster than expected allow no negative lag
    assert ps.next_lag([-0.01] * 20, 1.0, prev=0.02) == 0.0
    # at most LAG_CAP times a call's expected time, so stragglers everywhere stay visible
    assert ps.next_lag([5.0] * 20, batch_s=0.1) == pytest.approx(ps.LAG_CAP * 0.1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1, 10), min_size=0, max_size=40), st.floats(0, 5), st.floats(0, 1))
def test_next_lag_stays_within_zero_and_its_cap(lags, batch_s, prev):
    got = ps.next_lag(lags, batch_s, prev)
    if len(lags) < ps.LAG_SAMPLES:
        assert got == prev
    else:
        assert 0.0 <= got <= ps.LAG_CAP * batch_s + 1e-12


def test_the_lag_after_a_step_is_the_coded_queues_and_dynamic_keeps_it():
    q, speeds, _ = _queue(pl.CodedQueue, 0.0)
    _run(q, speeds, 1.0)
    assert ps.lag_after(q, 0.3) == ps.next_lag(q.lags, q.batch_s, 0.3)
    dyn = pl.DynamicQueue([], (), {})
    assert ps.lag_after(dyn, 0.3) == 0.3


def _queue(cls, lag_s, n=8, units=3):
    placement = design_placement(240, [f"m{i}" for i in range(n)], [1.0] * n,
                                 np.linspace(1, 4, n), 4, 2, samples=1, seed=0)
    avail = tuple(placement.machines)
    speeds = dict(zip(avail, np.linspace(1, 4, n)))
    plan = pl.coded_pull_plan(placement, avail, [speeds[m] for m in avail], 4, 2)
    sub, queues = pl.subdivide(plan, units)
    prod = {pl.Unit(pi, pos, sub.groups[p.group].rows, None):
            (sub.groups[p.group].rows[1] - sub.groups[p.group].rows[0]) * 2
            for pi, p in enumerate(sub.pieces) for pos in range(sub.K)}
    q = cls(queues, 4, 6, sub.holders, prod, dict(speeds), batch_s=4.0, lag_s=lag_s)
    return q, speeds, sub


@pytest.mark.parametrize("cls", [pl.CodedQueue, oracle.CodedQueue])
def test_a_call_is_overdue_only_past_its_lag(cls):
    """Two calls on a machine: the units of the second stop covering their piece only once
    the first has taken its work plus the lag (the indexed queue and the rescan alike)."""
    lag = 2.0
    q, speeds, _ = _queue(cls, lag)
    m = next(iter(speeds))
    first, second = q.next_for(m, 0.0), q.next_for(m, 0.0)
    q.sent(m, first, "a", 0.0)
    q.sent(m, second, "b", 0.0)
    due = sum(q.products[u] for u in first) / speeds[m]
    pos = (second[0].piece, second[0].position)

    def covers(now):
        q.refresh(now)
        return pos[1] in q.running_positions(pos[0])

    assert covers(due + 0.5 * lag)          # late by less than the lag: still on time
    assert not covers(due + 1.5 * lag)      # past it: overdue, the second call is stuck


def _run(q, speeds, extra, seed=0):
    """The queue's machines computing their calls back to back at their speeds
    (``test_pull._simulate``), each result taken in up to ``extra`` seconds after its call is
    done (uniformly at random: the trip back and a busy driver); returns the step's time."""
    from test_pull import _simulate

    rng = np.random.default_rng(seed)
    t, _ = _simulate(q, speeds, {}, lambda: len(q.complete) == len(q.holders),
                     late=lambda: extra * rng.random())
    return t


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_lag_learnt_from_late_results_cuts_the_backups_they_caused(seed):
    """No machine straggles, but results are taken in up to 1 s after their calls are done:
    with no lag allowed a call whose result waits looks overdue and its piece is backed up;
    with the lag the step learnt (``next_lag`` of its calls), the same step makes fewer
    backups.  Here a call costs no host time, so the calls saved gain nothing back: the step
    is at most 1% later (results drawn late at random differ between the two runs)."""
    q0, speeds, _ = _queue(pl.CodedQueue, 0.0)
    t0 = _run(q0, speeds, 1.0, seed=seed)
    lag = ps.next_lag(q0.lags, q0.batch_s)
    assert 0 < lag < 1.0
    q1, _, _ = _queue(pl.CodedQueue, lag)
    t1 = _run(q1, speeds, 1.0, seed=seed)
    assert q1.backups < q0.backups
    assert t1 <= 1.01 * t0
    # results taken in at once: nothing to learn, nothing backed up without cause
    q2, _, _ = _queue(pl.CodedQueue, 0.0)
    _run(q2, speeds, 0.0)
    assert ps.next_lag(q2.lags, q2.batch_s) == pytest.approx(0.0, abs=1e-9)


def _chained(seen) -> None:
    for (lag, q), (nxt, _) in zip(seen, seen[1:]):
        assert nxt == ps.next_lag(q.lags, q.batch_s, lag)


def test_the_simulator_gives_each_pull_step_the_lag_the_last_one_learnt(coded_layouts):
    from elastic_coded.sim import IIDStragglers, LinearSpeeds, RuntimeCost, simulate

    seen = coded_layouts
    cost = RuntimeCost(step_s=0.0, call_s=2e-4, round_trip_s=5e-4, plan_s=0.0, scan_s=2e-5,
                       decide_s=5e-5, host_cpus=2, host_call_s=2e-3)
    simulate(24, 6, L=4, S=2, policies=("usctec-pull",), time_scale=2.0, cost=cost,
             baseline=None, speeds=LinearSpeeds(1, 4), delays=IIDStragglers(k=2, factor=5.0),
             seed=3)
    assert len(seen) == 6 and seen[0][0] == 0.0
    _chained(seen)
    assert any(lag > 0 for lag, _ in seen[1:])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_simulated_driver_takes_in_every_result_back_before_it_asks_again(monkeypatch,
                                                                             seed):
    """As the runtime's batched wait does: when the driver asks the machines, no call that
    has ended by then is still waiting to be taken in (a busy driver: results pile up)."""
    from test_sim_pull import _pull_case

    from elastic_coded.families.usctec.pull_loop import PullLoop
    from elastic_coded.sim import RuntimeCost
    from elastic_coded.sim import pull as sim_pull

    piled, real, arrive = [0], PullLoop.fill, sim_pull._Run._arrival

    def fill(self):
        b = self.b
        for when, _, key, ver in b.heap:
            inf = b.info.get(key)
            assert inf is None or inf[5] != ver or when > b.now, (when, b.now)
        real(self)

    def taken(self, key, when, inf):
        piled[0] += when < self.now   # it waited for the driver
        return arrive(self, key, when, inf)

    monkeypatch.setattr(PullLoop, "fill", fill)
    monkeypatch.setattr(sim_pull._Run, "_arrival", taken)
    # ten machines, two 6x slow, a step of 20 s; taking a result in costs the driver 0.1 s
    out = _pull_case("usctec-pull", seed,
                     RuntimeCost(step_s=0.0, call_s=0.02, round_trip_s=0.1, plan_s=0.0))
    assert math.isfinite(out.time) and out.calls > 10 and piled[0] > 0
