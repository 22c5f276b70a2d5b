"""A timeline of every step in the Chrome trace event format, which Perfetto
(ui.perfetto.dev) and ``chrome://tracing`` open.

One track per machine, grouped by worker process (a trace "process" per worker process, named
with its node), and a ``driver`` process with a track for the driver and one for the
controller.  Spans:

* on a machine's track, each call's compute (``compute``; ``late`` when its result was not
  needed, ``cancelled`` or ``failed`` when it never came back), with its pieces and row
  ranges; backups and repair calls carry ``kind`` ``backup`` / ``repair``;
* on the driver's, the step and inside it its phases: ``prepare`` (the wait for the
  controller's plan), ``encode``, ``dispatch``, ``wait for results``, ``shuffle`` (unified),
  ``decode``, ``verify``, ``report``, and ``driver`` for what lies between;
* on the controller's, ``plan``.

Instant events mark joins, leaves, crashes, restarts, drain notices, preemptions, exclusions
and caught liars.  Every span's arguments hold the step, the policy and the mode.

Times are the driver's clock; a worker's times (when its call finished) are moved onto it by
the offset of its process's clock, measured once (:func:`~.hosting.clock_offset`).  The file is
written step by step and flushed, so a run that crashes keeps its trace up to its last step
(the closing ``]`` is then missing, which both viewers accept; :func:`load_trace` reads either).

This module holds no Ray: the cluster hands it each step's records (:class:`StepTimes`).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ArgumentError

__all__ = ["Trace", "StepTimes", "load_trace", "check_trace"]

log = logging.getLogger(__name__)

DRIVER_PID = 0
DRIVER_TID, CONTROLLER_TID = 0, 1

#: report fields shown as instant events, and the name each gets
INSTANTS = (("joined", "join"), ("left", "leave"), ("failed", "crash"), ("crashed", "crash"),
            ("restarted", "restart"), ("draining", "drain notice"), ("preempted", "preempted"),
            ("caught", "caught liar"), ("excluded", "excluded"))


@dataclass(frozen=True)
class StepTimes:
    """What the driver measured of one step (``perf_counter`` seconds): its start, when its
    plan came, when the executor returned, when verification ended, and its end; the step's
    calls (:class:`~.gather.CallRecord`), where each machine runs (``{machine: (process key,
    process label)}``) and each process's clock offset (seconds, its wall clock minus the
    driver's)."""

    start: float
    prepared: float
    ran: float
    verified: float
    end: float
    calls: tuple = ()
    gather: tuple = (0.0, 0.0)
    where: dict = field(default_factory=dict)
    offsets: dict = field(default_factory=dict)
    mode: str | None = None


def _span(name, ts, dur, pid, tid, args, cat="step") -> dict:
    return {"name": name, "cat": cat, "ph": "X", "ts": round(ts, 3), "dur": round(max(0.0, dur), 3),
            "pid": pid, "tid": tid, "args": args}


