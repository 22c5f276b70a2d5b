"""The theory of the unified coding framework (MATH.md §2): the latency-load pair
``(D(q), L(q))`` with every term, the lower bound on the load, and the tradeoff over ``q`` with
its memory-sharing envelope.  All values are exact :class:`fractions.Fraction` s."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ...errors import ArgumentError
from ._params import MuLike, _check_int, _check_params, as_mu


@dataclass(frozen=True)
class LoadBreakdown:
    """Every term of ``D(q)`` and ``L(q)`` (MATH.md §2), exact.

    Attributes:
        K, mu, N, q: the parameters (``mu`` as a Fraction).
        r: ``floor(mu q)``, the number of servers storing each batch.
        mu_bar: ``r / q``, the storage the scheme uses.
        B: ``(B_0, ..., B_r)``; ``B_j m`` is how many values each server in ``Q`` receives per
            output it reduces in the multicast round over subsets of size ``j+1``.
        s_q: smallest ``s >= 1`` with ``sum_{j=s}^{r} B_j <= 1 - mu_bar`` (``r+1``: no round).
        multicast: ``N sum_{j=s_q}^{r} B_j / j``, the greedy rounds' load.
        residual: ``1 - mu_bar - sum_{j=s_q}^{r} B_j``, per output, as a fraction of ``m``.
        unicast_cost: ``N * residual``, the load of finishing by unicast.
        extra_round_cost: ``N B_{s_q-1} / (s_q-1)``, finishing by one more multicast round
            (``None`` when ``s_q == 1``).
        finish: ``"none"`` (residual 0), ``"unicast"`` or ``"multicast"``: the cheaper way to
            finish (ties go to unicast).
        D: ``mu N (1 + sum_{j=K-q+1}^{K} 1/j)``, the mean Map latency.
        L: the communication load ``multicast + min(unicast_cost, extra_round_cost)``.
    """

    K: int
    mu: Fraction
    N: int
    q: int
    r: int
    mu_bar: Fraction
    B: tuple[Fraction, ...]
    s_q: int
    multicast: Fraction
    residual: Fraction
    unicast_cost: Fraction
    extra_round_cost: Fraction | None
    finish: str
    D: Fraction
    L: Fraction

    @property
    def rounds(self) -> tuple[int, ...]:
        """The multicast rounds ``j`` the shuffle runs, largest first (subsets of size j+1)."""
        last = self.s_q - 1 if self.finish == "multicast" else self.s_q
        return tuple(range(self.r, last - 1, -1))


def load_breakdown(K: int, mu: MuLike, N: int, q: int) -> LoadBreakdown:
    """All terms of the latency-load pair ``(D(q), L(q))`` of MATH.md §2.

    ``N`` need not be a multiple of ``q`` here (the formulas do not need it; the scheme does).
    """
    K, mu_f, N, q = _check_params(K, mu, N, q)
    r = math.floor(mu_f * q)
    mu_bar = Fraction(r, q)
    denom = Fraction(q, K) * math.comb(K, r)
    B = tuple(Fraction(math.comb(q - 1, j) * math.comb(K - q, r - j)) / denom
              for j in range(r + 1))
    need = 1 - mu_bar
    s_q = r + 1
    for s in range(r, 0, -1):
        if sum(B[s:], Fraction(0)) <= need:
            s_q = s
        else:
            break
    delivered = sum(B[s_q:], Fraction(0))
    multicast = N * sum((B[j] / j for j in range(s_q, r + 1)), Fraction(0))
    residual = need - delivered
    unicast_cost = N * residual
    extra = N * B[s_q - 1] / (s_q - 1) if s_q >= 2 else None
    if residual == 0:
        finish, finish_cost = "none", Fraction(0)
    elif extra is None or unicast_cost <= extra:
        finish, finish_cost = "unicast", unicast_cost
    else:
        finish, finish_cost = "multicast", extra
    D = mu_f * N * (1 + sum((Fraction(1, j) for j in range(K - q + 1, K + 1)), Fraction(0)))
    return LoadBreakdown(K=K, mu=mu_f, N=N, q=q, r=r, mu_bar=mu_bar, B=B, s_q=s_q,
                         multicast=multicast, residual=residual, unicast_cost=unicast_cost,
                         extra_round_cost=extra, finish=finish, D=D, L=multicast + finish_cost)


def latency_load(K: int, mu: MuLike, N: int, q: int) -> tuple[Fraction, Fraction]:
    """The achievable pair ``(D(q), L(q))`` of MATH.md §2, exact.

    ``D(q) = mu N (1 + sum_{j=K-q+1}^{K} 1/j)`` (shifted-exponential Map latency) and
    ``L(q) = N [sum_{j=s_q}^{r} B_j/j + min(1 - mu_bar - sum_{j>=s_q} B_j, B_{s_q-1}/(s_q-1))]``
    with ``r = floor(mu q)``, ``mu_bar = r/q``.  Example (the seed's): ``K=4, mu=1/2, N=4``
    gives ``(37/6, 1)`` at ``q=4`` and ``(19/6, 2)`` at ``q=2``.
    """
    b = load_breakdown(K, mu, N, q)
    return b.D, b.L


def lower_bound(K: int, mu: MuLike, N: int, q: int) -> Fraction:
    """Lower bound on the load when waiting for ``q`` servers (MATH.md §2):

    ``N max_{t=1..q-1} q (1 - min(t mu, 1)) / (ceil(q/t) (q - t))`` (0 when ``q == 1``).
    """
    K, mu_f, N, q = _check_params(K, mu, N, q)
    best = Fraction(0)
    for t in range(1, q):
        val = Fraction(q) * (1 - min(t * mu_f, Fraction(1))) / (math.ceil(Fraction(q, t)) * (q - t))
        best = max(best, val)
    return N * best


@dataclass(frozen=True)
class TradeoffPoint:
    """One achievable point (MATH.md §2): wait for ``q`` servers.

    Attributes: ``q``; ``D`` and ``L`` (exact); ``lower_bound`` on the load at this ``q``;
    ``envelope`` (the memory-sharing envelope's load at ``D``); ``on_envelope`` (a vertex of it).
    """

    q: int
    D: Fraction
    L: Fraction
    lower_bound: Fraction
    envelope: Fraction
    on_envelope: bool


@dataclass(frozen=True)
class Tradeoff:
    """The latency-load tradeoff for ``q = ceil(1/mu) .. K`` (MATH.md §2).

    Attributes: ``K``, ``mu``, ``N``; ``points`` (one per ``q``, by increasing ``q``);
    ``envelope``: the vertices ``(D, L)`` of the lower convex envelope of the points, by
    increasing ``D``: memory sharing achieves every point on the segments between them.
    """

    K: int
    mu: Fraction
    N: int
    points: tuple[TradeoffPoint, ...]
    envelope: tuple[tuple[Fraction, Fraction], ...]

    def envelope_load(self, D: Fraction | float) -> Fraction:
        """The envelope's load at latency ``D`` (``D`` inside the achievable latency range)."""
        d = Fraction(D) if not isinstance(D, Fraction) else D
        lo, hi = self.envelope[0][0], self.envelope[-1][0]
        if not lo <= d <= hi:
            raise ArgumentError(f"D: {D!r} must lie in the achievable latency range "
                                f"[{float(lo):.6g}, {float(hi):.6g}]")
        for (d0, l0), (d1, l1) in zip(self.envelope, self.envelope[1:]):
            if d0 <= d <= d1:
                return l0 + (l1 - l0) * (d - d0) / (d1 - d0)
        return self.envelope[0][1]  # a single point

    def table(self) -> str:
        """A plain-text table: q, D(q), L(q), envelope load, lower bound, envelope vertex."""
        head = ("q", "D(q)", "L(q)", "envelope", "lower bound", "vertex")
        rows = [head] + [
            (str(p.q), f"{float(p.D):.4f}", f"{float(p.L):.4f}", f"{float(p.envelope):.4f}",
             f"{float(p.lower_bound):.4f}", "*" if p.on_envelope else "")
            for p in self.points]
        widths = [max(len(row[c]) for row in rows) for c in range(len(head))]
        lines = [f"Unified coding tradeoff: K={self.K}, mu={self.mu}, N={self.N}"]
        for i, row in enumerate(rows):
            lines.append("  ".join(cell.rjust(w) for cell, w in zip(row, widths)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _lower_hull(pts: Sequence[tuple[Fraction, Fraction]]) -> list[tuple[Fraction, Fraction]]:
    hull: list[tuple[Fraction, Fraction]] = []
    for p in sorted(set(pts)):
        if hull and hull[-1][0] == p[0]:
            continue  # same D: the sort put the smaller L first
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) <= 0:
                hull.pop()
            else:
                break
        hull.append(p)
    return hull


def tradeoff(K: int, mu: MuLike, N: int) -> Tradeoff:
    """All achievable ``(D(q), L(q))``, ``q = ceil(1/mu) .. K``, their lower convex envelope
    (memory sharing) and the lower bound beside each point (MATH.md §2)."""
    K = _check_int("K", K, low=1)
    mu_f = as_mu(mu, K)
    N = _check_int("N", N, low=1)
    qs = range(math.ceil(1 / mu_f), K + 1)
    raw = [(q, *latency_load(K, mu_f, N, q), lower_bound(K, mu_f, N, q)) for q in qs]
    hull = tuple(_lower_hull([(D, L) for _, D, L, _ in raw]))
    tmp = Tradeoff(K=K, mu=mu_f, N=N, points=(), envelope=hull)
    vertices = set(hull)
    points = tuple(TradeoffPoint(q=q, D=D, L=L, lower_bound=lb, envelope=tmp.envelope_load(D),
                                 on_envelope=(D, L) in vertices) for q, D, L, lb in raw)
    return Tradeoff(K=K, mu=mu_f, N=N, points=points, envelope=hull)


