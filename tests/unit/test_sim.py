"""The simulator (elastic_coded.sim): step semantics, recovery, baselines, bounds, churn,
determinism, the plan cache, and the vectorised path against the plain-loop reference."""

import math
import subprocess
import sys
import zlib

import numpy as np
import pytest

from elastic_coded.churn import ChurnScript, Join, RandomChurn, StepEvents
from elastic_coded.families.usctec import (
    SpeedModel,
    cyclic_placement,
    design_placement,
    extend_placement,
    plan_step,
)
from elastic_coded.schemes.plan import Group, Piece, Placement, PlanError, RowBlock, StepPlan
from elastic_coded.schemes.policies.rules import (
    assign_recovery,
    backup_copies,
    backup_due,
    backup_target,
    recovery_target,
    speculation_start,
)
from elastic_coded.schemes.registry import REGISTRY, get_policy
from elastic_coded.schemes.speeds import new_estimate, observe
from elastic_coded.sim import (
    BOUNDS,
    VARIANTS,
    Compose,
    EqualSpeeds,
    FixedSpeeds,
    IIDStragglers,
    LinearSpeeds,
    MarkovStragglers,
    NoDelays,
    PlanCache,
    ShiftedExponential,
    SlowSpells,
    Speculation,
    TraceDelays,
    UniformSpeeds,
    Variant,
    make_trace,
    simulate,
    step_time,
    step_time_reference,
    time_unit,
)
from elastic_coded.sim.executor import _Compiled, _PlacementIndex
from elastic_coded.sim.learn import _learn, _Learner

WHOLE = sorted(n for n, p in REGISTRY.items() if p.plan is not None and not p.pulls)
PULLED = sorted(n for n, p in REGISTRY.items() if p.pulls)
ALL = ("uncoded", "speculative", "cyclic", "cec", "usctec-cyclic", "usctec", "ideal", "lower_bound")


def ids(n):
    return [f"m{i}" for i in range(n)]


# --- step semantics -------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["usctec", "cyclic", "uncoded"])
def test_no_stragglers_step_time_is_c_int(policy):
    # equal speeds, rows divisible by N: every machine finishes at c_int in the plan's units
    N, L, S = 12, 4, 2
    pl = cyclic_placement(12 * 50, ids(N), L, S)
    plan = get_policy(policy)(pl, sorted(ids(N)), np.ones(N), L, S)
    out = step_time(plan, pl, np.ones(N), time_scale=2.5)
    assert out.time == pytest.approx(plan.c_int * time_unit(plan, 2.5), rel=1e-12)
    assert out.recovered == () and out.copies == 0


def test_no_stragglers_simulate_matches_c_int():
    N, L, S = 12, 4, 2
    res = simulate(N, 5, L=L, S=S, policies=("cyclic", "usctec-cyclic"), baseline=None,
                   num_rows=600, time_scale=3.0)
    pl = cyclic_placement(600, ids(N), L, S)
    plan = plan_step(pl, sorted(ids(N)), np.ones(N), L, S)
    for name in ("cyclic", "usctec-cyclic"):
        assert res.times[name] == pytest.approx(np.full(5, plan.c_int * 3.0 / L), rel=1e-12)


def _two_piece_plan():
    # rows 0:4 on (a, b, c), rows 4:8 on (b, c, d); L=2, S=1, q=8
    groups = (Group((0, 4), 0.5, ("a", "b", "c")), Group((4, 8), 0.5, ("b", "c", "d")))
    pieces = (Piece(0, None, ("a", "b", "c")), Piece(1, None, ("b", "c", "d")))
    plan = StepPlan(2, 1, 8, ("a", "b", "c", "d"), (1.0,) * 4, groups, pieces, (0.5, 1, 1, 0.5),
                    0.5, 0.5)
    pl = Placement(8, ("a", "b", "c", "d"), (1.0,) * 4,
                   (RowBlock(0, 4, ("a", "b", "c")), RowBlock(4, 8, ("b", "c", "d"))))
    return plan, pl


