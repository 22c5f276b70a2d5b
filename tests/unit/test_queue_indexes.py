"""The pull queues keep indexes (the calls holding each piece, each machine's chunks, the
expected finish times of an instant) so that an idle machine's question costs little at
thousands of machines.  Driven in lockstep with the rescan they replace (``queue_oracle``),
through stragglers, crashes and cancellations, every answer must be the same: the units handed
out, the calls to cancel, the steals and the backups."""

import numpy as np
import queue_oracle as oracle
from hypothesis import example, given, settings
from hypothesis import strategies as st

from elastic_coded.families.usctec import design_placement
from elastic_coded.families.usctec import pull as pl


def _placement(n, seed, L, S):
    budget = min(1.0, max(0.6, (L + S + 1) / n))
    return design_placement(240, [f"m{i}" for i in range(n)], [budget] * n, np.linspace(1, 4, n),
                            L, S, samples=1, seed=seed)


def _coded_pair(n, L, S, seed, units, lag_s=0.0):
    placement = _placement(n, seed, L, S)
    avail = tuple(placement.machines)
    speeds = dict(zip(avail, np.linspace(1, 4, n)))
    plan = pl.coded_pull_plan(placement, avail, [speeds[m] for m in avail], L, S)
    sub, queues = pl.subdivide(plan, units)
    prod = {pl.Unit(pi, pos, sub.groups[p.group].rows, None):
            (sub.groups[p.group].rows[1] - sub.groups[p.group].rows[0]) * 2
            for pi, p in enumerate(sub.pieces) for pos in range(sub.K)}
    rate = {m: float(speeds[m]) for m in avail}
    return speeds, len(sub.pieces), [
        cls(queues, L, L + S, sub.holders, prod, rate, batch_s=4.0, lag_s=lag_s)
        for cls in (pl.CodedQueue, oracle.CodedQueue)]


def _dynamic_pair(n, seed):
    placement = _placement(n, seed, 1, 0)
    avail = tuple(placement.machines)
    plan = pl.dynamic_plan(placement, avail, [1.0] * n, 1, 0, chunks=6 * n)
    units = [pl.Unit(i, 0, plan.groups[p.group].rows) for i, p in enumerate(plan.pieces)]
    prod = {u: u.num_rows for u in units}
    speeds = dict(zip(avail, np.linspace(1, 4, n)))
    return speeds, len(units), [pl.DynamicQueue(units, plan.holders, prod),
                                oracle.DynamicQueue(units, plan.holders, prod)]


def _lockstep(speeds, n_pieces, pair, slow, crash_at, depth=2, extra=0.0):
    """Run both queues on the same machines; assert every answer equal.  ``crash_at``:
    ``{machine: time}`` it dies (its calls lost); every call takes ``extra`` seconds beyond its
    work.  Also the contract of ``resting``: a machine
    the queue called resting gets nothing until its rest ends, one of its calls ends or
    ``take_wakes`` names it.  As the drivers do (:class:`~elastic_coded.schemes.policies.
    asking.Asking`), a resting machine is not asked, so the rescan is asked at the same moments
    and naps from them (that each rest is earned is checked in ``test_pull.py``)."""
    new, old = pair
    inflight = {m: [] for m in speeds}   # [finish, key, units, start]
    free = dict.fromkeys(speeds, 0.0)
    t, key, dead = 0.0, 0, set()
    rest: dict = {}

    def wakes():
        everyone, woken = new.take_wakes()
        for m in (list(rest) if everyone else woken):
            rest.pop(m, None)

    for _ in range(20000):
        for q in pair:
            q.refresh(t)
        wakes()
        for m in speeds:
            while new.calls_in_flight(m) < depth:
                if t < rest.get(m, -1.0):   # resting: not asked (the queue would say [])
                    assert new.next_for(m, t) == [], f"{m} got work while resting"
                    break
                a, b = new.next_for(m, t), old.next_for(m, t)
                assert a == b, f"next_for({m}, {t}) differs: {a} vs {b}"
                assert not (a and t < rest.get(m, -1.0)), f"{m} got work while resting"
                if not a:
                    if new.resting(m, t) is not None:
                        rest[m] = new.resting(m, t)
                    break
                key += 1
                start = max(t, free[m])
                free[m] = start + sum(new.products[u] for u in a) * slow.get(m, 1) / speeds[m] \
                    + extra
                for q in pair:
                    q.sent(m, a, key, t)
                wakes()
                inflight[m].append([free[m], key, a, start])
            assert new.calls_in_flight(m) == old.calls_in_flight(m)
        if len(new.complete) == n_pieces:
            break
        events = [(f, m) for m, lst in inflight.items() for f, *_ in lst]
        events += [(c, m) for m, c in crash_at.items() if m not in dead and c > t]
        if not events:
            assert new.orphans == old.orphans
            break
        t, m = min(events)
        rest.pop(m, None)   # one of its calls ends (or it dies)
        if m not in dead and crash_at.get(m) == t:
            dead.add(m)
            inflight[m] = []
            for q in pair:
                q.lost(m)
            continue
        item = next(x for x in inflight[m] if x[0] == t)
        inflight[m].remove(item)
        f, k, units, start = item
        assert new.finished(m, k, t, f - start) == old.finished(m, k, t, f - start)
        for u in units:
            if len(new.done.get(u.piece, ())) >= new.need and u.piece not in new.complete:
                got = new.decoded(u.piece)
                assert got == old.decoded(u.piece)
                for m2, k2 in got:
                    rest.pop(m2, None)
                    inflight[m2] = [x for x in inflight[m2] if x[1] != k2]
                    free[m2] = max([t] + [x[0] for x in inflight[m2]])
                    for q in pair:
                        q.dropped(m2, k2, t)
    assert new.complete == old.complete and new.done == old.done
    assert new.backups == old.backups and getattr(new, "stolen", 0) == getattr(old, "stolen", 0)
    return new


