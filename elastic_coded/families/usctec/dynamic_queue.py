"""The ``dynamic`` baseline's queue (:mod:`.pull` describes the rules).  Pure: no Ray.

It shares :class:`~.queue_base._Base`'s bookkeeping with the coded rules' queue.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence

from .queue_base import QueueUnit, _Base

__all__ = ["DynamicQueue"]

# a running unit in backup order: (sent at, machine's place, call's seq, index, m, key, unit)
_Run = tuple[float, int, int, int, Hashable, Hashable, QueueUnit]
# what held when a machine last got nothing (:meth:`DynamicQueue._stamp`)
_Stamp = tuple[str, int, bool] | tuple[str, int, int, int | None]


class DynamicQueue(_Base):
    """The ``dynamic`` baseline's rules (see :mod:`.pull`): one queue of chunks in row order; a
    machine takes the first it stores; once none is left, it takes a backup copy of the
    longest-running chunk it stores that has no copy yet and is not its own."""

    def __init__(self, chunks: Sequence[QueueUnit], holders: Sequence[Iterable[Hashable]],
                 products: Mapping[object, int]):
        super().__init__(1, holders, products)
        self.chunks = list(chunks)
        self.copied: set[int] = set()
        self.sent_at: dict[int, float] = {}
        self.backups = 0
        self._taken: set[int] = set()
        self._mine: dict[Hashable, list[int]] = {}   # machine -> indexes of chunks it stores
        for i, u in enumerate(self.chunks):
            for h in self._hset[u.piece]:
                self._mine.setdefault(h, []).append(i)
        self._next: dict[Hashable, int] = {}   # machine -> first of those maybe not taken
        self._runs: list[_Run] = []            # running units in backup order (lazy deletes)
        self._sends = 0
        self._asleep: dict[Hashable, _Stamp] = {}   # machine -> what held when it got nothing

    @property
    def queue(self) -> list[QueueUnit]:
        """The chunks no machine has taken yet, in row order."""
        return [u for i, u in enumerate(self.chunks) if i not in self._taken]

    def sent(self, m: Hashable, units: Sequence[QueueUnit], key: Hashable, now: float) -> None:
        super().sent(m, units, key, now)
        self._sends += 1
        if len(self._taken) == len(self.chunks):   # a chunk to copy for those storing it
            for u in units:
                self._woken |= self._hset[u.piece]
        seq = self._calls[(m, key)][0]
        for j, u in enumerate(units):
            at = self.sent_at.setdefault(u.piece, now)
            # the order of a sort by start time over the machines, then each machine's FIFO
            bisect.insort(self._runs, (at, self._order[m], seq, j, m, key, u),
                          key=lambda e: e[:4])

    def _stamp(self, m: Hashable, why: str) -> _Stamp:
        """What must change before ``m``, told ``[]`` for ``why``, can be given work: a loss
        (new orphans) or the last chunk taken when none left is its own; a send (a new running
        chunk to copy), a loss or one of its own calls ending when no backup was found."""
        if why == "mine":
            return (why, self._losses, len(self._taken) == len(self.chunks))
        return (why, self._losses, self._sends, self._mver.get(m))

    def resting(self, m: Hashable, now: float) -> float | None:
        nap = self._asleep.get(m)
        return math.inf if nap is not None and nap == self._stamp(m, nap[0]) else None

    def _nothing(self, m: Hashable, why: str) -> list[QueueUnit]:
        if not self.orphans:
            self._asleep[m] = self._stamp(m, why)
        return []

    def next_for(self, m: Hashable, now: float) -> list[QueueUnit]:
        if m in self.dead or self.resting(m, now) is not None:
            return []   # nothing it needs has changed since it last got nothing
        out = self._orphan_for(m)
        if out:
            return out
        mine, i = self._mine.get(m, []), self._next.get(m, 0)
        while i < len(mine) and mine[i] in self._taken:
            i += 1
        self._next[m] = i
        if i < len(mine):
            self._taken.add(mine[i])
            if len(self._taken) == len(self.chunks):
                self._wake_all = True   # the last chunk: the backups begin
            self._touch()
            return [self.chunks[mine[i]]]
        if len(self._taken) < len(self.chunks):
            return self._nothing(m, "mine")  # chunks are left, but m stores none of them
        u = self._backup_for(m)
        if u is None:
            return self._nothing(m, "backup")
        self.copied.add(u.piece)
        self.backups += 1
        self._touch()
        return [u]

    def _gone(self, e: _Run) -> bool:
        return (e[4], e[5]) not in self._calls or e[6].piece in self.complete \
            or e[6].piece in self.copied

    def _backup_for(self, m: Hashable) -> QueueUnit | None:
        """The running unit started first, on another machine, that ``m`` stores and whose
        piece has no copy yet and is not ``m``'s own."""
        own = {r.unit.piece for r in self.running.get(m, [])}
        found, gone = None, 0
        for e in self._runs:
            if self._gone(e):
                gone += 1
                continue
            u = e[6]
            if e[4] != m and u.piece not in own and m in self._hset[u.piece]:
                found = u
                break
        if gone > 64 and gone > len(self._runs) // 4:
            self._runs = [e for e in self._runs if not self._gone(e)]
        return found