def test_piece_time_is_Lth_order_statistic_hand_checked():
    plan, pl = _two_piece_plan()
    # work: a, d: 4 rows /8 /L=2 -> 0.25; b, c: 0.5.  Slowdowns 1, 4, 3, 8 ->
    # finish a .25, b 2.0, c 1.5, d 2.0; piece 0 = 2nd of {.25, 2, 1.5} = 1.5,
    # piece 1 = 2nd of {2, 1.5, 2} = 2.0
    for fn in (step_time, step_time_reference):
        out = fn(plan, pl, [1, 1, 1, 1], slowdowns=[1, 4, 3, 8])
        assert out.piece_times.tolist() == pytest.approx([1.5, 2.0])
        assert out.time == pytest.approx(2.0)
        assert out.finish.tolist() == pytest.approx([0.25, 2.0, 1.5, 2.0])
    # speeds count as the inverse of slowdowns
    out = step_time(plan, pl, {"a": 1, "b": 0.25, "c": 1 / 3, "d": 0.125})
    assert out.time == pytest.approx(2.0)


def test_crash_within_S_redispatches_its_tasks():
    plan, pl = _two_piece_plan()
    # finish a .25, b 2.0, c (slowdown 3) would be 1.5, d 2.0 (slowdowns 1, 4, 3, 4); c crashes,
    # noticed at .75: both its tasks go out again (least load / estimate, then smallest id):
    # piece 0 (rows 0:4, live holders a, b) -> a, free at .25 -> .75 + .25 = 1.0;
    # piece 1 (rows 4:8, live holders b, d) -> b, busy until 2.0 -> 2.0 + 4 * .25 = 3.0.
    # piece 0 = 2nd of {.25, 2, 1.0} = 1.0; piece 1 = 2nd of {2, 2, 3} = 2.0
    for fn in (step_time, step_time_reference):
        out = fn(plan, pl, [1, 1, 1, 1], slowdowns=[1, 4, 3, 4], crashed={"c"})
        assert out.recovered == () and out.redispatched == 2
        assert out.piece_times.tolist() == pytest.approx([1.0, 2.0])
        assert out.time == pytest.approx(2.0)


def test_crashes_beyond_S_trigger_recovery_hand_checked():
    plan, pl = _two_piece_plan()
    # b and c crash: piece 0 keeps a, piece 1 keeps d (fewer than L=2 each).
    # both are noticed at 0.5 * 0.5 = 0.25 (tie: b first, smaller id); each re-dispatches its
    # two tasks: piece 0 (rows 0:4) to a, the only live holder, free at .25 -> .5, then -> .75;
    # piece 1 (rows 4:8) to d likewise -> .5, .75.  Each piece: 2nd of {.25, .5, .75} = .5
    for fn in (step_time, step_time_reference):
        out = fn(plan, pl, [1, 1, 1, 1], crashed={"b", "c"})
        assert out.recovered == (0, 1) and out.redispatched == 4
        assert out.piece_times.tolist() == pytest.approx([0.5, 0.5])
        assert out.time == pytest.approx(0.5)


def test_uncoded_crash_recovery_hand_checked():
    N = 4
    pl = cyclic_placement(400, ids(N), 2, 1)  # every block on 3 machines
    plan = get_policy("uncoded")(pl, ids(N), np.ones(N), 2, 1)
    # each machine: 100 rows -> work 0.25; m1 crashes, noticed at 0.125; its rows 100:200 are on
    # m1, m2, m3 -> the live holder with least load / estimate, then smallest id: m2, busy to .25
    out = step_time(plan, pl, np.ones(N), crashed={"m1"})
    assert out.recovered == (1,)
    assert out.time == pytest.approx(0.5)
    ref = step_time_reference(plan, pl, np.ones(N), crashed={"m1"})
    assert ref.time == pytest.approx(0.5)


def test_recovery_in_simulate_never_loses_a_step():
    # m0 and m1 crash in the same step: with cyclic storage they share pieces beyond S=1
    events = {3: StepEvents(crash=("m0", "m1")), 6: StepEvents(crash=("m5",))}
    res = simulate(10, 10, L=2, S=1, policies=ALL, churn=ChurnScript(events=events),
                   design_samples=2)
    for name in res.names:
        assert res.summary[name]["lost"] == 0
        assert np.all(np.isfinite(res.times[name]))
    assert res.recovered["cec"][3] > 0  # block 0 lives on m0, m1, m2 only
    assert res.recovered["uncoded"][3] > 0
    assert all(res.redispatched[n][3] > 0 for n in res.names if n not in BOUNDS)
    assert res.machines.tolist() == [10] * 4 + [8] * 3 + [7] * 3


def test_step_lost_when_no_live_holder():
    plan, pl = _two_piece_plan()
    for fn in (step_time, step_time_reference):
        out = fn(plan, pl, [1, 1, 1, 1], crashed={"a", "b", "c"})
        assert out.time == math.inf
        assert out.recovered == (0, 1) and np.all(np.isinf(out.piece_times))


