"""The per-step plan (MATH.md §1): the fractional optimum, then the integer optimum laid out in
groups of ``L+S`` machines."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import numpy as np
import numpy.typing as npt

from ...errors import ArgumentError, ArgumentTypeError
from ...schemes.plan import Piece, Placement, StepPlan
from ._checks import _check_enough, check_code, check_speeds
from ._fractional import _present_atoms, _step_lp
from ._layout import _flat
from ._load import optimal_load
from ._rounding import integer_rows, lay_out_groups

__all__ = ["plan_step"]


def _check_available(placement: Placement, available: Iterable[Hashable]
                     ) -> tuple[Hashable, ...]:
    if not isinstance(placement, Placement):
        raise ArgumentTypeError(f"placement: expected a Placement, got {type(placement).__name__}")
    avail = tuple(available)
    if len(set(avail)) != len(avail):
        raise ArgumentError(f"available: machine ids must be distinct, got {list(avail)}")
    known = set(placement.machines)
    unknown = [m for m in avail if m not in known]
    if unknown:
        raise ArgumentError(f"available: machines {unknown} are not in the placement")
    return avail


def plan_step(placement: Placement, available: Iterable[Hashable], speeds: npt.ArrayLike,
              L: int, S: int) -> StepPlan:
    """The per-step plan for the ``available`` machines with realised ``speeds`` (MATH.md §1).

    Solves the storage-constrained LP exactly for the fractional optimum ``c`` and loads
    ``theta`` (a single atom held by everyone reduces to :func:`optimal_load`; atoms with exactly
    ``L+S`` holders need no LP), then finds the integer optimum ``c_int`` over whole rows by
    parametric max-flow and lays each atom's rows out in groups of ``L+S`` machines (see
    :mod:`._rounding`: ``c <= c_int <= c + rounding_bound(plan)``).  Each group is one piece over
    all columns.
    """
    L, S = check_code(L, S)
    K = L + S
    avail = _check_available(placement, available)
    _check_enough(len(avail), K)
    s = check_speeds(speeds, len(avail))
    idx = {m: i for i, m in enumerate(avail)}
    holders, w, atoms = _present_atoms(placement, idx, K)
    if len(atoms) == 1 and len(holders[0]) == len(avail):
        theta, c = optimal_load(s, L, S)
        holders = [list(range(len(avail)))]
        xs = [theta * w[0]]
    else:
        c, xs = _step_lp(holders, w, s, K)
    theta = np.zeros(len(avail))
    for h, x in zip(holders, xs):
        theta[h] += x
    q = placement.num_rows
    R = np.array([sum(b.size for b in bs) for bs in atoms], dtype=np.int64)
    y = integer_rows(R, holders, s, q, K, theta, c)
    groups = lay_out_groups(atoms, holders, y, avail, q, K)
    pieces = tuple(Piece(g, None, grp.machines) for g, grp in enumerate(groups))
    rows = np.bincount(_flat(holders), weights=y, minlength=len(avail))
    c_int = float(np.max(rows / (q * s)))
    return StepPlan(L, S, q, avail, tuple(s.tolist()), tuple(groups), pieces,
                    tuple(theta.tolist()), float(c), c_int)