class Trace:
    """A trace file being written (see the module docstring).  ``path``: where; the file is
    replaced."""

    def __init__(self, path):
        if not isinstance(path, (str, Path)):
            raise ArgumentError(f"trace: {path!r} is not a file path (give a str or a Path)")
        self.path = Path(path)
        try:
            self._f = open(self.path, "w", buffering=1 << 20)  # closed by close()
        except OSError as exc:
            raise ArgumentError(f"trace: cannot write {str(path)!r}: {exc}") from None
        self._f.write("[")
        self._first = True
        self._perf0, self._wall0 = time.perf_counter(), time.time()
        self._pids: dict = {}    # process key -> trace pid
        self._tids: dict = {}    # machine -> (pid, tid)
        self._where: dict = {}   # machine -> its track's JSON text, see _calls
        self._texts: dict = {}   # id(tasks) -> (tasks, its JSON text), see _tasks_text
        self.steps = 0
        self.events = 0
        self.cost_s = 0.0        # the writer thread's CPU time building and writing events
        self.handed_s = 0.0      # the driver's: handing each step to it
        self._q: queue.Queue = queue.Queue()
        self._writer = threading.Thread(target=self._drain, name="elastic-coded-trace",
                                        daemon=True)
        self._writer.start()
        self._emit([{"name": "process_name", "ph": "M", "pid": DRIVER_PID, "tid": 0,
                     "args": {"name": "driver"}},
                    {"name": "process_sort_index", "ph": "M", "pid": DRIVER_PID, "tid": 0,
                     "args": {"sort_index": -1}},
                    {"name": "thread_name", "ph": "M", "pid": DRIVER_PID, "tid": DRIVER_TID,
                     "args": {"name": "driver"}},
                    {"name": "thread_name", "ph": "M", "pid": DRIVER_PID, "tid": CONTROLLER_TID,
                     "args": {"name": "controller"}}])

    @property
    def closed(self) -> bool:
        return self._f.closed

    def _emit(self, events: list) -> None:
        """Write ``events``: dicts, or strings already JSON (a call's span, :meth:`_calls`)."""
        if not events:
            return
        dicts = [e for e in events if not isinstance(e, str)]
        parts = [json.dumps(dicts, separators=(",", ":"))[1:-1]] if dicts else []
        parts += [e for e in events if isinstance(e, str)]
        self._f.write(("\n" if self._first else ",\n") + ",\n".join(parts))
        self._first = False
        self.events += len(events)

    def _us(self, perf: float) -> float:
        return (perf - self._perf0) * 1e6

    def _track(self, machine, where: dict) -> tuple:
        """``(pid, tid)`` of ``machine``'s track, named when first seen."""
        if machine in self._tids:
            return self._tids[machine]
        key, label = where.get(machine, (f"machine {machine}", f"machine {machine}"))
        meta = []
        if key not in self._pids:
            self._pids[key] = len(self._pids) + 1
            meta.append({"name": "process_name", "ph": "M", "pid": self._pids[key], "tid": 0,
                         "args": {"name": label}})
        pid = self._pids[key]
        tid = sum(1 for p, _ in self._tids.values() if p == pid) + 1
        self._tids[machine] = (pid, tid)
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"name": str(machine)}})
        self._emit(meta)
        return pid, tid

    def step(self, report, times: StepTimes) -> None:
        """Hand one step to the writer thread, which writes its driver phases, its calls and
        its events, then flushes the file: the step does not wait for it."""
        if self.closed:
            return
        t = time.perf_counter()
        self._q.put((report, times))
        self.handed_s += time.perf_counter() - t

    def flush(self) -> None:
        """Wait until every step handed over is in the file."""
        self._q.join()

    def _drain(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                self._write(*item)
            except Exception as exc:  # a trace never stops a run
                log.warning("trace: step not written: %s", exc)
            finally:
                self._q.task_done()

    def _write(self, report, times: StepTimes) -> None:
        t = time.thread_time()  # its CPU: waits for the GIL are not its cost
        base = {"step": report.step, "policy": report.policy, "mode": times.mode}
        events = self._driver(report, times, base)
        events += self._calls(times, base)
        events += self._instants(report, times, base)
        self._emit(events)
        self._f.flush()
        self.steps += 1
        self.cost_s += time.thread_time() - t

    def _driver(self, report, times: StepTimes, base: dict) -> list:
        us = self._us
        args = {**base, "t_total_s": report.t_total, "failed": len(report.failed),
                "stragglers": len(report.stragglers), "backups": report.backups,
                "verified": report.verified}
        out = [_span(f"step {report.step}", us(times.start), (times.end - times.start) * 1e6,
                     DRIVER_PID, DRIVER_TID, args)]
        for name, a, b in phases(report, times):
            out.append(_span(name, us(a), (b - a) * 1e6, DRIVER_PID, DRIVER_TID, base))
        plan_end = times.prepared
        plan_start = max(times.start, plan_end - report.t_plan)
        out.append(_span("plan", us(plan_start), (plan_end - plan_start) * 1e6, DRIVER_PID,
                         CONTROLLER_TID, base))
        return out

    def _calls(self, times: StepTimes, base: dict) -> list:
        """The calls' spans, as JSON text made here in one pass (a step at scale has hundreds:
        a dict and ``json.dumps`` each cost several times more).  One machine computes one
        call at a time, so its spans on its track are made to follow each other."""
        head = json.dumps(base, separators=(",", ":"))[:-1]  # '{"step":..,"mode":..'
        spans = [self._call_span(r, times) for r in times.calls]
        if len({s[0] for s in spans}) < len(spans):  # a machine with several calls: in order
            order: dict = {}
            for s in spans:
                order.setdefault(s[0], len(order))
            spans.sort(key=lambda s: (order[s[0]], s[1]))
        where, out = self._where, []
        prev, end = None, 0.0
        for m, a, b, name, args in spans:
            if m == prev and a < end:
                a = end
            b = max(a, b)
            prev, end = m, b
            track = where.get(m) or self._where_of(m, times.where)
            out.append(f'{{"name":"{name}","cat":"call","ph":"X","ts":{a:.3f},"dur":{b - a:.3f},'
                       f'{track}{head},{args}}}}}')
        return out

    def _where_of(self, machine, where: dict) -> str:
        """``"pid":..,"tid":..,"args":`` of ``machine``'s track, its JSON kept."""
        pid, tid = self._track(machine, where)
        self._where[machine] = text = f'"pid":{pid},"tid":{tid},"args":'
        return text

    def _call_span(self, r, times: StepTimes) -> tuple:
        """``(machine, start µs, end µs, name, args)`` of one call on its machine's track,
        ``args`` the JSON of its own arguments (without the braces; its elapsed time is the
        span's, unless the span starts when the call was sent).  A worker's finishing time is
        moved onto the driver's clock by its process's offset."""
        seen, sent = (r.ended - self._perf0) * 1e6, (r.sent - self._perf0) * 1e6
        o, m = r.out, r.machine
        if o is None:  # failed or cancelled: from when it was sent to when it was seen
            return (m, sent, seen, r.outcome,
                    f'"kind":"{r.kind}","outcome":"{r.outcome}",{self._tasks_text(r.call.tasks)}')
        end = seen
        if o.finished:  # never after the driver saw it
            off = times.offsets.get(times.where.get(m, (None,))[0], 0.0)
            end = min(end, (o.finished - off - self._wall0) * 1e6)
        paced = "null" if o.paced_s is None else format(o.paced_s, ".6g")
        return (m, max(sent, end - o.elapsed_s * 1e6), end,
                "compute" if r.outcome == "used" else r.outcome,
                f'"kind":"{r.kind}","outcome":"{r.outcome}",{self._tasks_text(r.call.tasks)},'
                f'"products":{o.products},"paced_s":{paced},"compute_s":{o.compute_s:.6g}')

    def _tasks_text(self, tasks: tuple) -> str:
        """The JSON of a call's pieces, rows and task count, kept per tasks tuple: a plan kept
        from step to step sends the same tuples again, so those steps format none."""
        hit = self._texts.get(id(tasks))
        if hit is not None and hit[0] is tasks:
            return hit[1]
        if len(tasks) == 1:
            t = tasks[0]
            text = f'"pieces":[{t.piece}],"rows":[[{t.rows[0]},{t.rows[1]}]],"tasks":1'
        else:
            pieces = ",".join(map(str, sorted({t.piece for t in tasks})))
            rows = ",".join(f"[{t.rows[0]},{t.rows[1]}]" for t in tasks[:8])
            text = f'"pieces":[{pieces}],"rows":[{rows}],"tasks":{len(tasks)}'
        if len(self._texts) >= 4096:  # plans changed many times: start again
            self._texts.clear()
        self._texts[id(tasks)] = (tasks, text)  # the tuple is kept, so its id is not reused
        return text

    def _instants(self, report, times: StepTimes, base: dict) -> list:
        out, seen = [], set()
        for fld, name in INSTANTS:
            for m in getattr(report, fld, ()):
                m = m[0] if isinstance(m, tuple) else m
                if (name, m) in seen:  # a scripted crash is both failed and crashed
                    continue
                seen.add((name, m))
                pid, tid = self._track(m, times.where) if (m in self._tids or m in times.where) \
                    else (DRIVER_PID, DRIVER_TID)
                at = times.start if fld in ("joined", "left", "restarted") else times.end
                out.append({"name": f"{name} {m}", "cat": "event", "ph": "i", "s": "t",
                            "ts": round(self._us(at), 3), "pid": pid, "tid": tid,
                            "args": {**base, "machine": str(m)}})
        return out

    def close(self) -> None:
        """Write what is handed over, close the array and the file."""
        if not self.closed:
            self._q.put(None)
            self._writer.join()
            self._f.write("\n]\n")
            self._f.close()


def phases(report, times: StepTimes) -> list:
    """The driver's phases of a step, ``[(name, start, end)]`` in order, non-overlapping and
    covering the step from its start to its end (gaps are named ``driver``)."""
    g0, g1 = times.gather
    sent = min((r.sent for r in times.calls), default=g0 or times.prepared)
    g0, g1 = (g0 or sent), (g1 or g0 or sent)
    extra = report.extra or {}
    shuffle = float(extra.get("shuffle_s", 0.0) or 0.0)
    wanted = [("prepare", times.start, times.prepared),
              ("encode", sent - report.t_encode, sent),
              ("dispatch", sent, g0),
              ("wait for results", g0, g1),
              ("shuffle", times.ran - report.t_decode - shuffle, times.ran - report.t_decode),
              ("decode", times.ran - report.t_decode, times.ran),
              ("verify", times.verified - report.t_verify, times.verified),
              ("report", times.verified, times.end)]
    out, at = [], times.start
    for name, a, b in wanted:
        a, b = max(a, at), min(max(b, a), times.end)
        if b <= a:
            continue
        if a > at:
            out.append(("driver", at, a))
        out.append((name, a, b))
        at = b
    if at < times.end:
        out.append(("driver", at, times.end))
    return out


def load_trace(path) -> list:
    """The events of a trace file, closed or not (a run that crashed leaves no ``]``)."""
    text = Path(path).read_text().rstrip()
    if not text.endswith("]"):
        text = text.rstrip(",") + "\n]"
    return json.loads(text)


def check_trace(events: list) -> list:
    """What a trace viewer would refuse or draw wrong, as messages (empty: none): every event
    has ``ph``, ``ts`` (but metadata), ``pid`` and ``tid``; spans have a ``dur`` >= 0; on each
    track spans nest or follow each other, never overlapping in part."""
    bad: list = []
    tracks: dict = {}
    for i, e in enumerate(events):
        need = ("ph", "pid", "tid") + (() if e.get("ph") == "M" else ("ts",))
        missing = [k for k in need if k not in e]
        if missing:
            bad.append(f"event {i} ({e.get('name')!r}) has no {', '.join(missing)}")
            continue
        if e["ph"] == "X":
            if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                bad.append(f"event {i} ({e.get('name')!r}): dur {e.get('dur')!r} is not >= 0")
                continue
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], i))
    for track, spans in tracks.items():
        stack: list = []
        for a, b, i in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= a + 1e-3:
                stack.pop()
            if stack and b > stack[-1][1] + 1e-3:
                bad.append(f"track {track}: event {i} [{a}, {b}] overlaps event "
                           f"{stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}] in part")
            stack.append((a, b, i))
    return bad
