"""The pull rules (``usctec-auto``, ``usctec-pull``, ``dynamic``), checked on a small event-driven
simulation of machines with speeds and slowdowns: every piece completes from ``L`` distinct
positions (one copy for ``dynamic``), no unit runs where its rows are not stored, backups use
only the code's positions, and the plans keep USCTEC's constraints."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.families.usctec import design_placement, validate
from elastic_coded.families.usctec import pull as pl
from elastic_coded.schemes.policies import parse_options


def _placement(n, seed=0, rows=240, L=4, S=2, budget=1.0):
    return design_placement(rows, [f"m{i}" for i in range(n)], [budget] * n,
                            np.linspace(1, 4, n), L, S, samples=1, seed=seed)


def _stores(placement, m, rows) -> bool:
    return all(m in hs for _, _, hs in placement.holders_of(rows, [m]))


def _simulate(q, speeds: dict, slow: dict, need_done, depth=2, horizon=1e6, late=None):
    """Run queue ``q``: each machine computes its calls in order at ``speeds[m] / slow[m]``
    products per second; returns (finish time, calls per machine).  ``need_done(done)`` says
    when the step is complete.  ``late()``: the seconds each result is taken in after its call
    is done (none by default); the worker reports its call's own time."""
    free = {m: 0.0 for m in speeds}          # when the machine finishes what it holds
    inflight = {m: [] for m in speeds}       # (taken in, key, units, start, done)
    t, key, calls = 0.0, 0, {m: 0 for m in speeds}
    while True:
        q.refresh(t)
        for m in speeds:
            while q.calls_in_flight(m) < depth:
                units = q.next_for(m, t)
                if not units:
                    break
                for u in units:
                    assert q.can_run(m, u), "a unit went to a machine not storing its rows"
                work = sum(q.products[u] for u in units)
                start = max(t, free[m])
                free[m] = start + work * slow.get(m, 1.0) / speeds[m]
                key += 1
                q.sent(m, units, key, t)
                inflight[m].append((free[m] + (late() if late else 0.0), key, units, start,
                                    free[m]))
                calls[m] += 1
        if need_done():
            return t, calls
        nxt = min((f for lst in inflight.values() for f, *_ in lst), default=None)
        assert nxt is not None and nxt < horizon, "the queue stalled with pieces left"
        t = nxt
        for m, lst in inflight.items():
            for item in [x for x in lst if x[0] <= t]:
                lst.remove(item)
                _, k, units, start, done = item
                q.finished(m, k, t, done - start)
                for u in units:
                    if len(q.done.get(u.piece, ())) >= q.need and u.piece not in q.complete:
                        for m2, k2 in q.decoded(u.piece):
                            for x in [y for y in inflight[m2] if y[1] == k2]:
                                inflight[m2].remove(x)
                                q.dropped(m2, k2, t)
                                # a cancelled call frees the machine at once
                                free[m2] = max([t] + [y[4] for y in inflight[m2]])


def _coded(n, L, S, speeds, units, seed=0):
    placement = _placement(n, seed, L=L, S=S)
    avail = tuple(placement.machines)
    plan = pl.coded_pull_plan(placement, avail, [speeds[m] for m in avail], L, S)
    sub, queues = pl.subdivide(plan, units)
    cols = 2
    prod = {}
    for pi, piece in enumerate(sub.pieces):
        rows = sub.groups[piece.group].rows
        for pos in range(sub.K):
            prod[pl.Unit(pi, pos, rows, None)] = (rows[1] - rows[0]) * cols
    rate = {m: speeds[m] for m in avail}
    q = pl.CodedQueue(queues, L, L + S, sub.holders, prod, rate, batch_s=5.0)
    return placement, plan, sub, queues, q


@settings(max_examples=25, deadline=None)
@given(n=st.integers(7, 12), units=st.integers(1, 4), seed=st.integers(0, 3),
       slowed=st.lists(st.integers(0, 11), max_size=3, unique=True),
       factor=st.sampled_from([1.0, 5.0, 20.0]))
