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
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dc_field
from typing import TYPE_CHECKING, cast

import numpy as np

from ..errors import ArgumentError, ElasticCodedError
from . import scaling
from . import sparse as _sparse
from ._basis import basis_matrix as _basis_matrix
from .conditioning import UNIT_ROUNDOFF, gamma, rounding_bound
from .fields import Field
from .fields import field as make_field
from .lagrange import LagrangeCode
from .mds import MDSCode

if TYPE_CHECKING:
    from .fields import BinaryExtField, PrimeField

__all__ = ["DEFAULT_TOLERANCE", "Sketch", "make_sketch", "CheckResult", "check", "check_piece",
           "Located", "FaultLocationError", "locate_lagrange", "locate_mds", "default_repeats"]

FALSE_ACCEPT = 1e-9  # target false-accept probability of a check in a finite field
DEFAULT_TOLERANCE = 1e-9
"""The relative error a verified real-field step's estimate is held to unless told otherwise."""
REAL_SKETCH_ROWS = 8
LIE_FACTOR = 20.0  # ||E|| <= 20 ||U E|| except with probability P[chi^2_8 < 1/400] ~ 1e-13
REAL_PROJECTIONS = 2
REAL_SEARCH_LIMIT = 200_000  # candidate sets the real-field fault search may try


def default_repeats(F: Field) -> int:
    """Sketch rows ``t`` (and projections ``J``): over a finite field of order ``q`` the smallest
    ``t >= 2`` with ``q^-t <= 1e-9``; ``8`` in the reals (module docstring)."""
    if not F.exact:
        return REAL_SKETCH_ROWS
    order = cast("PrimeField | BinaryExtField", F).order   # an exact field's
    return max(2, math.ceil(math.log(1 / FALSE_ACCEPT) / math.log(order)))


def _positive_int(name: str, val, lo: int = 1) -> int:
    if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
        raise ArgumentError(f"{name}: must be an int >= {lo}, got {val!r}")
    return int(val)


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
    u_norms: dict = dc_field(default_factory=dict, repr=False)
    """``{(a, b): (||U[:, a:b]||_F, ||U[:, a:b]||_2)}`` of the row ranges checked so far (reals):
    they depend on ``U`` alone, and each is a pass over ``t x (b - a)`` values that a check
    of a long matvec would otherwise pay every step (:func:`_u_norms`)."""

    @property
    def t(self) -> int:
        return self.U.shape[0]

    @property
    def shape(self) -> tuple:
        return self.A.shape

    def __repr__(self) -> str:
        m, n = self.shape
        return (f"<Sketch: t={self.t} of a {m} x {n} matrix over {self.field.name}, "
                f"block {self.block}>")


