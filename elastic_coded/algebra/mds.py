"""MDS codes: ``n`` coded rows from ``k`` data rows, any ``k`` of them decode.

Finite fields: the systematic generator ``[I_k; C]`` with a Cauchy matrix
``C[i, j] = 1 / (x_i - y_j)`` (every square submatrix of a Cauchy matrix is invertible, so every
``k`` rows of the generator are).  Reals: ``[I_k; G]`` with ``G`` a seeded Gaussian matrix, which
is MDS with probability one and far better conditioned than a real Cauchy or Vandermonde matrix.

Decoding: :meth:`MDSCode.decode` from exactly ``k`` coded rows; :meth:`MDSCode.decode_any` from
any ``>= k`` received rows, preferring the systematic ones and solving only for the data rows
that did not arrive.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError
from .fields import Field
from .fields import field as make_field

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
            raise ArgumentError(f"data: needs k={self.k} rows, got shape {data.shape}")
        flat = data.reshape(self.k, -1)
        return self.field.matmul(self.generator, flat).reshape((self.n,) + data.shape[1:])

    def decode(self, indices: Sequence[int], coded: np.ndarray) -> np.ndarray:
        """Data rows from the coded rows ``coded[j] = (generator @ data)[indices[j]]``."""
        idx = self._check_indices(indices, exactly_k=True)
        coded = self._check_values(coded, len(idx), "coded")
        flat = coded.reshape(self.k, -1)
        return self.field.matmul(self._inverse(idx), flat).reshape((self.k,) + coded.shape[1:])

    def decode_any(self, indices: Sequence[int], values: np.ndarray
                   ) -> tuple[np.ndarray, tuple[int, ...]]:
        """Data rows from any ``>= k`` distinct received coded rows, in any order.

        ``values[j] = (generator @ data)[indices[j]]`` (any trailing shape).  Picks ``k`` of
        them: the systematic rows (generator rows equal to a unit vector ``e_j``, at most one
        per data row ``j``) first, then the others, each by increasing code index.  A
        systematic code (one whose generator holds every ``e_j``, such as ``[I_k; C]``) solves
        only the ``|U| x |U|`` system for the data rows ``U`` that did not arrive:
        ``G[P, U] d_U = y_P - G[P, S] d_S`` (better conditioned over the reals, and cheaper);
        any other code multiplies by the cached inverse of the ``k x k`` submatrix, as
        :meth:`decode` does.

        Returns ``(data, used)``: the ``k`` data rows and the positions into ``indices`` (and
        ``values``) of the coded rows used, in the order picked.
        """
        idx = self._check_indices(indices, exactly_k=False)
        values = self._check_values(values, len(idx), "values")
        used = self._pick(idx)
        sel = np.asarray([idx[j] for j in used], dtype=np.int64)
        y = values.reshape(len(idx), -1)[list(used)]
        shape = (self.k,) + values.shape[1:]
        if not self._systematic:
            out = self.field.matmul(self._inverse(tuple(int(i) for i in sel)), y)
            return out.reshape(shape), used
        F, G = self.field, self.generator
        unit = self._unit_rows[sel]
        got = unit >= 0
        S, P = unit[got], sel[~got]
        out = F.zeros((self.k, y.shape[1]))
        out[S] = y[got]
        if P.size:
            U = np.setdiff1d(np.arange(self.k), S)
            rhs = y[~got]
            if S.size:
                rhs = F.sub(rhs, F.matmul(G[np.ix_(P, S)], y[got]))
            out[U] = F.solve(G[np.ix_(P, U)], rhs)
        return out.reshape(shape), used

    def _pick(self, idx: tuple[int, ...]) -> tuple[int, ...]:
        """Positions of the ``k`` coded rows :meth:`decode_any` uses: systematic rows first (at
        most one per data row), then the others, each by increasing code index."""
        order = sorted(range(len(idx)), key=lambda j: idx[j])
        covered: set[int] = set()
        first, rest = [], []
        for j in order:
            u = int(self._unit_rows[idx[j]])
            if u >= 0 and u not in covered:
                covered.add(u)
                first.append(j)
            else:
                rest.append(j)
        return tuple((first + rest)[:self.k])

    @functools.cached_property
    def _unit_rows(self) -> np.ndarray:
        """Per coded row, the data row ``j`` when the generator row is the unit vector ``e_j``,
        else -1."""
        G = np.asarray(self.generator)
        nonzero = G != 0
        out = np.full(self.n, -1, dtype=np.int64)
        single = nonzero.sum(axis=1) == 1
        j = np.argmax(nonzero, axis=1)
        ones = single & (G[np.arange(self.n), j] == 1)
        out[ones] = j[ones]
        return out

    @functools.cached_property
    def _systematic(self) -> bool:
        """Whether every unit vector ``e_j`` is a row of the generator."""
        return len(set(self._unit_rows[self._unit_rows >= 0].tolist())) == self.k

    def _check_indices(self, indices: Sequence[int], exactly_k: bool) -> tuple[int, ...]:
        idx = tuple(int(i) for i in indices)
        if len(set(idx)) != len(idx) or (len(idx) != self.k if exactly_k else len(idx) < self.k):
            need = f"k={self.k}" if exactly_k else f"at least k={self.k}"
            raise ArgumentError(f"indices: need {need} distinct coded rows, got {len(idx)} "
                                f"({len(set(idx))} distinct)")
        if any(not 0 <= i < self.n for i in idx):
            raise ArgumentError(f"indices: {idx} outside 0..{self.n - 1}")
        return idx

    def _check_values(self, values: np.ndarray, rows: int, name: str) -> np.ndarray:
        values = np.asarray(values)
        if values.ndim == 0 or values.shape[0] != rows:
            raise ArgumentError(f"{name}: needs one row per index ({rows}), got shape "
                                f"{values.shape}")
        return values

    # k x k inverses can be large: keep a few.  The code is frozen and hashed by identity, and
    # the cache keeping it alive (as long as its entries last) is accepted
    @functools.lru_cache(maxsize=8)  # noqa: B019
    def _inverse(self, idx: tuple[int, ...]) -> np.ndarray:
        return self.field.solve(self.generator[list(idx)], self.field.eye(self.k))


def mds_code(field: Any, n: int, k: int, seed: int = 0) -> MDSCode:
    """An ``[n, k]`` MDS code over ``field`` (see the module docstring)."""
    F = make_field(field)
    for name, val in (("n", n), ("k", k)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ArgumentError(f"{name}: must be a positive int, got {val!r}")
    n, k = int(n), int(k)
    if n < k:
        raise ArgumentError(f"n: an MDS code needs n >= k, got n={n} < k={k}")
    extra = n - k
    if F.exact:
        order = getattr(F, "order", None)
        if order is not None and n > order:
            raise ArgumentError(f"n: a Cauchy MDS code over {F.name} needs n <= {order}, got n={n}")
        pts = F.points(n)
        y, x = pts[:k], pts[k:]
        C = F.inv(F.sub(x[:, None], y[None, :])) if extra else F.zeros((0, k))
    else:
        C = np.random.default_rng(seed).standard_normal((extra, k)) / np.sqrt(k)
    G = np.concatenate([F.eye(k), np.asarray(C, dtype=F.dtype)], axis=0)
    return MDSCode(F, n, k, G)
