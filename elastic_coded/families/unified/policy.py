"""The unified coding framework as a placement policy of the one runtime (MATH.md §2).  Pure.

Storage: the coded rows ``G A`` of a :func:`~elastic_coded.families.unified.storage_design` for
``K`` = the machines present, a source ``U{version}``; server ``k`` (the ``k``-th machine of
``servers``) holds the row ranges of its batches.  ``A`` gets zero rows appended up to the next
multiple of ``rows_multiple(K, mu, N, q)`` when its row count does not fit the batches (a
storage cost, reported as ``pad_rows``; the outputs are cut back to ``A``'s rows).

The storage is re-encoded and re-stored (:func:`plan_storage`) when

* fewer than ``q`` of its servers are left: the code can no longer cover the loss;
* machines joined and ``grow`` is on (the default): ``K`` grows to use them;
* a step's input count ``N`` does not fit the design's batches.

Otherwise a departure costs nothing: the Map waits for the fastest ``q`` of the servers left.
A step (:func:`map_calls`): every live server multiplies its coded rows by all ``N`` inputs,
paced by the model's latency ``S_k = mu N (1 + Exp(1))`` time units over its speed; the fastest
``q`` go on to the coded-multicast Shuffle and the Reduce.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ...errors import ArgumentError
from ...schemes.plan import PlanError
from ...schemes.wire import TaskSpec
from . import (
    StorageDesign,
    as_mu,
    rows_multiple,
    sample_map_latencies,
    storage_design,
)

if TYPE_CHECKING:
    from ...algebra.fields import Field

__all__ = ["UnifiedOptions", "UnifiedStorage", "plan_storage", "map_tasks", "map_latencies"]


@dataclass(frozen=True)
class UnifiedOptions:
    """Options of policy ``unified``; every error names the key, the value and the rule."""

    mu: Any = "1/2"
    """Storage fraction per server (a Fraction, float, int or ``"p/d"`` string)."""
    q: int = 2
    """Servers the Map waits for (``ceil(1/mu) <= q``; lowered when fewer machines are present
    or a step's ``N`` does not split into ``q`` parts, see :func:`plan_storage`)."""
    N: int | None = None
    """Inputs per step the storage is designed for (default ``q``); a step with another ``N``
    re-designs when it does not fit."""
    grow: bool = True
    """Re-design to use machines that join."""

    def __post_init__(self) -> None:
        try:
            mu = as_mu(self.mu, 10 ** 6)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"mu: {self.mu!r} is not a storage fraction in (0, 1]: "
                                f"{exc}") from None
        object.__setattr__(self, "mu", mu)
        if isinstance(self.q, bool) or not isinstance(self.q, (int, np.integer)) or self.q < 1:
            raise ArgumentError(f"q: {self.q!r} must be an int >= 1")
        if self.q * mu < 1:
            raise ArgumentError(f"q: {self.q} must be at least ceil(1/mu) = {math.ceil(1 / mu)} "
                                f"(the fastest q servers must jointly hold A)")
        if self.N is not None and (isinstance(self.N, bool) or not isinstance(self.N, int)
                                   or self.N < 1):
            raise ArgumentError(f"N: {self.N!r} must be an int >= 1 or None")
        if not isinstance(self.grow, bool):
            raise ArgumentError(f"grow: {self.grow!r} must be true or false")


@dataclass(frozen=True)
class UnifiedStorage:
    """The design in force: ``servers[k]`` is server ``k``; ``version`` names the source."""

    design: StorageDesign = field(repr=False)
    servers: tuple[Hashable, ...]
    version: int
    m: int
    N: int
    reason: str = "start"

    @property
    def source(self) -> str:
        return f"U{self.version}"

    @property
    def pad_rows(self) -> int:
        return self.design.m - self.m

    @property
    def q(self) -> int:
        return self.design.q

    def ranges_of(self, k: int) -> tuple[tuple[int, int], ...]:
        """Server ``k``'s coded rows as increasing ranges (one per run of its batches)."""
        out: list[tuple[int, int]] = []
        beta = self.design.batch_size
        for b, T in enumerate(self.design.batches):
            if k in T:
                a = b * beta
                if out and out[-1][1] == a:
                    out[-1] = (out[-1][0], a + beta)
                else:
                    out.append((a, a + beta))
        return tuple(out)

    def live(self, present: Iterable[Hashable]) -> tuple[int, ...]:
        """Server indices whose machine is present."""
        present = set(present)
        return tuple(k for k, mach in enumerate(self.servers) if mach in present)


