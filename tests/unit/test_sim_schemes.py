"""The simulator's unified and heterogeneous-masters schemes: the runtime's storage rules and
draws, Map and completion times (hand-checked, against MATH.md and against direct
recomputation), churn (joins, leaves, crashes), re-designs, the model's lower bound,
determinism; and the hetero rules they share with the runtime (top-up, re-plan)."""

import math

import numpy as np
import pytest

from elastic_coded.algebra.fields import field
from elastic_coded.churn import ChurnScript, Join, RandomChurn, StepEvents
from elastic_coded.families.hetero import HeteroProblem
from elastic_coded.families.hetero import policy as het
from elastic_coded.families.unified import latency_load
from elastic_coded.families.unified import policy as uni
from elastic_coded.schemes.policies.rules import (
    hetero_needs_replan,
    paced,
    quorum_time,
    top_up,
    top_up_time,
)
from elastic_coded.sim import (
    EqualSpeeds,
    HeteroOptions,
    HeteroVariant,
    IIDStragglers,
    ShiftedExponential,
    UnifiedOptions,
    UnifiedVariant,
    UniformSpeeds,
    hetero_lower_bound,
    hetero_step,
    make_trace,
    simulate,
)


def ids(n):
    return [f"m{i}" for i in range(n)]


# --- unified --------------------------------------------------------------------------------------
@pytest.mark.parametrize("K, mu, q, speed", [(8, "1/2", 4, 1.0), (6, "1/3", 3, 1.0),
                                             (8, "1/2", 2, 2.0)])
def test_unified_mean_map_time_is_D_q(K, mu, q, speed):
    # no churn, no slowdowns: the q-th smallest of mu N (1 + Exp(1)) over speed has mean D(q)/speed
    ts = 2.0
    res = simulate(K, 1500, L=1, S=1, policies=("unified",), baseline=None, seed=7,
                   speeds=EqualSpeeds(speed), time_scale=ts,
                   unified_options=UnifiedOptions(mu=mu, q=q))
    D, _ = latency_load(K, mu, q, q)  # N defaults to q
    assert res.summary["unified"]["mean"] == pytest.approx(float(D) * ts / speed, rel=0.03)
    assert res.summary["unified"]["lost"] == 0 and res.summary["unified"]["redesigns"] == 0
    assert np.all(res.details["unified"]["K"] == K) and np.all(res.details["unified"]["q"] == q)


def test_unified_steps_are_the_runtimes_draws():
    # every step: the storage the runtime keeps, its latency draw default_rng([seed, step]),
    # paced by time_scale * slowdown / speed, the q-th smallest
    opts = UnifiedOptions(mu="1/2", q=4)
    tr = make_trace(8, 40, 2, 1, delays=IIDStragglers(k=2, factor=4),
                    speeds=UniformSpeeds(1, 3), seed=3)
    res = simulate(trace=tr, L=2, S=1, policies=("unified",), baseline=None, seed=11,
                   time_scale=0.5, unified_options=opts)
    st, _ = uni.plan_storage(opts, 1, tr.ids[:8], None, 4, field("real"))
    for t in range(tr.steps):
        speed = dict(zip(tr.present(t), tr.speed[t, tr.slots(t)]))
        slow = dict(zip(tr.present(t), tr.slowdown[t, tr.slots(t)]))
        lat = uni.map_latencies(st, 4, np.random.default_rng([11, t]))
        want = quorum_time([paced(lat[k], 0.5, slow[m], speed[m])
                            for k, m in enumerate(st.servers)], 4)
        assert res.times["unified"][t] == want


@pytest.mark.parametrize("grow, redesign_steps", [(True, [4, 8]), (False, [8])])
def test_unified_redesigns_under_churn(grow, redesign_steps):
    # K=8, q=4.  Step 2: m0 leaves (7 servers left: no re-design); step 4: j1 joins (grow:
    # re-design for K=8); step 6: m1, m2 crash mid-step (the Map still has 5 live servers);
    # step 8: m3, m4, m5 leave -> fewer than q servers of the design left: re-design
    events = {2: StepEvents(leave=("m0",)), 4: StepEvents(join=(Join("j1"),)),
              6: StepEvents(crash=("m1", "m2")), 8: StepEvents(leave=("m3", "m4", "m5"))}
    res = simulate(8, 12, L=2, S=1, policies=("unified",), baseline=None,
                   churn=ChurnScript(events=events),
                   unified_options=UnifiedOptions(mu="1/2", q=4, grow=grow))
    r = res.redesigns["unified"]
    assert np.flatnonzero(r).tolist() == redesign_steps
    assert np.all((res.rows_moved["unified"] > 0) == (r > 0))
    assert res.summary["unified"]["lost"] == 0
    K, q, live = (res.details["unified"][k] for k in ("K", "q", "live"))
    assert K[3] == 8 and live[3] == 7 and K[7] == 8
    # step 7: m3..m7 of the first design (and j1 of the second) are present
    assert live[7] == (6 if grow else 5)
    # K = 3 machines left: q drops to the largest q' <= 3 dividing N = 4 with mu q' >= 1
    assert K[8] == 3 and q[8] == 2


