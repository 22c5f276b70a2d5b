"""Power-of-two scaling that keeps float64 products and their checks in range.  Pure: numpy.

Multiplying by ``2^k`` only changes a float64's exponent, so it is exact short of the
subnormal range: a product computed from scaled inputs and scaled back is the product itself,
and so are its error bounds.  Products near float64's range (``B`` of ``1e307``, or a large
``A`` times a small ``B``) overflow in places where the product itself does not: the Lagrange
encoding of ``B`` (a sum of blocks), the squared norms a check forms, ``||A|| ||B||``.
Values whose binary exponents lie within ``+-SAFE`` are left alone (bit for bit), so ordinary
inputs are never touched.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["SAFE", "exponent", "max_exponent", "shift_for", "scaled", "ldexp", "norm"]

SAFE = 256
"""Binary exponents (``|x| < 2^SAFE``, about ``1e77``) needing no scaling: squares and sums of
squares of such values times ``1e50`` terms stay finite and normal."""


def exponent(x: Any) -> int:
    """``e`` with ``max |x|`` in ``[2^(e-1), 2^e)``; ``0`` for an empty, all-zero or non-finite
    ``x`` (a non-finite value is left for the caller's own check)."""
    return _exponent_of(_top(x))


def max_exponent(A: Any, rows: int = 4096) -> int:
    """:func:`exponent` of a (possibly memory-mapped) matrix, read ``rows`` rows at a time."""
    if getattr(A, "ndim", 0) < 2:
        return exponent(A)
    return _exponent_of(max([0.0] + [_top(A[a:a + rows]) for a in range(0, A.shape[0], rows)]))


def _top(x: Any) -> float:
    x = x.data if sp.issparse(x) else np.asarray(x)  # a sparse x: its nonzeros
    if not x.size:
        return 0.0
    if x.dtype.kind == "f":  # two passes, no |x| copy (a nan in x: nan, as np.max gives)
        return float(max(np.max(x), -np.min(x)))
    return float(np.max(np.abs(x)))


def _exponent_of(top: float) -> int:
    return math.frexp(top)[1] if top != 0.0 and math.isfinite(top) else 0


def ldexp(v: float, k: int) -> float:
    """``v * 2^k`` as a float (``inf`` past float64's range, not an ``OverflowError``)."""
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(np.float64(v), int(k)))


def shift_for(a_exp: int, x_exp: int, limit: int = SAFE) -> int:
    """The ``k`` to scale an input ``x`` by ``2^-k`` so that ``x`` and ``A x`` stay within
    ``2^+-limit`` (``a_exp``, ``x_exp``: :func:`exponent` of ``A`` and ``x``); ``0`` when they
    already do.  The scaled input's exponent aims at ``-a_exp`` (``A x`` near 1), kept within
    ``+-limit``."""
    if abs(x_exp) <= limit and abs(a_exp + x_exp) <= limit:
        return 0
    return x_exp - max(-limit, min(limit, -a_exp))


def scaled(x: Any, k: int) -> Any:
    """``x * 2^-k`` (exact short of the subnormal range); ``x`` itself for ``k = 0``."""
    if k == 0:
        return x
    if sp.issparse(x):
        out = sp.csr_array(x, dtype=np.float64, copy=True)
        out.data = scaled(out.data, k)
        return out
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(np.asarray(x, dtype=np.float64), -int(k))


def norm(x: Any) -> float:
    """``||x||_F`` without the spurious overflow (or underflow) of summing squares: computed
    on ``x`` scaled by a power of two, and scaled back; ``inf`` only when the norm itself is."""
    x = x.data if sp.issparse(x) else x  # a sparse x: the norm of its nonzeros
    e = exponent(x)
    if abs(e) <= SAFE:
        return float(np.linalg.norm(x))
    return ldexp(float(np.linalg.norm(scaled(x, e))), e)
