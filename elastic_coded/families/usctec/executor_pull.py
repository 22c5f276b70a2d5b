"""The pull executor: ``usctec-pull``, ``usctec-auto`` (the default; it pulls on long steps
with stragglers, otherwise it dispatches a whole plan, see :func:`_run_whole`) and the
``dynamic`` baseline on the one runtime (rules: :mod:`elastic_coded.families.usctec.pull`).

Every machine keeps ``depth`` units in flight (the next waits on the machine while one
computes); each result is filed into the
:class:`~elastic_coded.schemes.policies.collect.LagrangeCollector` and the machine is given
its next unit.  When a piece decodes, its units still running are cancelled, so their machines
move on.  A machine that dies gives its units back to the queue;
rows no live machine stores are re-planned by the controller (its ``recover``).  While machines
sit idle, the driver wakes every ``tick`` seconds so a coded backup can start once a unit is
overdue.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import ray

from ...algebra.lagrange import code_width
from ...errors import StepFailed
from ...runtime.context import StepContext
from ...runtime.drain import is_preempted
from ...runtime.executors.common import Outcome, encode_inputs, slowed, units
from ...runtime.gather import Gather, cancel
from ...schemes.policies.collect import LagrangeCollector
from ...schemes.reference import assemble
from ...schemes.wire import Call, TaskSpec, result_of
from . import pull as pl
from . import pull_step as ps
from .executor_whole import run_whole
from .pull_loop import Event, PullLoop

__all__ = ["run_pull", "PullGather", "FINE", "history", "pull_pays"]

FINE = ps.FINE
"""Units per call of planned work (:data:`~elastic_coded.families.usctec.pull_step.FINE`)."""


@dataclass
class PullGather(Gather):
    """The gather accounting of a pull step, plus the units outrun: machines whose unit was
    cancelled after it started because its piece decoded from others (the stragglers)."""

    outrun: set = field(default_factory=set)
    cancelled: int = 0

    def stragglers(self) -> tuple:
        return tuple(sorted(self.outrun | {m for m, _, _ in self.pending.values()}, key=str))


def _per(ctx: StepContext, total: int) -> float:
    """Products per second per unit of speed (emulation: ``total / time_scale``; otherwise the
    last pull step's measured figure, or a first guess)."""
    if ctx.time_scale > 0:
        return total / ctx.time_scale
    return ctx.pull_rate or 1e8


def _rates(ctx: StepContext, plan, total: int, speeds: dict) -> dict:
    """Products per second expected of each machine before it returns a unit
    (:func:`~elastic_coded.families.usctec.pull_step.unit_rates`)."""
    return ps.unit_rates(plan.available, speeds, _per(ctx, total))


def run_pull(ctx: StepContext, B: np.ndarray, ev, prep):
    """A pull step (see the module docstring).  Returns ``(A @ B, Outcome)``."""
    plan: pl.PullPlan = prep.plan
    if plan.eager is not None or plan.lean is not None:
        mode = ctx.mode or _mode(ctx, plan, prep, B.shape[1])
        if not plan.has(mode):
            raise StepFailed(f"usctec-auto: the step runs {mode!r}, but its plan holds only "
                             f"{[m for m in pl.MODES if plan.has(m)]}")
        if mode != "pull":
            return _run_whole(ctx, B, ev, prep, mode)
    t1 = time.perf_counter()
    r = B.shape[1]
    code, coded, refs = encode_inputs(ctx.F, B, plan.L, plan.S)
    t2 = time.perf_counter()
    total = units(ctx, plan.num_rows) * r
    padded = units(ctx, plan.num_rows) * coded.shape[2] * plan.L  # with the zero columns
    rates = _rates(ctx, plan, padded, prep.speeds)
    sub, q = ps.layout(plan, prep.storage, padded, rates, ctx.options, ctx.pull_lag)
    col = LagrangeCollector(sub, code, ctx.patience)
    g = PullGather(refs, ctx.handles, col, lambda m, c: [], weights=ctx.weights)
    g.cols_of = {p: coded.shape[2] for p in range(code.K)}
    loop = _Loop(ctx, g, q, col, ev, total, (ctx.options or pl.PullOptions()).depth)
    loop.run()
    td = time.perf_counter()
    Y = assemble(sub, col.decoded, coded.shape[2], ctx.F.dtype)[:, :r]
    rate = _measured_rate(g, prep.speeds) if g.finished and ctx.time_scale <= 0 else None
    extra = {"units": len(q.products) if plan.copies else sum(len(p.machines)
                                                               for p in sub.pieces),
             "pieces": len(sub.pieces), "calls": sum(loop.calls.values()),
             "cancelled": g.cancelled, "mode": "pull",
             "slowed": slowed(g, prep.speeds, total, ctx.time_scale or 1.0),
             "stolen": getattr(q, "stolen", 0), "planned": _planned(plan),
             "decisions": loop.asking.asked, "t_decide": loop.asking.deciding_s}
    g.backups = q.backups
    return Y, Outcome(g, t2 - t1, time.perf_counter() - td, total, col.used_by, (), extra,
                      collector=col, pull_rate=rate, pull_lag=ps.lag_after(q, ctx.pull_lag))


def _mode(ctx: StepContext, plan: pl.PullPlan, prep, r: int) -> str:
    """``usctec-auto``: this step's execution when the driver did not choose it
    (:func:`~elastic_coded.families.usctec.pull_step.auto_mode`)."""
    total = units(ctx, plan.num_rows) * (r + (-r) % (plan.L * code_width(ctx.F, plan.L, plan.S)))
    return ps.auto_mode(plan, ctx.history, prep.speeds, total, _per(ctx, total), ctx.options)


def pull_pays(F, num_rows: int, L: int, S: int, r: int, speeds: dict, time_scale: float,
              pull_rate, options) -> bool:
    """``usctec-auto``: whether a step of ``r`` input columns pulls
    (:func:`~elastic_coded.families.usctec.pull_step.pull_pays`, known before any plan is
    made, so the driver asks the controller only for the plan it will run)."""
    total = num_rows * (r + (-r) % (L * code_width(F, L, S)))
    per = total / time_scale if time_scale > 0 else (pull_rate or 1e8)
    return ps.pull_pays(L, S, speeds, total, per, options)


def history(reports, policy: str, window: int = 2 * pl.PROBE_EVERY, timed: bool = False
            ) -> tuple:
    """``(observed, slowed)`` for the recent steps of ``policy`` among ``reports`` (see
    :func:`~elastic_coded.families.usctec.modes.choose_mode`), for the step's context;
    ``timed`` (machines at real speed): ``(observed, slowed, the step's seconds)``."""
    mine = []   # the last ``window`` of them, newest first: read from the end, not copied
    for i in range(len(reports) - 1, max(-1, len(reports) - 1 - 16 * window), -1):
        r = reports[i]
        if r.policy == policy and r.extra:
            mine.append(r)
            if len(mine) == window:
                break
    return tuple(ps.history_entry(r.extra.get("mode"), r.extra.get("slowed", ()),
                                  r.t_total if timed else None) for r in reversed(mine))


def _run_whole(ctx: StepContext, B, ev, prep, mode: str):
    """``usctec-auto`` dispatching a whole plan at once (``usctec``'s execution): the ``(L, S)``
    plan (``"eager"``) or the ``(1, 0)`` one (``"lean"``)."""
    whole = prep.plan
    plan = whole.eager if mode == "eager" else whole.lean
    prep = replace(prep, plan=plan)
    Y, out = run_whole(replace(ctx, policy="usctec"), B, ev, prep)
    return Y, replace(out, prep=prep, extra=dict(out.extra, mode=mode, planned=_planned(whole)))


def _planned(plan: pl.PullPlan) -> tuple:
    """``usctec-auto``: the executions the controller made plans for (``()``: another
    policy)."""
    if plan.eager is None and plan.lean is None:
        return ()
    return tuple(m for m in pl.MODES if plan.has(m))


def _measured_rate(g: PullGather, speeds: dict) -> float | None:
    vals = [o.products / o.elapsed_s / float(speeds.get(m, 1.0))
            for m, o in g.finished.items() if o.elapsed_s > 0 and o.products > 0]
    return float(np.median(vals)) if vals else None


class _Loop:
    """One pull step's calls on Ray actors: the backend
    (:class:`~elastic_coded.families.usctec.pull_loop.PullBackend`) the one pull loop runs
    over, with a :class:`PullGather`'s accounting."""

    def __init__(self, ctx: StepContext, g: PullGather, q, col, ev, total: int, depth: int):
        self.ctx, self.g, self.q, self.col, self.ev = ctx, g, q, col, ev
        self.total, self.depth = total, depth
        self.calls: dict = {}      # machine -> calls sent (a scripted crash takes the first)
        # the coded rules look at the clock (a call becomes overdue); dynamic's only at arrivals
        # (the loop asks only machines that may get work)
        self.loop = PullLoop(self, q, tuple(ctx.handles), depth, ps.tick_of(q))
        self.asking = self.loop.asking

    def run(self) -> None:
        g = self.g
        g.t_last = g.t_start = time.perf_counter()
        try:
            if not self.loop.run():
                raise StepFailed("step: results ran out before every output decoded")
        finally:
            g.t_end = time.perf_counter()
            g.cancelled = self.loop.cancelled
            for ref in list(g.pending):
                cancel(ref)
                self._forget(ref, time.perf_counter())

    # the backend -----------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return time.perf_counter()

    def done(self) -> bool:
        return self.col.done

    def room(self, m) -> bool:
        return self.q.calls_in_flight(m) < self.depth

    def in_flight(self) -> bool:
        return bool(self.g.pending)

    def decided(self, m, now: float, n: int) -> None:
        """The queue's decisions cost what they cost (:attr:`Asking.deciding_s`)."""

    def wait(self, timeout: float | None) -> Iterator[Event]:
        """The first result back (``None`` after ``timeout``) and every other result already
        back: all are taken in before the machines are asked again, so a result waiting behind
        the driver's work is never taken for an overdue call (which would start a coded backup
        nobody needs)."""
        g = self.g
        first, _ = ray.wait(list(g.pending), num_returns=1, timeout=timeout)
        ready = first
        if first and len(g.pending) > 1:
            more, _ = ray.wait(list(g.pending), num_returns=len(g.pending), timeout=0)
            ready = first + [r for r in more if r != first[0]]
        got = False
        for ref in ready:
            if self.col.done:
                return
            if ref in g.pending:
                got = True
                yield self._event_of(ref)
        if not got:
            yield None

    def _event_of(self, ref) -> Event:
        g = self.g
        m, call, t_sent = g.pending.pop(ref)
        now = time.perf_counter()
        try:
            out = result_of(ray.get(ref))
        except ray.exceptions.TaskCancelledError:
            g.note(ref, "cancelled")
            return ("cancelled", m, ref)
        except ray.exceptions.RayActorError as exc:
            g.note(ref, "failed")
            return ("lost", m, ref, is_preempted(exc))
        return ("result", m, ref, (call, t_sent, out, now))

    def send(self, m, units: list, now: float):
        first = self.calls.get(m, 0) == 0
        self.calls[m] = self.calls.get(m, 0) + 1
        crash = 0.5 if first and m in self.ev.crash else None
        tasks = tuple(TaskSpec("A", u.rows, u.position, u.cols, u.piece, u.position)
                      for u in units)
        call = Call(self.ctx.step, tasks, self.total, float(self.ev.slow.get(m, 1.0)),
                    crash_at=crash)
        return self.g.dispatch(m, None, call)

    def take(self, m, ref, payload) -> tuple[float, float, float, list[int]]:
        """The result filed: when it was taken in, the machine's busy time (paced, when
        emulated) as its measured speed (on a crowded host the wall time stretches at random,
        and the queue would steal and back up for it), and the pieces it completed, decoded
        then."""
        g = self.g
        call, t_sent, out, now = payload
        g.done_times.append(out.elapsed_s)
        g.finished.setdefault(m, out)
        g.measure(m, out, now - t_sent)
        useful = False
        for task, H in zip(call.tasks, out.results):
            useful |= self.col.add(m, task, H)
        g.note(ref, "used" if useful else "late", out)
        if not useful:
            g.wasted += out.products
            return now, out.busy_s, now, []
        g.slowest = max(g.slowest, out.elapsed_s)
        g.t_last = now
        return now, out.busy_s, now, [piece for piece in {t.piece for t in call.tasks}
                                      if piece in self.col.decoded]

    def cancel(self, m, ref, now: float) -> bool | None:
        if ref not in self.g.pending:
            return None
        started = self.q.running.get(m) and self.q.running[m][0].key == ref
        cancel(ref)
        if started:
            self.g.outrun.add(m)
        self._forget(ref, now, started)
        return False

    def _forget(self, ref, now: float, started: bool | None = None) -> None:
        """A call given up: products never started are taken off the dispatched count; those
        started count as wasted (the whole unit: an upper bound on the work done)."""
        g = self.g
        entry = g.pending.pop(ref, None)
        if entry is None:
            return
        g.note(ref, "cancelled")
        m, call, _ = entry
        if started is None:
            started = self.q.started(m, ref)
        prods = sum(g.task_products(t) for t in call.tasks)
        if started:
            g.wasted += prods
        else:
            g.products -= prods
            g.rows_dispatched -= sum(t.num_rows for t in call.tasks)

    def lose(self, m, now: float, preempted: bool = False) -> None:
        """``m`` died (on a preempted node: reported apart from the failed)."""
        g = self.g
        (g.preempted if preempted else g.failed).append(m)
        for ref in [r for r, (mm, _, _) in g.pending.items() if mm == m]:
            g.pending.pop(ref)
            g.note(ref, "failed")
            cancel(ref)  # its error is consumed when it comes, not printed as unhandled
        self.ctx.ctrl.mark_dead([m])

    def rescue(self) -> None:
        """Nothing in flight and pieces left: their units have no live holder.  The controller
        re-plans them (copying rows where no live machine stores them)."""
        lost = [TaskSpec("A", u.rows, u.position, u.cols, u.piece, u.position)
                for u in self.q.orphans if u.piece not in self.col.decoded]
        if not lost:
            need = [pi for pi in range(len(self.col.plan.pieces)) if pi not in self.col.decoded]
            for pi in need:
                rows = self.col.plan.groups[self.col.plan.pieces[pi].group].rows
                have = set(self.col.results[pi])
                lost += [TaskSpec("A", rows, p, None, pi, p) for p in range(self.col.code.K)
                         if p not in have][:self.col.plan.L - len(have)]
        self.q.orphans.clear()
        self.g.kind = "repair"
        for re in self.ctx.ctrl.recover(lost, []):
            self.g.dispatch(re.machine, re.handle, Call(self.ctx.step, re.tasks, self.total))
        self.g.kind = "call"
