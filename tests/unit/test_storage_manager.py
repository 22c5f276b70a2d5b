"""The controller's storage manager (runtime/storage.py) without Ray: a family's changes applied
through a fake transfer whose machines keep the rows they are sent, so every check reads what
the machines would hold."""

import asyncio
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as hs

from elastic_coded.algebra.fields import field as make_field
from elastic_coded.errors import BudgetError, PlanError, ShortOfMachines, StepFailed
from elastic_coded.families.hetero import policy as het
from elastic_coded.families.hetero.store import HeteroFamily
from elastic_coded.families.unified import policy as uni
from elastic_coded.families.unified.store import UnifiedFamily
from elastic_coded.families.usctec.store import UsctecFamily
from elastic_coded.machines import MachineSpec
from elastic_coded.runtime.members import Members
from elastic_coded.runtime.storage import Storage
from elastic_coded.schemes.families import (
    Change,
    PutSource,
)
from elastic_coded.schemes.policies.rules import assign_recovery
from elastic_coded.schemes.wire import StepRequest, TaskSpec

F = make_field("real")


def run(coro):
    return asyncio.run(coro)


class FakeTransfer:
    """Machines that keep, in memory, the rows they are sent; those in ``dying`` die when next
    sent rows (they are reported dead and keep nothing)."""

    def __init__(self, members: Members, sources: dict | None = None):
        self.members = members
        self.sources = dict(sources or {})
        self.held: dict = {}
        self.dying: set = set()
        self.released: list = []
        self.kept: list = []
        self.sent: list = []

    async def store(self, moves):
        self.sent.append(tuple(moves))
        dead = set()
        for src, a, b, m in moves:
            if m not in self.members:
                continue
            if m in self.dying:
                dead.add(m)
                continue
            self.held.setdefault(m, {}).setdefault(src, set()).update(range(a, b))
        return sorted(dead)

    async def keep_only(self, shrink):
        self.kept.append(shrink)
        for m, by in shrink.items():
            for src, rs in by.items():
                keep = {i for a, b in rs for i in range(a, b)}
                self.held.get(m, {}).get(src, set()).intersection_update(keep)

    def read_source(self, name):
        return self.sources[name]

    def put_source(self, name, matrix):
        self.sources[name] = matrix

    def drop_source(self, name):
        self.sources.pop(name, None)

    def has_source(self, name):
        return name in self.sources

    def release(self, machine):
        self.released.append(machine)
        self.held.pop(machine, None)  # an ended machine's rows are gone


@dataclass
class ScriptedFamily:
    """A family whose repairs return the given ``changes`` in turn (then none) and whose
    budgets hold ``S`` up to ``fits`` (a BudgetError above)."""

    changes: list = field(default_factory=list)
    fits: int = 99
    has_LS: bool = True
    key: object = "same"
    name: str = "scripted"
    calls: list = field(default_factory=list)
    forgotten: list = field(default_factory=list)
    plans: int = 0

    def repair(self, present, S, n_cols=None):
        self.calls.append((present.machines, S, n_cols))
        if S > self.fits:
            raise BudgetError(f"budgets: S = {S} does not fit")
        return self.changes.pop(0) if self.changes else Change()

    def forget(self, machine):
        self.forgotten.append(machine)

    def plan(self, policy, present, S, request):
        self.plans += 1
        return ("plan", self.plans)

    def state_key(self):
        return self.key


def _members(ids, storage=1.0, speeds=None):
    mem = Members()
    for i, m in enumerate(ids):
        mem.add(MachineSpec(m, 1.0 if speeds is None else speeds[i], storage), handle=None)
    return mem


def _scripted(ids=("a", "b", "c", "d"), L=1, S=2, **kw):
    mem = _members(ids)
    fam = ScriptedFamily(**kw)
    io = FakeTransfer(mem)
    return Storage(fam, mem, io, L=L, S=S), fam, io


