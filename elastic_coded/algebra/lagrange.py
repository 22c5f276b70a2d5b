"""Lagrange coding of the input ``B`` (MATH.md §1, eq. 2, eq. 3 and decoding).

``B`` is split into ``L`` column blocks ``B_l``.  A code with ``K = L + S`` evaluation points
``alpha_1..alpha_K`` and ``L`` interpolation points ``beta_1..beta_L`` (all distinct) sends the
machine in *position* ``i`` of a piece

    B~_i = sum_l B_l * prod_{k != l} (alpha_i - beta_k) / (beta_l - beta_k)           (eq. 2)

and any ``L`` results ``A_g B~_i`` of the piece give back every ``A_g B_l``:

    A_g B_l = sum_{i in Lset} (A_g B~_i) * prod_{i' in Lset, i' != i} (beta_l - alpha_i') / (alpha_i - alpha_i')

Points are chosen per piece (position ``i`` of every piece uses ``alpha_i``) rather than one per
machine: a piece involves only ``K`` points, so the real field stays well-conditioned however many
machines there are, and the encoder computes only ``K`` coded blocks per step.  In the real field the
``K + L`` points are Chebyshev nodes, with the ``beta`` s interleaved among the ``alpha`` s.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .fields import Field, field as make_field

__all__ = ["LagrangeCode", "lagrange_code"]


@dataclass(frozen=True, eq=False)
class LagrangeCode:
    """A Lagrange code over ``field`` with ``L`` data blocks and ``K = L + S`` positions."""

    field: Field
    L: int
    S: int
    alphas: tuple
    betas: tuple

    @property
    def K(self) -> int:
        return self.L + self.S

    def __repr__(self) -> str:
        return f"<Lagrange code: L={self.L}, S={self.S} over {self.field.name}>"

    # -- matrices -----------------------------------------------------------------------------
    @functools.cached_property
    def encode_matrix(self) -> np.ndarray:
        """``E[i, l] = prod_{k != l} (alpha_i - beta_k) / (beta_l - beta_k)`` (K x L)."""
        return _basis_matrix(self.field, np.asarray(self.betas), np.asarray(self.alphas))

    def decode_matrix(self, positions: Sequence[int]) -> np.ndarray:
        """``D[l, j]``: weight of the result of ``positions[j]`` in ``A B_l`` (L x L)."""
        return self._decode_matrix(tuple(int(p) for p in positions))

    @functools.lru_cache(maxsize=4096)
    def _decode_matrix(self, positions: tuple) -> np.ndarray:
        if len(positions) != self.L or len(set(positions)) != self.L:
            raise ValueError(
                f"positions: need exactly L={self.L} distinct positions to decode, got {positions}")
        bad = [p for p in positions if not 0 <= p < self.K]
        if bad:
            raise ValueError(f"positions: {bad} outside 0..{self.K - 1}")
        al = np.asarray(self.alphas)[list(positions)]
        # basis polynomials through the chosen alphas, evaluated at the betas: (L x L) = [l, j]
        return _basis_matrix(self.field, al, np.asarray(self.betas))

    # -- encode / decode ------------------------------------------------------------------------
    def encode(self, B: np.ndarray, positions: Sequence[int] | None = None) -> np.ndarray:
        """Coded blocks ``B~_i`` for ``positions`` (default all K): array ``(len, v, r/L)``."""
        B = np.asarray(B)
        if B.ndim != 2:
            raise ValueError(f"B: must be 2-D, got shape {B.shape}")
        v, r = B.shape
        if r % self.L:
            raise ValueError(f"B: its {r} columns must be divisible by L={self.L}")
        c = r // self.L
        blocks = B.reshape(v, self.L, c).transpose(1, 0, 2).reshape(self.L, v * c)
        E = self.encode_matrix if positions is None else self.encode_matrix[list(positions)]
        return self.field.matmul(E, blocks).reshape(E.shape[0], v, c)

    def decode(self, results: dict) -> np.ndarray:
        """From ``{position: A_g B~_position}`` with at least ``L`` entries, return ``A_g B_l``
        for every ``l`` stacked as ``(L, rows, cols)``.  Uses the first ``L`` positions given."""
        if len(results) < self.L:
            raise ValueError(
                f"results: need at least L={self.L} results to decode, got {len(results)}")
        positions = list(results)[: self.L]
        first = np.asarray(results[positions[0]])
        shape = first.shape
        stack = np.stack([np.asarray(results[p]).reshape(-1) for p in positions])
        D = self.decode_matrix(positions)
        return self.field.matmul(D, stack).reshape((self.L,) + shape)


def _basis_matrix(F: Field, nodes: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``M[i, j] = prod_{k != j} (at_i - nodes_k) / (nodes_j - nodes_k)``: the Lagrange basis
    through ``nodes`` evaluated at ``at``."""
    nodes = np.asarray(nodes, dtype=F.dtype)
    at = np.asarray(at, dtype=F.dtype)
    n = len(nodes)
    num = np.ones((len(at), n), dtype=F.dtype)
    den = np.ones(n, dtype=F.dtype)
    for k in range(n):
        others = np.arange(n) != k  # every basis polynomial j != k has the factor (x - nodes_k)
        diff = F.sub(at[:, None], nodes[k])  # (len(at), 1)
        num[:, others] = F.mul(num[:, others], diff)
        den[others] = F.mul(den[others], F.sub(nodes[others], nodes[k]))
    return np.asarray(F.div(num, den[None, :]), dtype=F.dtype)


def lagrange_code(field, L: int, S: int) -> LagrangeCode:
    """The code used everywhere: points from ``field.points(K + L)``.

    Real field: ``K + L`` Chebyshev nodes; the ``beta`` s take every other node from the middle
    out so that interpolation never extrapolates far.  Finite fields: ``alpha = 0..K-1``,
    ``beta = K..K+L-1``.
    """
    F = make_field(field)
    for name, val, lo in (("L", L, 1), ("S", S, 0)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
            raise ValueError(f"{name}: must be an int >= {lo}, got {val!r}")
    L, S = int(L), int(S)
    return _cached_code(F, L, S)


@functools.lru_cache(maxsize=256)
def _cached_code(F: Field, L: int, S: int) -> LagrangeCode:
    K = L + S
    pts = F.points(K + L)
    if F.exact:
        alphas, betas = pts[:K], pts[K:]
    else:
        order = np.argsort(pts)
        pts = pts[order]
        # beta positions spread evenly through the sorted nodes
        beta_idx = np.unique(np.round(np.linspace(0.5, K + L - 1.5, L) ).astype(int))
        if len(beta_idx) < L:
            beta_idx = np.arange(1, 2 * L, 2)[:L]
        mask = np.zeros(K + L, bool)
        mask[beta_idx] = True
        alphas, betas = pts[~mask], pts[mask]
    return LagrangeCode(F, L, S, tuple(alphas.tolist()), tuple(betas.tolist()))
