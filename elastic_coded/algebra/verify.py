"""Checking coded results: Freivalds sketches of ``A``, and locating faulty results from the
redundancy of Lagrange and MDS codes.  Pure: numpy (and galois through the fields) only.

**Sketch check.**  ``make_sketch`` draws ``U`` (``t x m``, uniform over a finite field, standard
Gaussian in the reals) once and keeps ``U A``.  ``check(sketch, B, Y, rows=(a, b))`` accepts
``Y = A[a:b] @ B`` by comparing ``U[:, a:b] Y`` with ``(U[:, a:b] A[a:b]) B``; the bracket comes
from block sums stored with the sketch (prefix sums over a finite field, per-block sums in the
reals), so a check costs ``t ((b-a) r + n r)`` multiply-adds, plus at most ``2 t block n`` for the
rows between ``a``, ``b`` and the nearest block edges (none for ``rows=None``, which checks all of
``A @ B``), and never a product with ``A``.  ``block`` defaults to ``ceil(sqrt(m))``; the sketch
then holds ``(m / block + 1) t n`` values besides ``U`` and a reference to ``A`` (not a copy:
changing ``A`` afterwards invalidates the sketch).

*Finite fields.*  Exact comparison.  For any fixed wrong ``Y`` (``E = Y - A[a:b] B != 0``) a
column ``e != 0`` of ``E`` gives ``u e`` uniform over the field for each row ``u`` of ``U``, so the
check accepts with probability at most ``q^-t`` (``q`` the field's order; ``q^-(t rank E)``
exactly) provided ``U`` is unknown to whoever produced ``Y``: draw the sketch from an
unpredictable seed (``seed=None``).  The default
``t`` is the smallest ``t >= 2`` with ``q^-t <= 1e-9``: 2 for ``p = 2^31 - 1`` and ``p = 65521``
(``2.3e-10``), 4 for ``GF(2^8)`` (``2.3e-10``).

*Reals.*  The check accepts when ``||U_s Y - Z B||_F <= tol`` (``U_s = U[:, a:b]``, ``Z`` the
computed ``U_s A[a:b]``, ``w = b - a``, ``n`` = ``A``'s columns) with

    tol = 1.01 (||U_s||_2 err_Y + gamma_w ||U_s||_F ||Y||_F
                + gamma_{w+nb+2} ||U_s||_F ||A_s||_F ||B||_F + gamma_n ||Z||_F ||B||_F)
          + u (||U_s Y||_F + ||Z B||_F)

where ``err_Y = gamma_{n + extra_terms} * condition * ||A_s||_F ||B||_F`` bounds the honest
error of ``Y`` (``condition = 1, extra_terms = 0`` for a plain product; for a Lagrange decode
from positions ``P``, ``condition = code.decode_condition(P)`` and ``extra_terms = 10 L``:
``lagrange.py``'s bound) and the other terms bound the rounding of the check itself.  An honest
``Y`` therefore always passes.  A perturbation ``E`` adds ``U_s E`` to the residual;
``||U_s E||_F^2`` is a sum of ``sigma_k(E)^2 chi^2_t`` terms, and any ``||U_s E||_F > 2 tol``
rejects, so with the default ``t = 8`` a rank-one ``E`` with ``||E||_F >= 40 tol`` is rejected
except with probability ``P[chi^2_8 < 1/400] ~ 1e-13`` (rank one has the heaviest lower tail:
higher ranks average several ``chi^2_t`` terms).  The bound
is a worst case: ``CheckResult.tolerance / scale`` shows how loose it is against the result's
size, and it grows with ``condition`` (for ill-conditioned decodes it can exceed the result).

**Fault location.**  Each result is projected onto ``J`` random vectors: position ``i`` gives
``z_i = vec(H_i) . y_j``, and honest ``z`` form a codeword (``z = G w``).  Over a finite field
both codes are generalized Reed-Solomon codes (Lagrange: ``z_i = p(alpha_i)`` for a polynomial
``p`` of degree ``< L``; Cauchy MDS: ``z_i = v_i p(a_i)``), decoded by Berlekamp-Welch: with ``n``
results and ``max_faults = f`` (default ``floor((n - k) / 2)``), up to ``f`` faulty results are
located exactly, and ``f < e <= n - k - f`` faulty results are detected (a
:class:`FaultLocationError`, never a decode); ``e > n - k - f`` colluding results can be
mistaken for ``e' <= f`` others (no code tells them apart: check the decode with a sketch).  A
faulty result escapes all ``J`` projections with probability ``q^-J`` (default ``J`` as ``t``).
In the reals the same search runs over the sets of ``0..f`` excluded results (smallest first;
a complex code's results projected in complex form):
a set is consistent when the least-squares residual of its projections is at most ``rtol`` times
their norm; two consistent sets of the same size are reported as unlocatable.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dc_field
from typing import Any

import numpy as np

from ..errors import ArgumentError
from . import scaling
from . import sparse as _sparse
from ._common import default_repeats
from ._common import positive_int as _positive_int
from .conditioning import UNIT_ROUNDOFF, gamma, rounding_bound
from .fields import Field
from .fields import field as make_field
from .lagrange import LagrangeCode
from .locate import FaultLocationError, Located, locate_lagrange, locate_mds

__all__ = ["DEFAULT_TOLERANCE", "Sketch", "make_sketch", "CheckResult", "check", "check_piece",
           "Located", "FaultLocationError", "locate_lagrange", "locate_mds", "default_repeats"]

DEFAULT_TOLERANCE = 1e-9
"""The relative error a verified real-field step's estimate is held to unless told otherwise."""
LIE_FACTOR = 20.0  # ||E|| <= 20 ||U E|| except with probability P[chi^2_8 < 1/400] ~ 1e-13




