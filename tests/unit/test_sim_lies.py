"""Lying machines in the simulator's unified and hetero families: detection after the decode,
the repair calls the runtime makes (``families/unified/verify.py``, ``families/hetero/verify.py``)
in simulated time, and the exclusion of a repeat liar (``CAUGHT_LIMIT``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.churn import CAUGHT_LIMIT
from elastic_coded.families.hetero import policy as het
from elastic_coded.families.hetero.sim import HeteroRun, HeteroVariant, hetero_step
from elastic_coded.families.unified import policy as uni
from elastic_coded.families.unified.sim import UnifiedRun, UnifiedVariant
from elastic_coded.sim import make_trace, simulate

MS4 = tuple(f"m{i}" for i in range(4))
HALF = UnifiedVariant(options=uni.UnifiedOptions(mu="1/2", q=2))  # q mu = 1: no slack in Q


def _unified(v, machines, seed, ts, t, speed, slow=None, crashed=(), lying=()):
    """A fresh run's step ``t`` (the storage is the first design in both runs compared)."""
    run = UnifiedRun(v, machines, seed, ts)
    return run, run.step(t, machines, speed, slow or {}, set(crashed), tuple(lying))


def _finishes(run, v, seed, t, speed, ts, slow=None):
    """``{server: Map finish}`` by hand: the runtime's draw over each machine's speed."""
    lat = uni.map_latencies(run.storage, v.inputs, np.random.default_rng([seed, t]))
    slow = slow or {}
    return {k: lat[k] * ts * slow.get(m, 1.0) / speed[m]
            for k, m in enumerate(run.storage.servers)}


# --- unified ------------------------------------------------------------------------------------

def test_unified_repair_time_by_hand():
    """K = 4, mu = 1/2, q = 2: the liar among the fastest 2 is caught when the 2 kept Map
    results are fetched; the honest one's row does not decode alone, so the other servers, in
    server order, compute their Map again until the rows decode: one more here."""
    speed = {m: 1.0 + i for i, m in enumerate(MS4)}
    seed, t, ts = 3, 0, 0.5
    run, honest = _unified(HALF, MS4, seed, ts, t, speed)
    d = _finishes(run, HALF, seed, t, speed, ts)
    order = sorted(d, key=d.get)
    Q, first_other = order[:2], min(k for k in d if k not in order[:2])
    assert honest.time == pytest.approx(d[order[1]]) and honest.repairs == 0
    liar = MS4[Q[0]]
    _, out = _unified(HALF, MS4, seed, ts, t, speed, lying=(liar,))
    assert out.time == pytest.approx(honest.time + d[first_other])
    assert out.time > honest.time
    assert (out.repairs, out.repair_calls, out.caught) == (1, 3, (liar,))


def test_unified_repair_skips_a_second_liar_at_its_cost():
    """The first other server lies too: its Map runs again (its time is spent), it is caught,
    and the next server's Map decodes."""
    speed = {m: 1.0 for m in MS4}
    slow = {"m0": 2.0}
    seed, ts = 5, 1.0
    for t in range(40):
        run, honest = _unified(HALF, MS4, seed, ts, t, speed, slow)
        d = _finishes(run, HALF, seed, t, speed, ts, slow)
        order = sorted(d, key=d.get)
        others = sorted(order[2:])
        if len(others) == 2:
            break
    liars = (MS4[order[0]], MS4[others[0]])
    _, out = _unified(HALF, MS4, seed, ts, t, speed, slow, lying=liars)
    assert out.time == pytest.approx(honest.time + d[others[0]] + d[others[1]])
    assert out.repairs == 1 and out.repair_calls == 4 and set(out.caught) == set(liars)


def test_unified_liar_outside_the_fastest_costs_nothing():
    speed = {m: 1.0 + i for i, m in enumerate(MS4)}
    run, honest = _unified(HALF, MS4, 3, 1.0, 0, speed)
    d = _finishes(run, HALF, 3, 0, speed, 1.0)
    slowest = MS4[max(d, key=d.get)]
    _, out = _unified(HALF, MS4, 3, 1.0, 0, speed, lying=(slowest,))
    assert out == honest and out.repairs == out.repair_calls == 0 and out.caught == ()


def test_unified_lie_costs_no_time_when_the_honest_fastest_decode():
    """mu = 2/3, q = 3, K = 6: the rows of 2 of the fastest 3 decode, so the product is decoded
    again from them at the driver (untimed); only the 3 fetches of kept Map results are made."""
    v = UnifiedVariant(options=uni.UnifiedOptions(mu="2/3", q=3))
    ms = tuple(f"m{i}" for i in range(6))
    speed = {m: 1.0 for m in ms}
    run, honest = _unified(v, ms, 1, 1.0, 0, speed)
    d = _finishes(run, v, 1, 0, speed, 1.0)
    liar = ms[min(d, key=d.get)]
    _, out = _unified(v, ms, 1, 1.0, 0, speed, lying=(liar,))
    assert out.time == honest.time
    assert (out.repairs, out.repair_calls, out.caught) == (1, 3, (liar,))


