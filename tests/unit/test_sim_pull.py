"""The simulator runs every registry policy as the runtime does: the same placement and plan as
the runtime's storage family, the results it decodes from are the ones the runtime's collector
decodes from (checked exactly in GF(p)), pull steps driven by the runtime's queues never run a
unit where its rows are not stored, and ``usctec-auto`` chooses its execution by the runtime's
rule.  Also the runtime cost model."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field
from elastic_coded.algebra.lagrange import lagrange_code
from elastic_coded.families.usctec import pull as pl
from elastic_coded.families.usctec import pull_step as ps
from elastic_coded.families.usctec.store import UsctecFamily
from elastic_coded.schemes.families import Present
from elastic_coded.schemes.policies.collect import LagrangeCollector
from elastic_coded.schemes.reference import assemble
from elastic_coded.schemes.registry import REGISTRY, step_code
from elastic_coded.schemes.wire import TaskSpec
from elastic_coded.sim import (
    IIDStragglers,
    LinearSpeeds,
    RuntimeCost,
    pull_step,
    simulate,
    step_time,
)
from elastic_coded.sim.pull import pull_total
from elastic_coded.sim.pulled import MODES
from elastic_coded.sim.runner import _Env, _placements
from elastic_coded.sim.trace import make_trace
from elastic_coded.sim.variants import resolve_policies

USCTEC = sorted(n for n, p in REGISTRY.items() if p.plan is not None)
PULLED = sorted(n for n, p in REGISTRY.items() if p.plan is not None and p.pulls)
F = field("gfp")
FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _Req:
    step, n_cols = 0, 8


def _case(n, L, S, seed, rows):
    """The runtime's storage family and the simulator's placement for the same machines."""
    rng = np.random.default_rng(seed)
    speeds = np.round(rng.uniform(1, 4, n), 3)
    specs = [type("Spec", (), {"id": f"m{i}", "storage": 1.0, "speed": float(s)})()
             for i, s in enumerate(speeds)]
    fam = UsctecFamily(rows, L, S, F, seed=seed)
    fam.start(specs)
    trace = make_trace(n, 1, L, S, speeds=speeds, seed=seed)
    env = _Env(L, S, 1.0, 0.5, seed, False)
    vs = resolve_policies(["usctec"])
    sim_pl = _placements(vs, trace, rows, trace.configured, env, 16)["design"].placement
    return fam, sim_pl, speeds, rng


def _products(plan, code, A, B):
    """The runtime's worker products, by (piece, position)."""
    coded = code.encode(B)

    def H(task: TaskSpec):
        X = coded[task.arg] if task.cols is None else coded[task.arg][:, task.cols[0]:task.cols[1]]
        return F.matmul(A[task.rows[0]:task.rows[1]], X)

    return coded, H


@FAST
@given(n=st.integers(6, 10), L=st.integers(1, 3), S=st.integers(0, 2), seed=st.integers(0, 50),
       policy=st.sampled_from(USCTEC))
def test_simulator_plans_what_the_runtime_plans_and_decodes_from_the_same_results(
        n, L, S, seed, policy):
    rows = 12 * n
    fam, sim_pl, speeds, rng = _case(n, L, S, seed, rows)
    assert sim_pl == fam.placement
    ids = tuple(fam.placement.machines)
    present = Present(ids, {m: 1.0 for m in ids}, dict(zip(ids, speeds.tolist())))
    runtime_plan = fam.plan(policy, present, S, _Req())
    Ls, Ss, _ = step_code(policy, L, S, _Req.n_cols, F)
    sim_plan = resolve_policies([policy])[0].plan_fn()(sim_pl, ids, tuple(speeds.tolist()), Ls, Ss)
    assert sim_plan == runtime_plan
    A = F.asarray(rng.integers(0, 1000, (rows, 5)))
    B = F.asarray(rng.integers(0, 1000, (5, 2 * Ls)))
    slow = np.where(rng.random(n) < 0.3, 5.0, 1.0)
    eff = dict(zip(ids, (speeds / slow).tolist()))
    if REGISTRY[policy].pulls:
        _check_pull(sim_plan, sim_pl, eff, dict(zip(ids, speeds.tolist())), A, B)
    else:
        _check_whole(sim_plan, sim_pl, speeds, slow, A, B)