def _usctec(n=6, q=24, L=2, S=1, storage=0.75, seed=1, kind="cyclic"):
    """USCTEC storage started on ``n`` machines (a cyclic placement: every row on exactly
    ``L+S`` machines, so a departure needs copies)."""
    specs = [MachineSpec(f"m{i}", 1.0 + 0.2 * i, storage) for i in range(n)]
    mem = _members([s.id for s in specs], storage, [s.speed for s in specs])
    io = FakeTransfer(mem)
    st = Storage(UsctecFamily(q, L, S, F, seed, kind), mem, io, L=L, S=S)
    run(st.start(specs))
    return st, io


def _rows(ranges):
    return {i for a, b in ranges for i in range(a, b)}


def _check_held(st: Storage, io: FakeTransfer, K: int, cap: dict):
    """What the machines hold is the placement, every row on K present machines, each machine
    within its budget."""
    pl = st.family.placement
    q = pl.num_rows
    for m in st.members.ids():
        held = io.held.get(m, {}).get("A", set())
        assert held == _rows(pl.rows_of(m)), m
        assert len(held) <= cap[m], m
    for r in range(q):
        assert sum(r in io.held.get(m, {}).get("A", ()) for m in st.members.ids()) >= K, r


# -- the repair loop ---------------------------------------------------------------------------

def test_a_repair_after_a_departure_restores_L_plus_S_holders_within_budgets():
    st, io = _usctec(n=6, q=24, L=2, S=1, storage=0.75)
    cap = {m: 18 for m in st.members.ids()}
    _check_held(st, io, 3, cap)
    st.drop("m2")
    assert "m2" in io.released and st.members.pending_left == ["m2"]
    assert "m2" not in st.family.placement.machines  # its copies forgotten
    copied = run(st.repair(st.S))
    assert copied > 0 and st.short_S is None
    _check_held(st, io, 3, cap)


def test_a_repair_that_changed_nothing_is_not_made_again_until_something_changes():
    """USCTEC's repair is a function of its placement, the machines present, their budgets and
    ``S`` (``pure_repair``): once one changed nothing, the next with the same inputs is
    skipped (every step asks for one); a departure, another ``S`` or a shrink left for later
    makes it run again, and the storage is then whole as before."""
    st, io = _usctec(n=6, q=24, L=2, S=1, storage=0.75)
    calls = []
    repair = st.family.repair
    st.family.repair = lambda *a, **k: calls.append(a[1]) or repair(*a, **k)
    assert run(st.repair(st.S)) == 0 and calls == [1]  # nothing to do: checked once
    assert run(st.repair(st.S)) == 0 and calls == [1]  # and not again
    assert run(st.repair(0)) == 0 and calls == [1, 0]  # another S: asked
    st.drop("m2")
    assert run(st.repair(st.S)) > 0 and calls == [1, 0, 1]
    _check_held(st, io, 3, {m: 18 for m in st.members.ids()})
    assert run(st.repair(st.S)) == 0 and calls == [1, 0, 1, 1]  # the new placement: checked
    assert run(st.repair(st.S)) == 0 and len(calls) == 4
    st.deferred = {"m0": {"A": tuple(st.family.placement.rows_of("m0"))}}
    run(st.repair(st.S))  # a shrink left for later is applied: the repair runs
    assert len(calls) == 5 and st.deferred == {}


def test_the_S_fallback_lowers_S_only_as_far_as_the_budgets_need():
    st, fam, _ = _scripted(fits=1)
    run(st.repair(3))
    assert [s for _, s, _ in fam.calls] == [3, 2, 1] and st.short_S == 1
    with pytest.raises(ShortOfMachines) as exc:
        st.check_count(2)
    assert exc.value.S_max == 1
    fam.fits, fam.calls[:] = 99, []
    run(st.repair(3))
    assert [s for _, s, _ in fam.calls] == [3] and st.short_S is None


def test_the_S_fallback_gives_up_below_zero():
    st, fam, _ = _scripted(fits=-1)
    with pytest.raises(BudgetError):
        run(st.repair(2))
    assert [s for _, s, _ in fam.calls] == [2, 1, 0]