def make_sketch(field, A: np.ndarray, t: int | None = None, seed=None,
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
    return Sketch(F, U, UA, block, sums, row_sq, A, e)


def _rows(sketch: Sketch, rows) -> tuple[int, int]:
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


def _sq_norm(A) -> float:
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


def _in_range(check_fn):
    """Reals: run a check on ``B`` and ``Y`` scaled by powers of two (exact) so that its
    norms, squares and products stay in float64's range whatever the size of ``A``, ``B`` and
    ``Y``; values within ``2^+-SAFE`` of 1 (and a sketch of ``A`` itself) are checked as they
    are.  The result says the scale (:attr:`CheckResult.exponent`)."""
    @functools.wraps(check_fn)
    def run(sketch: Sketch, B, Y, rows=None, **kw) -> CheckResult:
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
def check(sketch: Sketch, B: np.ndarray, Y: np.ndarray, rows=None, *, condition: float = 1.0,
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
    rounding = 1.01 * (gamma(w) * nU * nY + gamma(w + adds) * nU * nA * nB
                       + gamma(n) * float(np.linalg.norm(Z)) * nB) \
        + UNIT_ROUNDOFF * (float(np.linalg.norm(left)) + scale)
    tol = 1.01 * nU2 * err_Y + rounding
    res = float(np.linalg.norm(left - right))
    return CheckResult(res <= tol, res, tol, scale, rounding, sketch.t)


def check_piece(sketch: Sketch, code: LagrangeCode, B: np.ndarray, decoded: np.ndarray, rows,
                cols=None, positions: Sequence[int] | None = None) -> CheckResult:
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


# -- fault location --------------------------------------------------------------------------------
class FaultLocationError(ElasticCodedError, ValueError):
    """The results are inconsistent but the faulty ones cannot be told apart (too many)."""


@dataclass(frozen=True)
class Located:
    """The outcome of a fault location: ``faulty`` (positions or coded-row indices judged
    wrong), ``trusted`` (all the others), ``used`` (the ``k`` trusted ones ``decoded`` came
    from) and ``decoded`` (as the code's ``decode`` returns it)."""

    faulty: tuple
    trusted: tuple
    used: tuple
    decoded: np.ndarray


def locate_lagrange(code: LagrangeCode, results: Mapping[int, np.ndarray], *,
                    max_faults: int | None = None, projections: int | None = None, seed=None,
                    rtol: float = 1e-8) -> Located:
    """Locate faulty results among ``{position: H}`` (more than ``L`` of them) of one piece and
    decode from the others (module docstring)."""
    positions = [int(p) for p in results]
    if len(set(positions)) != len(positions) or any(not 0 <= p < code.K for p in positions):
        raise ArgumentError(f"results: positions must be distinct in 0..{code.K - 1}, got "
                            f"{positions}")
    shape = np.asarray(results[positions[0]]).shape
    flat = _stack(code.field, [results[p] for p in positions], shape, "results")
    pts = np.asarray(code.alphas)[positions] if code.generator is None else None
    gen = code.encode_matrix[positions] if not code.field.exact else None
    if code.width == 2:  # a complex code: the results in complex form, (re, im) column pairs
        flat = flat[:, 0::2] + 1j * flat[:, 1::2]
    bad = _locate(code.field, flat, code.L, pts, None, gen, max_faults, projections, seed, rtol)
    trusted = [p for i, p in enumerate(positions) if i not in bad]
    used = trusted[:code.L]
    decoded = code.decode({p: results[p] for p in used})
    return Located(tuple(sorted(positions[i] for i in bad)), tuple(sorted(trusted)), tuple(used),
                   decoded)


def locate_mds(code: MDSCode, indices: Sequence[int], coded: np.ndarray, *,
               max_faults: int | None = None, projections: int | None = None, seed=None,
               rtol: float = 1e-8) -> Located:
    """Locate faulty rows among ``coded[j] = (generator @ data)[indices[j]]`` (more than ``k``
    rows) and decode the data from the others (module docstring)."""
    F = code.field
    idx = [int(i) for i in indices]
    if len(set(idx)) != len(idx) or any(not 0 <= i < code.n for i in idx):
        raise ArgumentError(f"indices: must be distinct in 0..{code.n - 1}, got {idx}")
    coded = np.asarray(coded)
    if coded.ndim < 1 or coded.shape[0] != len(idx):
        raise ArgumentError(f"coded: needs {len(idx)} rows (one per index), got shape "
                            f"{coded.shape}")
    flat = _stack(F, list(coded), coded.shape[1:], "coded")
    if F.exact:
        pts, mult = _grs_form(code)
        bad = _locate(F, flat, code.k, pts[idx], mult[idx], None, max_faults, projections, seed,
                      rtol)
    else:
        bad = _locate(F, flat, code.k, None, None, code.generator[idx], max_faults, projections,
                      seed, rtol)
    trusted = [j for j in range(len(idx)) if j not in bad]
    used = trusted[:code.k]
    decoded = code.decode([idx[j] for j in used], coded[used])
    return Located(tuple(sorted(idx[j] for j in bad)), tuple(sorted(idx[j] for j in trusted)),
                   tuple(idx[j] for j in used), decoded)


def _stack(F: Field, arrays, shape, name: str) -> np.ndarray:
    out = []
    for i, h in enumerate(arrays):
        h = F.asarray(h, name)
        if h.shape != tuple(shape):
            raise ArgumentError(f"{name}: every entry must have shape {tuple(shape)}; entry {i} "
                                f"has {h.shape}")
        out.append(h.reshape(-1))
    return np.stack(out)


def _locate(F: Field, flat: np.ndarray, k: int, pts, mult, gen, max_faults, projections, seed,
            rtol) -> set:
    """Indices (rows of ``flat``) of the faulty results.  Finite fields: Berlekamp-Welch on the
    projections ``z_i / mult_i = p(pts_i)``; reals: the least-squares search with generator rows
    ``gen``."""
    n = flat.shape[0]
    if n <= k:
        raise ArgumentError(f"results: need more than k={k} results to look for faults, got {n}")
    most = (n - k) // 2
    f = most if max_faults is None else _positive_int("max_faults", max_faults, 0)
    if f > most:
        raise ArgumentError(f"max_faults: at most floor((n - k) / 2) = {most} faults among n={n} "
                            f"results can be located, got {f}")
    if projections is None:
        J = default_repeats(F) if F.exact else REAL_PROJECTIONS
    else:
        J = _positive_int("projections", projections)
    if F.exact:
        z = F.matmul(flat, F.random((flat.shape[1], J), np.random.default_rng(seed)))
        if mult is not None:
            z = F.div(z, mult[:, None])
        bad: set = set()
        for j in range(J):
            wrong = _berlekamp_welch(F, np.asarray(pts, dtype=F.dtype), z[:, j], k, f)
            if wrong is None:
                raise FaultLocationError(
                    f"results: inconsistent, with more than max_faults={f} faulty among {n} "
                    f"(k={k}); they cannot be located")
            bad |= wrong
        if len(bad) > f:
            raise FaultLocationError(f"results: {len(bad)} faulty results found, more than "
                                     f"max_faults={f}; they cannot be trusted to be located")
        return bad
    if not rtol > 0:
        raise ArgumentError(f"rtol: must be > 0, got {rtol!r}")
    z = flat @ np.random.default_rng(seed).standard_normal((flat.shape[1], J))
    return _least_squares_search(np.asarray(gen), z, f, rtol)


def _least_squares_search(G: np.ndarray, z: np.ndarray, f: int, rtol: float) -> set:
    n = G.shape[0]
    total = sum(math.comb(n, e) for e in range(f + 1))
    if total > REAL_SEARCH_LIMIT:
        raise ArgumentError(f"max_faults: {f} among {n} results means {total} candidate sets, more "
                            f"than the real-field search's limit {REAL_SEARCH_LIMIT}; "
                            "pass a smaller one")
    for e in range(f + 1):
        combos = list(itertools.combinations(range(n), e))
        X = np.asarray(combos, dtype=np.int64).reshape(len(combos), e)
        keep = np.asarray([np.setdiff1d(np.arange(n), x) for x in X])  # (N, n - e)
        Q, _ = np.linalg.qr(G[keep])
        zk = z[keep]  # (N, n - e, J)
        res = zk - Q @ (np.swapaxes(Q, 1, 2).conj() @ zk)
        rel = np.linalg.norm(res, axis=(1, 2)) / np.maximum(np.linalg.norm(zk, axis=(1, 2)),
                                                            np.finfo(np.float64).tiny)
        ok = np.nonzero(rel <= rtol)[0]
        if len(ok) == 1:
            return set(X[ok[0]].tolist())
        if len(ok) > 1:
            raise FaultLocationError(
                f"results: {len(ok)} different sets of {e} results explain the inconsistency "
                f"equally well (rtol={rtol}); the faulty ones cannot be located")
    raise FaultLocationError(f"results: inconsistent, with more than max_faults={f} faulty among "
                             f"{n}; they cannot be located")


def _grs_form(code: MDSCode) -> tuple[np.ndarray, np.ndarray]:
    """Points ``a`` and multipliers ``v`` with ``(generator @ d)_i = v_i p(a_i)`` for a polynomial
    ``p`` of degree ``< k`` (a systematic Cauchy code is a generalized Reed-Solomon code: with
    ``Pi(x) = prod_j (x - y_j)``, ``v = 1 / Pi'(y_j)`` on the data rows and ``1 / Pi(x_i)`` on the
    parity rows).  Checked against the generator."""
    F, n, k = code.field, code.n, code.k
    pts = F.points(n)
    y, x = pts[:k], pts[k:]
    dy = F.sub(y[:, None], y[None, :])
    dy[np.arange(k), np.arange(k)] = 1
    v_sys = F.inv(_prod(F, dy))
    v_par = F.inv(_prod(F, F.sub(x[:, None], y[None, :]))) if n > k else F.zeros(0)
    mult = np.concatenate([v_sys, v_par]).astype(F.dtype)
    # generator[i, j] must be v_i * ell_j(a_i) / v_j with ell_j the Lagrange basis through y
    want = F.mul(F.mul(mult[:, None], _basis_matrix(F, y, pts)), F.inv(v_sys)[None, :])
    if not np.array_equal(np.asarray(want), np.asarray(code.generator)):
        raise ArgumentError("code: not a systematic Cauchy MDS code as mds_code builds it")
    return pts, mult


def _prod(F: Field, M: np.ndarray) -> np.ndarray:
    out = M[:, 0]
    for j in range(1, M.shape[1]):
        out = F.mul(out, M[:, j])
    return out


def _berlekamp_welch(F: Field, pts: np.ndarray, vals: np.ndarray, k: int, e: int) -> set | None:
    """Positions where ``vals`` differ from the unique polynomial of degree ``< k`` within ``e``
    errors of them, or ``None`` when there is none."""
    n = len(pts)
    powers = [np.ones(n, dtype=F.dtype)]
    for _ in range(e + k):
        powers.append(F.mul(powers[-1], pts))
    V = np.stack(powers, axis=1)  # V[i, j] = pts_i^j
    # Q(a_i) - vals_i E(a_i) = 0 with E monic of degree e: unknowns Q_0..Q_{e+k-1}, E_0..E_{e-1}
    M = np.concatenate([V[:, :e + k], F.sub(0, F.mul(vals[:, None], V[:, :e]))], axis=1)
    sol = _solve_any(F, M, F.mul(vals, V[:, e]))
    if sol is None:
        return None
    Q = sol[:e + k]
    E = np.concatenate([sol[e + k:], np.ones(1, dtype=F.dtype)])
    P, rem = _poly_divmod(F, Q, E)
    if np.any(rem != 0):
        return None
    fit = np.zeros(n, dtype=F.dtype)
    for c in P[::-1]:  # Horner
        fit = F.add(F.mul(fit, pts), c)
    wrong = set(np.nonzero(fit != vals)[0].tolist())
    return wrong if len(wrong) <= e else None


def _solve_any(F: Field, M: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """A solution of ``M x = rhs`` over ``F`` (free unknowns 0), or ``None`` if there is none."""
    R = np.concatenate([M, rhs[:, None]], axis=1).astype(F.dtype)
    rows, cols = R.shape[0], R.shape[1] - 1
    pivots: list[int] = []
    r = 0
    for c in range(cols):
        if r == rows:
            break
        nz = np.nonzero(R[r:, c])[0]
        if not len(nz):
            continue
        p = r + int(nz[0])
        R[[r, p]] = R[[p, r]]
        R[r] = F.mul(R[r], F.inv(R[r, c]))
        others = np.arange(rows) != r
        R[others] = F.sub(R[others], F.mul(R[others, c][:, None], R[r][None, :]))
        pivots.append(c)
        r += 1
    if np.any(R[r:, cols] != 0):
        return None
    x = np.zeros(cols, dtype=F.dtype)
    x[pivots] = R[:len(pivots), cols]
    return x


def _poly_divmod(F: Field, num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quotient and remainder of polynomials (coefficients lowest degree first; ``den`` monic)."""
    num = num.copy()
    d = len(den)
    if len(num) < d:
        return np.zeros(0, dtype=F.dtype), num
    q = np.zeros(len(num) - d + 1, dtype=F.dtype)
    for i in range(len(q) - 1, -1, -1):
        q[i] = num[i + d - 1]
        num[i:i + d] = F.sub(num[i:i + d], F.mul(q[i], den))
    return q, num[:d - 1]