def _check_whole(plan, placement, speeds, slow, A, B):
    """The runtime's collector, fed the results in the order the simulator has them arrive,
    completes when the simulator says, from the positions the simulator says."""
    out = step_time(plan, placement, speeds, slow)
    code = lagrange_code(F, plan.L, plan.S)
    coded, H = _products(plan, code, A, B)
    col = LagrangeCollector(plan, code)
    avail = plan.available
    arrivals = sorted((out.finish[avail.index(m)], avail.index(m), pi, pos)
                      for pi, p in enumerate(plan.pieces) for pos, m in enumerate(p.machines))
    done_at = {}
    for t, _, pi, pos in arrivals:
        p = plan.pieces[pi]
        col.add(avail[_], TaskSpec("A", plan.groups[p.group].rows, pos, p.cols, pi, pos),
                H(TaskSpec("A", plan.groups[p.group].rows, pos, p.cols, pi, pos)))
        if pi in col.decoded and pi not in done_at:
            done_at[pi] = t
    assert col.done
    assert max(done_at.values()) == pytest.approx(out.time, rel=1e-12)
    assert np.allclose([done_at[pi] for pi in range(len(plan.pieces))], out.piece_times)
    Y = assemble(plan, col.decoded, coded.shape[2], F.dtype)[:, :B.shape[1]]
    assert np.array_equal(Y, F.matmul(A, B))


def _check_pull(plan, placement, eff, est, A, B):
    out = pull_step(plan, placement, eff, est, 1.0, record=True)
    sub = out.plan
    code = lagrange_code(F, sub.L, sub.S)
    coded, H = _products(sub, code, A, B)
    col = LagrangeCollector(sub, code)
    for t, m, u in out.filed:
        task = TaskSpec("A", u.rows, u.position, u.cols, u.piece, u.position)
        before = u.piece in col.decoded
        col.add(m, task, H(task))
        if not before and u.piece in col.decoded:  # the runtime decodes it where the sim does
            assert out.decoded_at[u.piece] == t
    assert col.done and set(out.decoded_at) == set(range(len(sub.pieces)))
    assert max(out.decoded_at.values()) == pytest.approx(out.time)
    for m, rows in out.ran:
        assert all(m in hs for _, _, hs in placement.holders_of(rows, [m]))
    Y = assemble(sub, col.decoded, coded.shape[2], F.dtype)[:, :B.shape[1]]
    assert np.array_equal(Y, F.matmul(A, B))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(7, 14), seed=st.integers(0, 100), policy=st.sampled_from(PULLED),
       slowed=st.lists(st.integers(0, 13), max_size=4, unique=True),
       crashed=st.lists(st.integers(0, 13), max_size=2, unique=True),
       units=st.sampled_from(["auto", 1, 3]), chunks=st.sampled_from([2, 8]),
       with_cost=st.booleans())
def test_a_pull_step_never_runs_a_unit_where_its_rows_are_not_stored(
        n, seed, policy, slowed, crashed, units, chunks, with_cost):
    from elastic_coded.families.usctec import design_placement

    L, S = 3, 2
    ids = [f"m{i}" for i in range(n)]
    speeds = np.random.default_rng(seed).uniform(1, 4, n)
    placement = design_placement(20 * n, ids, [0.8] * n, speeds, L, S, samples=1, seed=seed)
    plan = REGISTRY[policy].plan(placement, tuple(ids), tuple(speeds.tolist()), L, S)
    slow = {ids[i]: 8.0 for i in slowed if i < n}
    eff = {m: s / slow.get(m, 1.0) for m, s in zip(ids, speeds)}
    crash = [ids[i] for i in crashed if i < n]
    out = pull_step(plan, placement, eff, dict(zip(ids, speeds)), 0.5, crashed=crash,
                    options=pl.PullOptions(units=units, chunks=chunks),
                    cost=RuntimeCost() if with_cost else None, record=True)
    assert out.ran
    for m, rows in out.ran:
        assert all(m in hs for _, _, hs in placement.holders_of(rows, [m])), (m, rows)
    # crashed machines return nothing; the step completes (every row has another holder)
    assert not set(crash) & {m for _, m, _ in out.filed}
    assert math.isfinite(out.time)