# --- bounds and baselines -------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [
    dict(delays=IIDStragglers(k=2, factor=5)),
    dict(delays=IIDStragglers(k=2, factor=5), speeds=UniformSpeeds(1, 4)),
    dict(delays=MarkovStragglers(0.05, 0.3, 4), speeds=LinearSpeeds(1, 3)),
])
def test_ideal_below_every_policy_mean_and_lower_bound_below_every_step(kw):
    res = simulate(24, 30, L=4, S=2, policies=ALL, seed=3, design_samples=2, **kw)
    for name in res.names:
        if name in BOUNDS:
            continue
        assert res.summary["ideal"]["mean"] <= res.summary[name]["mean"] * (1 + 1e-12), name
        assert np.all(res.times["lower_bound"] <= res.times[name] * (1 + 1e-12)), name


def test_lower_bound_holds_under_churn():
    churn = ChurnScript(random=RandomChurn(leave=0.2, crash=0.3, join=0.4, stragglers=2,
                                           min_machines=10), seed=5)
    res = simulate(16, 40, L=2, S=1, policies=ALL, churn=churn, seed=1, design_samples=2)
    for name in res.names:
        assert res.summary[name]["lost"] == 0, name
        assert np.all(res.times["lower_bound"] <= res.times[name] * (1 + 1e-12)), name


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_speculative_never_slower_than_uncoded(seed):
    churn = ChurnScript(random=RandomChurn(leave=0.1, crash=0.3, join=0.3, min_machines=10),
                        seed=seed)
    res = simulate(20, 40, L=2, S=1, policies=("uncoded", "speculative"), churn=churn, seed=seed,
                   delays=Compose((IIDStragglers(p=0.1, factor=6), ShiftedExponential(0.3))),
                   speeds=UniformSpeeds(1, 3))
    assert np.all(res.times["speculative"] <= res.times["uncoded"] * (1 + 1e-12))
    assert res.summary["speculative"]["copies"] > 0
    assert res.summary["speculative"]["mean"] < res.summary["uncoded"]["mean"]


def test_speculation_hand_checked():
    # 10 machines, uncoded split: each 0.1 of the work; m3 is 5x slow (finish 0.5).
    N = 10
    pl = cyclic_placement(1000, ids(N), 2, 1)
    plan = get_policy("uncoded")(pl, sorted(ids(N)), np.ones(N), 2, 1)
    slow = {m: 1.0 for m in plan.available}
    slow["m3"] = 5.0
    for fn in (step_time, step_time_reference):
        out = fn(plan, pl, np.ones(N), slowdowns=slow, speculation=Speculation(1.5, 0.75))
        # 9 of 10 done at 0.1 >= 75%; median 0.1 -> t* = 0.15; copy on a holder of m3's rows
        # (m3, m4, m5 minus m3), free at 0.1 -> 0.15 + 0.1 = 0.25
        assert out.t_speculate == pytest.approx(0.15)
        assert out.copies == 1
        assert out.time == pytest.approx(0.25)
    with pytest.raises(ValueError, match="speculation"):
        coded = plan_step(pl, sorted(ids(N)), np.ones(N), 2, 1)
        step_time(coded, pl, np.ones(N), speculation=Speculation())


def test_speculation_goes_by_the_times_the_driver_takes_results_in():
    """The same step with the driver taking each result in 0.01 s after the one before (the
    runtime's deadline measures a call's time when it takes the result in): the nine on time
    are taken in at 0.11 .. 0.19, m3's at 0.51.  With 8 (75%) taken in by 0.18 the median is
    0.145 and 1.5x it is 0.2175, past the ninth (0.19); with nine the median is 0.15, so
    t* = 0.225 and the copy ends at 0.325 (0.15 and 0.25 without the take-in time)."""
    from elastic_coded.sim.cost import taken_in
    from elastic_coded.sim.executor import _Compiled, _execute, _PlacementIndex

    assert taken_in(np.array([0.3, 0.1, np.inf, 0.1]), 0.05).tolist() == \
        pytest.approx([0.35, 0.15, np.inf, 0.2])
    N = 10
    pl = cyclic_placement(1000, ids(N), 2, 1)
    plan = get_policy("uncoded")(pl, sorted(ids(N)), np.ones(N), 2, 1)
    eff = np.array([0.2 if m == "m3" else 1.0 for m in plan.available])
    out = _execute(_Compiled(plan), lambda: _PlacementIndex(pl), eff, None, np.ones(N), 1.0,
                   0.5, Speculation(1.5, 0.75), None, 0.01)
    assert out.t_speculate == pytest.approx(0.225)
    assert out.copies == 1
    assert out.time == pytest.approx(0.325)


