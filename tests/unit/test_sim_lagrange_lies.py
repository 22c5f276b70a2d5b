"""What a lie costs a USCTEC-family whole-plan step in the simulator
(``sim/lagrange_lies.py``): detection after the decode, repair calls as the runtime's
``families/usctec/verify_repair.py`` makes them, the liars caught."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_coded.churn import CAUGHT_LIMIT
from elastic_coded.families.usctec import design_placement
from elastic_coded.schemes.registry import REGISTRY
from elastic_coded.sim import simulate
from elastic_coded.sim.cost import RuntimeCost
from elastic_coded.sim.executor import _Compiled, _PlacementIndex
from elastic_coded.sim.lagrange_lies import _holders, repair_lies
from elastic_coded.sim.trace import make_trace


def _plan(speeds, L=2, S=1, rows=24, storage=1.0, seed=0):
    ids = [f"m{i}" for i in range(len(speeds))]
    pl = design_placement(rows, ids, [storage] * len(ids), np.asarray(speeds), L, S,
                          samples=1, seed=seed)
    plan = REGISTRY["usctec"].plan(pl, tuple(ids), tuple(float(s) for s in speeds), L, S)
    idx = _PlacementIndex(pl)
    return _Compiled(plan), (lambda: idx)


def _step(comp, eff, ts=1.0):
    f = comp.work / eff * ts
    T = np.append(f, np.inf)[comp.piece_idx]
    return f, float(np.sort(T, axis=1)[:, comp.L - 1].max())


def test_a_lie_used_is_repaired_from_the_results_in_hand_or_asked_of_the_planned_machine():
    """Four machines, L=2, S=1; m0 (4x) is in every piece, so every piece decodes from its lie.
    All in hand at T: repaired at no cost.  With m3 10x slow, the two pieces m3 holds have one
    honest result in hand and ask m3 for theirs, one after the other."""
    comp, index = _plan([4.0, 1.0, 1.0, 1.0])
    assert all(0 in row for row in comp.piece_idx.tolist())   # m0 in every piece
    eff = np.array([4.0, 1.0, 1.0, 1.0])
    lying = np.array([True, False, False, False])
    f, T = _step(comp, eff)
    fix = repair_lies(comp, index, f, T, lying, eff, 1.0)
    assert (fix.time, fix.repairs, fix.calls, fix.caught) == (pytest.approx(T), 3, 0, ("m0",))
    eff[3] = 0.1
    f, T = _step(comp, eff)
    assert T == pytest.approx(1 / 3)
    fix = repair_lies(comp, index, f, T, lying, eff, 1.0)
    w = comp.task_work[0] / 0.1
    assert (fix.repairs, fix.calls, fix.caught) == (3, 2, ("m0",))
    assert fix.time == pytest.approx(T + 2 * w)
    c = RuntimeCost(call_s=0.01, round_trip_s=0.02)
    assert repair_lies(comp, index, f, T, lying, eff, 1.0, cost=c).time == pytest.approx(
        T + 2 * w + 2 * 0.03)


def test_a_lie_not_decoded_from_costs_nothing():
    comp, index = _plan([4.0, 1.0, 1.0, 1.0])
    eff = np.array([4.0, 1.0, 1.0, 0.01])   # m3 never among the first L of its pieces
    f, T = _step(comp, eff)
    fix = repair_lies(comp, index, f, T, np.array([False, False, False, True]), eff, 1.0)
    assert (fix.time, fix.repairs, fix.calls, fix.caught) == (T, 0, 0, ())


def test_the_other_holders_are_asked_when_the_planned_machines_cannot_answer():
    """The pieces a crashed machine held have one honest result in hand and no planned
    machine left to ask for another: round 0 asks no one, round 1 asks a live holder of the
    piece's rows not caught for a missing position."""
    comp, index = _plan([4.0, 1.0, 1.0, 1.0])
    # three blocks of 8 rows, each stored by the three machines of its piece
    assert [tuple(b[2]) for b in (index().spans((0, 8), {"m0", "m1", "m2", "m3"}),
                                 index().spans((16, 24), {"m0", "m1", "m2", "m3"}))
            for b in b] == [("m0", "m1", "m2"), ("m0", "m2", "m3")]
    eff = np.array([4.0, 1.0, 1.0, 1.0])
    crashed = np.array([False, False, True, False])
    f, T = _step(comp, eff)
    f[2] = np.inf
    T = float(np.sort(np.append(f, np.inf)[comp.piece_idx], axis=1)[:, 1].max())
    fix = repair_lies(comp, index, f, T, np.array([True, False, False, False]), eff, 1.0,
                      crashed)
    # pieces (m0, m1, m2) and (m0, m2, m3): one honest result in hand each (m1, m3), m2
    # crashed, m0 caught; round 1 asks the only other holder, the one in hand, for position
    # 0: m1 and m3 one call each, together
    assert comp.piece_idx.tolist()[0] == [0, 1, 2] and comp.piece_idx.tolist()[2] == [0, 2, 3]
    assert fix.calls == 2 and fix.caught == ("m0",)
    assert fix.time == pytest.approx(T + comp.task_work[0] / 1.0)


def test_a_step_with_no_one_left_to_ask_is_lost():
    comp, index = _plan([4.0, 1.0, 1.0, 1.0])
    eff = np.ones(4)
    f, T = _step(comp, eff)
    lying = np.array([True, True, True, True])
    fix = repair_lies(comp, index, f, T, lying, eff, 1.0)
    assert math.isinf(fix.time) and set(fix.caught) <= {"m0", "m1", "m2", "m3"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10 ** 6), n=st.integers(5, 9), L=st.integers(1, 3),
       S=st.integers(1, 2), data=st.data())