def test_coded_queue_completes_every_piece_from_L_distinct_positions(n, units, seed, slowed,
                                                                      factor):
    L, S = 4, 2
    speeds = {f"m{i}": float(s) for i, s in enumerate(np.linspace(1, 4, n))}
    placement, plan, sub, queues, q = _coded(n, L, S, speeds, units, seed)
    validate(plan.base, placement)
    slow = {f"m{i}": factor for i in slowed if i < n}
    t, _ = _simulate(q, speeds, slow, lambda: len(q.complete) == len(sub.pieces))
    for pi in range(len(sub.pieces)):
        assert len(q.done[pi]) >= L and q.done[pi] <= set(range(L + S))
    # the rows of every sub-group lie within what its holders store
    for g, hs in zip(sub.groups, sub.holders):
        assert len(hs) >= L + S and all(_stores(placement, m, g.rows) for m in hs)
    # nothing slowed: about the plan's own time (its loads at the speeds): a steal is made on
    # the expected times, so a thief may end a little after the victim would have (<= 1%)
    if not slow:
        share = plan.base.rows_computed()
        worst = max(share[m] * 2 / speeds[m] for m in share)
        assert t <= worst * 1.01


def test_a_slowed_machine_is_covered_by_coded_backups_and_steals():
    """A machine slowed 20x holds up nothing: its queued units are stolen and the units it is
    running are backed up at free positions elsewhere."""
    L, S = 4, 2
    n = 10
    speeds = {f"m{i}": float(s) for i, s in enumerate(np.linspace(1, 4, n))}
    placement, plan, sub, queues, q = _coded(n, L, S, speeds, 3)
    victim = max(queues, key=lambda m: len(queues[m]))
    t_slow, _ = _simulate(q, speeds, {victim: 20.0}, lambda: len(q.complete) == len(sub.pieces))
    _, _, _, _, q0 = _coded(n, L, S, speeds, 3)
    t0, _ = _simulate(q0, speeds, {}, lambda: len(q0.complete) == len(sub.pieces))
    assert q.stolen > 0 and q.backups > 0
    # waiting for the victim would take 20x its share; the step takes far less
    share = plan.base.rows_computed()[victim] * 2 / speeds[victim]
    assert t_slow < 20 * share / 2
    assert t_slow < 2.5 * t0


def test_backups_never_exceed_the_codes_positions():
    L, S = 2, 1
    n = 8
    speeds = {f"m{i}": 1.0 for i in range(n)}
    placement, plan, sub, queues, q = _coded(n, L, S, speeds, 2)
    slow = {"m0": 50.0, "m1": 50.0, "m2": 50.0}
    _simulate(q, speeds, slow, lambda: len(q.complete) == len(sub.pieces))
    for _pi, pos in q.done.items():
        assert pos <= set(range(L + S))


def test_dynamic_queue_backs_up_only_once_the_queue_is_empty():
    n = 8
    placement = _placement(n)
    avail = tuple(placement.machines)
    plan = pl.dynamic_plan(placement, avail, [1.0] * n, 1, 0, chunks=32)
    validate(plan.base, placement)
    assert plan.copies and plan.base.L == 1
    units = [pl.Unit(i, 0, plan.groups[p.group].rows) for i, p in enumerate(plan.pieces)]
    prod = {u: u.num_rows for u in units}
    q = pl.DynamicQueue(units, plan.holders, prod)
    speeds = {m: 1.0 for m in avail}
    seen_backup_with_queue = []
    orig = q.next_for

    def watch(m, now):
        left = list(q.queue)
        out = orig(m, now)
        if out and out[0] not in left and left:
            seen_backup_with_queue.append(out[0])
        return out

    q.next_for = watch
    _simulate(q, speeds, {"m3": 10.0}, lambda: len(q.complete) == len(units))
    assert not seen_backup_with_queue
    assert q.backups >= 1 and len(q.copied) == q.backups
    # chunks cut at the placement's blocks: each is stored whole by its holders
    for g, hs in zip(plan.groups, plan.holders):
        assert hs and all(_stores(placement, m, g.rows) for m in hs)


def test_subdivide_keeps_the_plan_and_cuts_each_share():
    n, L, S = 9, 3, 2
    placement = _placement(n, L=L, S=S)
    avail = tuple(placement.machines)
    plan = pl.coded_pull_plan(placement, avail, list(np.linspace(1, 3, n)), L, S)
    sub, queues = pl.subdivide(plan, 4)
    validate(sub.base, placement)
    assert sub.base.rows_computed() == plan.base.rows_computed()
    for _m, q in queues.items():
        assert len(q) >= 4
    with pytest.raises(ValueError, match="units"):
        pl.subdivide(plan, 0)


