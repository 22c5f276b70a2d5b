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
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

__all__ = ["PageRankResult", "power_law_graph", "google_matrix", "pagerank_update", "pagerank",
           "reference_pagerank", "save_graph", "load_graph"]


@dataclass(frozen=True)
class PageRankResult:
    """The ranks (summing to 1), the iterations run, the L1 change of each, and whether the
    last change was below the tolerance."""

    ranks: np.ndarray
    iterations: int
    residuals: tuple
    converged: bool


def _check_count(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name}: must be an int >= {lo}, got {value!r}")
    return int(value)


def _zipf_ids(rng, n: int, size: int, exponent: float) -> np.ndarray:
    """``size`` node ids drawn with weight ``(k + 1)^-1/(exponent - 1)`` for the node of rank
    ``k`` (a power law of that exponent in the draws per node), ranks shuffled over ids."""
    w = (np.arange(n, dtype=np.float64) + 1.0) ** (-1.0 / (exponent - 1.0))
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), n - 1)
    return rng.permutation(n)[ranks]


def power_law_graph(nodes: int, edges: int, seed: int = 0, exponent: float = 2.1):
    """A directed graph of ``nodes`` nodes and about ``edges`` edges, as a CSR adjacency
    (``adj[i, j] = 1`` for an edge ``i -> j``): targets drawn from a power law of ``exponent``
    (a few hubs with very many in-links), sources from a milder one (exponent 3) over a
    fifth of the nodes fewer, so the rest are dangling.  Self loops are dropped and duplicate
    edges merged, so ``nnz`` is a little below ``edges``.  Reproducible from ``seed``."""
    n = _check_count("nodes", nodes, 2)
    e = _check_count("edges", edges, 0)
    if not exponent > 2:
        raise ValueError(f"exponent: must be > 2, got {exponent!r}")
    rng = np.random.default_rng(seed)
    senders = max(1, int(n * 0.8))
    src = rng.permutation(n)[:senders][np.minimum(
        _zipf_ids(rng, senders, e, 3.0), senders - 1)]
    dst = _zipf_ids(rng, n, e, exponent)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    adj = sp.csr_array((np.ones(src.size), (src, dst)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1.0
    return adj


def google_matrix(adj) -> tuple:
    """``(M, dangling)`` of an adjacency (any SciPy sparse, square): ``M[i, j] = 1 /
    outdeg(j)`` for each edge ``j -> i`` (CSR, float64) and the mask of nodes with no
    out-edges."""
    if not sp.issparse(adj):
        raise TypeError(f"adj: a SciPy sparse matrix, got {type(adj).__name__}")
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise ValueError(f"adj: must be square (nodes x nodes), got shape {adj.shape}")
    adj = sp.csr_array(adj, dtype=np.float64)
    adj.data[:] = 1.0
    out = np.asarray(adj.sum(axis=1)).ravel()
    dangling = out == 0
    inv = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, out))
    M = sp.csr_array(sp.diags_array(inv) @ adj).T  # column j scaled by 1/outdeg(j)
    return sp.csr_array(M), dangling


def _check_damping(damping) -> float:
    if isinstance(damping, bool) or not isinstance(damping, (int, float)) or \
            not 0 < damping < 1:
        raise ValueError(f"damping: must be a number in (0, 1), got {damping!r}")
    return float(damping)


def pagerank_update(Mr: np.ndarray, r: np.ndarray, dangling: np.ndarray, damping: float):
    """One power step from ``Mr = M r`` (module docstring)."""
    d = _check_damping(damping)
    n = r.shape[0]
    return d * np.asarray(Mr) + (d * float(r[dangling].sum()) + 1.0 - d) / n


def pagerank(matvec: Callable, n: int, dangling, damping: float = 0.85, tol: float = 1e-10,
             max_iter: int = 200, callback: Callable | None = None) -> PageRankResult:
    """PageRank by the power method with ``matvec(r) = M r`` (module docstring), from the
    uniform vector; the ranks are renormalised to sum 1 each step (rounding drift), and
    ``callback(iteration, r, residual)`` follows each.  Stops below ``tol`` (L1) or after
    ``max_iter`` iterations."""
    n = _check_count("n", n, 1)
    d = _check_damping(damping)
    max_iter = _check_count("max_iter", max_iter, 1)
    if not tol > 0:
        raise ValueError(f"tol: must be > 0, got {tol!r}")
    dangling = np.asarray(dangling, dtype=bool)
    if dangling.shape != (n,):
        raise ValueError(f"dangling: a boolean mask of {n} nodes, got shape {dangling.shape}")
    r = np.full(n, 1.0 / n)
    res: list = []
    for it in range(1, max_iter + 1):
        nxt = pagerank_update(matvec(r), r, dangling, d)
        nxt /= nxt.sum()
        res.append(float(np.abs(nxt - r).sum()))
        r = nxt
        if callback is not None:
            callback(it, r, res[-1])
        if res[-1] < tol:
            break
    return PageRankResult(r, len(res), tuple(res), res[-1] < tol)


def reference_pagerank(M, dangling, damping: float = 0.85, tol: float = 1e-10,
                       max_iter: int = 200) -> PageRankResult:
    """The same power iteration with SciPy's single-process ``M @ r``."""
    M = sp.csr_array(M)
    return pagerank(lambda r: M @ r, M.shape[0], dangling, damping, tol, max_iter)


def save_graph(path: str, M) -> None:
    """Store a Google matrix ``M`` as an ``.npz`` (``scipy.sparse.save_npz``); the dangling
    nodes are its all-zero columns, found again by :func:`load_graph`."""
    sp.save_npz(os.fspath(path), sp.csr_matrix(M))


def load_graph(path: str) -> tuple:
    """``(M, dangling)`` from an ``.npz`` written by :func:`save_graph`."""
    M = sp.csr_array(sp.load_npz(os.fspath(path)), dtype=np.float64)
    col = np.asarray(abs(M).sum(axis=0)).ravel()
    return M, col == 0
