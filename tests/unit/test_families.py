"""The storage families (schemes/families.py) on their own: no runtime, no Ray.  Every input is
an argument and every effect a returned Change, so these tests read the changes directly."""

import numpy as np
import pytest

from elastic_coded.algebra.fields import field
from elastic_coded.errors import BudgetError, PlanError
from elastic_coded.families import family_names
from elastic_coded.families.hetero import policy as het
from elastic_coded.families.hetero.store import HeteroFamily
from elastic_coded.families.unified import policy as uni
from elastic_coded.families.unified.store import UnifiedFamily
from elastic_coded.families.usctec.store import UsctecFamily
from elastic_coded.machines import MachineSpec
from elastic_coded.schemes.families import (
    Change,
    Present,
    PutSource,
    Setup,
    make_family,
)
from elastic_coded.schemes.wire import StepRequest

F = field("real")


def _specs(n, storage=1.0, speed=lambda i: 1.0 + 0.25 * i):
    return [MachineSpec(f"m{i}", speed(i), storage) for i in range(n)]


def _present(specs, ids=None):
    by = {s.id: s for s in specs}
    ids = [s.id for s in specs] if ids is None else ids
    return Present(tuple(ids), {m: by[m].storage for m in ids}, {m: by[m].speed for m in ids})


def _rows_on(moves, machine, source=None):
    return {i for src, a, b, m in moves if m == machine and source in (None, src)
            for i in range(a, b)}


# -- the registry ------------------------------------------------------------------------------

def test_families_are_made_by_name_from_the_registry():
    assert {"hetero", "unified", "usctec"} <= set(family_names())
    setup = Setup(num_rows=12, L=2, S=1, field=F, seed=3, options=uni.UnifiedOptions(q=2),
                  masters=(6, 6))
    assert isinstance(make_family("usctec", setup), UsctecFamily)
    assert isinstance(make_family("unified", setup), UnifiedFamily)
    fam = make_family("hetero", Setup(12, 1, 0, F, 3, het.HeteroOptions(), masters=(6, 6)))
    assert isinstance(fam, HeteroFamily) and fam.sources() == ("C0", "C1")


def test_an_unknown_family_names_the_value_and_the_known_ones():
    with pytest.raises(ValueError, match=r"family: unknown family 'nope'; known: "
                                         r".*hetero, .*unified, .*usctec"):
        make_family("nope", Setup(12, 2, 1))


def test_only_usctec_has_an_L_plus_S_redundancy():
    assert UsctecFamily.has_LS and not HeteroFamily.has_LS and not UnifiedFamily.has_LS


def test_present_needs_a_budget_and_a_speed_for_every_machine():
    with pytest.raises(ValueError, match=r"speeds: no entry for machines \['b'\]"):
        Present(("a", "b"), {"a": 1.0, "b": 1.0}, {"a": 1.0})


# -- usctec ------------------------------------------------------------------------------------

def test_usctec_start_moves_are_the_placement_and_repair_restores_L_plus_S_holders():
    specs = _specs(6, storage=0.75)
    fam = UsctecFamily(24, 2, 1, F, seed=1)
    ch = fam.start(specs)
    for s in specs:
        assert _rows_on(ch.moves, s.id, "A") == {i for a, b in fam.placement.rows_of(s.id)
                                                 for i in range(a, b)}
    assert fam.placement.min_replication() >= 3
    fam.forget("m0")
    assert "m0" not in fam.members()
    ids = [s.id for s in specs[1:]]
    ch = fam.repair(_present(specs, ids), 1)
    assert set(fam.placement.machines) == set(ids)
    assert fam.placement.min_replication() >= 3
    for m in ids:  # within each budget
        assert fam.placement.stored_rows(m) <= int(0.75 * 24)
    assert all(m in ids for _, _, _, m in ch.moves)


def test_usctec_repair_raises_BudgetError_when_the_budgets_cannot_hold_L_plus_S():
    specs = _specs(6, storage=0.7)
    fam = UsctecFamily(60, 2, 2, F, seed=1)
    fam.start(specs)
    fam.forget("m0")
    before = fam.placement
    with pytest.raises(BudgetError):  # 5 machines of 42 rows hold 210 < 4 * 60
        fam.repair(_present(specs, [s.id for s in specs[1:]]), 2)
    assert fam.placement is before  # a failed repair changes nothing
    fam.repair(_present(specs, [s.id for s in specs[1:]]), 1)  # 3 * 60 = 180 fit
    assert fam.placement.min_replication() >= 3