@settings(max_examples=30, deadline=None)
@given(n=st.integers(8, 14), seed=st.integers(0, 3), units=st.integers(1, 4),
       slowed=st.lists(st.integers(0, 13), max_size=4, unique=True),
       factor=st.sampled_from([3.0, 10.0, 40.0]),
       crashes=st.dictionaries(st.integers(0, 13), st.floats(0.5, 40.0), max_size=2),
       lag_s=st.sampled_from([0.0, 1.0, 4.0]), extra=st.sampled_from([0.0, 1.5, 5.0]))
# a machine woken from a bounded nap when its nap would have ended: the rescan, asked at the
# same moments, naps from them too
@example(n=12, seed=0, units=3, slowed=[4], factor=3.0, crashes={}, lag_s=0.0, extra=0.0)
def test_coded_queue_answers_as_the_rescan_does(n, seed, units, slowed, factor, crashes, lag_s,
                                                extra):
    """Also with calls taking ``extra`` seconds beyond their work, and a lag allowed for it
    (``lag_s``)."""
    speeds, pieces, pair = _coded_pair(n, 4, 2, seed, units, lag_s)
    slow = {f"m{i}": factor for i in slowed if i < n}
    q = _lockstep(speeds, pieces, pair, slow, {f"m{i}": t for i, t in crashes.items() if i < n},
                  extra=extra)
    if not crashes:
        assert len(q.complete) == pieces


@settings(max_examples=30, deadline=None)
@given(n=st.integers(6, 14), seed=st.integers(0, 3),
       slowed=st.lists(st.integers(0, 13), max_size=4, unique=True),
       factor=st.sampled_from([3.0, 10.0, 40.0]),
       crashes=st.dictionaries(st.integers(0, 13), st.floats(0.5, 40.0), max_size=2))
def test_dynamic_queue_answers_as_the_rescan_does(n, seed, slowed, factor, crashes):
    speeds, pieces, pair = _dynamic_pair(n, seed)
    slow = {f"m{i}": factor for i in slowed if i < n}
    q = _lockstep(speeds, pieces, pair, slow, {f"m{i}": t for i, t in crashes.items() if i < n})
    if not crashes:
        assert len(q.complete) == pieces


def test_the_oracle_would_catch_a_changed_rule():
    """The lockstep check is not vacuous: a queue whose backups pick the latest-started chunk
    instead of the earliest is told apart from the rescan."""
    speeds, pieces, (new, old) = _dynamic_pair(10, 1)

    class Latest(pl.DynamicQueue):
        def _backup_for(self, m):
            self._runs.reverse()
            try:
                return super()._backup_for(m)
            finally:
                self._runs.reverse()

    bad = Latest(new.chunks, new.holders, new.products)
    try:
        _lockstep(speeds, pieces, [bad, old], {"m9": 10.0, "m8": 10.0, "m0": 10.0}, {})
    except AssertionError as exc:
        assert "differs" in str(exc)
    else:
        raise AssertionError("a changed backup rule went unnoticed")


def _ask_everyone(self):
    """The pull loop's fill as a driver asking every machine does it: every live machine with
    room, in plan order, asked at every event (no machine left resting)."""
    q, b = self.q, self.b
    now = b.now
    q.refresh(now)
    for m in self.asking.order:
        if not b.room(m) or m in q.dead:
            continue
        while q.calls_in_flight(m) < self.depth:
            units = q.next_for(m, now)
            if not units:
                break
            q.sent(m, units, b.send(m, units, now), now)


@settings(max_examples=6, deadline=None)
@given(n=st.integers(14, 40), seed=st.integers(0, 1000), with_cost=st.booleans())
def test_the_simulator_asks_resting_machines_nothing_and_schedules_the_same(n, seed, with_cost):
    """Leaving resting machines unasked (the queue says they would get nothing) changes no
    step: the same times, calls, backups and steals as asking every machine at every event,
    through stragglers and crashes mid-step."""
    import pytest

    from elastic_coded.churn import ChurnScript, RandomChurn
    from elastic_coded.families.usctec.pull_loop import PullLoop
    from elastic_coded.sim import IIDStragglers, LinearSpeeds, RuntimeCost, make_trace, simulate

    st_ = min(1.0, 18 / n)
    churn = ChurnScript(random=RandomChurn(leave=0.02, crash=0.05, join=0.02, per_machine=True,
                                           join_speed=(1.0, 4.0), join_storage=st_,
                                           min_machines=8), seed=seed)
    trace = make_trace(n, 3, 4, 2, delays=IIDStragglers(p=0.15, factor=6), churn=churn,
                       speeds=LinearSpeeds(1.0, 4.0), seed=seed, storage=st_)
    kw = dict(trace=trace, L=4, S=2, policies=("usctec-pull", "dynamic"), time_scale=2.0,
              baseline="dynamic", learn_speeds=True, design_samples=2,
              cost=RuntimeCost() if with_cost else None)
    fast = simulate(**kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PullLoop, "fill", _ask_everyone)
        slow = simulate(**kw)
    for p in ("usctec-pull", "dynamic"):
        assert list(fast.times[p]) == list(slow.times[p])
        for k in fast.details[p]:
            assert list(fast.details[p][k]) == list(slow.details[p][k]), (p, k)
