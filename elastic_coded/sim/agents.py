"""A pull step's agents on two levels (``RuntimeCost.group``, :mod:`~elastic_coded.sim.cost`):
each agent is its own server for its machines' calls, results and the coded queue's
decisions, and forwards results to the driver in messages, one at a time.  Pure: the state
:class:`~elastic_coded.sim.pull._Run` keeps for them, with the driver's clock passed in and
out."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .cost import RuntimeCost

__all__ = ["Agents"]


class Agents:
    """The agents of one pull step: ``order`` the machines in plan order, ``group`` to an
    agent; ``home(unit)`` the machine a unit's position is planned on (``None``: none)."""

    def __init__(self, order: Sequence[Any], cost: RuntimeCost,
                 home: Callable[[Any], Any]) -> None:
        self.cost, self.home = cost, home
        self.of = {m: i // cost.group for i, m in enumerate(order)}
        self.free: dict[int, float] = {}  # agent -> when it has done what it was given
        # agent -> (its last message's sending, the driver's taking it in)
        self.msg: dict[int, tuple[float, float]] = {}
        self.messages = 0        # messages the driver took in
        self.moved = 0           # calls of units the driver moved between agents
        self.scan = cost.scan_s * min(cost.group, len(order))  # an agent scans its own

    def send(self, m: Any, units: list[Any], now: float,
             driver: float) -> tuple[float, float]:
        """``(when the call of units to m is out, the driver's clock)``: the agent's
        ``agent_call_s``, after the driver's ``call_s`` when the call carries units planned on
        another agent's machines (the driver moves work between agents, a call's units at
        once)."""
        c, a = self.cost, self.of[m]
        t = max(self.free.get(a, 0.0), now)
        homes = (self.home(u) for u in units)
        if any(h is not None and h in self.of and self.of[h] != a for h in homes):
            self.moved += 1
            driver = max(driver, now) + c.call_s
            t = max(t, driver)
        self.free[a] = t + c.agent_call_s
        return self.free[a], driver

    def decided(self, m: Any, t: float, n: int, each: float) -> None:
        """``n`` decisions of the coded queue made in ``m``'s agent at ``t``."""
        a = self.of[m]
        self.free[a] = max(self.free.get(a, 0.0), t) + each * n

    def take(self, m: Any, t: float, driver: float) -> tuple[float, float, float]:
        """``(agent's time, the driver's time it has the result, the driver's clock)`` for
        ``m``'s result, back at ``t``: taken in by its agent, then in the agent's message sent
        last if that left at or after the result was in, else in a new one, sent once the
        driver has taken the one before in (:func:`~elastic_coded.sim.cost.agent_messages`)."""
        c, a = self.cost, self.of[m]
        at = max(self.free.get(a, 0.0), t) + c.agent_take_s + self.scan
        self.free[a] = at
        sent, taken = self.msg.get(a, (-math.inf, -math.inf))
        if at <= sent:  # rides the message about to leave
            return at, taken, max(driver, taken) + c.merge_s
        sent = max(at, taken)
        driver = max(driver, sent) + c.round_trip_s + c.merge_s
        self.messages += 1
        self.msg[a] = (sent, driver)
        return at, driver, driver
