"""The unified coding framework: coded storage, Map on the fastest ``q`` servers, coded-multicast
Shuffle, Reduce (MATH.md §2).

``K`` servers each store a fraction ``mu`` of ``A`` (``m`` rows), ``N`` input vectors ``x_j``, and
the Map phase ends when the fastest ``q`` servers are done.  Waiting for more servers (larger ``q``)
costs latency ``D(q)`` and saves communication ``L(q)``; this module gives

* the theory: :func:`latency_load`, :func:`load_breakdown`, :func:`lower_bound`, :func:`tradeoff`;
* the scheme as pure plans (frozen dataclasses): :func:`storage_design`, :func:`encode_storage`,
  :func:`map_compute`, :func:`reduce_assignment`, :func:`shuffle_plan`, :func:`encode_packet`,
  :func:`decode_packet`, :func:`receive_packet`, :func:`reduce_outputs`, :func:`reduce_server`;
* a reference in-process executor, :func:`run_in_process`, that defines the semantics every other
  executor of these plans must match;
* the Map latency model: one draw per server, :func:`sample_map_latencies`, and a Monte Carlo
  of ``D(q)``, :func:`simulate_map_latency`;
* a plot of the tradeoff, :func:`plot_tradeoff` (needs the optional ``matplotlib``).

Conventions.  Servers are numbered ``0 .. K-1``, coded rows ``0 .. (K/q)m - 1``, outputs
``0 .. N-1`` (the seed counts from 1).  An *intermediate value* is the field element
``c_i x_j`` (coded row ``i`` times input ``j``); communication is counted in such values, a
multicast counted once, and normalised by ``m``.  All theory values are exact
:class:`fractions.Fraction` s.

Storage ``mu``.  ``mu`` may be a :class:`~fractions.Fraction`, an ``int``, a string such as
``"1/3"`` or a float.  A float is read as the decimal it prints as (``0.3`` is ``3/10``), except
that when it lies within ``5e-4`` of a fraction with denominator ``<= K`` it is taken to be that
fraction: a user typing ``0.333`` or ``0.667`` for ``K >= 3`` means ``1/3`` or ``2/3``.  Pass a
``Fraction`` to avoid any rounding.

Divisibility (the seed assumes them; they are checked, with the rule in the message).  With
``r = floor(mu q)`` (so ``mu_bar = r/q``) and ``b = C(K, r)`` batches:

1. ``q`` divides ``N`` (each server in ``Q`` reduces ``N/q`` outputs);
2. ``(K/q) m`` is an integer divisible by ``b``: the batch size ``beta = K m / (q b)`` is an
   integer (then every server stores ``r m / q = mu_bar m`` coded rows);
3. every multicast round ``j`` that the shuffle runs splits each set ``V^k_S`` of
   ``(N/q) C(K-q, r-j) beta`` values into ``j`` equal segments, so ``j`` divides that count.

The valid ``m`` are exactly the multiples of :func:`rows_multiple`.  The theory functions need
none of these (``tradeoff(4, 1/2, 4)`` includes ``q = 3``); the scheme's functions check them.  Values are never split
below one field element; the conditions above make every segment a whole number of values.

Storage code.  A small systematic Reed-Solomon generator (Lagrange basis on ``field.points``),
MDS over every field.  Over the reals any such polynomial code loses accuracy as ``m`` grows:
in the worst fastest set the relative error is about ``1e-12`` for ``m`` up to a few dozen and
reaches ``1e-8 .. 1e-6`` near ``m = 100 .. 200``.  Use a finite field for exact results.

Discrepancies with MATH.md §2: none in the formulas; MATH.md's ``D(q)`` uses ``mu`` (the storage
the latency model is stated for) while the load uses ``mu_bar``, and this module follows that.
The seed defines ``s_q`` as an infimum over ``s`` without a range; here ``s_q`` is the smallest
``s`` in ``1 .. r+1`` (``r+1`` meaning "no greedy round", an empty sum ``0 <= 1 - mu_bar``), and a
tie between unicast and the extra multicast round goes to unicast.
"""

from __future__ import annotations

import itertools
import logging
import math
import numbers
from dataclasses import dataclass, field as dc_field
from fractions import Fraction
from typing import Iterable, Sequence, Union

import numpy as np

from ..algebra.fields import Field, field as _make_field

__all__ = [
    "MuLike",
    "LoadBreakdown",
    "TradeoffPoint",
    "Tradeoff",
    "StorageDesign",
    "Segment",
    "Transmission",
    "ShufflePlan",
    "RunResult",
    "as_mu",
    "load_breakdown",
    "latency_load",
    "lower_bound",
    "tradeoff",
    "rows_multiple",
    "storage_design",
    "encode_storage",
    "map_compute",
    "reduce_assignment",
    "shuffle_plan",
    "check_shuffle_plan",
    "encode_packet",
    "decode_packet",
    "receive_packet",
    "reduce_outputs",
    "reduce_server",
    "run_in_process",
    "simulate_map_latency",
    "sample_map_latencies",
    "plot_tradeoff",
]