def test_usctec_beats_uncoded_and_speculative_with_stragglers():
    res = simulate(30, 30, L=4, S=2, delays=IIDStragglers(k=2, factor=5), policies=ALL,
                   design_samples=2)
    s = res.summary
    assert s["usctec"]["mean"] < s["speculative"]["mean"] < s["uncoded"]["mean"]
    assert s["usctec"]["ratio_mean"] == pytest.approx(s["usctec"]["mean"] / s["uncoded"]["mean"])


# --- determinism ----------------------------------------------------------------------------------
def test_same_seed_same_results():
    kw = dict(L=2, S=1, policies=ALL, delays=MarkovStragglers(0.1, 0.3, 5),
              speeds=UniformSpeeds(1, 4), learn_speeds=True, design_samples=2,
              churn=ChurnScript(random=RandomChurn(leave=0.2, crash=0.2, join=0.4,
                                                   join_speed=(1, 3), min_machines=8), seed=9))
    a = simulate(14, 30, seed=4, **kw)
    b = simulate(14, 30, seed=4, **kw)
    c = simulate(14, 30, seed=5, **kw)
    for n in a.names:
        assert np.array_equal(a.times[n], b.times[n]), n
        assert np.array_equal(a.recovered[n], b.recovered[n]), n
    measured = {"plan_ms"}  # wall-clock planning time is the one thing allowed to differ
    strip = lambda r: {n: {k: v for k, v in s.items() if k not in measured}  # noqa: E731
                       for n, s in r.summary.items()}
    assert strip(a) == strip(b)
    assert a.replans == b.replans and a.counts == b.counts
    assert any(not np.array_equal(a.times[n], c.times[n]) for n in a.names)


def test_trace_is_shared_by_every_policy():
    tr = make_trace(12, 20, 2, 1, delays=IIDStragglers(k=1), seed=2)
    one = simulate(trace=tr, L=2, S=1, policies=("uncoded",))
    both = simulate(trace=tr, L=2, S=1, policies=("cyclic", "uncoded"), baseline="cyclic")
    assert np.array_equal(one.times["uncoded"], both.times["uncoded"])


# --- churn ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("per_machine", [False, True])
def test_churn_matches_churn_run(per_machine):
    script = ChurnScript(
        events={2: StepEvents(leave=("m1",)), 4: StepEvents(join=(Join("x", 2.0, 0.5),)),
                5: StepEvents(crash=("m3",)), 6: StepEvents(slow={"m0": (3.0, 2)})},
        random=RandomChurn(leave=0.2 if not per_machine else 0.05,
                           crash=0.2 if not per_machine else 0.05, join=0.3, stragglers=1,
                           factor=4, join_speed=(1, 2), min_machines=6, per_machine=per_machine),
        seed=11)
    L, S, N, steps = 2, 1, 9, 40
    tr = make_trace(N, steps, L, S, churn=script, seed=0)
    gen = script.generator()
    present = set(ids(N))
    for t in range(steps):
        ev = gen.events(t, sorted(present), L + S)
        assert ev == tr.events[t]
        present -= set(ev.leave)
        present |= {j.id for j in ev.join}
        assert tr.present(t) == tuple(sorted(present))
        assert tr.crashed[t] == tuple(m for m in ev.crash if m in present)
        slots = tr.slots(t)
        slot = dict(zip(tr.present(t), slots))
        for m, f in ev.slow.items():
            if m in present:
                assert tr.slowdown[t, slot[m]] == pytest.approx(f)
        for j in ev.join:
            assert tr.speed[t, slot[j.id]] == pytest.approx(j.speed)
            assert tr.storage[slot[j.id]] == j.storage
            assert tr.configured[slot[j.id]] == pytest.approx(j.speed)
        assert [tr.ids[s] for s in slots] == list(tr.present(t))
        present -= set(tr.crashed[t])
    c = tr.counts()
    assert c["joins"] >= 1 and c["crashes"] >= 1 and c["leaves"] >= 1


def test_churn_below_L_plus_S_is_an_error():
    script = ChurnScript(events={1: StepEvents(leave=("m0", "m1"))})
    with pytest.raises(ValueError, match="fewer than L\\+S"):
        make_trace(4, 3, 2, 1, churn=script)


