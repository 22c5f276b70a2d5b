"""Conditioning of real-field decodes: the rounding model, condition numbers of decode patterns,
the search for the worst straggler pattern, and the choice of the best-conditioned results to
decode from.  Pure numpy (SciPy for the 1-norm estimator).

A decode from positions ``P`` of a code with encode matrix ``E`` (``K x L``, real or complex)
uses ``D_P = E_P^-1``; its amplification factor is ``kappa(P) = || |D_P| |E_P| ||_2``, taken on
the real form (:func:`~._basis.embed`) when the code is complex, since that is the arithmetic the
machines do.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ..errors import ArgumentError
from ._basis import basis_matrix, embed

__all__ = ["UNIT_ROUNDOFF", "gamma", "rounding_bound", "solve_condition", "conditions",
           "matrix_conditions", "worst_condition", "search_worst", "best_subset"]

UNIT_ROUNDOFF = 2.0 ** -53


def gamma(n: int) -> float:
    """``gamma_n = n u / (1 - n u)`` (u = 2^-53): the classic bound on the relative rounding error
    of a sum of ``n`` float64 products; ``inf`` when ``n u >= 1``."""
    nu = n * UNIT_ROUNDOFF
    return nu / (1.0 - nu) if nu < 1.0 else math.inf


def rounding_bound(terms: int, condition: float, norm_A: float, norm_B: float) -> float:
    """``1.01 * gamma_terms * condition * norm_A * norm_B`` (the 1% covers the second-order
    terms): the module docstring's bound on ``||Y - A B||_F``."""
    if not condition >= 1.0:
        raise ArgumentError(f"condition: must be >= 1, got {condition!r}")
    for name, val in (("norm_A", norm_A), ("norm_B", norm_B)):
        if not val >= 0.0:
            raise ArgumentError(f"{name}: must be a norm (>= 0), got {val!r}")
    return 1.01 * gamma(terms) * float(condition) * float(norm_A) * float(norm_B)


def solve_condition(G: Any) -> float:
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
        raise ArgumentError(f"G: must be square, got shape {G.shape}")
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


def conditions(alphas: Any, betas: Any, patterns: Any) -> np.ndarray:
    """``kappa(P) = || |D_P| |E_P| ||_2`` for every row ``P`` of ``patterns`` (``(N, L)`` position
    indices into ``alphas``) of the Lagrange code through these points.  Complex points are
    measured on the real form (module docstring)."""
    alphas = np.asarray(alphas)
    betas = np.asarray(betas)
    P = _patterns(patterns, len(betas))
    chosen = alphas[P]  # (N, L)
    b = np.broadcast_to(betas, chosen.shape)
    E = basis_matrix(None, b, chosen)  # E[p, j, l] = ell_l(alpha_{P_j}) through the betas
    D = basis_matrix(None, chosen, b)  # D[p, l, j] = basis through the chosen alphas at beta_l
    return _kappa(D, E)


def matrix_conditions(E: Any, patterns: Any) -> np.ndarray:
    """``kappa(P)`` for every row ``P`` of ``patterns`` of the code whose encode matrix is ``E``
    (``K x L``, real or complex), with ``D_P`` the numerical inverse of ``E_P``; ``inf`` for a
    singular ``E_P``."""
    E = np.asarray(E)
    P = _patterns(patterns, E.shape[1])
    EP = E[P]  # (N, L, L)
    out = np.full(len(P), math.inf)
    try:
        return _kappa(np.linalg.inv(EP), EP)
    except np.linalg.LinAlgError:  # one of them is singular: take them one by one
        for i, M in enumerate(EP):
            try:
                out[i] = _kappa(np.linalg.inv(M)[None], M[None])[0]
            except np.linalg.LinAlgError:
                pass
        return out


def _patterns(patterns: Any, L: int) -> np.ndarray:
    P = np.asarray(patterns, dtype=np.int64)
    if P.ndim != 2 or P.shape[1] != L:
        raise ArgumentError(f"patterns: must have shape (N, L={L}), got {P.shape}")
    return P


def _kappa(D: np.ndarray, E: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(D) or np.iscomplexobj(E):
        D, E = embed(D), embed(E)
    return cast(np.ndarray, np.linalg.norm(np.abs(D) @ np.abs(E), ord=2, axis=(1, 2)))


def worst_condition(alphas: Any, betas: Any, *, exhaustive: int = 20000, samples: int = 2000,
                    seed: int = 0) -> tuple[float, tuple[int, ...]]:
    """The largest :func:`conditions` over the ``C(K, L)`` decode patterns of these points and a
    pattern attaining it (see :func:`search_worst`)."""
    return search_worst(lambda P: conditions(alphas, betas, P), len(alphas), len(betas),
                        exhaustive=exhaustive, samples=samples, seed=seed)


def search_worst(cond: Callable[[np.ndarray], np.ndarray], K: int, L: int, *,
                 exhaustive: int = 20000, samples: int = 2000, seed: int = 0,
                 starts: int = 16) -> tuple[float, tuple[int, ...]]:
    """The largest ``cond(P)`` over the ``L``-subsets ``P`` of ``range(K)`` (``cond`` maps an
    ``(N, L)`` array of sorted patterns to ``N`` values) and a pattern attaining it.  Exact when
    ``C(K, L) <= exhaustive``; otherwise a lower bound on the worst case: the maximum over
    ``samples`` random patterns, every pattern whose stragglers are contiguous (including
    wrap-around), and a steepest-ascent search over one-position swaps from the ``starts``
    worst of those.  The worst patterns of Chebyshev-like point sets are contiguous runs of
    stragglers, which the ascent reaches; a random code's worst patterns are isolated, and
    the search can fall short of them (at ``(12, 6)`` with the defaults it finds about half the
    exhaustive worst; ``benchmarks/bench_conditioning.py`` compares)."""
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
    for start in P[np.argsort(c)[-starts:]]:
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


def best_subset(cond: Callable[[np.ndarray], np.ndarray], have: Any, L: int,
                start: Any = None, *, exhaustive: int = 2000,
                rounds: int = 4) -> tuple[float, tuple[int, ...]]:
    """The ``L`` of the positions ``have`` to decode from: ``(kappa, positions)`` with the
    smallest ``cond`` (``cond`` maps an ``(N, L)`` array of sorted patterns to ``N`` values).
    Exact when ``C(len(have), L) <= exhaustive``; otherwise a descent over one-position swaps
    from ``start`` (default: the first ``L``), at most ``rounds`` swaps, each trying every swap
    in one batch of ``L (len(have) - L)`` patterns."""
    have = sorted(int(h) for h in have)
    if len(have) < L:
        raise ArgumentError(f"have: need at least L={L} positions, got {len(have)}")
    if math.comb(len(have), L) <= exhaustive:
        P = np.asarray(list(itertools.combinations(have, L)), dtype=np.int64)
        c = cond(P)
        i = int(np.argmin(c))
        return float(c[i]), tuple(int(x) for x in P[i])
    cur = np.sort(np.asarray(start if start is not None else have[:L], dtype=np.int64))
    val = float(cond(cur[None])[0])
    for _ in range(rounds):
        out = np.setdiff1d(np.asarray(have), cur)
        if not len(out):
            break
        nb = np.repeat(cur[None], L * len(out), axis=0)
        nb[np.arange(len(nb)), np.repeat(np.arange(L), len(out))] = np.tile(out, L)
        nb = np.sort(nb, axis=1)
        v = cond(nb)
        j = int(np.argmin(v))
        if not v[j] < val * (1 - 1e-9):
            break
        cur, val = nb[j], float(v[j])
    return val, tuple(int(x) for x in cur)
