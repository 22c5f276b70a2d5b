"""A held plan sends its task tuples again (the whole-plan executor rebuilds none each step), and
what it sends is the plan's tasks, exactly."""

from elastic_coded.families.usctec import cyclic_placement, plan_step


def _plan(N=6, L=2, S=1, rows=60, speeds=None):
    pl = cyclic_placement(rows, [f"m{i}" for i in range(N)], L, S)
    return plan_step(pl, pl.machines, speeds or [1.0] * N, L, S)


def test_a_held_plan_sends_the_same_tuples_and_they_are_its_tasks():
    plan = _plan()
    first = plan.wire_tasks()
    assert set(first) == set(plan.tasks())
    for m, ts in plan.tasks().items():
        sent = first[m]
        assert [(s.source, s.rows, s.arg, s.cols, s.piece, s.position) for s in sent] == \
            [("A", t.rows, t.position, t.cols, t.piece, t.position) for t in ts]
    again = plan.wire_tasks()
    assert all(again[m] is first[m] for m in first)


def test_another_plan_gets_its_own_tasks_even_when_equal_in_value():
    a, b = _plan(), _plan()
    ta = a.wire_tasks()
    tb = b.wire_tasks()
    assert all(tb[m] == ta[m] and tb[m] is not ta[m] for m in ta)
    c = _plan(speeds=[1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
    tc = c.wire_tasks()
    assert set(tc) == set(c.tasks())
    assert {m: len(ts) for m, ts in tc.items()} == {m: len(ts) for m, ts in c.tasks().items()}
    back = a.wire_tasks()  # each plan keeps its own: a's are not made again after c's
    assert back is ta


def test_a_replaced_plan_starts_its_caches_afresh():
    from dataclasses import replace
    plan = _plan()
    plan.tasks(), plan.wire_tasks()
    one = replace(plan, pieces=plan.pieces[:1])   # as subdivide and row units do
    assert sum(len(ts) for ts in one.tasks().values()) == len(plan.pieces[0].machines)
    assert {m: len(ts) for m, ts in one.wire_tasks().items()} == \
        {m: len(ts) for m, ts in one.tasks().items()}