def test_unified_step_lost_when_the_rows_that_check_never_decode():
    speed = {m: 1.0 for m in MS4}
    _, out = _unified(HALF, MS4, 3, 1.0, 0, speed, lying=MS4[:3])
    assert math.isinf(out.time) and out.repairs == 1 and len(out.caught) == 3


def test_unified_crashed_server_is_asked_and_fails_at_once():
    """A crashed server outside the fastest is asked (a call that fails at once, no time) and
    the next server computes its Map again."""
    speed = {m: 1.0 for m in MS4}
    seed, ts = 2, 1.0
    for t in range(40):
        run, _ = _unified(HALF, MS4, seed, ts, t, speed)
        d = _finishes(run, HALF, seed, t, speed, ts)
        order = sorted(d, key=d.get)
        others = sorted(order[2:])
        if others[0] != order[3]:  # the crash must not change the fastest 2
            break
    dead = MS4[others[0]]
    _, honest = _unified(HALF, MS4, seed, ts, t, speed, crashed=(dead,))
    _, out = _unified(HALF, MS4, seed, ts, t, speed, crashed=(dead,), lying=(MS4[order[0]],))
    assert out.time == pytest.approx(honest.time + d[others[1]])
    assert out.repair_calls == 4


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), K=st.integers(3, 6),
       speeds=st.lists(st.floats(0.25, 4.0), min_size=6, max_size=6),
       liars=st.sets(st.integers(0, 5), max_size=3))
def test_unified_a_lie_never_helps_and_costs_only_when_used(seed, K, speeds, liars):
    ms = tuple(f"m{i}" for i in range(K))
    speed = dict(zip(ms, speeds))
    lying = tuple(ms[i] for i in sorted(liars) if i < K)
    run, honest = _unified(HALF, ms, seed, 1.0, 0, speed)
    d = _finishes(run, HALF, seed, 0, speed, 1.0)
    Q = {run.storage.servers[k] for k in sorted(d, key=lambda k: (d[k], k))[:2]}
    _, out = _unified(HALF, ms, seed, 1.0, 0, speed, lying=lying)
    assert set(out.caught) <= set(lying)
    if Q.isdisjoint(lying):
        assert out == honest
    else:  # q mu = 1: the honest fastest never decode alone, some Map runs again
        assert out.time > honest.time
        assert out.repairs == 1 and out.repair_calls >= 2 + (0 if math.isinf(out.time) else 1)
        assert Q & set(lying) <= set(out.caught)


# --- hetero -------------------------------------------------------------------------------------

def _hetero_plan(masters=(6,), seed=0, t=0):
    v = HeteroVariant(masters=masters)
    run = HeteroRun(v, MS4, {m: 1.0 + i for i, m in enumerate(MS4)}, seed, 1.0, 0.5)
    return het.step_plan(run.storage, np.random.default_rng([seed, t]))


def _received_by(plan, ts, slow):
    """By hand, one master served by every machine and no top-up: ``(finishes, T)``."""
    fin = {n: plan.pace[n] * ts * slow.get(n, 1.0) for n in plan.serve}
    got, T = 0, math.inf
    for n in sorted(fin, key=fin.get):
        got += sum(b - a for a, b in plan.storage.rows_of(0, n))
        if got >= plan.L[0]:
            T = fin[n]
            break
    return fin, T


@pytest.mark.parametrize("ts, slow_m1", [(1.0, 1.0), (2.0, 3.0)])
def test_hetero_repair_time_by_hand(ts, slow_m1):
    """One master of 6 rows on m0..m3 (1, 2, 2, 3 rows): m2, m3, m0 return 6 rows, m1 is not
    used.  The liar m0 is caught at the check; its row is fetched from the first machine in id
    order holding rows not received: m1, one row at its top-up time times its slowdown."""
    plan = _hetero_plan()
    st_ = plan.storage
    assert [sum(b - a for a, b in st_.rows_of(0, n)) for n in MS4] == [1, 2, 2, 3]
    slow = {"m1": slow_m1}
    fin, T = _received_by(plan, ts, slow)
    assert sorted(fin, key=fin.get)[:3] == ["m2", "m3", "m0"] and fin["m1"] > T
    honest = hetero_step(plan, MS4, slow, (), ts)
    assert honest.time == pytest.approx(T) and honest.top_up_calls == 0
    out = hetero_step(plan, MS4, slow, (), ts, lying=("m0",))
    want = T + het.row_time(st_, 0, "m1") * 1 * ts * slow_m1
    assert out.time == pytest.approx(want) and out.time > honest.time
    assert (out.repairs, out.repair_calls, out.caught, out.rescued_rows) == (1, 1, ("m0",), 0)
    unused = hetero_step(plan, MS4, slow, (), ts, lying=("m1",))
    assert unused.time == honest.time and unused.repairs == unused.repair_calls == 0


