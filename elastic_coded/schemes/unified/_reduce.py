"""The Reduce of the unified coding framework (MATH.md §2, Reduce): each of the fastest servers
decodes its outputs from ``m`` distinct coded values."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ._shuffle import ShufflePlan
from ._storage import StorageDesign

def reduce_outputs(design: StorageDesign, rows: Sequence[int], values) -> np.ndarray:
    """Decode outputs from ``m`` distinct coded values: solve ``G[rows] y = values``.

    ``values`` is ``m`` or ``m x c`` (``c`` outputs sharing the same coded rows); returns the
    ``A x_j`` (MATH.md §2, Reduce)."""
    rows = list(rows)
    if len(rows) != design.m or len(set(rows)) != design.m:
        raise ValueError(f"rows: need m = {design.m} distinct coded rows, got {len(rows)} "
                         f"({len(set(rows))} distinct)")
    return design.field.solve(design.generator[rows], np.asarray(values))


def reduce_server(design: StorageDesign, plan: ShufflePlan, k: int, own_map: np.ndarray,
                  got: dict[int, dict[int, object]]) -> np.ndarray:
    """Server ``k``'s Reduce (MATH.md §2): decode each output it reduces from ``m`` distinct
    coded values, its own Map result first (``own_map``, :func:`map_compute`), then the values
    it received (``got[o][row]``, :func:`receive_packet`) by increasing row.

    Returns ``m x len(plan.outputs_of(k))``: column ``c`` is ``A x_o`` for the ``c``-th output
    ``o`` of ``plan.outputs_of(k)``.  Outputs sharing the same coded rows are solved together."""
    fld = design.field
    m = design.m
    outs = plan.outputs_of(k)
    local = tuple(design.server_rows[k])
    local_set = set(local)
    own_map = np.asarray(own_map)
    groups: dict[tuple[int, ...], list[int]] = {}
    for c, o in enumerate(outs):
        extra = sorted(row for row in got.get(o, {}) if row not in local_set)
        rows = (local + tuple(extra))[:m]
        groups.setdefault(rows, []).append(c)
    result = fld.zeros((m, len(outs)))
    for rows, cols in groups.items():
        n_local = sum(1 for row in rows if row in local_set)
        vals = fld.zeros((m, len(cols)))
        if n_local:
            vals[:n_local] = own_map[:n_local][:, [outs[c] for c in cols]]
        for ci, c in enumerate(cols):
            column = got.get(outs[c], {})
            for t_i, row in enumerate(rows[n_local:], start=n_local):
                vals[t_i, ci] = column[row]
        result[:, cols] = reduce_outputs(design, rows, vals)
    return result