def test_a_lie_never_helps_and_costs_only_when_decoded_from(seed, n, L, S, data):
    rng = np.random.default_rng(seed)
    speeds = rng.uniform(1, 4, n)
    comp, index = _plan(speeds, L, S, rows=12 * n, storage=min(1.0, 2.0 * (L + S) / n),
                        seed=seed % 97)
    eff = speeds / np.where(rng.random(n) < 0.3, 5.0, 1.0)
    liars = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2, unique=True))
    lying = np.zeros(n, dtype=bool)
    lying[liars] = True
    f, T = _step(comp, eff)
    fix = repair_lies(comp, index, f, T, lying, eff, 1.0)
    used = set()
    for row in comp.piece_idx.tolist():
        own = sorted((j for j in row if j < n), key=lambda j: (f[j], comp.rank[j]))
        used |= set(own[:L])
    avail = comp.plan.available
    assert set(fix.caught) <= {avail[j] for j in liars}
    if not used & set(liars):
        assert (fix.time, fix.repairs, fix.calls) == (T, 0, 0)
    else:
        assert fix.repairs >= 1 and fix.time >= T and len(fix.caught) >= 1
        if math.isfinite(fix.time):
            assert (fix.calls == 0) == (fix.time == T)
        else:  # lost: only where a piece has no honest machine left to compute it
            honest = lambda pi: set(_holders(comp, index, pi)) - {avail[j] for j in liars}  # noqa: E731
            assert any(not honest(pi) for pi in range(len(comp.plan.pieces)))


def _liar_trace(steps=6):
    churn = {"seed": 1, "events": [{"step": 1, "corrupt": ["m0"], "forever": True}]}
    return make_trace(6, steps, 2, 1, churn=churn, speeds=[8.0, 1, 1, 1, 1, 1])


@pytest.mark.parametrize("policy", ["usctec", "uncoded", "usctec-auto", "usctec-pull"])
def test_simulate_pays_for_a_fast_liar_after_the_decode_until_it_is_excluded(policy):
    tr = _liar_trace()
    kw = dict(L=2, S=1, policies=(policy,), baseline=None, time_scale=1.0, design_samples=2)
    res = simulate(trace=tr, **kw)
    honest = simulate(6, 6, speeds=[8.0, 1, 1, 1, 1, 1], **kw)
    det = res.details[policy]
    gone = 1 + CAUGHT_LIMIT
    lied = np.zeros(tr.steps, dtype=bool)
    lied[1:gone] = True
    assert np.all(det["caught"][lied] == 1)     # the fastest: always decoded from, pulled too
    assert det["repairs"][~lied].sum() == 0 and det["caught"][~lied].sum() == 0
    assert np.all(res.times[policy][lied] >= honest.times[policy][lied] - 1e-12)
    assert np.all(np.isfinite(res.times[policy]))


def _pull_case(seed, n=6, L=2, S=1):
    from elastic_coded.families.usctec import design_placement

    ids = [f"m{i}" for i in range(n)]
    speeds = np.random.default_rng(seed).uniform(1, 4, n)
    pl = design_placement(12 * n, ids, [1.0] * n, speeds, L, S, samples=1, seed=seed)
    plan = REGISTRY["usctec-pull"].plan(pl, tuple(ids), tuple(speeds.tolist()), L, S)
    return plan, pl, dict(zip(ids, speeds.tolist()))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), liars=st.lists(st.integers(0, 5), min_size=1, max_size=2,
                                                    unique=True))
def test_a_pull_step_pays_for_its_liars_after_the_decode(seed, liars):
    """A pull step decodes from the first ``L`` positions taken in, a liar's among them, and
    pays as the runtime's check does (:func:`~elastic_coded.sim.lagrange_lies.repair`): a lie
    never shortens the step, only liars are caught, a liar is caught only where a piece used
    it, and an unused lie costs nothing."""
    from elastic_coded.sim import pull_step

    plan, pl, sp = _pull_case(seed)
    lying = [f"m{i}" for i in liars]
    honest = pull_step(plan, pl, sp, sp, 1.0)
    got = pull_step(plan, pl, sp, sp, 1.0, lying=lying)
    assert honest.lies is None and got.lies is not None
    fix = got.lies
    assert set(fix.caught) <= set(lying)
    assert got.time >= honest.time - 1e-12
    if fix.repairs == 0:   # no piece used a lie: as if honest
        assert got.time == pytest.approx(honest.time) and fix.caught == ()
    else:
        assert fix.caught and (fix.calls == 0) == (got.time == pytest.approx(honest.time))


def test_a_pull_step_asks_the_holders_again_for_a_liars_positions():
    """The fastest machine lies and every piece it holds decoded from it: each such piece is
    repaired (from results in hand, else calls to its holders), the liar is caught, and with
    every honest result in hand at the end the repair costs no time."""
    from elastic_coded.sim import pull_step

    plan, pl, sp = _pull_case(3)
    fast = max(sp, key=sp.get)
    honest = pull_step(plan, pl, sp, sp, 1.0)
    got = pull_step(plan, pl, sp, sp, 1.0, lying=[fast])
    assert got.lies.caught == (fast,) and got.lies.repairs >= 1
    assert got.time >= honest.time