log = logging.getLogger(__name__)

MuLike = Union[Fraction, float, int, str]
"""What a storage fraction ``mu`` may be given as (see the module docstring)."""

_SNAP_TOL = Fraction(1, 2000)  # a float within 5e-4 of p/d (d <= K) means p/d


# ------------------------------------------------------------------------------------------------
# validation helpers
# ------------------------------------------------------------------------------------------------

def _check_int(name: str, value, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: must be an int, got {type(value).__name__} {value!r}")
    v = int(value)
    if low is not None and v < low:
        raise ValueError(f"{name}: {v} must be >= {low}")
    if high is not None and v > high:
        raise ValueError(f"{name}: {v} must be <= {high}")
    return v


def as_mu(mu: MuLike, K: int) -> Fraction:
    """Convert and check a storage fraction: ``1/K <= mu <= 1`` (MATH.md §2).

    Floats are read as their printed decimal, snapped to a fraction ``p/d`` with ``d <= K``
    when within ``5e-4`` of it (``0.333`` means ``1/3``); see the module docstring.
    """
    K = _check_int("K", K, low=1)
    if isinstance(mu, bool):
        raise TypeError(f"mu: must be a number, got bool {mu!r}")
    if isinstance(mu, Fraction):
        f = mu
    elif isinstance(mu, (int, np.integer)):
        f = Fraction(int(mu))
    elif isinstance(mu, (float, np.floating)):
        x = float(mu)
        if not math.isfinite(x):
            raise ValueError(f"mu: {mu!r} must be a finite number in [1/K, 1] = [1/{K}, 1]")
        f = Fraction(repr(x))
        snap = Fraction(x).limit_denominator(K)
        if snap != f and abs(snap - f) < _SNAP_TOL:
            log.debug("mu: float %r read as %s", x, snap)
            f = snap
    elif isinstance(mu, str):
        try:
            f = Fraction(mu.strip())
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"mu: {mu!r} is not a number or fraction such as '1/3'") from None
    elif isinstance(mu, numbers.Rational):
        f = Fraction(int(mu.numerator), int(mu.denominator))
    else:
        raise TypeError(f"mu: must be a Fraction, float, int or str, got {type(mu).__name__} "
                        f"{mu!r}")
    if not Fraction(1, K) <= f <= 1:
        raise ValueError(
            f"mu: {mu!r} (= {f}) must satisfy 1/K = 1/{K} <= mu <= 1, so that the K servers "
            f"together can store A and no server stores more than A")
    return f


def _check_q(q, K: int, mu: Fraction) -> int:
    q_min = math.ceil(1 / mu)
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)):
        raise TypeError(f"q: must be an int, got {type(q).__name__} {q!r}")
    q = int(q)
    if not q_min <= q <= K:
        raise ValueError(
            f"q: {q} must lie in ceil(1/mu)..K = {q_min}..{K} (mu = {mu}): the fastest q "
            f"servers must jointly hold A (mu*q >= 1) and there are only K servers")
    return q


def _check_params(K, mu, N, q) -> tuple[int, Fraction, int, int]:
    K = _check_int("K", K, low=1)
    mu_f = as_mu(mu, K)
    N = _check_int("N", N, low=1)
    q = _check_q(q, K, mu_f)
    return K, mu_f, N, q


