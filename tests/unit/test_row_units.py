"""A sparse A planned in nonzeros (schemes/row_units.py): units of equal nonzeros, the USCTEC
family over them, and what leaves it translated back to rows of A.  Pure: no Ray."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.algebra.fields import field
from elastic_coded.algebra.sparse import balanced_order
from elastic_coded.errors import PlanError
from elastic_coded.families.usctec import validate
from elastic_coded.families.usctec.pull import PullPlan
from elastic_coded.families.usctec.store import UsctecFamily
from elastic_coded.machines import MachineSpec
from elastic_coded.schemes.families import Present, Setup, make_family
from elastic_coded.schemes.plan import StepPlan
from elastic_coded.schemes.row_units import (
    MIN_CUTS,
    MIN_UNITS,
    ROWS_PER_UNIT,
    RowUnits,
    UnitsFamily,
    placement_rows,
    placement_units,
    row_units,
    unit_count,
)
from elastic_coded.schemes.wire import StepRequest

F = field("real")
POLICIES = ("usctec", "usctec-auto", "usctec-pull", "dynamic", "proportional")


def _prefix(nnz) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)


def _heavy_first(q=1200, heavy=120, dense=40):
    """Row nonzeros of a matrix whose first ``heavy`` rows hold ``dense`` each, the rest 1
    (not in the runtime's balanced order: the units must follow the nonzeros anyway)."""
    nnz = np.ones(q, dtype=np.int64)
    nnz[:heavy] = dense
    return nnz


def _specs(n, storage=1.0):
    return [MachineSpec(f"m{i}", 1.0 + 0.5 * (i % 4), storage) for i in range(n)]


def _present(specs):
    return Present(tuple(s.id for s in specs), {s.id: s.storage for s in specs},
                   {s.id: s.speed for s in specs})


def _steps(plan):
    if isinstance(plan, PullPlan):
        return [p for p in (plan.base, plan.eager, plan.lean) if p is not None]
    return [plan]


# -- the units ---------------------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=3000), st.integers(0, 3))
def test_units_are_runs_of_rows_cut_at_the_nonzero_quantiles(nnz, heavy):
    nnz = np.array(nnz, dtype=np.int64)
    nnz[: len(nnz) // 7 * heavy // 3] *= 25  # a heavy head sometimes
    pre, q = _prefix(nnz), nnz.size
    u = row_units(pre)
    if q // ROWS_PER_UNIT < MIN_UNITS or nnz.sum() == 0:
        assert u is None
        return
    n = unit_count(nnz)
    assert min(MIN_CUTS, q // ROWS_PER_UNIT) <= n <= q // ROWS_PER_UNIT
    if u is None:  # heavy rows merged the cuts below MIN_UNITS units
        return
    assert MIN_UNITS <= u.num_units <= n and u.num_rows == q
    assert u.edges[0] == 0 and u.edges[-1] == q and np.all(np.diff(u.edges) >= 1)
    # every quantile has an edge within half the heaviest row of it
    target = nnz.sum() * np.arange(n + 1) / n
    gap = np.min(np.abs(pre[u.edges][None, :] - target[:, None]), axis=1)
    assert np.all(gap[:-1] <= nnz.max() / 2 + 1e-9)
    for k in (0, u.num_units // 2, u.num_units):  # a unit edge is found back
        assert u.unit(int(u.edges[k])) == k


def test_a_row_heavier_than_a_unit_stays_whole_in_one_unit():
    nnz = np.ones(400, dtype=np.int64)
    nnz[200] = 60
    u = row_units(_prefix(nnz))
    k = int(np.searchsorted(u.edges, 200, side="right")) - 1
    assert u.edges[k] <= 200 < u.edges[k + 1]
    assert np.all(np.diff(u.edges) >= 1)


def test_a_row_edge_inside_a_unit_is_refused_by_name():
    u = RowUnits(np.array([0, 3, 5, 9]))
    with pytest.raises(PlanError, match="row 4 is not where a unit starts"):
        u.unit(4)


# -- the family over units ----------------------------------------------------------------------

def _family(nnz, specs, S=1):
    fam = make_family("usctec", Setup(nnz.size, 2, S, F, seed=1, row_prefix=_prefix(nnz)))
    assert isinstance(fam, UnitsFamily)
    fam.start(specs)
    return fam


def test_small_or_dense_matrices_keep_the_row_family():
    assert isinstance(make_family("usctec", Setup(30, 2, 1, F, row_prefix=_prefix(np.ones(30)))),
                      UsctecFamily)
    assert isinstance(make_family("usctec", Setup(99, 2, 1, F, row_prefix=_prefix(np.zeros(99)))),
                      UsctecFamily)
    assert isinstance(make_family("usctec", Setup(1000, 2, 1, F)), UsctecFamily)
    with pytest.raises(ValueError, match="row_prefix: covers 300 rows, A has 400"):
        make_family("usctec", Setup(400, 2, 1, F, row_prefix=_prefix(np.ones(300))))


def test_moves_placement_and_snapshot_are_in_rows_of_A_and_round_trip():
    nnz, specs = _heavy_first(), _specs(6, storage=0.75)
    fam = make_family("usctec", Setup(nnz.size, 2, 1, F, seed=1, row_prefix=_prefix(nnz)))
    ch = fam.start(specs)
    p = fam.storage
    assert p.num_rows == nnz.size and p is fam.storage  # translated once per placement
    for s in specs:
        sent = sorted((a, b) for _, a, b, m in ch.moves if m == s.id)
        assert sent == sorted(p.rows_of(s.id))
    assert placement_units(fam.units, p).blocks == fam.inner.placement.blocks
    assert placement_rows(fam.units, fam.inner.placement) == p
    snap = fam.snapshot()
    fam.forget("m0")
    fam.restore(snap)
    assert fam.storage == p and fam.members() == p.machines


def test_budgets_count_nonzeros_not_rows():
    nnz, specs = _heavy_first(), _specs(6, storage=0.6)
    fam = _family(nnz, specs)
    pre, p = _prefix(nnz), fam.storage
    for s in specs:  # about 0.6 of the nonzeros (units differ: some are split, some heavy)
        held = sum(int(pre[b] - pre[a]) for a, b in p.rows_of(s.id))
        assert held <= 0.65 * nnz.sum()
    # a machine holding the light rows keeps far more than 0.6 of the rows
    assert max(p.stored_rows(s.id) for s in specs) > 0.7 * nnz.size


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_plans_units_and_gets_rows_of_A(policy):
    nnz, specs = _heavy_first(), _specs(6)
    fam = _family(nnz, specs)
    req = StepRequest(0, policy, None, 4)
    plan = fam.plan(policy, _present(specs), 1, req)
    inner = fam.inner.plan(policy, _present(specs), 1, req)
    for real, unit in zip(_steps(plan), _steps(inner)):
        validate(unit, fam.inner.placement)  # the planner's constraints, in units
        assert real.num_rows == nnz.size
        assert [fam.units.rows(*g.rows) for g in unit.groups] == [g.rows for g in real.groups]
        for m, tasks in real.tasks().items():  # every task on rows its machine stores
            stored = fam.storage.rows_of(m)
            for t in tasks:
                assert any(a <= t.rows[0] and t.rows[1] <= b for a, b in stored), (m, t)
    if isinstance(plan, PullPlan) and plan.base is not None:
        assert plan.holders == inner.holders


def test_loads_follow_nonzeros_where_the_row_plan_misses_them():
    """Dense rows first: the units' plan gives each machine nonzeros in proportion to its speed;
    the plan over rows gives the machines holding the dense head several times their share."""
    nnz, specs = _heavy_first(), _specs(6)
    pre, total = _prefix(nnz), int(nnz.sum())
    speeds = np.array([s.speed for s in specs])

    def worst(plan):  # the slowest machine's nonzeros over its speed, against the ideal
        work = {m: sum(int(pre[t.rows[1]] - pre[t.rows[0]]) for t in ts)
                for m, ts in plan.tasks().items()}
        t = max(work.get(s.id, 0) / s.speed for s in specs)
        return t / (total * plan.K / speeds.sum())  # each machine: its groups' rows

    req = StepRequest(0, "usctec", None, 4)
    units = _family(nnz, specs).plan("usctec", _present(specs), 1, req)
    rows = UsctecFamily(nnz.size, 2, 1, F, seed=1)
    rows.start(specs)
    by_rows = rows.plan("usctec", _present(specs), 1, StepRequest(0, "usctec", None, 4))
    assert isinstance(units, StepPlan)
    assert worst(units) <= 1.08
    assert worst(by_rows) >= 1.5


@pytest.mark.parametrize("order", ["as given", "balanced"])
def test_dynamic_chunks_and_proportional_loads_are_balanced_in_nonzeros(order):
    nnz = _heavy_first()
    if order == "balanced":
        nnz = nnz[balanced_order(nnz)]
    specs, pre = _specs(6), _prefix(nnz)
    speeds = np.array([s.speed for s in specs])
    fam = _family(nnz, specs)
    dyn = fam.plan("dynamic", _present(specs), 1, StepRequest(0, "dynamic", None, 4)).base
    chunk = [int(pre[g.rows[1]] - pre[g.rows[0]]) for g in dyn.groups]
    rows = UsctecFamily(nnz.size, 2, 1, F, seed=1)
    rows.start(specs)
    by_rows = rows.plan("dynamic", _present(specs), 1, StepRequest(0, "dynamic", None, 4)).base
    chunk_rows = [int(pre[g.rows[1]] - pre[g.rows[0]]) for g in by_rows.groups]
    assert max(chunk) <= 1.45 * nnz.sum() / len(chunk)
    assert max(chunk) / np.mean(chunk) < 0.95 * max(chunk_rows) / np.mean(chunk_rows)
    prop = fam.plan("proportional", _present(specs), 1, StepRequest(0, "proportional", None, 4))
    work = {m: sum(int(pre[t.rows[1]] - pre[t.rows[0]]) for t in ts)
            for m, ts in prop.tasks().items()}
    assert max(work[s.id] / s.speed for s in specs) <= 1.1 * nnz.sum() / speeds.sum()


def test_holders_and_repair_answer_in_rows():
    nnz, specs = _heavy_first(), _specs(6, storage=0.75)
    fam = _family(nnz, specs)
    a, b = fam.storage.blocks[0].start, fam.storage.blocks[0].stop
    assert fam.holders((a, b), [s.id for s in specs]) == \
        fam.storage.holders_of((a, b), [s.id for s in specs])
    fam.forget("m0")
    ch = fam.repair(_present(specs[1:]), 1)
    assert fam.storage.min_replication() >= 3 and "m0" not in fam.members()
    edges = set(fam.units.edges.tolist())
    assert all(a in edges and b in edges for _, a, b, _ in ch.moves)
    for m, kept in ch.shrink.items():
        assert sorted(kept["A"]) == sorted(fam.storage.rows_of(m))


def test_budgets_that_hold_L_plus_S_copies_in_nonzeros_hold_them_in_units():
    """Six machines of 0.5 hold every row 3 times: the count of units is a multiple of 12,
    so they do in whole units, without slack.  Seven of 3/7 do only when 7 divides it; where
    not, each machine may hold one unit more (and every row is still held 3 times)."""
    slack = []
    for q in (1001, 1203, 2501, 4099):
        nnz = np.random.default_rng(q).integers(1, 9, q)
        for n, e in ((6, 0.5), (7, 3 / 7)):
            specs = _specs(n, storage=e)
            fam = _family(nnz, specs)
            assert fam.units.num_units % 12 == 0
            assert fam._slack == (n == 7 and fam.units.num_units % 7 != 0)
            assert fam.storage.min_replication() >= 3
            fam.forget(specs[-1].id)
            joiner = MachineSpec("new", 2.0, e)
            fam.join(joiner)
            fam.repair(_present(specs[:-1] + [joiner]), 1)
            assert fam.storage.min_replication() >= 3
            slack.append(fam._slack)
    assert any(slack) and not all(slack)
