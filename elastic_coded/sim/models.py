"""Delay and speed models for the simulator.  Pure: numpy only.

Every model is a frozen dataclass with ``sample(rng, steps, N) -> ndarray`` of shape
``(steps, N)``: column ``n`` is machine ``n`` (machines keep their column for the whole run, so
persistent models stay persistent), row ``t`` is step ``t``.

- *Delay models* return **slowdown factors**: machine ``n`` takes ``slowdown[t, n]`` times as long
  at step ``t`` as its speed alone says (the runtime's ``slow`` factor; 1 = on time).
- *Speed models* return **speeds** (row-column products per unit time, the plans' ``s[n]``).  The
  ones here are static (every row equal): the heterogeneity that a plan should learn and use.

A machine's time for ``work`` (a fraction of the step's products) is
``work / speed * slowdown * time_scale`` (see :mod:`elastic_coded.sim.executor`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, cast

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError

__all__ = [
    "NoDelays", "IIDStragglers", "ShiftedExponential", "MarkovStragglers", "SlowSpells",
    "TraceDelays", "Compose", "EqualSpeeds", "UniformSpeeds", "LinearSpeeds", "FixedSpeeds",
    "check_model", "Model",
]


class Model(Protocol):
    """A delay or speed model: ``sample(rng, steps, N)`` gives a ``(steps, N)`` array."""

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray: ...


# ------------------------------------------------------------------------------------------------
# checks
# ------------------------------------------------------------------------------------------------
def _prob(name: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not 0 <= v <= 1:
        raise ArgumentError(f"{name}: a probability in [0, 1], got {v!r}")
    return float(v)


def _factor(name: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not (v >= 1 and math.isfinite(v)):
        raise ArgumentError(f"{name}: a finite slowdown factor >= 1, got {v!r}")
    return float(v)


def _positive(name: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not (v > 0 and math.isfinite(v)):
        raise ArgumentError(f"{name}: a positive finite number, got {v!r}")
    return float(v)


def _speed_range(low: float, high: float) -> None:
    _positive("low", low)
    _positive("high", high)
    if high < low:
        raise ArgumentError(f"high: must be >= low = {low!r}, got {high!r}")


def _shape(steps: int, N: int) -> tuple[int, int]:
    for name, v in (("steps", steps), ("N", N)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ArgumentError(f"{name}: an int >= 0, got {v!r}")
    return int(steps), int(N)


def check_model(model: object, name: str = "model") -> Model:
    """``model`` must have a ``sample(rng, steps, N)`` method."""
    if not callable(getattr(model, "sample", None)):
        raise ArgumentTypeError(f"{name}: a model with sample(rng, steps, N), got "
                                f"{type(model).__name__}")
    return cast(Model, model)


# ------------------------------------------------------------------------------------------------
# delay models (slowdown factors)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoDelays:
    """Every machine on time: all slowdowns 1."""

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        return np.ones((steps, N))


@dataclass(frozen=True)
class IIDStragglers:
    """Independent stragglers: each step exactly ``k`` machines chosen uniformly at random (when
    ``k`` is given), or each machine independently with probability ``p``, run ``factor`` times
    slower.  (With churn, ``k`` counts over all ``N`` columns sampled, present or not; the churn
    script's ``stragglers: k`` picks exactly ``k`` among the machines present.)"""

    k: int | None = None
    p: float = 0.0
    factor: float = 5.0

    def __post_init__(self) -> None:
        if self.k is not None and (isinstance(self.k, bool) or not isinstance(self.k, int)
                                   or self.k < 0):
            raise ArgumentError(f"k: stragglers per step, an int >= 0 (or None), got {self.k!r}")
        _prob("p", self.p)
        _factor("factor", self.factor)
        if self.k is not None and self.p:
            raise ArgumentError(f"k, p: give one of them (k={self.k!r}, p={self.p!r})")

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        out = np.ones((steps, N))
        if self.k is not None:
            k = min(self.k, N)
            if k and steps:
                who = np.argpartition(rng.random((steps, N)), k - 1, axis=1)[:, :k]
                np.put_along_axis(out, who, self.factor, axis=1)
        elif self.p:
            out[rng.random((steps, N)) < self.p] = self.factor
        return out


@dataclass(frozen=True)
class ShiftedExponential:
    """Shifted-exponential delays (the latency model of MATH.md §2): a task takes its nominal time
    (the shift) plus an exponential tail with mean ``tail`` times the shift, i.e.
    ``slowdown = 1 + Exp(mean=tail)``, independently per machine and step."""

    tail: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.tail, (int, float)) and self.tail >= 0
                and math.isfinite(self.tail)):
            raise ArgumentError(f"tail: mean of the exponential part (a multiple of the shift), "
                                f"finite and >= 0, got {self.tail!r}")

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        if not self.tail:
            return np.ones((steps, N))
        return 1.0 + rng.exponential(self.tail, size=(steps, N))


@dataclass(frozen=True)
class MarkovStragglers:
    """Persistent slowness: a two-state Markov chain per machine.  A fast machine turns slow with
    probability ``p_slow`` per step, a slow one recovers with probability ``p_recover``; slow
    machines run ``factor`` times slower.  Slow spells last ``Geometric(p_recover)`` steps (mean
    ``1 / p_recover``); the chain starts in its stationary distribution."""

    p_slow: float = 0.01
    p_recover: float = 0.2
    factor: float = 5.0

    def __post_init__(self) -> None:
        _prob("p_slow", self.p_slow)
        _prob("p_recover", self.p_recover)
        _factor("factor", self.factor)
        if self.p_slow + self.p_recover == 0:
            raise ArgumentError("p_slow, p_recover: both 0 leaves the chain without a stationary "
                                "distribution; give at least one > 0")

    @property
    def stationary(self) -> float:
        """Long-run fraction of slow machine-steps."""
        return self.p_slow / (self.p_slow + self.p_recover)

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        out = np.ones((steps, N))
        if not steps or not N:
            return out
        u = rng.random((steps, N))
        slow = rng.random(N) < self.stationary
        for t in range(steps):
            if t:
                slow = np.where(slow, u[t] >= self.p_recover, u[t] < self.p_slow)
            out[t, slow] = self.factor
        return out


