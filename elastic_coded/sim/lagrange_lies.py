"""What a lie costs a USCTEC-family whole-plan step: detection after the decode, the repair
calls, the liars caught.  Pure: numpy.

The runtime (``families/usctec/verify.py``, ``families/usctec/verify_repair.py``) decodes each piece
from the first ``L`` results of its ``L+S`` positions, liars' included, and checks the product
against the sketch of ``A`` once every piece has decoded.  A lie costs nothing unless a liar's
result was among those a piece decoded from.  Otherwise the product fails its check at the
step's end ``T`` and each such piece is repaired:

* its results in hand at ``T`` are checked one by one: a liar's fails (the liar is caught),
  the honest ones are kept;
* while a piece has fewer than ``L`` results that check, the driver asks for the missing
  positions, as many as it needs, in position order, one call each: in the first round on the
  machine the plan gave the position (if live and not caught), in later rounds on the other
  live machines storing the piece's rows not caught, the least used in the round first, then
  by id, never asking a machine for the same position twice.  A round's calls start together
  at the round's start, each a fresh call of the piece's task at the machine's effective
  speed (with its slowdown: a real straggler is still slow; the runtime's emulation paces a
  repair call at the configured speed), a machine asked more than once computing them one
  after the other, and the round ends when its last call is back; a liar asked lies again
  and is caught.  With no one left to ask the step is lost
  (``time = inf``), as the runtime raises;
* the pieces are then decoded again (no simulated time).

The same rule serves both executions (:func:`repair`, over a :class:`Decoded`): a whole plan
(:func:`repair_lies`), whose pieces decoded from their machines' first ``L`` by finish time
(where a crash re-dispatched its tasks or a backup copy ran, :mod:`.executor`, the originals
stand in for them), and a pull step (:mod:`.pull`), whose pieces decoded from the first ``L``
positions taken in, each unit's own, the planned machine of a position its sub-divided plan's.
With a :class:`~elastic_coded.sim.cost.RuntimeCost` each repair call also costs the driver
``call_s + round_trip_s``, one after another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

    from .cost import RuntimeCost
    from .executor import _Compiled, _PlacementIndex

__all__ = ["Decoded", "LieRepair", "repair", "repair_lies"]

_Ask = tuple[int, int, Hashable]
"""``(piece, position, machine)``: one repair call."""


@dataclass(frozen=True)
class LieRepair:
    """What the lies of one step cost."""

    time: float
    """When the repaired product is in hand (the step's end without lies used: ``T``)."""
    repairs: int = 0
    """Pieces decoded from a liar's result, repaired."""
    calls: int = 0
    """Repair calls made."""
    caught: tuple[Hashable, ...] = ()
    """Machines caught lying."""


@dataclass(frozen=True)
class Decoded:
    """What the verification of one step sees, machines named by any sortable key."""

    L: int
    K: int
    used: Mapping[int, Sequence[Hashable]]
    """``{piece: machines its decode used}``."""
    in_hand: Callable[[int], Mapping[int, Hashable]]
    """``piece -> {position: machine}``: its results taken in by the step's end."""
    planned: Callable[[int, int], Hashable | None]
    """``(piece, position) -> machine | None``: the machine the plan gave the position."""
    holders: Callable[[int], Iterable[Hashable]]
    """``piece -> machines``: the live machines storing its rows."""
    seconds: Callable[[int, Hashable], float]
    """``(piece, machine) -> seconds``: a fresh call of the piece's task there."""
    order: Callable[[Hashable], SupportsRichComparison] = str
    """Sort key of a machine (ties among holders)."""


def repair(d: Decoded, T: float, liars: set[Hashable], out: set[Hashable],
           cost: RuntimeCost | None = None) -> LieRepair:
    """The lies' cost of one step ended at ``T`` (module docstring); ``out``: machines that
    cannot be asked (crashed)."""
    bad = [pi for pi, ms in d.used.items() if liars & set(ms)]
    if not bad or not math.isfinite(T):
        return LieRepair(T)
    caught: set[Hashable] = set()
    good: dict[int, set[int]] = {}
    for pi in bad:   # the results in hand at T, each checked
        good[pi] = set()
        for pos, m in d.in_hand(pi).items():
            (caught.add(m) if m in liars else good[pi].add(pos))
    asked: set[_Ask] = set()
    t, calls, rnd = float(T), 0, 0
    while True:
        short = [pi for pi in bad if len(good[pi]) < d.L]
        if not short:
            break
        asks = [a for pi in short for a in _asks(d, pi, good[pi], rnd, out | caught, asked)]
        if not asks and rnd:   # no one left to ask
            return LieRepair(math.inf, len(bad), calls, _sorted(caught, d.order))
        if not asks:   # no planned machine to ask: the holders, next round
            rnd = 1
            continue
        free: dict[Hashable, float] = {}
        for pi, pos, m in asks:   # a machine asked twice computes one call after the other
            free[m] = free.get(m, t) + d.seconds(pi, m)
            (caught.add(m) if m in liars else good[pi].add(pos))
        calls += len(asks)
        t, rnd = max(free.values()), rnd + 1
    if cost is not None:
        t += calls * (cost.call_s + cost.round_trip_s)
    return LieRepair(t, len(bad), calls, _sorted(caught, d.order))


def _asks(d: Decoded, pi: int, good: set[int], rnd: int, out: set[Hashable], asked: set[_Ask]
          ) -> list[_Ask]:
    """``[(piece, position, machine)]`` of one round for piece ``pi`` (module docstring)."""
    got: list[_Ask] = []
    used: set[Hashable] = set()
    pool = sorted(d.holders(pi), key=d.order) if rnd else ()
    for pos in range(d.K):
        if len(got) == d.L - len(good):
            break
        if pos in good:
            continue
        if rnd == 0:
            m = d.planned(pi, pos)
            cands = [] if m is None else [m]
        else:
            cands = sorted(pool, key=lambda m: m in used)   # stable: by order within
        m = next((m for m in cands if m not in out and (pi, pos, m) not in asked), None)
        if m is not None:
            asked.add((pi, pos, m))
            used.add(m)
            got.append((pi, pos, m))
    return got


def _sorted(ms: Iterable[Hashable], order: Callable[[Hashable], SupportsRichComparison]
            ) -> tuple[Hashable, ...]:
    return tuple(sorted(ms, key=order))


def repair_lies(comp: _Compiled, index: Callable[[], _PlacementIndex], finish: np.ndarray,
                T: float, lying: np.ndarray, eff: np.ndarray, ts: float,
                crashed: np.ndarray | None = None, cost: RuntimeCost | None = None
                ) -> LieRepair:
    """The lies' cost of one whole-plan step of ``comp`` (module docstring).  ``finish``: when
    each machine's results arrive (``inf``: never), ``T`` the step's end, ``lying`` and
    ``crashed`` masks and ``eff`` the effective speeds, all aligned with the plan's machines;
    ``index()`` the placement index.  Machines are named by their ids."""
    if not np.any(lying):
        return LieRepair(T)
    n, avail, rows = comp.n, comp.plan.available, comp.piece_idx.tolist()
    rank = {avail[j]: int(comp.rank[j]) for j in range(n)}
    pos_of = comp.pos

    def used(pi: int) -> list[Hashable]:
        own = [j for j in rows[pi] if j < n and math.isfinite(finish[j])]
        own.sort(key=lambda j: (finish[j], int(comp.rank[j])))
        return [avail[j] for j in own[:comp.L]]

    def in_hand(pi: int) -> dict[int, Hashable]:
        return {pos: avail[j] for pos, j in enumerate(rows[pi]) if j < n and finish[j] <= T}

    def planned(pi: int, pos: int) -> Hashable | None:
        j = rows[pi][pos] if pos < len(rows[pi]) else n
        return avail[j] if j < n else None

    def seconds(pi: int, m: Hashable) -> float:
        s: float = comp.task_work[pi] / eff[pos_of[m]] * ts
        return s

    d = Decoded(comp.L, comp.K, {pi: used(pi) for pi in range(len(rows))}, in_hand, planned,
                lambda pi: _holders(comp, index, pi), seconds, rank.__getitem__)
    liars = {avail[j] for j in np.flatnonzero(lying)}
    out = set() if crashed is None else {avail[j] for j in np.flatnonzero(crashed)}
    return repair(d, T, liars, out, cost)


def _holders(comp: _Compiled, index: Callable[[], _PlacementIndex], pi: int
             ) -> list[Hashable]:
    """Ids of the plan's machines storing every row of piece ``pi``."""
    plan = comp.plan
    rows = plan.groups[plan.pieces[pi].group].rows
    spans = index().spans(rows, set(plan.available))
    keep = set(spans[0][2]) if spans else set()
    for _, _, hs in spans[1:]:
        keep &= set(hs)
    return [m for m in keep if m in comp.pos]
