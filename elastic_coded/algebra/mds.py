"""MDS codes: ``n`` coded rows from ``k`` data rows, any ``k`` of them decode.

Finite fields: the systematic generator ``[I_k; C]`` with a Cauchy matrix
``C[i, j] = 1 / (x_i - y_j)`` (every square submatrix of a Cauchy matrix is invertible, so every
``k`` rows of the generator are).  Reals: ``[I_k; G]`` with ``G`` a seeded Gaussian matrix, which
is MDS with probability one and far better conditioned than a real Cauchy or Vandermonde matrix.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .fields import Field, field as make_field

__all__ = ["MDSCode", "mds_code"]


@dataclass(frozen=True, eq=False)
class MDSCode:
    """An ``[n, k]`` MDS code over ``field`` with generator matrix ``generator`` (n x k)."""

    field: Field
    n: int
    k: int
    generator: np.ndarray

    def __repr__(self) -> str:
        return f"<MDS code: [{self.n}, {self.k}] over {self.field.name}>"

    def encode(self, data: np.ndarray) -> np.ndarray:
        """Coded rows ``generator @ data``; ``data`` has ``k`` rows (any trailing shape)."""
        data = np.asarray(data)
        if data.shape[0] != self.k:
            raise ValueError(f"data: needs k={self.k} rows, got shape {data.shape}")
        flat = data.reshape(self.k, -1)
        return self.field.matmul(self.generator, flat).reshape((self.n,) + data.shape[1:])

    def decode(self, indices: Sequence[int], coded: np.ndarray) -> np.ndarray:
        """Data rows from the coded rows ``coded[j] = (generator @ data)[indices[j]]``."""
        idx = tuple(int(i) for i in indices)
        coded = np.asarray(coded)
        if len(idx) != self.k or len(set(idx)) != self.k:
            raise ValueError(f"indices: need k={self.k} distinct coded rows, got {len(idx)}")
        if any(not 0 <= i < self.n for i in idx):
            raise ValueError(f"indices: {idx} outside 0..{self.n - 1}")
        if coded.shape[0] != self.k:
            raise ValueError(f"coded: needs k={self.k} rows, got shape {coded.shape}")
        flat = coded.reshape(self.k, -1)
        return self.field.matmul(self._inverse(idx), flat).reshape((self.k,) + coded.shape[1:])

    @functools.lru_cache(maxsize=8)  # k x k inverses can be large: keep a few
    def _inverse(self, idx: tuple) -> np.ndarray:
        return self.field.solve(self.generator[list(idx)], self.field.eye(self.k))


def mds_code(field, n: int, k: int, seed: int = 0) -> MDSCode:
    """An ``[n, k]`` MDS code over ``field`` (see the module docstring)."""
    F = make_field(field)
    for name, val in (("n", n), ("k", k)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"{name}: must be a positive int, got {val!r}")
    n, k = int(n), int(k)
    if n < k:
        raise ValueError(f"n: an MDS code needs n >= k, got n={n} < k={k}")
    extra = n - k
    if F.exact:
        order = getattr(F, "order", None)
        if order is not None and n > order:
            raise ValueError(f"n: a Cauchy MDS code over {F.name} needs n <= {order}, got n={n}")
        pts = F.points(n)
        y, x = pts[:k], pts[k:]
        C = F.inv(F.sub(x[:, None], y[None, :])) if extra else F.zeros((0, k))
    else:
        C = np.random.default_rng(seed).standard_normal((extra, k)) / np.sqrt(k)
    G = np.concatenate([F.eye(k), np.asarray(C, dtype=F.dtype)], axis=0)
    return MDSCode(F, n, k, G)
