"""The coded rules' expected times (:class:`~.queues.CodedQueue`), as functions.  Pure: no Ray."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .queue_base import _Running

__all__ = ["pays_no_sooner", "outrun_rate"]


def _call_ends(rs: Sequence[_Running], products: Mapping[object, int], rate: float, now: float,
               lag: float = 0.0) -> tuple[float, dict[object, float]]:
    """``(when the machine is free, {call key: expected end})`` for a machine's running units
    ``rs`` (its calls in order, each call's units together), computing ``rate`` products a
    second, each call taking ``lag`` seconds more (:meth:`.queues.CodedQueue._ends`)."""
    ends, t, i, n = {}, now, 0, len(rs)
    while i < n:
        first, j, work = rs[i], i, 0
        key = first.key
        while j < n and rs[j].key == key:
            work += products[rs[j].unit]
            j += 1
        start = first.start if first.start is not None else t
        est = start + work / rate + lag
        if est < now:
            est = now + (now - start)
        if est > t:
            t = est
        ends[key] = t
        i = j
    return t, ends


def pays_no_sooner(times: Sequence[float], k: int, w: float, now: float, margin: float,
                   mine: float | None = None) -> float:
    """A time before which a coded backup taking ``w`` seconds cannot pay (the rule of
    :meth:`.queues.CodedQueue._backup`: its gain ``T_k - max(T_{k-1}, mine)`` above
    ``margin`` of ``T_k - now``, ``mine`` when the machine would finish the unit, at ``now``
    by default ``now + w``) while the expected finishes ``times`` (sorted) each grow at most
    twice as fast as the clock and the machine's own calls' expected ends do not shrink (so
    ``mine`` at ``now + d`` is at least ``mine`` and at least ``now + d + w``).  With ``T`` up by
    at most ``2 d`` after ``d`` seconds, the gain above the margin needs
    ``d > w / (1 - margin) - (T_k - now)`` (from ``mine >= now + d + w``),
    ``d > (margin (T_k - now) - (T_k - mine)) / (2 + margin)`` (from ``mine`` not shrinking)
    and, for ``k >= 2``, ``d > (T_{k-1} - (1 - margin) T_k - margin now) / (2 - margin)``
    (from ``T_k - T_{k-1} > margin (T_k - now')``).  A hair early, so rounding never makes it
    late."""
    if not 0 <= margin < 1:
        return now
    tk = times[k - 1]
    mine = now + w if mine is None else mine
    d = max(w / (1 - margin) - (tk - now), (margin * (tk - now) - (tk - mine)) / (2 + margin))
    if k >= 2:
        d = max(d, (times[k - 2] - (1 - margin) * tk - margin * now) / (2 - margin))
    return now + max(0.0, d * (1 - 1e-9) - 1e-12)


def _kth_with(times: Sequence[float], k: int, x: float) -> float:
    """The ``k``-th smallest (1-based) of ``times`` (sorted, at least ``k`` long) and ``x``."""
    if x >= times[k - 1]:
        return times[k - 1]
    return x if k == 1 else max(times[k - 2], x)


def outrun_rate(rs: Sequence[_Running], key: object, products: Mapping[object, int],
                rate: float, now: float, lag: float = 0.0) -> float | None:
    """The rate of a machine whose call ``key`` is cancelled at ``now`` while it computes past
    its expected end: the call's work over the time it ran, less ``lag`` (it did not finish in
    that time), when below ``rate``; ``None`` for a call not started (``rs``: the machine's
    running units, its calls in order) or cancelled in time, which says nothing of the speed."""
    if not rs or rs[0].key != key or rs[0].start is None:
        return None
    work = sum(products[r.unit] for r in rs if r.key == key)
    ran = now - rs[0].start - lag
    return work / ran if ran > 0 and work / ran < rate else None