def test_usctec_auto_chooses_as_the_runtime_does():
    """The runtime's choice (its executor's ``_mode``) and the simulator's (``auto_mode``) on
    the same plan, speeds and histories."""
    from types import SimpleNamespace

    from elastic_coded.families.usctec.executor_pull import _mode
    from elastic_coded.runtime.context import StepContext

    fam, placement, speeds, _ = _case(12, 4, 2, 3, 240)
    ids = tuple(placement.machines)
    sp = dict(zip(ids, speeds.tolist()))
    plan = REGISTRY["usctec-auto"].plan(placement, ids, tuple(speeds.tolist()), 4, 2)
    total = pull_total(plan)  # 8 columns, L = 4: no zero columns
    seen = {}
    for ts in (0.05, 0.5, 5.0, 30.0):
        for hist in ((), ((True, 0),), ((True, 2),), ((False, 0),) * 3, ((False, 0),) * 20):
            ctx = StepContext(step=0, F=field("real"), time_scale=ts, history=hist)
            want = _mode(ctx, plan, SimpleNamespace(speeds=sp), 8)
            got = ps.auto_mode(plan, hist, sp, total, total / ts)
            assert got == want
            seen[want] = True
    assert set(seen) == {"pull", "eager", "lean"}


def test_simulate_runs_every_registry_policy_with_and_without_cost():
    pols = tuple(USCTEC) + ("ideal",)
    kw = dict(L=4, S=2, policies=pols, delays=IIDStragglers(k=2, factor=5),
              speeds=LinearSpeeds(1, 4), time_scale=0.357 * 30, baseline="dynamic",
              deadline=3.0, learn_speeds=True, design_samples=2, check_plans=True,
              churn={"seed": 2, "random": {"leave": 0.05, "crash": 0.05, "join": 0.05,
                                           "per_machine": True, "join_speed": [1, 4],
                                           "join_storage": 1.0, "min_machines": 8}})
    base = simulate(12, 8, **kw)
    cost = RuntimeCost(step_s=0.03, call_s=0.002, round_trip_s=0.001, plan_s=0.01)
    paid = simulate(12, 8, cost=cost, **kw)
    assert base.counts["crashes"] + base.counts["leaves"] > 0
    for p in USCTEC:
        t0, t1 = base.times[p], paid.times[p]
        assert np.all(np.isfinite(t0)) and np.all(t0 > 0)
        # learning follows what was measured, so the runs' estimates differ: medians
        assert np.median(t1 - t0) >= cost.step_s, p
        assert t1[0] - t0[0] >= cost.fixed_s - 1e-12, p   # the first step waits for its plan
    # a speed-blind whole plan learns nothing: every step pays at least the fixed cost
    assert np.all(paid.times["uncoded"] >= base.times["uncoded"] + cost.step_s - 1e-12)
    # usctec-pull and usctec-auto share the pull rules: when auto pulls, the same step time
    auto, pull = base.details["usctec-auto"]["mode"], base.times["usctec-pull"]
    same = auto == 0
    assert np.allclose(base.times["usctec-auto"][same], pull[same])
    # dynamic under the cost pays its many calls: more than the fixed cost over no cost
    assert np.median(paid.times["dynamic"] - base.times["dynamic"]) > cost.fixed_s