def test_a_family_without_L_plus_S_gets_no_fallback_and_its_inputs():
    st, fam, _ = _scripted(fits=0, has_LS=False)
    with pytest.raises(BudgetError):
        run(st.repair(2, n_cols=5))
    assert fam.calls == [(("a", "b", "c", "d"), 2, 5)] and st.short_S is None
    st.check_count(9)  # no count to check


def test_S_now_is_the_configured_S_lowered_to_the_machines_present():
    st, _, _ = _scripted(ids=("a", "b", "c"), L=1, S=4)
    assert st.S_now() == 2
    st.drop("a"), st.drop("b"), st.drop("c")
    assert st.S_now() == 0


def test_machines_found_dead_while_storing_are_dropped_and_the_repair_redone():
    first = Change([("A", 0, 4, "b"), ("A", 4, 6, "c")])
    second = Change([("A", 0, 4, "d")])
    st, fam, io = _scripted(changes=[first, second])
    io.dying = {"b"}
    copied = run(st.repair(2))
    assert copied == 2 + 4  # the rows b never got do not count
    assert fam.calls[1][0] == ("a", "c", "d")  # redone without b
    assert "b" not in st.members and fam.forgotten == ["b"] and io.released == ["b"]
    assert io.held["c"]["A"] == set(range(4, 6)) and io.held["d"]["A"] == set(range(4))


def test_machines_dying_in_a_real_repair_leave_every_row_on_L_plus_S_of_the_rest():
    st, io = _usctec(n=7, q=24, L=2, S=1, storage=0.75)
    st.drop("m0")
    io.dying = {"m1", "m2"}  # both die when sent rows
    run(st.repair(st.S))
    dead = {"m1", "m2"} - set(st.members.ids())
    assert dead and set(io.released) == {"m0"} | dead
    _check_held(st, io, 3, {m: 18 for m in st.members.ids()})


def test_shrinks_left_for_later_are_applied_at_the_next_repair():
    shrink = {"a": {"A": ((0, 4),)}}
    st, _, io = _scripted(changes=[Change(shrink=shrink), Change()])
    run(st.repair(2, shrink_now=False))
    assert io.kept == [] and st.deferred == shrink
    run(st.repair(2))
    assert io.kept == [shrink] and st.deferred == {}


def test_rows_sent_to_a_machine_cancel_its_deferred_shrink():
    shrink = {"a": {"A": ((0, 4),)}, "b": {"A": ((2, 3),)}}
    st, _, io = _scripted(changes=[Change(shrink=shrink), Change([("A", 8, 9, "a")])])
    run(st.repair(2, shrink_now=False))
    run(st.repair(2))
    assert io.kept == [{"b": {"A": ((2, 3),)}}]  # a's older keep-only would drop its new rows


def test_a_midstep_repair_counts_its_rows_for_the_next_answer_and_does_not_shrink():
    shrink = {"a": {"A": ((0, 1),)}}
    st, fam, io = _scripted(ids=("a", "b", "c"), L=1, S=5,
                            changes=[Change([("A", 0, 3, "b")], shrink)])
    run(st.repair_midstep())
    assert fam.calls[0][1] == 2  # S_now: 3 machines, L = 1
    assert st.members.pending_moved == 3 and io.kept == [] and st.deferred == shrink


