"""Elasticity (MATH.md §1): storage repair after machines leave, and storage for joiners."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Hashable, Iterable
from typing import cast

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from ...errors import ArgumentError, BudgetError
from ...schemes.plan import Placement, RowBlock
from ._checks import _check_enough, check_code
from ._layout import _merge_blocks, _sorted_holders, _wrap_layout, _wrap_spans

__all__ = ["repair_placement", "extend_placement"]


def repair_placement(placement: Placement, present: Iterable[Hashable], L: int, S: int,
                     budgets: dict[Hashable, float] | None = None
                     ) -> tuple[Placement, list[tuple[int, int, Hashable]]]:
    """Drop machines not ``present`` and give every row at least ``L+S`` present holders, adding
    copies on present machines within their budgets (most spare room first).  When that greedy
    gets stuck, every block is re-placed at once by :func:`_rebalance` (fewest rows moved).

    Returns the new placement and the copies made as ``(start, stop, machine)``.
    ``budgets`` maps present machines missing from the placement to their budgets (joiners).
    """
    L, S = check_code(L, S)
    K = L + S
    present = tuple(present)
    _check_enough(len(present), K, "present")
    q = placement.num_rows
    e = {m: b for m, b in zip(placement.machines, placement.budgets)}
    e.update(budgets or {})
    missing = [m for m in present if m not in e]
    if missing:
        raise ArgumentError(f"budgets: no storage budget for machines {missing}")
    pset = set(present)
    cap = {m: math.floor(e[m] * q + 1e-9) for m in present}
    blocks = [RowBlock(b.start, b.stop, _sorted_holders(h for h in b.holders if h in pset))
              for b in placement.blocks]
    spare = _Spare(present, cap, blocks)
    moved: list[tuple[int, int, Hashable]] = []
    queue = deque(sorted(blocks, key=lambda b: b.start))
    done: list[RowBlock] = []
    while queue:
        b = queue.popleft()
        if len(b.holders) >= K:
            done.append(b)
            continue
        m = spare.most(set(b.holders))
        if m is None:
            # the greedy is stuck: re-place every block at once, moving as few rows as possible
            return _rebalance(placement, blocks, present, cap, K, e)
        take = spare.take(m, b.size)
        moved.append((b.start, b.start + take, m))
        if take < b.size:
            queue.appendleft(RowBlock(b.start + take, b.stop, b.holders))
        queue.appendleft(RowBlock(b.start, b.start + take, _sorted_holders(b.holders + (m,))))
    new = Placement(q, present, tuple(float(e[m]) for m in present), _merge_blocks(done))
    return new, moved


class _Spare:
    """Spare storage rows per present machine, and the machine with the most (ties: earliest in
    ``present``) outside a given set, by a heap with lazy updates."""

    def __init__(self, present: tuple[Hashable, ...], cap: dict[Hashable, int],
                 blocks: list[RowBlock]):
        self.left = dict(cap)
        for b in blocks:
            for h in b.holders:
                self.left[h] -= b.size
        self.rank = {m: i for i, m in enumerate(present)}
        self.heap = [(-self.left[m], self.rank[m], m) for m in present if self.left[m] > 0]
        heapq.heapify(self.heap)

    def most(self, exclude: set[Hashable]) -> Hashable | None:
        """The machine outside ``exclude`` with the most spare rows, or ``None``."""
        skipped, found = [], None
        while self.heap:
            entry = heapq.heappop(self.heap)
            neg, _, m = entry
            if -neg != self.left[m]:
                continue  # stale
            if m in exclude:
                skipped.append(entry)
                continue
            found = entry
            break
        for entry in skipped + ([found] if found else []):
            heapq.heappush(self.heap, entry)
        return None if found is None else found[2]

    def take(self, m: Hashable, rows: int) -> int:
        """Give up to ``rows`` of ``m``'s spare rows; returns how many."""
        n = min(self.left[m], rows)
        self.left[m] -= n
        if self.left[m] > 0:
            heapq.heappush(self.heap, (-self.left[m], self.rank[m], m))
        return n


