"""The processing-time model of MATH.md §3 and Theorem 1: the time one worker takes for ``l``
coded rows, and the optimal load and worker value through the Lambert-W constant ``W``."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from scipy.special import lambertw

from ...errors import ArgumentError, ArgumentTypeError


def _as_float(x: Any, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise ArgumentTypeError(f"{name}: needs a real number or array, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def cdf(t: Any, l: Any, a: Any, u: Any) -> npt.NDArray[np.float64]:
    """``Pr[T <= t]`` for ``l`` rows: ``1 - exp(-(u/l)(t - a l))`` for ``t >= a l``, else 0.

    MATH.md §3, processing time.  Broadcasts.  A worker with ``l = 0`` rows is done at once
    (probability 1), though it returns no result.
    """
    t, l, a, u = (_as_float(x, n) for x, n in ((t, "t"), (l, "l"), (a, "a"), (u, "u")))
    t, l, a, u = np.broadcast_arrays(t, l, a, u)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        slack = t - a * l
        p = -np.expm1(-(u / l) * slack)
    p = np.where(slack >= 0, p, 0.0)
    p = np.where(l > 0, p, 1.0)
    return np.clip(p, 0.0, 1.0)


def expected_results(t: Any, l: Any, a: Any, u: Any) -> np.ndarray:
    """``E[X(t)] = l * Pr[T <= t]``: the results one worker returns by ``t`` (MATH.md §3)."""
    return _as_float(l, "l") * cdf(t, l, a, u)


def sample_time(l: Any, a: Any, u: Any, rng: np.random.Generator) -> np.ndarray:
    """Draw ``T = a l + Exp(rate u / l)`` (MATH.md §3); ``l = 0`` gives ``T = 0``."""
    l, a, u = (_as_float(x, n) for x, n in ((l, "l"), (a, "a"), (u, "u")))
    if np.any(l < 0):
        raise ArgumentError("l: row counts must be >= 0")
    l, a, u = np.broadcast_arrays(l, a, u)
    return cast(np.ndarray, a * l + rng.standard_exponential(l.shape) * (l / u))


def _phi(y: np.ndarray) -> np.ndarray:
    """``y - log(1 + y)`` without cancellation for small ``y``."""
    y = np.asarray(y, dtype=np.float64)
    out = np.empty_like(y)
    small = y < 0.25
    ys = y[small]
    acc = np.zeros_like(ys)
    power = ys * ys
    for k in range(2, 42):
        acc += (1.0 if k % 2 == 0 else -1.0) * power / k
        power = power * ys
    out[small] = acc
    yb = y[~small]
    out[~small] = yb - np.log1p(yb)
    return out


def _w_minus_one(eps: np.ndarray) -> np.ndarray:
    """``W - 1`` where ``W = -W_{-1}(-exp(-(1 + eps)))``, i.e. the root ``y > 0`` of
    ``y - log(1 + y) = eps``; accurate to full precision for every ``eps >= 0``."""
    eps = np.asarray(eps, dtype=np.float64)
    y = np.zeros_like(eps)
    small = eps < 1e-2
    # Near the branch point -1/e: W = 1 + q + q^2/3 + 11/72 q^3 + ..., q = sqrt(2(1 + e z)).
    q = np.sqrt(-2.0 * np.expm1(-eps[small]))
    y[small] = q + q**2 / 3 + 11 / 72 * q**3 + 43 / 540 * q**4 + 769 / 17280 * q**5
    big = ~small
    c = 1.0 + eps[big]
    with np.errstate(all="ignore"):
        w0 = -np.real(lambertw(-np.exp(-c), k=-1))
    # exp(-c) underflows for c > ~745: use the asymptotic root of W - log W = c.
    asym = c + np.log(c) + np.log(c) / c
    w0 = np.where(np.isfinite(w0) & (w0 > 1.0), w0, asym)
    y[big] = w0 - 1.0
    # Newton on phi(y) = eps (convex, increasing): two or three steps reach full precision.
    pos = y > 0
    for _ in range(4):
        yp = y[pos]
        step = (_phi(yp) - eps[pos]) * (1.0 + yp) / yp
        y[pos] = np.maximum(yp - step, yp * 1e-3)
    return y


def _check_au(a: Any, u: Any) -> tuple[np.ndarray, np.ndarray]:
    a = _as_float(a, "a")
    u = _as_float(u, "u")
    for name, x in (("a", a), ("u", u)):
        if np.any(~np.isfinite(x)) or np.any(x < 0):
            raise ArgumentError(f"{name}: must be finite and >= 0 (model parameters, MATH.md §3)")
    a_b, u_b = np.broadcast_arrays(a, u)
    return a_b, u_b


def lambert_W(a: Any, u: Any) -> np.ndarray:
    """``W = -W_{-1}(-exp(-(1 + a u)))`` (> 1), the Theorem-1 constant (MATH.md §3).

    Computed with ``scipy.special.lambertw(k=-1)`` and polished by Newton steps on the
    equivalent ``W - log W = 1 + a u``.  As ``a u -> 0`` the argument tends to ``-1/e`` and
    ``W -> 1`` (a branch-point series is used there); ``a u = 0`` gives exactly 1.
    """
    a, u = _check_au(a, u)
    return 1.0 + _w_minus_one(a * u)


def optimal_load(a: Any, u: Any, t: Any) -> np.ndarray:
    """``l* = u t / (W - 1)``: the load maximising ``l Pr[T <= t]`` (MATH.md §3, Theorem 1).

    ``a u = 0`` (no shift) has no finite maximiser: the result is ``inf``.
    """
    a, u = _check_au(a, u)
    t = _as_float(t, "t")
    if np.any(~np.isfinite(t)) or np.any(t < 0):
        raise ArgumentError("t: must be finite and >= 0")
    y = _w_minus_one(a * u)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y > 0, u * t / np.where(y > 0, y, 1.0), np.inf)


def worker_value(a: Any, u: Any) -> np.ndarray:
    """``v = u / W``: expected results per unit time at the optimal load (MATH.md §3)."""
    a, u = _check_au(a, u)
    return cast(np.ndarray, u / (1.0 + _w_minus_one(a * u)))


def t_star(L_m: float, values: Any) -> float:
    """``t*_m = L_m / sum_{n in Omega_m} v_{m,n}`` (MATH.md §3); ``inf`` for an empty set."""
    total = float(np.sum(_as_float(values, "values")))
    return float(L_m) / total if total > 0 else math.inf