@given(hs.data())
@settings(max_examples=25, deadline=None)
def test_random_departures_keep_every_row_on_L_plus_S_holders_or_fall_back(data):
    """After each departure, the repair holds every row on L+s present machines within their
    budgets, s the largest S (up to S_now) their capacities allow, and short_S says when that is
    below S_now; BudgetError exactly when not even L copies fit."""
    q, L = 24, data.draw(hs.integers(1, 2))
    S = data.draw(hs.integers(0, 2))
    n = data.draw(hs.integers(L + S + 1, 7))
    eighths = data.draw(hs.lists(hs.integers(3, 8), min_size=n, max_size=n))
    cap = {f"m{i}": 3 * k for i, k in enumerate(eighths)}  # budgets k/8 of 24 rows
    if sum(cap.values()) < (L + S) * q:
        return  # the first storage itself cannot hold L+S copies
    specs = [MachineSpec(f"m{i}", 1.0 + 0.1 * i, k / 8) for i, k in enumerate(eighths)]
    mem = _members([s.id for s in specs], speeds=[s.speed for s in specs])
    for s in specs:
        mem[s.id].spec = s
    io = FakeTransfer(mem)
    st = Storage(UsctecFamily(q, L, S, F, seed=data.draw(hs.integers(0, 9))), mem, io, L=L, S=S)
    run(st.start(specs))
    order = data.draw(hs.permutations([s.id for s in specs]))
    for m in order[:n - L]:
        st.drop(m)
        room = sum(cap[x] for x in st.members.ids())
        fits = [s for s in range(st.S_now() + 1) if room >= (L + s) * q]
        if not fits:
            event("not even L copies fit: BudgetError")
            with pytest.raises(BudgetError):
                run(st.repair(st.S_now()))
            return
        event("S_now held" if fits[-1] == st.S_now() else "fell back to a lower S")
        run(st.repair(st.S_now()))
        assert st.short_S == (None if fits[-1] == st.S_now() else fits[-1])
        _check_held(st, io, L + fits[-1], cap)


# -- plans -------------------------------------------------------------------------------------

def test_the_plan_is_reused_while_nothing_changed_and_made_anew_when_anything_did():
    st, _ = _usctec(n=6, q=24, L=2, S=1)
    req = StepRequest(0, "usctec", None, 4)
    plan = st.plan(req, 1)
    assert st.plan(StepRequest(1, "usctec", None, 4), 1) is plan  # another step, same inputs
    assert st.plan(StepRequest(1, "usctec", None, 8), 1) is not plan  # other columns
    plan = st.plan(req, 1)
    st.members.learn({"m3": (5.0, "value"), "m4": (5.0, "value")})
    plan2 = st.plan(req, 1)
    assert plan2 is not plan and st.plan(req, 1) is plan2  # speeds moved
    st.drop("m0")
    run(st.repair(1))
    plan3 = st.plan(req, 1)
    assert plan3 is not plan2 and "m0" not in plan3.tasks()  # membership changed


def test_the_plan_is_kept_while_every_speed_stays_within_the_replan_change():
    from elastic_coded.schemes.policies.rules import REPLAN_SPEED_CHANGE
    from elastic_coded.schemes.speeds import SpeedEstimate

    st, _ = _usctec(n=6, q=24, L=2, S=1)

    def set_speed(v):
        st.members.table["m3"].est = SpeedEstimate((v,) * 5)

    req = StepRequest(0, "usctec", None, 4)
    plan = st.plan(req, 1)
    base = st.members.speeds()["m3"]
    set_speed(base * (1 + REPLAN_SPEED_CHANGE / 2))
    assert st.members.speeds()["m3"] != base and st.plan(req, 1) is plan  # within: kept
    set_speed(base * (1 + 2 * REPLAN_SPEED_CHANGE))
    plan2 = st.plan(req, 1)
    assert plan2 is not plan and st.plan(req, 1) is plan2  # beyond: made anew, then kept
    st.replan_speed_change = 0.0  # equal speeds only
    set_speed(base * (1 + 2 * REPLAN_SPEED_CHANGE) * 1.001)
    assert st.plan(req, 1) is not plan2


@pytest.mark.parametrize("planned, now, change, close", [
    ((1.0, 2.0), (1.05, 1.9), 0.1, True), ((1.0, 2.0), (1.2, 2.0), 0.1, False),
    ((1.0,), (1.0, 1.0), 0.1, False), ((3.0, 4.0), (3.0, 4.0), 0.0, True),
    ((3.0, 4.0), (3.0, 4.0000001), 0.0, False)])
def test_speeds_close(planned, now, change, close):
    from elastic_coded.schemes.policies.rules import speeds_close

    assert speeds_close(planned, now, change) is close