# -- sketches --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Sketch:
    """``U`` (``t x m``) and ``UA = U @ A`` (``t x n``) for a matrix ``A`` over ``field``, with
    ``sums``: over a finite field the prefix sums ``sums[c] = U[:, :c*block] A[:c*block]``
    (``c = 0..ceil(m/block)``), in the reals the per-block products
    ``sums[c] = U[:, c*block:(c+1)*block] A[c*block:(c+1)*block]`` and ``row_sq[c]``, the blocks'
    squared Frobenius norms.  Build with :func:`make_sketch`."""

    field: Field
    U: np.ndarray
    UA: np.ndarray
    block: int
    sums: np.ndarray
    row_sq: np.ndarray
    A: np.ndarray
    exponent: int = 0
    """Reals: the sketch is of ``A 2^-exponent`` (``0`` unless ``A``'s entries lie outside
    ``2^+-SAFE``, :mod:`~elastic_coded.algebra.scaling`; then ``A`` is a scaled copy)."""
    u_norms: dict[tuple[int, int], tuple[float, float]] = dc_field(default_factory=dict,
                                                                   repr=False)
    """``{(a, b): (||U[:, a:b]||_F, ||U[:, a:b]||_2)}`` of the row ranges checked so far (reals):
    they depend on ``U`` alone, and each is a pass over ``t x (b - a)`` values that a check
    of a long matvec would otherwise pay every step (:func:`_u_norms`)."""
    ua_norm: float = math.nan
    """``||UA||_F`` (reals), for the check of the whole product: a pass over ``t x n`` values
    each step otherwise."""

    @property
    def t(self) -> int:
        return int(self.U.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        return self.A.shape

    def __repr__(self) -> str:
        m, n = self.shape
        return (f"<Sketch: t={self.t} of a {m} x {n} matrix over {self.field.name}, "
                f"block {self.block}>")


def make_sketch(field: Any, A: np.ndarray, t: int | None = None, seed: Any = None,
                block: int | None = None) -> Sketch:
    """A sketch of ``A`` (``m x n``) over ``field`` with ``t`` rows (default
    :func:`default_repeats`) drawn from ``seed`` (``None``: fresh OS entropy, as a check against
    untrusted machines needs) and row blocks of ``block`` rows (default ``ceil(sqrt(m))``)."""
    F = make_field(field)
    A = F.asarray(A, "A")
    if A.ndim != 2 or 0 in A.shape:
        raise ArgumentError(f"A: must be a non-empty 2-D matrix, got shape {A.shape}")
    e = 0 if F.exact or abs(scaling.exponent(A)) <= scaling.SAFE else scaling.exponent(A)
    A = scaling.scaled(A, e)  # far from 1: its squared norms would leave float64's range
    m, n = A.shape
    t = default_repeats(F) if t is None else _positive_int("t", t)
    if block is None:  # a sparse A: one block (block sums are dense, t x n each; a row
        # range's part is cheap from A itself, t x its nonzeros)
        block = m if _sparse.is_sparse(A) else math.isqrt(m - 1) + 1
    block = _positive_int("block", block)
    block = min(block, m)
    U = F.random((t, m), np.random.default_rng(seed))
    edges = list(range(0, m, block)) + [m]
    parts = [F.matmul(U[:, a:b], A[a:b]) for a, b in zip(edges[:-1], edges[1:])]
    if F.exact:
        prefix = [F.zeros((t, n))]
        for part in parts:
            prefix.append(F.add(prefix[-1], part))
        sums = np.stack(prefix)
        UA = sums[-1]
        row_sq = np.zeros(0)
    else:
        sums = np.stack(parts)
        UA = F.matmul(U, A)
        row_sq = np.asarray([_sq_norm(A[a:b]) for a, b in zip(edges[:-1], edges[1:])])
    return Sketch(F, U, UA, block, sums, row_sq, A, e,
                  ua_norm=math.nan if F.exact else float(np.linalg.norm(UA)))


def _rows(sketch: Sketch, rows: Any) -> tuple[int, int]:
    m = sketch.shape[0]
    if rows is None:
        return 0, m
    try:
        a, b = (int(x) for x in rows)
    except (TypeError, ValueError):
        raise ArgumentError(f"rows: must be a pair (start, stop), got {rows!r}") from None
    if not 0 <= a < b <= m:
        raise ArgumentError(f"rows: need 0 <= start < stop <= {m}, got {rows!r}")
    return a, b


def _sketch_rows(sketch: Sketch, a: int, b: int) -> tuple[np.ndarray, float, int]:
    """``(Z, ||A[a:b]||_F^2, additions)``: ``Z = U[:, a:b] A[a:b]`` from the stored block sums
    and at most two partial blocks; ``additions`` counts the block sums added (reals)."""
    F, s, m = sketch.field, sketch.block, sketch.shape[0]
    if (a, b) == (0, m):
        return sketch.UA, float(np.sum(sketch.row_sq)), 0
    ca, cb = -(-a // s), b // s  # first and one-past-last whole block inside [a, b)
    if ca >= cb:  # inside one block (or across one edge): directly
        return F.matmul(sketch.U[:, a:b], sketch.A[a:b]), _sq(sketch, a, b), 0
    if F.exact:
        Z = F.sub(sketch.sums[cb], sketch.sums[ca])
    else:
        Z = sketch.sums[ca:cb].sum(axis=0)
    norm_sq = float(np.sum(sketch.row_sq[ca:cb]))
    for lo, hi in ((a, ca * s), (cb * s, b)):
        if hi > lo:
            Z = F.add(Z, F.matmul(sketch.U[:, lo:hi], sketch.A[lo:hi]))
            norm_sq += _sq(sketch, lo, hi)
    return Z, norm_sq, cb - ca + 2


U_NORMS_KEPT = 1024
"""Row ranges whose :func:`_u_norms` a sketch keeps (a plan's pieces, over a few plans)."""


def _u_norms(sketch: Sketch, a: int, b: int) -> tuple[float, float]:
    """``(||U[:, a:b]||_F, ||U[:, a:b]||_2)``, computed once per row range
    (:attr:`Sketch.u_norms`)."""
    got = sketch.u_norms.get((a, b))
    if got is None:
        Us = sketch.U[:, a:b]
        got = (float(np.linalg.norm(Us)),
               math.sqrt(max(0.0, float(np.linalg.eigvalsh(Us @ Us.T)[-1]))))
        if len(sketch.u_norms) >= U_NORMS_KEPT:
            sketch.u_norms.clear()
        sketch.u_norms[(a, b)] = got
    return got


def _sq(sketch: Sketch, a: int, b: int) -> float:
    return 0.0 if sketch.field.exact else _sq_norm(sketch.A[a:b])


def _sq_norm(A: Any) -> float:
    """``||A||_F^2``, dense or sparse."""
    return _sparse.sq_norm(A) if _sparse.is_sparse(A) else float(np.sum(A ** 2))


@dataclass(frozen=True)
class CheckResult:
    """The outcome of :func:`check`.  Reals: ``residual = ||U_s Y - Z B||_F``, ``tolerance`` the
    bound it must not exceed, ``scale = ||Z B||_F`` (so ``tolerance / scale`` is the relative
    tolerance).  Finite fields: ``residual`` = the number of sketch entries that differ,
    ``tolerance = 0``, ``scale`` = the number compared."""

    ok: bool
    residual: float
    tolerance: float
    scale: float
    rounding: float = 0.0
    """Reals: the part of ``tolerance`` that bounds the check's own rounding."""
    rows: int = 0
    """Reals: the sketch rows ``t`` the residual is over."""

    def estimated_error(self) -> float:
        """Reals: an estimate of ``||Y - A[a:b] B||_F`` itself, ``residual / sqrt(t)`` (for a
        Gaussian ``U`` of ``t`` rows, ``E ||U E||_F^2 = t ||E||_F^2``; the check's own rounding
        is in the residual too, so this errs high when the error is below it).  ``0`` over a
        finite field."""
        return 0.0 if self.tolerance == 0.0 else scaling.ldexp(
            self.residual / math.sqrt(max(1, self.rows)), self.exponent)
    exponent: int = 0
    """Reals: ``residual``, ``tolerance``, ``scale`` and ``rounding`` are those of ``Y``
    scaled by ``2^-exponent`` (:func:`_in_range`); :meth:`accepted_error` is in ``Y``'s
    units."""

    def accepted_error(self) -> float:
        """Reals: a bound on ``||Y - A[a:b] B||_F`` for a ``Y`` this check looked at, whoever
        computed it: ``LIE_FACTOR (residual + rounding)``, since ``||U_s E||_F <= residual +
        rounding`` and ``||U_s E||_F >= ||E||_F / LIE_FACTOR`` except with probability
        ``P[chi^2_t < 1/LIE_FACTOR^2]`` (about ``1e-13`` at ``t = 8``; module docstring), for an
        ``E`` chosen without knowing ``U``.  ``0`` over a finite field (the check is exact)."""
        return 0.0 if self.tolerance == 0.0 else scaling.ldexp(
            LIE_FACTOR * (self.residual + self.rounding), self.exponent)

    def __bool__(self) -> bool:
        return self.ok


def _in_range(check_fn: Callable[..., CheckResult]) -> Callable[..., CheckResult]:
    """Reals: run a check on ``B`` and ``Y`` scaled by powers of two (exact) so that its
    norms, squares and products stay in float64's range whatever the size of ``A``, ``B`` and
    ``Y``; values within ``2^+-SAFE`` of 1 (and a sketch of ``A`` itself) are checked as they
    are.  The result says the scale (:attr:`CheckResult.exponent`)."""
    @functools.wraps(check_fn)
    def run(sketch: Sketch, B: Any, Y: Any, rows: Any = None, **kw: Any) -> CheckResult:
        if sketch.field.exact or not isinstance(B, np.ndarray) or not isinstance(Y, np.ndarray):
            return check_fn(sketch, B, Y, rows, **kw)
        eB, eY = scaling.exponent(B), scaling.exponent(Y)
        if sketch.exponent == 0 and max(abs(eB), abs(eY)) <= scaling.SAFE:
            return check_fn(sketch, B, Y, rows, **kw)
        k = sketch.exponent + eB  # Y = A B  <=>  Y 2^-k = (A 2^-exponent) (B 2^-eB)
        res = check_fn(sketch, scaling.scaled(B, eB), scaling.scaled(Y, k), rows, **kw)
        return replace(res, exponent=k)
    return run


@_in_range
def check(sketch: Sketch, B: np.ndarray, Y: np.ndarray, rows: Any = None, *, condition: float = 1.0,
          extra_terms: int = 0) -> CheckResult:
    """Is ``Y == A[a:b] @ B`` (``rows = (a, b)``; ``None``: all rows)?  Reals: within the module
    docstring's tolerance, with ``condition`` and ``extra_terms`` describing how ``Y`` was
    computed (defaults: a plain product)."""
    F = sketch.field
    a, b = _rows(sketch, rows)
    n = sketch.shape[1]
    B = F.asarray(B, "B")
    Y = F.asarray(Y, "Y")
    if B.ndim != 2 or B.shape[0] != n:
        raise ArgumentError(f"B: must be 2-D with {n} rows (A's columns), got shape {B.shape}")
    if Y.shape != (b - a, B.shape[1]):
        raise ArgumentError(f"Y: must have shape {(b - a, B.shape[1])} (rows {a}:{b} of A @ B), "
                            f"got {Y.shape}")
    extra_terms = _positive_int("extra_terms", extra_terms, 0)
    Us = sketch.U[:, a:b]
    Z, norm_sq, adds = _sketch_rows(sketch, a, b)
    left = F.matmul(Us, Y)
    right = F.matmul(Z, B)
    if F.exact:
        bad = int(np.count_nonzero(F.sub(left, right)))
        return CheckResult(bad == 0, float(bad), 0.0, float(left.size))
    w = b - a
    nA, nB, nY = math.sqrt(norm_sq), float(np.linalg.norm(B)), float(np.linalg.norm(Y))
    nU, nU2 = _u_norms(sketch, a, b)
    err_Y = rounding_bound(n + extra_terms, condition, nA, nB)
    scale = float(np.linalg.norm(right))
    nZ = sketch.ua_norm if Z is sketch.UA else float(np.linalg.norm(Z))
    rounding = 1.01 * (gamma(w) * nU * nY + gamma(w + adds) * nU * nA * nB
                       + gamma(n) * nZ * nB) \
        + UNIT_ROUNDOFF * (float(np.linalg.norm(left)) + scale)
    tol = 1.01 * nU2 * err_Y + rounding
    res = float(np.linalg.norm(left - right))
    return CheckResult(res <= tol, res, tol, scale, rounding, sketch.t)


def check_piece(sketch: Sketch, code: LagrangeCode, B: np.ndarray, decoded: np.ndarray,
                rows: Any, cols: Any = None, positions: Sequence[int] | None = None) -> CheckResult:
    """Check a decoded piece: ``decoded[l] == A[a:b] @ B_l[:, c0:c1]`` for every block ``l``
    (``B``: the whole input, ``v x r``, cut into ``L`` blocks of ``r/L`` columns; ``cols = (c0,
    c1)`` or ``None`` for all).  In the reals ``positions`` (the ``L`` it was decoded from) set
    the tolerance through ``code.decode_condition``."""
    F = code.field
    B = F.asarray(B, "B")
    if B.ndim != 2 or B.shape[1] % (code.L * code.width):
        raise ArgumentError(f"B: must be 2-D with columns divisible by L={code.L} times the code's "
                            f"width {code.width}, got {B.shape}")
    c = B.shape[1] // code.L
    c0, c1 = (0, c) if cols is None else (int(cols[0]), int(cols[1]))
    if not 0 <= c0 < c1 <= c:
        raise ArgumentError(f"cols: need 0 <= start < stop <= {c}, got {cols!r}")
    a, b = _rows(sketch, rows)
    decoded = np.asarray(decoded)
    if decoded.shape != (code.L, b - a, c1 - c0):
        raise ArgumentError(f"decoded: must have shape {(code.L, b - a, c1 - c0)}, got "
                            f"{decoded.shape}")
    Bp = B.reshape(B.shape[0], code.L, c)[:, :, c0:c1].reshape(B.shape[0], -1)
    Yp = decoded.transpose(1, 0, 2).reshape(b - a, -1)
    if F.exact:
        return check(sketch, Bp, Yp, (a, b))
    if positions is None:
        raise ArgumentError("positions: a real-field piece check needs the L positions it was "
                            "decoded from (they set the tolerance)")
    return check(sketch, Bp, Yp, (a, b), condition=code.decode_condition(positions),
                 extra_terms=code.extra_terms)
