"""The heterogeneous problem of MATH.md §3: ``M`` masters with their row counts, ``N``
workers, and the model parameters ``a`` and ``u``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ...errors import ArgumentError
from ._model import _as_float, lambert_W, worker_value


def _readonly(x: np.ndarray) -> np.ndarray:
    x = np.array(x, copy=True)
    x.setflags(write=False)
    return x


@dataclass(frozen=True, eq=False)
class HeteroProblem:
    """``M`` masters with ``L[m]`` rows each, ``N > M`` workers, model parameters ``a, u``
    of shape ``(M, N)`` (MATH.md §3)."""

    L: np.ndarray
    """Rows of ``A_m`` per master, shape ``(M,)``, positive whole numbers."""
    a: np.ndarray
    """Minimum processing time per coded row, shape ``(M, N)``, positive."""
    u: np.ndarray
    """Straggling parameter (rate ``u/l`` of the exponential tail), shape ``(M, N)``, positive."""

    def __post_init__(self) -> None:
        L = _as_float(self.L, "L")
        a = _as_float(self.a, "a")
        u = _as_float(self.u, "u")
        if L.ndim != 1 or L.size == 0:
            raise ArgumentError(f"L: must be a non-empty 1-D sequence (rows per master), "
                                f"got shape {L.shape}")
        M = L.size
        for name, x in (("a", a), ("u", u)):
            if x.ndim != 2 or x.shape[0] != M:
                raise ArgumentError(f"{name}: must have shape (M, N) = ({M}, N) to match L, "
                                    f"got shape {x.shape}")
        if a.shape != u.shape:
            raise ArgumentError(f"u: shape {u.shape} must equal a's shape {a.shape}")
        N = a.shape[1]
        if N <= M:
            raise ArgumentError(f"N: needs more workers than masters (N > M), got N={N}, M={M}")
        for name, x in (("L", L), ("a", a), ("u", u)):
            bad = ~np.isfinite(x) | (x <= 0)
            if np.any(bad):
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ArgumentError(f"{name}: every entry must be positive and finite, "
                                    f"got {name}{list(idx)} = {float(x[idx])!r}")
        if np.any(L != np.floor(L)):
            m = int(np.argwhere(L != np.floor(L))[0][0])
            raise ArgumentError(f"L: rows per master must be whole numbers, "
                                f"got L[{m}] = {float(L[m])!r}")
        object.__setattr__(self, "L", _readonly(L))
        object.__setattr__(self, "a", _readonly(a))
        object.__setattr__(self, "u", _readonly(u))

    @property
    def M(self) -> int:
        return int(self.L.size)

    @property
    def N(self) -> int:
        return int(self.a.shape[1])

    @cached_property
    def W(self) -> np.ndarray:
        """Theorem-1 constants, shape ``(M, N)``."""
        return _readonly(lambert_W(self.a, self.u))

    @cached_property
    def v(self) -> np.ndarray:
        """Worker values ``v = u / W``, shape ``(M, N)``."""
        return _readonly(worker_value(self.a, self.u))

    @cached_property
    def w(self) -> np.ndarray:
        """Max-min item values ``w[m,n] = v[m,n] / L_m``."""
        return _readonly(self.v / self.L[:, None])

    def __repr__(self) -> str:
        return (f"<HeteroProblem: M={self.M} masters, N={self.N} workers, "
                f"L={[int(x) for x in self.L]}>")


def random_problem(M: int, N: int, rng: Any = None, *,
                   L_range: tuple[int, int] = (500, 2000)) -> HeteroProblem:
    """A random heterogeneous instance (the benchmark's generator).

    Per-row times ``a[m,n] = 1e-3 * d_m * c_n * e_mn`` seconds with task sizes
    ``d_m ~ U[0.5, 2]``, worker slowness ``c_n`` log-uniform on ``[1, 10]`` and pair noise
    ``e_mn ~ U[0.8, 1.25]``; straggling ``u[m,n] = 1 / (a[m,n] g_n)`` with ``g_n`` log-uniform
    on ``[0.5, 5]`` (the exponential tail's mean is ``g_n`` times the shift); ``L_m`` uniform
    on ``L_range``.
    """
    rng = np.random.default_rng(rng)
    d = rng.uniform(0.5, 2.0, size=M)
    c = np.exp(rng.uniform(np.log(1.0), np.log(10.0), size=N))
    e = rng.uniform(0.8, 1.25, size=(M, N))
    g = np.exp(rng.uniform(np.log(0.5), np.log(5.0), size=N))
    a = 1e-3 * d[:, None] * c[None, :] * e
    u = 1.0 / (a * g[None, :])
    L = rng.integers(L_range[0], L_range[1] + 1, size=M)
    return HeteroProblem(L=L, a=a, u=u)
