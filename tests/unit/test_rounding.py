"""Integer rounding of the per-step plan: ``c_int`` against an independent MILP, the documented
bound, and how the rows are spread.

The yardstick is :func:`integer_optimum`: a MILP over integer row counts ``y[b, n]`` per (block,
available holder), ``sum_n y[b, n] = K |b|``, ``0 <= y[b, n] <= |b|``, minimising the largest
``sum_b y[b, n] / (q s[n])``.  Every plan with whole-column pieces has such counts and every such
counts are a plan (wrap-around layout), so its optimum is the true integer optimum of the problem
``plan_step`` solves; it is solved by HiGHS branch and bound, sharing nothing with the planner's
max-flow search.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.families.usctec import (
    Placement,
    RowBlock,
    cyclic_placement,
    filled_placement,
    integer_optimum,
    optimal_load,
    plan_step,
    rounding_bound,
    validate,
)


def _random_blocks(rng, q, N, K, holders_of=None):
    """Rows cut at random into 1..8 blocks, each on a random set of K..N machines (or
    ``holders_of(i)``); blocks may share holders without being adjacent (multi-block atoms)."""
    nb = int(rng.integers(1, min(8, q) + 1))
    cuts = np.sort(rng.choice(np.arange(1, q), size=nb - 1, replace=False)) if nb > 1 else []
    edges = [0, *[int(c) for c in cuts], q]
    pool = [tuple(sorted(rng.choice(N, size=int(rng.integers(K, N + 1)), replace=False).tolist()))
            for _ in range(3)]
    blocks = [RowBlock(a, b, pool[int(rng.integers(3))]) for a, b in zip(edges[:-1], edges[1:])]
    return Placement(q, tuple(range(N)), (1.0,) * N, tuple(blocks))


@st.composite
def instances(draw):
    """Small instances of every placement kind, with uneven (log-normal, sigma 1) speeds."""
    K = draw(st.integers(1, 6))
    L = draw(st.integers(1, K))
    N = draw(st.integers(K, K + 8))
    q = draw(st.sampled_from([37, 100, 1000]))
    kind = draw(st.sampled_from(["full", "cyclic", "filled", "random", "partial"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    avail = list(range(N))
    if kind == "full":
        pl = Placement(q, tuple(avail), (1.0,) * N,
                       (RowBlock(0, q // 3, tuple(avail)), RowBlock(q // 3, q, tuple(avail))))
    elif kind == "cyclic":
        pl = cyclic_placement(q, N, L, K - L)
    elif kind == "filled":
        R = int(rng.integers(K, N + 1))
        shares, _ = optimal_load(rng.uniform(0.5, 2, N), R, 0)
        pl = filled_placement(q, range(N), shares, R, [1.0] * N)
    else:
        pl = _random_blocks(rng, q, N, K)
        if kind == "partial":  # drop machines while every block keeps K available holders
            for m in rng.permutation(N).tolist():
                if all(len(set(b.holders) - {m}) >= K for b in pl.blocks if m in b.holders) \
                        and len(avail) > K and rng.random() < 0.5:
                    avail.remove(m)
                    pl = Placement(q, pl.machines, pl.budgets, tuple(
                        RowBlock(b.start, b.stop, tuple(h for h in b.holders if h != m))
                        for b in pl.blocks))
    speeds = rng.lognormal(0.0, 1.0, len(avail))
    return pl, avail, speeds, L, K - L


@settings(max_examples=60, deadline=None)
@given(instances())
def test_c_int_is_the_integer_optimum(inst):
    pl, avail, speeds, L, S = inst
    plan = plan_step(pl, avail, speeds, L, S)
    validate(plan, pl)
    # the plan's c_int is what its rows cost
    rows = plan.rows_computed()
    q = pl.num_rows
    c_rows = max(rows.get(m, 0) / (q * s) for m, s in zip(avail, speeds))
    assert plan.c_int == pytest.approx(c_rows, rel=1e-12)
    # never worse than HiGHS's integer solution; HiGHS's own tolerances (1e-6 on feasibility
    # and gap) can leave it a hair above the optimum at a near tie, where the plan is better
    best = integer_optimum(pl, avail, speeds, L, S)
    assert best * (1 - 1e-5) <= plan.c_int <= best * (1 + 1e-7)
    # the documented bound
    assert plan.c * (1 - 1e-9) <= plan.c_int <= plan.c + rounding_bound(plan) + 1e-12
    assert rounding_bound(plan) < 1 / (q * min(s for s, t in zip(speeds, plan.theta) if t > 1e-12))


@settings(max_examples=60, deadline=None)
@given(instances())
def test_every_machine_gets_at_least_the_floor_of_its_share(inst):
    pl, avail, speeds, L, S = inst
    plan = plan_step(pl, avail, speeds, L, S)
    rows = plan.rows_computed()
    for m, t in zip(avail, plan.theta):
        assert rows.get(m, 0) >= np.floor(pl.num_rows * t - 1e-6)


def test_tiny_share_gets_no_row():
    """The case cumulative rounding got wrong: full storage, q = 1000, 42 machines, L = 1, S = 0;
    a machine with a fractional share of a fraction of a row must not be given a whole row."""
    rng = np.random.default_rng(7)
    N, q = 42, 1000
    speeds = rng.lognormal(0.0, 1.0, N)
    speeds[0] = 0.17 * speeds[1:].sum() / (q - 0.17)  # fractional share: 0.17 rows
    pl = Placement(q, tuple(range(N)), (1.0,) * N, (RowBlock(0, q, tuple(range(N))),))
    plan = plan_step(pl, range(N), speeds, 1, 0)
    assert q * plan.theta[0] == pytest.approx(0.17, rel=1e-9)
    assert plan.rows_computed().get(0, 0) == 0
    assert plan.c_int == pytest.approx(integer_optimum(pl, range(N), speeds, 1, 0), rel=1e-9)
    assert plan.c_int <= 1.02 * plan.c


@pytest.mark.parametrize("N, q, K", [(7, 100, 3), (30, 1000, 1), (13, 997, 4)])
def test_equal_speeds_split_rows_within_one(N, q, K):
    pl = Placement(q, tuple(range(N)), (1.0,) * N, (RowBlock(0, q, tuple(range(N))),))
    plan = plan_step(pl, range(N), np.ones(N), K, 0)
    rows = [plan.rows_computed().get(m, 0) for m in range(N)]
    assert sum(rows) == K * q
    assert max(rows) - min(rows) <= 1


def test_forced_atoms_are_exact():
    """Cyclic with everyone present: every block has exactly L+S holders, nothing to round."""
    pl = cyclic_placement(120, 10, 3, 1)
    plan = plan_step(pl, range(10), np.linspace(1, 4, 10), 3, 1)
    assert plan.c_int == pytest.approx(plan.c, rel=1e-12)
    assert len(plan.groups) == len(pl.blocks)


def test_row_count_limit_named():
    q = 2**30
    pl = Placement(q, (0, 1, 2), (1.0,) * 3, (RowBlock(0, q, (0, 1, 2)),))
    with pytest.raises(ValueError, match=r"num_rows: L\+S times the rows \(3 x 1073741824\)"):
        plan_step(pl, range(3), [1.0, 2.0, 3.0], 2, 1)