def test_unified_crashes_beyond_q_re_encode_and_run_again():
    # step 1: 5 of 8 servers crash, q = 4: the Map fails once every call has returned (3) or
    # failed (crashes noticed at 0.5 of their time); re-encoded for the 3 left (q = 2, the
    # largest q' <= 3 dividing N = 4), the step runs again with the same generator
    opts, seed, ts = UnifiedOptions(q=4), 3, 1.5
    crash = ("m0", "m1", "m2", "m3", "m4")
    res = simulate(8, 4, L=2, S=1, policies=("unified",), baseline=None, seed=seed,
                   time_scale=ts, churn=ChurnScript(events={1: StepEvents(crash=crash)}),
                   unified_options=opts)
    F = field("real")
    st, _ = uni.plan_storage(opts, 1, ids(8), None, 4, F)
    lat = uni.map_latencies(st, 4, np.random.default_rng([seed, 1]))
    first = max(paced(lat[k], ts) * (0.5 if m in crash else 1.0) for k, m in enumerate(st.servers))
    st2, new = uni.plan_storage(opts, 1, ["m5", "m6", "m7"], st, 4, F)
    assert new and st2.q == 2
    lat2 = uni.map_latencies(st2, 4, np.random.default_rng([seed, 1]))
    assert res.times["unified"][1] == pytest.approx(first + quorum_time(paced(lat2, ts), 2))
    assert res.redesigns["unified"].tolist() == [0, 1, 0, 0]
    assert res.details["unified"]["q"].tolist() == [4, 2, 2, 2]


def test_unified_step_lost_when_no_design_fits():
    # mu = 1/2 needs K >= 2 machines: after 7 of 8 crash, none fits
    events = {1: StepEvents(crash=tuple(f"m{i}" for i in range(7)))}
    res = simulate(8, 3, L=1, S=0, policies=("unified",), baseline=None,
                   churn=ChurnScript(events=events), unified_options=UnifiedOptions(q=4))
    t = res.times["unified"]
    assert math.isfinite(t[0]) and t[1] == math.inf and t[2] == math.inf
    assert res.summary["unified"]["lost"] == 2


# --- hetero: the rules ----------------------------------------------------------------------------
def _storage(blocks: dict, L=4, a=None, u=4.0):
    """One master of ``L`` rows; ``blocks = {machine: ranges}``; a row costs ``a[machine]``
    (default 0.25) plus a tail of mean ``1/u``: ``row_time = a + 1/u``."""
    machines = tuple(sorted(blocks))
    a = {n: (a or {}).get(n, 0.25) for n in machines}
    loads = np.array([[sum(y - x for x, y in blocks[n]) for n in machines]], dtype=float)
    P = HeteroProblem(L=np.array([float(L)]), a=np.array([[a[n] for n in machines]]),
                      u=np.full((1, len(machines)), u))
    return het.HeteroStorage(L=(L,), machines=machines, problem=P, assignment=None, loads=loads,
                             blocks=({n: tuple(r) for n, r in blocks.items()},),
                             capacity=(16,))


FOUR = {"a": [(0, 2)], "b": [(2, 4)], "c": [(4, 6)], "d": [(6, 8)]}


