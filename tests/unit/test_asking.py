"""Which machines a pull driver asks (families/usctec/asking.py), against a scripted queue: a
resting machine is not asked until its nap ends, a call of it ends or the queue wakes it, and
the machines asked get work in plan order.  (That this sends what asking everyone sends is
checked through the simulator in test_queue_indexes.py.)"""

import math

from elastic_coded.families.usctec.asking import Asking


class _Queue:
    """Gives each machine the units in ``work[m]``, one per call; a machine given nothing
    rests until ``naps[m]`` (``None``: not at all)."""

    def __init__(self, work, naps):
        self.work, self.naps, self.dead = work, naps, set()
        self.asked, self.inflight, self.wakes = [], {}, (False, set())

    def refresh(self, now):
        pass

    def take_wakes(self):
        out, self.wakes = self.wakes, (False, set())
        return out

    def resting(self, m, now):
        return self.naps.get(m)

    def calls_in_flight(self, m):
        return self.inflight.get(m, 0)

    def next_for(self, m, now):
        self.asked.append(m)
        return [self.work[m].pop(0)] if self.work.get(m) else []


def _fill(a, q, now, depth=2):
    sent = []

    def send(m, units, t):
        q.inflight[m] = q.inflight.get(m, 0) + 1
        sent.append((m, units[0]))

    a.fill(q, now, depth, lambda m: q.inflight.get(m, 0) < depth, send)
    return sent


def test_resting_machines_are_asked_again_only_when_something_changes():
    q = _Queue({"a": [1, 2, 3], "b": [], "c": [4]}, {"b": 0.5, "c": math.inf})
    a = Asking(("a", "b", "c"))
    assert _fill(a, q, 0.0) == [("a", 1), ("a", 2), ("c", 4)]  # plan order, up to depth
    assert a.waiting()  # b naps until 0.5
    q.asked.clear()
    assert _fill(a, q, 0.1) == [] and q.asked == []  # a is full, b and c rest
    q.inflight["a"] = 1
    a.freed("a")  # one of a's calls ended
    q.work["b"] = [5]
    assert _fill(a, q, 0.2) == [("a", 3)] and q.asked == ["a"]  # b's nap has not ended
    assert _fill(a, q, 0.6) == [("b", 5)]  # now it has
    q.work["c"] = [6]
    q.wakes = (False, {"c"})
    assert _fill(a, q, 0.7) == [("c", 6)]


def test_a_machine_outside_the_plan_is_never_asked_and_a_dead_one_is_skipped():
    q = _Queue({"a": [1], "b": [2]}, {})
    a = Asking(("a", "b"))
    a.freed("x")  # a call sent outside the plan ended: nothing to ask
    q.dead.add("a")
    assert _fill(a, q, 0.0) == [("b", 2)] and "a" not in q.asked
    assert "x" not in a.ask
