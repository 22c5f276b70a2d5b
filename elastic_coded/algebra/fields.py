"""Fields: one interface for the reals, prime fields GF(p) and binary extension fields GF(2^T).

Elements are plain numpy arrays: ``float64`` for the reals, ``int64`` holding the canonical
representatives ``0 .. order-1`` for the finite fields.  Code outside ``algebra/`` never branches
on the field: it calls the methods below (MATH.md is written over an arbitrary field ``F``).

Use :func:`field` to build one from a spec: ``"real"``, ``"gf(p)"`` / ``"gfp:p"`` / an int ``p``,
or ``"gf(2^T)"``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, cast

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, NotInvertible, SingularMatrix, Unsupported
from . import sparse as _sparse
from .gfp_matmul import MAX_PRIME, matmul_mod

__all__ = ["Field", "RealField", "PrimeField", "BinaryExtField", "field", "is_prime", "MAX_PRIME"]


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for n < 3.3e24 (covers every supported prime)."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    for sp in small:
        if n % sp == 0:
            return n == sp
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _check_matmul_shapes(a: np.ndarray, b: np.ndarray) -> None:
    if a.ndim != 2 or b.ndim != 2:
        raise ArgumentError(
               f"matmul: operands must be 2-D, got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ArgumentError(
               f"matmul: shape mismatch {a.shape} @ {b.shape}: a.shape[1] must equal b.shape[0]")


class Field:
    """The field interface.  Subclasses are small, immutable and hashable.

    Attributes: ``name`` (readable), ``exact`` (True for finite fields), ``dtype``.
    """

    name: str
    exact: bool
    dtype: Any

    # -- construction and checks ------------------------------------------------------------
    def asarray(self, x: Any, name: str = "array") -> np.ndarray:  # pragma: no cover - abstract
        raise Unsupported

    def random(self, shape: Any, rng: np.random.Generator) -> np.ndarray:  # pragma: no cover
        raise Unsupported

    def zeros(self, shape: Any) -> np.ndarray:
        return np.zeros(shape, dtype=self.dtype)

    def eye(self, n: int) -> np.ndarray:
        return np.eye(n, dtype=self.dtype)

    def points(self, count: int) -> np.ndarray:  # pragma: no cover - abstract
        """``count`` distinct field elements suitable as evaluation points."""
        raise Unsupported

    # -- arithmetic (elementwise unless said otherwise) -----------------------------------------
    def add(self, a: Any, b: Any) -> Any:  # pragma: no cover - abstract
        raise Unsupported

    def sub(self, a: Any, b: Any) -> Any:  # pragma: no cover - abstract
        raise Unsupported

    def mul(self, a: Any, b: Any) -> Any:  # pragma: no cover - abstract
        raise Unsupported

    def inv(self, a: Any) -> Any:  # pragma: no cover - abstract
        raise Unsupported

    def div(self, a: Any, b: Any) -> Any:
        return self.mul(a, self.inv(b))

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise Unsupported

    def solve(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # pragma: no cover
        """Solve ``a @ x = b`` for square invertible ``a``."""
        raise Unsupported

    def equal(self, a: np.ndarray, b: np.ndarray, rtol: float = 1e-9) -> bool:
        """Exact equality for finite fields; relative Frobenius error ``<= rtol`` for reals."""
        a = np.asarray(a)
        b = np.asarray(b)
        if a.shape != b.shape:
            return False
        if self.exact:
            return bool(np.array_equal(a, b))
        return relative_error(a, b) <= rtol

    def __repr__(self) -> str:
        return f"<Field {self.name}>"


def relative_error(approx: np.ndarray, exact: np.ndarray) -> float:
    """``||approx - exact||_F / max(||exact||_F, tiny)``."""
    exact = np.asarray(exact, dtype=np.float64)
    denom = max(float(np.linalg.norm(exact)), np.finfo(np.float64).tiny)
    return float(np.linalg.norm(np.asarray(approx, dtype=np.float64) - exact)) / denom


@dataclass(frozen=True, repr=False)
class RealField(Field):
    """The real numbers in float64."""

    name: str = "real"
    exact: bool = False
    dtype: Any = np.float64

    def asarray(self, x: Any, name: str = "array") -> np.ndarray:
        if _sparse.is_sparse(x):
            return cast(np.ndarray, _sparse.as_field_sparse(self, x, name))
        arr = np.asarray(x)
        if arr.dtype.kind not in "biuf":
            raise ArgumentTypeError(f"{name}: real field needs a numeric array, got dtype "
                                    f"{arr.dtype}")
        arr = arr.astype(np.float64, copy=False)
        if not np.all(np.isfinite(arr)):
            raise ArgumentError(f"{name}: real field values must be finite (found NaN or inf)")
        return arr

    def random(self, shape: Any, rng: np.random.Generator) -> np.ndarray:
        return cast(np.ndarray, rng.standard_normal(shape))

    def points(self, count: int) -> np.ndarray:
        # Chebyshev nodes of the first kind on [-1, 1]: well-conditioned interpolation.
        k = np.arange(count)
        return np.cos((2 * k + 1) * np.pi / (2 * count))

    def add(self, a: Any, b: Any) -> Any:
        return np.add(a, b)

    def sub(self, a: Any, b: Any) -> Any:
        return np.subtract(a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return np.multiply(a, b)

    def inv(self, a: Any) -> Any:
        return 1.0 / np.asarray(a, dtype=np.float64)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if _sparse.is_sparse(a) or _sparse.is_sparse(b):
            return _sparse.matmul(self, a, b)
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        _check_matmul_shapes(a, b)
        return cast(np.ndarray, a @ b)

    def solve(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.linalg.solve(a, b)


@dataclass(frozen=True, repr=False)
class PrimeField(Field):
    """GF(p), ``2 <= p <= MAX_PRIME``; matmul on float64 BLAS with delayed reduction."""

    p: int = 2147483647
    exact: bool = True
    dtype: Any = np.int64
    name: str = dc_field(default="", compare=False)

    def __post_init__(self) -> None:
        p = self.p
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
            raise ArgumentTypeError(f"p: must be an int, got {type(p).__name__} {p!r}")
        p = int(p)
        if p > MAX_PRIME:
            raise ArgumentError(f"p: {p} is above the supported bound {MAX_PRIME} (p < 2^31)")
        if not is_prime(p):
            raise ArgumentError(f"p: {p} is not prime")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "name", f"GF({p})")

    @property
    def order(self) -> int:
        return self.p

    def asarray(self, x: Any, name: str = "array") -> np.ndarray:
        return _finite_field_array(self, x, name)

    def random(self, shape: Any, rng: np.random.Generator) -> np.ndarray:
        return cast(np.ndarray, rng.integers(0, self.p, size=shape, dtype=np.int64))

    def points(self, count: int) -> np.ndarray:
        if count > self.p:
            raise ArgumentError(f"count: {self.name} has only {self.p} elements, asked for {count}")
        return np.arange(count, dtype=np.int64)

    def add(self, a: Any, b: Any) -> Any:
        return (np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)) % self.p

    def sub(self, a: Any, b: Any) -> Any:
        return (np.asarray(a, dtype=np.int64) - np.asarray(b, dtype=np.int64)) % self.p

    def mul(self, a: Any, b: Any) -> Any:
        # p <= 2^31 - 1, so (p-1)^2 < 2^62: int64 is exact
        return (np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64)) % self.p

    def inv(self, a: Any) -> Any:
        a = np.asarray(a, dtype=np.int64)
        if np.any(a % self.p == 0):
            raise NotInvertible(f"inv: 0 has no inverse in {self.name}")
        flat = [pow(int(v), -1, self.p) for v in a.ravel()]
        return np.asarray(flat, dtype=np.int64).reshape(a.shape)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if _sparse.is_sparse(a) or _sparse.is_sparse(b):
            return _sparse.matmul(self, a, b)
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        _check_matmul_shapes(a, b)
        return matmul_mod(a, b, self.p)

    def solve(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``x`` with ``a x = b`` (``a`` square and invertible) by Gauss-Jordan elimination
        in int64, exact (residues below ``2^31``, so products below ``2^62``); it does not load
        ``galois``, whose compiler costs a process about 160 MB on first use."""
        return _solve_mod(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64), self.p)