def test_top_up_order_idle_then_row_time_then_id():
    st = _storage({"a": [(0, 2)], "b": [(2, 4)], "c": [(4, 5)], "d": [(6, 8)],
                   "e": [(8, 9), (10, 11), (12, 13)]}, a={"c": 0.1, "e": 0.2})
    # row times: a, b, d 0.25 + 1/4 = 0.5; c 0.35; e 0.45
    assert het.row_time(st, 0, "c") == pytest.approx(0.35)
    assert top_up_time(st, 0, "b", 3) == pytest.approx(1.5)
    # 2 rows missing: idle c (1 row), then e, which sends at most the 1 row still missing
    asks, short, order = top_up(st, 0, {0, 1}, busy={"a"}, usable="abcde")
    assert asks == [("c", ((4, 5),)), ("e", ((8, 9),))] and short == 0
    assert order == ["c", "e", "b", "d", "a"]
    # busy machines last; rows already had are not asked for again
    asks, short, _ = top_up(st, 0, {0, 1, 8}, busy={"c", "e"}, usable="abcde")
    assert asks == [("b", ((2, 3),))] and short == 0  # one row missing: one row asked
    # only a usable, holding rows 0:2 of which 0 is had: 1 row from a, 2 short for a rescue
    asks, short, order = top_up(st, 0, {0}, busy=(), usable="a")
    assert (asks, short, order) == ([("a", ((1, 2),))], 2, ["a"])
    assert top_up(st, 0, {0, 1, 2, 3}, busy=(), usable="abcd") == ([], 0, ["c", "a", "b", "d"])


def test_hetero_needs_replan_rule():
    st = _storage(FOUR)
    assert hetero_needs_replan(None, "abcd")
    assert not hetero_needs_replan(st, ["d", "c", "b", "a"])
    assert hetero_needs_replan(st, "abcd", fresh=("b",))   # a re-used id holds nothing
    assert hetero_needs_replan(st, "abc") and hetero_needs_replan(st, "abcde")


def _plan(st, pace):
    return het.HeteroStepPlan(storage=st, serve={n: 0 for n in pace}, pace=pace, t_star=(1.0,))


SERVE3 = {"a": 1.0, "b": 2.0, "c": 3.0}


@pytest.mark.parametrize("slow, crashed, want, topped, calls, rescued", [
    # a returns rows 0:2 at 1, b rows 2:4 at 2: 4 rows
    ({}, (), 2.0, (), 0, 0),
    ({"a": 5.0}, (), 3.0, (), 0, 0),
    # b dies, noticed at 0.5 * 2 = 1: rows 0:2 received, c's 4:6 in flight: enough
    ({}, ("b",), 3.0, (), 0, 0),
    # b, c die (noticed at 1, 1.5): at 1.5 two rows missing -> idle a (nothing new), d (6:8):
    # from 1.5 for 2 rows x row time 0.5
    ({}, ("b", "c"), 2.5, (0,), 1, 0),
    # ... and d dies too, noticed at 1.5 + 0.5: only a is left and has nothing new: two fresh
    # coded rows (2:4, held by no live machine) stored on a, from 2.0 for 1.0
    ({}, ("b", "c", "d"), 3.0, (0,), 2, 2),
    # everybody dies: a at .5 (4 rows in flight), b at 1 (d asked for 6:8, dies at 1.5),
    # c at 1.5 (rows 0:2 rescued onto d, which is dead), d: nobody left -> lost
    ({}, ("a", "b", "c", "d"), math.inf, (0,), 2, 2),
])
def test_hetero_step_hand_checked(slow, crashed, want, topped, calls, rescued):
    st = _storage(FOUR)
    out = hetero_step(_plan(st, SERVE3), "abcd", slow, crashed, time_scale=1.0, crash_at=0.5)
    assert out.time == pytest.approx(want)
    assert (out.topped_up, out.top_up_calls, out.rescued_rows) == (topped, calls, rescued)
    if rescued and math.isfinite(want):
        assert out.storage.rows_of(0, "a") == ((0, 4),) and st.rows_of(0, "a") == ((0, 2),)
    # time_scale stretches every time
    T3 = hetero_step(_plan(st, SERVE3), "abcd", slow, crashed, time_scale=3.0).time
    assert T3 == pytest.approx(3 * want) if math.isfinite(want) else T3 == math.inf


def test_hetero_step_tops_up_a_short_draw_at_time_0():
    # only a serves (a probabilistic draw): 2 rows missing at 0 -> idle c (row time .35, 1
    # row, back at .35), then b (2 rows, back at 1.0): the master completes at 1.0
    st = _storage({"a": [(0, 2)], "b": [(2, 4)], "c": [(4, 5)], "d": [(6, 8)]}, a={"c": 0.1})
    out = hetero_step(_plan(st, {"a": 1.0}), "abcd")
    assert (out.time, out.topped_up, out.top_up_calls) == (pytest.approx(1.0), (0,), 2)
    # rows in flight count: with b serving too (slowly, until 3) nothing is missing at 0
    out = hetero_step(_plan(st, {"a": 1.0, "b": 3.0}), "abcd")
    assert (out.time, out.topped_up, out.top_up_calls) == (pytest.approx(3.0), (), 0)
    # no other machine holds rows: 2 fresh rows on the first idle machine (b), 1.0 for 2 rows
    st = _storage({"a": [(0, 2)], "b": [], "c": [], "d": []})
    out = hetero_step(_plan(st, {"a": 0.2}), "abcd")
    assert (out.time, out.rescued_rows) == (pytest.approx(1.0), 2)
    assert out.storage.rows_of(0, "b") == ((2, 4),)