@dataclass(frozen=True)
class SlowSpells:
    """Persistent slowness with spell lengths you choose: each step a machine that is not slow
    starts a slow spell with probability ``p``; the spell lasts a number of steps drawn uniformly
    from ``duration = (lo, hi)`` (inclusive), during which the machine runs ``factor`` times
    slower."""

    p: float = 0.01
    duration: tuple[int, int] = (2, 10)
    factor: float = 5.0

    def __post_init__(self) -> None:
        _prob("p", self.p)
        _factor("factor", self.factor)
        d = tuple(self.duration)
        if (len(d) != 2 or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                                   for x in d) or not 1 <= d[0] <= d[1]):
            raise ArgumentError(f"duration: (lo, hi) ints with 1 <= lo <= hi, got "
                                f"{self.duration!r}")
        object.__setattr__(self, "duration", (int(d[0]), int(d[1])))

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        out = np.ones((steps, N))
        if not steps or not N:
            return out
        lo, hi = self.duration
        u = rng.random((steps, N))
        lengths = rng.integers(lo, hi + 1, size=(steps, N))
        left = np.zeros(N, dtype=np.int64)  # steps of the current spell still to run
        for t in range(steps):
            start = (left == 0) & (u[t] < self.p)
            left[start] = lengths[t, start]
            slow = left > 0
            out[t, slow] = self.factor
            left[slow] -= 1
        return out


@dataclass(frozen=True)
class TraceDelays:
    """Trace-driven delays: replay a recorded ``(T, M)`` array of slowdown factors (all >= 0 and
    finite; rows are steps, columns machines).  Machine ``n`` replays column ``n mod M``; step
    ``t`` reads row ``(t + offset[n]) mod T``, where ``offset`` is 0, or uniform per machine when
    ``random_offset`` (decorrelates machines that share a column)."""

    values: np.ndarray = field(repr=False, compare=False)
    random_offset: bool = False

    def __post_init__(self) -> None:
        v = np.array(self.values, dtype=np.float64)
        if v.ndim == 1:
            v = v[:, None]
        if v.ndim != 2 or v.size == 0:
            raise ArgumentError(f"values: a non-empty (steps x machines) array, got shape "
                                f"{v.shape}")
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ArgumentError("values: every slowdown factor must be positive and finite")
        v.setflags(write=False)
        object.__setattr__(self, "values", v)

    def __repr__(self) -> str:
        return f"TraceDelays({self.values.shape[0]} steps x {self.values.shape[1]} machines)"

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        T, M = self.values.shape
        cols = np.arange(N) % M
        off = rng.integers(0, T, size=N) if self.random_offset else np.zeros(N, dtype=np.int64)
        rows = (np.arange(steps)[:, None] + off[None, :]) % T
        out: np.ndarray = self.values[rows, cols[None, :]].copy()
        return out


@dataclass(frozen=True)
class Compose:
    """Independent delay models acting together: slowdowns multiply."""

    models: tuple[Model, ...] = ()

    def __post_init__(self) -> None:
        ms = tuple(self.models)
        for i, m in enumerate(ms):
            check_model(m, f"models[{i}]")
        object.__setattr__(self, "models", ms)

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        out = np.ones((steps, N))
        for m in self.models:
            out *= m.sample(rng, steps, N)
        return out


# ------------------------------------------------------------------------------------------------
# speed models (static heterogeneous base speeds)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EqualSpeeds:
    """Every machine at ``value``."""

    value: float = 1.0

    def __post_init__(self) -> None:
        _positive("value", self.value)

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        return np.full((steps, N), float(self.value))


@dataclass(frozen=True)
class UniformSpeeds:
    """Static speeds drawn once per machine, uniformly from ``[low, high]``."""

    low: float = 1.0
    high: float = 4.0

    def __post_init__(self) -> None:
        _speed_range(self.low, self.high)

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        s = rng.uniform(self.low, self.high, size=N)
        return np.broadcast_to(s, (steps, N)).copy()


@dataclass(frozen=True)
class LinearSpeeds:
    """Static speeds evenly spread over ``[low, high]`` (``N`` points), in random order."""

    low: float = 1.0
    high: float = 4.0

    def __post_init__(self) -> None:
        _speed_range(self.low, self.high)

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        s = rng.permutation(np.linspace(self.low, self.high, N)) if N else np.zeros(0)
        return np.broadcast_to(s, (steps, N)).copy()


@dataclass(frozen=True)
class FixedSpeeds:
    """Static speeds given per machine (``values[n]`` for machine ``n``)."""

    values: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        v = tuple(float(x) for x in np.asarray(self.values, dtype=np.float64).reshape(-1))
        for i, x in enumerate(v):
            if not (x > 0 and math.isfinite(x)):
                raise ArgumentError(f"values: every speed must be positive and finite; "
                                    f"values[{i}] = {x!r}")
        object.__setattr__(self, "values", v)

    def sample(self, rng: np.random.Generator, steps: int, N: int) -> np.ndarray:
        steps, N = _shape(steps, N)
        if N > len(self.values):
            raise ArgumentError(f"N: {N} machines, but FixedSpeeds has {len(self.values)} values")
        return np.broadcast_to(np.asarray(self.values[:N]), (steps, N)).copy()
