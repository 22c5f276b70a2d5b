"""The Shuffle of the unified coding framework (MATH.md §2, shuffle): who reduces what, the
coded-multicast plan for a set of fastest servers, its check, and the packets on the wire."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError, InternalError
from ._lanes import LaneCode, complete, select
from ._params import _check_int, _check_n_divisible
from ._storage import StorageDesign, _segment_multiple, rows_multiple
from ._theory import LoadBreakdown, load_breakdown


@dataclass(frozen=True)
class Segment:
    """Values meant for one receiver: ``c_rows[t] x_outputs[t]`` for each ``t``."""

    receiver: int
    rows: tuple[int, ...]
    outputs: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class Transmission:
    """One packet: ``sender`` sends the elementwise sum (XOR in GF(2^T)) of its ``segments``
    to ``receivers``; each receiver recovers its own segment by subtracting the others, which it
    has computed itself (MATH.md §2, shuffle).

    Attributes: ``sender``; ``receivers``; ``segments`` (one per receiver, equal lengths);
    ``round``: the multicast round ``j`` (subsets of size ``j+1``), ``0`` for unicast.
    """

    sender: int
    receivers: tuple[int, ...]
    segments: tuple[Segment, ...]
    round: int

    @property
    def size(self) -> int:
        """Values on the wire (a multicast counted once)."""
        return len(self.segments[0]) if self.segments else 0

    def segment_for(self, receiver: int) -> Segment:
        for seg in self.segments:
            if seg.receiver == receiver:
                return seg
        raise ArgumentError(f"receiver: {receiver} is not a receiver of this transmission")


@dataclass(frozen=True)
class ShufflePlan:
    """The Shuffle for one set ``Q`` of fastest servers (MATH.md §2).

    Attributes:
        fastest: ``Q``, increasing; ``assignment[t]``: outputs reduced by ``fastest[t]``.
        m, N: sizes; ``theory``: the :class:`LoadBreakdown` the plan realises.
        transmissions: the packets, greedy multicast rounds first (largest ``j`` first), then
            the finishing round (unicast or one more multicast round).
        values_sent: total values on the wire; ``load``: ``values_sent / m``.
        decode_rows: over the reals (the lane code), the ``m`` coded rows each server of ``Q``
            decodes from (aligned with ``fastest``: its own rows first, in order, then the rows
            received, increasing), chosen with the unicast rows (:mod:`._lanes`); empty over a
            finite field, whose Reduce takes its first ``m`` rows (:func:`reduce_groups`).
    """

    fastest: tuple[int, ...]
    assignment: tuple[tuple[int, ...], ...]
    m: int
    N: int
    theory: LoadBreakdown
    transmissions: tuple[Transmission, ...]
    values_sent: int
    load: Fraction
    decode_rows: tuple[tuple[int, ...], ...] = ()

    def rows_for(self, k: int) -> tuple[int, ...] | None:
        """The coded rows server ``k`` decodes from when the plan chose them, else ``None``."""
        if not self.decode_rows or k not in self.fastest:
            return None
        return self.decode_rows[self.fastest.index(k)]

    def outputs_of(self, k: int) -> tuple[int, ...]:
        """The outputs server ``k`` reduces (empty if ``k`` is not among the fastest)."""
        try:
            return self.assignment[self.fastest.index(k)]
        except ValueError:
            return ()


def reduce_assignment(fastest: Iterable[int], N: int) -> tuple[tuple[int, ...], ...]:
    """Split the ``N`` outputs evenly over the fastest servers: the ``t``-th smallest server of
    ``Q`` reduces outputs ``t N/q .. (t+1) N/q - 1`` (MATH.md §2, Reduce)."""
    Q = sorted(int(k) for k in fastest)
    q = len(Q)
    if q == 0:
        raise ArgumentError("fastest: must name at least one server")
    _check_n_divisible(N, q)
    per = N // q
    return tuple(tuple(range(t * per, (t + 1) * per)) for t in range(q))


def _check_fastest(design: StorageDesign, fastest: Iterable[int]) -> tuple[int, ...]:
    try:
        Q = tuple(sorted(int(k) for k in fastest))
    except TypeError:
        raise ArgumentTypeError(f"fastest: must be a collection of server ids, got "
                                f"{fastest!r}") from None
    if len(set(Q)) != len(Q) or len(Q) != design.q or any(not 0 <= k < design.K for k in Q):
        raise ArgumentError(f"fastest: {fastest!r} must be q = {design.q} distinct server ids in "
                            f"0..K-1 = 0..{design.K - 1}")
    return Q


def shuffle_plan(design: StorageDesign, fastest: Iterable[int], N: int) -> ShufflePlan:
    """The Shuffle of MATH.md §2 for the fastest servers ``Q``: greedy coded multicast over
    subsets of size ``j+1``, ``j = r .. s_q``, then the cheaper of unicast and one more multicast
    round.  Its ``values_sent`` equals ``L(q) m`` exactly.

    For a subset ``S`` of ``Q`` of size ``j+1`` and ``k`` in ``S``, ``V^k_{S-k}`` are the values
    ``k`` needs (its outputs times the rows of batches ``T`` with ``T ∩ Q = S - k``); each is
    split into ``j`` equal segments, one per other member ``i``, and ``i`` sends the sum of the
    segments associated with it.
    """
    Q = _check_fastest(design, fastest)
    N = _check_int("N", N, low=1)
    _check_n_divisible(N, design.q)
    th = load_breakdown(design.K, design.mu, N, design.q)
    K, q, m, beta = design.K, design.q, design.m, design.batch_size
    need_beta = _segment_multiple(th)
    if beta % need_beta:
        raise ArgumentError(
               f"m: {m} does not fit the shuffle segments: each multicast round j splits sets of "
               f"(N/q)*C(K-q, r-j)*batch values into j equal segments, so the batch size "
               f"{beta} must be a multiple of {need_beta}; m must be a multiple of "
               f"rows_multiple(K, mu, N, q) = {rows_multiple(K, design.mu, N, q)}")
    assignment = reduce_assignment(Q, N)
    W = dict(zip(Q, assignment))
    rows_by_S = _rows_by_holders(design, Q)
    transmissions = _multicast_rounds(th, Q, W, rows_by_S)
    if th.finish == "unicast":
        held = _received(transmissions, Q) if design.lanes is not None else None
        transmissions.extend(_unicast_round(design, th, Q, W, rows_by_S, held))
    values_sent = sum(t.size for t in transmissions)
    decode_rows: tuple[tuple[int, ...], ...] = ()
    if design.lanes is not None:
        got = _received(transmissions, Q)
        decode_rows = tuple(_decode_rows(design, k, got[k]) for k in Q)
    plan = ShufflePlan(fastest=Q, assignment=assignment, m=m, N=N, theory=th,
                       transmissions=tuple(transmissions), values_sent=values_sent,
                       load=Fraction(values_sent, m), decode_rows=decode_rows)
    if plan.load != th.L:  # pragma: no cover - an internal invariant
        raise InternalError(f"shuffle plan load {plan.load} != theory {th.L}")
    return plan


def _rows_by_holders(design: StorageDesign, Q: tuple[int, ...]
                     ) -> dict[tuple[int, ...], list[int]]:
    """The coded rows of the batches, grouped by which servers of ``Q`` hold them."""
    Qset = set(Q)
    rows_by_S: dict[tuple[int, ...], list[int]] = {}
    for b, T in enumerate(design.batches):
        S = tuple(k for k in T if k in Qset)
        rows_by_S.setdefault(S, []).extend(design.batch_rows(b))
    return rows_by_S


def _segment(receiver: int, vals: Sequence[tuple[int, int]]) -> Segment:
    """The segment carrying the values ``(row, output)`` in ``vals`` to ``receiver``."""
    return Segment(receiver=receiver, rows=tuple(v[0] for v in vals),
                   outputs=tuple(v[1] for v in vals))


def _multicast_rounds(th: LoadBreakdown, Q: tuple[int, ...], W: dict[int, tuple[int, ...]],
                      rows_by_S: dict[tuple[int, ...], list[int]]) -> list[Transmission]:
    """The greedy multicast rounds ``j`` of :func:`shuffle_plan` (largest ``j`` first): in each
    subset ``S`` of ``Q`` of size ``j+1`` whose members all need something, every member sends
    the sum of one ``1/j``-th of what each other member needs."""
    transmissions: list[Transmission] = []
    for j in th.rounds:
        if j < 1:
            continue
        for S in itertools.combinations(Q, j + 1):
            pieces: dict[int, dict[int, list[tuple[int, int]]]] = {}
            for k in S:
                others = tuple(i for i in S if i != k)
                vals = [(row, o) for o in W[k] for row in rows_by_S.get(others, [])]
                if not vals:
                    break
                size = len(vals) // j
                pieces[k] = {i: vals[t * size:(t + 1) * size] for t, i in enumerate(others)}
            else:
                for i in S:
                    segs = tuple(_segment(k, pieces[k][i]) for k in S if k != i)
                    transmissions.append(Transmission(
                        sender=i, receivers=tuple(k for k in S if k != i), segments=segs,
                        round=j))
    return transmissions


def _received(transmissions: Sequence[Transmission], Q: tuple[int, ...]
              ) -> dict[int, set[int]]:
    """The coded rows each server of ``Q`` receives (for any of its outputs: each of them
    receives the same rows)."""
    got: dict[int, set[int]] = {k: set() for k in Q}
    for t in transmissions:
        for seg in t.segments:
            got[seg.receiver].update(seg.rows)
    return got


def _decode_rows(design: StorageDesign, k: int, received: set[int]) -> tuple[int, ...]:
    """Server ``k``'s ``m`` decode rows (real lane code): its own, then received rows that
    :func:`~._lanes.complete` picks, increasing."""
    local = tuple(design.server_rows[k])
    rows = complete(cast(LaneCode, design.lanes), set(local) | received, keep=local)  # real
    if rows is None:  # pragma: no cover - the plan delivers m lane-balanced rows
        raise InternalError(f"server {k}: the rows received do not decode")
    own = set(local)
    return local + tuple(sorted(r for r in rows if r not in own))


def _lane_pick(design: StorageDesign, held: set[int], mine: list[tuple[tuple[int, ...], int]]
               ) -> list[tuple[tuple[int, ...], int]]:
    """The unicast rows for one receiver (real lane code): per class of lanes, the candidate
    batches :func:`~._lanes.select` completes the batches ``held`` with (own and multicast
    rows), as ``(S, row)`` in the candidates' order."""
    lanes, beta = cast(LaneCode, design.lanes), design.batch_size   # real: a lane code
    order: dict[int, tuple[int, ...]] = {}
    for S, row in mine:
        order.setdefault(row // beta, S)
    fixed = sorted({row // beta for row in held})
    cands = list(order)
    picked: list[tuple[int, int, tuple[int, ...], int]] = []
    for d, cs in lanes.classes().items():
        for b in select(lanes.codes[d], fixed, cands, d - len(fixed)):
            picked.extend((cands.index(b), int(c), order[b], b * beta + int(c)) for c in cs)
    return [(S, row) for _, _, S, row in sorted(picked)]


def _unicast_round(design: StorageDesign, th: LoadBreakdown, Q: tuple[int, ...],
                   W: dict[int, tuple[int, ...]], rows_by_S: dict[tuple[int, ...], list[int]],
                   held: dict[int, set[int]] | None = None) -> list[Transmission]:
    """Finish by unicast: each server gets ``residual * m`` more values per output, taken from
    batches held by fewer than ``s_q`` servers of ``Q`` (not yet delivered), each sent by the
    least-loaded server holding it.  Over a finite field the first such rows; over the reals
    (``held``: the rows each server has after the multicast rounds) the rows that make its
    decode lane-balanced and well conditioned (:func:`_lane_pick`)."""
    need = int(th.residual * design.m)
    sent: dict[int, int] = {i: 0 for i in Q}
    packets: dict[tuple[int, int], list[tuple[int, int]]] = {}
    cands_by_S = sorted(((S, rows) for S, rows in rows_by_S.items() if 1 <= len(S) < th.s_q),
                        key=lambda item: (-len(item[0]), item[0]))
    for k in Q:
        mine = [(S, row) for S, rows in cands_by_S if k not in S for row in rows]
        if len(mine) < need:  # pragma: no cover - excluded by the MDS counting argument
            raise InternalError(f"server {k}: {len(mine)} candidate rows < {need} needed")
        if held is None:
            mine = mine[:need]
        else:
            mine = _lane_pick(design, held[k] | set(design.server_rows[k]), mine)
            if len(mine) != need:  # pragma: no cover - the counts agree by construction
                raise InternalError(f"server {k}: {len(mine)} lane rows != {need} needed")
        for o in W[k]:
            for S, row in mine:
                sender = min(S, key=lambda i: (sent[i], i))
                sent[sender] += 1
                packets.setdefault((sender, k), []).append((row, o))
    return [Transmission(sender=s, receivers=(k,), segments=(_segment(k, vals),), round=0)
            for (s, k), vals in sorted(packets.items())]


def check_shuffle_plan(design: StorageDesign, plan: ShufflePlan) -> None:
    """Check a plan before running it: every sender has computed what it sends, every receiver
    has computed the segments it must cancel, and after the shuffle every server holds ``m``
    distinct coded values for each output it reduces.  Raises ``ValueError`` otherwise."""
    stored = [set(rows) for rows in design.server_rows]
    held: dict[tuple[int, int], set[int]] = {
        (k, o): set(stored[k]) for k in plan.fastest for o in plan.outputs_of(k)}
    for n, t in enumerate(plan.transmissions):
        if t.sender not in plan.fastest or any(k not in plan.fastest for k in t.receivers):
            raise ArgumentError(f"plan: transmission {n} involves a server outside Q")
        if len({len(s) for s in t.segments}) > 1:
            raise ArgumentError(f"plan: transmission {n} has segments of unequal length")
        if sorted(s.receiver for s in t.segments) != sorted(t.receivers):
            raise ArgumentError(f"plan: transmission {n} needs one segment per receiver")
        for s in t.segments:
            if not set(s.rows) <= stored[t.sender]:
                raise ArgumentError(f"plan: transmission {n}: sender {t.sender} lacks a row")
            for k in t.receivers:
                if k != s.receiver and not set(s.rows) <= stored[k]:
                    raise ArgumentError(f"plan: transmission {n}: receiver {k} cannot cancel the "
                                        f"segment for {s.receiver}")
            for row, o in zip(s.rows, s.outputs):
                if (s.receiver, o) not in held:
                    raise ArgumentError(f"plan: transmission {n}: server {s.receiver} does not "
                                        f"reduce output {o}")
                held[(s.receiver, o)].add(row)
    for (k, o), rows in held.items():
        if len(rows) < design.m:
            raise ArgumentError(f"plan: server {k} ends with {len(rows)} < m = {design.m} coded "
                                f"values for output {o}")
    if design.lanes is not None:
        _check_decode_rows(design, plan, held)


def _check_decode_rows(design: StorageDesign, plan: ShufflePlan,
                       held: dict[tuple[int, int], set[int]]) -> None:
    """The real lane code's decode rows: one set per server of ``Q``, its own rows first, held
    for every output it reduces, lane-balanced."""
    if len(plan.decode_rows) != len(plan.fastest):
        raise ArgumentError(f"plan: decode_rows names {len(plan.decode_rows)} row sets for "
                            f"q = {len(plan.fastest)} servers")
    for k, rows in zip(plan.fastest, plan.decode_rows):
        local = tuple(design.server_rows[k])
        if tuple(rows[:len(local)]) != local:
            raise ArgumentError(f"plan: server {k}'s decode rows must start with its own rows")
        for o in plan.outputs_of(k):
            if not set(rows) <= held[(k, o)]:
                raise ArgumentError(f"plan: server {k} decodes output {o} from rows it lacks")
        try:
            cast(LaneCode, design.lanes).groups(rows)   # called for a real lane code
        except ValueError as exc:
            raise ArgumentError(f"plan: server {k}'s decode rows: {exc}") from None


def encode_packet(design: StorageDesign, t: Transmission, sender_map: np.ndarray) -> np.ndarray:
    """The packet ``t.sender`` sends: the sum of its segments' values, read from its Map result
    (:func:`map_compute`)."""
    fld = design.field
    packet = None
    for seg in t.segments:
        vals = sender_map[design.local_index(t.sender, seg.rows), list(seg.outputs)]
        packet = vals if packet is None else fld.add(packet, vals)
    return packet if packet is not None else fld.zeros(0)


def decode_packet(design: StorageDesign, t: Transmission, receiver: int, packet: np.ndarray,
                  receiver_map: np.ndarray) -> np.ndarray:
    """Receiver's side: cancel the segments it computed itself and return the values of its own
    segment (in the segment's order)."""
    fld = design.field
    out = np.asarray(packet)
    for seg in t.segments:
        if seg.receiver != receiver:
            known = receiver_map[design.local_index(receiver, seg.rows), list(seg.outputs)]
            out = fld.sub(out, known)
    return out


def receive_packet(design: StorageDesign, t: Transmission, receiver: int, packet: np.ndarray,
                   receiver_map: np.ndarray, got: dict[int, dict[int, object]]) -> int:
    """Receiver's side of one transmission, filed for the Reduce: decode the packet
    (:func:`decode_packet`) and store each recovered value ``c_row x_o`` as ``got[o][row]``.
    Returns the number of values recovered (the length of the receiver's segment)."""
    seg = t.segment_for(receiver)
    vals = decode_packet(design, t, receiver, packet, receiver_map)
    if len(vals) != len(seg):
        raise ArgumentError(f"packet: transmission from server {t.sender} carries {len(vals)} "
                            f"values, the plan says {len(seg)}")
    for row, o, v in zip(seg.rows, seg.outputs, vals):
        got.setdefault(o, {})[row] = v
    return len(seg)
