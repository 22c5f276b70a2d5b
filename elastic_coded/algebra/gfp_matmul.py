"""Exact matrix multiplication over GF(p) (placeholder: correct, not yet fast)."""

from __future__ import annotations

import numpy as np

MAX_PRIME = (1 << 31) - 1


def matmul_mod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """``(a @ b) mod p`` exactly, for int64 operands in ``[0, p)``."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.int64)
    # (p-1)^2 < 2^62; sum a handful at a time in int64 without overflow.
    step = max(1, int((2**63 - 1) // max(1, (p - 1) ** 2)) - 1)
    for k0 in range(0, a.shape[1], step):
        out = (out + a[:, k0:k0 + step] @ b[k0:k0 + step, :]) % p
    return out