@pytest.mark.parametrize("policy", ["uncoded", "usctec", "usctec-pull"])
def test_planning_is_paid_only_where_the_plan_asked_ahead_cannot_be_used(policy):
    """The runtime asks for a step's plan as the step before starts: the simulator charges
    the planning whole on the first step and after a membership change (the plan asked ahead
    is dropped), else only what it outlasts the step before."""
    from elastic_coded.churn import ChurnScript, StepEvents

    kw = dict(L=4, S=2, policies=(policy,), baseline=None, speeds=LinearSpeeds(1, 4),
              time_scale=0.357 * 30, design_samples=2,
              churn=ChurnScript(events={3: StepEvents(leave=("m5",))}))
    base = simulate(12, 6, **kw).times[policy]
    for plan_s in (0.05, 10.0):   # hidden by the step before, or outlasting it
        cost = RuntimeCost(step_s=0.01, call_s=0.0, round_trip_s=0.0, plan_s=plan_s,
                           worker_call_s=0.0)
        paid = simulate(12, 6, cost=cost, **kw).times[policy]
        for t in range(6):
            whole = t in (0, 3)   # the first step; m5 left before step 3
            charge = plan_s if whole else max(0.0, plan_s - paid[t - 1])
            assert paid[t] - base[t] == pytest.approx(0.01 + charge), (plan_s, t)


def test_auto_pays_its_whole_plan_when_the_plan_asked_ahead_was_for_another_execution():
    """``usctec-auto``'s plan asked ahead is for the execution the driver expects of the next
    step; when the step runs another, the runtime asks again and waits for the whole plan.  On
    a calm trace the first step pulls, the driver expects the next to pull (a pull step is
    expected to see stragglers) but, none seen, it goes lean: asked again; the lean steps after
    it are expected lean."""
    kw = dict(L=4, S=2, policies=("usctec-auto",), baseline=None, speeds=LinearSpeeds(1, 4),
              time_scale=30.0, design_samples=2)
    base = simulate(12, 6, **kw).times["usctec-auto"]
    plan_s = 10.0
    cost = RuntimeCost(step_s=0.01, call_s=0.0, round_trip_s=0.0, plan_s=plan_s,
                       worker_call_s=0.0)
    res = simulate(12, 6, cost=cost, **kw)
    paid, d = res.times["usctec-auto"], res.details["usctec-auto"]
    assert d["mode"].tolist() == [0, 2, 2, 2, 2, 2]   # pull, then lean
    assert d["asked_again"].tolist() == [0, 1, 0, 0, 0, 0]
    for t in range(6):
        charge = plan_s if t in (0, 1) else max(0.0, plan_s - paid[t - 1])
        assert paid[t] - base[t] == pytest.approx(0.01 + charge), t


def test_auto_goes_lean_when_no_one_straggles_and_pulls_when_they_do():
    kw = dict(L=4, S=2, policies=("usctec-auto",), baseline=None, speeds=LinearSpeeds(1, 4),
              time_scale=30.0, design_samples=2)
    calm = simulate(12, 6, **kw)
    modes = calm.details["usctec-auto"]["mode"]
    assert modes[0] == 0 and np.all(modes[1:] == 2)  # first pull sees no one: then lean
    rough = simulate(12, 6, delays=IIDStragglers(k=2, factor=5), **kw)
    assert np.all(rough.details["usctec-auto"]["mode"] == 0)


def test_auto_plans_only_the_execution_it_runs(monkeypatch):
    """As the runtime's driver does, the simulator chooses ``usctec-auto``'s execution before
    its plan and asks for that plan alone; the step then runs it."""
    from elastic_coded.families.usctec import pull as pull_mod

    asked, real = [], pull_mod.coded_pull_plan

    def spy(*a, **kw):
        asked.append(kw.get("modes"))
        return real(*a, **kw)

    monkeypatch.setattr(pull_mod, "coded_pull_plan", spy)
    res = simulate(12, 20, L=4, S=2, policies=("usctec-auto",), baseline=None,
                   delays=IIDStragglers(p=0.3, factor=5), speeds=LinearSpeeds(1, 4),
                   time_scale=0.357 * 30, design_samples=2, learn_speeds=True,
                   plan_tol=0.0)
    names = {v: k for k, v in MODES.items()}
    ran = [names[int(m)] for m in res.details["usctec-auto"]["mode"]]
    made = np.flatnonzero(res.plan_seconds["usctec-auto"] > 0)   # the steps that planned
    assert len(asked) == len(made) == res.replans["usctec-auto"] > 0
    assert all(a is not None and len(a) == 1 for a in asked), asked
    assert [a[0] for a in asked] == [ran[t] for t in made]
    assert len({a[0] for a in asked}) >= 2   # the trace makes it change its mind


