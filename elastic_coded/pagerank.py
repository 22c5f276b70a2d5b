"""PageRank on a sparse graph, as the textbook power method writes it, with the product
``M r`` supplied by the caller (a step of the cluster, or SciPy's ``M @ r``).  Pure: no Ray.

``M[i, j] = 1 / outdeg(j)`` for every edge ``j -> i`` (rows are destinations, so ``M`` is
stored and multiplied by rows); a dangling node (no out-edges) spreads its rank evenly over
every node, and with probability ``1 - damping`` the surfer jumps to a uniformly random node:

    r' = damping * M r + (damping * sum(r[dangling]) + 1 - damping) / n

from the uniform vector, until the L1 change is below ``tol``.  The synthetic graph
(:func:`power_law_graph`) has power-law in-degrees, milder out-degrees and dangling nodes, and
is reproducible from its seed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .errors import ArgumentError, ArgumentTypeError

__all__ = ["PageRankResult", "power_law_graph", "google_matrix", "pagerank_update", "pagerank",
           "reference_pagerank", "save_graph", "load_graph"]

SENDER_FRACTION = 0.8
"""The share of nodes that may have out-edges in :func:`power_law_graph` (the rest dangle)."""
OUT_EXPONENT = 3.0
"""The power-law exponent of the out-degrees in :func:`power_law_graph` (milder than in)."""


@dataclass(frozen=True)
class PageRankResult:
    """The ranks (summing to 1), the iterations run, the L1 change of each, and whether the
    last change was below the tolerance."""

    ranks: np.ndarray
    iterations: int
    residuals: tuple[float, ...]
    converged: bool


def _check_int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{name}: must be an int, got {value!r} ({type(value).__name__})")
    if int(value) < lo:
        raise ArgumentError(f"{name}: must be an int >= {lo}, got {int(value)}")
    return int(value)


def _check_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"{name}: must be a real number, got {value!r} "
                                f"({type(value).__name__})")
    return float(value)


def _check_damping(damping) -> float:
    d = _check_real("damping", damping)
    if not 0 < d < 1:
        raise ArgumentError(f"damping: must be a number in (0, 1), got {d!r}")
    return d


def _power_law_ids(rng: np.random.Generator, n: int, size: int, exponent: float) -> np.ndarray:
    """``size`` node ids in ``[0, n)``, the node of rank ``k`` drawn with weight about
    ``(k + 1)^(-1 / (exponent - 1))`` (so the draws per node follow a power law of
    ``exponent``), by inverse-CDF sampling of the continuous law on ``[1, n + 1)``, floored;
    the ranks are spread over the ids by a seeded permutation."""
    b = 1.0 - 1.0 / (exponent - 1.0)  # 1 - the weight's exponent
    x = rng.random(size)
    log_top = np.log(n + 1.0)
    if abs(b) < 1e-12:  # weight 1/x: x = (n + 1)^u
        x *= log_top
    else:  # x = (1 + u ((n + 1)^b - 1))^(1/b), through log1p/expm1 for small b
        x *= np.expm1(b * log_top)
        np.log1p(x, out=x)
        x /= b
    np.exp(x, out=x)
    ranks = x.astype(np.int64)
    del x
    ranks -= 1
    np.clip(ranks, 0, n - 1, out=ranks)
    return rng.permutation(n)[ranks]


def power_law_graph(nodes: int, edges: int, seed: int = 0,
                    exponent: float = 2.1) -> sp.csr_array:
    """A reproducible directed graph of ``nodes`` nodes and up to ``edges`` edges, as a CSR
    adjacency (``adj[i, j] = 1.0`` for an edge ``i -> j``, float64).

    ``edges`` (source, target) pairs are drawn independently: targets from a power law of
    ``exponent`` over all nodes (a few hubs with very many in-links), sources from a milder
    one (:data:`OUT_EXPONENT`) over a random :data:`SENDER_FRACTION` of the nodes, so the
    others are dangling (no out-edges).  Self loops are dropped and duplicate edges merged,
    so ``nnz`` is somewhat below ``edges`` (about 2% below for 10M edges on 1M nodes).
    The same arguments give the same graph."""
    n = _check_int("nodes", nodes, 1)
    e = _check_int("edges", edges, 0)
    seed = _check_int("seed", seed, 0)
    gamma = _check_real("exponent", exponent)
    if not gamma > 1:
        raise ArgumentError(f"exponent: must be > 1 (a power law's tail), got {gamma!r}")
    rng = np.random.default_rng(seed)
    senders = max(1, int(n * SENDER_FRACTION))
    src = rng.permutation(n)[:senders][_power_law_ids(rng, senders, e, OUT_EXPONENT)]
    dst = _power_law_ids(rng, n, e, gamma)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    del keep
    # COO -> CSR sums the duplicates; then every stored edge is 1
    adj = sp.csr_array((np.ones(src.size), (src, dst)), shape=(n, n))
    del src, dst
    adj.sum_duplicates()
    adj.data[:] = 1.0
    return adj


def _edges(adj, name: str = "adj") -> sp.csr_array:
    """``adj`` as a canonical float64 CSR copy whose stored entries (the nonzeros) are 1."""
    if not sp.issparse(adj):
        raise ArgumentTypeError(f"{name}: must be a SciPy sparse matrix or array, got "
                                f"{type(adj).__name__}")
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise ArgumentError(f"{name}: must be square (nodes x nodes), got shape {adj.shape}")
    a = sp.csr_array(adj, dtype=np.float64, copy=True)
    a.sum_duplicates()
    a.eliminate_zeros()
    a.data[:] = 1.0
    return a


def google_matrix(adj) -> tuple[sp.csr_array, np.ndarray]:
    """``(M, dangling)`` of an adjacency (any square SciPy sparse; each nonzero ``adj[j, i]``
    is an edge ``j -> i``, its value ignored): ``M[i, j] = 1 / outdeg(j)`` for each edge
    ``j -> i`` (CSR, float64; the columns of non-dangling nodes sum to 1) and the boolean
    mask of nodes with out-degree 0 (their columns are 0)."""
    a = _edges(adj)
    out = np.diff(a.indptr)
    dangling = out == 0
    a.data /= np.repeat(out, out)  # row j (the edges j -> *) scaled by 1/outdeg(j)
    M = sp.csr_array(a.T)
    M.sort_indices()
    return M, dangling


def pagerank_update(Mr: np.ndarray, r: np.ndarray, dangling: np.ndarray,
                    damping: float) -> np.ndarray:
    """One power step from ``Mr = M @ r``: ``damping * Mr + (damping * r[dangling].sum() +
    1 - damping) / n`` (a new array)."""
    d = _check_damping(damping)
    Mr, r = np.asarray(Mr, dtype=np.float64), np.asarray(r, dtype=np.float64)
    if r.ndim != 1 or Mr.shape != r.shape:
        raise ArgumentError(f"Mr: must have the shape of r, a vector ({r.shape}), "
                            f"got {Mr.shape}")
    if np.shape(dangling) != r.shape:
        raise ArgumentError(f"dangling: must be a boolean mask of shape {r.shape}, "
                            f"got {np.shape(dangling)}")
    return d * Mr + (d * float(r[dangling].sum()) + 1.0 - d) / r.shape[0]


def pagerank(matvec: Callable[[np.ndarray], np.ndarray], n: int, dangling,
             damping: float = 0.85, tol: float = 1e-10, max_iter: int = 200,
             callback: Callable[[int, np.ndarray, float], None] | None = None,
             r0=None, start: int = 0) -> PageRankResult:
    """PageRank by the power method (module docstring) from the uniform vector, with
    ``matvec(r)`` returning ``M @ r``.

    Each step's ranks are renormalised to sum 1 (the update keeps the sum exactly in exact
    arithmetic; this stops rounding, or a slightly inexact ``matvec``, from drifting), its
    L1 change from the last is recorded, and ``callback(iteration, r, residual)`` (1-based)
    is called if given.  Stops once the change is below ``tol`` or after ``max_iter``.
    ``r0`` and ``start``: resume from the ranks ``r0`` after ``start`` iterations (a
    checkpoint, :mod:`elastic_coded.checkpoint`); the same steps follow as without a stop."""
    n = _check_int("n", n, 1)
    d = _check_damping(damping)
    tol_ = _check_real("tol", tol)
    if not tol_ > 0:
        raise ArgumentError(f"tol: must be > 0, got {tol_!r}")
    max_iter = _check_int("max_iter", max_iter, 1)
    dangling = np.asarray(dangling)
    if dangling.dtype != bool or dangling.shape != (n,):
        raise ArgumentError(f"dangling: must be a boolean mask of {n} nodes, got "
                            f"{dangling.dtype} of shape {dangling.shape}")
    start = _check_int("start", start, 0)
    r = np.full(n, 1.0 / n) if r0 is None else np.array(r0, dtype=np.float64)
    if r.shape != (n,):
        raise ArgumentError(f"r0: must be a vector of {n} ranks, got shape {r.shape}")
    res: list[float] = []
    for it in range(start + 1, max_iter + 1):
        nxt = pagerank_update(matvec(r), r, dangling, d)
        total = nxt.sum()
        if not (np.isfinite(total) and total > 0):
            raise ArgumentError(f"matvec: gave ranks summing to {float(total)!r} at iteration "
                                f"{it}, must be finite and > 0")
        nxt /= total
        res.append(float(np.abs(nxt - r).sum()))
        r = nxt
        if callback is not None:
            callback(it, r, res[-1])
        if res[-1] < tol_:
            break
    last = res[-1] if res else float("inf")
    return PageRankResult(r, start + len(res), tuple(res), last < tol_)


def reference_pagerank(M, dangling, damping: float = 0.85, tol: float = 1e-10,
                       max_iter: int = 200) -> PageRankResult:
    """The same power iteration (:func:`pagerank`) with SciPy's single-process ``M @ r``."""
    if not sp.issparse(M) or M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ArgumentError(f"M: must be a square SciPy sparse matrix, got "
                            f"{type(M).__name__} of shape {np.shape(M)}")
    M = sp.csr_array(M)
    return pagerank(lambda r: M @ r, M.shape[0], dangling, damping, tol, max_iter)


