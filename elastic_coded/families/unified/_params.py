"""Parameter checks shared by the unified coding framework: ``K``, ``mu``, ``N``, ``q``
(MATH.md §2).  How ``mu`` may be given is told in :mod:`elastic_coded.families.unified`."""

from __future__ import annotations

import logging
import math
import numbers
from fractions import Fraction

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError

log = logging.getLogger(__name__)

MuLike = Fraction | float | int | str
"""What a storage fraction ``mu`` may be given as (see :mod:`elastic_coded.families.unified`)."""

_SNAP_TOL = Fraction(1, 2000)  # a float within 5e-4 of p/d (d <= K) means p/d


# ------------------------------------------------------------------------------------------------
# validation helpers
# ------------------------------------------------------------------------------------------------

def _check_int(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{name}: must be an int, got {type(value).__name__} {value!r}")
    v = int(value)
    if low is not None and v < low:
        raise ArgumentError(f"{name}: {v} must be >= {low}")
    if high is not None and v > high:
        raise ArgumentError(f"{name}: {v} must be <= {high}")
    return v


def as_mu(mu: MuLike, K: int) -> Fraction:
    """Convert and check a storage fraction: ``1/K <= mu <= 1`` (MATH.md §2).

    Floats are read as their printed decimal, snapped to a fraction ``p/d`` with ``d <= K``
    when within ``5e-4`` of it (``0.333`` means ``1/3``); see :mod:`elastic_coded.families.unified`.
    """
    K = _check_int("K", K, low=1)
    if isinstance(mu, bool):
        raise ArgumentTypeError(f"mu: must be a number, got bool {mu!r}")
    if isinstance(mu, Fraction):
        f = mu
    elif isinstance(mu, (int, np.integer)):
        f = Fraction(int(mu))
    elif isinstance(mu, (float, np.floating)):
        x = float(mu)
        if not math.isfinite(x):
            raise ArgumentError(f"mu: {mu!r} must be a finite number in [1/K, 1] = [1/{K}, 1]")
        f = Fraction(repr(x))
        snap = Fraction(x).limit_denominator(K)
        if snap != f and abs(snap - f) < _SNAP_TOL:
            log.debug("mu: float %r read as %s", x, snap)
            f = snap
    elif isinstance(mu, str):
        try:
            f = Fraction(mu.strip())
        except (ValueError, ZeroDivisionError):
            raise ArgumentError(f"mu: {mu!r} is not a number or fraction such as '1/3'") from None
    elif isinstance(mu, numbers.Rational):
        f = Fraction(int(mu.numerator), int(mu.denominator))
    else:
        raise ArgumentTypeError(f"mu: must be a Fraction, float, int or str, got "
                                f"{type(mu).__name__} {mu!r}")
    if not Fraction(1, K) <= f <= 1:
        raise ArgumentError(
               f"mu: {mu!r} (= {f}) must satisfy 1/K = 1/{K} <= mu <= 1, so that the K servers "
               f"together can store A and no server stores more than A")
    return f


def _check_q(q: object, K: int, mu: Fraction) -> int:
    q_min = math.ceil(1 / mu)
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)):
        raise ArgumentTypeError(f"q: must be an int, got {type(q).__name__} {q!r}")
    q = int(q)
    if not q_min <= q <= K:
        raise ArgumentError(
               f"q: {q} must lie in ceil(1/mu)..K = {q_min}..{K} (mu = {mu}): the fastest q "
               f"servers must jointly hold A (mu*q >= 1) and there are only K servers")
    return q


def _check_params(K: object, mu: MuLike, N: object, q: object
                  ) -> tuple[int, Fraction, int, int]:
    K = _check_int("K", K, low=1)
    mu_f = as_mu(mu, K)
    N = _check_int("N", N, low=1)
    q = _check_q(q, K, mu_f)
    return K, mu_f, N, q


def _check_n_divisible(N: int, q: int) -> None:
    if N % q:
        raise ArgumentError(f"N: {N} must be divisible by q = {q}: each of the q fastest servers "
                            f"reduces N/q of the N outputs")

