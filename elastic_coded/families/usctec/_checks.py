"""Argument checks shared by the USCTEC planner: each raises a ValueError naming the parameter,
the value and the rule."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from ...errors import ArgumentError, BudgetError

__all__ = ["check_code", "check_speeds"]


def _is_int(val: object) -> bool:
    return not isinstance(val, bool) and isinstance(val, (int, np.integer))


def check_code(L: int, S: int) -> tuple[int, int]:
    """``L >= 1`` and ``S >= 0`` as ints, or a ValueError naming the bad one."""
    for name, val, lo in (("L", L, 1), ("S", S, 0)):
        if not _is_int(val) or val < lo:
            raise ArgumentError(f"{name}: must be an int >= {lo}, got {val!r}")
    return int(L), int(S)


def check_speeds(speeds: npt.ArrayLike, n: int | None = None, name: str = "speeds"
                 ) -> npt.NDArray[np.float64]:
    """Speeds as a float array; each must be positive and finite."""
    s = np.asarray(speeds, dtype=np.float64).reshape(-1)
    if n is not None and s.shape[0] != n:
        raise ArgumentError(f"{name}: expected {n} values (one per machine), got {s.shape[0]}")
    bad = ~(np.isfinite(s) & (s > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ArgumentError(f"{name}: every speed must be positive and finite; {name}[{i}] = "
                            f"{float(s[i])!r}")
    return s


def _check_enough(n_machines: int, K: int, what: str = "available") -> None:
    if n_machines < K:
        raise ArgumentError(
               f"{what}: {n_machines} machines, fewer than L+S = {K}; every piece needs L+S "
               f"distinct machines")


def _check_rows(num_rows: int) -> int:
    if not _is_int(num_rows) or num_rows < 1:
        raise ArgumentError(f"num_rows: must be a positive int, got {num_rows!r}")
    return int(num_rows)


def _check_budgets(budgets: npt.ArrayLike, n: int, K: int, num_rows: int
                   ) -> npt.NDArray[np.float64]:
    e = np.asarray(budgets, dtype=np.float64).reshape(-1)
    if e.size == 1 and n > 1:
        e = np.full(n, float(e[0]))
    if e.size != n:
        raise ArgumentError(f"budgets: expected {n} values (one per machine), got {e.size}")
    if np.any(~np.isfinite(e)) or np.any(e < 0) or np.any(e > 1):
        raise ArgumentError(f"budgets: each storage budget e[n] must lie in [0, 1], got "
                            f"{e.tolist()}")
    cap_rows = np.floor(e * num_rows + 1e-9)
    if cap_rows.sum() < K * num_rows:
        raise BudgetError(
            f"budgets: total storage {e.sum():.6g} (x {num_rows} rows) cannot hold every row "
            f"L+S = {K} times (needs sum(e) >= {K})")
    return e


def _machines(machines: Any, n_default: int | None) -> tuple[Hashable, ...]:
    if machines is None:
        if n_default is None:
            raise ArgumentError("machines: give the machine ids or their number")
        return tuple(range(n_default))
    if _is_int(machines):
        return tuple(range(int(machines)))
    ms = tuple(machines)
    if len(set(ms)) != len(ms):
        raise ArgumentError(f"machines: ids must be distinct, got {list(ms)}")
    return ms


def _placement_args(num_rows: int, machines: Any, L: int, S: int
                    ) -> tuple[int, int, int, tuple[Hashable, ...]]:
    """Checked ``(L, S, num_rows, machines)`` for a placement: at least ``L+S`` machines."""
    L, S = check_code(L, S)
    num_rows = _check_rows(num_rows)
    ms = _machines(machines, None)
    _check_enough(len(ms), L + S, "machines")
    return L, S, num_rows, ms
