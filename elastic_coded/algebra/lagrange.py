"""Lagrange coding of the input ``B`` (MATH.md §1, eq. 2, eq. 3 and decoding).

``B`` is split into ``L`` column blocks ``B_l``.  A code with ``K = L + S`` evaluation points
``alpha_1..alpha_K`` and ``L`` interpolation points ``beta_1..beta_L`` (all distinct) sends the
machine in *position* ``i`` of a piece

    B~_i = sum_l B_l * prod_{k != l} (alpha_i - beta_k) / (beta_l - beta_k)           (eq. 2)

and any ``L`` results ``A_g B~_i`` of the piece give back every ``A_g B_l``:

    A_g B_l = sum_{i in Lset} (A_g B~_i) * prod_{i' in Lset, i' != i} (beta_l - alpha_i') / (alpha_i - alpha_i')

Points are chosen per piece (position ``i`` of every piece uses ``alpha_i``) rather than one per
machine: a piece involves only ``K`` points, so the real field stays well-conditioned however many
machines there are, and the encoder computes only ``K`` coded blocks per step.

**Point sets (real field).**  ``lagrange_code(F, L, S, points=...)`` with ``points`` one of

- ``"chebyshev"`` (default): ``alpha`` = the ``K`` Chebyshev nodes of the first kind,
  ``cos((2i+1) pi / 2K)``, and ``beta`` = the ``L`` Chebyshev nodes of the first kind (the
  interpolation points of the classic well-conditioned Chebyshev polynomial codes).  When the two
  grids share a node (exactly when ``K/g`` and ``L/g`` are both odd, ``g = gcd(K, L)``) the
  ``beta`` angles are turned by ``pi / (4 lcm(K, L))``, a quarter of the grids' common angle step.
- ``"chebyshev-interleaved"``: ``K + L`` first-kind nodes, the ``beta`` s spread evenly through
  them (every other node from the middle out) and the ``alpha`` s the rest.
- ``"chebyshev2-interleaved"``: the same with the ``K + L`` second-kind nodes (extrema,
  ``cos(i pi / (K+L-1))``).

``benchmarks/bench_conditioning.py`` measures them: ``"chebyshev"`` has the lowest worst-case
decode condition of the three (1.5-2x below the others) at every ``(L, S)`` of the exhaustive sweep
``L <= 10, S <= 8`` where any worst case exceeds ``10^3``; below that (``L <= 3``, or ``S = 1``) the
others can be up to 2x lower, at conditions under 600.  Finite fields have one set,
``"consecutive"``: ``alpha = 0..K-1``, ``beta = K..K+L-1``.

**Conditioning (real field).**  :meth:`LagrangeCode.decode_condition` is the amplification factor
``kappa(P) = || |D_P| |E_P| ||_2`` of a decode from the positions ``P`` (``E_P``: the rows ``P`` of
the encode matrix, ``D_P = E_P^{-1}`` the decode matrix, ``|.|`` entrywise).  Encoding, the
workers' products and the decode in float64 then satisfy (standard rounding model, unit roundoff
``u = 2^-53``, ``gamma_n = n u / (1 - n u)``, ``v`` = the inner dimension of ``A B``)

    || Y - A B ||_F  <=  gamma_{v + 10 L} * kappa(P) * ||A||_F * ||B||_F

(entrywise, ``|Y_l - A B_l| <= gamma_{v+10L} sum_l' (|D_P||E_P|)_{l l'} |A| |B_l'|``: ``gamma_L`` from
the encode sum, ``gamma_v`` from the product, ``gamma_L`` from the decode sum, ``2 gamma_{4L}`` from
computing ``E`` and ``D``, whose product is then ``I`` only to that accuracy; Cauchy-Schwarz gives
the norms).  :meth:`LagrangeCode.error_bound` evaluates it.  ``1 <= kappa(P) <= ||D_P||_2 ||E_P||_2``
up to a factor ``L``; measured relative errors of random data run at about ``u * kappa(P)``.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .fields import Field, field as make_field

__all__ = ["LagrangeCode", "lagrange_code", "REAL_POINT_SETS", "FINITE_POINT_SETS", "conditions",
           "solve_condition",
           "worst_condition", "search_worst", "gamma", "rounding_bound"]

REAL_POINT_SETS = ("chebyshev", "chebyshev-interleaved", "chebyshev2-interleaved")
FINITE_POINT_SETS = ("consecutive",)
UNIT_ROUNDOFF = 2.0 ** -53


@dataclass(frozen=True, eq=False)
class LagrangeCode:
    """A Lagrange code over ``field`` with ``L`` data blocks and ``K = L + S`` positions."""

    field: Field
    L: int
    S: int
    alphas: tuple
    betas: tuple
    points: str = "custom"

    @property
    def K(self) -> int:
        return self.L + self.S

    def __repr__(self) -> str:
        return f"<Lagrange code: L={self.L}, S={self.S} over {self.field.name}>"

    # -- matrices -----------------------------------------------------------------------------
    @functools.cached_property
    def encode_matrix(self) -> np.ndarray:
        """``E[i, l] = prod_{k != l} (alpha_i - beta_k) / (beta_l - beta_k)`` (K x L)."""
        return _basis_matrix(self.field, np.asarray(self.betas), np.asarray(self.alphas))

    def decode_matrix(self, positions: Sequence[int]) -> np.ndarray:
        """``D[l, j]``: weight of the result of ``positions[j]`` in ``A B_l`` (L x L)."""
        return self._decode_matrix(tuple(int(p) for p in positions))

    @functools.lru_cache(maxsize=4096)
    def _decode_matrix(self, positions: tuple) -> np.ndarray:
        if len(positions) != self.L or len(set(positions)) != self.L:
            raise ValueError(
                f"positions: need exactly L={self.L} distinct positions to decode, got {positions}")
        bad = [p for p in positions if not 0 <= p < self.K]
        if bad:
            raise ValueError(f"positions: {bad} outside 0..{self.K - 1}")
        al = np.asarray(self.alphas)[list(positions)]
        # basis polynomials through the chosen alphas, evaluated at the betas: (L x L) = [l, j]
        return _basis_matrix(self.field, al, np.asarray(self.betas))

    # -- encode / decode ------------------------------------------------------------------------
    def encode(self, B: np.ndarray, positions: Sequence[int] | None = None) -> np.ndarray:
        """Coded blocks ``B~_i`` for ``positions`` (default all K): array ``(len, v, r/L)``."""
        B = np.asarray(B)
        if B.ndim != 2:
            raise ValueError(f"B: must be 2-D, got shape {B.shape}")
        v, r = B.shape
        if r % self.L:
            raise ValueError(f"B: its {r} columns must be divisible by L={self.L}")
        c = r // self.L
        blocks = B.reshape(v, self.L, c).transpose(1, 0, 2).reshape(self.L, v * c)
        E = self.encode_matrix if positions is None else self.encode_matrix[list(positions)]
        return self.field.matmul(E, blocks).reshape(E.shape[0], v, c)

    def decode(self, results: dict) -> np.ndarray:
        """From ``{position: A_g B~_position}`` with at least ``L`` entries, return ``A_g B_l``
        for every ``l`` stacked as ``(L, rows, cols)``.  Uses the first ``L`` positions given."""
        if len(results) < self.L:
            raise ValueError(
                f"results: need at least L={self.L} results to decode, got {len(results)}")
        positions = list(results)[: self.L]
        first = np.asarray(results[positions[0]])
        shape = first.shape
        stack = np.stack([np.asarray(results[p]).reshape(-1) for p in positions])
        D = self.decode_matrix(positions)
        return self.field.matmul(D, stack).reshape((self.L,) + shape)

    # -- conditioning (real field) ------------------------------------------------------------------
    def decode_condition(self, positions: Sequence[int]) -> float:
        """``kappa(P) = || |D_P| |E_P| ||_2`` for a decode from ``positions`` (module docstring):
        the factor by which the decode can amplify the relative rounding errors of the encode,
        the workers' products and the decode itself.  Real field only."""
        P = self._real_positions(positions)
        return float(conditions(self.alphas, self.betas, np.asarray([P]))[0])

    def error_bound(self, positions: Sequence[int], inner: int, norm_A: float,
                    norm_B: float) -> float:
        """A bound on ``||Y - A B||_F`` for ``Y`` decoded from ``positions`` in float64, where
        ``A`` (``||A||_F = norm_A``) has ``inner`` columns and ``B`` is the encoded input
        (``||B||_F = norm_B``): ``gamma_{inner + 10 L} * kappa(P) * norm_A * norm_B``.  ``0.0``
        over finite fields, where decodes are exact."""
        if isinstance(inner, bool) or not isinstance(inner, (int, np.integer)) or inner < 0:
            raise ValueError(f"inner: must be an int >= 0, got {inner!r}")
        if self.field.exact:
            return 0.0
        return rounding_bound(int(inner) + 10 * self.L, self.decode_condition(positions),
                              norm_A, norm_B)

    def worst_decode_condition(self, exhaustive: int = 20000, samples: int = 2000,
                               seed: int = 0) -> tuple[float, tuple]:
        """The largest :meth:`decode_condition` over straggler patterns: see
        :func:`worst_condition`.  Real field only."""
        self._real_positions(range(self.L))
        return worst_condition(self.alphas, self.betas, exhaustive=exhaustive, samples=samples,
                               seed=seed)

    def _real_positions(self, positions) -> tuple:
        if self.field.exact:
            raise ValueError(
                f"field: decode conditioning is for the real field; decodes over "
                f"{self.field.name} are exact")
        P = tuple(int(p) for p in positions)
        self._decode_matrix(P)  # validates the positions
        return P


