"""What a step's gather tells the controller about speeds (``Gather.measured_speeds``): work
over busy time for a machine that finished calls, and an upper bound only from a call that has
been running since it was sent."""

import time

import pytest

from elastic_coded.runtime.gather import Gather, QuorumCollector
from elastic_coded.schemes.wire import Call, CallResult, TaskSpec

TOTAL = 1000  # the step's products


def _call(rows: int) -> Call:
    return Call(0, (TaskSpec("A", (0, rows), 0, None, 0, 0),), TOTAL)


def _gather() -> Gather:
    g = Gather([], {}, QuorumCollector(100), lambda m, c: [])
    g.cols_of = {0: 1}
    return g


def _finish(g: Gather, key, machine: str, work: float, secs: float) -> None:
    g.pending[key] = (machine, _call(int(work * TOTAL)), time.perf_counter() - secs)
    g._got(key, CallResult(machine, 0, (), int(work * TOTAL), int(work * TOTAL), work, secs,
                           secs))


def test_finished_calls_give_their_work_over_their_time():
    g = _gather()
    _finish(g, "a1", "a", 0.1, 0.2)
    _finish(g, "a2", "a", 0.3, 0.2)  # a machine runs its calls one at a time: times add up
    speeds = g.measured_speeds(TOTAL, 2.0)
    assert speeds == {"a": (pytest.approx(0.4 * 2.0 / 0.4), "value")}


def test_a_call_queued_behind_finished_ones_bounds_nothing():
    """A pull step keeps two calls in flight per machine: the one cancelled at the end may
    have waited behind another for most of the step.  Taking ``work / time since sent`` as a
    bound would make a machine that kept its pace look several times slower."""
    g = _gather()
    _finish(g, "a1", "a", 0.05, 0.1)
    g.pending["a2"] = ("a", _call(50), time.perf_counter() - 1.0)  # sent 1 s ago, queued
    speeds = g.measured_speeds(TOTAL, 1.0)
    assert speeds == {"a": (pytest.approx(0.5), "value")}


def test_a_machine_that_finished_nothing_is_bounded_by_its_oldest_call():
    g = _gather()
    now = time.perf_counter()
    g.pending["b1"] = ("b", _call(100), now - 2.0)  # running for 2 s: speed below 0.1 / 2
    g.pending["b2"] = ("b", _call(400), now - 0.5)  # queued behind it: says nothing
    (value, kind), = g.measured_speeds(TOTAL, 1.0).values()
    assert kind == "upper"
    assert value == pytest.approx(0.1 / 2.0, rel=0.05)


def test_emulated_busy_time_and_what_every_call_pays_are_kept_apart():
    """An emulated machine is measured on the time it was paced to, not the host's delays on
    top; a bound from a call still running leaves out what the finished calls paid beside
    their machines (the median lag), and says nothing when that leaves no time."""
    g = _gather()
    now = time.perf_counter()
    for i, (m, work) in enumerate((("a", 0.1), ("b", 0.2), ("c", 0.1))):
        key = f"k{i}"
        g.pending[key] = (m, _call(int(work * TOTAL)), now - 0.5)  # taken 0.5 s after sent
        g._got(key, CallResult(m, 0, (), 1, 1, work, 0.01, 0.45, paced_s=0.1))
    g.pending["d"] = ("d", _call(100), now - 0.9)  # 0.4 s beyond the lag of 0.4 s
    g.pending["e"] = ("e", _call(100), now - 0.3)  # not even the lag: no bound
    speeds = g.measured_speeds(TOTAL, 1.0)
    assert speeds["a"] == (pytest.approx(1.0), "value")  # 0.1 over 0.1 s, not 0.45 s
    assert speeds["b"] == (pytest.approx(2.0), "value")
    assert speeds["d"][1] == "upper" and speeds["d"][0] == pytest.approx(0.1 / 0.5, rel=0.05)
    assert "e" not in speeds
