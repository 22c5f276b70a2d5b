"""The one pull step loop (``usctec-pull``, ``dynamic``, ``usctec-auto`` when it pulls) over a
:class:`PullBackend`: the runtime's Ray calls (:mod:`.executor_pull`) or the simulator's event
clock (:mod:`elastic_coded.sim.pull`).  Pure: no Ray.

The loop owns what both share, the queue's side of a step (:mod:`.queues`):

* at the start and after every event, a fill (:class:`~.asking.Asking`): every machine that
  may get work, in plan order, asks the queue for calls until it has ``depth`` in flight;
* a wait for the next events, with a timeout of ``tick`` seconds while some machine may be
  given work without a call ending (a coded backup may start once a call is overdue);
* a result: the backend files it, the queue is told (``finished``), and each piece it
  completes has its calls still running cancelled (the queue names them: ``decoded``);
* a cancelled call or a lost machine: the queue is told (``dropped``, ``lost``);
* nothing in flight and pieces left: the backend's ``rescue`` (the runtime re-plans rows no
  live machine stores; the simulator cannot), else the step is lost.

A backend owns how calls go out and come back, its clock and its accounting.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any, Protocol

from .asking import Asking

__all__ = ["PullBackend", "PullLoop", "Result", "Cancelled", "Lost", "Event"]

Result = tuple[str, Hashable, Hashable, Any]
"""``("result", machine, key, payload)``: a call's results are back (the payload is the
backend's own)."""
Cancelled = tuple[str, Hashable, Hashable]
"""``("cancelled", machine, key)``: a call came back cancelled."""
Lost = tuple[str, Hashable, Hashable, bool]
"""``("lost", machine, key, preempted)``: a call failed because its machine died (on a
preempted node: ``preempted``)."""
Event = Result | Cancelled | Lost | None
"""What :meth:`PullBackend.wait` yields; ``None``: the wait timed out (or nothing it saw was
still in flight), so the loop fills again."""


class PullBackend(Protocol):
    """What :class:`PullLoop` needs of the machines."""

    @property
    def now(self) -> float:
        """The driver's clock."""
    def done(self) -> bool:
        """Every piece decoded."""
    def room(self, m: Hashable) -> bool:
        """``m`` has fewer than ``depth`` calls in flight."""
    def in_flight(self) -> bool:
        """Some call is in flight."""
    def rescue(self) -> None:
        """Nothing in flight and pieces left: send what may still complete them, if anything
        can."""
    def send(self, m: Hashable, units: list[Any], now: float) -> Hashable:
        """Send ``units`` to ``m`` in one call; its key."""
    def decided(self, m: Hashable | None, now: float, n: int) -> None:
        """``n`` decisions of the queue were made (before a call to ``m``; ``None``: asking
        that sent nothing), for a backend that charges them."""
    def wait(self, timeout: float | None) -> Iterator[Event]:
        """The next events: at least one, or ``None`` once ``timeout`` passed with nothing
        back; further results already back are yielded after the first, until every piece
        decoded."""
    def take(self, m: Hashable, key: Hashable, payload: Any
             ) -> tuple[float, float, float, list[int]]:
        """Take in and file a result of ``m``'s call ``key``: ``(the time it was taken in, the
        seconds the machine computed it, when the pieces it completed decoded, those
        pieces)``."""
    def cancel(self, m: Hashable, key: Hashable, now: float) -> bool | None:
        """Cancel ``m``'s call ``key`` (``None``: not in flight); ``True`` when cancelling it
        kills ``m`` (a scripted crash)."""
    def lose(self, m: Hashable, now: float, preempted: bool) -> None:
        """``m`` died: its calls are gone."""


class PullLoop:
    """One pull step's loop (module docstring) of queue ``q`` over backend ``b``, machines
    ``order`` (plan order), ``depth`` calls in flight a machine, a wake-up every ``tick``
    seconds (``None``: none)."""

    def __init__(self, b: PullBackend, q: Any, order: tuple[Hashable, ...], depth: int,
                 tick: float | None) -> None:
        self.b, self.q, self.depth, self.tick = b, q, depth, tick
        self.asking = Asking(order)
        self.cancelled = 0          # calls cancelled because their pieces decoded

    def run(self) -> bool:
        """Run the step; ``False`` when its calls ran out before every piece decoded."""
        b = self.b
        self.fill()
        while not b.done():
            if not b.in_flight():
                b.rescue()
                if not b.in_flight():
                    return False
            waiting = self.tick is not None and self.asking.waiting()
            acted = False
            for ev in b.wait(self.tick if waiting else None):
                acted = True
                if ev is not None:
                    self._event(ev)
            if acted and not b.done():
                self.fill()
        return True

    def fill(self) -> None:
        """Ask the machines that may get work (:meth:`~.asking.Asking.fill`), the decisions
        reported to the backend before each call they send."""
        b, a = self.b, self.asking
        charged = a.asked

        def send(m: Hashable, units: list[Any], t: float) -> None:
            nonlocal charged
            if a.asked > charged:
                b.decided(m, t, a.asked - charged)
                charged = a.asked
            self.q.sent(m, units, b.send(m, units, t), t)

        now = b.now
        a.fill(self.q, now, self.depth, b.room, send)
        if a.asked > charged:
            b.decided(None, now, a.asked - charged)

    def _event(self, ev: Any) -> None:
        kind, m, key = ev[0], ev[1], ev[2]
        if kind == "lost":
            self.lost(m, self.b.now, ev[3])
            return
        self.asking.freed(m)
        if kind == "cancelled":
            self.q.dropped(m, key, self.b.now)
            return
        now, elapsed, at, pieces = self.b.take(m, key, ev[3])
        self.q.finished(m, key, now, elapsed)
        for piece in pieces:
            if piece not in self.q.complete:
                for m2, key2 in self.q.decoded(piece):
                    self.cancel(m2, key2, at)

    def cancel(self, m: Hashable, key: Hashable, now: float) -> None:
        """Cancel ``m``'s call ``key`` (its pieces decoded from others)."""
        kills = self.b.cancel(m, key, now)
        if kills is None:
            return
        self.asking.freed(m)
        self.q.dropped(m, key, now)
        self.cancelled += 1
        if kills:
            self.lost(m, now, False)

    def lost(self, m: Hashable, now: float, preempted: bool) -> None:
        """``m`` died: its calls are gone and its units go back to the queue."""
        self.b.lose(m, now, preempted)
        self.q.lost(m)
