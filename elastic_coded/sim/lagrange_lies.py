"""What a lie costs a USCTEC-family whole-plan step: detection after the decode, the repair
calls, the liars caught.  Pure: numpy.

The runtime (``runtime/verify_lagrange.py``, ``runtime/verify_repair.py``) decodes each piece
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

The results a piece decoded from are its machines' first ``L`` by finish time: where a crash
re-dispatched its tasks or a backup copy ran (:mod:`.executor`) the originals stand in for
them.  With a :class:`~elastic_coded.sim.cost.RuntimeCost` each repair call also costs the
driver ``call_s + round_trip_s``, one after another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["LieRepair", "repair_lies"]


@dataclass(frozen=True)
class LieRepair:
    """What the lies of one whole-plan step cost."""

    time: float
    """When the repaired product is in hand (the step's end without lies used: ``T``)."""
    repairs: int = 0
    """Pieces decoded from a liar's result, repaired."""
    calls: int = 0
    """Repair calls made."""
    caught: tuple = ()
    """Machines caught lying (by id)."""


def _used(comp, finish: np.ndarray, pi: int) -> list:
    """The plan positions of the machines piece ``pi`` decoded from: its first ``L`` by finish
    (then plan rank)."""
    n = comp.n
    own = [int(j) for j in comp.piece_idx[pi] if j < n and math.isfinite(finish[j])]
    own.sort(key=lambda j: (finish[j], int(comp.rank[j])))
    return own[:comp.L]


def repair_lies(comp, index, finish: np.ndarray, T: float, lying: np.ndarray, eff: np.ndarray,
                ts: float, crashed: np.ndarray | None = None, cost=None) -> LieRepair:
    """The lies' cost of one whole-plan step of ``comp`` (module docstring).  ``finish``: when
    each machine's results arrive (``inf``: never), ``T`` the step's end, ``lying`` and
    ``crashed`` masks and ``eff`` the effective speeds, all aligned with the plan's machines;
    ``index()`` the placement index."""
    liars = set(np.flatnonzero(lying).tolist())
    if not liars or not math.isfinite(T):
        return LieRepair(T)
    bad = [pi for pi in range(len(comp.plan.pieces)) if liars & set(_used(comp, finish, pi))]
    if not bad:
        return LieRepair(T)
    n, L = comp.n, comp.L
    dead = set() if crashed is None else set(np.flatnonzero(crashed).tolist())
    caught: set = set()
    good: dict = {}
    for pi in bad:   # the results in hand at T, each checked
        good[pi] = set()
        for pos, j in enumerate(comp.piece_idx[pi].tolist()):
            if j < n and finish[j] <= T:
                (caught.add(j) if j in liars else good[pi].add(pos))
    asked: set = set()
    holders: dict = {}
    t, calls, rnd = float(T), 0, 0
    while True:
        short = [pi for pi in bad if len(good[pi]) < L]
        if not short:
            break
        asks = [a for pi in short for a in _asks(comp, index, pi, good[pi], rnd, dead | caught,
                                                 asked, holders)]
        if not asks and rnd:   # no one left to ask
            return LieRepair(math.inf, len(bad), calls, _ids(comp, caught))
        if not asks:   # no planned machine to ask: the holders, next round
            rnd = 1
            continue
        free: dict = {}
        for pi, pos, j in asks:   # a machine asked twice computes one call after the other
            free[j] = free.get(j, t) + comp.task_work[pi] / eff[j] * ts
            (caught.add(j) if j in liars else good[pi].add(pos))
        back = max(free.values())
        calls += len(asks)
        t, rnd = back, rnd + 1
    if cost is not None:
        t += calls * (cost.call_s + cost.round_trip_s)
    return LieRepair(t, len(bad), calls, _ids(comp, caught))


def _asks(comp, index, pi: int, good: set, rnd: int, out: set, asked: set,
          holders: dict) -> list:
    """``[(piece, position, machine)]`` of one round for piece ``pi`` (module docstring)."""
    n, L = comp.n, comp.L
    row = comp.piece_idx[pi].tolist()
    if rnd and pi not in holders:
        holders[pi] = _holders(comp, index, pi)
    got, used = [], set()
    for pos in range(comp.K):
        if len(got) == L - len(good):
            break
        if pos in good:
            continue
        if rnd == 0:
            cands = [row[pos]] if pos < len(row) and row[pos] < n else []
        else:
            cands = sorted(holders[pi], key=lambda j: (j in used, int(comp.rank[j])))
        j = next((j for j in cands if j not in out and (pi, pos, j) not in asked), None)
        if j is not None:
            asked.add((pi, pos, j))
            used.add(j)
            got.append((pi, pos, j))
    return got


def _holders(comp, index, pi: int) -> list:
    """Plan positions of the machines storing every row of piece ``pi``."""
    plan = comp.plan
    rows = plan.groups[plan.pieces[pi].group].rows
    spans = index().spans(rows, set(plan.available))
    keep = set(spans[0][2]) if spans else set()
    for _, _, hs in spans[1:]:
        keep &= set(hs)
    return [comp.pos[m] for m in keep if m in comp.pos]


def _ids(comp, positions) -> tuple:
    avail = comp.plan.available
    return tuple(sorted((avail[j] for j in positions), key=str))