def _google_dangling(M: sp.csr_array, name: str) -> np.ndarray:
    """The dangling mask of a Google matrix (its empty columns), after checking that every
    other column sums to 1."""
    n = M.shape[0]
    cols = np.bincount(M.indices, weights=M.data, minlength=n)
    dangling = np.bincount(M.indices[M.data != 0], minlength=n) == 0
    bad = np.flatnonzero(~dangling & (np.abs(cols - 1.0) > 1e-9))
    if bad.size or np.any(M.data < 0):
        j = int(bad[0]) if bad.size else int(M.indices[np.argmax(M.data < 0)])
        raise ArgumentError(f"{name}: must be a Google matrix (columns summing to 1 or 0, no "
                            f"negative entries); column {j} sums to {cols[j]!r}")
    return dangling


def save_graph(path: str | os.PathLike, M, dangling: np.ndarray | None = None) -> str:
    """Store a Google matrix ``M`` (from :func:`google_matrix`) as one ``.npz`` file
    (``scipy.sparse.save_npz``; ``.npz`` is appended to ``path`` if missing) and return its
    path.  The dangling nodes are not stored: they are ``M``'s all-zero columns, found again
    by :func:`load_graph`; if ``dangling`` is given it must be that mask."""
    if not sp.issparse(M) or M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ArgumentError(f"M: must be a square SciPy sparse matrix, got "
                            f"{type(M).__name__} of shape {np.shape(M)}")
    M = sp.csr_array(M, dtype=np.float64)
    found = _google_dangling(M, "M")
    if dangling is not None and not np.array_equal(np.asarray(dangling, dtype=bool), found):
        raise ArgumentError(f"dangling: must be the all-zero columns of M ({int(found.sum())} "
                            f"nodes), got a mask of {int(np.sum(dangling))} that differs")
    out = os.fspath(path)
    out = out if out.endswith(".npz") else out + ".npz"
    sp.save_npz(out, sp.csr_matrix(M))
    return out


def load_graph(path: str | os.PathLike) -> tuple[sp.csr_array, np.ndarray]:
    """``(M, dangling)`` from an ``.npz`` written by :func:`save_graph` (CSR, float64; the
    dangling nodes are the all-zero columns)."""
    M = sp.csr_array(sp.load_npz(os.fspath(path)), dtype=np.float64)
    if M.shape[0] != M.shape[1]:
        raise ArgumentError(f"path: {os.fspath(path)!r} must hold a square matrix, got shape "
                            f"{M.shape}")
    M.sum_duplicates()
    return M, _google_dangling(M, f"path {os.fspath(path)!r}")
