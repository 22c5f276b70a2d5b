"""The pull policies' queues (:mod:`.pull` describes the rules).  Pure: no Ray.

:class:`CodedQueue` holds ``usctec-pull``'s rules, :class:`~.dynamic_queue.DynamicQueue`
(in its own module, re-exported here) the ``dynamic`` baseline's.  Both answer
:meth:`~_Base.next_for` (the next call's units for a machine with room) and are told what
was sent, finished, cancelled, decoded and lost.  Times are seconds of the caller's clock.

They are asked by every idle machine at every event, so what one answer needs is kept indexed
rather than rescanned: the calls holding each piece (to cancel on a decode), the machines
storing each piece as sets, the rows each machine stores as a pointer into ``dynamic``'s chunks,
its running chunks in backup order, and, for the coded rules, the expected finish times, queue
ends and backup candidates of the current instant, kept until the state changes
(``_ver``).  The answers are the same as a rescan's.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TypedDict, cast

from .dynamic_queue import DynamicQueue
from .queue_base import QueueUnit, _Base
from .queue_times import _call_ends, _kth_with, outrun_rate, pays_no_sooner

__all__ = ["CodedQueue", "DynamicQueue", "NAP_SHARE", "NAP_MIN_S", "pays_no_sooner"]

NAP_SHARE = 0.05
"""A machine the coded rules gave nothing asks again after this share of a call's expected time
(:attr:`CodedQueue.nap_s`), or sooner when one of its calls ends or a machine is lost."""
NAP_MIN_S = 0.005
"""The shortest nap, in seconds."""

_Ends = tuple[float, dict[object, float]]   # (when m is free, {call key: its expected end})
# a backup candidate (:meth:`CodedQueue._candidate`): (finishes sorted, k, a unit, position)
_Cand = tuple[list[float], int, QueueUnit, int]
# what it reads that does not depend on the time (:meth:`CodedQueue._shape`)
_Shape = tuple[list[tuple[Hashable, Hashable, tuple[int, ...]]], int, QueueUnit, int | None,
               float, tuple[float, ...]]


class _Instant(TypedDict, total=False):
    """What is known of an instant (:meth:`CodedQueue._now`): by machine, its calls' ends and
    its queue's end."""

    finish: dict[Hashable, _Ends]
    ends: dict[Hashable, float]


