"""The pull queues' rules as first written: every answer by a rescan of the whole state.  The
tests drive :mod:`elastic_coded.families.usctec.queues` (which keeps indexes instead) and
these side by side and ask that every answer be the same."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from elastic_coded.families.usctec.queue_times import outrun_rate


@dataclass
class _Running:
    unit: object
    key: object
    start: float | None = None   # known once the call ahead of it on the machine finished


@dataclass
class _Base:
    """What both queues keep: units running (by call), results, machine rates."""

    need: int
    holders: tuple                     # holders[piece] -> machines storing its rows
    products: dict                     # unit -> products (rows x columns)
    rate: dict = field(default_factory=dict)      # machine -> products per second
    running: dict = field(default_factory=dict)   # machine -> [_Running, ...] in FIFO order
    done: dict = field(default_factory=dict)      # piece -> positions finished
    complete: set = field(default_factory=set)
    dead: set = field(default_factory=set)
    orphans: list = field(default_factory=list)
    pos: dict = field(default_factory=dict)       # piece -> {position: calls running it}
    stuck: dict = field(default_factory=dict)     # piece -> {position: of those, stuck}

    def can_run(self, m, unit: object) -> bool:
        return m in self.holders[unit.piece]

    def calls_in_flight(self, m) -> int:
        return len({r.key for r in self.running.get(m, [])})

    def running_positions(self, piece: int) -> set:
        live = self.stuck.get(piece, {})
        return {p for p, n in self.pos.get(piece, {}).items() if n > live.get(p, 0)}

    def covered(self, piece: int) -> bool:
        """``piece`` decoded, or enough of its positions finished or under way (a unit waiting
        behind an overdue call on its machine does not count: see :meth:`refresh`)."""
        if piece in self.complete:
            return True
        return len(self.done.get(piece, set()) | self.running_positions(piece)) >= self.need

    def refresh(self, now: float) -> None:
        """Called before a round of :meth:`next_for` at time ``now`` (no-op here)."""

    def _count(self, units, step: int) -> None:
        for u in units:
            d = self.pos.setdefault(u.piece, {})
            d[u.position] = d.get(u.position, 0) + step

    # -- events ----------------------------------------------------------------------------
    def sent(self, m, units, key, now: float) -> None:
        """The call ``key`` with ``units`` (run in order) went to ``m``."""
        rs = self.running.setdefault(m, [])
        idle = not rs
        rs.extend(_Running(u, key, now if idle else None) for u in units)
        self._count(units, 1)

    def _restart(self, m, now: float) -> None:
        rs = self.running.get(m, [])
        if rs and rs[0].start is None:
            key = rs[0].key
            for r in rs:
                if r.key == key:
                    r.start = now

    def finished(self, m, key, now: float, elapsed: float) -> list:
        """The call ``key`` came back from ``m`` after computing ``elapsed`` seconds: its
        units (empty when the call is not one of this queue's)."""
        rs = self.running.get(m, [])
        mine = [r.unit for r in rs if r.key == key]
        self.running[m] = [r for r in rs if r.key != key]
        self._count(mine, -1)
        self._restart(m, now)
        if mine and elapsed > 0:
            obs = sum(self.products[u] for u in mine) / elapsed
            self.rate[m] = obs if m not in self.rate else 0.5 * (self.rate[m] + obs)
        for u in mine:
            self.done.setdefault(u.piece, set()).add(u.position)
        return mine

    def dropped(self, m, key, now: float) -> None:
        """The call ``key`` on ``m`` was cancelled."""
        rs = self.running.get(m, [])
        self._count([r.unit for r in rs if r.key == key], -1)
        self.running[m] = [r for r in rs if r.key != key]
        self._restart(m, now)

    def started(self, m, key) -> bool:
        rs = self.running.get(m, [])
        return bool(rs) and rs[0].key == key

    def decoded(self, piece: int) -> list:
        """``piece`` decoded: the calls ``[(machine, key), ...]`` still running that hold
        nothing else still needed, to cancel."""
        self.complete.add(piece)
        out = []
        for m, rs in self.running.items():
            for key in dict.fromkeys(r.key for r in rs):
                if all(r.unit.piece in self.complete for r in rs if r.key == key):
                    out.append((m, key))
        return out

    def lost(self, m) -> None:
        """``m`` died: its running units go back to the queue."""
        self.dead.add(m)
        gone = [r.unit for r in self.running.pop(m, [])]
        self._count(gone, -1)
        self.orphans.extend(gone)

    def _orphan_for(self, m) -> list:
        for i, u in enumerate(self.orphans):
            if self.covered(u.piece):
                continue
            if self.can_run(m, u):
                return [self.orphans.pop(i)]
        return []


class CodedQueue(_Base):
    """The ``usctec-pull`` rules (see the module docstring).  ``queues[m]``: the units planned
    on ``m``, in order; ``K``: positions of the code (``L + S``); ``rate``: products per second
    expected of each machine until it returns a call in this step; ``batch_s``: the expected
    duration of one call of planned units (several units go in one call); ``lag_s``: seconds
    every call is expected to take beyond its work."""

    def __init__(self, queues: dict, need: int, K: int, holders: tuple, products: dict,
                 rate: dict, batch_s: float = 0.0, margin: float = 0.1, lag_s: float = 0.0):
        super().__init__(need, holders, products, dict(rate))
        self.queues = {m: list(q) for m, q in queues.items()}
        self.K, self.margin, self.batch_s, self.lag_s = K, margin, batch_s, lag_s
        self.nap_s = max(0.005, 0.05 * batch_s)
        self.napping: dict = {}   # m -> (until, machines lost, its calls and rate) when told []
        self.losses = 0
        self.stolen = self.backups = 0
        self.returned: set = set()

    def finished(self, m, key, now: float, elapsed: float) -> list:
        """The step's first call back from ``m`` sets its rate to what the call showed."""
        first = m not in self.returned
        self.returned.add(m)
        mine = super().finished(m, key, now, elapsed)
        if first and mine and elapsed > 0:
            self.rate[m] = sum(self.products[u] for u in mine) / elapsed
        return mine

    def dropped(self, m, key, now: float) -> None:
        """A call cancelled while computing past its expected end bounds its machine's
        rate (the rule itself is the queue's, :func:`~elastic_coded.schemes.policies.
        queue_times.outrun_rate`: it keeps no index)."""
        bound = outrun_rate(self.running.get(m, []), key, self.products, self._rate(m), now,
                            self.lag_s)
        if bound is not None:
            self.rate[m] = bound
        super().dropped(m, key, now)

    def lost(self, m) -> None:
        """``m`` died: its running and its queued units go back to the queue."""
        super().lost(m)
        self.losses += 1
        self.orphans.extend(self.queues.pop(m, []))

    # expected times --------------------------------------------------------------------------
    def _rate(self, m) -> float:
        return self.rate.get(m) or 1e-9

    def _finish_times(self, m, now: float) -> list[tuple[_Running, float]]:
        """Expected finish of each unit running on ``m``: every unit of a call when the call
        ends (a call overdue is expected to take as long again as it has taken so far)."""
        out, t = [], now
        rs = self.running.get(m, [])
        for key in dict.fromkeys(r.key for r in rs):
            mine = [r for r in rs if r.key == key]
            start = mine[0].start if mine[0].start is not None else t
            est = start + sum(self.products[r.unit] for r in mine) / self._rate(m) + self.lag_s
            if est < now:
                est = now + (now - start)
            t = max(t, est)
            out.extend((r, t) for r in mine)
        return out

    def refresh(self, now: float) -> None:
        """Units in a call waiting behind an overdue one on its machine are *stuck*: they no
        longer cover their piece, so idle machines may compute the piece elsewhere."""
        self.stuck = {}
        for m, rs in self.running.items():
            if not rs or rs[0].start is None:
                continue
            head = rs[0].key
            work = sum(self.products[r.unit] for r in rs if r.key == head)
            if now <= rs[0].start + work / self._rate(m) + self.lag_s:
                continue
            for r in rs:
                if r.key != head:
                    d = self.stuck.setdefault(r.unit.piece, {})
                    d[r.unit.position] = d.get(r.unit.position, 0) + 1

    def _free_at(self, m, now: float) -> float:
        ft = self._finish_times(m, now)
        return ft[-1][1] if ft else now

    def _queue_end(self, m, now: float) -> float:
        work = sum(self.products[u] for u in self.queues.get(m, ()) if not self.covered(u.piece))
        return self._free_at(m, now) + work / self._rate(m)

    # the rules -------------------------------------------------------------------------------
    def next_for(self, m, now: float) -> list:
        """The next call's units for ``m``: a lost unit, its own next needed units (about
        ``batch_s`` of work), a unit stolen from the machine expected to finish last, or a
        coded backup; ``[]`` when nothing helps (then it naps: nothing until ``nap_s`` has
        passed, its calls or rate changed, or a machine was lost)."""
        if m in self.dead:
            return []
        nap = self.napping.get(m)
        if nap is not None and now < nap[0] and nap[1:] == self._state(m):
            return []
        out = self._orphan_for(m)
        if out:
            return out
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
            return out
        u = self._steal(m, now)
        if u is not None:
            self.stolen += 1
            return [u]
        u = self._backup(m, now)
        if u is not None:
            self.backups += 1
            return [u]
        self.napping[m] = (now + self.nap_s,) + self._state(m)
        return []

    def _state(self, m) -> tuple:
        return (self.losses, tuple((r.key, r.start) for r in self.running.get(m, [])),
                self.rate.get(m))

    def _steal(self, m, now: float):
        """The last needed unit ``m`` can run of the queue expected to end last, if ``m``
        would finish it before that queue ends."""
        mine_free = self._free_at(m, now)
        best = None
        for v, q in self.queues.items():
            if v == m or not q:
                continue
            end = self._queue_end(v, now)
            for i in range(len(q) - 1, -1, -1):
                u = q[i]
                if self.covered(u.piece) or not self.can_run(m, u):
                    continue
                if mine_free + self.products[u] / self._rate(m) + self.lag_s < end and \
                        (best is None or end > best[0]):
                    best = (end, v, i)
                break
        if best is None:
            return None
        _, v, i = best
        return self.queues[v].pop(i)

    def _backup(self, m, now: float):
        """A coded backup: an unused position of the piece whose ``L``-th result is expected
        last, if ``m`` would make it come sooner (by ``margin`` of the time left at least; of
        equal gains, the lowest piece)."""
        fin: dict = {}
        for v in self.running:
            for r, t in self._finish_times(v, now):
                fin.setdefault(r.unit.piece, []).append((t, r.unit))
        mine_free = self._free_at(m, now)
        best = None
        for piece, lst in fin.items():
            if piece in self.complete or m not in self.holders[piece]:
                continue
            done = self.done.get(piece, set())
            at: dict = {}   # position under way -> its soonest expected finish
            for t, u in lst:
                if u.position not in done:
                    at[u.position] = min(at.get(u.position, float("inf")), t)
            k = self.need - len(done)   # results still needed
            if k <= 0 or k > len(at):
                continue
            free = [p for p in range(self.K) if p not in at and p not in done]
            # no free position: a copy of the position expected last
            position = free[0] if free else max(at, key=lambda p: (at[p], p))
            times = sorted(at.values())
            unit = lst[0][1]
            mine = mine_free + self.products[unit] / self._rate(m) + self.lag_s
            # the copy turns the last finish T into min(T, mine): the same k-th as adding mine
            gain = times[k - 1] - sorted(times + [mine])[k - 1]
            if gain > self.margin * (times[k - 1] - now) and \
                    (best is None or gain > best[0] or (gain == best[0] and piece < best[1])):
                best = (gain, piece, replace(unit, position=position))
        return None if best is None else best[2]


class DynamicQueue(_Base):
    """The ``dynamic`` baseline's rules (see the module docstring): one queue of chunks in row
    order; a machine takes the first it stores; once none is left, it takes a backup copy of
    the longest-running chunk it stores that has no copy yet and is not its own."""

    def __init__(self, chunks: list, holders: tuple, products: dict):
        super().__init__(1, holders, products)
        self.queue = list(chunks)
        self.copied: set = set()
        self.sent_at: dict = {}
        self.backups = 0

    def sent(self, m, units, key, now: float) -> None:
        super().sent(m, units, key, now)
        for u in units:
            self.sent_at.setdefault(u.piece, now)

    def next_for(self, m, now: float) -> list:
        if m in self.dead:
            return []
        out = self._orphan_for(m)
        if out:
            return out
        for i, u in enumerate(self.queue):
            if self.can_run(m, u):
                return [self.queue.pop(i)]
        if self.queue:
            return []  # chunks are left, but m stores none of them
        mine = {r.unit.piece for r in self.running.get(m, [])}
        runs = sorted(((self.sent_at[r.unit.piece], r.unit) for v, rs in self.running.items()
                       if v != m for r in rs
                       if r.unit.piece not in self.complete and r.unit.piece not in self.copied
                       and r.unit.piece not in mine and self.can_run(m, r.unit)),
                      key=lambda x: x[0])
        if not runs:
            return []
        u = runs[0][1]
        self.copied.add(u.piece)
        self.backups += 1
        return [u]