def test_a_machine_may_rejoin_later_as_a_new_machine():
    script = ChurnScript(events={1: StepEvents(leave=("m2",)),
                                 3: StepEvents(join=(Join("m2", 3.0, 1.0),))})
    tr = make_trace(6, 5, 2, 1, churn=script)
    assert [len(tr.present(t)) for t in range(5)] == [6, 5, 5, 6, 6]
    assert tr.ids.count("m2") == 2 and tr.slots(4)[tr.present(4).index("m2")] == 6
    res = simulate(trace=tr, L=2, S=1, policies=("usctec", "uncoded"), design_samples=2)
    assert np.all(np.isfinite(res.times["usctec"]))
    with pytest.raises(ValueError, match="present before the step"):
        make_trace(6, 3, 2, 1, churn=ChurnScript(events={1: StepEvents(join=(Join("m1"),))}))


def test_joiners_get_storage_and_work():
    script = ChurnScript(events={1: StepEvents(join=(Join("j1", 4.0, 1.0),))})
    res = simulate(8, 4, L=2, S=1, churn=script, policies=("usctec", "cyclic", "uncoded"),
                   design_samples=2)
    assert res.machines.tolist() == [8, 9, 9, 9]
    # a fast joiner holding every row lets USCTEC go faster than before it joined
    assert res.times["usctec"][2] < res.times["usctec"][0]


# --- every registry policy; vectorised == reference -----------------------------------------------
def _random_case(rng, policy):
    N = int(rng.integers(5, 11))
    L = int(rng.integers(1, 4))
    S = int(rng.integers(0, 3))
    if N < L + S:
        N = L + S + 1
    ms = ids(N)
    base = rng.uniform(0.5, 4, N)
    if rng.random() < 0.5:
        pl = cyclic_placement(int(rng.integers(N, 12 * N)), ms, L, S)
    else:
        pl = design_placement(int(rng.integers(3 * N, 20 * N)), ms, [1.0] * N,
                              SpeedModel(tuple(base), 0.1, 5.0), L, S, samples=2,
                              seed=int(rng.integers(100)))
    avail = sorted(ms)
    plan = get_policy(policy)(pl, avail, base, L, S)
    slow = np.where(rng.random(N) < 0.3, rng.uniform(1, 8, N), 1.0)
    n_crash = int(rng.integers(0, min(N - 1, S + 3)))
    crashed = set(rng.choice(avail, size=n_crash, replace=False).tolist())
    est = base * rng.uniform(0.5, 1.5, N)
    return plan, pl, base, slow, crashed, est


@pytest.mark.parametrize("policy", WHOLE)
def test_vectorised_matches_reference_for_every_registry_policy(policy):
    rng = np.random.default_rng(zlib.crc32(policy.encode()))
    for _ in range(25):
        plan, pl, base, slow, crashed, est = _random_case(rng, policy)
        kw = dict(slowdowns=slow, crashed=crashed, estimates=est, time_scale=1.7, crash_at=0.4)
        spec = Speculation(1.5, 0.5) if plan.K == 1 else None
        a = step_time(plan, pl, base, speculation=spec, **kw)
        b = step_time_reference(plan, pl, base, speculation=spec, **kw)
        assert a.time == pytest.approx(b.time, rel=1e-12)
        assert np.allclose(a.piece_times, b.piece_times, rtol=1e-12)
        assert np.allclose(a.finish, b.finish, rtol=1e-12)
        assert a.recovered == b.recovered
        assert (a.copies, a.t_speculate) == (b.copies, pytest.approx(b.t_speculate))


@pytest.mark.parametrize("policy", PULLED)
def test_the_pull_policies_are_simulated_by_pulling(policy):
    assert Variant(policy, policy, "design").pulls
    assert not Variant("u", "usctec", "design").pulls


@pytest.mark.parametrize("policy", WHOLE + PULLED)
def test_simulate_accepts_every_registry_policy(policy):
    vs = [Variant(f"{policy}/{kind}", policy, kind) for kind in ("cyclic", "design")]
    res = simulate(10, 6, L=2, S=1, policies=vs, baseline=None, delays=IIDStragglers(k=1),
                   check_plans=True, design_samples=2)
    for v in vs:
        assert np.all(np.isfinite(res.times[v.name])) and np.all(res.times[v.name] > 0)


def test_custom_plan_function():
    def half_speed_usctec(placement, available, speeds, L, S):
        return plan_step(placement, available, np.asarray(speeds) * 0.5, L, S)

    res = simulate(10, 4, L=2, S=1, baseline=None,
                   policies=(Variant("custom", half_speed_usctec, "design"), "usctec"),
                   design_samples=2)
    assert res.times["custom"] == pytest.approx(res.times["usctec"])