def test_chunk_rows_partitions_and_respects_blocks():
    placement = _placement(8)
    rows = pl.chunk_rows(placement.blocks, placement.num_rows, 17)
    assert rows[0][0] == 0 and rows[-1][1] == placement.num_rows
    assert all(a < b for a, b in rows)
    assert all(rows[i][1] == rows[i + 1][0] for i in range(len(rows) - 1))
    starts = {a for a, _ in rows}
    assert {b.start for b in placement.blocks} <= starts
    with pytest.raises(ValueError, match="chunks"):
        pl.chunk_rows(placement.blocks, 10, 0)


def test_units_for_and_prefer_pull():
    assert pl.units_for(10.0, 12, 0.003) == pl.AUTO_UNITS[1]
    assert pl.units_for(0.01, 12, 0.003) == pl.AUTO_UNITS[0]
    assert pl.units_for(0.0, 12, 0.003) == pl.AUTO_UNITS[1]
    # the redundancy's cost against the calls': S/L * T vs machines * (units + 2) * cost
    assert pl.prefer_pull(1.0, 4, 2, 12, 4, 0.003)           # 0.5 > 0.216
    assert not pl.prefer_pull(0.05, 4, 2, 12, 2, 0.003)      # 0.025 < 0.144
    assert not pl.prefer_pull(10.0, 4, 0, 12, 2, 0.003)      # no redundancy to save


def test_choose_mode():
    calm, slow, blind = (True, 0), (True, 2), (False, 0)
    assert pl.choose_mode([], pull_pays=False) == "lean"        # nothing seen yet: probe
    assert pl.choose_mode([], pull_pays=True) == "pull"
    assert pl.choose_mode([slow, calm], pull_pays=True) == "lean"
    assert pl.choose_mode([calm, slow], pull_pays=True) == "pull"
    assert pl.choose_mode([calm, slow], pull_pays=False) == "eager"
    assert pl.choose_mode([calm, slow, blind], pull_pays=False) == "eager"
    # the whole (L, S) plan cannot see stragglers: a lean probe every PROBE_EVERY steps
    hist = [slow] + [blind] * pl.PROBE_EVERY
    assert pl.choose_mode(hist, pull_pays=False) == "lean"
    assert pl.choose_mode(hist[:-1], pull_pays=False) == "eager"


def test_choose_mode_at_real_speed_goes_lean_when_eager_costs_more_than_the_straggler():
    """Timed steps (real speed): after a lean step that saw a straggler, the eager steps are
    set against its time once ``EAGER_TRIAL`` of them ran; untimed ones keep the old rule."""
    n = pl.EAGER_TRIAL
    slow_lean = (True, 1, 0.050)
    dear, cheap = (False, 0, 0.075), (False, 0, 0.020)
    close = (False, 0, 0.050 * pl.EAGER_MARGIN * 0.98)   # longer, but within the margin
    assert pl.choose_mode([slow_lean] + [dear] * (n - 1), pull_pays=False) == "eager"
    assert pl.choose_mode([slow_lean] + [dear] * n, pull_pays=False) == "lean"
    assert pl.choose_mode([slow_lean] + [cheap] * (n + 4), pull_pays=False) == "eager"
    assert pl.choose_mode([slow_lean] + [close] * (n + 4), pull_pays=False) == "eager"
    # the median, not one eager step held up
    assert pl.choose_mode([slow_lean] + [cheap] * (n - 1) + [(False, 0, 9.0)],
                          pull_pays=False) == "eager"
    # untimed steps (emulated, the simulator): the rule without times
    assert pl.choose_mode([(True, 1)] + [(False, 0)] * (n + 4), pull_pays=False) == "eager"
    assert pl.choose_mode([(True, 1, None)] + [dear] * n, pull_pays=False) == "eager"
    # pull steps and the lean probe are as before
    assert pl.choose_mode([slow_lean] + [dear] * n, pull_pays=True) == "pull"
    assert pl.choose_mode([slow_lean, (True, 0, 0.03)] + [dear] * n, pull_pays=False) == "lean"


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2), st.floats(0.001, 1.0)),
                min_size=1, max_size=40), st.booleans())
def test_times_only_ever_turn_an_eager_step_lean(hist, pays):
    """Timing the steps changes a choice only from eager to lean, and only when the timed
    eager steps since the last observed one, ``EAGER_TRIAL`` at least, took longer at the
    median than it did, by more than ``EAGER_MARGIN``."""
    untimed = [e[:2] for e in hist]
    plain, timed = pl.choose_mode(untimed, pays), pl.choose_mode(hist, pays)
    seen = [i for i, e in enumerate(hist) if e[0]]
    after = [e[2] for e in hist[seen[-1] + 1:]] if seen else []
    dearer = len(after) >= pl.EAGER_TRIAL and \
        float(np.median(after)) > pl.EAGER_MARGIN * hist[seen[-1]][2]
    if plain == "eager":
        assert timed == ("lean" if dearer else "eager")
    else:
        assert timed == plain