def test_hetero_lower_bound_hand_checked():
    st = _storage(FOUR)   # a = 0.25 per row on four machines, L = 4 rows
    # sum_n x_n >= 4 with 0.25 x_n <= t on each of the live machines: t = 1 / (live count)
    assert hetero_lower_bound(st, "abcd", {}, 1.0) == pytest.approx(0.25)
    assert hetero_lower_bound(st, "ab", {}, 2.0) == pytest.approx(1.0)
    # a slowdown below 1 speeds a machine up in the bound; above 1 is ignored (top-ups are
    # not slowed)
    assert hetero_lower_bound(st, "ab", {"a": 0.5}, 1.0) == pytest.approx(1 / 3)
    assert hetero_lower_bound(st, "ab", {"a": 5.0}, 1.0) == pytest.approx(0.5)


# --- hetero: simulate -----------------------------------------------------------------------------
def test_hetero_without_churn_is_the_fastest_rows_of_each_master():
    # dedicated, no crashes: master m completes when its serving machines' rows, in the order
    # they return (pace * time_scale * slowdown), reach L_m
    opts, masters, seed, ts = HeteroOptions(), (30, 50), 5, 2.0
    tr = make_trace(10, 30, 2, 1, delays=IIDStragglers(k=2, factor=3), speeds=UniformSpeeds(1, 3),
                    seed=1)
    res = simulate(trace=tr, L=2, S=1, policies=("hetero",), baseline=None, seed=seed,
                   time_scale=ts, masters=masters, hetero_options=opts)
    machines = tr.ids[:10]
    st, _, _ = het.plan_storage(opts, masters, machines, dict(zip(machines, tr.configured)),
                                None, {}, het.capacities(opts, masters, None), seed=seed)
    for t in range(tr.steps):
        plan = het.step_plan(st, np.random.default_rng([seed, t]))
        slow = dict(zip(tr.present(t), tr.slowdown[t, tr.slots(t)]))
        want = 0.0
        for m, Lm in enumerate(masters):
            got = sorted((plan.pace[n] * ts * slow[n], sum(b - a for a, b in st.rows_of(m, n)))
                         for n, mm in plan.serve.items() if mm == m)
            rows = np.cumsum([r for _, r in got])
            want = max(want, got[int(np.argmax(rows >= Lm))][0])
        assert res.times["hetero"][t] == pytest.approx(want, rel=1e-12)
    assert res.summary["hetero"]["recovered"] == 0 and res.summary["hetero"]["redesigns"] == 0


CHURN = ChurnScript(random=RandomChurn(leave=0.3, crash=0.3, join=0.4, stragglers=1, factor=4,
                                       join_speed=(1, 3), min_machines=7), seed=4)


@pytest.mark.parametrize("assignment", ["iterated_greedy", "simple_greedy", "probabilistic",
                                        "uncoded", "unbalanced_coded"])
def test_hetero_never_below_the_models_lower_bound_under_churn(assignment):
    res = simulate(10, 40, L=2, S=1, policies=("hetero",), baseline=None, seed=2,
                   churn=CHURN, speeds=UniformSpeeds(1, 3), delays=ShiftedExponential(0.2),
                   masters=(24, 40), hetero_options=HeteroOptions(assignment=assignment))
    t, lb = res.times["hetero"], res.details["hetero"]["lower_bound"]
    assert res.counts["crashes"] > 3 and res.counts["joins"] > 3 and res.counts["leaves"] > 3
    assert res.summary["hetero"]["lost"] == 0
    assert np.all(lb > 0) and np.all(t >= lb * (1 - 1e-9))
    assert res.summary["hetero"]["redesigns"] >= res.counts["membership_changes"]


