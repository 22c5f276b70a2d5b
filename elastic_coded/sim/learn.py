"""What the simulated controller learns from a step: its speed estimates, by slot, updated as
``Controller.report`` updates them (:mod:`elastic_coded.schemes.speeds`)."""

from __future__ import annotations

import numpy as np

from ..schemes.speeds import new_estimate, observe
from .executor import StepOutcome, _Compiled

__all__ = ["_Learner", "_learn"]


class _Learner:
    """The controller's speed estimates, by slot (:mod:`elastic_coded.schemes.speeds`: each
    machine's window of observations, planned with at its upper median)."""

    def __init__(self, configured: np.ndarray) -> None:
        self.est = [new_estimate(float(v)) for v in configured]
        self.speed = np.array([e.speed for e in self.est])

    def observe(self, slot: int, value: float, kind: str) -> None:
        self.est[slot] = observe(self.est[slot], value, kind)
        self.speed[slot] = self.est[slot].speed


def _learn(learner: _Learner, slots: np.ndarray, comp: _Compiled, out: StepOutcome, eff: np.ndarray,
           crashed: np.ndarray | None, ts: float) -> None:
    """What the controller learns from a step (``Controller.report``): the measured speed of
    machines that returned (``"value"``) and the bound ``work / step time`` of those cancelled
    (``"upper"``); crashed machines tell nothing."""
    work, f, T = comp.work, out.finish, out.time
    has = work > 0
    if crashed is not None:
        has &= ~crashed
    for i in np.flatnonzero(has):
        if f[i] <= T:
            learner.observe(int(slots[i]), float(eff[i]), "value")
        else:
            learner.observe(int(slots[i]), float(work[i] * ts / T), "upper")