def _basis_matrix(F: Field | None, nodes: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``M[..., i, j] = prod_{k != j} (at_i - nodes_k) / (nodes_j - nodes_k)``: the Lagrange basis
    through ``nodes`` (shape ``(..., n)``) evaluated at ``at`` (shape ``(..., a)``), with any
    matching leading batch shape.  ``F = None``: plain numpy arithmetic (real or complex)."""
    if F is None:
        sub, mul, div = np.subtract, np.multiply, np.divide
        nodes, at = np.asarray(nodes), np.asarray(at)
        dtype = np.result_type(nodes, at, np.float64)
    else:
        sub, mul, div, dtype = F.sub, F.mul, F.div, F.dtype
    nodes = np.asarray(nodes, dtype=dtype)
    at = np.asarray(at, dtype=dtype)
    n = nodes.shape[-1]
    num = np.ones(at.shape + (n,), dtype=dtype)
    den = np.ones(nodes.shape, dtype=dtype)
    for k in range(n):
        others = np.arange(n) != k  # every basis polynomial j != k has the factor (x - nodes_k)
        diff = sub(at, nodes[..., k:k + 1])  # (..., a)
        num[..., others] = mul(num[..., others], diff[..., None])
        den[..., others] = mul(den[..., others], sub(nodes[..., others], nodes[..., k:k + 1]))
    return np.asarray(div(num, den[..., None, :]), dtype=dtype)


def gamma(n: int) -> float:
    """``gamma_n = n u / (1 - n u)`` (u = 2^-53): the classic bound on the relative rounding error
    of a sum of ``n`` float64 products; ``inf`` when ``n u >= 1``."""
    nu = n * UNIT_ROUNDOFF
    return nu / (1.0 - nu) if nu < 1.0 else math.inf


def rounding_bound(terms: int, condition: float, norm_A: float, norm_B: float) -> float:
    """``1.01 * gamma_terms * condition * norm_A * norm_B`` (the 1% covers the second-order
    terms): the module docstring's bound on ``||Y - A B||_F``."""
    if not condition >= 1.0:
        raise ValueError(f"condition: must be >= 1, got {condition!r}")
    for name, val in (("norm_A", norm_A), ("norm_B", norm_B)):
        if not val >= 0.0:
            raise ValueError(f"{name}: must be a norm (>= 0), got {val!r}")
    return 1.01 * gamma(terms) * float(condition) * float(norm_A) * float(norm_B)


def solve_condition(G) -> float:
    """The amplification factor of decoding by solving ``G y = v`` (``G`` square, real), for
    :func:`rounding_bound`: ``2 sqrt(m) cond_S(G)`` with Skeel's ``cond_S(G) = || |G^-1| |G|
    ||_inf``.  A backward-stable solve from values with componentwise errors ``gamma |G| |A x|``
    errs componentwise by at most ``gamma |G^-1| |G| (|A x| + |y|)``, whose 2-norm the factor
    covers.  Up to ``m = 64`` ``cond_S`` is computed from the inverse; above, it is estimated
    from one LU factorisation (Higham's 1-norm estimator, ``scipy.sparse.linalg.onenormest``, on
    ``|G^-1| g = G^-1 diag(g)`` with ``g = |G| 1``), which is rarely low by more than 3x: an
    estimate, not a proof.  ``inf`` for a singular ``G``."""
    G = np.asarray(G, dtype=np.float64)
    m = G.shape[0]
    if G.ndim != 2 or G.shape[1] != m:
        raise ValueError(f"G: must be square, got shape {G.shape}")
    g = np.abs(G).sum(axis=1)
    try:
        if m <= 64:
            skeel = float(np.max(np.abs(np.linalg.inv(G)) @ g))
        else:
            skeel = _skeel_estimate(G, g)
    except (np.linalg.LinAlgError, ValueError):
        return math.inf
    return max(1.0, 2.0 * math.sqrt(m) * skeel) if math.isfinite(skeel) else math.inf


def _skeel_estimate(G: np.ndarray, g: np.ndarray) -> float:
    """``|| G^-1 diag(g) ||_inf = || diag(g) G^-T ||_1`` by the 1-norm estimator."""
    import warnings

    from scipy.linalg import LinAlgWarning, lu_factor, lu_solve
    from scipy.sparse.linalg import LinearOperator, onenormest

    with warnings.catch_warnings():
        warnings.simplefilter("error", LinAlgWarning)
        try:
            lu = lu_factor(G, check_finite=True)
        except LinAlgWarning:  # exactly singular
            return math.inf
    m = G.shape[0]
    op = LinearOperator((m, m), dtype=np.float64,
                        matvec=lambda x: g * lu_solve(lu, np.ravel(x), trans=1),
                        rmatvec=lambda x: lu_solve(lu, g * np.ravel(x)))
    return float(onenormest(op))


def conditions(alphas, betas, patterns) -> np.ndarray:
    """``kappa(P) = || |D_P| |E_P| ||_2`` for every row ``P`` of ``patterns`` (``(N, L)`` position
    indices into ``alphas``).  The points may be real or complex (the complex case serves the
    benchmark's comparison: the real field cannot carry complex points)."""
    alphas = np.asarray(alphas)
    betas = np.asarray(betas)
    P = np.asarray(patterns, dtype=np.int64)
    if P.ndim != 2 or P.shape[1] != len(betas):
        raise ValueError(f"patterns: must have shape (N, L={len(betas)}), got {P.shape}")
    chosen = alphas[P]  # (N, L)
    b = np.broadcast_to(betas, chosen.shape)
    E = _basis_matrix(None, b, chosen)  # E[p, j, l] = ell_l(alpha_{P_j}) through the betas
    D = _basis_matrix(None, chosen, b)  # D[p, l, j] = basis through the chosen alphas at beta_l
    return np.linalg.norm(np.abs(D) @ np.abs(E), ord=2, axis=(1, 2))


def worst_condition(alphas, betas, *, exhaustive: int = 20000, samples: int = 2000,
                    seed: int = 0) -> tuple[float, tuple]:
    """The largest :func:`conditions` over the ``C(K, L)`` decode patterns of these points and a
    pattern attaining it (see :func:`search_worst`)."""
    return search_worst(lambda P: conditions(alphas, betas, P), len(alphas), len(betas),
                        exhaustive=exhaustive, samples=samples, seed=seed)


def search_worst(cond, K: int, L: int, *, exhaustive: int = 20000, samples: int = 2000,
                 seed: int = 0) -> tuple[float, tuple]:
    """The largest ``cond(P)`` over the ``L``-subsets ``P`` of ``range(K)`` (``cond`` maps an
    ``(N, L)`` array of sorted patterns to ``N`` values) and a pattern attaining it.  Exact when
    ``C(K, L) <= exhaustive``; otherwise a lower bound on the worst case: the maximum over
    ``samples`` random patterns, every pattern whose stragglers are contiguous (including
    wrap-around), and a steepest-ascent search over one-position swaps from the four worst of
    those (the worst patterns of Chebyshev-like point sets are contiguous runs of stragglers,
    which the ascent reaches)."""
    if math.comb(K, L) <= exhaustive:
        P = np.asarray(list(itertools.combinations(range(K), L)), dtype=np.int64)
        c = cond(P)
        i = int(np.argmax(c))
        return float(c[i]), tuple(int(x) for x in P[i])
    rng = np.random.default_rng(seed)
    rand = np.sort(np.argsort(rng.random((samples, K)), axis=1)[:, :L], axis=1)
    runs = [np.setdiff1d(np.arange(K), (o + L + np.arange(K - L)) % K) for o in range(K)]
    P = np.concatenate([rand, np.asarray(runs, dtype=np.int64).reshape(K, L)])
    c = cond(P)
    best_val, best = float(c.max()), P[int(np.argmax(c))]
    for start in P[np.argsort(c)[-4:]]:
        cur, val = start, float(cond(start[None])[0])
        while True:
            out = np.setdiff1d(np.arange(K), cur)
            nb = np.repeat(cur[None], L * len(out), axis=0)
            nb[np.arange(len(nb)), np.repeat(np.arange(L), len(out))] = np.tile(out, L)
            nb = np.sort(nb, axis=1)
            v = cond(nb)
            j = int(np.argmax(v))
            if v[j] <= val * (1 + 1e-12):
                break
            cur, val = nb[j], float(v[j])
        if val > best_val:
            best_val, best = val, cur
    return best_val, tuple(int(x) for x in best)


def lagrange_code(field, L: int, S: int, points: str | None = None) -> LagrangeCode:
    """The code used everywhere (module docstring): ``K = L + S`` positions over ``field``.

    ``points`` names the point set: one of :data:`REAL_POINT_SETS` for the real field (default
    ``"chebyshev"``), :data:`FINITE_POINT_SETS` for finite fields (default ``"consecutive"``).
    """
    F = make_field(field)
    for name, val, lo in (("L", L, 1), ("S", S, 0)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
            raise ValueError(f"{name}: must be an int >= {lo}, got {val!r}")
    known = FINITE_POINT_SETS if F.exact else REAL_POINT_SETS
    if points is None:
        points = known[0]
    if points not in known:
        raise ValueError(f"points: {points!r} is not a point set for {F.name}; known: {known}")
    return _cached_code(F, int(L), int(S), points)


def chebyshev_nodes(count: int, kind: int = 1, turn: float = 0.0) -> np.ndarray:
    """Chebyshev nodes on [-1, 1]: first kind ``cos((2i+1) pi / 2 count + turn)``, second kind
    (extrema) ``cos(i pi / (count - 1))`` (``[0.0]`` for one node)."""
    i = np.arange(count)
    if kind == 1:
        return np.cos((2 * i + 1) * np.pi / (2 * count) + turn)
    return np.cos(i * np.pi / (count - 1)) if count > 1 else np.zeros(1)


@functools.lru_cache(maxsize=256)
def _cached_code(F: Field, L: int, S: int, points: str) -> LagrangeCode:
    K = L + S
    if F.exact:
        pts = F.points(K + L)
        alphas, betas = pts[:K], pts[K:]
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
    return LagrangeCode(F, L, S, tuple(alphas.tolist()), tuple(betas.tolist()), points)
