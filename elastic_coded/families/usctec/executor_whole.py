"""The whole-plan executor of the USCTEC family (MATH.md §1): ``usctec`` and the baselines
``proportional``, ``cyclic``, ``uncoded`` and ``speculative``.

Every machine gets its whole share of the plan at once, in one Ray call per worker process
(:meth:`~elastic_coded.runtime.gather.Gather.dispatch_many`); each piece decodes from its
first ``L`` positions (:class:`~elastic_coded.schemes.policies.collect.LagrangeCollector`).
The work of a machine that dies is re-planned on live holders of its rows (the controller's
``recover``).  A call still running ``speculation`` (``speculative``) or ``deadline`` times the
median completed call's time gets a backup copy of each task still needed on the least busy
other machine storing its rows.
"""

from __future__ import annotations

import time

import numpy as np

from ...runtime.context import StepContext
from ...runtime.executors.common import Outcome, crash_at, encode_inputs, slowed, units
from ...runtime.gather import Gather
from ...schemes.policies import rules
from ...schemes.policies.collect import LagrangeCollector
from ...schemes.reference import assemble
from ...schemes.registry import policy_of
from ...schemes.wire import Call

__all__ = ["run_whole"]

def run_whole(ctx: StepContext, B: np.ndarray, ev, prep):
    """A whole-plan step (see the module docstring).  Returns ``(A @ B, Outcome)``."""
    plan = prep.plan
    t1 = time.perf_counter()
    r = B.shape[1]
    code, coded, refs = encode_inputs(ctx.F, B, plan.L, plan.S)
    t2 = time.perf_counter()
    total = units(ctx, plan.num_rows) * r  # A @ B's products: emulated work is measured on it
    step = ctx.step
    col = LagrangeCollector(plan, code, ctx.patience)
    recovered: set = set()

    def on_lost(machine, call):
        lost = [t for t in call.tasks if col.needs(t)]
        if not lost:
            ctx.ctrl.mark_dead([machine])
            return []
        recovered.update(t.piece for t in lost)
        return [(re.machine, re.handle, Call(step, re.tasks, total))
                for re in ctx.ctrl.recover(lost, [machine])]

    g = Gather(refs, ctx.handles, col, on_lost, weights=ctx.weights)
    g.cols_of = {p: coded.shape[2] for p in range(plan.K)}
    g.dispatch_many([
        (m, None, Call(step, ts, total, float(ev.slow.get(m, 1.0)), crash_at=crash_at(m, ev)))
        for m, ts in plan.wire_tasks().items()])
    factor = policy_of(ctx.policy).speculation or ctx.deadline
    if factor:
        g.backup = _speculator(g, factor, lambda: ctx.ctrl.holders_of(plan), col, step, total)
        g.run(lambda: _backup_timeout(g, factor))
    else:
        g.run()
    td = time.perf_counter()
    Y = assemble(plan, col.decoded, coded.shape[2], ctx.F.dtype)[:, :r]
    extra = {"slowed": slowed(g, prep.speeds, total, ctx.time_scale or 1.0)}
    return Y, Outcome(g, t2 - t1, time.perf_counter() - td, total, col.used_by,
                      tuple(sorted(recovered)), extra, collector=col)


def _backup_timeout(g: Gather, factor: float) -> float | None:
    med = g.median_done()
    if med is None:
        return None
    due = [t for r, (_, _, t) in g.pending.items() if r not in g.speculated]
    if not due:
        return None
    return max(0.0, min(due) + factor * med - time.perf_counter())


def _speculator(g: Gather, factor: float, holders_of, col, step: int, total: int):
    """Backups for late calls (:func:`~elastic_coded.schemes.policies.rules.backup_copies`): a
    call running ``factor`` times the median completed call gets a copy of each task still
    needed on the least busy other machine storing its rows.  Under ``speculative`` these are
    Spark's backup copies; under the coded policies they are the step deadline's coded backups
    (a position of a piece recomputed elsewhere, useful whoever finishes first).  The holders
    are asked for once, when a first backup is due."""
    g.speculated = set()
    holders: dict = {}

    def backup(now: float) -> list:
        med = g.median_done()
        due = [(r, m, [t.piece for t in call.tasks]) for r, (m, call, t_sent) in g.pending.items()
               if r not in g.speculated and rules.backup_due(now - t_sent, med, factor)]
        g.speculated.update(r for r, _, _ in due)
        if due and not holders:
            holders.update(holders_of())
        busy: dict = {}
        for m, _, _ in g.pending.values():
            busy[m] = busy.get(m, 0) + 1
        copies = rules.backup_copies(due, holders, busy, lambda p: p not in col.decoded)
        return [(h, None, Call(step, (g.pending[r][1].tasks[i],), total)) for r, i, h in copies]

    return backup