def test_hetero_probabilistic_draws_get_topped_up():
    # uneven speeds: the LP splits some machines between masters, and a draw can leave one short
    res = simulate(7, 60, L=2, S=1, policies=("hetero",), baseline=None, seed=1,
                   speeds=UniformSpeeds(1, 3), masters=(24, 40, 30),
                   hetero_options=HeteroOptions(assignment="probabilistic"))
    assert np.all(res.times["hetero"] >= res.details["hetero"]["lower_bound"])
    assert res.summary["hetero"]["lost"] == 0
    assert res.details["hetero"]["topped_up"].sum() > 0     # some draws left a master short
    assert res.summary["hetero"]["redesigns"] == 0           # no churn, no re-plan


def test_hetero_replans_when_membership_changes():
    # step 2: m1 leaves; step 4: j1 joins (fresh); step 6: m2 crashes mid-step (topped up
    # from the step's storage), the storage is planned anew before step 7
    events = {2: StepEvents(leave=("m1",)), 4: StepEvents(join=(Join("j1", 2.0),)),
              6: StepEvents(crash=("m2",))}
    res = simulate(8, 10, L=2, S=1, policies=("hetero",), baseline=None,
                   churn=ChurnScript(events=events), masters=(20, 30))
    r = res.redesigns["hetero"]
    assert r.tolist() == [0, 0, 1, 0, 1, 0, 0, 1, 0, 0]   # m2 is gone from step 7
    assert res.rows_moved["hetero"][4] > 0  # the joiner gets coded rows
    assert res.summary["hetero"]["lost"] == 0


# --- together; determinism; validation ------------------------------------------------------------
def test_schemes_share_the_trace_with_the_usctec_family():
    kw = dict(L=2, S=1, seed=1, churn=CHURN, delays=IIDStragglers(k=1), design_samples=2)
    one = simulate(10, 15, policies=("usctec", "uncoded"), **kw)
    all_ = simulate(10, 15, policies=("usctec", "uncoded", "unified", "hetero"),
                    masters=(24, 40), **kw)
    assert np.array_equal(one.times["usctec"], all_.times["usctec"])
    assert np.array_equal(one.machines, all_.machines)
    assert all_.summary["unified"]["ratio_mean"] is not None
    # two configurations of each side by side
    both = simulate(10, 15, policies=(UnifiedVariant("u2", UnifiedOptions(q=2)),
                                      UnifiedVariant("u4", UnifiedOptions(q=4)),
                                      HeteroVariant("h", (24, 40))), baseline=None, **kw)
    assert both.summary["u2"]["mean"] < both.summary["u4"]["mean"]
    assert np.array_equal(both.times["h"], all_.times["hetero"])


def test_schemes_same_seed_same_results():
    kw = dict(L=2, S=1, churn=CHURN, speeds=UniformSpeeds(1, 3), policies=("unified", "hetero"),
              baseline=None, masters=(24, 40), delays=IIDStragglers(k=1))
    a, b, c = (simulate(10, 30, seed=s, **kw) for s in (6, 6, 7))
    for n in a.names:
        assert np.array_equal(a.times[n], b.times[n])
        assert np.array_equal(a.redesigns[n], b.redesigns[n])
        assert np.array_equal(a.rows_moved[n], b.rows_moved[n])
        assert not np.array_equal(a.times[n], c.times[n])
    assert a.summary == b.summary


def test_scheme_validation():
    with pytest.raises(ValueError, match="masters: policy 'hetero' needs"):
        simulate(8, 2, L=2, S=1, policies=("hetero",), baseline=None)
    with pytest.raises(ValueError, match="unified_options: given, but 'unified'"):
        simulate(8, 2, L=2, S=1, policies=("usctec",), baseline=None,
                 unified_options=UnifiedOptions())
    with pytest.raises(ValueError, match="masters: given, but 'hetero'"):
        simulate(8, 2, L=2, S=1, policies=("usctec",), baseline=None, masters=(3,))
    with pytest.raises(ValueError, match="masters: the row counts"):
        HeteroVariant("h", ())
    with pytest.raises(ValueError, match="rows: an int >= 1"):
        UnifiedVariant("u", rows=0)
    with pytest.raises(ValueError, match="policies: unknown policy 'nope'"):
        simulate(8, 2, L=2, S=1, policies=("nope",), baseline=None)
    # too few machines for the masters: every step lost, as the runtime fails it
    res = simulate(3, 2, L=2, S=1, policies=("hetero",), baseline=None, masters=(5, 5, 5))
    assert res.summary["hetero"]["lost"] == 2