# --- the shared rules (elastic_coded.schemes.policies.rules) --------------------------------------
def _three_blocks():
    return Placement(12, tuple("abcde"), (1.0,) * 5,
                     (RowBlock(0, 4, ("a", "b", "c")), RowBlock(4, 8, ("b", "c", "d")),
                      RowBlock(8, 12, ("d", "e"))))


@pytest.mark.parametrize("rows, present, spans", [
    # neighbours sharing a present holder join, keeping the shared ones
    ((2, 10), "abcde", [(2, 8, ["b", "c"]), (8, 10, ["d", "e"])]),
    ((2, 10), "ad", [(2, 4, ["a"]), (4, 10, ["d"])]),
    ((0, 4), "de", [(0, 4, [])]),            # nobody present stores it
    ((5, 7), "bd", [(5, 7, ["b", "d"])]),     # inside one block
])
def test_holders_of_hand_checked(rows, present, spans):
    pl = _three_blocks()
    assert pl.holders_of(rows, set(present)) == spans
    assert _PlacementIndex(pl).spans(rows, set(present)) == spans


def test_placement_index_matches_holders_of_on_churned_placements():
    rng = np.random.default_rng(3)
    for trial in range(6):
        N = int(rng.integers(6, 12))
        pl = design_placement(int(rng.integers(5 * N, 15 * N)), ids(N), [1.0] * N,
                              SpeedModel(tuple(rng.uniform(1, 3, N)), 0.1, 5.0), 2, 1,
                              samples=2, seed=trial)
        for j in range(2):  # joiners split blocks
            pl, _ = extend_placement(pl, f"j{j}", 0.5)
        idx = _PlacementIndex(pl)
        for _ in range(40):
            a = int(rng.integers(0, pl.num_rows))
            rows = (a, int(rng.integers(a + 1, pl.num_rows + 1)))
            present = set(rng.choice(list(pl.machines), size=int(rng.integers(1, N)),
                                     replace=False).tolist())
            assert idx.spans(rows, present) == pl.holders_of(rows, present)


def test_learning_follows_the_controllers_speed_rule():
    # the simulator learns through schemes.speeds.observe, as the controller does: a measured
    # speed for machines that returned, the bound work * time_scale / T for those cancelled.
    # Slowdowns 1, 4, 3, 1, time_scale 2: finish a 0.5, b 4, c 3, d 1; pieces decode at 3 and 3,
    # so b (work 0.5) is cancelled: bound 0.5 * 2 / 3 = 1/3
    plan, pl = _two_piece_plan()
    slow = np.array([1.0, 4.0, 3.0, 1.0])
    out = step_time(plan, pl, [1, 1, 1, 1], slowdowns=slow, time_scale=2.0)
    assert out.time == pytest.approx(3.0)
    learner = _Learner(np.array([1.0, 1.0, 1.0, 1.0, 5.0]))
    _learn(learner, np.array([0, 1, 2, 3]), _Compiled(plan), out, 1 / slow, None, 2.0)
    windows = [e.window for e in learner.est]
    assert windows == [(1.0, 1.0), (1.0, pytest.approx(1 / 3)), (1.0, pytest.approx(1 / 3)),
                       (1.0, 1.0), (5.0,)]
    want = observe(observe(new_estimate(1.0), 1 / 3, "value"), 1 / 3, "upper")
    assert learner.speed.tolist() == [1.0, 1.0, 1.0, 1.0, 5.0]
    # a one-step straggler does not move the planning speed; a persistent one does
    learner.observe(1, 1 / 3, "upper")
    assert learner.est[1] == want and learner.speed[1] == pytest.approx(1 / 3)
    learner = _Learner(np.array([5.0]))
    learner.observe(0, 1.0, "value")
    assert learner.speed[0] == 5.0 and learner.est[0].window == (5.0, 1.0)


