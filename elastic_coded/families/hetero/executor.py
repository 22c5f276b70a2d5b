"""The heterogeneous-masters executor (MATH.md §3): every master decodes from its first
``L_m`` coded rows (:class:`~elastic_coded.schemes.policies.collect.MDSCollector`); rows lost to
a crash, or missing from a probabilistic draw, are topped up from other holders, and when every
live holder is used, fresh coded rows are stored on the best machine (the controller's
``hetero_rescue``)."""

from __future__ import annotations

import time

import ray

from ...runtime.context import StepContext
from ...runtime.executors.common import Outcome, crash_at
from ...runtime.gather import Gather
from ...schemes.policies import rules
from ...schemes.policies.collect import MDSCollector
from ...schemes.wire import Call, TaskSpec
from . import policy as het

__all__ = ["run_hetero"]


def run_hetero(ctx: StepContext, xs: list, ev, prep):
    """A heterogeneous-masters step (see the module docstring).  Returns
    ``([A_m @ x_m], Outcome)``."""
    plan: het.HeteroStepPlan = prep.plan
    t1 = time.perf_counter()
    refs = [ray.put(x) for x in xs]
    t2 = time.perf_counter()
    step, ts = ctx.step, ctx.time_scale
    total = sum(Lm * x.shape[1] for Lm, x in zip(plan.L, xs))
    col = MDSCollector(plan.L, ctx.codes)
    dead: set = set()
    rescued: set = set()
    g = Gather(refs, ctx.handles, col, lambda m, c: [])
    g.cols_of = {m: x.shape[1] for m, x in enumerate(xs)}

    def top_up(m: int) -> None:
        """Dispatch more of master ``m``'s coded rows until ``L_m`` are received or in flight
        (:func:`~elastic_coded.schemes.policies.rules.top_up`), then fresh rows."""
        inflight = {t.rows[0] + i for _, c, _ in g.pending.values() for t in c.tasks
                    if t.piece == m for i in range(t.num_rows)}
        have = col.have(m) | inflight
        busy = {mm for mm, _, _ in g.pending.values()}
        usable = [n for n in ctx.handles if n not in dead]
        asks, short, order = rules.top_up(plan.storage, m, have, busy, usable)
        for n, rows in asks:
            send_rows(n, m, rows, have)
        if short > 0:  # every live holder is used: fresh coded rows on the best machine
            got = ctx.ctrl.hetero_rescue(m, short, have, order)
            send_rows(got.machine, m, got.ranges, have)

    def send_rows(n, m: int, rows, have: set) -> None:
        tasks = tuple(TaskSpec(het.source_name(m), r, m, None, m, r[0]) for r in rows)
        count = sum(b - a for a, b in rows)
        pace = rules.paced(rules.top_up_time(plan.storage, m, n, count), ts) if ts > 0 else None
        g.dispatch(n, None, Call(step, tasks, total, pace_s=pace))
        rescued.add(m)
        have |= {i for a, b in rows for i in range(a, b)}

    def on_lost(machine, call):
        dead.add(machine)
        ctx.ctrl.mark_dead([machine])
        for m in sorted({t.piece for t in call.tasks if col.needs(t)}):
            top_up(m)
        return []

    g.on_lost = on_lost
    for n, m in plan.serve.items():
        slow = float(ev.slow.get(n, 1.0))
        pace = rules.paced(plan.pace[n], ts, slow) if ts > 0 else None
        g.dispatch(n, None, Call(step, plan.tasks_for(n, m), total, slow, pace,
                                 crash_at=crash_at(n, ev)))
    for m in range(len(plan.L)):
        top_up(m)
    g.run()
    td = time.perf_counter()
    Y = [col.decoded[m] for m in range(len(plan.L))]
    extra = {"serve": dict(plan.serve), "t_star": plan.t_star, "rescued": tuple(sorted(rescued)),
             "assignment": plan.storage.assignment.method}
    return Y, Outcome(g, t2 - t1, time.perf_counter() - td, total, col.used_by,
                      tuple(sorted(rescued)), extra, collector=col)
