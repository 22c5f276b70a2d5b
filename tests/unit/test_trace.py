"""The trace writer without Ray: fake step records in, a Chrome-trace file out that the format
check accepts, with the driver's phases covering each step and calls on their machines' tracks;
a file cut short (a run that crashed) still loads; bad spans are caught by the check."""

import json
import time
from types import SimpleNamespace

import pytest

from elastic_coded.errors import ElasticCodedError
from elastic_coded.runtime.gather import CallRecord
from elastic_coded.runtime.trace import StepTimes, Trace, check_trace, load_trace, phases
from elastic_coded.schemes.wire import Call, CallResult, TaskSpec


def _report(step, **kw):
    base = dict(step=step, policy="usctec", t_total=0.05, t_plan=0.002, t_encode=0.001,
                t_decode=0.002, t_verify=0.001, failed=(), stragglers=(), backups=0,
                verified=True, extra={}, joined=(), left=(), crashed=(), restarted=(),
                draining=(), preempted=(), caught=(), excluded=())
    return SimpleNamespace(**{**base, **kw})


def _call(m, rows, sent, ended, outcome, kind="call", elapsed=0.01):
    call = Call(0, (TaskSpec("A", rows, 0, None, 0, 0),), 100)
    out = None if outcome in ("failed", "cancelled") else CallResult(
        m, 0, (), rows[1] - rows[0], 10, 0.1, elapsed / 2, elapsed)
    return CallRecord(m, kind, call, sent, ended, outcome, out)


def _times(t0, calls, **kw):
    return StepTimes(t0, t0 + 0.004, t0 + 0.04, t0 + 0.045, t0 + 0.05, calls=tuple(calls),
                     gather=(t0 + 0.006, t0 + 0.036), where={m: ("p1", "worker process 1")
                                                            for m in ("m0", "m1", "m2")}, **kw)


def test_a_written_trace_passes_the_format_check_and_accounts_for_each_step(tmp_path):
    path = tmp_path / "run.trace.json"
    tr = Trace(path)
    start = time.perf_counter()
    for step in range(3):
        t0 = start + 0.06 * step
        calls = [_call("m0", (0, 10), t0 + 0.006, t0 + 0.02, "used"),
                 _call("m0", (10, 20), t0 + 0.006, t0 + 0.03, "used"),  # queued behind the first
                 _call("m1", (0, 10), t0 + 0.006, t0 + 0.036, "cancelled", kind="backup"),
                 _call("m2", (0, 10), t0 + 0.006, t0 + 0.01, "failed")]
        tr.step(_report(step, failed=("m2",), joined=("m1",) if step == 1 else ()),
                _times(t0, calls))
    tr.close()
    events = json.loads(path.read_text())
    assert check_trace(events) == []
    steps = [e for e in events if e["ph"] == "X" and e["name"].startswith("step ")]
    assert len(steps) == 3
    for s in steps:
        inner = [e for e in events if e["ph"] == "X" and e["tid"] == 0 and e["pid"] == 0
                 and e is not s and s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
        assert abs(sum(e["dur"] for e in inner) - s["dur"]) <= 0.1 * s["dur"]
        assert {e["args"]["step"] for e in inner} == {s["args"]["step"]}
    names = {e["name"] for e in events if e.get("cat") == "call"}
    assert names == {"compute", "cancelled", "failed"}
    kinds = {e["args"]["kind"] for e in events if e.get("cat") == "call"}
    assert kinds == {"call", "backup"}
    instants = [e["name"] for e in events if e["ph"] == "i"]
    assert instants.count("crash m2") == 3 and instants.count("join m1") == 1
    tracks = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"driver", "controller", "m0", "m1", "m2"} <= tracks


def test_a_trace_cut_short_still_loads(tmp_path):
    path = tmp_path / "cut.json"
    tr = Trace(path)
    t0 = time.perf_counter()
    tr.step(_report(0), _times(t0, [_call("m0", (0, 10), t0 + 0.006, t0 + 0.02, "used")]))
    tr.flush()  # the process dies here: no close, no closing bracket
    events = load_trace(path)
    assert check_trace(events) == [] and any(e["name"] == "step 0" for e in events)
    tr.close()


def test_phases_are_ordered_disjoint_and_cover_the_step():
    t0 = 100.0
    ph = phases(_report(0, t_encode=0.5, t_decode=0.5), _times(t0, []))
    assert ph[0][1] == t0 and ph[-1][2] == t0 + 0.05
    for (_, _, b), (_, a, _) in zip(ph, ph[1:]):
        assert a == pytest.approx(b)
    assert all(b >= a for _, a, b in ph)


def test_the_check_catches_what_a_viewer_would_refuse():
    good = {"name": "a", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1}
    assert check_trace([good, {**good, "ts": 2, "dur": 3}]) == []  # nested
    assert check_trace([good, {**good, "ts": 5, "dur": 10}])  # overlapping in part
    assert check_trace([{k: v for k, v in good.items() if k != "tid"}])
    assert check_trace([{**good, "dur": -1}])


def test_a_bad_trace_path_is_a_clear_error(tmp_path):
    with pytest.raises(ElasticCodedError, match="trace: cannot write"):
        Trace(tmp_path / "no" / "such" / "dir.json")
    with pytest.raises(ElasticCodedError, match="trace: 3 is not a file path"):
        Trace(3)