def test_a_family_without_a_state_key_plans_every_step():
    st, fam, _ = _scripted(key=None)
    req = StepRequest(0, "x", None, 1)
    assert st.plan(req, 1) != st.plan(req, 1) and fam.plans == 2


def test_prepare_checks_the_count_before_and_after_the_repair():
    st, fam, _ = _scripted(ids=("a", "b", "c"), L=1, S=2, fits=1)
    with pytest.raises(ShortOfMachines) as exc:  # the budgets hold only S = 1
        run(st.prepare(StepRequest(0, "x", None, 3)))
    assert exc.value.S_max == 1
    plan, moved = run(st.prepare(StepRequest(0, "x", 1, 3)))  # the S they hold
    assert plan == ("plan", 1) and moved == 0 and fam.calls[-1] == (("a", "b", "c"), 1, 3)
    st.drop("c")
    with pytest.raises(ShortOfMachines) as exc:  # 2 machines for L+S = 3, before any repair
        run(st.prepare(StepRequest(0, "x", None, 3)))
    assert exc.value.S_max == 1 and len(fam.calls) == 4


# -- recovery, rescue, holders -----------------------------------------------------------------

def _task(a, b, piece=0, pos=0):
    return TaskSpec("A", (a, b), pos, None, piece, pos)


def test_recover_replans_lost_rows_on_their_live_holders():
    st, _ = _usctec(n=5, q=20, L=1, S=1, storage=1.0)
    st.drop("m0")
    out = run(st.recover([_task(0, 10), _task(10, 20, piece=1, pos=1)]))
    got = sorted((t.rows, t.piece, m) for m, ts in out.items() for t in ts)
    assert sum(b - a for (a, b), _, _ in got) == 20
    pl = st.family.placement
    for (a, b), _, m in got:
        assert m != "m0" and all(m in who for _, _, who in pl.holders_of((a, b), [m]))


def test_recover_repairs_first_when_no_live_machine_holds_some_rows():
    st, io = _usctec(n=4, q=20, L=1, S=1, storage=0.5)
    lost = [_task(0, 20)]
    first = min(st.family.placement.blocks, key=lambda blk: blk.start)
    for m in first.holders:  # every holder of the first rows goes
        st.drop(m)
    with pytest.raises(PlanError):  # as the placement stands, nobody holds them
        assign_recovery([(0, 20)], lambda r: st.family.holders(r, st.members.ids()),
                        st.members.speeds())
    out = run(st.recover(lost))
    assert st.members.pending_moved > 0  # copied there first, counted for the next step
    assert sum(t.rows[1] - t.rows[0] for ts in out.values() for t in ts) == 20
    for m, ts in out.items():
        for t in ts:
            assert _rows([t.rows]) <= io.held[m]["A"]


def test_holders_of_a_plan_names_the_present_machines_storing_each_piece():
    st, _ = _usctec(n=6, q=24, L=2, S=1)
    plan = st.plan(StepRequest(0, "usctec", None, 4), 1)
    out = st.holders_of(plan)
    for pi, _piece, group in plan.iter_pieces():
        for m in out[pi]:
            assert _rows([group.rows]) <= _rows(st.family.placement.rows_of(m))


def _hetero_storage(n=5, masters=(8, 12)):
    specs = [MachineSpec(f"m{i}", 1.0 + 0.3 * i) for i in range(n)]
    mem = _members([s.id for s in specs], speeds=[s.speed for s in specs])
    io = FakeTransfer(mem)
    st = Storage(HeteroFamily(het.HeteroOptions(), masters, None, 2), mem, io, L=1, S=0)
    run(st.start(specs))
    return st, io


def test_hetero_rescue_stores_fresh_rows_on_the_first_live_machine_that_takes_them():
    st, io = _hetero_storage()
    io.dying = {"m4"}
    n, ranges = run(st.rescue(1, 3, [0], ["gone", "m4", "m2"]))
    assert n == "m2" and sum(b - a for a, b in ranges) == 3
    assert "m4" not in st.members and "m4" in io.released  # found dead: dropped
    assert _rows(ranges) <= io.held["m2"]["C1"] and 0 not in _rows(ranges)
    assert st.members.pending_moved == 3


