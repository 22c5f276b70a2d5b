"""What the pull queues share (:class:`_Base`): the calls running, the positions under way and
done, the pieces decoded, the machines lost, and the versions the coded rules' caches are kept
by.  Pure: no Ray.  :mod:`.queues` describes the rules."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import Field, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

__all__ = ["_Base", "_Running", "QueueUnit"]


class QueueUnit(Protocol):
    """A unit as the queues see it (a :class:`~.pull.Unit`): a position of a piece, a frozen
    dataclass (a coded backup is a copy with another position, ``dataclasses.replace``)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def piece(self) -> int: ...
    @property
    def position(self) -> int: ...


@dataclass
class _Running:
    unit: QueueUnit
    key: Hashable
    start: float | None = None   # known once the call ahead of it on the machine finished


@dataclass
class _Base:
    """What both queues keep: units running (by call), results, machine rates."""

    need: int
    holders: Sequence[Iterable[Hashable]]   # holders[piece] -> machines storing its rows
    products: Mapping[object, int]          # unit -> products (rows x columns)
    rate: dict[Hashable, float] = field(default_factory=dict)   # machine -> products a second
    # machine -> [_Running, ...] in FIFO order
    running: dict[Hashable, list[_Running]] = field(default_factory=dict)
    done: dict[int, set[int]] = field(default_factory=dict)     # piece -> positions finished
    complete: set[int] = field(default_factory=set)
    dead: set[Hashable] = field(default_factory=set)
    orphans: list[QueueUnit] = field(default_factory=list)
    # piece -> {position: calls running it}, and of those, the stuck ones
    pos: dict[int, dict[int, int]] = field(default_factory=dict)
    stuck: dict[int, dict[int, int]] = field(default_factory=dict)
    # indexes (see the module docstring)
    _hset: tuple[frozenset[Hashable], ...] = field(default=(), repr=False)
    # (m, key) -> (seq, units); piece -> {(m, key): None}
    _calls: dict[tuple[Hashable, Hashable], tuple[int, list[QueueUnit]]] = field(
        default_factory=dict, repr=False)
    _by_piece: dict[int, dict[tuple[Hashable, Hashable], None]] = field(
        default_factory=dict, repr=False)
    _order: dict[Hashable, int] = field(default_factory=dict, repr=False)  # m -> its place
    _mver: dict[Hashable, int] = field(default_factory=dict, repr=False)   # m -> its changes
    _dirty: set[Hashable] = field(default_factory=set, repr=False)  # changed since refresh
    _pver: dict[int, int] = field(default_factory=dict, repr=False)  # piece -> its changes
    _seq: int = 0
    _ver: int = 0
    _losses: int = 0
    _wake_all: bool = False
    _woken: set[Hashable] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self._hset = tuple(frozenset(h) for h in self.holders)

    def _touch(self) -> None:
        self._ver += 1

    def can_run(self, m: Hashable, unit: QueueUnit) -> bool:
        return m in self._hset[unit.piece]

    def calls_in_flight(self, m: Hashable) -> int:
        return len({r.key for r in self.running.get(m, [])})

    def running_positions(self, piece: int) -> set[int]:
        live = self.stuck.get(piece, {})
        return {p for p, n in self.pos.get(piece, {}).items() if n > live.get(p, 0)}

    def covered(self, piece: int) -> bool:
        """``piece`` decoded, or enough of its positions finished or under way (a unit waiting
        behind an overdue call on its machine does not count: see :meth:`refresh`)."""
        if piece in self.complete:
            return True
        done = self.done.get(piece, ())
        n, need = len(done), self.need
        if n >= need:
            return True
        live = self.stuck.get(piece, {})
        for p, k in self.pos.get(piece, {}).items():   # running_positions, counted in place
            if k > live.get(p, 0) and p not in done:
                n += 1
                if n >= need:
                    return True
        return False

    def refresh(self, now: float) -> None:
        """Called before a round of :meth:`next_for` at time ``now`` (no-op here)."""

    def _count(self, units: Iterable[QueueUnit], step: int) -> None:
        for u in units:
            d = self.pos.setdefault(u.piece, {})
            d[u.position] = d.get(u.position, 0) + step

    _track_pieces = False   # keep :attr:`_pver` (the coded rules' backup candidates read it)
    if TYPE_CHECKING:   # set by the queue that tracks pieces (:class:`.queues.CodedQueue`)
        _barren: set[Hashable] = field(init=False)
        _quiet: dict[Hashable, float] = field(init=False)
        # m -> (until, losses, its version) after it got nothing
        _napping: dict[Hashable, tuple[float, int, int | None]] = field(init=False)

    def _bump(self, pieces: Iterable[int]) -> None:
        if not self._track_pieces:
            return
        pv, barren, quiet, hset = self._pver, self._barren, self._quiet, self._hset
        for p in pieces:
            pv[p] = pv.get(p, 0) + 1
            if barren:
                up = barren & hset[p]
                if up:   # they may have a backup candidate again: woken
                    barren -= up
                    self._woken |= up
                    for h in up:
                        self._napping.pop(h, None)
            if quiet:
                up = quiet.keys() & hset[p]
                if up:   # the bound no longer holds: back to the nap they would have had
                    self._woken |= up
                    for h in up:
                        nap = self._napping.get(h)
                        if nap is not None:
                            self._napping[h] = (quiet[h],) + nap[1:]
                        del quiet[h]

    def _mtouch(self, m: Hashable) -> None:
        self._mver[m] = self._mver.get(m, 0) + 1
        self._dirty.add(m)
        self._bump(r.unit.piece for r in self.running.get(m, ()))

    def _put(self, m: Hashable, rs: list[_Running]) -> None:
        self._mtouch(m)
        if m not in self.running:
            self._order[m] = self._seq
            self._seq += 1
        self.running[m] = rs

    def _unindex(self, m: Hashable, key: Hashable) -> None:
        entry = self._calls.pop((m, key), None)
        for u in entry[1] if entry else ():
            self._by_piece.get(u.piece, {}).pop((m, key), None)
            self._bump((u.piece,))

    # -- events ----------------------------------------------------------------------------
    def sent(self, m: Hashable, units: Sequence[QueueUnit], key: Hashable, now: float) -> None:
        """The call ``key`` with ``units`` (run in order) went to ``m``."""
        rs = self.running.get(m, [])
        idle = not rs
        self._put(m, rs + [_Running(u, key, now if idle else None) for u in units])
        self._count(units, 1)
        seq, old = self._calls.get((m, key), (self._seq, []))
        self._seq += 1
        self._calls[(m, key)] = (seq, old + list(units))
        for u in units:
            self._by_piece.setdefault(u.piece, {})[(m, key)] = None
        self._bump(u.piece for u in units)
        self._touch()

    def _restart(self, m: Hashable, now: float) -> None:
        rs = self.running.get(m, [])
        if rs and rs[0].start is None:
            self._mtouch(m)
            key = rs[0].key
            for r in rs:
                if r.key == key:
                    r.start = now

    def finished(self, m: Hashable, key: Hashable, now: float, elapsed: float
                 ) -> list[QueueUnit]:
        """The call ``key`` came back from ``m`` after computing ``elapsed`` seconds: its
        units (empty when the call is not one of this queue's)."""
        rs = self.running.get(m, [])
        mine = [r.unit for r in rs if r.key == key]
        self._put(m, [r for r in rs if r.key != key])
        self._unindex(m, key)
        self._count(mine, -1)
        self._restart(m, now)
        if mine and elapsed > 0:
            obs = sum(self.products[u] for u in mine) / elapsed
            self.rate[m] = self._next_rate(m, obs)
            self._mtouch(m)
        for u in mine:
            self.done.setdefault(u.piece, set()).add(u.position)
        self._bump(u.piece for u in mine)
        self._touch()
        return mine

    def _next_rate(self, m: Hashable, obs: float) -> float:
        """``m``'s rate after a call came back at ``obs`` products per second: the mean with
        the rate it had (``obs`` itself when it had none)."""
        return obs if m not in self.rate else 0.5 * (self.rate[m] + obs)

    def dropped(self, m: Hashable, key: Hashable, now: float) -> None:
        """The call ``key`` on ``m`` was cancelled."""
        rs = self.running.get(m, [])
        self._count([r.unit for r in rs if r.key == key], -1)
        self._put(m, [r for r in rs if r.key != key])
        self._unindex(m, key)
        self._restart(m, now)
        self._touch()

    def started(self, m: Hashable, key: Hashable) -> bool:
        rs = self.running.get(m, [])
        return bool(rs) and rs[0].key == key

    def decoded(self, piece: int) -> list[tuple[Hashable, Hashable]]:
        """``piece`` decoded: the calls ``[(machine, key), ...]`` still running that hold
        nothing else still needed, to cancel (in the order of the machines' first calls, then
        of their calls)."""
        self.complete.add(piece)
        self._bump((piece,))
        self._touch()
        out = [mk for mk in self._by_piece.pop(piece, {})
               if all(u.piece in self.complete for u in self._calls[mk][1])]
        return sorted(out, key=lambda mk: (self._order[mk[0]], self._calls[mk][0]))

    def lost(self, m: Hashable) -> None:
        """``m`` died: its running units go back to the queue."""
        self.dead.add(m)
        gone = self.running.pop(m, [])
        self._bump(r.unit.piece for r in gone)
        self._order.pop(m, None)
        self._mtouch(m)
        for key in dict.fromkeys(r.key for r in gone):
            self._unindex(m, key)
        self._count([r.unit for r in gone], -1)
        self.orphans.extend(r.unit for r in gone)
        self._losses += 1
        self._wake_all = True
        self._touch()

    def take_wakes(self) -> tuple[bool, set[Hashable]]:
        """``(everyone, machines)``: whether every resting machine (:meth:`resting`) may have
        work again, else which ones, since the last call (a driver that asks every machine at
        every event does not need this)."""
        out = (self._wake_all, self._woken)
        self._wake_all, self._woken = False, set()
        return out

    def resting(self, m: Hashable, now: float) -> float | None:
        """After :meth:`next_for` gave ``m`` nothing: until when it would give nothing again
        unless one of ``m``'s calls ends or :meth:`take_wakes` names it (``math.inf``: until
        then), or ``None`` when it may give work at any time."""
        return None

    def _orphan_for(self, m: Hashable) -> list[QueueUnit]:
        for i, u in enumerate(self.orphans):   # the cheap test first: few machines hold a piece
            if self.can_run(m, u) and not self.covered(u.piece):
                self._touch()
                return [self.orphans.pop(i)]
        return []
