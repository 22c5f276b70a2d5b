"""The reference semantics of a simulated USCTEC step: :func:`step_time_reference`, the same as
:func:`~elastic_coded.sim.executor.step_time` written as plain loops over machines, pieces and
events (the module docstring of :mod:`~elastic_coded.sim.executor` says what a step is).  Every
faster path must match it.  Pure."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable

import numpy as np

from ..errors import ArgumentError
from ..schemes.plan import Placement, PlanError, StepPlan
from ..schemes.policies.rules import assign_recovery, backup_copies
from .executor import (
    MachineValues,
    Span,
    Speculation,
    StepOutcome,
    _sort_key,
    _step_inputs,
    _task_work,
)

__all__ = ["step_time_reference"]


def step_time_reference(plan: StepPlan, placement: Placement, speeds: MachineValues,
                        slowdowns: MachineValues | None = None,
                        crashed: Iterable[Hashable] | None = (),
                        estimates: MachineValues | None = None, time_scale: float = 1.0,
                        crash_at: float = 0.5, speculation: Speculation | None = None
                        ) -> StepOutcome:
    """The same as :func:`step_time`, written as plain loops over machines, pieces and events,
    with the holders from :meth:`~elastic_coded.schemes.plan.Placement.holders_of`: the
    reference semantics (module docstring)."""
    avail, sp, sl, est, crashed = _step_inputs(plan, speeds, slowdowns, crashed, estimates,
                                               time_scale, crash_at)
    L = plan.L
    r = _Reference(plan, placement, avail, sp, sl, est, crashed, time_scale, crash_at)
    short = tuple(pi for pi in range(len(plan.pieces)) if len(r.results[pi]) < L
                  and any(m in crashed and r.work[m] > 0 for m in plan.pieces[pi].machines))
    redone, ok = r.recover()
    if not ok:  # a lost step: the short pieces never decode, the others from their originals
        r.results = r.originals()
    piece_times = [r.results[pi][L - 1] if len(r.results[pi]) >= L else math.inf
                   for pi in range(len(plan.pieces))]
    copies, t_star = 0, math.inf
    if speculation is not None and ok:
        copies, t_star = r.speculate(piece_times, speculation)
    pt = np.asarray(piece_times, dtype=np.float64)
    total = (float(pt.max()) if pt.size else 0.0) if ok else math.inf
    return StepOutcome(total, pt, np.array([r.live[m] for m in avail]), short, redone, copies,
                       t_star)


class _Reference:
    """State of one reference step (:func:`step_time_reference`), by machine id."""

    def __init__(self, plan: StepPlan, placement: Placement, avail: tuple[Hashable, ...],
                 sp: np.ndarray, sl: np.ndarray, est: np.ndarray, crashed: set[Hashable],
                 ts: float, crash_at: float) -> None:
        self.plan, self.avail, self.crashed, self.ts, self.crash_at = (plan, avail, crashed, ts,
                                                                       crash_at)
        self.speed = {m: float(sp[i]) / float(sl[i]) for i, m in enumerate(avail)}
        self.est = {m: float(est[i]) for i, m in enumerate(avail)}
        self.tw = _task_work(plan)
        self.work = {m: 0.0 for m in avail}
        for pi, piece in enumerate(plan.pieces):
            for m in piece.machines:
                self.work[m] += self.tw[pi]
        self.finish = {m: self.work[m] / self.speed[m] * ts for m in avail}
        self.live = {m: (math.inf if m in crashed else self.finish[m]) for m in avail}
        self.results = self.originals()
        self.free = dict(self.live)
        self.key = {m: r for r, m in enumerate(_sort_key(avail))}
        alive = [m for m in avail if m not in crashed]
        self.spans: Callable[[tuple[int, int]], list[Span]] = \
            lambda rows: placement.holders_of(rows, alive)

    def originals(self) -> dict[int, list[float]]:
        return {pi: sorted(self.live[m] for m in p.machines if m not in self.crashed)
                for pi, p in enumerate(self.plan.pieces)}

    def _run(self, h: Hashable, start: float, work: float) -> float:
        self.free[h] = max(start, self.free[h]) + work / self.speed[h] * self.ts
        return self.free[h]

    def recover(self) -> tuple[int, bool]:
        """Re-dispatch every crashed machine's tasks, crash by crash; ``(tasks, ok)``."""
        plan, L, redone = self.plan, self.plan.L, 0
        for t, _, m in sorted((self.crash_at * self.finish[m], self.key[m], m)
                              for m in self.crashed if self.work[m] > 0):
            lost = [pi for pi, p in enumerate(plan.pieces) if m in p.machines
                    and not (len(self.results[pi]) >= L and self.results[pi][L - 1] <= t)]
            rows = [plan.groups[plan.pieces[pi].group].rows for pi in lost]
            try:
                parts = assign_recovery(rows, self.spans, self.est, self.key)
            except PlanError:
                return redone, False
            done = [t] * len(lost)
            for k, a, b, h in parts:
                work = self.tw[lost[k]] * (b - a) / (rows[k][1] - rows[k][0])
                done[k] = max(done[k], self._run(h, t, work))
            for k, pi in enumerate(lost):
                self.results[pi] = sorted(self.results[pi] + [done[k]])
            redone += len(lost)
        return redone, True

    def speculate(self, piece_times: list[float], spec: Speculation) -> tuple[int, float]:
        """Backup copies at the one time they start (plain loops); updates ``piece_times``."""
        plan = self.plan
        if plan.K != 1:
            raise ArgumentError(f"speculation: needs the uncoded split (L=1, S=0), the plan has "
                                f"L={plan.L}, S={plan.S}")
        done = sorted(self.live[p.machines[0]] for p in plan.pieces
                      if p.machines[0] not in self.crashed)
        t_star = math.inf
        for k in range(spec.min_completed(len(plan.pieces)), len(done) + 1):
            med = (done[:k][(k - 1) // 2] + done[:k][k // 2]) / 2
            t = max(done[k - 1], spec.multiplier * med)
            if t < (done[k] if k < len(done) else math.inf):
                t_star = t
                break
        if not math.isfinite(t_star):
            return 0, t_star

        def own(m: Hashable) -> float:  # when the machine's own call stops being in flight
            return self.crash_at * self.finish[m] if m in self.crashed else self.live[m]

        busy = {m: int(self.work[m] > 0 and own(m) > t_star)
                + int(self.free[m] > max(self.live[m], t_star)) for m in self.avail}
        calls = [(m, m, [pi for pi, p in enumerate(plan.pieces) if p.machines[0] == m])
                 for m in self.avail if self.work[m] > 0 and own(m) > t_star]
        holders: dict[int, list[Hashable]] = {}
        for _, _, pieces in calls:
            for pi in pieces:
                sp = self.spans(plan.groups[plan.pieces[pi].group].rows)
                holders[pi] = sp[0][2] if len(sp) == 1 else []
        copies = backup_copies(calls, holders, busy, lambda pi: piece_times[pi] > t_star,
                               self.key)
        pieces_of = {m: pieces for m, _, pieces in calls}
        for m, k, h in copies:
            pi = pieces_of[m][k]
            piece_times[pi] = min(piece_times[pi], self._run(h, t_star, self.tw[pi]))
        return len(copies), t_star
