"""Locating faulty results of a Lagrange or MDS code from random projections and
Berlekamp-Welch (the fault location of :mod:`elastic_coded.algebra.verify`, whose docstring
describes it)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, ElasticCodedError
from ._basis import basis_matrix as _basis_matrix
from ._common import default_repeats
from ._common import positive_int as _positive_int
from .fields import Field
from .lagrange import LagrangeCode
from .mds import MDSCode

__all__ = ["Located", "FaultLocationError", "locate_lagrange", "locate_mds"]

REAL_PROJECTIONS = 2
REAL_SEARCH_LIMIT = 200_000  # candidate sets the real-field fault search may try


class FaultLocationError(ElasticCodedError, ValueError):
    """The results are inconsistent but the faulty ones cannot be told apart (too many)."""


@dataclass(frozen=True)
class Located:
    """The outcome of a fault location: ``faulty`` (positions or coded-row indices judged
    wrong), ``trusted`` (all the others), ``used`` (the ``k`` trusted ones ``decoded`` came
    from) and ``decoded`` (as the code's ``decode`` returns it)."""

    faulty: tuple[int, ...]
    trusted: tuple[int, ...]
    used: tuple[int, ...]
    decoded: np.ndarray


def locate_lagrange(code: LagrangeCode, results: Mapping[int, np.ndarray], *,
                    max_faults: int | None = None, projections: int | None = None, seed: Any = None,
                    rtol: float = 1e-8) -> Located:
    """Locate faulty results among ``{position: H}`` (more than ``L`` of them) of one piece and
    decode from the others (module docstring)."""
    positions = [int(p) for p in results]
    if len(set(positions)) != len(positions) or any(not 0 <= p < code.K for p in positions):
        raise ArgumentError(f"results: positions must be distinct in 0..{code.K - 1}, got "
                            f"{positions}")
    shape = np.asarray(results[positions[0]]).shape
    flat = _stack(code.field, [results[p] for p in positions], shape, "results")
    pts = np.asarray(code.alphas)[positions] if code.generator is None else None
    gen = code.encode_matrix[positions] if not code.field.exact else None
    if code.width == 2:  # a complex code: the results in complex form, (re, im) column pairs
        flat = flat[:, 0::2] + 1j * flat[:, 1::2]
    bad = _locate(code.field, flat, code.L, pts, None, gen, max_faults, projections, seed, rtol)
    trusted = [p for i, p in enumerate(positions) if i not in bad]
    used = trusted[:code.L]
    decoded = code.decode({p: results[p] for p in used})
    return Located(tuple(sorted(positions[i] for i in bad)), tuple(sorted(trusted)), tuple(used),
                   decoded)


def locate_mds(code: MDSCode, indices: Sequence[int], coded: np.ndarray, *,
               max_faults: int | None = None, projections: int | None = None, seed: Any = None,
               rtol: float = 1e-8) -> Located:
    """Locate faulty rows among ``coded[j] = (generator @ data)[indices[j]]`` (more than ``k``
    rows) and decode the data from the others (module docstring)."""
    F = code.field
    idx = [int(i) for i in indices]
    if len(set(idx)) != len(idx) or any(not 0 <= i < code.n for i in idx):
        raise ArgumentError(f"indices: must be distinct in 0..{code.n - 1}, got {idx}")
    coded = np.asarray(coded)
    if coded.ndim < 1 or coded.shape[0] != len(idx):
        raise ArgumentError(f"coded: needs {len(idx)} rows (one per index), got shape "
                            f"{coded.shape}")
    flat = _stack(F, list(coded), coded.shape[1:], "coded")
    if F.exact:
        pts, mult = _grs_form(code)
        bad = _locate(F, flat, code.k, pts[idx], mult[idx], None, max_faults, projections, seed,
                      rtol)
    else:
        bad = _locate(F, flat, code.k, None, None, code.generator[idx], max_faults, projections,
                      seed, rtol)
    trusted = [j for j in range(len(idx)) if j not in bad]
    used = trusted[:code.k]
    decoded = code.decode([idx[j] for j in used], coded[used])
    return Located(tuple(sorted(idx[j] for j in bad)), tuple(sorted(idx[j] for j in trusted)),
                   tuple(idx[j] for j in used), decoded)


def _stack(F: Field, arrays: Any, shape: Any, name: str) -> np.ndarray:
    out = []
    for i, h in enumerate(arrays):
        h = F.asarray(h, name)
        if h.shape != tuple(shape):
            raise ArgumentError(f"{name}: every entry must have shape {tuple(shape)}; entry {i} "
                                f"has {h.shape}")
        out.append(h.reshape(-1))
    return np.stack(out)


def _locate(F: Field, flat: np.ndarray, k: int, pts: Any, mult: Any, gen: Any,
            max_faults: int | None, projections: int | None, seed: Any,
            rtol: float) -> set[int]:
    """Indices (rows of ``flat``) of the faulty results.  Finite fields: Berlekamp-Welch on the
    projections ``z_i / mult_i = p(pts_i)``; reals: the least-squares search with generator rows
    ``gen``."""
    n = flat.shape[0]
    if n <= k:
        raise ArgumentError(f"results: need more than k={k} results to look for faults, got {n}")
    most = (n - k) // 2
    f = most if max_faults is None else _positive_int("max_faults", max_faults, 0)
    if f > most:
        raise ArgumentError(f"max_faults: at most floor((n - k) / 2) = {most} faults among n={n} "
                            f"results can be located, got {f}")
    if projections is None:
        J = default_repeats(F) if F.exact else REAL_PROJECTIONS
    else:
        J = _positive_int("projections", projections)
    if F.exact:
        z = F.matmul(flat, F.random((flat.shape[1], J), np.random.default_rng(seed)))
        if mult is not None:
            z = F.div(z, mult[:, None])
        bad: set[int] = set()
        for j in range(J):
            wrong = _berlekamp_welch(F, np.asarray(pts, dtype=F.dtype), z[:, j], k, f)
            if wrong is None:
                raise FaultLocationError(
                    f"results: inconsistent, with more than max_faults={f} faulty among {n} "
                    f"(k={k}); they cannot be located")
            bad |= wrong
        if len(bad) > f:
            raise FaultLocationError(f"results: {len(bad)} faulty results found, more than "
                                     f"max_faults={f}; they cannot be trusted to be located")
        return bad
    if not rtol > 0:
        raise ArgumentError(f"rtol: must be > 0, got {rtol!r}")
    z = flat @ np.random.default_rng(seed).standard_normal((flat.shape[1], J))
    return _least_squares_search(np.asarray(gen), z, f, rtol)


def _least_squares_search(G: np.ndarray, z: np.ndarray, f: int, rtol: float) -> set[int]:
    n = G.shape[0]
    total = sum(math.comb(n, e) for e in range(f + 1))
    if total > REAL_SEARCH_LIMIT:
        raise ArgumentError(f"max_faults: {f} among {n} results means {total} candidate sets, more "
                            f"than the real-field search's limit {REAL_SEARCH_LIMIT}; "
                            "pass a smaller one")
    for e in range(f + 1):
        combos = list(itertools.combinations(range(n), e))
        X = np.asarray(combos, dtype=np.int64).reshape(len(combos), e)
        keep = np.asarray([np.setdiff1d(np.arange(n), x) for x in X])  # (N, n - e)
        Q, _ = np.linalg.qr(G[keep])
        zk = z[keep]  # (N, n - e, J)
        res = zk - Q @ (np.swapaxes(Q, 1, 2).conj() @ zk)
        rel = np.linalg.norm(res, axis=(1, 2)) / np.maximum(np.linalg.norm(zk, axis=(1, 2)),
                                                            np.finfo(np.float64).tiny)
        ok = np.nonzero(rel <= rtol)[0]
        if len(ok) == 1:
            return set(X[ok[0]].tolist())
        if len(ok) > 1:
            raise FaultLocationError(
                f"results: {len(ok)} different sets of {e} results explain the inconsistency "
                f"equally well (rtol={rtol}); the faulty ones cannot be located")
    raise FaultLocationError(f"results: inconsistent, with more than max_faults={f} faulty among "
                             f"{n}; they cannot be located")


def _grs_form(code: MDSCode) -> tuple[np.ndarray, np.ndarray]:
    """Points ``a`` and multipliers ``v`` with ``(generator @ d)_i = v_i p(a_i)`` for a polynomial
    ``p`` of degree ``< k`` (a systematic Cauchy code is a generalized Reed-Solomon code: with
    ``Pi(x) = prod_j (x - y_j)``, ``v = 1 / Pi'(y_j)`` on the data rows and ``1 / Pi(x_i)`` on the
    parity rows).  Checked against the generator."""
    F, n, k = code.field, code.n, code.k
    pts = F.points(n)
    y, x = pts[:k], pts[k:]
    dy = F.sub(y[:, None], y[None, :])
    dy[np.arange(k), np.arange(k)] = 1
    v_sys = F.inv(_prod(F, dy))
    v_par = F.inv(_prod(F, F.sub(x[:, None], y[None, :]))) if n > k else F.zeros(0)
    mult = np.concatenate([v_sys, v_par]).astype(F.dtype)
    # generator[i, j] must be v_i * ell_j(a_i) / v_j with ell_j the Lagrange basis through y
    want = F.mul(F.mul(mult[:, None], _basis_matrix(F, y, pts)), F.inv(v_sys)[None, :])
    if not np.array_equal(np.asarray(want), np.asarray(code.generator)):
        raise ArgumentError("code: not a systematic Cauchy MDS code as mds_code builds it")
    return pts, mult


def _prod(F: Field, M: np.ndarray) -> np.ndarray:
    out = M[:, 0]
    for j in range(1, M.shape[1]):
        out = F.mul(out, M[:, j])
    return out


def _berlekamp_welch(F: Field, pts: np.ndarray, vals: np.ndarray, k: int, e: int
                     ) -> set[int] | None:
    """Positions where ``vals`` differ from the unique polynomial of degree ``< k`` within ``e``
    errors of them, or ``None`` when there is none."""
    n = len(pts)
    powers = [np.ones(n, dtype=F.dtype)]
    for _ in range(e + k):
        powers.append(F.mul(powers[-1], pts))
    V = np.stack(powers, axis=1)  # V[i, j] = pts_i^j
    # Q(a_i) - vals_i E(a_i) = 0 with E monic of degree e: unknowns Q_0..Q_{e+k-1}, E_0..E_{e-1}
    M = np.concatenate([V[:, :e + k], F.sub(0, F.mul(vals[:, None], V[:, :e]))], axis=1)
    sol = _solve_any(F, M, F.mul(vals, V[:, e]))
    if sol is None:
        return None
    Q = sol[:e + k]
    E = np.concatenate([sol[e + k:], np.ones(1, dtype=F.dtype)])
    P, rem = _poly_divmod(F, Q, E)
    if np.any(rem != 0):
        return None
    fit = np.zeros(n, dtype=F.dtype)
    for c in P[::-1]:  # Horner
        fit = F.add(F.mul(fit, pts), c)
    wrong = set(np.nonzero(fit != vals)[0].tolist())
    return wrong if len(wrong) <= e else None


def _solve_any(F: Field, M: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """A solution of ``M x = rhs`` over ``F`` (free unknowns 0), or ``None`` if there is none."""
    R = np.concatenate([M, rhs[:, None]], axis=1).astype(F.dtype)
    rows, cols = R.shape[0], R.shape[1] - 1
    pivots: list[int] = []
    r = 0
    for c in range(cols):
        if r == rows:
            break
        nz = np.nonzero(R[r:, c])[0]
        if not len(nz):
            continue
        p = r + int(nz[0])
        R[[r, p]] = R[[p, r]]
        R[r] = F.mul(R[r], F.inv(R[r, c]))
        others = np.arange(rows) != r
        R[others] = F.sub(R[others], F.mul(R[others, c][:, None], R[r][None, :]))
        pivots.append(c)
        r += 1
    if np.any(R[r:, cols] != 0):
        return None
    x = np.zeros(cols, dtype=F.dtype)
    x[pivots] = R[:len(pivots), cols]
    return x


def _poly_divmod(F: Field, num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quotient and remainder of polynomials (coefficients lowest degree first; ``den`` monic)."""
    num = num.copy()
    d = len(den)
    if len(num) < d:
        return np.zeros(0, dtype=F.dtype), num
    q = np.zeros(len(num) - d + 1, dtype=F.dtype)
    for i in range(len(q) - 1, -1, -1):
        q[i] = num[i + d - 1]
        num[i:i + d] = F.sub(num[i:i + d], F.mul(q[i], den))
    return q, num[:d - 1]
