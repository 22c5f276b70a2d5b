"""The Reduce of the unified coding framework (MATH.md §2, Reduce): each of the fastest servers
decodes its outputs from ``m`` distinct coded values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ...errors import ArgumentError
from ._shuffle import ShufflePlan
from ._storage import StorageDesign


def reduce_outputs(design: StorageDesign, rows: Sequence[int], values: npt.ArrayLike
                   ) -> np.ndarray:
    """Decode outputs from ``m`` distinct coded values: solve ``G[rows] y = values``.

    ``values`` is ``m`` or ``m x c`` (``c`` outputs sharing the same coded rows); returns the
    ``A x_j`` (MATH.md §2, Reduce).  Over the reals the rows must be lane-balanced and the solve
    runs lane by lane (:mod:`._lanes`)."""
    rows = list(rows)
    if len(rows) != design.m or len(set(rows)) != design.m:
        raise ArgumentError(f"rows: need m = {design.m} distinct coded rows, got {len(rows)} "
                            f"({len(set(rows))} distinct)")
    if design.lanes is not None:
        return design.lanes.solve(rows, values)
    return design.field.solve(design.generator[rows], np.asarray(values))


def received_rows(plan: ShufflePlan, k: int) -> dict[int, set[int]]:
    """``{output: coded rows}`` whose values server ``k`` receives in the Shuffle of ``plan``."""
    got: dict[int, set[int]] = {}
    for t in plan.transmissions:
        if k in t.receivers:
            seg = t.segment_for(k)
            for row, o in zip(seg.rows, seg.outputs):
                got.setdefault(o, set()).add(row)
    return got


def reduce_groups(design: StorageDesign, plan: ShufflePlan, k: int,
                  got: Mapping[int, Iterable[int]] | None = None
                  ) -> dict[tuple[int, ...], list[int]]:
    """``{coded rows: [c, ...]}``: the ``m`` coded rows server ``k``'s Reduce decodes each of its
    outputs from (its own rows first, then those received by increasing row; ``got``: the rows
    received per output, default :func:`received_rows`), the outputs (``c``-th of
    ``plan.outputs_of(k)``) sharing each row set together.  A plan that chose them
    (``plan.decode_rows``, the real lane code) gives one set for all of ``k``'s outputs."""
    outs = plan.outputs_of(k)
    chosen = plan.rows_for(k)
    if chosen is not None:
        return {chosen: list(range(len(outs)))} if outs else {}
    got = received_rows(plan, k) if got is None else got
    local = tuple(design.server_rows[k])
    local_set = set(local)
    groups: dict[tuple[int, ...], list[int]] = {}
    for c, o in enumerate(outs):
        extra = sorted(row for row in got.get(o, ()) if row not in local_set)
        groups.setdefault((local + tuple(extra))[:design.m], []).append(c)
    return groups


def reduce_server(design: StorageDesign, plan: ShufflePlan, k: int, own_map: np.ndarray,
                  got: dict[int, dict[int, object]]) -> np.ndarray:
    """Server ``k``'s Reduce (MATH.md §2): decode each output it reduces from ``m`` distinct
    coded values, its own Map result first (``own_map``, :func:`map_compute`), then the values
    it received (``got[o][row]``, :func:`receive_packet`) by increasing row
    (:func:`reduce_groups`).

    Returns ``m x len(plan.outputs_of(k))``: column ``c`` is ``A x_o`` for the ``c``-th output
    ``o`` of ``plan.outputs_of(k)``.  Outputs sharing the same coded rows are solved together."""
    fld = design.field
    m = design.m
    outs = plan.outputs_of(k)
    local_set = set(design.server_rows[k])
    own_map = np.asarray(own_map)
    result = fld.zeros((m, len(outs)))
    for rows, cols in reduce_groups(design, plan, k, got).items():
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
