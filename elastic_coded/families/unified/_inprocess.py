"""The reference in-process executor of the unified coding framework, whose semantics every
other executor of its plans must match, and the Map latency model (MATH.md §2)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field as dc_field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ...algebra.fields import Field
from ...algebra.fields import field as _make_field
from ...errors import ArgumentError
from ._params import MuLike, _check_int, _check_n_divisible, _check_params, _check_q, as_mu
from ._reduce import reduce_server
from ._shuffle import (
    ShufflePlan,
    _check_fastest,
    check_shuffle_plan,
    encode_packet,
    receive_packet,
    shuffle_plan,
)
from ._storage import StorageDesign, encode_storage, map_compute, storage_design
from ._theory import LoadBreakdown


@dataclass(frozen=True)
class RunResult:
    """What :func:`run_in_process` did.

    Attributes:
        outputs: ``A X`` (``m x N``, column ``j`` is ``y_j``) as decoded by the reducers.
        values_sent: values actually transmitted; ``load``: ``values_sent / m`` (measured).
        theory: the :class:`LoadBreakdown` (``theory.L`` is the predicted load).
        design, plan: the storage design and shuffle plan that ran.
        map_values: values computed by each server of ``Q`` in the Map phase.
        values_by_round: ``(j, values)`` per multicast round ``j``, ``(0, values)`` for unicast.
        received: values each server of ``Q`` recovered in the Shuffle.
    """

    outputs: np.ndarray = dc_field(repr=False, compare=False)
    values_sent: int
    load: Fraction
    theory: LoadBreakdown
    design: StorageDesign = dc_field(repr=False)
    plan: ShufflePlan = dc_field(repr=False)
    map_values: tuple[int, ...]
    values_by_round: tuple[tuple[int, int], ...]
    received: tuple[int, ...]


def run_in_process(A: npt.ArrayLike, X: npt.ArrayLike, K: int, mu: MuLike, q: int,
                   field: Field | str = "real", fastest: Iterable[int] | None = None) -> RunResult:
    """Run storage, Map, Shuffle and Reduce in-process (the reference semantics, MATH.md §2).

    ``A`` is ``m x n``, ``X`` is ``n x N`` (one input per column); ``fastest`` is the set ``Q``
    of the ``q`` servers that finish the Map first (default ``0 .. q-1``).  Only they compute:
    the others are the stragglers whose results are never used.  ``m`` must be a multiple of
    :func:`rows_multiple`.  The reducers decode from what they computed and received only.
    """
    fld = _make_field(field)
    A = fld.asarray(A, "A")
    X = fld.asarray(X, "X")
    if A.ndim != 2 or X.ndim != 2 or A.shape[1] != X.shape[0]:
        raise ArgumentError(f"A, X: need A (m x n) and X (n x N), got shapes {A.shape} and "
                            f"{X.shape}")
    m, N = A.shape[0], X.shape[1]
    K = _check_int("K", K, low=1)
    mu_f = as_mu(mu, K)
    q = _check_q(q, K, mu_f)
    _check_n_divisible(N, q)
    design = storage_design(K, mu_f, q, m, fld)
    Q = _check_fastest(design, range(q) if fastest is None else fastest)
    plan = shuffle_plan(design, Q, N)
    check_shuffle_plan(design, plan)

    stored = encode_storage(design, A)
    maps = {k: map_compute(design, stored[k], X) for k in Q}

    got: dict[int, dict[int, dict[int, object]]] = {k: {} for k in Q}
    by_round: dict[int, int] = {}
    received = dict.fromkeys(Q, 0)
    values_sent = 0
    for t in plan.transmissions:
        packet = encode_packet(design, t, maps[t.sender])
        size = int(np.asarray(packet).shape[0])
        values_sent += size
        by_round[t.round] = by_round.get(t.round, 0) + size
        for k in t.receivers:
            received[k] += receive_packet(design, t, k, packet, maps[k], got[k])

    outputs = fld.zeros((m, N))
    for k in Q:
        outputs[:, list(plan.outputs_of(k))] = reduce_server(design, plan, k, maps[k], got[k])

    th = plan.theory
    return RunResult(outputs=outputs, values_sent=values_sent, load=Fraction(values_sent, m),
                     theory=th, design=design, plan=plan,
                     map_values=tuple(len(design.server_rows[k]) * N for k in Q),
                     values_by_round=tuple(sorted(by_round.items(), key=lambda kv: -kv[0])),
                     received=tuple(received[k] for k in Q))




def simulate_map_latency(K: int, mu: MuLike, N: int, q: int, trials: int,
                         rng: np.random.Generator | int | None = None) -> float:
    """Mean ``q``-th order statistic of ``K`` i.i.d. Map latencies with
    ``Pr[S_k <= t] = 1 - exp(-(t/(mu N) - 1))``, ``t >= mu N`` (MATH.md §2), i.e.
    ``S_k = mu N (1 + E_k)``, ``E_k ~ Exp(1)``; estimates ``D(q)``."""
    K, mu_f, N, q = _check_params(K, mu, N, q)
    trials = _check_int("trials", trials, low=1)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    scale = float(mu_f * N)
    total, done, chunk = 0.0, 0, max(1, 2_000_000 // K)
    while done < trials:
        n = min(chunk, trials - done)
        E = gen.exponential(1.0, size=(n, K))
        total += float(np.partition(E, q - 1, axis=1)[:, q - 1].sum())
        done += n
    return scale * (1.0 + total / trials)


def sample_map_latencies(K: int, mu: MuLike, N: int,
                         rng: np.random.Generator | int | None = None) -> np.ndarray:
    """One draw of the ``K`` servers' Map latencies, in time units (MATH.md §2):
    ``S_k = mu N (1 + E_k)``, ``E_k ~ Exp(1)`` i.i.d., so
    ``Pr[S_k <= t] = 1 - exp(-(t/(mu N) - 1))`` for ``t >= mu N``.  The ``q``-th smallest has
    mean ``D(q)``."""
    K = _check_int("K", K, low=1)
    mu_f = as_mu(mu, K)
    N = _check_int("N", N, low=1)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return float(mu_f * N) * (1.0 + gen.exponential(1.0, size=K))


