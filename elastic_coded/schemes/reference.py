"""Reference semantics of a USCTEC step (MATH.md §1), in-process and plain.

The Ray runtime and the simulator must match what these few functions do: encode ``B`` once per
step into ``K`` coded blocks, let every machine compute its tasks, decode every piece from any ``L``
of its results, and assemble ``A @ B``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..algebra.fields import Field
from ..algebra.lagrange import LagrangeCode, lagrange_code
from ..errors import ArgumentError
from .plan import StepPlan, Task

__all__ = ["encode_input", "compute_task", "decode_piece", "assemble", "run_step"]


def encode_input(code: LagrangeCode, B: np.ndarray) -> np.ndarray:
    """The ``K`` coded inputs ``B~_i`` (eq. 2), shape ``(K, v, r/L)``."""
    return code.encode(B)


def compute_task(F: Field, A_rows: np.ndarray, coded: np.ndarray, task: Task) -> np.ndarray:
    """``H = A_g (B~_i)_{cols}`` (eq. 3); ``A_rows`` holds exactly the task's rows."""
    cols = coded if task.cols is None else coded[:, task.cols[0]:task.cols[1]]
    return F.matmul(A_rows, cols)


def decode_piece(code: LagrangeCode, results: Mapping[int, np.ndarray]) -> np.ndarray:
    """``A_g (B_l)_{M}`` for every ``l`` from any ``L`` results ``{position: H}``."""
    return code.decode(dict(results))


def assemble(plan: StepPlan, decoded: Mapping[int, np.ndarray], num_cols: int, dtype: Any
             ) -> np.ndarray:
    """``A @ B`` (``q x r``) from every piece's decoded blocks ``(L, rows, cols)``."""
    L = plan.L
    Y = np.empty((plan.num_rows, L * num_cols), dtype=dtype)
    view = Y.reshape(plan.num_rows, L, num_cols)
    missing = [pi for pi in range(len(plan.pieces)) if pi not in decoded]
    if missing:
        raise ArgumentError(f"decoded: pieces {missing[:5]} were not decoded; refusing a "
                            "partial result")
    for pi, piece, group in plan.iter_pieces():
        a, b = group.rows
        c0, c1 = (0, num_cols) if piece.cols is None else piece.cols
        view[a:b, :, c0:c1] = np.asarray(decoded[pi]).transpose(1, 0, 2)
    return Y


def run_step(A: np.ndarray, B: np.ndarray, plan: StepPlan, field: Any,
             drop: Mapping[int, Iterable[int]] | None = None) -> np.ndarray:
    """Execute ``plan`` in-process: every machine computes, the positions in ``drop[piece]``
    (at most ``S`` per piece) straggle and are ignored, every piece decodes, ``A @ B`` returns.
    ``B`` gets zero columns where the code needs a multiple of ``L`` (times its width)."""
    code = lagrange_code(field, plan.L, plan.S)
    F = code.field
    A = F.asarray(A, "A")
    B = F.asarray(B, "B")
    if A.shape[0] != plan.num_rows:
        raise ArgumentError(f"A: has {A.shape[0]} rows, the plan {plan.num_rows}")
    if A.shape[1] != B.shape[0]:
        raise ArgumentError(f"B: shape {B.shape} does not fit A {A.shape} (A.shape[1] == "
                            f"B.shape[0])")
    r = B.shape[1]
    pad = (-r) % (plan.L * code.width)  # zero columns, as the runtime adds them
    if pad:
        B = np.concatenate([B, F.zeros((B.shape[0], pad))], axis=1)
    coded = encode_input(code, B)
    lost_of = {k: set(v) for k, v in (drop or {}).items()}
    decoded: dict[int, np.ndarray] = {}
    for pi, piece, group in plan.iter_pieces():
        lost = lost_of.get(pi, set())
        if len(lost) > plan.S:
            raise ArgumentError(f"drop: piece {pi} loses {len(lost)} results, more than S = "
                                f"{plan.S}")
        a, b = group.rows
        results: dict[int, np.ndarray] = {}
        for pos in range(plan.K):
            if pos in lost:
                continue
            results[pos] = compute_task(F, A[a:b], coded[pos],
                                        Task(pi, pos, group.rows, piece.cols))
            if len(results) == plan.L:
                break
        decoded[pi] = decode_piece(code, results)
    return assemble(plan, decoded, B.shape[1] // plan.L, F.dtype)[:, :r]
