"""Two coded rules of the pull queue (:class:`~elastic_coded.families.usctec.queues.CodedQueue`)
for the end of a step with stragglers:

* a piece whose every position is done or under way may still get a backup: a copy of the
  position expected last (two stragglers on one piece use up ``S = 2`` free positions);
* a call cancelled while running past its expected end bounds its machine's rate, so a
  straggler outrun by the others is not planned at its old speed for the last backups.

Checked on hand-made queues, on the small event simulation of ``test_pull.py`` and on the
runtime's collector (a copy of a position in hand is not used twice)."""

import numpy as np

from elastic_coded.algebra import field
from elastic_coded.algebra.lagrange import lagrange_code
from elastic_coded.families.usctec import cyclic_placement, plan_step
from elastic_coded.families.usctec import pull as pl
from elastic_coded.schemes.policies.collect import LagrangeCollector
from elastic_coded.schemes.reference import assemble, compute_task
from elastic_coded.schemes.wire import TaskSpec

ROWS = (0, 10)


def _one_piece(rates: dict, need: int = 2, K: int = 3, margin: float = 0.1):
    """A queue of one piece of ``K`` positions (10 products each) that every machine stores;
    the first ``need`` positions planned on the first ``need`` machines."""
    ms = list(rates)
    units = [pl.Unit(0, p, ROWS) for p in range(K)]
    queues = {m: ([units[i]] if i < need else []) for i, m in enumerate(ms)}
    prod = {u: 10 for u in units}
    return pl.CodedQueue(queues, need, K, (tuple(ms),), prod, dict(rates), margin=margin), units


def test_a_piece_with_every_position_under_way_gets_a_copy_of_the_one_expected_last():
    q, u = _one_piece({"a": 1.0, "b": 10.0, "c": 10.0, "d": 10.0})
    q.sent("a", q.next_for("a", 0.0), "ka", 0.0)      # position 0, expected at 10 s
    q.sent("b", q.next_for("b", 0.0), "kb", 0.0)      # position 1, expected at 1 s
    q.finished("b", "kb", 1.0, 1.0)
    got = q.next_for("c", 1.0)                        # the free position 2, done by 2 s
    assert got == [u[2]]
    q.sent("c", got, "kc", 1.0)
    # at 1 s, c's copy is expected at 2 s: d, done by 2 s too, gains nothing
    assert q.next_for("d", 1.0) == []
    # at 3 s, c is overdue (expected at 5 s now): no position is free, d copies the one
    # expected last (a's position 0, at 10 s) and is done by 4 s
    got = q.next_for("d", 3.0)
    assert got == [u[0]] and q.backups == 2
    q.sent("d", got, "kd", 3.0)
    # the copy counts once: the piece is covered by positions 0, 1 and 2, not by four results
    assert q.running_positions(0) == {0, 2} and q.done[0] == {1}
    q.finished("d", "kd", 4.0, 1.0)
    assert q.done[0] == {0, 1}
    assert sorted(q.decoded(0)) == [("a", "ka"), ("c", "kc")]


def test_no_copy_is_made_when_the_positions_under_way_are_fewer_than_the_results_needed():
    q, u = _one_piece({"a": 1.0, "b": 1.0, "c": 10.0}, need=2, K=2)
    q.sent("a", q.next_for("a", 0.0), "ka", 0.0)
    # b has not asked: one position under way of the two needed, and b's own is queued, so c
    # steals it rather than copy a's
    assert q.next_for("c", 0.0) == [u[1]]
    assert q.backups == 0 and q.stolen == 1


def test_a_straggler_outrun_is_planned_no_faster_than_it_ran():
    q, u = _one_piece({"a": 10.0, "b": 10.0, "c": 10.0})
    q.sent("a", q.next_for("a", 0.0), "ka", 0.0)      # expected at 1 s
    q.sent("b", q.next_for("b", 0.0), "kb", 0.0)
    q.dropped("a", "ka", 4.0)                          # ran 4 s without finishing 10 products
    assert q.rate["a"] == 10 / 4
    q.dropped("b", "kb", 0.5)                          # cancelled before its expected end
    assert q.rate["b"] == 10.0
    # a call cancelled before it started says nothing of the machine's speed
    q2, _ = _one_piece({"a": 10.0, "b": 10.0})
    q2.sent("a", [u[0]], "k1", 0.0)
    q2.sent("a", [u[1]], "k2", 0.0)
    q2.dropped("a", "k2", 5.0)
    assert q2.rate["a"] == 10.0
    # the lag every call is allowed is not counted as running time
    q3, _ = _one_piece({"a": 10.0, "b": 10.0})
    q3.lag_s = 1.0
    q3.sent("a", [u[0]], "k1", 0.0)
    q3.dropped("a", "k1", 5.0)
    assert q3.rate["a"] == 10 / 4


def test_stragglers_holding_every_spare_position_do_not_hold_the_step():
    """Three machines of ten slowed 50x, which between them hold positions of pieces whose
    spare positions they use up: with copies the step takes 1.4x the step without stragglers
    (without copies, 8.2x: it waited for a straggler)."""
    from test_pull import _coded, _simulate

    L, S, n = 4, 2, 10
    speeds = {f"m{i}": float(s) for i, s in enumerate(np.linspace(1, 4, n))}
    _, _, sub, _, q0 = _coded(n, L, S, speeds, 2)
    t0, _ = _simulate(q0, speeds, {}, lambda: len(q0.complete) == len(sub.pieces))
    _, _, sub, _, q = _coded(n, L, S, speeds, 2)
    t, _ = _simulate(q, speeds, {"m1": 50.0, "m4": 50.0, "m6": 50.0},
                     lambda: len(q.complete) == len(sub.pieces))
    assert t < 2 * t0
    for pi in range(len(sub.pieces)):
        assert len(q.done[pi]) >= L and q.done[pi] <= set(range(L + S))


def test_the_collector_uses_a_copy_of_a_position_in_hand_once():
    F = field("gf(65537)")
    L, S = 2, 1
    placement = cyclic_placement(12, ["a", "b", "c"], L, S)
    plan = plan_step(placement, placement.machines, [1.0] * 3, L, S)
    code = lagrange_code(F, L, S)
    rng = np.random.default_rng(0)
    A, B = F.random((12, 4), rng), F.random((4, 2 * L), rng)
    coded = code.encode(B)
    col = LagrangeCollector(plan, code)
    _, piece, grp = next(iter(plan.iter_pieces()))
    task = lambda p: TaskSpec("A", grp.rows, p, piece.cols, 0, p)  # noqa: E731
    H = lambda p: compute_task(F, A[grp.rows[0]:grp.rows[1]], coded[p], task(p))  # noqa: E731
    first, other = piece.machines[0], piece.machines[1]
    assert col.add(first, task(0), H(0))
    assert not col.add(other, task(0), H(0))   # a copy of position 0: not a second result
    assert 0 not in col.decoded and col.results[0][0][0] == first
    assert col.add(other, task(1), H(1)) and 0 in col.decoded
    Y = assemble(plan, col.decoded, B.shape[1] // L, F.dtype)
    rows = grp.rows
    assert np.array_equal(Y[rows[0]:rows[1]], F.matmul(A[rows[0]:rows[1]], B))