def test_pull_options_are_checked():
    o = parse_options("usctec-auto", {"units": 3, "chunks": 4})
    assert o.units == 3 and o.chunks == 4
    for key, bad in (("units", 0), ("units", "many"), ("chunks", 0), ("depth", True),
                     ("call_cost_s", -1)):
        with pytest.raises(ValueError, match=key):
            parse_options("usctec-auto", {key: bad})
    with pytest.raises(ValueError, match="known"):
        parse_options("dynamic", {"chunk": 4})


def test_pull_plan_carries_the_eager_plan_checked():
    placement = _placement(8)
    avail = tuple(placement.machines)
    plan = pl.coded_pull_plan(placement, avail, [1.0] * 8, 4, 2, eager=True)
    assert plan.eager is not None and plan.eager.S == 2 and plan.base.S == 0
    assert (plan.lean.L, plan.lean.S) == (1, 0)
    assert plan.K == 6 and plan.L == 4
    validate(plan.eager, placement)
    validate(plan.lean, placement)
    assert math.isclose(sum(g.gamma for g in plan.groups), 1.0)


def test_a_lost_machines_queue_and_running_units_are_taken_by_others():
    L, S = 2, 1
    n = 6
    speeds = {f"m{i}": 1.0 for i in range(n)}
    placement, plan, sub, queues, q = _coded(n, L, S, speeds, 3)
    victim = next(iter(queues))
    first = q.next_for(victim, 0.0)
    q.sent(victim, first, "k0", 0.0)
    queued = len(q.queues[victim])
    q.lost(victim)
    assert victim not in q.queues and len(q.orphans) == len(first) + queued
    assert q.next_for(victim, 0.0) == []
    t, _ = _simulate(q, {m: 1.0 for m in speeds if m != victim}, {},
                     lambda: len(q.complete) == len(sub.pieces))
    assert all(len(q.done[pi]) >= L for pi in range(len(sub.pieces)))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n_blocks=st.integers(1, 8), n_machines=st.integers(1, 6))
def test_group_holders_are_the_present_machines_storing_all_the_rows(data, n_blocks,
                                                                     n_machines):
    """Against the definition, row by row: a group's holders are the present machines that
    store every one of its rows."""
    from elastic_coded.schemes.plan import Group, Placement, RowBlock

    ms = tuple(f"m{i}" for i in range(n_machines))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, 39), max_size=n_blocks - 1))))
    bounds = [0, *cuts, 40]
    blocks = tuple(RowBlock(a, b, tuple(data.draw(st.sets(st.sampled_from(ms)))))
                   for a, b in zip(bounds, bounds[1:]))
    place = Placement(40, ms, (1.0,) * n_machines, blocks)
    present = data.draw(st.sets(st.sampled_from(ms)))
    spans = data.draw(st.lists(st.tuples(st.integers(0, 39), st.integers(1, 40))
                               .filter(lambda t: t[0] < t[1]), min_size=1, max_size=5))
    groups = [Group(rows, (rows[1] - rows[0]) / 40, ()) for rows in spans]
    got = pl._group_holders(place, groups, tuple(present))
    for (a, b), hs in zip(spans, got):
        want = {m for m in present
                if all(any(blk.start <= r < blk.stop and m in blk.holders for blk in blocks)
                       for r in range(a, b))}
        assert set(hs) == want and list(hs) == sorted(hs, key=str)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=60), st.booleans())
def test_next_mode_misses_only_when_a_step_sees_other_than_its_mode_saw(straggles, pays):
    """The execution asked for ahead (:func:`next_mode`) is the one :func:`choose_mode` then
    picks, but after a lean step that saw a straggler or a pull step that saw none."""
    hist = []
    for k, slow in enumerate(straggles):
        mode = pl.choose_mode(hist, pays)
        ahead = pl.next_mode(hist, mode, pays)
        observed = mode != "eager"
        hist.append((observed, int(slow)))
        surprise = (mode == "lean" and slow) or (mode == "pull" and not slow)
        if not surprise:
            assert ahead == pl.choose_mode(hist, pays), (k, mode, hist[-3:])