def test_runtime_cost_is_checked_and_loads(tmp_path):
    with pytest.raises(ValueError, match="call_s"):
        RuntimeCost(call_s=-1)
    with pytest.raises(ValueError, match="per_process"):
        RuntimeCost(per_process=0)
    with pytest.raises(ValueError, match="not fields"):
        RuntimeCost.from_dict({"step": 1})
    c = RuntimeCost(step_s=0.05, call_s=0.004)
    path = tmp_path / "cost.json"
    c.save(str(path), host="test")
    assert RuntimeCost.load(str(path)) == c
    assert json.loads(path.read_text())["host"] == "test"
    with pytest.raises(TypeError, match="cost"):
        simulate(8, 2, L=2, S=1, cost={"step_s": 1})
    with pytest.raises(ValueError, match="deadline"):
        simulate(8, 2, L=2, S=1, deadline=0.5)


def test_host_floor_hand_checked():
    """Every process sharing 2 cores: a step's host CPU over them; no floor without cores."""
    c = RuntimeCost(host_cpus=2, host_step_s=0.01, host_machine_s=0.001, host_call_s=0.002,
                    host_cancel_s=0.0005)
    # 0.01 + 10 * 0.001 + 100 * 0.002 + 20 * 0.0005 = 0.23 CPU seconds over 2 cores
    assert c.host_floor(10, 100, 20) == pytest.approx(0.115)
    assert RuntimeCost(host_call_s=1.0).host_floor(10, 100, 20) == 0.0
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="host_cpus"):
            RuntimeCost(host_cpus=bad)
    with pytest.raises(ValueError, match="host_cancel_s"):
        RuntimeCost(host_cancel_s=-0.1)


@pytest.mark.parametrize("policy", ["dynamic", "usctec-pull", "usctec"])
def test_a_step_ends_no_sooner_than_the_host_can_do_its_cpu_work(policy):
    """With a host floor, a step takes the longer of the driver's model and its host CPU over
    the cores, counted from its own calls and cancellations; a floor below every step changes
    nothing."""
    from dataclasses import replace

    from elastic_coded.sim import pull as sim_pull

    counted = []
    real = sim_pull._Run.run

    def spy(self):
        t = real(self)
        counted.append((self.calls, self.cancelled))
        return t

    kw = dict(L=4, S=2, policies=(policy,), baseline=None, delays=IIDStragglers(k=2, factor=5),
              speeds=LinearSpeeds(1, 4), time_scale=0.05 * 30, design_samples=2)
    cost = RuntimeCost(step_s=0.01, call_s=1e-4, round_trip_s=1e-4, plan_s=0.0)
    base = simulate(12, 4, cost=cost, **kw).times[policy]
    low = replace(cost, host_cpus=2, host_call_s=1e-9)
    assert np.allclose(simulate(12, 4, cost=low, **kw).times[policy], base)
    high = replace(cost, host_cpus=2, host_step_s=0.02, host_machine_s=0.001, host_call_s=0.05,
                   host_cancel_s=0.01)
    sim_pull._Run.run = spy
    try:
        floored = simulate(12, 4, cost=high, **kw).times[policy]
    finally:
        sim_pull._Run.run = real
    if policy == "usctec":   # one call per worker process of 4 machines: 3 calls, no backups
        want = [high.host_floor(12, 3)] * 4
    else:
        assert len(counted) == 4 and sum(k for _, k in counted) > 0
        want = [high.host_floor(12, n, k) for n, k in counted]
    assert np.all(want > base)
    assert floored == pytest.approx(want)


