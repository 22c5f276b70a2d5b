"""The one pull loop (:class:`PullLoop`) against a fake queue and a fake backend: no Ray, no
simulator.  What the loop owns: fills, waits with wake-ups, results filed and the cancels of
the pieces they complete, lost machines, the rescue."""

from __future__ import annotations

from elastic_coded.families.usctec.pull_loop import PullLoop


class FakeQueue:
    """Gives each machine its listed units one call at a time; records what it is told."""

    def __init__(self, work: dict, hold: dict | None = None, nap: float = float("inf")):
        self.work = {m: list(u) for m, u in work.items()}
        self.nap = nap                  # a machine given nothing rests until then
        self.hold = hold or {}          # piece -> [(m, key)] decoded() names
        self.dead: set = set()
        self.complete: set = set()
        self.running: dict = {}
        self.log: list = []

    def refresh(self, now):
        pass

    def take_wakes(self):
        return False, set()

    def resting(self, m, now):
        return self.nap

    def calls_in_flight(self, m):
        return len(self.running.get(m, ()))

    def next_for(self, m, now):
        q = self.work.get(m, [])
        return [q.pop(0)] if q else []

    def sent(self, m, units, key, now):
        self.running.setdefault(m, []).append(key)
        self.log.append(("sent", m, tuple(units), key))

    def finished(self, m, key, now, elapsed):
        if key in self.running.get(m, []):   # a rescue's call is not the queue's
            self.running[m].remove(key)
        self.log.append(("finished", m, key, elapsed))

    def dropped(self, m, key, now):
        self.running[m].remove(key)
        self.log.append(("dropped", m, key))

    def decoded(self, piece):
        self.complete.add(piece)
        self.log.append(("decoded", piece))
        return list(self.hold.get(piece, ()))

    def lost(self, m):
        self.dead.add(m)
        self.running.pop(m, None)
        self.log.append(("lost", m))


class FakeBackend:
    """Calls come back in the order sent, one event per wait; each result completes the piece
    named by its unit; ``crash`` machines die on their first call."""

    def __init__(self, pieces: int, crash=(), kills=(), rescue=None):
        self.now, self.pieces, self.crash, self.kills = 0.0, pieces, set(crash), set(kills)
        self.flight: dict = {}
        self.decoded: set = set()
        self.timeouts: list = []
        self.log: list = []
        self.key = 0
        self._rescue = rescue

    def done(self):
        return len(self.decoded) >= self.pieces

    def room(self, m):
        return sum(1 for mm, _ in self.flight.values() if mm == m) < 1

    def in_flight(self):
        return bool(self.flight)

    def rescue(self):
        self.log.append("rescue")
        if self._rescue:
            self.flight[self._rescue[0]] = self._rescue[1]
            self._rescue = None

    def send(self, m, units, now):
        self.key += 1
        self.flight[self.key] = (m, units)
        return self.key

    def decided(self, m, now, n):
        self.log.append(("decided", m, n))

    def wait(self, timeout):
        self.timeouts.append(timeout)
        key = min(self.flight)
        m, units = self.flight[key]
        self.now += 1.0
        if m in self.crash:
            del self.flight[key]
            yield ("lost", m, key, False)
            return
        yield ("result", m, key, units)

    def take(self, m, key, units):
        del self.flight[key]
        new = [u for u in units if u not in self.decoded]
        self.decoded |= set(new)
        return self.now, 0.5, self.now + 0.25, new

    def cancel(self, m, key, now):
        if key not in self.flight:
            return None
        del self.flight[key]
        self.log.append(("cancel", m, key, now))
        return m in self.kills

    def lose(self, m, now, preempted):
        self.log.append(("lose", m))
        self.flight = {k: v for k, v in self.flight.items() if v[0] != m}


def test_a_step_fills_files_and_cancels_what_a_decoded_piece_no_longer_needs():
    q = FakeQueue({"a": [0, 1], "b": [0]}, hold={0: [("b", 2)]})
    b = FakeBackend(pieces=2)
    loop = PullLoop(b, q, ("a", "b"), depth=1, tick=None)
    assert loop.run() is True and b.decoded == {0, 1}
    sent = [e for e in q.log if e[0] == "sent"]
    assert sent[:2] == [("sent", "a", (0,), 1), ("sent", "b", (0,), 2)]
    # a's result decodes piece 0: b's call 2 is cancelled at the decode time, and the queue told
    assert ("decoded", 0) in q.log and ("dropped", "b", 2) in q.log
    assert ("cancel", "b", 2, 1.25) in b.log and loop.cancelled == 1
    assert q.log.index(("finished", "a", 1, 0.5)) < q.log.index(("decoded", 0))
    assert ("sent", "a", (1,), 3) in q.log   # a asked again after its call ended
    assert all(t is None for t in b.timeouts)   # no tick: every wait blocks
    assert loop.asking.asked >= 3 and ("decided", "a", 1) in b.log


def test_a_crash_loses_its_machine_and_a_cancel_that_kills_it_too():
    q = FakeQueue({"a": [0], "b": [0], "c": [1]}, hold={0: [("c", 3)]})
    b = FakeBackend(pieces=1, crash={"a"}, kills={"c"})
    loop = PullLoop(b, q, ("a", "b", "c"), depth=1, tick=None)
    assert loop.run() is True
    assert ("lose", "a") in b.log and ("lost", "a") in q.log    # the crash of a's call
    assert ("lose", "c") in b.log and ("lost", "c") in q.log    # killed by its cancel
    assert "a" in q.dead and "c" in q.dead and "b" not in q.dead


def test_nothing_in_flight_asks_the_backend_to_rescue_and_a_failed_rescue_loses_the_step():
    q = FakeQueue({"a": [0]})
    b = FakeBackend(pieces=2)                  # piece 1 has no unit anywhere
    assert PullLoop(b, q, ("a",), depth=1, tick=None).run() is False
    assert b.log.count("rescue") == 1
    q = FakeQueue({"a": [0]})
    b = FakeBackend(pieces=2, rescue=(99, ("a", [1])))   # the rescue sends the missing unit
    assert PullLoop(b, q, ("a",), depth=1, tick=None).run() is True and b.decoded == {0, 1}


def test_waits_time_out_only_while_some_machine_may_be_given_work():
    for nap, want in ((float("inf"), {None}), (5.0, {0.1})):
        q = FakeQueue({"a": [0, 1], "b": []}, nap=nap)    # b is given nothing
        b = FakeBackend(pieces=2)
        PullLoop(b, q, ("a", "b"), depth=1, tick=0.1).run()
        # b resting for good: a wake-up would change nothing; b napping until 5.0: it may
        # be given work before a call ends
        assert set(b.timeouts) == want, nap