def _design(opts: UnifiedOptions, m: int, K: int, N: int, fld: Field | str) -> StorageDesign:
    """The design for ``K`` servers: ``q`` is the option, or, when fewer than ``q`` machines
    are present or ``N`` does not split, the largest ``q' <= min(q, K)`` with ``q' | N`` and
    ``mu q' >= 1``."""
    if Fraction(1, K) > opts.mu:
        raise PlanError(f"machines: {K} present, too few for mu = {opts.mu} (the servers "
                        f"must jointly hold A: K >= 1/mu = {math.ceil(1 / opts.mu)})")
    q = next((c for c in range(min(opts.q, K), 0, -1) if N % c == 0 and c * opts.mu >= 1), None)
    if q is None:
        raise PlanError(f"B: N = {N} inputs split over no q' <= min(q, K) = {min(opts.q, K)} "
                        f"with mu q' >= 1 (each of the q fastest servers reduces N/q outputs); "
                        f"use N a multiple of q = {opts.q}")
    mult = rows_multiple(K, opts.mu, N, q)
    m_pad = -(-m // mult) * mult
    return storage_design(K, opts.mu, q, m_pad, fld)


def _fits(st: UnifiedStorage, N: int) -> bool:
    d = st.design
    if N % d.q:
        return False
    return d.m % rows_multiple(d.K, d.mu, N, d.q) == 0


def plan_storage(opts: UnifiedOptions, m: int, present: Iterable[Hashable],
                 old: UnifiedStorage | None, N: int,
                 fld: Field | str) -> tuple[UnifiedStorage, bool]:
    """The design for the machines ``present`` and ``N`` inputs per step; returns it and whether
    it is new (then every server's rows must be re-encoded and re-stored)."""
    present = tuple(sorted(present, key=str))
    reason = None
    if old is None:
        reason = "start"
    else:
        live = old.live(present)
        joined = set(present) - set(old.servers)
        if len(live) < old.q:
            reason = f"{len(live)} of its servers left, fewer than q = {old.q}"
        elif joined and opts.grow:
            reason = f"{len(joined)} machines joined"
        elif not _fits(old, N):
            reason = f"N = {N} inputs do not fit the batches"
        elif old.q < opts.q and len(present) > old.design.K:
            reason = f"q back towards {opts.q}"
    if reason is None:   # then there is an old storage (without one, the reason is "start")
        return cast(UnifiedStorage, old), False
    design = _design(opts, m, len(present), N, fld)
    version = 0 if old is None else old.version + 1
    return UnifiedStorage(design, present, version, m, N, reason), True


def map_latencies(st: UnifiedStorage, N: int, rng: np.random.Generator) -> np.ndarray:
    """One draw of the ``K`` servers' Map latencies (time units, MATH.md §2)."""
    return sample_map_latencies(st.design.K, st.design.mu, N, rng)


def map_tasks(st: UnifiedStorage, k: int) -> tuple[TaskSpec, ...]:
    """Server ``k``'s Map: its coded rows (increasing) times all the inputs."""
    return tuple(TaskSpec(st.source, r, 0, None, 0, k) for r in st.ranges_of(k))


def store_orders(st: UnifiedStorage) -> dict[Hashable, tuple[tuple[int, int], ...]]:
    """``{machine: ((start, stop), ...)}``: what each server stores of ``st.source``."""
    return {mach: st.ranges_of(k) for k, mach in enumerate(st.servers)}


def values_moved(st: UnifiedStorage, n_cols: int) -> tuple[int, int]:
    """Rows and values sent to store ``st`` (every server's coded rows)."""
    rows = sum(b - a for k in range(len(st.servers)) for a, b in st.ranges_of(k))
    return rows, rows * n_cols


def coded_matrix(st: UnifiedStorage, A: np.ndarray) -> np.ndarray:
    """``G [A; 0]``: the coded rows of the source ``st.source`` (``A`` padded to the design)."""
    fld = st.design.field
    if st.pad_rows:
        A = np.concatenate([A, fld.zeros((st.pad_rows, A.shape[1]))], axis=0)
    return fld.matmul(st.design.generator, A)


def speed_of(speeds: Mapping[str, float], machine: str) -> float:
    return float(speeds.get(machine, 1.0))