class CodedQueue(_Base):
    """The ``usctec-pull`` rules (see :mod:`.pull`).  ``queues[m]``: the units planned on ``m``,
    in order; ``K``: positions of the code (``L + S``); ``rate``: products per second expected
    of each machine until it returns a call in this step; ``batch_s``: the expected duration of
    one call of planned units (several units go in one call); ``lag_s``: seconds every call is
    expected to take beyond its work (the trip, the worker's own cost, the driver's delay in
    taking the result in: :func:`~.pull_step.next_lag`), so a call is overdue only past them.
    :attr:`lags` collects what each returned call took beyond its work, for the next step's
    ``lag_s``."""

    def __init__(self, queues: Mapping[Hashable, Sequence[QueueUnit]], need: int, K: int,
                 holders: Sequence[Iterable[Hashable]], products: Mapping[object, int],
                 rate: Mapping[Hashable, float], batch_s: float = 0.0, margin: float = 0.1,
                 lag_s: float = 0.0):
        super().__init__(need, holders, products, dict(rate))
        # machines with an empty queue, no queue to steal from and no backup candidate among
        # the pieces they store: that lasts until one of those pieces changes (:meth:`_bump`;
        # queues only shrink), so they rest until then and are woken by the change
        self._barren = set()
        self._bare = 0
        # machines with no queue to steal from whose backup candidates cannot pay before a
        # time the candidates bound (:meth:`_could_pay`): they nap until then unless one of
        # their pieces changes first, which wakes them as it wakes the barren ones
        self._quiet = {}   # m -> when its nap would have ended
        self._victimless = False
        self._pays_at = math.inf
        self._track_pieces = True
        self.queues = {m: list(q) for m, q in queues.items()}
        self.K, self.margin, self.batch_s = K, margin, batch_s
        self.lag_s = lag_s
        self.lags: list[float] = []   # seconds each returned call took beyond its expected time
        self.nap_s = max(NAP_MIN_S, NAP_SHARE * batch_s)
        self._napping = {}   # m -> (until, losses, its version) after it got nothing
        self.stolen = self.backups = 0
        self.returned: set[Hashable] = set()
        self._memo_key: tuple[float, int] | None = None
        self._memo: _Instant = {}
        # piece -> (its version, valid until, at, candidate, its shape)
        self._cands: dict[int, tuple[int, float, float, _Cand | None, _Shape | None]] = {}
        # m -> (its version, valid until, finish times)
        self._kept: dict[Hashable, tuple[int | None, float, _Ends]] = {}
        # m -> (its version, when its started call is due)
        self._due: dict[Hashable, tuple[int | None, float]] = {}
        self._pieces_of: dict[Hashable, list[int]] = {}   # m -> the pieces it stores
        for piece, hs in enumerate(self._hset):
            for h in hs:
                self._pieces_of.setdefault(h, []).append(piece)
        # m -> {place: v} of the queues holding units m can run
        self._victims: dict[Hashable, dict[int, Hashable]] = {}
        for place, (v, q) in enumerate(self.queues.items()):
            for u in q:
                for h in self._hset[u.piece]:
                    if h != v:
                        self._victims.setdefault(h, {})[place] = v
        # heap of (when due, m's version, tie, m)
        self._dues: list[tuple[float, int | None, int, Hashable]] = []
        self._late: dict[Hashable, int | None] = {}   # m -> its version when found overdue
        # m (overdue) -> [(piece, position)] it counts as stuck
        self._stuck_of: dict[Hashable, list[tuple[int, int]]] = {}

    def finished(self, m: Hashable, key: Hashable, now: float, elapsed: float
                 ) -> list[QueueUnit]:
        rs = self.running.get(m, [])
        if rs and rs[0].key == key and rs[0].start is not None:   # its start is known
            self.lags.append(now - (self._head_due(m) - self.lag_s))
        mine = super().finished(m, key, now, elapsed)
        self.returned.add(m)
        return mine

    def _next_rate(self, m: Hashable, obs: float) -> float:
        """The first call ``m`` returns in the step sets its rate to what that call showed
        (``obs``: its products over its busy time), not to the mean with the rate it was planned
        with, as later calls do: the plan's rate knows nothing of this step's slowdown, and a
        straggler 5x slow would still be expected at 1.7x and given calls three times too
        long."""
        return obs if m not in self.returned else super()._next_rate(m, obs)

    def dropped(self, m: Hashable, key: Hashable, now: float) -> None:
        """The call ``key`` on ``m`` was cancelled.  One cancelled while computing past its
        expected end bounds ``m``'s speed: it did not finish its work in the time it ran (less
        the lag), so ``m`` is expected no faster than that for the rest of the step (a
        straggler whose calls are all outrun would otherwise keep the rate it was planned with,
        and be given the last backups)."""
        bound = outrun_rate(self.running.get(m, []), key, self.products, self._rate(m), now,
                            self.lag_s)
        if bound is not None:
            self.rate[m] = bound
            self._mtouch(m)
        super().dropped(m, key, now)

    def lost(self, m: Hashable) -> None:
        """``m`` died: its running and its queued units go back to the queue."""
        super().lost(m)
        self.orphans.extend(self.queues.pop(m, []))

    def _now(self, now: float) -> _Instant:
        """What is known of the instant ``now`` in the present state (cleared by any change)."""
        if self._memo_key != (now, self._ver):
            self._memo_key, self._memo = (now, self._ver), {}
        return self._memo

    # expected times --------------------------------------------------------------------------
    def _rate(self, m: Hashable) -> float:
        return self.rate.get(m) or 1e-9

    def _ends(self, m: Hashable, now: float) -> _Ends:
        """``(when m is free, {call key: its expected end})`` at ``now``: a call's results come
        back together when it ends, ``m``'s calls run one after another, and a call overdue is
        expected to take as long again as it has taken so far.  Until the started call is
        overdue they do not depend on ``now``, so they are kept while ``m``'s calls and rate
        stay the same."""
        memo = self._now(now).setdefault("finish", {})
        if m in memo:
            return memo[m]
        kept = self._kept.get(m)
        if kept is not None and kept[0] == self._mver.get(m) and now <= kept[1]:
            memo[m] = kept[2]
            return kept[2]
        memo[m] = got = _call_ends(self.running.get(m, []), self.products, self._rate(m), now,
                                   self.lag_s)
        self._kept[m] = (self._mver.get(m), self._head_due(m), got)
        return got

    def _head_due(self, m: Hashable) -> float:
        """When the call ``m`` is computing is due (``-inf`` when none has started)."""
        got = self._due.get(m)
        if got is not None and got[0] == self._mver.get(m):
            return got[1]
        rs = self.running.get(m, [])
        due = -float("inf")
        if rs and rs[0].start is not None:
            due = rs[0].start + sum(self.products[r.unit] for r in rs
                                    if r.key == rs[0].key) / self._rate(m) + self.lag_s
        self._due[m] = (self._mver.get(m), due)
        return due

    def refresh(self, now: float) -> None:
        """Units in a call waiting behind an overdue one on its machine are *stuck*: they no
        longer cover their piece, so idle machines may compute the piece elsewhere.  The
        machines whose calls changed are put in a heap by when their started call is due, so
        only the overdue ones are visited."""
        self._touch()
        for m in self._dirty:
            if self._late.pop(m, None) is not None:
                self._stick(m, -1)
            due = self._head_due(m)
            if due > -float("inf"):
                heapq.heappush(self._dues, (due, self._mver.get(m), self._seq, m))
                self._seq += 1
        self._dirty.clear()
        while self._dues and self._dues[0][0] < now:
            _, ver, _, m = heapq.heappop(self._dues)
            if ver == self._mver.get(m) and m not in self._late:
                self._late[m] = ver
                self._stick(m, 1)

    def _stick(self, m: Hashable, step: int) -> None:
        """Count (``step`` 1) or uncount (-1) the units of ``m`` waiting behind its overdue
        call in :attr:`stuck`: they stay the same until ``m``'s calls change, which takes it
        off the overdue machines first, so the counts are kept, not rebuilt."""
        if step > 0:
            rs = self.running.get(m, [])
            head = rs[0].key
            self._stuck_of[m] = [(r.unit.piece, r.unit.position) for r in rs if r.key != head]
        for piece, position in self._stuck_of.pop(m, []) if step < 0 else self._stuck_of[m]:
            d = self.stuck.setdefault(piece, {})
            d[position] = d.get(position, 0) + step
            if d[position] <= 0:
                del d[position]
                if not d:
                    del self.stuck[piece]

    def _free_at(self, m: Hashable, now: float) -> float:
        free = self._ends(m, now)[0]
        return free if self.running.get(m) else now

    def _queue_end(self, m: Hashable, now: float) -> float:
        work = sum(self.products[u] for u in self.queues.get(m, ()) if not self.covered(u.piece))
        return self._free_at(m, now) + work / self._rate(m)

    # the rules -------------------------------------------------------------------------------
    def next_for(self, m: Hashable, now: float) -> list[QueueUnit]:
        """The next call's units for ``m``: a lost unit, its own next needed units (about
        ``batch_s`` of work), a unit stolen from the machine expected to finish last, or a
        coded backup; ``[]`` when nothing helps.  A machine given nothing naps: it is given
        nothing again until ``nap_s`` has passed, one of its calls has ended or a machine was
        lost (a steal or a backup waits at most that long; idle machines cost the driver little
        however many there are).  A machine with nothing it could do at any time (an empty
        queue, no queue left to steal from, no backup candidate among the pieces it stores)
        rests until one of those pieces changes, which wakes it (:meth:`take_wakes`); one with
        no queue left to steal from whose candidates cannot pay before a time
        (:meth:`_could_pay`) naps until then, or, when one of those pieces changes first, to
        the end of its ``nap_s``."""
        if m in self.dead or self.resting(m, now) is not None:
            return []
        self._quiet.pop(m, None)
        out = self._orphan_for(m)
        if out:
            return out
        if m in self._barren:   # still nothing to steal and no backup candidate: a miss
            return self._nap(m, math.inf)
        q = self.queues.get(m, [])
        # slow start: one unit per call until the machine has returned one in this step, so a
        # machine that straggles from the start holds little; then calls of ``batch_s``
        budget = self.batch_s * self._rate(m) if m in self.returned else 0.0
        work = 0.0
        while q and (not out or work + self.products[q[0]] <= budget * 1.000001):
            u = q.pop(0)
            if not self.covered(u.piece):
                out.append(u)
                work += self.products[u]
        if out:
            self._touch()
            return out
        got = self._steal(m, now)
        if got is not None:
            self.stolen += 1
            return [got]
        got = self._backup(m, now)
        if got is not None:
            self.backups += 1
            return [got]
        if self._bare == 2:
            self._barren.add(m)
            return self._nap(m, math.inf)
        if self._victimless and self._pays_at > now + self.nap_s:
            self._quiet[m] = now + self.nap_s
            return self._nap(m, self._pays_at)
        return self._nap(m, now + self.nap_s)

    def _nap(self, m: Hashable, until: float) -> list[QueueUnit]:
        self._napping[m] = (until, self._losses, self._mver.get(m))
        return []

    def resting(self, m: Hashable, now: float) -> float | None:
        nap = self._napping.get(m)
        if nap is not None and now < nap[0] and nap[1:] == (self._losses, self._mver.get(m)):
            return nap[0]
        return None

    def _end_of(self, v: Hashable, now: float) -> float:
        memo = self._now(now).setdefault("ends", {})
        if v not in memo:
            memo[v] = self._queue_end(v, now)
        return memo[v]

    def _steal(self, m: Hashable, now: float) -> QueueUnit | None:
        """The last needed unit ``m`` can run of the queue expected to end last, if ``m``
        would finish it before that queue ends."""
        mine_free = self._free_at(m, now)
        rate = self._rate(m)
        # only the queues holding units m can run: latest end first, ties in the queues' order
        # (queues only shrink, so the empty ones are dropped for good)
        vict = self._victims.get(m, {})
        live = {place: v for place, v in vict.items() if self.queues.get(v)}
        if len(live) < len(vict):
            self._victims[m] = live
        self._bare = 0 if live else 1
        self._victimless = not live
        ends = sorted(((self._end_of(v, now), place, v) for place, v in live.items()),
                      key=lambda e: (-e[0], e[1]))
        for end, _, v in ends:
            if end <= mine_free:
                return None  # no later queue ends after m is free
            q = self.queues[v]
            for i in range(len(q) - 1, -1, -1):
                u = q[i]
                if self.covered(u.piece) or not self.can_run(m, u):
                    continue
                if mine_free + self.products[u] / rate + self.lag_s < end:
                    self._touch()
                    return q.pop(i)
                break
        return None

    def _candidate(self, piece: int, now: float) -> _Cand | None:
        """For a piece running and not decoded, with results still due: ``(expected finishes
        sorted, k, a unit, position)``, ``k`` the results it still needs, one finish per
        position under way (the soonest of its calls); else ``None``.  The position is a free
        one, or, when every position is done or under way, a copy of the one expected last
        (:meth:`_backup` gains the same either way: a copy finishing at ``x`` turns the last
        finish ``T`` into ``min(T, x)``, and the ``k``-th of those is the ``k``-th of the
        finishes with ``x`` added, ``k`` being at most their number).  Read from the calls
        running it; kept while none of them changes (:meth:`_bump`) and none of their machines
        is overdue (then for the instant only: the calls and positions are kept, the expected
        finishes read again)."""
        ver = self._pver.get(piece, 0)
        got = self._cands.get(piece)
        if got is not None and got[0] == ver:
            if now <= got[1] or now == got[2]:
                return got[3]
            shape = got[4]
        else:
            shape = self._shape(piece)
        out, until = None, math.inf
        if shape is not None:
            calls, k, unit, free, until, _ = shape
            ends = self._ends
            at: dict[int, float] = {}
            for m, key, positions in calls:
                t = ends(m, now)[1][key]
                for p in positions:
                    if t < at.get(p, math.inf):
                        at[p] = t
            if free is None:   # every position done or under way: copy the one expected last
                free = max(at, key=lambda p: (at[p], p))
            out = (sorted(at.values()), k, unit, free)
        self._cands[piece] = (ver, until, now, out, shape)
        return out

    def _shape(self, piece: int) -> _Shape | None:
        """What :meth:`_candidate` reads of a piece that does not depend on the time:
        ``([(machine, call key, positions of the piece not done)], k, a unit, a free position
        or None, when the first of the calls' machines is overdue, those machines' dues
        sorted)``, or ``None`` for no candidate."""
        calls = self._by_piece.get(piece)
        if not calls or piece in self.complete:
            return None
        done = self.done.get(piece, set())
        used: set[int] = set()
        shape: list[tuple[Hashable, Hashable, tuple[int, ...]]] = []
        first: QueueUnit | None = None
        until = math.inf
        for vk in calls:   # each call's units share its end
            mine = [u for u in self._calls[vk][1] if u.piece == piece]
            if mine:
                first = mine[0] if first is None else first
                positions = tuple(u.position for u in mine if u.position not in done)
                if positions:
                    shape.append((vk[0], vk[1], positions))
                    used.update(positions)
            until = min(until, self._head_due(vk[0]))
        free = next((p for p in range(self.K) if p not in used and p not in done), None)
        k = self.need - len(done)   # results still needed
        if not 0 < k <= len(used) or first is None:   # (no unit: none used either)
            return None
        dues = tuple(sorted(self._head_due(v) for v, _, _ in shape))   # for :meth:`_could_pay`
        return shape, k, first, free, until, dues

    def _could_pay(self, piece: int, cand: _Cand, w: float, mine: float, now: float) -> float:
        """The earliest time a backup of ``piece``, which does not pay at ``now``, could pay
        for a machine taking ``w`` seconds for the unit (done at ``mine``), unless one of the
        piece's calls changes first (:meth:`_bump`): :func:`pays_no_sooner`, whose growth
        bound holds until a call still on time becomes overdue (its expected end then
        jumps)."""
        at = pays_no_sooner(cand[0], cand[1], w, now, self.margin, mine)
        # the calls' machines' dues: kept with the piece's calls (a candidate has a shape)
        dues = cast(_Shape, self._cands[piece][4])[5]
        i = bisect_left(dues, now)        # the first machine not overdue yet
        if i < len(dues) and dues[i] < at:
            at = dues[i]
        return at

    def _backup(self, m: Hashable, now: float) -> QueueUnit | None:
        """A coded backup: an unused position of the piece whose ``L``-th result is expected
        last, or a copy of its position expected last when none is unused (:meth:`_candidate`),
        if ``m`` would make it come sooner (by ``margin`` of the time left at least; of equal
        gains, the lowest piece)."""
        mine_free = self._free_at(m, now)
        rate = self._rate(m)
        best, running, complete, bare = None, self._by_piece, self.complete, True
        pays_at = math.inf
        mine_pieces = self._pieces_of.get(m, ())
        left = [p for p in mine_pieces if p not in complete]   # decoded pieces dropped for good
        if len(left) < len(mine_pieces):
            self._pieces_of[m] = left
        for piece in left:
            if not running.get(piece):
                continue
            c = self._candidate(piece, now)
            if c is None:
                continue
            bare = False
            times, k, unit, free = c
            mine = mine_free + self.products[unit] / rate + self.lag_s
            gain = times[k - 1] - _kth_with(times, k, mine)
            if gain > self.margin * (times[k - 1] - now):
                if best is None or (gain, -piece) > best[:2]:
                    best = (gain, -piece, replace(unit, position=free))
            elif best is None and self._victimless and pays_at > now:
                pays_at = min(pays_at, self._could_pay(piece, c, mine - mine_free, mine, now))
        self._bare += bare
        self._pays_at = pays_at
        return None if best is None else best[2]