def test_hetero_rescue_fails_clearly_when_no_machine_takes_the_rows():
    st, io = _hetero_storage()
    io.dying = {"m1", "m2"}
    with pytest.raises(StepFailed, match=r"rescue: no live machine could take master 0"):
        run(st.rescue(0, 2, [], ["m1", "m2"]))


def test_a_rescue_on_a_family_without_coded_rows_names_the_family():
    st, _ = _usctec()
    with pytest.raises(PlanError, match=r"family 'usctec'"):
        run(st.rescue(0, 1, [], ["m1"]))


# -- unified: the coded sources it asks for ----------------------------------------------------

def _unified_storage(n=4, q=2, rows=10, cols=3):
    A = np.arange(rows * cols, dtype=float).reshape(rows, cols)
    ids = [f"m{i}" for i in range(n)]
    mem = _members(ids)
    io = FakeTransfer(mem, {"A": A})
    fam = UnifiedFamily(uni.UnifiedOptions(mu="1/2", q=q), rows, F)
    st = Storage(fam, mem, io, L=1, S=0)
    run(st.start([MachineSpec(m) for m in ids]))
    return st, io, A


def test_unified_start_puts_the_coded_source_and_counts_the_values_sent():
    st, io, A = _unified_storage()
    us = st.family.storage
    np.testing.assert_array_equal(io.sources["U0"], uni.coded_matrix(us, A))
    assert st.values_moved == uni.values_moved(us, A.shape[1])[1]
    for mach, rs in uni.store_orders(us).items():
        assert io.held[mach]["U0"] == _rows(rs)
    assert st.take_redesign() is None


def test_unified_re_encoding_replaces_the_source_and_reports_why():
    st, io, A = _unified_storage(n=4, q=2)
    before = st.values_moved
    for m in ("m1", "m2", "m3"):
        st.drop(m)
    st.members.add(MachineSpec("x"), None)
    run(st.repair(0))
    us = st.family.storage
    assert sorted(io.sources) == ["A", "U1"]  # U0 dropped once U1 is put
    np.testing.assert_array_equal(io.sources["U1"], uni.coded_matrix(us, A))
    assert st.values_moved - before == uni.values_moved(us, A.shape[1])[1]
    why = st.take_redesign()
    assert why == us.reason and "left" in why and st.take_redesign() is None


def test_unified_a_returning_server_gets_the_source_put_again_only_if_it_was_lost():
    st, io, A = _unified_storage()
    server = st.family.storage.servers[0]
    st.drop(server)
    coded = io.sources["U0"]
    st.members.add(MachineSpec(server), None)
    rows = run(st.join(MachineSpec(server)))
    assert rows == len(io.held[server]["U0"]) > 0 and io.sources["U0"] is coded  # not put again
    del io.sources["U0"]  # lost with a controller that died
    st.drop(server)
    st.members.add(MachineSpec(server), None)
    run(st.join(MachineSpec(server)))
    np.testing.assert_array_equal(io.sources["U0"], coded)


def test_a_put_source_only_if_missing_is_skipped_when_held():
    st, _, io = _scripted()
    io.sources = {"A": np.ones((2, 2)), "U0": "held"}
    change = Change(puts=(PutSource("U0", lambda A: A * 2, if_missing=True),
                          PutSource("U1", lambda A: A * 3, drop="U9", values_rows=2)))
    fam = st.family
    fam.changes.append(change)
    run(st.repair(0))
    assert io.sources["U0"] == "held" and (io.sources["U1"] == 3).all()
    assert st.values_moved == 2 * 2


def test_a_machine_that_dies_while_joining_fails_the_join():
    st, io = _usctec(n=4, q=24, L=1, S=1)
    spec = MachineSpec("new", 1.0, 0.5)
    st.members.add(spec, None)
    io.dying = {"new"}
    with pytest.raises(StepFailed, match=r"machine 'new' died while receiving its rows"):
        run(st.join(spec))
