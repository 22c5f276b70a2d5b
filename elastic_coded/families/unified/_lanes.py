"""The real storage code of the unified coding framework: one small code per lane (MATH.md §2,
storage design, real field).

**Lanes.**  Coded row ``i = b beta + c`` lies in batch ``b`` at position ``c`` (``beta`` the batch
size).  Lane ``c`` is position ``c`` of every batch: one row per batch, ``nb = C(K, r)`` rows.
Its data rows are its rows below ``m``, those of the first ``d_c = ceil((m - c) / beta)`` batches.
Lane ``c``'s coded rows are ``H_{d_c}`` times lane ``c``'s rows of ``A``, with

    H_d = [I_d; P_d]  (nb x d),   P_d Haar: orthonormal columns (rows when nb - d < d),

drawn from a seed derived from ``(nb, d)``, so that every process builds the same code.  The
generator is block diagonal over the lanes; each lane's code is MDS (any ``d_c`` of its rows
decode it: every square submatrix of a Haar ``P_d`` is invertible with probability 1), so ``m``
coded rows decode when they hold ``d_c`` rows of each lane (*lane-balanced*), and the decode is
``beta`` solves of size ``d_c <= ceil(q C(K, r) / K)`` instead of one of size ``m``.

**Choosing rows.**  The Shuffle's multicast rounds deliver whole batches (the same count to
every lane); where the plan has a choice (the unicast round's rows, or the surplus of an extra
multicast round) it takes, per class of lanes with the same ``d``, the batches :func:`select`
picks.  A Reed-Solomon code over all rows, as over finite fields, has real decodes conditioned
like ``10^m``-ish polynomial interpolation; one random code per lane has a heavy tail (the worst
of many ``d x d`` random systems); the choice removes the tail.
``benchmarks/bench_conditioning.py`` measures the three.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from ...algebra.lagrange import solve_condition
from ...errors import ArgumentError

SWAP_WORK = 1e7  # multiply-adds one swap sweep of select() may spend
SWAP_SWEEPS = 2
SEARCH_SEEDS = 8  # codes tried for a design whose decode sets are fixed (lane_code's sets)
SEARCH_SETS = 400  # of those sets, at most this many (a seeded sample) score them


def _haar_parity(nb: int, d: int, seed: int = 0) -> np.ndarray:
    """``P_d`` (``(nb - d) x d``): orthonormal columns or rows, Haar-distributed, seeded by
    ``(nb, d, seed)``."""
    rng = np.random.default_rng([nb, d, seed, 20])
    rows = nb - d
    if rows == 0:
        return np.zeros((0, d))
    Z = rng.standard_normal((max(rows, d), min(rows, d)))
    Qm, R = np.linalg.qr(Z)
    Qm = Qm * np.where(np.diag(R) < 0, -1.0, 1.0)[None, :]
    return Qm if rows >= d else Qm.T


def _spread_pairs(nb: int) -> np.ndarray:
    """``nb x 2``, systematic: ``nb`` directions ``pi i / nb`` of the plane in a golden-ratio
    order (the two data rows far apart), so that any two rows are at least ``pi / nb`` apart."""
    th = np.pi * np.argsort(np.argsort((np.arange(nb) * (np.sqrt(5.0) - 1.0) / 2.0) % 1.0,
                                       kind="stable")) / nb
    F = np.stack([np.cos(th), np.sin(th)], axis=1)
    H = F @ np.linalg.inv(F[:2])
    H[:2] = np.eye(2)
    return H


def _candidates(nb: int, d: int, seeds: int) -> Iterator[tuple[int, np.ndarray]]:
    for seed in range(seeds):
        yield seed, np.concatenate([np.eye(d), _haar_parity(nb, d, seed)])
    if d == 2 and nb > 2:
        yield -1, _spread_pairs(nb)


def _best_code(nb: int, d: int, sets: Sequence[tuple[int, ...]]) -> tuple[int, np.ndarray]:
    """The candidate (Haar seeds ``0 .. SEARCH_SEEDS - 1``; for ``d = 2`` also
    :func:`_spread_pairs`) with the lowest worst Skeel condition over ``sets`` (``d`` batches
    each): the decode sets of a design whose Shuffle has no choice to make."""
    best: tuple[float, int, np.ndarray] | None = None
    for seed, H in _candidates(nb, d, SEARCH_SEEDS):
        worst = 0.0
        for s in sets:
            M = H[list(s)]
            try:
                worst = max(worst, _skeel(np.linalg.inv(M), np.abs(M).sum(axis=1)))
            except np.linalg.LinAlgError:
                worst = math.inf
            if best is not None and worst >= best[0]:
                break
        if best is None or worst < best[0]:
            best = (worst, seed, H)
    found = cast(tuple[float, int, np.ndarray], best)   # there is always a candidate
    return found[1], found[2]


@dataclass(frozen=True, eq=False)
class LaneCode:
    """The real storage code (module docstring): ``nb`` batches of ``beta`` rows, ``m`` data
    rows, ``codes[d]`` the ``nb x d`` code ``H_d`` of the lanes with ``d`` data rows;
    ``seeds[d]`` the Haar seed it was drawn from (``-1``: :func:`_spread_pairs`)."""

    nb: int
    beta: int
    m: int
    codes: dict[int, np.ndarray]
    seeds: dict[int, int]

    def data_of(self, c: int) -> int:
        """``d_c``: the data rows of lane ``c``."""
        return -(-(self.m - c) // self.beta)

    def classes(self) -> dict[int, np.ndarray]:
        """``{d: lanes with d data rows}`` (at most two classes)."""
        out: dict[int, list[int]] = {}
        for c in range(self.beta):
            out.setdefault(self.data_of(c), []).append(c)
        return {d: np.asarray(cs, dtype=np.int64) for d, cs in out.items()}

    def generator(self) -> np.ndarray:
        """The ``nb beta x m`` generator: ``G[b beta + c, b' beta + c] = H_{d_c}[b, b']``."""
        G = np.zeros((self.nb * self.beta, self.m))
        b = np.arange(self.nb)
        for d, cs in self.classes().items():
            rows = (b[:, None] * self.beta + cs[None, :])            # (nb, lanes)
            cols = (np.arange(d)[:, None] * self.beta + cs[None, :])  # (d, lanes)
            G[rows[:, None, :], cols[None, :, :]] = self.codes[d][:, :, None]
        return G

    def groups(self, rows: Sequence[int]
               ) -> dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]]:
        """``{(d, batches): (lanes, positions)}``: the lanes whose rows among ``rows`` lie in the
        same batches (in the order given), and where each lane's rows sit in ``rows``
        (``positions[t, j]``: lane ``lanes[t]``'s ``j``-th row).  Raises ``ValueError`` unless
        ``rows`` holds ``d_c`` distinct rows of every lane."""
        r = np.asarray(list(rows), dtype=np.int64)
        if r.size != self.m or np.unique(r).size != r.size or (
                r.size and (r.min() < 0 or r.max() >= self.nb * self.beta)):
            raise ArgumentError(f"rows: need m = {self.m} distinct coded rows in "
                                f"0..{self.nb * self.beta - 1}, got {r.size} ({np.unique(r).size} "
                                f"distinct)")
        lane, batch = r % self.beta, r // self.beta
        order = np.argsort(lane, kind="stable")
        counts = np.bincount(lane, minlength=self.beta)
        starts = np.concatenate([[0], np.cumsum(counts)])
        out: dict[tuple[int, tuple[int, ...]], tuple[list[int], list[np.ndarray]]] = {}
        for c in range(self.beta):
            d = self.data_of(c)
            if counts[c] != d:
                raise ArgumentError(f"rows: hold {counts[c]} rows of lane {c} (position {c} of a "
                                    f"batch), its code needs exactly d = {d}; the rows must be "
                                    f"lane-balanced")
            pos = order[starts[c]:starts[c + 1]]
            key = (d, tuple(batch[pos].tolist()))
            lanes, positions = out.setdefault(key, ([], []))
            lanes.append(c)
            positions.append(pos)
        return {k: (np.asarray(v[0]), np.stack(v[1])) for k, v in out.items()}

    def solve(self, rows: Sequence[int], values: npt.ArrayLike) -> np.ndarray:
        """``y`` with ``G[rows] y = values`` (``values``: ``m`` or ``m x n``), lane by lane."""
        V = np.asarray(values, dtype=np.float64)
        flat = V.ndim == 1
        V = V[:, None] if flat else V
        Y = np.zeros((self.m, V.shape[1]))
        for (d, batches), (lanes, pos) in self.groups(rows).items():
            H = self.codes[d][list(batches)]                   # d x d
            rhs = V[pos.T]                                     # (d, lanes, n)
            y = np.linalg.solve(H, rhs.reshape(d, -1)).reshape(rhs.shape)
            Y[(np.arange(d)[:, None] * self.beta + lanes[None, :])] = y
        return Y[:, 0] if flat else Y

    def condition(self, rows: Sequence[int]) -> float:
        """The largest :func:`~elastic_coded.algebra.lagrange.solve_condition` of the lanes'
        solves (each lane's error bound holds with it; module docstring)."""
        return max([1.0] + [solve_condition(self.codes[d][list(batches)])
                            for d, batches in self.groups(rows)])


def lane_code(nb: int, beta: int, m: int, sets: Sequence[tuple[int, ...]] | None = None
              ) -> LaneCode:
    """The real storage code for ``nb`` batches of ``beta`` rows and ``m`` data rows: ``H_d``
    from Haar seed 0, or, given the decode ``sets`` (batch tuples, fixed when the Shuffle has
    no choice), the candidate best over them (:func:`_best_code`, a seeded sample of at most
    :data:`SEARCH_SETS`; codes with ``d > 64`` keep seed 0)."""
    if nb < 1 or beta < 1 or not 0 < m <= nb * beta:
        raise ArgumentError(f"m: need 0 < m = {m} <= nb*beta = {nb}*{beta}")
    codes, seeds = {}, {}
    for d in sorted({-(-(m - c) // beta) for c in range(beta)}):
        mine = [tuple(x) for x in (sets or ()) if len(x) == d]
        if d < nb and mine and d <= 64:
            if len(mine) > SEARCH_SETS:
                pick = np.random.default_rng([nb, d, len(mine)]).choice(len(mine), SEARCH_SETS,
                                                                        replace=False)
                mine = [mine[i] for i in sorted(pick)]
            seeds[d], codes[d] = _best_code(nb, d, mine)
        else:
            seeds[d], codes[d] = 0, np.concatenate([np.eye(d), _haar_parity(nb, d)])
    return LaneCode(nb=nb, beta=beta, m=m, codes=codes, seeds=seeds)


def select(H: np.ndarray, fixed: Sequence[int], cands: Sequence[int], count: int
           ) -> list[int]:
    """``count`` of the candidate rows ``cands`` of ``H`` (``nb x d``) that, with the ``fixed``
    rows (``len(fixed) + count = d``), give a well-conditioned ``d x d`` decode.  Pivoted QR on
    the candidates projected on the complement of the fixed rows' span (largest volume first),
    then swaps of one chosen row for one left out while they lower the Skeel condition (rank-one
    updates of the inverse, within :data:`SWAP_WORK`).  Deterministic; returns them in the
    order of ``cands``."""
    fixed, cands = list(fixed), list(cands)
    d = H.shape[1]
    if count <= 0:
        return []
    if len(fixed) + count != d or count > len(cands):
        raise ArgumentError(f"count: {count} rows from {len(cands)} candidates cannot complete "
                            f"{len(fixed)} fixed rows to d = {d}")
    from scipy.linalg import qr

    if fixed:
        basis = np.linalg.svd(H[fixed])[2][len(fixed):].T      # d x count
    else:
        basis = np.eye(d)
    C = H[cands] @ basis
    norms = np.linalg.norm(C, axis=1)
    C = C / np.where(norms > 0, norms, 1.0)[:, None]
    piv = qr(C.T, pivoting=True, mode="r")[1]
    chosen = _swaps(H, fixed, cands, list(piv[:count]))
    return [cands[i] for i in sorted(chosen)]


def _skeel(Minv: np.ndarray, g: np.ndarray) -> float:
    return float(np.max(np.abs(Minv) @ g))


def _swaps(H: np.ndarray, fixed: list[int], cands: list[int], chosen: list[int]) -> list[int]:
    """Improve ``chosen`` (indices into ``cands``) by single swaps (see :func:`select`)."""
    d, nf = H.shape[1], len(fixed)
    out = [i for i in range(len(cands)) if i not in set(chosen)]
    if not out or len(out) * d * d * len(chosen) > SWAP_WORK:
        return chosen
    W = H[cands]
    w1 = np.abs(W).sum(axis=1)
    for _ in range(SWAP_SWEEPS):
        M = np.concatenate([H[fixed], W[chosen]]) if fixed else W[chosen]
        try:
            Minv = np.linalg.inv(M)
        except np.linalg.LinAlgError:
            return chosen
        g = np.abs(M).sum(axis=1)
        best, improved = _skeel(Minv, g), False
        for p in range(len(chosen)):
            pos = nf + p
            t = (W[out] - M[pos]) @ Minv                       # (n_out, d): delta^T M^-1
            den = 1.0 + t[:, pos]
            ok = np.abs(den) > 1e-12
            if not ok.any():
                continue
            inv_new = (Minv[None] - Minv[None, :, pos, None]
                       * (t / np.where(ok, den, 1.0)[:, None])[:, None, :])
            gs = np.repeat(g[None], len(out), axis=0)
            gs[:, pos] = w1[out]
            sk = np.where(ok, np.max(np.matmul(np.abs(inv_new), gs[:, :, None])[:, :, 0], axis=1),
                          math.inf)
            j = int(np.argmin(sk))
            if sk[j] < best * (1 - 1e-9):
                best, improved = float(sk[j]), True
                chosen[p], out[j] = out[j], chosen[p]
                M[pos], g[pos], Minv = W[chosen[p]], w1[chosen[p]], inv_new[j]
        if not improved:
            break
    return chosen


def complete(code: LaneCode, available: Iterable[int], keep: Iterable[int] | None = None
             ) -> list[int] | None:
    """``m`` lane-balanced rows among ``available`` that decode, or ``None`` when some lane has
    fewer than ``d_c`` rows available: in each lane the rows of ``keep`` (default: the data
    rows available), then rows :func:`select` picks.  Sorted with the data rows first."""
    beta = code.beta
    by_lane: dict[int, list[int]] = {}
    for row in sorted(set(int(x) for x in available)):
        by_lane.setdefault(row % beta, []).append(row // beta)
    kept: dict[int, set[int]] = {}
    for row in (() if keep is None else keep):
        kept.setdefault(int(row) % beta, set()).add(int(row) // beta)
    picked: list[int] = []
    memo: dict[tuple[int, tuple[int, ...], tuple[int, ...]], list[int]] = {}
    for c in range(beta):
        d, have = code.data_of(c), tuple(by_lane.get(c, ()))
        fixed = tuple(b for b in have if (b < d if keep is None else b in kept.get(c, ())))
        if len(have) < d or len(fixed) > d:
            return None
        key = (d, have, fixed)
        if key not in memo:
            rest = [b for b in have if b not in set(fixed)]
            memo[key] = list(fixed) + select(code.codes[d], fixed, rest, d - len(fixed))
        picked.extend(b * beta + c for b in memo[key])
    return sorted(picked, key=lambda r: (r >= code.m, r))