def test_assign_recovery_rule():
    pl = _three_blocks()
    spans = lambda rows: pl.holders_of(rows, {"b", "c", "d"})  # noqa: E731
    speed = {"b": 1.0, "c": 2.0, "d": 1.0}
    # task 0 rows 0:4 -> holders b, c: load 0 each, tie on id -> b (4 rows, load/speed 4);
    # task 1 rows 4:8 -> b 4/1, c 0/2, d 0/1: c and d tie at 0 -> c (smaller id)
    # task 2 rows 4:6 -> b 4, c 4/2 = 2, d 0 -> d
    assert assign_recovery([(0, 4), (4, 8), (4, 6)], spans, speed) == [
        (0, 0, 4, "b"), (1, 4, 8, "c"), (2, 4, 6, "d")]
    # a task over two spans: each span its own target
    assert assign_recovery([(2, 10)], lambda r: pl.holders_of(r, {"a", "d"}),
                           {"a": 1.0, "d": 1.0}) == [(0, 2, 4, "a"), (0, 4, 10, "d")]
    # ties broken by tie[h] where given
    assert recovery_target(["b", "c"], {}, {"b": 1, "c": 1}, tie={"b": 1, "c": 0}) == "c"
    with pytest.raises(PlanError, match="no live machine stores rows 0:4"):
        assign_recovery([(0, 4)], lambda r: pl.holders_of(r, {"e"}), {"e": 1.0})


def test_backup_rules():
    assert not backup_due(1.0, None, 1.5)
    assert backup_due(1.5, 1.0, 1.5) and not backup_due(1.49, 1.0, 1.5)
    holders = {0: ["a", "b"], 1: ["a", "c"], 2: ["b"], 3: ["c", "d"]}
    calls = [("k1", "a", [0, 1]), ("k2", "b", [2]), ("k3", "d", [3])]
    # a's task 0 -> b (only other); a's task 1 -> c (busy 0 vs ...); b's task 2: no other holder;
    # d's task 3 -> c (the only other), now busy 2
    out = backup_copies(calls, holders, {"b": 0, "c": 0})
    assert out == [("k1", 0, "b"), ("k1", 1, "c"), ("k3", 0, "c")]
    # busy machines lose to idle ones; pieces already decoded get no copy
    out = backup_copies(calls, holders, {"b": 0, "c": 3, "d": 0}, needed=lambda p: p != 0)
    assert out == [("k1", 1, "c"), ("k3", 0, "c")]
    assert backup_target(["c", "d"], {"c": 1}) == "d"


def test_speculation_start_against_brute_force():
    rng = np.random.default_rng(5)
    for _ in range(200):
        d = rng.exponential(1.0, size=int(rng.integers(1, 9)))
        d[rng.random(d.size) < 0.2] = np.inf
        mult, k0 = float(rng.uniform(1, 3)), int(rng.integers(1, 4))
        # brute force over a fine grid of candidate times (the answer is a completion time or
        # mult * a median, both among these)
        fin = np.sort(d[np.isfinite(d)])
        cands = sorted(set(fin.tolist()) | {mult * float(np.median(fin[:k]))
                                             for k in range(1, fin.size + 1)})
        want = next((t for t in cands if (fin <= t).sum() >= k0
                     and t >= mult * float(np.median(fin[fin <= t]))), math.inf)
        assert speculation_start(d, mult, k0) == pytest.approx(want)


# --- the plan cache -------------------------------------------------------------------------------
def test_plan_cache_tolerance():
    calls = []

    def build():
        calls.append(1)
        return _two_piece_plan()[0]

    cache = PlanCache(tol=0.05)
    s0 = np.array([1.0, 2.0, 3.0])
    assert cache.get("k", s0, build)[1] is False
    assert cache.get("k", s0 * 1.049, build)[1] is True        # within 5%: reuse
    assert cache.get("k", s0 * np.array([1, 1, 1.06]), build)[1] is False  # one moved 6%
    assert cache.get("k", s0 / 1.04, build)[1] is True
    assert cache.get("other", s0, build)[1] is False
    assert cache.get("blind", None, build)[1] is False
    assert cache.get("blind", None, build)[1] is True
    assert len(calls) == 4 and (cache.hits, cache.misses) == (3, 4)


def test_simulate_plans_once_without_changes_and_measures_planning():
    res = simulate(16, 50, L=2, S=1, policies=("uncoded", "speculative", "cyclic", "usctec"),
                   delays=IIDStragglers(k=2), speeds=UniformSpeeds(1, 2), design_samples=2)
    assert res.replans == {"uncoded": 1, "speculative": 0, "cyclic": 1, "usctec": 1}
    assert res.plan_seconds["usctec"][0] > 0 and not res.plan_seconds["usctec"][1:].any()
    assert res.wall["planning"] > 0


def test_learning_replans_only_while_estimates_move():
    res = simulate(16, 40, L=2, S=1, policies=("usctec", "uncoded"), speeds=LinearSpeeds(1, 4),
                   estimates=1.0, learn_speeds=True, plan_tol=0.05, design_samples=2)
    t = res.times["usctec"]
    assert 1 < res.replans["usctec"] < 15
    assert t[-1] < 0.8 * t[0]  # learnt the speeds
    assert not res.plan_seconds["usctec"][-10:].any()  # settled: every plan from the cache