# ------------------------------------------------------------------------------------------------
# theory
# ------------------------------------------------------------------------------------------------

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
            raise ValueError(f"D: {D!r} must lie in the achievable latency range "
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


# ------------------------------------------------------------------------------------------------
# divisibility
# ------------------------------------------------------------------------------------------------

def _batch_multiple(K: int, q: int, r: int) -> int:
    """Smallest m with K m / (q C(K, r)) a positive integer."""
    qb = q * math.comb(K, r)
    return qb // math.gcd(K, qb)


def _segment_multiple(b: LoadBreakdown) -> int:
    """Smallest batch size beta making every multicast round's segments whole."""
    beta0 = 1
    for j in b.rounds:
        count = (b.N // b.q) * math.comb(b.K - b.q, b.r - j)
        if j >= 1 and b.B[j] and count:
            beta0 = math.lcm(beta0, j // math.gcd(j, count))
    return beta0


def rows_multiple(K: int, mu: MuLike, N: int, q: int) -> int:
    """The smallest ``m`` the scheme runs with; the valid ``m`` are exactly its multiples.

    Rules (module docstring): ``q | N``; ``beta = K m / (q C(K, r))`` an integer; ``j`` divides
    ``(N/q) C(K-q, r-j) beta`` for every multicast round ``j`` the shuffle runs.
    """
    b = load_breakdown(K, mu, N, q)
    _check_n_divisible(b.N, b.q)
    m0 = _batch_multiple(b.K, b.q, b.r)
    per = b.K * m0 // (b.q * math.comb(b.K, b.r))  # beta for m = m0
    beta0 = _segment_multiple(b)
    return m0 * (beta0 // math.gcd(beta0, per))


def _check_n_divisible(N: int, q: int) -> None:
    if N % q:
        raise ValueError(f"N: {N} must be divisible by q = {q}: each of the q fastest servers "
                         f"reduces N/q of the N outputs")


# ------------------------------------------------------------------------------------------------
# storage design
# ------------------------------------------------------------------------------------------------

def _mds_generator(fld: Field, n_coded: int, m: int) -> np.ndarray:
    """A systematic MDS generator (``n_coded x m``): a Reed-Solomon code in the Lagrange basis.

    Coded row ``i`` is the evaluation at a point ``alpha_i`` of the polynomial of degree ``< m``
    that takes the data rows' values at ``alpha_0 .. alpha_{m-1}``:
    ``G[i, j] = prod_{l != j} (alpha_i - alpha_l) / (alpha_j - alpha_l)``.  Any ``m`` rows form
    an invertible interpolation matrix (distinct points), so any ``m`` coded rows decode.  The
    points ``field.points(n_coded)`` are assigned to rows in a golden-ratio order, so that every
    batch (a run of consecutive rows) and the data rows are spread over all the points: over the
    reals (Chebyshev points) this keeps the decoding matrices well conditioned; over a finite
    field the order does not matter.
    """
    if n_coded == m:
        return fld.eye(m)
    try:
        pts = fld.points(n_coded)
    except ValueError as exc:
        raise ValueError(
            f"m: the storage code needs (K/q)*m = {n_coded} distinct field elements, more than "
            f"{fld.name} has ({exc}); use a larger field or a smaller m") from None
    # Low-discrepancy order: any run of consecutive rows (a batch, the data rows) is spread
    # evenly over the points (golden-ratio sequence, three-gap theorem).
    golden = (np.sqrt(5.0) - 1.0) / 2.0
    rank = np.argsort(np.argsort((np.arange(n_coded) * golden) % 1.0, kind="stable"))
    alpha = pts[rank]
    data, parity = alpha[:m], alpha[m:]
    one = fld.eye(1)[0, 0]
    P = None
    for l in range(m):
        den = fld.sub(data, data[l])
        den[l] = one
        factor = fld.mul(fld.sub(parity, data[l])[:, None], fld.inv(den)[None, :])
        factor[:, l] = one
        P = factor if P is None else fld.mul(P, factor)
    return np.concatenate([fld.eye(m), P], axis=0)


@dataclass(frozen=True)
class StorageDesign:
    """Coded storage (MATH.md §2, storage design).

    ``(K/q) m`` coded rows ``C = G A`` (``G`` a systematic MDS generator), split into
    ``C(K, r)`` batches of ``batch_size`` consecutive rows; batch ``b`` is stored on every
    server of ``batches[b]`` (``r = floor(mu q)`` servers).

    Attributes:
        K, mu, q, m: the parameters (``mu`` as given, a Fraction); ``r`` and ``mu_bar = r/q``.
        n_coded: ``(K/q) m``; ``batch_size``: ``n_coded / C(K, r)``.
        batches: the server set of each batch, in lexicographic order.
        server_rows: for each server, the (increasing) coded rows it stores.
        generator: the ``n_coded x m`` generator ``G`` over ``field``.
        field: the field.
    """

    K: int
    mu: Fraction
    q: int
    m: int
    r: int
    mu_bar: Fraction
    n_coded: int
    batch_size: int
    batches: tuple[tuple[int, ...], ...]
    server_rows: tuple[tuple[int, ...], ...]
    generator: np.ndarray = dc_field(repr=False, compare=False)
    field: Field = dc_field(repr=False, compare=False)

    def batch_rows(self, b: int) -> range:
        """Coded rows of batch ``b``."""
        return range(b * self.batch_size, (b + 1) * self.batch_size)

    def local_index(self, k: int, rows: Sequence[int]) -> np.ndarray:
        """Positions of coded ``rows`` within server ``k``'s stored rows (all must be there)."""
        have = np.asarray(self.server_rows[k], dtype=np.int64)
        rows_a = np.asarray(rows, dtype=np.int64)
        pos = np.searchsorted(have, rows_a)
        if rows_a.size and (np.any(pos >= have.size) or np.any(have[np.minimum(pos, have.size - 1)]
                                                              != rows_a)):
            raise ValueError(f"rows: server {k} does not store all of coded rows {rows_a.tolist()}")
        return pos


def storage_design(K: int, mu: MuLike, q: int, m: int, field: Field | str = "real"
                   ) -> StorageDesign:
    """Design the coded storage for waiting on ``q`` servers (MATH.md §2, storage design).

    Needs ``K m / (q C(K, r))`` to be a positive integer (``r = floor(mu q)``).
    """
    K = _check_int("K", K, low=1)
    mu_f = as_mu(mu, K)
    q = _check_q(q, K, mu_f)
    m = _check_int("m", m, low=1)
    fld = _make_field(field)
    r = math.floor(mu_f * q)
    n_batches = math.comb(K, r)
    if (K * m) % (q * n_batches):
        raise ValueError(
            f"m: {m} does not fit the batches: (K/q)*m = {K}*{m}/{q} coded rows must be an "
            f"integer divisible by C(K, mu_bar*q) = C({K}, {r}) = {n_batches} batches; m must be "
            f"a multiple of {_batch_multiple(K, q, r)}")
    n_coded = K * m // q
    beta = n_coded // n_batches
    batches = tuple(itertools.combinations(range(K), r))
    server_rows = tuple(
        tuple(row for b, T in enumerate(batches) if k in T
              for row in range(b * beta, (b + 1) * beta))
        for k in range(K))
    G = _mds_generator(fld, n_coded, m)
    return StorageDesign(K=K, mu=mu_f, q=q, m=m, r=r, mu_bar=Fraction(r, q), n_coded=n_coded,
                         batch_size=beta, batches=batches, server_rows=server_rows, generator=G,
                         field=fld)


def encode_storage(design: StorageDesign, A) -> tuple[np.ndarray, ...]:
    """What each server stores: ``U_k = G[server_rows[k]] A`` (MATH.md §2, storage design)."""
    fld = design.field
    A = fld.asarray(A, "A")
    if A.ndim != 2 or A.shape[0] != design.m:
        raise ValueError(f"A: must be a 2-D array with m = {design.m} rows, got shape {A.shape}")
    coded = fld.matmul(design.generator, A)
    return tuple(coded[list(rows)] if rows else coded[:0] for rows in design.server_rows)


def map_compute(design: StorageDesign, stored, X) -> np.ndarray:
    """Map on one server: its stored coded rows times all ``N`` inputs (``X`` is ``n x N``).

    Row ``t`` of the result holds the values ``c_i x_j`` for the ``t``-th row ``i`` the server
    stores (MATH.md §2, Map)."""
    fld = design.field
    X = fld.asarray(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X: must be 2-D (n x N, one input per column), got shape {X.shape}")
    return fld.matmul(np.asarray(stored), X)


# ------------------------------------------------------------------------------------------------
# shuffle plans
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Segment:
    """Values meant for one receiver: ``c_rows[t] x_outputs[t]`` for each ``t``."""

    receiver: int
    rows: tuple[int, ...]
    outputs: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class Transmission:
    """One packet: ``sender`` sends the elementwise sum (XOR in GF(2^T)) of its ``segments``
    to ``receivers``; each receiver recovers its own segment by subtracting the others, which it
    has computed itself (MATH.md §2, shuffle).

    Attributes: ``sender``; ``receivers``; ``segments`` (one per receiver, equal lengths);
    ``round``: the multicast round ``j`` (subsets of size ``j+1``), ``0`` for unicast.
    """

    sender: int
    receivers: tuple[int, ...]
    segments: tuple[Segment, ...]
    round: int

    @property
    def size(self) -> int:
        """Values on the wire (a multicast counted once)."""
        return len(self.segments[0]) if self.segments else 0

    def segment_for(self, receiver: int) -> Segment:
        for seg in self.segments:
            if seg.receiver == receiver:
                return seg
        raise ValueError(f"receiver: {receiver} is not a receiver of this transmission")


@dataclass(frozen=True)
class ShufflePlan:
    """The Shuffle for one set ``Q`` of fastest servers (MATH.md §2).

    Attributes:
        fastest: ``Q``, increasing; ``assignment[t]``: outputs reduced by ``fastest[t]``.
        m, N: sizes; ``theory``: the :class:`LoadBreakdown` the plan realises.
        transmissions: the packets, greedy multicast rounds first (largest ``j`` first), then
            the finishing round (unicast or one more multicast round).
        values_sent: total values on the wire; ``load``: ``values_sent / m``.
    """

    fastest: tuple[int, ...]
    assignment: tuple[tuple[int, ...], ...]
    m: int
    N: int
    theory: LoadBreakdown
    transmissions: tuple[Transmission, ...]
    values_sent: int
    load: Fraction

    def outputs_of(self, k: int) -> tuple[int, ...]:
        """The outputs server ``k`` reduces (empty if ``k`` is not among the fastest)."""
        try:
            return self.assignment[self.fastest.index(k)]
        except ValueError:
            return ()


def reduce_assignment(fastest: Iterable[int], N: int) -> tuple[tuple[int, ...], ...]:
    """Split the ``N`` outputs evenly over the fastest servers: the ``t``-th smallest server of
    ``Q`` reduces outputs ``t N/q .. (t+1) N/q - 1`` (MATH.md §2, Reduce)."""
    Q = sorted(int(k) for k in fastest)
    q = len(Q)
    if q == 0:
        raise ValueError("fastest: must name at least one server")
    _check_n_divisible(N, q)
    per = N // q
    return tuple(tuple(range(t * per, (t + 1) * per)) for t in range(q))


def _check_fastest(design: StorageDesign, fastest) -> tuple[int, ...]:
    try:
        Q = tuple(sorted(int(k) for k in fastest))
    except TypeError:
        raise TypeError(f"fastest: must be a collection of server ids, got {fastest!r}") from None
    if len(set(Q)) != len(Q) or len(Q) != design.q or any(not 0 <= k < design.K for k in Q):
        raise ValueError(f"fastest: {fastest!r} must be q = {design.q} distinct server ids in "
                         f"0..K-1 = 0..{design.K - 1}")
    return Q


def shuffle_plan(design: StorageDesign, fastest: Iterable[int], N: int) -> ShufflePlan:
    """The Shuffle of MATH.md §2 for the fastest servers ``Q``: greedy coded multicast over
    subsets of size ``j+1``, ``j = r .. s_q``, then the cheaper of unicast and one more multicast
    round.  Its ``values_sent`` equals ``L(q) m`` exactly.

    For a subset ``S`` of ``Q`` of size ``j+1`` and ``k`` in ``S``, ``V^k_{S-k}`` are the values
    ``k`` needs (its outputs times the rows of batches ``T`` with ``T ∩ Q = S - k``); each is
    split into ``j`` equal segments, one per other member ``i``, and ``i`` sends the sum of the
    segments associated with it.
    """
    Q = _check_fastest(design, fastest)
    N = _check_int("N", N, low=1)
    _check_n_divisible(N, design.q)
    th = load_breakdown(design.K, design.mu, N, design.q)
    K, q, m, beta = design.K, design.q, design.m, design.batch_size
    need_beta = _segment_multiple(th)
    if beta % need_beta:
        raise ValueError(
            f"m: {m} does not fit the shuffle segments: each multicast round j splits sets of "
            f"(N/q)*C(K-q, r-j)*batch values into j equal segments, so the batch size "
            f"{beta} must be a multiple of {need_beta}; m must be a multiple of "
            f"rows_multiple(K, mu, N, q) = {rows_multiple(K, design.mu, N, q)}")
    assignment = reduce_assignment(Q, N)
    W = dict(zip(Q, assignment))
    Qset = set(Q)
    rows_by_S: dict[tuple[int, ...], list[int]] = {}
    for b, T in enumerate(design.batches):
        S = tuple(k for k in T if k in Qset)
        rows_by_S.setdefault(S, []).extend(design.batch_rows(b))

    def needed(k: int, S: tuple[int, ...]) -> list[tuple[int, int]]:
        rows = rows_by_S.get(S, [])
        return [(row, o) for o in W[k] for row in rows]

    transmissions: list[Transmission] = []
    for j in th.rounds:
        if j < 1:
            continue
        for S in itertools.combinations(Q, j + 1):
            pieces: dict[int, dict[int, list[tuple[int, int]]]] = {}
            for k in S:
                others = tuple(i for i in S if i != k)
                vals = needed(k, others)
                if not vals:
                    break
                size = len(vals) // j
                pieces[k] = {i: vals[t * size:(t + 1) * size] for t, i in enumerate(others)}
            else:
                for i in S:
                    segs = tuple(
                        Segment(receiver=k, rows=tuple(v[0] for v in pieces[k][i]),
                                outputs=tuple(v[1] for v in pieces[k][i]))
                        for k in S if k != i)
                    transmissions.append(Transmission(
                        sender=i, receivers=tuple(k for k in S if k != i), segments=segs,
                        round=j))
    if th.finish == "unicast":
        transmissions.extend(_unicast_round(design, th, Q, W, rows_by_S))
    values_sent = sum(t.size for t in transmissions)
    plan = ShufflePlan(fastest=Q, assignment=assignment, m=m, N=N, theory=th,
                       transmissions=tuple(transmissions), values_sent=values_sent,
                       load=Fraction(values_sent, m))
    if plan.load != th.L:  # pragma: no cover - an internal invariant
        raise AssertionError(f"shuffle plan load {plan.load} != theory {th.L}")
    return plan


def _unicast_round(design: StorageDesign, th: LoadBreakdown, Q: tuple[int, ...],
                   W: dict[int, tuple[int, ...]], rows_by_S) -> list[Transmission]:
    """Finish by unicast: each server gets ``residual * m`` more values per output, taken from
    batches held by fewer than ``s_q`` servers of ``Q`` (not yet delivered), each sent by the
    least-loaded server holding it."""
    need = int(th.residual * design.m)
    sent: dict[int, int] = {i: 0 for i in Q}
    packets: dict[tuple[int, int], list[tuple[int, int]]] = {}
    cands_by_S = sorted(((S, rows) for S, rows in rows_by_S.items() if 1 <= len(S) < th.s_q),
                        key=lambda item: (-len(item[0]), item[0]))
    for k in Q:
        mine = [(S, row) for S, rows in cands_by_S if k not in S for row in rows]
        if len(mine) < need:  # pragma: no cover - excluded by the MDS counting argument
            raise AssertionError(f"server {k}: {len(mine)} candidate rows < {need} needed")
        for o in W[k]:
            for S, row in mine[:need]:
                sender = min(S, key=lambda i: (sent[i], i))
                sent[sender] += 1
                packets.setdefault((sender, k), []).append((row, o))
    return [Transmission(sender=s, receivers=(k,),
                         segments=(Segment(receiver=k, rows=tuple(v[0] for v in vals),
                                           outputs=tuple(v[1] for v in vals)),), round=0)
            for (s, k), vals in sorted(packets.items())]


def check_shuffle_plan(design: StorageDesign, plan: ShufflePlan) -> None:
    """Check a plan before running it: every sender has computed what it sends, every receiver
    has computed the segments it must cancel, and after the shuffle every server holds ``m``
    distinct coded values for each output it reduces.  Raises ``ValueError`` otherwise."""
    stored = [set(rows) for rows in design.server_rows]
    held: dict[tuple[int, int], set[int]] = {
        (k, o): set(stored[k]) for k in plan.fastest for o in plan.outputs_of(k)}
    for n, t in enumerate(plan.transmissions):
        if t.sender not in plan.fastest or any(k not in plan.fastest for k in t.receivers):
            raise ValueError(f"plan: transmission {n} involves a server outside Q")
        if len({len(s) for s in t.segments}) > 1:
            raise ValueError(f"plan: transmission {n} has segments of unequal length")
        if sorted(s.receiver for s in t.segments) != sorted(t.receivers):
            raise ValueError(f"plan: transmission {n} needs one segment per receiver")
        for s in t.segments:
            if not set(s.rows) <= stored[t.sender]:
                raise ValueError(f"plan: transmission {n}: sender {t.sender} lacks a row")
            for k in t.receivers:
                if k != s.receiver and not set(s.rows) <= stored[k]:
                    raise ValueError(f"plan: transmission {n}: receiver {k} cannot cancel the "
                                     f"segment for {s.receiver}")
            for row, o in zip(s.rows, s.outputs):
                if (s.receiver, o) not in held:
                    raise ValueError(f"plan: transmission {n}: server {s.receiver} does not "
                                     f"reduce output {o}")
                held[(s.receiver, o)].add(row)
    for (k, o), rows in held.items():
        if len(rows) < design.m:
            raise ValueError(f"plan: server {k} ends with {len(rows)} < m = {design.m} coded "
                             f"values for output {o}")


def encode_packet(design: StorageDesign, t: Transmission, sender_map: np.ndarray) -> np.ndarray:
    """The packet ``t.sender`` sends: the sum of its segments' values, read from its Map result
    (:func:`map_compute`)."""
    fld = design.field
    packet = None
    for seg in t.segments:
        vals = sender_map[design.local_index(t.sender, seg.rows), list(seg.outputs)]
        packet = vals if packet is None else fld.add(packet, vals)
    return packet if packet is not None else fld.zeros(0)


def decode_packet(design: StorageDesign, t: Transmission, receiver: int, packet: np.ndarray,
                  receiver_map: np.ndarray) -> np.ndarray:
    """Receiver's side: cancel the segments it computed itself and return the values of its own
    segment (in the segment's order)."""
    fld = design.field
    out = np.asarray(packet)
    for seg in t.segments:
        if seg.receiver != receiver:
            known = receiver_map[design.local_index(receiver, seg.rows), list(seg.outputs)]
            out = fld.sub(out, known)
    return out


def receive_packet(design: StorageDesign, t: Transmission, receiver: int, packet,
                   receiver_map: np.ndarray, got: dict[int, dict[int, object]]) -> int:
    """Receiver's side of one transmission, filed for the Reduce: decode the packet
    (:func:`decode_packet`) and store each recovered value ``c_row x_o`` as ``got[o][row]``.
    Returns the number of values recovered (the length of the receiver's segment)."""
    seg = t.segment_for(receiver)
    vals = decode_packet(design, t, receiver, packet, receiver_map)
    if len(vals) != len(seg):
        raise ValueError(f"packet: transmission from server {t.sender} carries {len(vals)} "
                         f"values, the plan says {len(seg)}")
    for row, o, v in zip(seg.rows, seg.outputs, vals):
        got.setdefault(o, {})[row] = v
    return len(seg)


def reduce_outputs(design: StorageDesign, rows: Sequence[int], values) -> np.ndarray:
    """Decode outputs from ``m`` distinct coded values: solve ``G[rows] y = values``.

    ``values`` is ``m`` or ``m x c`` (``c`` outputs sharing the same coded rows); returns the
    ``A x_j`` (MATH.md §2, Reduce)."""
    rows = list(rows)
    if len(rows) != design.m or len(set(rows)) != design.m:
        raise ValueError(f"rows: need m = {design.m} distinct coded rows, got {len(rows)} "
                         f"({len(set(rows))} distinct)")
    return design.field.solve(design.generator[rows], np.asarray(values))


def reduce_server(design: StorageDesign, plan: ShufflePlan, k: int, own_map: np.ndarray,
                  got: dict[int, dict[int, object]]) -> np.ndarray:
    """Server ``k``'s Reduce (MATH.md §2): decode each output it reduces from ``m`` distinct
    coded values, its own Map result first (``own_map``, :func:`map_compute`), then the values
    it received (``got[o][row]``, :func:`receive_packet`) by increasing row.

    Returns ``m x len(plan.outputs_of(k))``: column ``c`` is ``A x_o`` for the ``c``-th output
    ``o`` of ``plan.outputs_of(k)``.  Outputs sharing the same coded rows are solved together."""
    fld = design.field
    m = design.m
    outs = plan.outputs_of(k)
    local = tuple(design.server_rows[k])
    local_set = set(local)
    own_map = np.asarray(own_map)
    groups: dict[tuple[int, ...], list[int]] = {}
    for c, o in enumerate(outs):
        extra = sorted(row for row in got.get(o, {}) if row not in local_set)
        rows = (local + tuple(extra))[:m]
        groups.setdefault(rows, []).append(c)
    result = fld.zeros((m, len(outs)))
    for rows, cols in groups.items():
        n_local = sum(1 for row in rows if row in local_set)
        vals = fld.zeros((m, len(cols)))
        if n_local:
            vals[:n_local] = own_map[:n_local][:, [outs[c] for c in cols]]
        for ci, c in enumerate(cols):
            column = got.get(outs[c], {})
            for t_i, row in enumerate(rows[n_local:], start=n_local):
                vals[t_i, ci] = column[row]
        result[:, cols] = reduce_outputs(design, rows, vals)
    return result


# ------------------------------------------------------------------------------------------------
# the reference executor
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunResult:
    """What :func:`run_in_process` did.

    Attributes:
        outputs: ``A X`` (``m x N``, column ``j`` is ``y_j``) as decoded by the reducers.
        values_sent: values actually transmitted; ``load``: ``values_sent / m`` (measured).
        theory: the :class:`LoadBreakdown` (``theory.L`` is the predicted load).
        design, plan: the storage design and shuffle plan that ran.
        map_values: values computed by each server of ``Q`` in the Map phase.
        values_by_round: ``(j, values)`` per multicast round ``j``, ``(0, values)`` for unicast.
        received: values each server of ``Q`` recovered in the Shuffle.
    """

    outputs: np.ndarray = dc_field(repr=False, compare=False)
    values_sent: int
    load: Fraction
    theory: LoadBreakdown
    design: StorageDesign = dc_field(repr=False)
    plan: ShufflePlan = dc_field(repr=False)
    map_values: tuple[int, ...]
    values_by_round: tuple[tuple[int, int], ...]
    received: tuple[int, ...]


def run_in_process(A, X, K: int, mu: MuLike, q: int, field: Field | str = "real",
                   fastest: Iterable[int] | None = None) -> RunResult:
    """Run storage, Map, Shuffle and Reduce in-process (the reference semantics, MATH.md §2).

    ``A`` is ``m x n``, ``X`` is ``n x N`` (one input per column); ``fastest`` is the set ``Q``
    of the ``q`` servers that finish the Map first (default ``0 .. q-1``).  Only they compute:
    the others are the stragglers whose results are never used.  ``m`` must be a multiple of
    :func:`rows_multiple`.  The reducers decode from what they computed and received only.
    """
    fld = _make_field(field)
    A = fld.asarray(A, "A")
    X = fld.asarray(X, "X")
    if A.ndim != 2 or X.ndim != 2 or A.shape[1] != X.shape[0]:
        raise ValueError(f"A, X: need A (m x n) and X (n x N), got shapes {A.shape} and "
                         f"{X.shape}")
    m, N = A.shape[0], X.shape[1]
    K = _check_int("K", K, low=1)
    mu_f = as_mu(mu, K)
    q = _check_q(q, K, mu_f)
    _check_n_divisible(N, q)
    design = storage_design(K, mu_f, q, m, fld)
    Q = _check_fastest(design, range(q) if fastest is None else fastest)
    plan = shuffle_plan(design, Q, N)
    check_shuffle_plan(design, plan)

    stored = encode_storage(design, A)
    maps = {k: map_compute(design, stored[k], X) for k in Q}

    got: dict[int, dict[int, dict[int, object]]] = {k: {} for k in Q}
    by_round: dict[int, int] = {}
    received = dict.fromkeys(Q, 0)
    values_sent = 0
    for t in plan.transmissions:
        packet = encode_packet(design, t, maps[t.sender])
        size = int(np.asarray(packet).shape[0])
        values_sent += size
        by_round[t.round] = by_round.get(t.round, 0) + size
        for k in t.receivers:
            received[k] += receive_packet(design, t, k, packet, maps[k], got[k])

    outputs = fld.zeros((m, N))
    for k in Q:
        outputs[:, list(plan.outputs_of(k))] = reduce_server(design, plan, k, maps[k], got[k])

    th = plan.theory
    return RunResult(outputs=outputs, values_sent=values_sent, load=Fraction(values_sent, m),
                     theory=th, design=design, plan=plan,
                     map_values=tuple(len(design.server_rows[k]) * N for k in Q),
                     values_by_round=tuple(sorted(by_round.items(), key=lambda kv: -kv[0])),
                     received=tuple(received[k] for k in Q))


# ------------------------------------------------------------------------------------------------
# latency Monte Carlo
# ------------------------------------------------------------------------------------------------

def simulate_map_latency(K: int, mu: MuLike, N: int, q: int, trials: int,
                         rng: np.random.Generator | int | None = None) -> float:
    """Mean ``q``-th order statistic of ``K`` i.i.d. Map latencies with
    ``Pr[S_k <= t] = 1 - exp(-(t/(mu N) - 1))``, ``t >= mu N`` (MATH.md §2), i.e.
    ``S_k = mu N (1 + E_k)``, ``E_k ~ Exp(1)``; estimates ``D(q)``."""
    K, mu_f, N, q = _check_params(K, mu, N, q)
    trials = _check_int("trials", trials, low=1)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    scale = float(mu_f * N)
    total, done, chunk = 0.0, 0, max(1, 2_000_000 // K)
    while done < trials:
        n = min(chunk, trials - done)
        E = gen.exponential(1.0, size=(n, K))
        total += float(np.partition(E, q - 1, axis=1)[:, q - 1].sum())
        done += n
    return scale * (1.0 + total / trials)


def sample_map_latencies(K: int, mu: MuLike, N: int,
                         rng: np.random.Generator | int | None = None) -> np.ndarray:
    """One draw of the ``K`` servers' Map latencies, in time units (MATH.md §2):
    ``S_k = mu N (1 + E_k)``, ``E_k ~ Exp(1)`` i.i.d., so ``Pr[S_k <= t] = 1 - exp(-(t/(mu N) - 1))``
    for ``t >= mu N``.  The ``q``-th smallest has mean ``D(q)``."""
    K = _check_int("K", K, low=1)
    mu_f = as_mu(mu, K)
    N = _check_int("N", N, low=1)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return float(mu_f * N) * (1.0 + gen.exponential(1.0, size=K))


# ------------------------------------------------------------------------------------------------
# plot
# ------------------------------------------------------------------------------------------------

def plot_tradeoff(tradeoff: Tradeoff, path, *,
                  measured: Iterable[tuple[float, float]] | None = None,
                  title: str | None = None):
    """Draw the tradeoff to an image file (format from the extension, e.g. ``.png``): the
    achieved points ``(D(q), L(q))`` labelled by ``q``, their lower convex envelope (memory
    sharing) and the lower bound at each ``D(q)``; ``measured`` adds points ``(latency, load)``
    measured by a run.  Needs ``matplotlib`` (the ``plot`` extra).  Returns ``path``."""
    if not isinstance(tradeoff, Tradeoff):
        raise TypeError(f"tradeoff: must be a Tradeoff (from tradeoff(K, mu, N)), got "
                        f"{type(tradeoff).__name__}")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plot_tradeoff: needs matplotlib, which is not installed; install it "
                          "with pip install 'elastic_coded[plot]' (or pip install matplotlib)"
                          ) from None
    pts = tradeoff.points
    D = [float(p.D) for p in pts]
    L = [float(p.L) for p in pts]
    fig = Figure(figsize=(6.4, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([float(d) for d, _ in tradeoff.envelope], [float(l) for _, l in tradeoff.envelope],
            "-", color="tab:blue", label="envelope (memory sharing)")
    ax.plot(D, L, "o", color="tab:blue", label="achieved (D(q), L(q))")
    ax.plot(D, [float(p.lower_bound) for p in pts], "s--", color="tab:gray", markersize=4,
            label="lower bound")
    for p, d, l in zip(pts, D, L):
        ax.annotate(f"q={p.q}", (d, l), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if measured is not None:
        mp = [(float(d), float(l)) for d, l in measured]
        if mp:
            ax.plot([d for d, _ in mp], [l for _, l in mp], "x", color="tab:red",
                    label="measured")
    ax.set_xlabel("Map latency D(q) (time units)")
    ax.set_ylabel("communication load L(q) (values / m)")
    ax.set_title(title or f"Unified coding tradeoff: K={tradeoff.K}, mu={tradeoff.mu}, "
                          f"N={tradeoff.N}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path