def test_whole_plan_cost_hand_checked():
    """Two machines, one call each in one process: each starts after the call's dispatch and
    the worker's cost; the driver takes the two results in; plus the fixed cost."""
    from elastic_coded.sim.cost import dispatch_offsets, driver_finish

    c = RuntimeCost(step_s=0.1, call_s=0.01, round_trip_s=0.02, plan_s=0.05,
                    worker_call_s=0.003, per_process=2)
    off = dispatch_offsets(np.array([True, False, True, True]), c)
    assert off.tolist() == pytest.approx([0.013, 0.0, 0.013, 0.023])
    # results at 1.0 and 1.01, 0.02 each (each streamed result is taken in on its own): the
    # second waits for the driver (1.02), taken in by 1.04; the one at 5.0 is not waited for
    assert driver_finish(np.array([1.0, 1.01, 5.0]), 1.01, c) == pytest.approx(1.04)


def _pull_with_wakes(seed: int, scan: float):
    """A usctec-pull step of 10 machines, two of them 6x slow, with the driver's wakes."""
    from elastic_coded.families.usctec import design_placement

    n, L, S = 10, 3, 2
    ids = [f"m{i}" for i in range(n)]
    speeds = np.random.default_rng(seed).uniform(1, 4, n)
    placement = design_placement(20 * n, ids, [0.8] * n, speeds, L, S, samples=1, seed=seed)
    plan = REGISTRY["usctec-pull"].plan(placement, tuple(ids), tuple(speeds.tolist()), L, S)
    eff = {m: s / (6.0 if i < 2 else 1.0) for i, (m, s) in enumerate(zip(ids, speeds))}
    cost = RuntimeCost(call_s=1e-3, round_trip_s=1e-3, scan_s=scan)
    out = pull_step(plan, placement, eff, dict(zip(ids, speeds)), 20.0, cost=cost,
                    record=True)
    assert math.isfinite(out.time)
    return out


@FAST
@given(seed=st.integers(0, 50), scan=st.sampled_from([0.0, 1e-3, 2e-2]))
def test_a_busy_driver_spends_no_wake_up_while_a_result_waits(seed, scan):
    """A wake-up is the runtime's wait timing out: it starts when the driver is free, so it
    never comes after a result it could have taken (with a cost whose per-event scan keeps the
    driver busier than the wake-up interval, and without one)."""
    for t, due in _pull_with_wakes(seed, scan).wakes:
        assert t < due, (t, due)


def test_the_driver_wakes_while_stragglers_units_fall_overdue():
    """Without a scan cost, the stragglers' units fall overdue between results, so the driver
    does wake (not in every step: some steps' stragglers are stolen from in time)."""
    woke = [bool(_pull_with_wakes(seed, 0.0).wakes) for seed in range(10)]
    assert sum(woke) >= 5, woke


def _pull_case(policy: str, seed: int, cost, slow: float = 6.0, rng=None):
    """A pull step of 10 machines, two of them ``slow`` times slower, under ``cost`` (``rng``:
    the host's order of service, ``pull_step``'s)."""
    from elastic_coded.families.usctec import design_placement

    n, L, S = 10, 3, 2
    ids = [f"m{i}" for i in range(n)]
    speeds = np.random.default_rng(seed).uniform(1, 4, n)
    placement = design_placement(20 * n, ids, [0.8] * n, speeds, L, S, samples=1, seed=seed)
    plan = REGISTRY[policy].plan(placement, tuple(ids), tuple(speeds.tolist()), L, S)
    eff = {m: s / (slow if i < 2 else 1.0) for i, (m, s) in enumerate(zip(ids, speeds))}
    return pull_step(plan, placement, eff, dict(zip(ids, speeds)), 20.0, cost=cost, rng=rng)


@FAST
@given(seed=st.integers(0, 50), decide=st.sampled_from([1e-3, 1e-2]))
def test_the_coded_queues_decisions_are_paid_on_the_driver(seed, decide):
    """``decide_s`` is the driver's cost of each decision of the coded queue: the driver makes
    them one after another before the last piece decodes, so a step takes at least their
    count times ``decide_s``; ``dynamic``'s queue is not charged (its cost is in ``call_s``).
    Not asserted: that a step is no faster with them.  A later decision can hand a unit to
    another machine, and a greedy schedule is not monotone in its delays (seed 3 at 1 ms:
    1.152 s with the charge, 1.163 s without)."""
    base = RuntimeCost(step_s=0.0, call_s=1e-4, round_trip_s=1e-4, plan_s=0.0)
    free = _pull_case("usctec-pull", seed, base)
    paid = _pull_case("usctec-pull", seed, replace(base, decide_s=decide))
    assert free.decisions >= free.calls > 0
    assert paid.time >= paid.decisions * decide
    dyn = [_pull_case("dynamic", seed, c) for c in (base, replace(base, decide_s=decide))]
    assert dyn[0].time == dyn[1].time and dyn[0].decisions > 0