def _transport(blocks: list[RowBlock], present: tuple[Hashable, ...], cap: dict[Hashable, int],
               K: int) -> np.ndarray:
    """Row counts ``z[b, m]`` of the re-placement (see :func:`_rebalance`)."""
    nb, nm = len(blocks), len(present)
    cost = np.array([[0.0 if m in b.holders else 1.0 for m in present] for b in blocks]).ravel()
    rows_i = np.repeat(np.arange(nb), nm)
    cols_i = np.arange(nb * nm)
    A_eq = sparse.csr_matrix((np.ones(nb * nm), (rows_i, cols_i)), shape=(nb, nb * nm))
    A_ub = sparse.csr_matrix((np.ones(nb * nm), (np.tile(np.arange(nm), nb), cols_i)),
                             shape=(nm, nb * nm))
    sizes = np.array([b.size for b in blocks], dtype=float)
    res = linprog(cost, A_ub=A_ub, b_ub=np.array([cap[m] for m in present], dtype=float),
                  A_eq=A_eq, b_eq=K * sizes, bounds=np.stack([np.zeros(nb * nm),
                                                              np.repeat(sizes, nm)], axis=1),
                  method="highs-ds")
    if res.status != 0:
        raise BudgetError(
            f"budgets: the machines present ({list(present)}) cannot hold every row L+S = {K} "
            f"times within their storage budgets")
    return cast(np.ndarray, np.rint(res.x).astype(np.int64).reshape(nb, nm))


def _rebalance(placement: Placement, blocks: list[RowBlock], present: tuple[Hashable, ...],
               cap: dict[Hashable, int], K: int, e: dict[Hashable, float]
               ) -> tuple[Placement, list[tuple[int, int, Hashable]]]:
    """Re-place every block on exactly ``K`` present machines within ``cap`` rows each, moving as
    few rows as possible.

    A transportation LP over integer row counts ``z[b, m]`` (``sum_m z = K |b|``,
    ``sum_b z <= cap[m]``, ``0 <= z <= |b|``, cost 1 per row on a machine that lacks it); its
    constraint matrix is totally unimodular, so the optimum is integral.  Each block's counts are
    then laid out by McNaughton's wrap-around rule (machines holding the block first), so every
    row gets exactly ``K`` distinct machines.
    """
    z = _transport(blocks, present, cap, K)
    nm = len(present)
    # holders of the block first, so they keep the rows they have
    order = [sorted(range(nm), key=lambda j: (present[j] not in b.holders, j)) for b in blocks]
    counts = np.concatenate([z[bi, o] for bi, o in enumerate(order)])
    who = np.concatenate(order)
    edges, members = _wrap_layout([b.size for b in blocks], np.repeat(np.arange(len(blocks)), nm),
                                  counts, K, [])
    starts = np.concatenate([[0], np.cumsum([b.size for b in blocks])])
    bi = np.searchsorted(starts, edges[:-1], side="right") - 1
    out = [RowBlock(blocks[i].start + lo - starts[i], blocks[i].start + hi - starts[i],
                    _sorted_holders(present[j] for j in who[U]))
           for i, lo, hi, U in zip(bi.tolist(), edges[:-1].tolist(), edges[1:].tolist(), members)]
    moved: list[tuple[int, int, Hashable]] = []
    for i, b in enumerate(blocks):
        for j, lo, hi in _wrap_spans(b.size, z[i, order[i]]):
            if present[order[i][j]] not in b.holders:
                moved.append((b.start + lo, b.start + hi, present[order[i][j]]))
    new = Placement(placement.num_rows, present, tuple(float(e[m]) for m in present),
                    _merge_blocks(out))
    return new, moved


def extend_placement(placement: Placement, machine: Hashable, budget: float
                     ) -> tuple[Placement, list[tuple[int, int, Hashable]]]:
    """Give a joining ``machine`` storage up to its ``budget``: copies of the least-replicated
    blocks first.  Returns the new placement and the copies made."""
    if machine in placement.machines:
        raise ArgumentError(f"machine: {machine!r} is already in the placement")
    if not (0 <= budget <= 1):
        raise ArgumentError(f"budget: storage budget must lie in [0, 1], got {budget!r}")
    q = placement.num_rows
    spare = math.floor(budget * q + 1e-9)
    blocks = list(placement.blocks)
    order = sorted(range(len(blocks)), key=lambda i: (len(blocks[i].holders), i))
    moved = []
    new_blocks = list(blocks)
    for i in order:
        if spare <= 0:
            break
        b = blocks[i]
        take = min(spare, b.size)
        spare -= take
        moved.append((b.start, b.start + take, machine))
        new_blocks[i] = None
        new_blocks.append(RowBlock(b.start, b.start + take,
                                   _sorted_holders(b.holders + (machine,))))
        if take < b.size:
            new_blocks.append(RowBlock(b.start + take, b.stop, b.holders))
    pl = Placement(q, placement.machines + (machine,), placement.budgets + (float(budget),),
                   _merge_blocks([b for b in new_blocks if b is not None]))
    return pl, moved
