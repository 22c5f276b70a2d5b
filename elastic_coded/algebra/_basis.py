"""Lagrange bases and Chebyshev nodes: the building blocks of the real and finite-field codes.
Pure numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .fields import Field

__all__ = ["basis_matrix", "chebyshev_nodes", "embed"]


def basis_matrix(F: Field | None, nodes: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``M[..., i, j] = prod_{k != j} (at_i - nodes_k) / (nodes_j - nodes_k)``: the Lagrange basis
    through ``nodes`` (shape ``(..., n)``) evaluated at ``at`` (shape ``(..., a)``), with any
    matching leading batch shape.  ``F = None``: plain numpy arithmetic (real or complex)."""
    sub: Callable[[Any, Any], Any]
    mul: Callable[[Any, Any], Any]
    div: Callable[[Any, Any], Any]
    if F is None:
        sub, mul, div = np.subtract, np.multiply, np.divide
        nodes, at = np.asarray(nodes), np.asarray(at)
        dtype = np.result_type(nodes, at, np.float64)
    else:
        sub, mul, div, dtype = F.sub, F.mul, F.div, F.dtype
    nodes = np.asarray(nodes, dtype=dtype)
    at = np.asarray(at, dtype=dtype)
    n = nodes.shape[-1]
    num = np.ones(at.shape + (n,), dtype=dtype)
    den = np.ones(nodes.shape, dtype=dtype)
    for k in range(n):
        others = np.arange(n) != k  # every basis polynomial j != k has the factor (x - nodes_k)
        diff = sub(at, nodes[..., k:k + 1])  # (..., a)
        num[..., others] = mul(num[..., others], diff[..., None])
        den[..., others] = mul(den[..., others], sub(nodes[..., others], nodes[..., k:k + 1]))
    return np.asarray(div(num, den[..., None, :]), dtype=dtype)


def chebyshev_nodes(count: int, kind: int = 1, turn: float = 0.0) -> np.ndarray:
    """Chebyshev nodes on [-1, 1]: first kind ``cos((2i+1) pi / 2 count + turn)``, second kind
    (extrema) ``cos(i pi / (count - 1))`` (``[0.0]`` for one node)."""
    i = np.arange(count)
    if kind == 1:
        return np.cos((2 * i + 1) * np.pi / (2 * count) + turn)
    return np.cos(i * np.pi / (count - 1)) if count > 1 else np.zeros(1)


def embed(M: np.ndarray) -> np.ndarray:
    """The real form of a complex matrix (``(..., n, m)`` to ``(..., 2n, 2m)``): each entry
    ``a + ib`` becomes the rotation-scaling block ``[[a, -b], [b, a]]``, so that complex
    arithmetic on interleaved ``(re, im)`` pairs is real arithmetic with this matrix."""
    M = np.asarray(M)
    a, b = M.real, M.imag
    out = np.empty(M.shape[:-2] + (2 * M.shape[-2], 2 * M.shape[-1]), dtype=np.float64)
    out[..., 0::2, 0::2] = a
    out[..., 0::2, 1::2] = -b
    out[..., 1::2, 0::2] = b
    out[..., 1::2, 1::2] = a
    return out
