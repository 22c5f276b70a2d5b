"""The fractional per-step optimum with storage constraints (MATH.md §1): atoms and the LP."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import cast

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from ...errors import ArgumentError
from ...schemes.plan import Placement, PlanError, RowBlock
from ._layout import _flat


def _present_atoms(placement: Placement, avail_index: dict[Hashable, int], K: int
                   ) -> tuple[list[list[int]], np.ndarray, list[list[RowBlock]]]:
    """Atoms (MATH.md §1): the rows held by exactly the same *available* machines.  Blocks with
    the same available holders form one atom, however scattered (churn fragments blocks), so the
    LP has one row per atom.  Returns ``(holders, weights, blocks)`` per atom: holder indices
    into ``avail_index``, the atom's fraction of the rows, and its blocks."""
    atoms: dict[tuple[int, ...], list[RowBlock]] = {}
    for b in placement.blocks:
        h = tuple(sorted(avail_index[m] for m in b.holders if m in avail_index))
        if len(h) < K:
            raise ArgumentError(
                   f"available: rows {b.start}:{b.stop} have {len(h)} available holders "
                   f"({[m for m in b.holders if m in avail_index]}), fewer than L+S = {K}; repair "
                   f"the placement (repair_placement) before planning")
        atoms.setdefault(h, []).append(b)
    holders = [list(h) for h in atoms]
    blocks = list(atoms.values())
    weights = np.array([sum(b.size for b in bs) / placement.num_rows for bs in blocks])
    return holders, weights, blocks


def _step_lp(blocks_holders: Sequence[Sequence[int]], w: np.ndarray, s: np.ndarray, K: int
             ) -> tuple[float, list[np.ndarray]]:
    """MATH.md §1, with storage constraints: minimise ``c`` s.t. for every atom ``a``
    ``sum_{n in H_a} x[a,n] = K w_a``, ``0 <= x[a,n] <= w_a``, ``sum_a x[a,n] <= c s[n]``.

    An atom with exactly ``K`` holders is *forced* (``x[a,n] = w_a``); only the others enter the
    LP, against the forced loads, so a placement whose atoms all have ``K`` holders (cyclic, all
    present) needs no LP at all.  ``blocks_holders[a]`` lists machine indices (into ``s``).
    Returns ``(c, x)`` with ``x`` a list of arrays aligned with ``blocks_holders``, each clipped
    to ``[0, w_a]`` and summing to ``K w_a`` to rounding.
    """
    counts = np.array([len(h) for h in blocks_holders])
    atom_of = np.repeat(np.arange(len(blocks_holders)), counts)
    mach_of = _flat(blocks_holders)
    forced = (counts == K)[atom_of]
    x = np.where(forced, w[atom_of], 0.0)
    fixed = np.bincount(mach_of[forced], weights=x[forced], minlength=s.size)
    c = float(np.max(fixed / s))
    if not forced.all():
        c, x[~forced] = _free_lp(atom_of[~forced], mach_of[~forced], w, s, K, fixed, c)
        x = _polish(x, atom_of, w, K)
    return c, np.split(x, np.cumsum(counts)[:-1])


def _free_lp(atom_of: np.ndarray, mach_of: np.ndarray, w: np.ndarray, s: np.ndarray, K: int,
             fixed: np.ndarray, c_min: float) -> tuple[float, np.ndarray]:
    """The LP of :func:`_step_lp` over the free atoms' variables; ``fixed`` are the forced loads
    and ``c_min = max fixed / s``."""
    atoms, a_row = np.unique(atom_of, return_inverse=True)
    machs, m_row = np.unique(mach_of, return_inverse=True)
    nx = atom_of.size
    idx = np.arange(nx)
    cost = np.zeros(nx + 1)
    cost[-1] = 1.0
    A_eq = sparse.csr_matrix((np.ones(nx), (a_row, idx)), shape=(atoms.size, nx + 1))
    A_ub = sparse.csr_matrix(
        (np.concatenate([np.ones(nx), -s[machs]]),
         (np.concatenate([m_row, np.arange(machs.size)]),
          np.concatenate([idx, np.full(machs.size, nx)]))),
        shape=(machs.size, nx + 1))
    lb = np.concatenate([np.zeros(nx), [c_min]])
    ub = np.concatenate([w[atom_of], [np.inf]])
    res = linprog(cost, A_ub=A_ub, b_ub=-fixed[machs], A_eq=A_eq, b_eq=K * w[atoms],
                  bounds=np.stack([lb, ub], axis=1), method="highs")
    if res.status != 0:
        raise PlanError(f"per-step LP failed: {res.message}")
    return float(res.x[-1]), res.x[:-1]


def _polish(x: np.ndarray, atom_of: np.ndarray, w: np.ndarray, K: int) -> np.ndarray:
    """Remove the LP's rounding crumbs: clip each ``x[a,n]`` to ``[0, w_a]`` and restore
    ``sum_n x[a,n] = K w_a``, spreading a shortfall over the room left below ``w_a`` and an
    excess over the loads, in proportion."""
    cap = w[atom_of]
    x = np.clip(x, 0.0, cap)
    na = w.size
    short = K * w - np.bincount(atom_of, weights=x, minlength=na)
    room = cap - x
    room_sum = np.bincount(atom_of, weights=room, minlength=na)
    x_sum = np.bincount(atom_of, weights=x, minlength=na)
    up = np.where(room_sum > 0, np.maximum(short, 0) / np.where(room_sum > 0, room_sum, 1), 0.0)
    down = np.where(x_sum > 0, np.maximum(-short, 0) / np.where(x_sum > 0, x_sum, 1), 0.0)
    return cast(np.ndarray, np.clip(x + room * up[atom_of] - x * down[atom_of], 0.0, cap))


def _mean_c(placement: Placement, draws: np.ndarray, L: int, S: int) -> float:
    K = L + S
    idx = {m: i for i, m in enumerate(placement.machines)}
    holders, w, _ = _present_atoms(placement, idx, K)
    return float(np.mean([_step_lp(holders, w, d, K)[0] for d in draws]))
