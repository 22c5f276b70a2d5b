"""Laying rows out: cumulative rounding, block merging, and McNaughton's wrap-around rule."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, SupportsInt, cast

import numpy as np
import numpy.typing as npt

from ...schemes.plan import RowBlock


def _cum_round(total: int, fractions: Sequence[float]) -> list[int]:
    """Integer parts summing to ``total``, each within 1 of ``total * fraction``."""
    cum = np.concatenate([[0.0], np.cumsum(fractions)])
    cum = cum / cum[-1] if cum[-1] > 0 else cum
    edges = np.rint(cum * total).astype(np.int64)
    edges[-1] = total
    return cast(list[int], np.diff(edges).tolist())


def _merge_blocks(blocks: list[RowBlock]) -> tuple[RowBlock, ...]:
    out: list[RowBlock] = []
    for b in sorted(blocks, key=lambda b: b.start):
        if b.size <= 0:
            continue
        if out and out[-1].stop == b.start and out[-1].holders == b.holders:
            out[-1] = RowBlock(out[-1].start, b.stop, b.holders)
        else:
            out.append(b)
    return tuple(out)


def _sorted_holders(hs: Iterable[Any]) -> tuple[Any, ...]:
    try:
        return tuple(sorted(hs))
    except TypeError:
        return tuple(sorted(hs, key=repr))


def _flat(holders: Sequence[npt.ArrayLike]) -> npt.NDArray[np.int64]:
    """The atoms' holder indices, one after another (``holders[0]`` first)."""
    return np.concatenate([np.asarray(h, dtype=np.int64) for h in holders])


def _wrap_layout(sizes: npt.ArrayLike, seg_of: npt.ArrayLike, counts: npt.ArrayLike, K: int,
                 extra_cuts: npt.ArrayLike = ()) -> tuple[np.ndarray, np.ndarray]:
    """McNaughton's wrap-around rule, for many segments at once.

    Segment ``i`` (``sizes[i]`` long) sits at ``offsets[i]`` of the concatenation; the entries
    ``e`` with ``seg_of[e] = i`` (consecutive, in segment order) have ``counts[e]``, each at most
    ``sizes[i]`` and together ``K * sizes[i]``.  Laying a segment's counts one after another along
    ``K`` passes over it covers each of its points once per pass, by ``K`` distinct entries (a
    count of at most the segment's size cannot meet itself).  Returns ``(edges, members)``: the
    intervals ``edges[j]:edges[j+1]`` of the concatenation between the cuts (segment starts,
    where each count starts, and ``extra_cuts``) and, per interval, the ``K`` entries covering
    it.  Exact for integer counts; at most ``len(counts) + len(extra_cuts)`` intervals.
    """
    sizes = np.asarray(sizes)
    counts = np.asarray(counts)
    seg_of = np.asarray(seg_of, dtype=np.int64)
    offsets = np.concatenate([np.zeros(1, sizes.dtype), np.cumsum(sizes)])
    nz = np.flatnonzero(counts > 0)
    line = (np.cumsum(counts) - counts)[nz]          # where each count starts on the K-fold line
    seg = seg_of[nz]
    base = K * offsets[seg]
    starts = np.mod(line - base, sizes[seg]) + offsets[seg]
    cuts = np.unique(np.concatenate([offsets[:-1], starts,
                                     np.asarray(extra_cuts, dtype=starts.dtype)]))
    cuts = cuts[cuts < offsets[-1]]
    cseg = np.searchsorted(offsets, cuts, side="right") - 1
    pos0 = K * offsets[cseg] + cuts - offsets[cseg]
    members = np.empty((cuts.size, K), dtype=np.int64)
    for p in range(K):
        members[:, p] = nz[np.searchsorted(line, pos0 + p * sizes[cseg], side="right") - 1]
    return np.append(cuts, offsets[-1]), members


def _wrap_spans(size: int, counts: Iterable[SupportsInt]) -> list[tuple[int, int, int]]:
    """The rows ``(j, lo, hi)`` each count gets under :func:`_wrap_layout` (split at the wrap)."""
    out, pos = [], 0
    for j, n in enumerate(int(x) for x in counts):
        while n > 0:
            take = min(n, size - pos)
            out.append((j, pos, pos + take))
            n -= take
            pos = (pos + take) % size
    return out
