"""Which machines a pull driver asks for work: :class:`Asking`.  Pure: no Ray.

A pull step's driver fills at every event (a result taken in, a wake-up): every live machine
with room, in plan order, asks the queue for calls until it has ``depth`` in flight or gets
none.  Asking every machine costs the driver the machines present at every event, so a step
of ``N`` machines and ``O(N)`` results costs ``O(N^2)``.  The queues say when asking is
pointless (:meth:`~.queues.CodedQueue.resting`: a machine given nothing gets nothing again
until its nap ends, one of its calls ends, or the queue wakes it, :meth:`~.queues.CodedQueue.
take_wakes`), so :class:`Asking` asks only the others.  It sends exactly what asking everyone
would, in the same order (the simulator checks this against asking everyone, on random traces
with crashes: ``tests/unit/test_queue_indexes.py``).  The runtime's pull loop and the
simulator's both fill through it.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Collection, Hashable, Iterable
from typing import Any, Protocol

__all__ = ["Asking"]


class _Queue(Protocol):
    """What :meth:`Asking.fill` asks of a pull queue (:class:`~.queues.CodedQueue`,
    :class:`~.dynamic_queue.DynamicQueue`); its units are the queue's own."""

    @property
    def dead(self) -> Collection[Hashable]: ...
    def refresh(self, now: float) -> None: ...
    def take_wakes(self) -> tuple[bool, Iterable[Hashable]]: ...
    def resting(self, m: Hashable, now: float) -> float | None: ...
    def calls_in_flight(self, m: Hashable) -> int: ...
    def next_for(self, m: Hashable, now: float) -> list[Any]: ...


class Asking:
    """The machines to ask at the next fill (module docstring), in plan order ``order``."""

    def __init__(self, order: Iterable[Hashable]) -> None:
        self.order = tuple(order)
        self.index = {m: i for i, m in enumerate(self.order)}
        self.ask: set[Hashable] = set(self.order)  # machines to ask at the next fill
        # machine -> when the queue may give it work again
        self.resting: dict[Hashable, float] = {}
        # heap of (that time, tie, machine), finite ones
        self.naps: list[tuple[float, int, Hashable]] = []
        self.asked = 0                   # ``next_for`` calls made (the queue's decisions)
        self.deciding_s = 0.0            # wall seconds spent in them

    def freed(self, m: Hashable) -> None:
        """One of ``m``'s calls ended (or it may have work again): asked at the next fill (a
        machine outside the plan, sent a call by other means, is never asked)."""
        if m in self.index:
            self.resting.pop(m, None)
            self.ask.add(m)

    def waiting(self) -> bool:
        """Whether a later fill may send without a call ending first: some machine is to be
        asked, or naps until a finite time."""
        return bool(self.ask or self.naps)

    def _wake(self, q: _Queue, asking: list[int], after: int) -> None:
        """Machines the queue says may have work again: asked in this fill when they come
        after place ``after`` in plan order, else at the next fill."""
        everyone, woken = q.take_wakes()
        for m in (list(self.resting) if everyone else woken):
            if self.resting.pop(m, None) is None:
                continue
            i = self.index[m]
            if i > after:
                heapq.heappush(asking, i)
            else:
                self.ask.add(m)

    def _rest(self, q: _Queue, m: Hashable, now: float) -> None:
        w = q.resting(m, now)
        if w is None:
            self.ask.add(m)
            return
        self.resting[m] = w
        if w != math.inf:
            heapq.heappush(self.naps, (w, len(self.naps), m))

    def fill(self, q: _Queue, now: float, depth: int, room: Callable[[Hashable], bool],
             send: Callable[[Hashable, list[Any], float], object]) -> None:
        """Ask the machines that may get work, in plan order: each with ``room(m)`` asks
        ``q.next_for(m, now)`` until it has ``depth`` calls in flight or gets none, each
        answer sent with ``send(m, units, now)``.  A machine without room is skipped (it is
        asked again once one of its calls ends: :meth:`freed`).  :attr:`asked` counts the
        ``next_for`` calls and :attr:`deciding_s` their wall time (the driver's cost of the
        queue's rules, which the simulator charges per decision: ``RuntimeCost.decide_s``)."""
        q.refresh(now)
        while self.naps and self.naps[0][0] <= now:
            w, _, m = heapq.heappop(self.naps)
            if self.resting.get(m) == w:
                self.freed(m)
        asking = [self.index[m] for m in self.ask]
        heapq.heapify(asking)
        self.ask = set()
        self._wake(q, asking, -1)
        last = -1
        while asking:
            i = heapq.heappop(asking)
            m = self.order[i]
            if i == last or not room(m) or m in q.dead:
                continue
            last, units = i, None
            while q.calls_in_flight(m) < depth:
                t0 = time.perf_counter()
                units = q.next_for(m, now)
                self.deciding_s += time.perf_counter() - t0
                self.asked += 1
                if not units:
                    break
                send(m, units, now)
                self._wake(q, asking, i)
            if units is not None and not units:
                self._rest(q, m, now)
