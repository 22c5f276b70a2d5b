"""Optimal loads without storage constraints (water-filling) and the filling of loads into groups
(MATH.md §1)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ...errors import ArgumentError
from ._checks import _check_enough, _is_int, check_code, check_speeds
from ._layout import _wrap_layout

__all__ = ["optimal_load", "fill"]

_TOL = 1e-9


def _check_caps(caps: npt.ArrayLike | None, s: npt.NDArray[np.float64], K: int
                ) -> npt.NDArray[np.float64]:
    cap = np.ones_like(s) if caps is None else np.asarray(caps, dtype=np.float64).reshape(-1)
    if cap.shape != s.shape:
        raise ArgumentError(f"caps: expected {s.size} values, got {cap.size}")
    if np.any(~np.isfinite(cap)) or np.any(cap < 0) or np.any(cap > 1):
        raise ArgumentError(f"caps: each cap must lie in [0, 1], got {cap.tolist()}")
    if cap.sum() < K - _TOL:
        raise ArgumentError(
               f"caps: they sum to {cap.sum():.6g} < L+S = {K}; the machines cannot hold "
               "L+S copies")
    return cap


def optimal_load(speeds: npt.ArrayLike, L: int, S: int, caps: npt.ArrayLike | None = None
                 ) -> tuple[np.ndarray, float]:
    """Water-filling optimum without storage constraints (MATH.md §1): minimise
    ``max theta[n] / s[n]`` s.t. ``sum theta = L+S``, ``0 <= theta <= caps`` (default 1).

    Returns ``(theta, c)`` with ``theta[n] = min(caps[n], c * s[n])``.

    ``sum min(cap, c s)`` is piecewise linear in ``c`` with breakpoints ``cap[n] / s[n]``.  In
    breakpoint order, with the first ``k`` machines capped, ``c_k = (L+S - P_k) / S_k`` where
    ``P_k`` sums the first ``k`` caps and ``S_k`` the remaining speeds; both are sums of positive
    terms (prefix and suffix sums, never a running subtraction), so they stay accurate however
    widely the speeds spread.  The first ``k`` with ``c_k <= `` its breakpoint gives ``c``; a last
    rescaling of the uncapped loads (with ``math.fsum``) makes ``sum theta = L+S`` to rounding.
    """
    L, S = check_code(L, S)
    K = L + S
    s = check_speeds(speeds)
    _check_enough(s.size, K, "speeds")
    cap = _check_caps(caps, s, K)
    bps = cap / s
    order = np.argsort(bps, kind="stable")
    bp = bps[order]
    prefix = np.concatenate([[0.0], np.cumsum(cap[order])[:-1]])
    suffix = np.cumsum(s[order][::-1])[::-1]
    ck = (K - prefix) / suffix
    ok = np.flatnonzero(ck <= bp)
    c = float(ck[ok[0]]) if ok.size else float(bp[-1])
    theta = np.minimum(cap, c * s)
    free = c * s < cap
    if free.any():
        want = K - math.fsum(cap[~free])
        have = math.fsum(theta[free])
        if have > 0 and want > 0:
            scale = want / have
            theta[free] = np.minimum(cap[free], theta[free] * scale)
            c *= scale
    return theta, float(c)


def fill(theta: npt.ArrayLike, K: int, tol: float = 1e-12
         ) -> list[tuple[float, tuple[int, ...]]]:
    """Filling (MATH.md §1): groups ``(gamma_g, U_g)`` with ``|U_g| = K``, ``sum gamma = 1`` and
    ``sum_g gamma_g 1[n in U_g] = theta[n]``; at most ``len(theta)`` groups.

    Greedy: with remaining mass ``m`` (initially 1) keep ``max residual <= m`` and
    ``sum residual = K m``; each round take the ``K`` largest residuals and the largest ``gamma``
    keeping the invariant.  Each round zeroes a residual or makes one tight (equal to ``m``, after
    which it is always chosen), so it ends within ``len(theta)`` rounds.  Should rounding errors
    leave mass over (speeds spread over many orders of magnitude), the residual is finished by
    McNaughton's wrap-around rule, which decomposes any such residual exactly.
    """
    if not _is_int(K) or K < 1:
        raise ArgumentError(f"K: must be an int >= 1, got {K!r}")
    r = np.asarray(theta, dtype=np.float64).reshape(-1).copy()
    n = r.size
    if n < K:
        raise ArgumentError(f"theta: has {n} entries, fewer than K = {K}")
    if np.any(~np.isfinite(r)) or np.any(r < -tol) or np.any(r > 1 + tol):
        raise ArgumentError(f"theta: every entry must lie in [0, 1], got {r.tolist()}")
    total = math.fsum(r)
    if abs(total - K) > 1e-9 * max(1, K):
        raise ArgumentError(f"theta: must sum to K = {K}, sums to {float(total)!r}")
    r = np.clip(r, 0.0, 1.0)
    groups, m = _greedy_fill(r, K, tol)
    if m > tol:
        groups += _wrap_fill(r, K, m)
    tot = math.fsum(g for g, _ in groups)
    return [(g / tot, u) for g, u in groups]


def _greedy_fill(r: np.ndarray, K: int, tol: float
                 ) -> tuple[list[tuple[float, tuple[int, ...]]], float]:
    """The greedy rounds of :func:`fill`; ``r`` is left as the residual.  Returns the groups and
    the mass left over."""
    n = r.size
    m = 1.0
    groups: list[tuple[float, tuple[int, ...]]] = []
    for _ in range(n + 1):
        if m <= tol:
            break
        top, next_best = _top(r, K)
        gamma = min(float(r[top].min()), m - next_best)
        if gamma <= tol:
            break
        groups.append((gamma, tuple(top.tolist())))
        r[top] -= gamma
        m -= gamma
        r[np.abs(r) <= tol] = 0.0
    return groups, m


def _top(r: np.ndarray, K: int) -> tuple[np.ndarray, float]:
    """The indices (ascending) of the ``K`` largest entries of ``r``, ties to the lower index,
    and the largest entry left out (0 when none is)."""
    n = r.size
    if n == K:
        return np.arange(n), 0.0
    part = -np.partition(-r, [K - 1, K])
    kth, next_best = float(part[K - 1]), float(part[K])
    above = np.flatnonzero(r > kth)
    ties = np.flatnonzero(r == kth)[:K - above.size]
    return np.sort(np.concatenate([above, ties])), next_best


def _wrap_fill(r: np.ndarray, K: int, m: float) -> list[tuple[float, tuple[int, ...]]]:
    """Decompose a residual ``r`` (each entry at most ``sum(r) / K``) of mass ``m`` into groups of
    ``K`` by the wrap-around rule."""
    r = np.clip(r, 0.0, None)
    size = math.fsum(r) / K
    if size <= 0:
        return []
    edges, members = _wrap_layout([size], np.zeros(r.size), np.minimum(r, size), K)
    out = []
    for lo, hi, U in zip(edges[:-1], edges[1:], members):
        if hi > lo and len(set(U.tolist())) == K:
            out.append((m * (hi - lo) / size, tuple(sorted(int(i) for i in U))))
    return out
