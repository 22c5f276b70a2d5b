"""Planning speeds that a transient straggler does not drag down.  Pure: no Ray, no numpy state.

Each machine's evidence is a :class:`SpeedEstimate`: a short window of its recent observations.
An observation is a measured throughput (kind ``"value"``) or, for a task cancelled before it
finished, an upper bound on the throughput (kind ``"upper"``: the machine did not finish ``work``
in ``t``, so its speed is below ``work / t``).  The planning speed is the *upper median* of the
window (its middle element, the larger of the two middle ones when the window has even length):

- one slow step among the last ``size`` does not move it (it needs a majority of the window), so
  a machine that straggles now and then keeps its load;
- a machine persistently slower (or faster) is learnt as soon as its new speed fills most of the
  window: ``size // 2 + 1`` observations (3 with the default ``size = 5``), or 2 while the
  window still holds the initial guess alone;
- an upper bound at or above the current speed says nothing and is dropped; one below enters the
  window like a measurement of that bound, so a single cancellation does not move the speed but
  persistent bounds below it pull it down (each bound becomes a measurement once bounds are the
  window's majority).

The functions return new estimates; nothing is mutated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentError, ArgumentTypeError

__all__ = ["SpeedEstimate", "KINDS", "new_estimate", "observe", "rescale"]

KINDS = ("value", "upper")
"""The kinds of observation :func:`observe` takes."""


def _check_speed(name: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name}: must be a positive finite speed, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ArgumentError(f"{name}: must be a positive finite speed, got {value!r}")
    return v


@dataclass(frozen=True)
class SpeedEstimate:
    """One machine's recent speed evidence: ``window`` holds the last (at most ``size``)
    observations, oldest first; :attr:`speed` is the speed to plan with."""

    window: tuple[float, ...]
    size: int = 5

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ArgumentError(f"size: must be an int >= 1, got {self.size!r}")
        w = tuple(_check_speed("window", v) for v in self.window)
        if not w:
            raise ArgumentError("window: must hold at least one observation, got ()")
        if len(w) > self.size:
            raise ArgumentError(f"window: holds {len(w)} observations, more than size = "
                                f"{self.size}")
        object.__setattr__(self, "window", w)

    @property
    def speed(self) -> float:
        """The planning speed: the upper median of the window."""
        w = sorted(self.window)
        return w[len(w) // 2]

    def __repr__(self) -> str:
        return (f"SpeedEstimate(speed={self.speed:.6g}, window={list(self.window)}, "
                f"size={self.size})")


def new_estimate(initial_speed: Any, size: int = 5) -> SpeedEstimate:
    """The estimate before any measurement: the window holds ``initial_speed`` alone."""
    return SpeedEstimate((_check_speed("initial_speed", initial_speed),), size)


def observe(est: SpeedEstimate, value: Any, kind: str = "value") -> SpeedEstimate:
    """``est`` after one observation: a measured speed (``kind="value"``) or an upper bound on
    the speed from a cancelled task (``kind="upper"``; dropped unless below ``est.speed``)."""
    if not isinstance(est, SpeedEstimate):
        raise ArgumentTypeError(f"est: expected a SpeedEstimate, got {type(est).__name__}")
    if kind not in KINDS:
        raise ArgumentError(f"kind: must be one of {list(KINDS)}, got {kind!r}")
    v = _check_speed("value", value)
    if kind == "upper" and v >= est.speed:
        return est
    return SpeedEstimate((est.window + (v,))[-est.size:], est.size)


def rescale(est: SpeedEstimate, factor: Any) -> SpeedEstimate:
    """``est`` with every observation multiplied by ``factor`` (a change of units, e.g. from
    configured relative speeds to measured ones)."""
    if not isinstance(est, SpeedEstimate):
        raise ArgumentTypeError(f"est: expected a SpeedEstimate, got {type(est).__name__}")
    f = _check_speed("factor", factor)
    return SpeedEstimate(tuple(v * f for v in est.window), est.size)
