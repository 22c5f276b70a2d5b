"""A step's inputs on the driver: checked before anything runs (errors name the parameter, the
value and the rule), and, in the reals, kept inside float64's range.

**Range.**  ``A @ B`` can be finite while the step's own arithmetic is not: the Lagrange
encoding sums blocks of ``B``, a check squares norms, a bound multiplies ``||A|| ||B||``.  So
when ``B`` or the product lies near the edge of float64's range (binary exponents beyond
``+-SAFE``, :mod:`~elastic_coded.algebra.scaling`), the step runs on ``B 2^-k`` (one ``k``
for all of the step's inputs) and its product, and the error bounds of its report, are scaled
back by ``2^k``: exact in binary floating point, so the product is the same.  A product that
truly overflows then raises the overflow error, never a verification failure.  Ordinary
inputs (``k = 0``) are used as they are, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ..algebra import scaling
from ..errors import ArgumentError, ArgumentTypeError

__all__ = ["matrix_inputs", "master_inputs", "scale", "unscale", "check_finite", "unscale_verdict"]


def _input(F, x, name: str, rows: int) -> np.ndarray:
    """``x`` as a 1-D or 2-D array of ``F``'s values."""
    if x is None or isinstance(x, (str, bytes, Mapping, set)):
        raise ArgumentTypeError(f"{name}: an array (a vector, or a matrix of input columns) of "
                                f"{F.name} values with {rows} rows, got {type(x).__name__} "
                                f"{x!r:.60}")
    try:
        arr = F.asarray(x, name)
    except ValueError as exc:
        if "inhomogeneous" not in str(exc):
            raise
        raise ArgumentError(f"{name}: a rectangular array (rows of equal length), got rows of "
                            f"different lengths") from None
    if arr.ndim not in (1, 2):
        raise ArgumentError(f"{name}: must be 1-D (a vector) or 2-D (one input per column), got "
                            f"{arr.ndim}-D shape {arr.shape}")
    return arr


def master_inputs(F, masters: tuple, B):
    """Heterogeneous masters: one input per master, checked against its matrix's shape
    (``masters``): ``(inputs, shape, columns)``, ``shape`` turning the products back into
    what the caller passed (a vector for a vector)."""
    M = len(masters)
    if isinstance(B, np.ndarray) and M != 1:
        raise ArgumentError(f"B: policy 'hetero' needs a list of M = {M} inputs, got one "
                            f"array of shape {B.shape}")
    if B is None or isinstance(B, (str, bytes, Mapping)):
        raise ArgumentTypeError(f"B: policy 'hetero' needs a list of M = {M} inputs, got "
                                f"{type(B).__name__}")
    xs = list(B) if not isinstance(B, np.ndarray) else [B]
    if len(xs) != M:
        raise ArgumentError(f"B: needs one input per master, M = {M}, got {len(xs)}")
    out, vec = [], []
    for m, x in enumerate(xs):
        arr = _input(F, x, f"B[{m}]", masters[m][1])
        vec.append(arr.ndim == 1)
        arr = arr[:, None] if arr.ndim == 1 else arr
        if arr.shape[0] != masters[m][1] or arr.shape[1] < 1:
            raise ArgumentError(f"B[{m}]: shape {np.shape(x)} does not fit A[{m}] "
                                f"{masters[m]} (B[{m}].shape[0] must equal "
                                f"{masters[m][1]}, with >= 1 column)")
        out.append(arr)
    return out, lambda Y: [y[:, 0] if v else y for y, v in zip(Y, vec)], \
        sum(x.shape[1] for x in out)


def matrix_inputs(F, shape: tuple, B):
    """One matrix ``A`` of ``shape``: ``B`` checked, ``(B, shape, columns)`` as
    :func:`master_inputs`."""
    B = _input(F, B, "B", shape[1])
    vec = B.ndim == 1
    B = B[:, None] if vec else B
    if B.shape[0] != shape[1] or B.shape[1] < 1:
        raise ArgumentError(f"B: shape {B.shape} does not fit A {shape} "
                            f"(B.shape[0] must equal {shape[1]}, with >= 1 column)")
    return B, (lambda Y: Y[:, 0]) if vec else (lambda Y: Y), B.shape[1]


def scale(F, a_exp: int, X):
    """``(X 2^-k, k)`` (module docstring; ``a_exp``: ``A``'s largest binary exponent);
    ``k = 0`` over a finite field."""
    if F.exact:
        return X, 0
    xs = X if isinstance(X, list) else [X]
    k = scaling.shift_for(a_exp, max(scaling.exponent(x) for x in xs))
    if k == 0:
        return X, 0
    out = [scaling.scaled(x, k) for x in xs]
    return (out if isinstance(X, list) else out[0]), k


def unscale(Y, k: int):
    """The product of the unscaled inputs: ``Y 2^k``."""
    if k == 0:
        return Y
    return [scaling.scaled(y, -k) for y in Y] if isinstance(Y, list) else scaling.scaled(Y, -k)


def check_finite(F, Y) -> None:
    """Raise the overflow error for a real product with an ``inf`` or ``nan``."""
    if F.exact:
        return
    for y in (Y if isinstance(Y, list) else [Y]):
        if not np.all(np.isfinite(y)):
            raise ArgumentError("A @ B: the product overflows float64 (inf or nan in the "
                                "result); scale A or B down")


def unscale_verdict(verdict, k: int):
    """A step's verdict with its absolute error bounds in the unscaled inputs' units."""
    if k == 0:
        return verdict
    out = {f: scaling.ldexp(getattr(verdict, f), k)
           for f in ("error_bound", "verified_error_bound") if getattr(verdict, f) is not None}
    return replace(verdict, **out)