# --- models ---------------------------------------------------------------------------------------
def test_models_shapes_and_semantics():
    rng = np.random.default_rng(0)
    for m in (NoDelays(), IIDStragglers(k=3), IIDStragglers(p=0.2), ShiftedExponential(1.0),
              MarkovStragglers(), SlowSpells(), Compose((IIDStragglers(k=1), ShiftedExponential())),
              TraceDelays(np.array([[1.0, 2.0], [3.0, 1.0]])), EqualSpeeds(2.0),
              UniformSpeeds(1, 4), LinearSpeeds(1, 4), FixedSpeeds(tuple(range(1, 8)))):
        a = m.sample(rng, 50, 7)
        assert a.shape == (50, 7) and np.all(a > 0) and np.all(np.isfinite(a))
    k = IIDStragglers(k=3, factor=5).sample(rng, 100, 20)
    assert np.all((k == 5).sum(axis=1) == 3)
    se = ShiftedExponential(2.0).sample(rng, 2000, 50)
    assert se.min() >= 1 and se.mean() == pytest.approx(3.0, rel=0.02)
    mk = MarkovStragglers(0.02, 0.1, 4).sample(rng, 3000, 200)
    assert (mk == 4).mean() == pytest.approx(0.02 / 0.12, rel=0.1)
    # persistence: a slow machine stays slow with probability 1 - p_recover
    stay = ((mk[1:] == 4) & (mk[:-1] == 4)).sum() / (mk[:-1] == 4).sum()
    assert stay == pytest.approx(0.9, abs=0.02)
    sp = SlowSpells(p=0.05, duration=(3, 3), factor=2).sample(rng, 400, 30)
    for col in sp.T:  # every spell lasts exactly 3 steps (unless cut by the end)
        runs = np.diff(np.flatnonzero(np.diff(np.concatenate([[0], col == 2, [0]]))))[::2]
        assert np.all(runs[:-1] % 3 == 0)
    tr = TraceDelays(np.array([[1.0, 2.0], [3.0, 4.0]])).sample(rng, 3, 3)
    assert tr.tolist() == [[1, 2, 1], [3, 4, 3], [1, 2, 1]]
    u = UniformSpeeds(1, 4).sample(np.random.default_rng(7), 5, 9)
    assert np.array_equal(u, UniformSpeeds(1, 4).sample(np.random.default_rng(7), 5, 9))
    assert np.all(u == u[0]) and u.min() >= 1 and u.max() <= 4  # static per machine
    lin = LinearSpeeds(1, 4).sample(rng, 2, 4)
    assert sorted(lin[0]) == [1, 2, 3, 4] and np.all(lin[0] == lin[1])


@pytest.mark.parametrize("make, match", [
    (lambda: IIDStragglers(k=-1), "k:"),
    (lambda: IIDStragglers(k=2, p=0.1), "k, p"),
    (lambda: IIDStragglers(factor=0.5), "factor"),
    (lambda: MarkovStragglers(p_slow=1.5), "p_slow"),
    (lambda: SlowSpells(duration=(3, 2)), "duration"),
    (lambda: ShiftedExponential(-1), "tail"),
    (lambda: UniformSpeeds(2, 1), "high"),
    (lambda: FixedSpeeds((1, 0)), "values"),
    (lambda: TraceDelays(np.array([[1.0, -1.0]])), "values"),
])
def test_model_validation(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_simulate_validation():
    with pytest.raises(ValueError, match="policies: unknown policy 'nope'"):
        simulate(8, 2, L=2, S=1, policies=("nope",))
    with pytest.raises(ValueError, match="baseline"):
        simulate(8, 2, L=2, S=1, policies=("cyclic",))
    with pytest.raises(ValueError, match="N: 3 machines, fewer than L\\+S = 4"):
        simulate(3, 2, L=2, S=2, policies=("cyclic",), baseline=None)
    with pytest.raises(ValueError, match="speculation"):
        Variant("x", "usctec", speculation=Speculation())
    assert set(VARIANTS) == {"uncoded", "speculative", "cyclic", "cec", "usctec-cyclic", "usctec"}
    assert VARIANTS["speculative"].speculation == Speculation(1.5, 0.0)


def test_sim_does_not_import_ray():
    code = ("import sys, elastic_coded.sim as s; s.simulate(8, 3, L=2, S=1, design_samples=2); "
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
