"""The coded pull queue's rate for a machine after its first call back in a step
(:meth:`~elastic_coded.families.usctec.queues.CodedQueue.finished`): what that call showed,
not the mean with the rate the step was planned with (later calls are averaged in).  The plan's
rate knows nothing of this step's slowdown, so a straggler 5x slow, averaged, was still expected
at 1.7x after its first call and given calls three times too long."""

import numpy as np


def test_the_first_call_back_sets_the_rate_and_later_ones_are_averaged_in():
    from test_pull_copies import _one_piece

    q, u = _one_piece({"a": 10.0, "b": 10.0, "c": 10.0}, need=2, K=3)
    q.sent("a", q.next_for("a", 0.0), "k1", 0.0)
    q.finished("a", "k1", 5.0, 5.0)          # 10 products in 5 s: planned at 10 a second
    assert q.rate["a"] == 2.0
    q.sent("a", [u[2]], "k2", 5.0)
    q.finished("a", "k2", 7.5, 2.5)          # 4 a second: averaged with the 2 measured
    assert q.rate["a"] == 3.0
    # a call that brings nothing of this queue's changes no rate
    q.finished("b", "nothing", 1.0, 1.0)
    assert q.rate["b"] == 10.0


def test_a_stragglers_calls_after_its_first_carry_no_more_than_it_can_do_in_a_call():
    """Ten machines, one slowed 5x from the start: once its first (one-unit) call is back,
    each later call carries at most ``batch_s`` of work at its true speed (or a single unit),
    where the averaged rate gave it calls of twice that or more."""
    from test_pull import _coded, _simulate

    from elastic_coded.families.usctec import pull as pl

    L, S, n = 4, 2, 10
    speeds = {f"m{i}": float(s) for i, s in enumerate(np.linspace(1, 4, n))}
    slow_m, factor = "m9", 5.0
    _, _, sub, _, q = _coded(n, L, S, speeds, 16)
    q.batch_s = 60.0   # calls of several units: about 240 products at 4 a second
    calls = []
    real = pl.CodedQueue.sent

    def sent(self, m, units, key, now):
        if m == slow_m:
            calls.append(sum(self.products[u] for u in units))
        return real(self, m, units, key, now)

    q.sent = sent.__get__(q)
    _simulate(q, speeds, {slow_m: factor}, lambda: len(q.complete) == len(sub.pieces))
    unit = max(q.products[u] for u in q.products)
    true_rate = speeds[slow_m] / factor
    later = calls[2:]   # the first two are one unit each (slow start, depth 2)
    assert later, calls
    assert all(w <= max(unit, q.batch_s * true_rate * 1.000001) for w in later), \
        (later, q.batch_s * true_rate, unit)
