"""Lagrange coding of the input ``B`` (MATH.md §1, eq. 2, eq. 3 and decoding).

``B`` is split into ``L`` column blocks ``B_l``.  A code with ``K = L + S`` *positions* sends the
machine in position ``i`` of a piece ``B~_i = sum_l E[i, l] B_l`` and any ``L`` results
``A_g B~_i`` of the piece give back every ``A_g B_l`` through ``D_P = E_P^-1``.  The USCTEC
family needs nothing more of a code than that any ``L`` of its ``K`` rows are invertible (MDS).
Over a finite field and for the Chebyshev sets ``E`` is the Lagrange basis (eq. 2):

    E[i, l] = prod_{k != l} (alpha_i - beta_k) / (beta_l - beta_k)

and the decode its closed form (the basis through the chosen ``alpha`` s at the ``beta`` s).
Points are chosen per piece (position ``i`` of every piece uses row ``i``) rather than one per
machine: a piece involves only ``K`` positions, so the encoder computes only ``K`` coded blocks
per step however many machines there are.

**Complex codes in the reals (rotation embedding).**  A complex ``E`` acts on real data by pairing
columns: block ``l`` is read as ``B_l[:, 0::2] + i B_l[:, 1::2]``, coded in complex arithmetic and
written back interleaved (real parts in the even columns, imaginary in the odd).  Since ``A`` is
real, ``A (X + iY) = AX + iAY``: the machines multiply real matrices as always, and the decode
undoes the pairing.  In real arithmetic this is the code whose ``2K x 2L`` matrix has the 2x2
rotation-scaling blocks ``[[a, -b], [b, a]]`` of the entries ``a + ib`` (Ramamoorthy and Tang's
embedding), so the real field gets the conditioning of complex matrices.  The blocks then need an
even column count (:attr:`LagrangeCode.width` is 2).

**Point sets (real field).**  ``lagrange_code(F, L, S, points=...)`` with ``points`` one of

- ``"auto"`` (default): ``"chebyshev"`` where its decodes are well conditioned (``L = 1``, or the
  worst decode over contiguous runs of stragglers, where the polynomial codes are worst, has
  ``kappa <=`` :data:`AUTO_LIMIT`); else ``"roots-of-unity"`` where that is within
  :data:`ROOTS_LIMIT` (few stragglers); else ``"rotation"``.  The code records the set it
  resolved to.
- ``"rotation"``: a random complex ``E`` with orthonormal columns (the QR factor of a complex
  Gaussian matrix, rows then scaled to unit norm; drawn from a seed fixed by ``L`` and ``S``, so
  every process builds the same code) in the rotation embedding.  A complex Gaussian square
  matrix has ``P[sigma_min < eps / sqrt(n)] <= eps^2`` (Edelman), against ``eps`` for a real
  one: its worst decodes are far better conditioned than any real code's.  Measured worst cases
  (a large sample and a swap ascent: lower bounds) in ``benchmarks/results/conditioning.md``:
  about ``1e4`` at ``(L, S) = (20, 12)``, where Chebyshev points reach ``3e13``.  Any ``L`` rows
  are invertible with probability 1; the decode inverts ``E_P`` numerically.
- ``"roots-of-unity"``: the Lagrange code through ``alpha`` = the ``K``-th roots of unity and
  ``beta`` = the ``L``-th roots turned by half a step, in the same embedding (the polynomial
  code of the rotation-embedding papers).  The best of all at ``S`` up to about 4, far worse
  than ``"rotation"`` at large ``S`` (``1e7`` at ``(20, 12)``).
- ``"chebyshev"``: ``alpha`` = the ``K`` Chebyshev nodes of the first kind,
  ``cos((2i+1) pi / 2K)``, and ``beta`` = the ``L`` Chebyshev nodes of the first kind.  When the
  two grids share a node (exactly when ``K/g`` and ``L/g`` are both odd, ``g = gcd(K, L)``) the
  ``beta`` angles are turned by ``pi / (4 lcm(K, L))``.
- ``"chebyshev-interleaved"`` / ``"chebyshev2-interleaved"``: ``K + L`` first- (second-) kind
  nodes, the ``beta`` s spread evenly through them and the ``alpha`` s the rest.

Finite fields have one set, ``"consecutive"``: ``alpha = 0..K-1``, ``beta = K..K+L-1``.

**Conditioning (real field).**  :meth:`LagrangeCode.decode_condition` is the amplification factor
``kappa(P) = || |D_P| |E_P| ||_2`` of a decode from the positions ``P`` (on the real form for a
complex code; :mod:`.conditioning`).  Encoding, the workers' products and the decode in float64
then satisfy (standard rounding model, unit roundoff ``u = 2^-53``, ``gamma_n = n u / (1 - n u)``,
``v`` = the inner dimension of ``A B``, ``w`` = :attr:`LagrangeCode.width`)

    || Y - A B ||_F  <=  gamma_{v + 10 w L} * kappa(P) * ||A||_F * ||B||_F

(``gamma_{wL}`` from the encode sum, ``gamma_v`` from the product, ``gamma_{wL}`` from the decode
sum, ``2 gamma_{4wL}`` from computing ``E`` and ``D``, whose product is then ``I`` only to that
accuracy; for a numerically inverted ``D_P`` the measured ``|| D_P E_P - I ||_2`` is folded into
``kappa``, see :meth:`LagrangeCode.decode_condition`).  :meth:`LagrangeCode.error_bound` evaluates
it; measured relative errors of random data run at about ``u * kappa(P)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ._basis import basis_matrix, chebyshev_nodes, embed
from .conditioning import (
    UNIT_ROUNDOFF,
    best_subset,
    conditions,
    gamma,
    matrix_conditions,
    rounding_bound,
    search_worst,
    solve_condition,
    worst_condition,
)
from .fields import Field
from .fields import field as make_field

__all__ = ["LagrangeCode", "lagrange_code", "code_width", "REAL_POINT_SETS", "FINITE_POINT_SETS",
           "AUTO_LIMIT", "ROOTS_LIMIT", "UNIT_ROUNDOFF",
           "conditions", "solve_condition", "worst_condition", "search_worst", "gamma",
           "rounding_bound", "chebyshev_nodes"]

REAL_POINT_SETS = ("auto", "chebyshev", "rotation", "roots-of-unity", "chebyshev-interleaved",
                   "chebyshev2-interleaved")
FINITE_POINT_SETS = ("consecutive",)
AUTO_LIMIT = 1e3
"""``"auto"`` keeps Chebyshev points while their worst contiguous-run decode is at most this."""
ROOTS_LIMIT = 1e4
"""... and takes the roots of unity (few stragglers) while theirs is at most this."""
_ROTATION_SEED = 0x524F54  # with L and S: the seed of the "rotation" code's generator


@dataclass(frozen=True, eq=False)
class LagrangeCode:
    """A code over ``field`` with ``L`` data blocks and ``K = L + S`` positions: the Lagrange
    code through ``alphas`` and ``betas``, or, when ``generator`` is given (``K x L``), the code
    with that encode matrix."""

    field: Field
    L: int
    S: int
    alphas: tuple[Any, ...]
    betas: tuple[Any, ...]
    points: str = "custom"
    generator: np.ndarray | None = None

    @property
    def K(self) -> int:
        return self.L + self.S

    @property
    def width(self) -> int:
        """2 for a complex code (columns go in ``(re, im)`` pairs: a block's column count must
        be even), else 1."""
        return 2 if np.iscomplexobj(self.encode_matrix) else 1

    @property
    def extra_terms(self) -> int:
        """The rounding terms a decode adds to a product's (the ``10 w L`` of the bound)."""
        return 10 * self.width * self.L

    def __repr__(self) -> str:
        return f"<Lagrange code: L={self.L}, S={self.S} over {self.field.name}, {self.points}>"

    # -- matrices -----------------------------------------------------------------------------
    @functools.cached_property
    def identity(self) -> bool:
        """``L = 1`` and every position's decode weight is one: a result is its block's
        product itself (nothing to decode; its condition is one)."""
        return self.L == 1 and all(
            np.asarray(self.decode_matrix([p]))[0, 0] == 1 for p in range(self.K))

    @functools.cached_property
    def encode_matrix(self) -> np.ndarray:
        """``E`` (K x L): ``E[i, l] = prod_{k != l} (alpha_i - beta_k) / (beta_l - beta_k)``,
        or the generator."""
        if self.generator is not None:
            return self.generator
        F = None if np.iscomplexobj(np.asarray(self.alphas)) else self.field
        return basis_matrix(F, np.asarray(self.betas), np.asarray(self.alphas))

    def decode_matrix(self, positions: Sequence[int]) -> np.ndarray:
        """``D[l, j]``: weight of the result of ``positions[j]`` in ``A B_l`` (L x L)."""
        return self._decode_matrix(self._checked(positions))

    # a memo of decodes: the code is frozen and hashed by identity, and the cache keeping it
    # alive (as long as its entries last) is accepted
    @functools.lru_cache(maxsize=4096)  # noqa: B019
    def _decode_matrix(self, positions: tuple[int, ...]) -> np.ndarray:
        if self.generator is not None:
            return np.linalg.inv(self.generator[list(positions)])
        al = np.asarray(self.alphas)[list(positions)]
        F = None if np.iscomplexobj(al) else self.field
        # basis polynomials through the chosen alphas, evaluated at the betas: (L x L) = [l, j]
        return basis_matrix(F, al, np.asarray(self.betas))

    def _checked(self, positions: Any) -> tuple[int, ...]:
        P = tuple(int(p) for p in positions)
        if len(P) != self.L or len(set(P)) != self.L:
            raise ArgumentError(
                   f"positions: need exactly L={self.L} distinct positions to decode, got {P}")
        bad = [p for p in P if not 0 <= p < self.K]
        if bad:
            raise ArgumentError(f"positions: {bad} outside 0..{self.K - 1}")
        return P

    # -- encode / decode ------------------------------------------------------------------------
    def encode(self, B: np.ndarray, positions: Sequence[int] | None = None,
               cols: int | None = None) -> np.ndarray:
        """Coded blocks ``B~_i`` for ``positions`` (default all K): array ``(len, v, r/L)``.
        ``cols``: ``B`` as if followed by zero columns up to ``cols`` (``r`` then: a matvec's
        one column for ``L = 2``); the blocks that would hold only those zeros are left out of
        the products (they add nothing), not materialized."""
        B = np.asarray(B)
        if B.ndim != 2:
            raise ArgumentError(f"B: must be 2-D, got shape {B.shape}")
        v, r = B.shape
        r = r if cols is None else int(cols)
        if r < B.shape[1]:
            raise ArgumentError(f"cols: {r} is fewer than B's {B.shape[1]} columns")
        if r % (self.L * self.width):
            raise ArgumentError(f"B: its {r} columns must be divisible by L={self.L}"
                                + (f" times {self.width} (a complex code)" if self.width > 1
                                   else ""))
        c = r // self.L
        E = self.encode_matrix if positions is None else self.encode_matrix[list(positions)]
        k = -(-B.shape[1] // c) if self.width == 1 else self.L  # blocks holding B's columns
        if B.shape[1] < k * c:
            B = np.concatenate([B, self.field.zeros((v, k * c - B.shape[1]))], axis=1)
        blocks = B.reshape(v, k, c).transpose(1, 0, 2)  # (k, v, c)
        return self._apply(E[:, :k], blocks)

    def decode(self, results: dict[Any, Any]) -> np.ndarray:
        """From ``{position: A_g B~_position}`` with at least ``L`` entries, return ``A_g B_l``
        for every ``l`` stacked as ``(L, rows, cols)``.  Uses the first ``L`` positions given."""
        if len(results) < self.L:
            raise ArgumentError(
                   f"results: need at least L={self.L} results to decode, got {len(results)}")
        positions = list(results)[: self.L]
        if self.identity:  # the result itself
            return np.asarray(results[positions[0]])[None]
        stack = np.stack([np.asarray(results[p]) for p in positions])
        return self._apply(self.decode_matrix(positions), stack)

    def _apply(self, M: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        """``out[i] = sum_j M[i, j] blocks[j]`` (blocks ``(n, rows, cols)``), in complex
        arithmetic on interleaved column pairs when ``M`` is complex (module docstring)."""
        n, rows, cols = blocks.shape
        if not np.iscomplexobj(M):
            return self.field.matmul(M, blocks.reshape(n, rows * cols)).reshape(-1, rows, cols)
        if cols % 2:
            raise ArgumentError(f"blocks: a complex code needs an even column count, got {cols}")
        z = (blocks[:, :, 0::2] + 1j * blocks[:, :, 1::2]).reshape(n, -1)
        w = (M @ z).reshape(M.shape[0], rows, cols // 2)
        out = np.empty((M.shape[0], rows, cols), dtype=np.float64)
        out[:, :, 0::2], out[:, :, 1::2] = w.real, w.imag
        return out

    # -- conditioning (real field) -----------------------------------------------------------------
    def conditions(self, patterns: Any) -> np.ndarray:
        """:meth:`decode_condition` of every row of ``patterns`` (``(N, L)`` positions)."""
        if self.generator is not None:
            return matrix_conditions(self.generator, patterns)
        return conditions(self.alphas, self.betas, patterns)

    def decode_condition(self, positions: Sequence[int]) -> float:
        """``kappa(P) = || |D_P| |E_P| ||_2`` for a decode from ``positions`` (module docstring):
        the factor by which the decode can amplify the relative rounding errors of the encode,
        the workers' products and the decode itself.  For a numerically inverted ``D_P`` it
        adds ``|| D_P E_P - I ||_2 / gamma_{2 w L}`` (the inverse's own error, measured), so
        that :meth:`error_bound` covers it.  Real field only."""
        return self._condition(self._real_positions(positions))

    # a memo of decodes: the code is frozen and hashed by identity, and the cache keeping it
    # alive (as long as its entries last) is accepted
    @functools.lru_cache(maxsize=4096)  # noqa: B019
    def _condition(self, P: tuple[int, ...]) -> float:
        kappa = float(self.conditions(np.asarray([P]))[0])
        if self.generator is not None:
            R = self._decode_matrix(P) @ self.generator[list(P)] - np.eye(self.L)
            R = embed(R) if np.iscomplexobj(R) else R
            kappa += float(np.linalg.norm(R, 2)) / gamma(2 * self.width * self.L)
        return max(1.0, kappa)

    def error_bound(self, positions: Sequence[int], inner: int, norm_A: float,
                    norm_B: float) -> float:
        """A bound on ``||Y - A B||_F`` for ``Y`` decoded from ``positions`` in float64, where
        ``A`` (``||A||_F = norm_A``) has ``inner`` columns and ``B`` is the encoded input
        (``||B||_F = norm_B``): ``gamma_{inner + 10 w L} * kappa(P) * norm_A * norm_B``.  ``0.0``
        over finite fields, where decodes are exact."""
        if isinstance(inner, bool) or not isinstance(inner, (int, np.integer)) or inner < 0:
            raise ArgumentError(f"inner: must be an int >= 0, got {inner!r}")
        if self.field.exact:
            return 0.0
        return rounding_bound(int(inner) + self.extra_terms, self.decode_condition(positions),
                              norm_A, norm_B)

    def best_positions(self, have: Any, start: Any = None) -> tuple[float, tuple[int, ...]]:
        """``(kappa, positions)``: the ``L`` of the positions ``have`` whose decode is best
        conditioned (:func:`~.conditioning.best_subset`: exact for up to 2000 subsets, else a
        swap descent from ``start``).  Real field only."""
        self._real_positions(range(self.L))
        return self._best(tuple(sorted(int(h) for h in have)),
                          None if start is None else tuple(sorted(int(p) for p in start)))

    # a memo, as _decode_matrix's
    @functools.lru_cache(maxsize=1024)  # noqa: B019
    def _best(self, have: tuple[int, ...], start: tuple[int, ...] | None
              ) -> tuple[float, tuple[int, ...]]:
        return best_subset(self.conditions, have, self.L, start)

    def worst_decode_condition(self, exhaustive: int = 20000, samples: int = 2000,
                               seed: int = 0) -> tuple[float, tuple[int, ...]]:
        """The largest :meth:`decode_condition` over straggler patterns: see
        :func:`~.conditioning.search_worst`.  Real field only."""
        self._real_positions(range(self.L))
        return search_worst(self.conditions, self.K, self.L, exhaustive=exhaustive,
                            samples=samples, seed=seed)

    def _real_positions(self, positions: Any) -> tuple[int, ...]:
        if self.field.exact:
            raise ArgumentError(
                   f"field: decode conditioning is for the real field; decodes over "
                   f"{self.field.name} are exact")
        return self._checked(positions)


def lagrange_code(field: Any, L: int, S: int, points: str | None = None) -> LagrangeCode:
    """The code used everywhere (module docstring): ``K = L + S`` positions over ``field``.

    ``points`` names the point set: one of :data:`REAL_POINT_SETS` for the real field (default
    ``"auto"``), :data:`FINITE_POINT_SETS` for finite fields (default ``"consecutive"``).
    """
    F = make_field(field)
    for name, val, lo in (("L", L, 1), ("S", S, 0)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
            raise ArgumentError(f"{name}: must be an int >= {lo}, got {val!r}")
    known = FINITE_POINT_SETS if F.exact else REAL_POINT_SETS
    if points is None:
        points = known[0]
    if points not in known:
        raise ArgumentError(f"points: {points!r} is not a point set for {F.name}; known: {known}")
    return _cached_code(F, int(L), int(S), points)


def code_width(field: Any, L: int, S: int) -> int:
    """:attr:`LagrangeCode.width` of the default code for ``(L, S)`` over ``field``."""
    return lagrange_code(field, L, S).width


@functools.lru_cache(maxsize=256)
def _cached_code(F: Field, L: int, S: int, points: str) -> LagrangeCode:
    K = L + S
    if points == "auto":
        runs = np.sort(np.asarray([[(o + j) % K for j in range(S, K)] for o in range(K)]),
                       axis=1)  # the patterns whose stragglers are contiguous
        for name, limit in (("chebyshev", AUTO_LIMIT), ("roots-of-unity", ROOTS_LIMIT)):
            code = _cached_code(F, L, S, name)
            if L == 1 or float(np.max(code.conditions(runs))) <= limit:
                return code
        return _cached_code(F, L, S, "rotation")
    if F.exact:
        pts = F.points(K + L)
        alphas, betas = pts[:K], pts[K:]
    elif points == "rotation":
        rng = np.random.default_rng([_ROTATION_SEED, L, S])
        G, _ = np.linalg.qr(rng.standard_normal((K, L)) + 1j * rng.standard_normal((K, L)))
        G /= np.linalg.norm(G, axis=1, keepdims=True)
        return LagrangeCode(F, L, S, (), (), points, G)
    elif points == "roots-of-unity":
        alphas = np.exp(2j * np.pi * np.arange(K) / K)
        betas = np.exp(2j * np.pi * (np.arange(L) + 0.5) / L)
        if np.min(np.abs(alphas[:, None] - betas[None, :])) < 1e-9:  # the grids meet: turn
            betas = betas * np.exp(1j * np.pi / (2 * K * L))
    elif points == "chebyshev":
        g = math.gcd(K, L)
        shared = (K // g) % 2 == 1 and (L // g) % 2 == 1  # the two grids meet
        turn = np.pi / (4 * (K * L // g)) if shared else 0.0
        alphas, betas = chebyshev_nodes(K), chebyshev_nodes(L, turn=turn)
    else:
        pts = np.sort(chebyshev_nodes(K + L, kind=1 if points == "chebyshev-interleaved" else 2))
        # beta positions spread evenly through the sorted nodes
        beta_idx = np.unique(np.round(np.linspace(0.5, K + L - 1.5, L)).astype(int))
        if len(beta_idx) < L:
            beta_idx = np.arange(1, 2 * L, 2)[:L]
        mask = np.zeros(K + L, bool)
        mask[beta_idx] = True
        alphas, betas = pts[~mask], pts[mask]
    return LagrangeCode(F, L, S, tuple(np.asarray(alphas).tolist()),
                        tuple(np.asarray(betas).tolist()), points)