def test_the_simulated_queue_measures_machines_on_their_busy_time(queue_call_times):
    """As the runtime's emulated machines report it, a call's time for the coded queue's
    rates is the machine's busy time (its work over its effective speed, times the time
    scale), not that plus the worker's cost per call."""
    from elastic_coded.families.usctec import design_placement

    seen = queue_call_times
    n, L, S = 10, 3, 2
    ids = [f"m{i}" for i in range(n)]
    speeds = np.random.default_rng(4).uniform(1, 4, n)
    placement = design_placement(20 * n, ids, [0.8] * n, speeds, L, S, samples=1, seed=4)
    plan = REGISTRY["usctec-pull"].plan(placement, tuple(ids), tuple(speeds.tolist()), L, S)
    eff = {m: s / (6.0 if i < 2 else 1.0) for i, (m, s) in enumerate(zip(ids, speeds))}
    cost = RuntimeCost(step_s=0.0, call_s=1e-4, round_trip_s=1e-4, worker_call_s=0.02)
    total = pull_total(plan)
    pull_step(plan, placement, eff, dict(zip(ids, speeds)), 20.0, cost=cost)
    assert len(seen) >= n
    for m, w, t in seen:
        assert t == pytest.approx(w / total * 20.0 / eff[m], rel=1e-12)


@pytest.mark.parametrize("policy", ["usctec-pull", "dynamic"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_workers_cost_of_a_queued_call_is_hidden_behind_the_one_before(policy, seed):
    """``worker_call_s`` is paid as a call arrives, while its machine may still compute the
    call before (the runtime's worker takes queued calls in as it paces the running one): on
    machines without stragglers, with 8-11 calls each and nothing else charged, a 50 ms worker
    cost adds less than two calls' cost to the step, not one per call.  (With stragglers the
    tail's steals go to idle machines, which do wait for it.)"""
    base = RuntimeCost(step_s=0.0, call_s=0.0, round_trip_s=0.0, plan_s=0.0, worker_call_s=0.0)
    free = _pull_case(policy, seed, base, slow=1.0)
    paid = _pull_case(policy, seed, replace(base, worker_call_s=0.05), slow=1.0)
    assert paid.calls >= 8 * 10
    assert paid.time - free.time < 2 * 0.05, (free.time, paid.time)


@pytest.mark.parametrize("policy", ["usctec-pull", "dynamic"])
def test_the_hosts_cores_take_a_bursts_calls_in_turn(policy):
    """With ``host_cpus``, the calls' host CPU goes through the cores in turn: the burst of a
    step's first calls delays their starts even where the host's CPU over the whole step (the
    floor) is well below the step's time.  A delay may reorder a pull step for the better, so
    the steps are compared over ten seeds: later on average by at least a tenth of the first
    wave's host time (its ``2 x 10`` calls over the cores)."""
    base = RuntimeCost(step_s=0.0, call_s=1e-4, round_trip_s=1e-4, plan_s=0.0)
    host = replace(base, host_cpus=2, host_call_s=0.005, host_cancel_s=0.002)
    free = [_pull_case(policy, seed, base) for seed in range(10)]
    paid = [_pull_case(policy, seed, host) for seed in range(10)]
    for f, p in zip(free, paid):
        assert host.host_floor(10, p.calls, p.cancelled) < 0.6 * f.time
    gain = np.mean([p.time - f.time for f, p in zip(free, paid)])
    assert gain >= 0.1 * 20 * host.host_call_s / host.host_cpus, gain
