"""A trace of a live run with a crash, a join and a liar: valid for the viewers (the format
check), one track per machine grouped by worker process, the driver's phases covering each
step's measured time, the crash, the join and the caught liar marked, and every product exact."""

import json

import numpy as np
import pytest

from elastic_coded import ElasticCluster
from elastic_coded.algebra.fields import field
from elastic_coded.churn import StepEvents
from elastic_coded.runtime.trace import check_trace, load_trace

pytestmark = pytest.mark.ray

P = 65521
F = field(P)


def _steps(events):
    return [e for e in events if e["ph"] == "X" and e["name"].startswith("step ")]


def test_a_run_with_a_crash_a_join_and_a_liar(ray_session, tmp_path):
    rng = np.random.default_rng(0)
    A, B = F.random((60, 5), rng), F.random((5, 2), rng)
    path = tmp_path / "run.trace.json"
    with ElasticCluster(A, "usctec", 6, L=2, S=2, field=P, run={"time_scale": 0.05},
                        ray={"machines_per_process": 3}, trace=path) as c:
        script = [None, {"crash": "m1"}, {"join": [{"id": "m9", "speed": 1.0}]},
                  StepEvents(slow={m: 4.0 for m in ("m0", "m2", "m3", "m5", "m9")},
                             corrupt=("m4",)), None]
        for ev in script:
            assert np.array_equal(np.asarray(c.multiply(B, events=ev)), F.matmul(A, B))
        reports = list(c.reports)
    events = json.loads(path.read_text())
    assert check_trace(events) == []
    assert all({"ph", "pid", "tid"} <= set(e) for e in events)
    steps = _steps(events)
    assert [s["args"]["step"] for s in steps] == [r.step for r in reports]
    for s, r in zip(steps, reports):
        assert s["dur"] == pytest.approx(r.t_total * 1e6, rel=0.10)
        inner = [e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) == (0, 0)
                 and e is not s and e["args"]["step"] == r.step]
        assert sum(e["dur"] for e in inner) == pytest.approx(s["dur"], rel=0.10)
        calls = [e for e in events if e.get("cat") == "call" and e["args"]["step"] == r.step]
        assert calls and all(s["ts"] - 1e3 <= e["ts"] and e["ts"] + e["dur"] <= s["ts"]
                             + s["dur"] + 1e3 for e in calls)  # inside the step (1 ms slack)
        assert all(e["args"]["policy"] == "usctec" for e in inner + calls)
    names = [e["name"] for e in events if e["ph"] == "i"]
    assert "crash m1" in names and "join m9" in names
    caught = [m for r in reports for m in r.caught]
    assert caught and all(f"caught liar {m}" in names for m in caught)
    tracks = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"driver", "controller", "m0", "m9"} <= tracks
    procs = [e["args"]["name"] for e in events if e["name"] == "process_name"]
    assert procs[0] == "driver" and sum(p.startswith("worker process") for p in procs) >= 2


def test_trace_a_span_of_steps_then_stop(ray_session, tmp_path):
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((80, 4)), rng.standard_normal((4, 2))
    with ElasticCluster(A, "usctec-auto", 4, L=2, S=1, run={"time_scale": 0.02}) as c:
        c.multiply(B)
        with c.trace(tmp_path / "span.json") as t:
            for _ in range(3):
                c.multiply(B)
        c.multiply(B)
        assert t.path == tmp_path / "span.json"
    events = load_trace(tmp_path / "span.json")
    assert check_trace(events) == []
    assert [s["args"]["step"] for s in _steps(events)] == [1, 2, 3]