@pytest.mark.parametrize("kind", ["design", "cyclic"])
def test_usctec_start_sends_every_machine_exactly_the_rows_its_placement_gives_it(kind):
    specs = _specs(9, storage=0.45)
    fam = UsctecFamily(200, 2, 1, F, seed=2, placement_kind=kind, design_samples=2)
    ch = fam.start(specs)
    assert list(ch.moves) == [("A", a, b, s.id) for s in specs
                              for a, b in fam.placement.rows_of(s.id)]


def test_usctec_repair_shrinks_exactly_the_machines_left_with_fewer_rows_than_they_hold():
    """The repair's ``shrink`` (rows counted for all machines in one pass over the blocks), over
    seeded random budgets, leavers and codes: every machine it names keeps what the placement
    now gives it and stores fewer rows than it held plus the rows sent to it; every other
    machine present stores exactly those."""
    rng, shrunk = np.random.default_rng(0), 0
    for trial in range(600):
        n, L, S = int(rng.integers(5, 10)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
        st = [float(rng.choice([0.4, 0.5, 0.6, 0.75, 1.0])) for _ in range(n)]
        specs = [MachineSpec(f"m{i}", 1.0 + i, st[i]) for i in range(n)]
        kind = str(rng.choice(["design", "cyclic"]))
        fam = UsctecFamily(60, L, S, F, seed=trial, placement_kind=kind, design_samples=2)
        gone = {f"m{i}" for i in rng.choice(n, int(rng.integers(1, 3)), replace=False)}
        budgets = {s.id: s.storage * float(rng.choice([1.0, 1.0, 0.5])) for s in specs
                   if s.id not in gone}
        try:
            fam.start(specs)
            for m in gone:
                fam.forget(m)
            held = {m: fam.placement.stored_rows(m) for m in budgets}
            ch = fam.repair(Present(tuple(budgets), budgets, dict.fromkeys(budgets, 1.0)), S)
        except BudgetError:
            continue
        for m in budgets:
            now = fam.placement.stored_rows(m)
            sent = sum(b - a for _, a, b, mm in ch.moves if mm == m)
            if m in ch.shrink:
                assert now < held[m] + sent
                assert list(ch.shrink[m]["A"]) == fam.placement.rows_of(m)
            else:
                assert now == held[m] + sent
        shrunk += bool(ch.shrink)
    assert shrunk >= 3   # the case the shrink is for is met


def test_usctec_join_gives_the_joiner_rows_within_its_budget():
    specs = _specs(4)
    fam = UsctecFamily(20, 1, 1, F, placement_kind="cyclic")
    fam.start(specs)
    ch = fam.join(MachineSpec("new", 1.0, 0.25))
    assert ch.rows == 5 and {m for *_, m in ch.moves} == {"new"}
    assert fam.placement.stored_rows("new") == 5


def test_usctec_plan_is_valid_and_holders_answer_for_present_machines():
    specs = _specs(5)
    fam = UsctecFamily(20, 2, 1, F, seed=0)
    fam.start(specs)
    plan = fam.plan("usctec", _present(specs), 1, StepRequest(0, "usctec", None, 4))
    assert set(plan.tasks()) <= {s.id for s in specs}
    spans = fam.holders((0, 20), {"m1", "m2"})
    assert all(set(hs) <= {"m1", "m2"} for _, _, hs in spans)
    with pytest.raises(PlanError, match=r"rescue: family 'usctec' keeps no coded rows"):
        fam.rescue(0, 3, set(), ["m1"])


# -- hetero ------------------------------------------------------------------------------------

def _hetero(n=5, masters=(8, 12), seed=2):
    fam = HeteroFamily(het.HeteroOptions(), masters, None, seed)
    specs = _specs(n)
    return fam, specs, fam.start(specs)


def test_hetero_start_stores_every_master_decodably_and_replans_only_on_change():
    fam, specs, ch = _hetero()
    het.check_decodable(fam.storage, [s.id for s in specs])
    assert {src for src, *_ in ch.moves} == {"C0", "C1"}
    assert fam.repair(_present(specs), 0) == Change()  # nothing changed: nothing to do
    ch = fam.repair(_present(specs, [s.id for s in specs[1:]]), 0)
    assert set(fam.storage.machines) == {s.id for s in specs[1:]}
    het.check_decodable(fam.storage, [s.id for s in specs[1:]])
    assert all(m != "m0" for *_, m in ch.moves)


def test_hetero_a_joiner_is_stored_at_the_next_repair_and_the_others_shrink():
    fam, specs, _ = _hetero()
    new = MachineSpec("m9", 4.0, 1.0)
    assert fam.join(new) == Change()
    ch = fam.repair(_present(specs + [new]), 0)
    assert _rows_on(ch.moves, "m9")
    for m, by in ch.shrink.items():  # a shrunk machine keeps what the new storage gives it
        for src, rs in by.items():
            assert tuple(rs) == fam.storage.blocks[int(src[1:])].get(m, ())


def test_hetero_rescue_stores_fresh_rows_on_the_first_machine():
    fam, specs, _ = _hetero()
    held = {i for n, rs in fam.storage.blocks[1].items() if n in ("m3", "m4")
            for a, b in rs for i in range(a, b)}
    ch = fam.rescue(1, 3, {0, 1}, ["m3", "m4"])
    assert ch.rows == 3 and {m for *_, m in ch.moves} == {"m3"}
    got = _rows_on(ch.moves, "m3", "C1")
    assert not got & held and not got & {0, 1}  # rows the machines lacked, none excluded
    assert max(got) < fam.storage.capacity[1]
    assert got <= {i for a, b in fam.storage.blocks[1]["m3"] for i in range(a, b)}


def test_hetero_plans_are_drawn_per_step_and_need_no_holders():
    fam, specs, _ = _hetero()
    assert fam.state_key() is None
    plan = fam.plan("hetero", _present(specs), 0, StepRequest(3, "hetero", None, 1))
    again = fam.plan("hetero", _present(specs), 0, StepRequest(3, "hetero", None, 1))
    assert plan.serve == again.serve  # the same step draws the same
    with pytest.raises(PlanError, match=r"holders: family 'hetero'"):
        fam.holders((0, 1), ["m0"])


# -- unified -----------------------------------------------------------------------------------

def _unified(n=4, q=2, rows=10):
    fam = UnifiedFamily(uni.UnifiedOptions(mu="1/2", q=q), rows, F)
    specs = _specs(n)
    return fam, specs, fam.start(specs)


def test_unified_start_asks_for_the_coded_source_as_data():
    fam, specs, ch = _unified()
    st = fam.storage
    (put,) = ch.puts
    assert put.name == "U0" and put.base == "A" and put.drop is None and not put.if_missing
    assert ch.redesign is None  # the first design replaces none
    A = np.arange(40, dtype=float).reshape(10, 4)
    np.testing.assert_array_equal(put.encode(A), uni.coded_matrix(st, A))
    assert put.values_rows == ch.rows == uni.values_moved(st, 4)[0]
    for mach, rs in uni.store_orders(st).items():
        assert _rows_on(ch.moves, mach, "U0") == {i for a, b in rs for i in range(a, b)}


def test_unified_re_encodes_when_fewer_than_q_servers_are_left():
    fam, specs, _ = _unified(n=4, q=2)
    keep = [s.id for s in specs[:1]] + ["x1", "x2"]
    fam_specs = specs + [MachineSpec("x1"), MachineSpec("x2")]
    assert len(fam.storage.live(keep)) == 1 < fam.storage.q
    ch = fam.repair(_present(fam_specs, keep), 0)
    (put,) = ch.puts
    assert put.name == "U1" and put.drop == "U0"
    assert ch.redesign == fam.storage.reason and "left" in ch.redesign
    assert fam.sources() == ("U1",)
    assert fam.repair(_present(fam_specs, keep), 0) == Change()  # it covers now


def test_unified_re_encodes_for_inputs_that_do_not_fit():
    fam, specs, _ = _unified(n=4, q=4)  # designed for N = q = 4 inputs
    assert fam.repair(_present(specs), 0, n_cols=8) == Change()  # 8 fit the batches
    assert fam.repair(_present(specs), 0) == Change()  # None: the options' N
    ch = fam.repair(_present(specs), 0, n_cols=3)
    assert [p.name for p in ch.puts] == ["U1"] and "N = 3 inputs" in ch.redesign


def test_unified_a_returning_server_gets_its_rows_and_the_source_if_missing():
    fam, specs, _ = _unified()
    st = fam.storage
    ch = fam.join(MachineSpec(st.servers[1]))
    (put,) = ch.puts
    assert put == PutSource("U0", put.encode, if_missing=True)
    assert _rows_on(ch.moves, st.servers[1]) == {i for a, b in st.ranges_of(1)
                                                 for i in range(a, b)}
    assert fam.join(MachineSpec("stranger")) == Change()  # used at the next re-design