@dataclass(frozen=True, repr=False)
class BinaryExtField(Field):
    """GF(2^T) through ``galois``; addition is XOR."""

    T: int = 8
    exact: bool = True
    dtype: Any = np.int64
    name: str = dc_field(default="", compare=False)

    def __post_init__(self) -> None:
        T = self.T
        if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or not 1 <= int(T) <= 30:
            raise ArgumentError(f"T: GF(2^T) needs an int 1 <= T <= 30, got {T!r}")
        object.__setattr__(self, "T", int(T))
        object.__setattr__(self, "name", f"GF(2^{int(T)})")

    @property
    def order(self) -> int:
        return 1 << self.T

    @property
    def _gf(self) -> Any:
        return _galois_field(2, self.T)

    def asarray(self, x: Any, name: str = "array") -> np.ndarray:
        return _finite_field_array(self, x, name)

    def random(self, shape: Any, rng: np.random.Generator) -> np.ndarray:
        return cast(np.ndarray, rng.integers(0, self.order, size=shape, dtype=np.int64))

    def points(self, count: int) -> np.ndarray:
        if count > self.order:
            raise ArgumentError(f"count: {self.name} has only {self.order} elements, asked for "
                                f"{count}")
        return np.arange(count, dtype=np.int64)

    def _wrap(self, x: Any) -> Any:
        return self._gf(np.asarray(x, dtype=np.int64))

    def add(self, a: Any, b: Any) -> Any:
        return np.bitwise_xor(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))

    sub = add

    def mul(self, a: Any, b: Any) -> Any:
        return np.asarray(self._wrap(a) * self._wrap(b), dtype=np.int64)

    def inv(self, a: Any) -> Any:
        a = np.asarray(a, dtype=np.int64)
        if np.any(a == 0):
            raise NotInvertible(f"inv: 0 has no inverse in {self.name}")
        return np.asarray(np.reciprocal(self._wrap(a)), dtype=np.int64)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        _check_matmul_shapes(a, b)
        return np.asarray(self._wrap(a) @ self._wrap(b), dtype=np.int64)

    def solve(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(np.linalg.solve(self._wrap(a), self._wrap(b)), dtype=np.int64)


def _solve_mod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """Solve ``a x = b`` over GF(p), ``p < 2^31`` (:meth:`PrimeField.solve`); a singular ``a``
    raises :class:`~elastic_coded.errors.SingularMatrix` (a ``numpy.linalg.LinAlgError``), as
    ``numpy.linalg.solve`` does."""
    n = a.shape[0] if a.ndim == 2 else -1
    if n < 0 or a.shape[1] != n or b.shape[0] != n or b.ndim not in (1, 2):
        raise ArgumentError(f"solve: needs a square a and b with as many rows, got shapes "
                            f"{a.shape} and {b.shape}")
    M = np.concatenate([a % p, (b[:, None] if b.ndim == 1 else b) % p], axis=1)
    for c in range(n):
        nz = np.flatnonzero(M[c:, c])
        if not nz.size:
            raise SingularMatrix("solve: singular matrix (no unique solution in the field)")
        if nz[0]:
            M[[c, c + nz[0]]] = M[[c + nz[0], c]]
        M[c, c:] = M[c, c:] * pow(int(M[c, c]), -1, p) % p
        f = M[:, c:c + 1].copy()
        f[c] = 0
        # columns before c hold unit vectors: only c onwards change
        M[:, c:] = (M[:, c:] - f * M[c, c:] % p) % p
    x = M[:, n:]
    return x[:, 0] if b.ndim == 1 else x


def _finite_field_array(F: PrimeField | BinaryExtField, x: Any, name: str) -> np.ndarray:
    """``x`` as int64 representatives of ``F`` (integral floats accepted), range-checked; a
    sparse ``x`` as a CSR array (GF(p) only, :mod:`.sparse`)."""
    if _sparse.is_sparse(x):
        return cast(np.ndarray, _sparse.as_field_sparse(F, x, name))
    arr = np.asarray(x)
    if arr.dtype.kind == "O":  # Python ints beyond int64, or mixed objects
        try:
            big = [int(v) for v in arr.ravel()]
        except (TypeError, ValueError):
            raise ArgumentTypeError(f"{name}: {F.name} needs integer values, "
                                    "got dtype object") from None
        bad = [v for v in big if not 0 <= v < F.order]
        if bad:
            raise ArgumentError(f"{name}: values must lie in [0, {F.order}) for {F.name}; "
                                f"found {bad[0]}")
        arr = np.array(big, dtype=np.int64).reshape(arr.shape)
    if arr.dtype.kind not in "biu":
        if arr.dtype.kind == "f" and np.all(np.floor(arr) == arr):
            if arr.size and (arr.min() < 0 or arr.max() >= F.order):
                raise ArgumentError(f"{name}: values must lie in [0, {F.order}) for {F.name}; "
                                    f"found range [{arr.min():.6g}, {arr.max():.6g}]")
            arr = arr.astype(np.int64)
        else:
            raise ArgumentTypeError(f"{name}: {F.name} needs integer values, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= F.order:
        raise ArgumentError(f"{name}: values must lie in [0, {F.order}) for {F.name}; "
                            f"found {int(arr.max())}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= F.order):
        raise ArgumentError(
               f"{name}: values must lie in [0, {F.order}) for {F.name}; "
               f"found range [{arr.min()}, {arr.max()}]")
    return arr


@functools.cache
def _galois_field(characteristic: int, degree: int = 1) -> Any:
    import galois  # imported lazily: it takes about 2 s

    return galois.GF(characteristic**degree)


_DEFAULT_PRIME = 2147483647  # 2^31 - 1


def field(spec: Any = "real") -> Field:
    """Build a field from a spec.

    ``"real"``; ``"gf(p)"``, ``"gfp"`` (p = 2^31 - 1), ``"gfp:65521"``, ``"GF(65521)"`` or an int;
    ``"gf(2^8)"`` / ``"gf2^8"``.  A :class:`Field` is returned unchanged.  A refusal names
    ``field`` and the spec given.
    """
    try:
        return _field(spec)
    except (ArgumentError, ArgumentTypeError) as exc:
        if str(exc).startswith("field:"):
            raise
        raise type(exc)(f"field: {spec!r}: {exc}") from None


def _field(spec: Any) -> Field:
    if isinstance(spec, Field):
        return spec
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return PrimeField(int(spec))
    if not isinstance(spec, str):
        raise ArgumentTypeError(f"field: expected a str, int or Field, got {type(spec).__name__} "
                                f"{spec!r}")
    s = spec.strip().lower().replace(" ", "")
    if s in ("real", "reals", "float64", "r"):
        return RealField()
    if s in ("gfp", "gf(p)", "prime"):
        return PrimeField(_DEFAULT_PRIME)
    for prefix in ("gf(2^", "gf2^", "gf(2**", "gf2**"):
        if s.startswith(prefix):
            body = s[len(prefix):].rstrip(")")
            if body.isdigit():
                return BinaryExtField(int(body))
    for prefix in ("gfp:", "gf(", "gf"):
        if s.startswith(prefix):
            body = s[len(prefix):].rstrip(")")
            if body.isdigit():
                return PrimeField(int(body))
    raise ArgumentError(
           f"field: unknown field {spec!r}; known: 'real', 'gf(p)' (p=2^31-1), 'gf(<prime>)', "
           f"'gf(2^T)'")
