"""Coded storage of the unified coding framework (MATH.md §2, storage design): which ``m`` the
scheme runs with, the MDS storage code, the batches each server stores, and the Map."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ...algebra.fields import Field
from ...algebra.fields import field as _make_field
from ...errors import ArgumentError
from ._lanes import LaneCode, complete, lane_code
from ._params import MuLike, _check_int, _check_n_divisible, _check_q, as_mu
from ._theory import LoadBreakdown, load_breakdown


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

    Rules (see :mod:`elastic_coded.families.unified`): ``q | N``; ``beta = K m / (q C(K, r))``
    an integer; ``j`` divides ``(N/q) C(K-q, r-j) beta`` for every multicast round ``j`` the
    shuffle runs.
    """
    b = load_breakdown(K, mu, N, q)
    _check_n_divisible(b.N, b.q)
    m0 = _batch_multiple(b.K, b.q, b.r)
    per = b.K * m0 // (b.q * math.comb(b.K, b.r))  # beta for m = m0
    beta0 = _segment_multiple(b)
    return m0 * (beta0 // math.gcd(beta0, per))




def _mds_generator(fld: Field, n_coded: int, m: int) -> np.ndarray:
    """A systematic MDS generator (``n_coded x m``): a Reed-Solomon code in the Lagrange basis,
    the storage code over finite fields (the reals use :mod:`._lanes`).

    Coded row ``i`` is the evaluation at a point ``alpha_i`` of the polynomial of degree ``< m``
    that takes the data rows' values at ``alpha_0 .. alpha_{m-1}``:
    ``G[i, j] = prod_{l != j} (alpha_i - alpha_l) / (alpha_j - alpha_l)``.  Any ``m`` rows form
    an invertible interpolation matrix (distinct points), so any ``m`` coded rows decode.  The
    points ``field.points(n_coded)`` are assigned to rows in a golden-ratio order, so that every
    batch (a run of consecutive rows) and the data rows are spread over all the points (over a
    finite field the order does not matter; over the reals, Chebyshev points, the code is
    exact in exact arithmetic but its decodes are ill-conditioned beyond a few dozen rows).
    """
    if n_coded == m:
        return fld.eye(m)
    try:
        pts = fld.points(n_coded)
    except ValueError as exc:
        raise ArgumentError(
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

    ``(K/q) m`` coded rows ``C = G A`` (``G`` systematic), split into ``C(K, r)`` batches of
    ``batch_size`` consecutive rows; batch ``b`` is stored on every server of ``batches[b]``
    (``r = floor(mu q)`` servers).  Over a finite field ``G`` is one Reed-Solomon code (any
    ``m`` coded rows decode); over the reals it is a lane code (``lanes``, :mod:`._lanes`): one
    small code per position of a batch, and ``m`` coded rows decode when they are
    lane-balanced (:func:`decoding_rows`).

    Attributes:
        K, mu, q, m: the parameters (``mu`` as given, a Fraction); ``r`` and ``mu_bar = r/q``.
        n_coded: ``(K/q) m``; ``batch_size``: ``n_coded / C(K, r)``.
        batches: the server set of each batch, in lexicographic order.
        server_rows: for each server, the (increasing) coded rows it stores.
        generator: the ``n_coded x m`` generator ``G`` over ``field``.
        field: the field.
        lanes: the real field's :class:`~._lanes.LaneCode`; ``None`` over a finite field.
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
    lanes: LaneCode | None = dc_field(default=None, repr=False, compare=False)

    @property
    def decode_size(self) -> int:
        """The size of the Reduce's largest solve: the lane code's largest ``d`` over the reals,
        ``m`` over a finite field (one solve of all ``m`` rows)."""
        return max(self.lanes.codes) if self.lanes is not None else self.m

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
            raise ArgumentError(f"rows: server {k} does not store all of coded rows "
                                f"{rows_a.tolist()}")
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
        raise ArgumentError(
               f"m: {m} does not fit the batches: (K/q)*m = {K}*{m}/{q} coded rows must be an "
               f"integer divisible by C(K, mu_bar*q) = C({K}, {r}) = {n_batches} batches; m must "
               f"be a multiple of {_batch_multiple(K, q, r)}")
    n_coded = K * m // q
    beta = n_coded // n_batches
    batches = tuple(itertools.combinations(range(K), r))
    server_rows = tuple(
        tuple(row for b, T in enumerate(batches) if k in T
              for row in range(b * beta, (b + 1) * beta))
        for k in range(K))
    lanes = None if fld.exact else lane_code(n_batches, beta, m,
                                             _fixed_sets(K, mu_f, q, batches))
    G = _mds_generator(fld, n_coded, m) if lanes is None else lanes.generator()
    return StorageDesign(K=K, mu=mu_f, q=q, m=m, r=r, mu_bar=Fraction(r, q), n_coded=n_coded,
                         batch_size=beta, batches=batches, server_rows=server_rows, generator=G,
                         field=fld, lanes=lanes)


def _fixed_sets(K: int, mu: Fraction, q: int, batches: Sequence[tuple[int, ...]],
                limit: int = 200) -> list[tuple[int, ...]] | None:
    """The batches each server of the fastest ``Q`` decodes from when the Shuffle has no choice
    to make (no unicast round, no surplus): its own and those held by at least ``s_q`` servers
    of ``Q`` (MATH.md §2), for every ``Q`` or a seeded sample of ``limit`` of them; ``None``
    when the Shuffle chooses."""
    th = load_breakdown(K, mu, q, q)
    if th.finish != "none" or th.r >= q:
        return None
    if math.comb(K, q) <= limit:
        Qs = list(itertools.combinations(range(K), q))
    else:
        rng = np.random.default_rng([K, q, th.r])
        Qs = [tuple(sorted(rng.permutation(K)[:q].tolist())) for _ in range(limit)]
    sets = []
    for Q in Qs:
        Qset = set(Q)
        for k in Q:
            sets.append(tuple(b for b, T in enumerate(batches)
                              if k in T or len(Qset.intersection(T)) >= th.s_q))
    return sets


def decoding_rows(design: StorageDesign, available: Iterable[int]) -> list[int] | None:
    """``m`` of the coded rows ``available`` that decode, the systematic rows (``A``'s own) first,
    or ``None`` when they cannot.  Over a finite field any ``m`` distinct rows do (then by
    increasing row); over the reals the rows must be lane-balanced, and where a lane has more
    than it needs, :func:`~._lanes.select` picks among them."""
    if design.lanes is not None:
        return complete(design.lanes, available)
    rows = sorted(set(int(r) for r in available), key=lambda r: (r >= design.m, r))
    return rows[:design.m] if len(rows) >= design.m else None


def decode_condition(design: StorageDesign, rows: Sequence[int]) -> float:
    """The amplification factor of decoding from the coded ``rows`` (``1`` over a finite
    field): :func:`~elastic_coded.algebra.lagrange.solve_condition` of ``G[rows]``, or, for the
    real lane code, the largest of its lanes' solves (the decode is one solve per lane, and each
    lane's error bound holds with its own factor)."""
    if design.field.exact:
        return 1.0
    if design.lanes is not None:
        return design.lanes.condition(rows)
    from ...algebra.lagrange import solve_condition

    return solve_condition(np.asarray(design.generator)[list(rows)])


def encode_storage(design: StorageDesign, A: npt.ArrayLike) -> tuple[np.ndarray, ...]:
    """What each server stores: ``U_k = G[server_rows[k]] A`` (MATH.md §2, storage design)."""
    fld = design.field
    A = fld.asarray(A, "A")
    if A.ndim != 2 or A.shape[0] != design.m:
        raise ArgumentError(f"A: must be a 2-D array with m = {design.m} rows, got shape {A.shape}")
    coded = fld.matmul(design.generator, A)
    return tuple(coded[list(rows)] if rows else coded[:0] for rows in design.server_rows)


def map_compute(design: StorageDesign, stored: npt.ArrayLike, X: npt.ArrayLike) -> np.ndarray:
    """Map on one server: its stored coded rows times all ``N`` inputs (``X`` is ``n x N``).

    Row ``t`` of the result holds the values ``c_i x_j`` for the ``t``-th row ``i`` the server
    stores (MATH.md §2, Map)."""
    fld = design.field
    X = fld.asarray(X, "X")
    if X.ndim != 2:
        raise ArgumentError(f"X: must be 2-D (n x N, one input per column), got shape {X.shape}")
    return fld.matmul(np.asarray(stored), X)