def test_pull_plan_makes_only_the_modes_asked_for():
    placement = _placement(8)
    avail = list(placement.machines)
    for modes in (("eager",), ("lean",), ("pull",), ("pull", "lean")):
        plan = pl.coded_pull_plan(placement, avail, [1.0] * 8, 4, 2, eager=True, modes=modes)
        assert tuple(m for m in pl.MODES if plan.has(m)) == modes
        assert (plan.L, plan.S, plan.num_rows) == (4, 2, placement.num_rows)
        assert tuple(plan.available) == tuple(avail)
    whole = pl.coded_pull_plan(placement, avail, [1.0] * 8, 4, 2, eager=True, modes=("lean",))
    validate(whole.lean, placement)
    assert whole.lean.groups == pl.coded_pull_plan(placement, avail, [1.0] * 8, 4, 2,
                                                   eager=True).lean.groups
    for bad, rule in ((("fast",), "subset"), ((), "subset"), (("eager",), "eager=True")):
        with pytest.raises(ValueError, match=rule):
            pl.coded_pull_plan(placement, avail, [1.0] * 8, 4, 2, eager=bad != ("eager",),
                               modes=bad)


def _rest_is_earned(q, t):
    """Every machine the coded rules leave resting for good has nothing it could do: no queue
    to steal from and no backup candidate (computed afresh) among the pieces it stores."""
    for m in list(q._napping):
        if q.resting(m, t) != math.inf:
            continue
        assert not [v for v in q._victims.get(m, {}).values() if q.queues.get(v)], m
        q._cands.clear()
        for p in q._pieces_of.get(m, ()):
            if p not in q.complete and q._by_piece.get(p):
                assert q._candidate(p, t) is None, (m, p)


def _rests_checked(n, units, seed, slowed) -> set:
    """A step with ``slowed`` machines (backups are due), the resting rule checked at every
    event (:func:`_rest_is_earned`); the machines that rested."""
    L, S = 4, 2
    speeds = {f"m{i}": float(s) for i, s in enumerate(np.linspace(1, 4, n))}
    _, _, sub, _, q = _coded(n, L, S, speeds, units, seed)
    refresh, rested = q.refresh, set()

    def checked(t):
        refresh(t)
        _rest_is_earned(q, t)
        rested.update(m for m in q._napping if q.resting(m, t) == math.inf)

    q.refresh = checked
    _simulate(q, speeds, {f"m{i}": 20.0 for i in slowed if i < n},
              lambda: len(q.complete) == len(sub.pieces))
    return rested


@settings(max_examples=25, deadline=None)
@given(n=st.integers(7, 12), units=st.integers(1, 4), seed=st.integers(0, 3),
       slowed=st.lists(st.integers(0, 11), min_size=1, max_size=3, unique=True))
def test_a_machine_rests_only_while_it_has_nothing_it_could_do(n, units, seed, slowed):
    """A machine with nothing it could do rests until a piece it stores changes, which wakes
    it: at every event, against the rules computed afresh."""
    _rests_checked(n, units, seed, slowed)


def test_machines_rest_in_a_step_with_stragglers():
    assert len(_rests_checked(10, 2, 0, [0, 3])) >= 2


def test_a_resting_machine_is_woken_when_a_piece_it_stores_changes():
    speeds = {f"m{i}": float(s) for i, s in enumerate(np.linspace(1, 4, 10))}
    _, _, sub, _, q = _coded(10, 4, 2, speeds, 2, 0)
    rested = {}
    refresh = q.refresh

    def watch(t):
        refresh(t)
        for m in q._napping:
            if q.resting(m, t) == math.inf and m not in rested:
                rested[m] = t

    q.refresh = watch
    _simulate(q, speeds, {"m0": 20.0, "m3": 20.0}, lambda: bool(rested))   # the first rest
    t = max(rested.values())
    m = next(m for m in rested if q.resting(m, t) == math.inf)
    # with copies of positions under way allowed, a machine rests once its pieces are decoded
    piece = next(p for p in range(len(sub.pieces)) if m in sub.holders[p])
    other = next(h for h in sub.holders[piece] if h != m and h not in q.dead)
    q.take_wakes()
    q.sent(other, [pl.Unit(piece, 0, sub.groups[sub.pieces[piece].group].rows, None)], "k", t)
    everyone, woken = q.take_wakes()
    assert m in woken and q.resting(m, t) is None