def test_hetero_repair_stores_fresh_rows_when_the_holders_run_short():
    """The liar m3 holds 3 of the 6 rows: m1's 2 rows are fetched, then no holder has a row
    left, so one fresh coded row is stored on m0 (the first machine not caught) and computed."""
    plan = _hetero_plan()
    honest = hetero_step(plan, MS4, {}, ())
    out = hetero_step(plan, MS4, {}, (), lying=("m3",))
    st_ = plan.storage
    want = honest.time + het.row_time(st_, 0, "m1") * 2 + het.row_time(st_, 0, "m0") * 1
    assert out.time == pytest.approx(want)
    assert (out.repairs, out.repair_calls, out.caught, out.rescued_rows) == (1, 2, ("m3",), 1)
    assert sum(b - a for a, b in out.storage.rows_of(0, "m0")) == 2


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), liars=st.sets(st.sampled_from(MS4), max_size=2),
       crash=st.sampled_from((None,) + MS4))
def test_hetero_a_lie_never_helps(seed, liars, crash):
    plan = _hetero_plan(masters=(5, 7), seed=seed)
    crashed = () if crash is None or crash in liars else (crash,)
    honest = hetero_step(plan, MS4, {}, crashed)
    out = hetero_step(plan, MS4, {}, crashed, lying=tuple(sorted(liars)))
    assert set(out.caught) <= liars and 0 <= out.repairs <= 2
    assert out.time >= honest.time
    assert all(a >= b for a, b in zip(out.master_times, honest.master_times))
    if out.repairs == 0:
        assert out.time == honest.time and out.caught == ()
    elif math.isfinite(honest.time):
        assert out.caught


# --- exclusion and end to end -------------------------------------------------------------------

def _liar_trace(steps=6, liar="m1", start=1):
    churn = {"events": [{"step": start, "corrupt": liar, "steps": CAUGHT_LIMIT}]}
    return make_trace(6, steps, 2, 1, churn=churn, speeds=[50.0 if m == liar else 1.0
                                                           for m in (f"m{i}" for i in range(6))])


def test_repeat_liar_leaves_the_unified_and_hetero_runs():
    tr = _liar_trace()
    gone = 1 + CAUGHT_LIMIT
    assert all("m1" in tr.present(t) for t in range(gone))
    assert all("m1" not in tr.present(t) for t in range(gone, tr.steps))
    res = simulate(trace=tr, L=2, S=1, policies=("unified", "hetero"), baseline=None,
                   masters=(12, 8), unified_options=uni.UnifiedOptions(mu="1/2", q=2))
    live = res.details["unified"]["live"]
    assert live[:gone].tolist() == [6] * gone and live[gone:].tolist() == [5] * (tr.steps - gone)
    assert res.redesigns["hetero"][gone] == 1  # planned anew without it
    assert res.redesigns["hetero"][1:gone].sum() == 0
    # the liar, 50 times faster, is among the fastest q in each step it lies
    assert res.details["unified"]["repairs"].tolist() == [0] + [1] * CAUGHT_LIMIT + [0] * (
        tr.steps - gone)
    assert res.details["unified"]["caught"][1:gone].tolist() == [1] * CAUGHT_LIMIT


def test_simulate_with_lies_runs_unified_and_hetero_end_to_end():
    churn = {"seed": 3, "events": [{"step": 1, "corrupt": ["m0", "m5"], "forever": True},
                                   {"step": 2, "crash": "m3"},
                                   {"step": 3, "join": {"id": "m9", "speed": 2.0}}]}
    tr = make_trace(8, 8, 2, 1, churn=churn, speeds=[20.0, 1, 1, 1, 1, 20.0, 1, 1])
    kw = dict(L=2, S=1, policies=("unified", "hetero"), baseline=None, masters=(16, 12),
              unified_options=uni.UnifiedOptions(mu="1/2", q=2))
    res = simulate(trace=tr, **kw)
    honest = simulate(8, 8, speeds=[20.0, 1, 1, 1, 1, 20.0, 1, 1], **kw)
    assert tr.counts()["corrupt"] > 0 and all(m not in tr.present(4) for m in ("m0", "m5"))
    for n in ("unified", "hetero"):
        det = res.details[n]
        assert {"repairs", "repair_calls", "caught"} <= set(det)
        assert np.all(np.isfinite(res.times[n])) and det["repairs"].sum() >= 1
        assert det["repairs"][0] == 0 and det["repairs"][1 + CAUGHT_LIMIT:].sum() == 0
        assert res.times[n][0] == honest.times[n][0]
        assert res.times[n][1] >= honest.times[n][1]
    assert res.details["unified"]["repairs"][1] == 1
    assert res.times["unified"][1] > honest.times["unified"][1]
