"""The whole-plan executor sends a held plan's task tuples again (no rebuilding each step), and
what it sends is the plan's tasks, exactly."""

from elastic_coded.families.usctec import cyclic_placement, plan_step
from elastic_coded.runtime.executors.whole import _sent_tasks


def _plan(N=6, L=2, S=1, rows=60, speeds=None):
    pl = cyclic_placement(rows, [f"m{i}" for i in range(N)], L, S)
    return plan_step(pl, pl.machines, speeds or [1.0] * N, L, S)


def test_a_held_plan_sends_the_same_tuples_and_they_are_its_tasks():
    plan = _plan()
    first = _sent_tasks(plan)
    assert set(first) == set(plan.tasks())
    for m, ts in plan.tasks().items():
        sent = first[m]
        assert [(s.source, s.rows, s.arg, s.cols, s.piece, s.position) for s in sent] == \
            [("A", t.rows, t.position, t.cols, t.piece, t.position) for t in ts]
    again = _sent_tasks(plan)
    assert all(again[m] is first[m] for m in first)


def test_another_plan_gets_its_own_tasks_even_when_equal_in_value():
    a, b = _plan(), _plan()
    ta = _sent_tasks(a)
    tb = _sent_tasks(b)
    assert all(tb[m] == ta[m] and tb[m] is not ta[m] for m in ta)
    c = _plan(speeds=[1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
    tc = _sent_tasks(c)
    assert set(tc) == set(c.tasks())
    assert {m: len(ts) for m, ts in tc.items()} == {m: len(ts) for m, ts in c.tasks().items()}
    back = _sent_tasks(a)  # the last plan only is kept: a's tasks are made again, the same
    assert back is not ta and back == ta