def _quiet_is_earned(q, t, checks: list) -> None:
    """Every machine napping past its nap because no backup it could take would pay before a
    bound (:meth:`~elastic_coded.families.usctec.queues.CodedQueue._could_pay`) has no queue
    to steal from, and, asked afresh at times up to that bound with nothing else changed (a
    copy of the queue, its nap taken away), gets nothing."""
    import copy

    for m in sorted(q._quiet.keys() & set(q._napping)):
        until = q.resting(m, t)
        if until is None or until == math.inf or until <= t + q.nap_s:
            continue
        assert not [v for v in q._victims.get(m, {}).values() if q.queues.get(v)], m
        for share in (0.0, 0.3, 0.6, 0.9, 0.99, 0.999999):
            at = t + share * (until - t)
            c = copy.deepcopy(q)
            c._napping.pop(m)
            c._quiet.pop(m)
            c._cands.clear()
            type(c).refresh(c, at)   # (the class's: the test hooks the instance's)
            assert c.next_for(m, at) == [], (m, t, at, until)
            checks.append((m, at))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(7, 12), units=st.integers(1, 4), seed=st.integers(0, 3),
       slowed=st.lists(st.integers(0, 11), min_size=1, max_size=3, unique=True),
       factor=st.sampled_from([3.0, 20.0]))
def test_a_machine_naps_past_its_nap_only_while_no_backup_could_pay(n, units, seed, slowed,
                                                                     factor):
    """A machine with no queue to steal from naps until its backup candidates could first pay
    (or one of its pieces changes): asked earlier, it would have got nothing."""
    speeds = {f"m{i}": float(s) for i, s in enumerate(np.linspace(1, 4, n))}
    _, _, sub, _, q = _coded(n, 4, 2, speeds, units, seed)
    refresh, checks = q.refresh, []

    def checked(t):
        refresh(t)
        if len(checks) < 60:
            _quiet_is_earned(q, t, checks)

    q.refresh = checked
    _simulate(q, speeds, {f"m{i}": factor for i in slowed if i < n},
              lambda: len(q.complete) == len(sub.pieces))


def test_machines_nap_past_their_nap_in_a_step_with_stragglers():
    speeds = {f"m{i}": float(s) for i, s in enumerate(np.linspace(1, 4, 10))}
    _, _, sub, _, q = _coded(10, 4, 2, speeds, 2, 0)
    refresh, checks = q.refresh, []

    def checked(t):
        refresh(t)
        _quiet_is_earned(q, t, checks)

    q.refresh = checked
    _simulate(q, speeds, {"m0": 20.0, "m3": 20.0}, lambda: len(q.complete) == len(sub.pieces))
    assert len({m for m, _ in checks}) >= 2


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n=st.integers(1, 6), margin=st.sampled_from([0.0, 0.1, 0.5, 0.9]))
def test_a_backup_does_not_pay_before_its_bound(data, n, margin):
    """:func:`~elastic_coded.families.usctec.queues.pays_no_sooner` against the rule itself:
    expected finishes growing at any rates from 0 to 2 (an overdue call grows at 2) and never
    before the clock, the machine free from any time on, the gain checked at many instants
    before the bound."""
    from elastic_coded.families.usctec.queues import _kth_with, pays_no_sooner

    w, now = data.draw(st.floats(0.01, 5.0)), data.draw(st.floats(0.0, 5.0))
    # expected finishes are never before the clock (an overdue call is expected later)
    fl = st.floats(0.0, 10.0, allow_nan=False)
    base = sorted(now + x for x in data.draw(st.lists(fl, min_size=n, max_size=n)))
    rates = data.draw(st.lists(st.floats(0.0, 2.0), min_size=n, max_size=n))
    k = data.draw(st.integers(1, n))
    # the machine's own calls end no sooner as the clock goes on (an overdue one later)
    free, grows = now + data.draw(st.floats(0.0, 3.0)), data.draw(st.floats(0.0, 2.0))
    at = pays_no_sooner(base, k, w, now, margin, free + w)
    assert at >= now
    for share in np.linspace(0.0, 1.0, 41)[:-1] if at > now else ():   # [now, at)
        t = now + share * (min(at, now + 50.0) - now)
        times = sorted(max(b + r * (t - now), t) for b, r in zip(base, rates))  # never past
        mine = max(free + grows * (t - now), t) + w
        gain = times[k - 1] - _kth_with(times, k, mine)
        assert not gain > margin * (times[k - 1] - t), (t, at, times, mine)
