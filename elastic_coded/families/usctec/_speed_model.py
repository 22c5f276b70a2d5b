"""Random speeds for designing a placement and for the expected computation time (MATH.md §1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ...errors import ArgumentError
from ._checks import check_speeds

__all__ = ["SpeedModel"]


@dataclass(frozen=True)
class SpeedModel:
    """Random speeds: machine ``n`` runs at ``base[n]``, times a log-normal jitter
    (``sigma = jitter``), divided by ``straggle_factor`` with probability ``straggle_prob``
    (independently per machine and draw)."""

    base: tuple[float, ...]
    straggle_prob: float = 0.0
    straggle_factor: float = 5.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "base",
                           tuple(float(x) for x in check_speeds(self.base, None, "base")))
        if not 0 <= self.straggle_prob <= 1:
            raise ArgumentError(f"straggle_prob: must lie in [0, 1], got {self.straggle_prob!r}")
        if not (self.straggle_factor >= 1 and math.isfinite(self.straggle_factor)):
            raise ArgumentError(f"straggle_factor: must be finite and >= 1, got "
                                f"{self.straggle_factor!r}")
        if not (self.jitter >= 0 and math.isfinite(self.jitter)):
            raise ArgumentError(f"jitter: must be finite and >= 0, got {self.jitter!r}")

    @property
    def mean(self) -> np.ndarray:
        """Expected speeds."""
        b = np.asarray(self.base)
        jit = math.exp(self.jitter ** 2 / 2)
        return b * jit * (1 - self.straggle_prob + self.straggle_prob / self.straggle_factor)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` speed realisations, shape ``(size, N)``."""
        b = np.asarray(self.base)
        s = np.broadcast_to(b, (size, b.size)).copy()
        if self.jitter:
            s *= rng.lognormal(0.0, self.jitter, size=s.shape)
        if self.straggle_prob:
            s /= np.where(rng.random(s.shape) < self.straggle_prob, self.straggle_factor, 1.0)
        return s


def _speed_samples(speed_model: SpeedModel | npt.ArrayLike, n: int, samples: int, seed: int
                   ) -> np.ndarray:
    if isinstance(speed_model, SpeedModel):
        if len(speed_model.base) != n:
            raise ArgumentError(f"speed_model: has {len(speed_model.base)} machines, placement has "
                                f"{n}")
        return speed_model.sample(np.random.default_rng(seed), samples)
    arr = np.asarray(speed_model, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != n:
        raise ArgumentError(
               f"speed_model: a SpeedModel or an array of realisations (samples x {n}), got shape "
               f"{arr.shape}")
    check_speeds(arr.ravel(), None, "speed_model")
    return arr
