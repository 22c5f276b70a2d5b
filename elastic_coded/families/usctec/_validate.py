"""Plan validation: every constraint (9b)-(9f) of the USCTEC seed (MATH.md §1)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Hashable
from typing import cast

from ...schemes.plan import Placement, PlanError, StepPlan

__all__ = ["validate"]

# {machine: (starts, stops)} of its merged stored row ranges
_Stored = dict[Hashable, tuple[list[int], list[int]]]


def validate(plan: StepPlan, placement: Placement, num_cols: int | None = None) -> None:
    """Check every constraint (9b)-(9f) of the USCTEC seed; raise :class:`PlanError` naming the
    violated one.  ``num_cols`` (``r/L``) is needed only when pieces split the columns."""
    stored = _stored_ranges(placement)
    _check_storage(placement, stored)
    _check_rows_partition(plan, placement.num_rows)
    _check_columns(plan, num_cols)
    _check_selection(plan, stored)


def _check_storage(placement: Placement, stored: _Stored) -> None:
    """(9b) storage budgets."""
    q = placement.num_rows
    for m, e in zip(placement.machines, placement.budgets):
        starts, stops = stored.get(m, ([], []))
        rows = sum(b - a for a, b in zip(starts, stops))
        if rows > math.floor(e * q + 1e-9):
            raise PlanError(f"(9b) storage: machine {m!r} stores {rows} rows, "
                            f"above its budget e = {e} of {q} rows")


def _check_rows_partition(plan: StepPlan, q: int) -> None:
    """(9c) the groups partition the rows; the gammas sum to 1."""
    if plan.num_rows != q:
        raise PlanError(f"(9c) rows: plan covers {plan.num_rows} rows, placement has {q}")
    pos = 0
    for a, b in sorted(g.rows for g in plan.groups):
        if a != pos or b <= a:
            raise PlanError(f"(9c) rows: groups do not partition rows 0:{q} (gap or overlap at "
                            f"row {min(a, pos)})")
        pos = b
    if pos != q:
        raise PlanError(f"(9c) rows: groups cover rows 0:{pos}, not 0:{q}")
    gsum = math.fsum(g.gamma for g in plan.groups)
    if abs(gsum - 1) > 1e-6:
        raise PlanError(f"(9c) gamma: partitioning vector sums to {float(gsum)!r}, not 1")


def _check_columns(plan: StepPlan, num_cols: int | None) -> None:
    """(9d) the pieces of each group cover all columns."""
    by_group: dict[int, list[tuple[int, int] | None]] = {g: [] for g in range(len(plan.groups))}
    for p in plan.pieces:
        if not 0 <= p.group < len(plan.groups):
            raise PlanError(f"(9d) columns: piece names group {p.group}, plan has "
                            f"{len(plan.groups)}")
        by_group[p.group].append(p.cols)
    for g, cols in by_group.items():
        if not cols:
            raise PlanError(f"(9d) columns: group {g} has no piece")
        if None in cols:
            if len(cols) != 1:
                raise PlanError(f"(9d) columns: group {g} mixes a whole-column piece with others")
            continue
        if num_cols is None:
            raise PlanError("(9d) columns: pieces split columns; pass num_cols to validate")
        pos = 0
        for a, b in sorted(cast(list[tuple[int, int]], cols)):  # no None: checked above
            if a != pos or b <= a:
                raise PlanError(f"(9d) columns: pieces of group {g} do not tile 0:{num_cols}")
            pos = b
        if pos != num_cols:
            raise PlanError(f"(9d) columns: pieces of group {g} cover 0:{pos}, not 0:{num_cols}")


def _check_selection(plan: StepPlan, stored: _Stored) -> None:
    """(9e) ``P`` within ``U``, ``U`` available and storing ``A_g``; (9f) ``|P| = L+S``
    distinct machines."""
    avail = set(plan.available)
    for pi, piece, grp in plan.iter_pieces():
        if len(piece.machines) != plan.K or len(set(piece.machines)) != plan.K:
            raise PlanError(f"(9f) redundancy: piece {pi} has machines {list(piece.machines)}, "
                            f"needs L+S = {plan.K} distinct ones")
        if not set(piece.machines) <= set(grp.machines):
            raise PlanError(f"(9e) selection: piece {pi} uses machines outside U_g of group "
                            f"{piece.group}")
    for gi, grp in enumerate(plan.groups):
        if len(set(grp.machines)) < plan.K:
            raise PlanError(f"(9f) redundancy: group {gi} has {len(set(grp.machines))} machines, "
                            f"fewer than L+S = {plan.K}")
        for m in grp.machines:
            if m not in avail:
                raise PlanError(f"(9e) selection: group {gi} uses machine {m!r}, not available")
            if not _covers(stored.get(m, ([], [])), grp.rows):
                raise PlanError(f"(9e) storage: machine {m!r} does not store rows "
                                f"{grp.rows[0]}:{grp.rows[1]} of group {gi}")


def _stored_ranges(placement: Placement) -> _Stored:
    """``{machine: (starts, stops)}`` of its merged stored row ranges."""
    out: _Stored = {}
    for blk in placement.blocks:
        for m in blk.holders:
            starts, stops = out.setdefault(m, ([], []))
            if stops and stops[-1] == blk.start:
                stops[-1] = blk.stop
            else:
                starts.append(blk.start)
                stops.append(blk.stop)
    return out


def _covers(ranges: tuple[list[int], list[int]], rows: tuple[int, int]) -> bool:
    starts, stops = ranges
    i = bisect.bisect_right(starts, rows[0]) - 1
    return i >= 0 and stops[i] >= rows[1]
