"""The unified coding framework on Ray (MATH.md §2): :class:`UnifiedCluster`.

``K`` server actors each hold their coded rows of ``A`` (the storage design of
:func:`~elastic_coded.schemes.unified.storage_design`, computed once; ``A`` is encoded on the
driver and each server's rows go through the object store once).  Each
:meth:`UnifiedCluster.multiply` step runs the three phases of the scheme after storage:

1. **Map.**  ``X`` is put in the object store once; every server multiplies its coded rows by all
   ``N`` inputs and keeps the result (actor state).  Its Map duration is drawn, seeded per step,
   from the shifted-exponential model ``S_k = mu N (1 + Exp(1))`` time units, each unit lasting
   ``time_scale`` seconds; the server sleeps (cancellably) until then.  The phase ends when the
   fastest ``q`` servers have finished (``ray.wait(num_returns=q)``); the others are cancelled.
2. **Shuffle.**  The driver computes the plan :func:`~elastic_coded.schemes.unified.shuffle_plan`
   for the fastest set ``Q`` and puts it in the object store once.  Each server of ``Q`` builds
   the packets it sends from its own Map result and puts each one in the object store once (a
   multicast is one ObjectRef, handed by reference to all its receivers); each receiver fetches
   its packets and decodes its segments, cancelling what it computed itself.
3. **Reduce.**  Each server of ``Q`` decodes its ``N/q`` outputs; the driver gathers them.

Only refs, small reports and the final outputs pass through the driver.  The actors only call
the pure functions of :mod:`elastic_coded.schemes.unified`; the reference executor
:func:`~elastic_coded.schemes.unified.run_in_process` defines what every step must return and
count.  Each step appends a :class:`UnifiedReport` to :attr:`UnifiedCluster.reports`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable

import numpy as np
import ray

from .session import ensure_ray, stop

from ..algebra.fields import Field, field as make_field
from ..schemes.unified import (MuLike, ShufflePlan, StorageDesign, check_shuffle_plan,
                               encode_packet, encode_storage, latency_load, map_compute,
                               receive_packet, reduce_server, rows_multiple,
                               sample_map_latencies, shuffle_plan, storage_design)

__all__ = ["UnifiedCluster", "UnifiedReport", "UnifiedServer"]

log = logging.getLogger(__name__)

LatencyModel = Callable[[np.random.Generator, int, Fraction, int], Any]
"""A custom latency model: ``f(rng, K, mu, N)`` returns the ``K`` Map latencies (time units)."""


def _check_matrix(fld: Field, A) -> np.ndarray:
    A = fld.asarray(A, "A")
    if A.ndim != 2 or A.shape[0] < 1 or A.shape[1] < 1:
        raise ValueError(f"A: must be a non-empty 2-D array (m x n), got shape {A.shape}")
    return A


# ------------------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class UnifiedReport:
    """What one :meth:`UnifiedCluster.multiply` step did (MATH.md §2)."""

    step: int
    """Step index (0-based)."""
    q: int
    """Servers the Map phase waited for."""
    fastest: tuple[int, ...]
    """The fastest set ``Q``, in finishing order (as reported by the servers' clocks)."""
    stragglers: tuple[int, ...]
    """The other servers, whose Map calls were cancelled (increasing)."""
    forced: bool
    """Whether ``Q`` was forced (``multiply(X, fastest=...)``): the others never finish."""
    latencies: tuple[float, ...]
    """The drawn Map latency of each server ``0 .. K-1``, in time units (``inf``: forced to
    straggle)."""
    model_latency: float
    """The ``q``-th smallest drawn latency (time units): the step's Map latency in the model."""
    map_latency_s: float
    """Measured: wall time from dispatching the Map to the ``q``-th finish, in seconds."""
    map_latency_units: float
    """``map_latency_s / time_scale``: the measured Map latency in time units (``nan`` when
    ``time_scale`` is 0)."""
    D: Fraction
    """The theory's mean Map latency ``D(q)`` (time units)."""
    values_sent: int
    """Measured: values in the packets the servers sent (a multicast counted once)."""
    load: Fraction
    """``values_sent / m``: the measured communication load."""
    L: Fraction
    """The theory's load ``L(q)``."""
    load_matches: bool
    """``load == L``."""
    packets: int
    """Packets sent (one object-store put each)."""
    values_by_round: tuple[tuple[int, int], ...]
    """``(j, values)`` per multicast round ``j`` (largest first), ``(0, values)`` for unicast."""
    values_received: int
    """Values the receivers recovered (each multicast counted once per receiver)."""
    shuffle_s: float
    """Shuffle wall time: plan, encode and put the packets, fetch and decode them."""
    reduce_s: float
    """Reduce wall time, including gathering the outputs on the driver."""
    total_s: float
    """Whole step."""

    def to_dict(self) -> dict:
        """Plain types (fractions as strings ``"p/q"``), for JSON."""
        d = asdict(self)
        for key in ("D", "load", "L"):
            d[key] = str(d[key])
        d["fastest"] = list(self.fastest)
        d["stragglers"] = list(self.stragglers)
        d["latencies"] = list(self.latencies)
        d["values_by_round"] = [list(p) for p in self.values_by_round]
        return d


# ------------------------------------------------------------------------------------------------
# the server actor
# ------------------------------------------------------------------------------------------------

@ray.remote(num_cpus=0)
class UnifiedServer:
    """Server ``k``: stores its coded rows, computes its Map, sends and receives Shuffle packets,
    reduces its outputs.  Async, so a Map in progress can be cancelled (``ray.cancel``).

    State between the phases of step ``s``: ``_maps[s]`` (this server's Map result, kept only if
    the Map finished), ``_plans[s]`` and ``_got[s]`` (values received, ``{output: {row: v}}``).
    """

    def __init__(self, k: int):
        self.k = int(k)
        self.design: StorageDesign | None = None
        self.stored: np.ndarray | None = None
        self._maps: dict[int, np.ndarray] = {}
        self._plans: dict[int, ShufflePlan] = {}
        self._got: dict[int, dict] = {}
        self._cancelled = 0
        self.version = -1

    async def store(self, design: StorageDesign, stored: np.ndarray, version: int) -> int:
        """Keep this server's coded rows ``stored`` of ``design`` (replacing any earlier ones),
        and warm up the field arithmetic (library imports, compiled kernels), so that the first
        step's Map and Reduce times are the field's, not its start-up.  Returns rows stored."""
        self.design, self.version = None, -1
        self.stored = np.asarray(stored)
        for state in (self._maps, self._plans, self._got):
            state.clear()
        fld = design.field
        n = self.stored.shape[1]
        await asyncio.to_thread(map_compute, design, self.stored[:1], fld.zeros((n, 1)))
        await asyncio.to_thread(fld.solve, fld.eye(2), fld.eye(2))
        self.design, self.version = design, int(version)
        return int(self.stored.shape[0])

    async def ping(self) -> dict:
        return {"server": self.k, "rows": 0 if self.stored is None else int(self.stored.shape[0]),
                "maps_cancelled": self._cancelled}

    def _forget_other_steps(self, step: int) -> None:
        for state in (self._maps, self._plans, self._got):
            for s in [s for s in state if s != step]:
                del state[s]

    async def map(self, step: int, X: np.ndarray, delay_s: float | None, version: int) -> dict:
        """Map: ``stored @ X``, finishing ``delay_s`` seconds after the call started (at once when
        computing took longer; never, until cancelled, when ``delay_s`` is ``None``).
        ``version``: the storage the driver planned with (a mismatch is an error)."""
        if version != self.version:
            raise RuntimeError(f"server {self.k}: holds storage version {self.version}, the step "
                               f"was planned for version {version}")
        t0 = time.perf_counter()
        self._forget_other_steps(step)
        try:
            result = await asyncio.to_thread(map_compute, self.design, self.stored, X)
            compute_s = time.perf_counter() - t0
            if delay_s is None:
                await asyncio.Event().wait()  # a forced straggler: runs until cancelled
            else:
                await asyncio.sleep(max(0.0, delay_s - (time.perf_counter() - t0)))
        except asyncio.CancelledError:
            self._cancelled += 1
            raise
        self._maps[step] = result
        return {"server": self.k, "step": step, "compute_s": compute_s,
                "elapsed_s": time.perf_counter() - t0, "finished": time.time()}

    async def send(self, step: int, plan: ShufflePlan) -> list[tuple[int, Any, int]]:
        """Build and put (once each) the packets this server sends in ``plan``.  Returns
        ``[(transmission index, ObjectRef, values in the packet), ...]``."""
        own = self._need_map(step)
        self._plans[step] = plan
        self._got[step] = {}
        out = []
        for i, t in enumerate(plan.transmissions):
            if t.sender == self.k:
                packet = encode_packet(self.design, t, own)
                out.append((i, ray.put(packet), int(np.asarray(packet).size)))
        return out

    async def receive(self, step: int, packets: list[tuple[int, Any]]) -> int:
        """Fetch the packets ``[(transmission index, ObjectRef), ...]`` meant for this server and
        decode them.  Returns the number of values recovered."""
        own = self._need_map(step)
        plan = self._plans[step]
        arrays = await asyncio.gather(*[ref for _, ref in packets])
        got = self._got[step]
        return sum(receive_packet(self.design, plan.transmissions[i], self.k, packet, own, got)
                   for (i, _), packet in zip(packets, arrays))

    async def reduce(self, step: int) -> tuple[tuple[int, ...], np.ndarray]:
        """Decode this server's outputs; returns ``(outputs, m x len(outputs) values)`` and
        forgets the step."""
        own = self._need_map(step)
        plan = self._plans[step]
        Y = await asyncio.to_thread(reduce_server, self.design, plan, self.k, own,
                                    self._got[step])
        for state in (self._maps, self._plans, self._got):
            state.pop(step, None)
        return plan.outputs_of(self.k), Y

    async def drop(self) -> None:
        """Forget the stored rows and every step's state (an idle server)."""
        self.design, self.stored, self.version = None, None, -1
        for state in (self._maps, self._plans, self._got):
            state.clear()

    def _need_map(self, step: int) -> np.ndarray:
        try:
            return self._maps[step]
        except KeyError:
            raise RuntimeError(f"server {self.k}: no Map result for step {step}") from None

    async def exit(self) -> None:
        ray.actor.exit_actor()


# ------------------------------------------------------------------------------------------------
# the driver
# ------------------------------------------------------------------------------------------------

class UnifiedCluster:
    """The unified coding framework for a fixed ``A`` on a Ray cluster (MATH.md §2).

    ``A`` (``m x n``) is stored coded on ``K`` servers, each a fraction ``mu`` of it, designed for
    waiting on the fastest ``q`` servers; :meth:`multiply` computes ``A @ X`` for ``n x N``
    inputs ``X`` (see the module docstring).  ``m`` must be a multiple of
    :func:`~elastic_coded.schemes.unified.rows_multiple` for the ``N`` used.

    ``field``: a field or a spec (``"gf(2^8)"``, ``"gf(65521)"``, ``"real"``); finite fields are
    exact.  ``time_scale``: seconds per time unit of the latency model (0: no pacing, the servers
    run at their real speed).  ``seed``: seeds the per-step latency draws (step ``s`` uses
    ``numpy.random.default_rng([seed, s])``).  ``latency``: ``"shifted_exp"`` (MATH.md §2) or a
    callable ``f(rng, K, mu, N)`` returning the ``K`` Map latencies in time units.
    ``address``/``num_cpus``: used only when Ray is not yet initialised (``None``: an embedded
    local Ray, shut down by :meth:`shutdown`).  Bad input raises ``ValueError``/``TypeError``
    naming the parameter, the value and the rule, before any server starts.

    Attributes: ``K``, ``mu`` (a Fraction), ``q``, ``m``, ``n``, ``field``, ``design`` (the
    :class:`~elastic_coded.schemes.unified.StorageDesign`), ``time_scale`` and ``latency``
    (both may be changed between steps), ``reports`` (one :class:`UnifiedReport` per step).
    :meth:`redesign` and :meth:`load` store ``A`` anew (another ``q``, or another matrix, ``K``,
    ``mu`` or field) on the same servers.  A context manager: leaving it calls :meth:`shutdown`.
    """

    def __init__(self, A, *, K: int, mu: MuLike, q: int, field: Field | str = "gf(2^8)",
                 time_scale: float = 0.05, seed: int = 0,
                 latency: str | LatencyModel = "shifted_exp", address: str | None = None,
                 num_cpus: int | None = None):
        self.field = make_field(field)
        A = _check_matrix(self.field, A)
        if isinstance(time_scale, bool) or not isinstance(time_scale, (int, float, np.number)) \
                or not (math.isfinite(time_scale) and time_scale >= 0):
            raise ValueError(f"time_scale: {time_scale!r} must be a finite number >= 0 "
                             f"(seconds per time unit of the latency model)")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed: {seed!r} must be an int >= 0")
        if not (latency == "shifted_exp" if isinstance(latency, str) else callable(latency)):
            raise ValueError(f"latency: {latency!r} must be 'shifted_exp' or a callable "
                             f"f(rng, K, mu, N) returning K latencies")
        # the pure module checks K, mu, q and the batch divisibility of m
        self.design: StorageDesign = storage_design(K, mu, q, A.shape[0], self.field)
        self.K, self.mu, self.q = self.design.K, self.design.mu, self.design.q
        self.m, self.n = A.shape
        self.time_scale = float(time_scale)
        self.seed = int(seed)
        self.latency = latency
        self.reports: list[UnifiedReport] = []
        self._step = 0
        self._plans: dict[tuple[tuple[int, ...], int], ShufflePlan] = {}
        self._closed = False
        self._pool: list = []  # server actors; the first K are the cluster's servers
        self._version = -1  # the storage the servers hold (checked at every Map)

        self._own_ray = ensure_ray(address, num_cpus)
        self._A = A
        try:
            self._store(self.design, A)
        except BaseException:
            self.shutdown()
            raise

    @property
    def _servers(self) -> list:
        return self._pool[:self.design.K]

    def _store(self, design: StorageDesign, A: np.ndarray) -> None:
        """Encode ``A`` on the driver and send each of the ``K`` servers its rows, once, by
        reference (starting servers if there are fewer than ``K``; servers beyond ``K`` stay
        idle and forget what they stored)."""
        stored = encode_storage(design, A)
        while len(self._pool) < design.K:
            self._pool.append(UnifiedServer.remote(len(self._pool)))
        self._version += 1
        design_ref = ray.put(design)
        calls = [s.store.remote(design_ref, ray.put(rows), self._version)
                 for s, rows in zip(self._pool, stored)]
        calls += [s.drop.remote() for s in self._pool[design.K:]]
        ray.get(calls)

    def redesign(self, q: int) -> None:
        """Store ``A`` anew on the same servers, designed for waiting on ``q`` servers (the
        storage design depends on ``q``); the following steps wait for the fastest ``q``."""
        self.load(self._A, q=q)

    def load(self, A, *, K: int | None = None, mu: MuLike | None = None, q: int | None = None,
             field: Field | str | None = None) -> None:
        """Store a new matrix ``A`` on the servers, replacing what they held; ``K``, ``mu``,
        ``q`` and ``field`` default to the current ones.  Validated like the constructor before
        anything is sent.  A larger ``K`` starts servers; with a smaller one the servers beyond
        ``K`` stay idle (kept for a later ``load``) until :meth:`shutdown`."""
        if self._closed:
            raise RuntimeError("UnifiedCluster: already shut down")
        fld = self.field if field is None else make_field(field)
        A = _check_matrix(fld, A)
        design = storage_design(self.K if K is None else K, self.mu if mu is None else mu,
                                self.q if q is None else q, A.shape[0], fld)
        self._store(design, A)
        self.field, self.design = fld, design
        self.K, self.mu, self.q = design.K, design.mu, design.q
        self.m, self.n = A.shape
        self._A = A
        self._plans.clear()

    def servers_info(self) -> list[dict]:
        """Each server's ``{"server", "rows", "maps_cancelled"}`` (Map calls cancelled so far)."""
        return ray.get([s.ping.remote() for s in self._servers])

    # -- a step -------------------------------------------------------------------------------
    def multiply(self, X, *, fastest: Iterable[int] | None = None) -> np.ndarray:
        """``A @ X`` (``X``: ``n x N``, one input per column; a 1-D ``X`` is one input).

        ``fastest``: force the fastest set ``Q`` (``q`` server ids; a test and experiment hook):
        its servers keep their drawn latencies (which order them), the others never finish their
        Map and are cancelled.  The result and the counts do not depend on how ``Q`` came
        about."""
        if self._closed:
            raise RuntimeError("UnifiedCluster: already shut down")
        X = self.field.asarray(X, "X")
        if X.ndim == 1:
            return self.multiply(X[:, None], fastest=fastest)[:, 0]
        if X.ndim != 2 or X.shape[0] != self.n or X.shape[1] < 1:
            raise ValueError(f"X: shape {X.shape} does not fit A {(self.m, self.n)}: X must be "
                             f"n x N with n = {self.n} and N >= 1")
        N = X.shape[1]
        mult = rows_multiple(self.K, self.mu, N, self.q)  # checks q | N
        if self.m % mult:
            raise ValueError(
                f"X: N = {N} inputs do not fit A's m = {self.m} rows: the shuffle segments need "
                f"m to be a multiple of rows_multiple(K, mu, N, q) = {mult}")
        forced = None
        if fastest is not None:
            try:
                forced = [int(k) for k in fastest]
            except (TypeError, ValueError):
                raise TypeError(f"fastest: must be a collection of server ids, got "
                                f"{fastest!r}") from None
            if len(set(forced)) != len(forced) or len(forced) != self.q or \
                    any(not 0 <= k < self.K for k in forced):
                raise ValueError(f"fastest: {fastest!r} must be q = {self.q} distinct server ids "
                                 f"in 0..K-1 = 0..{self.K - 1}")
        lat = self._draw_latencies(N)
        if forced is not None:
            lat = np.where(np.isin(np.arange(self.K), forced), lat, np.inf)
        Y, report = self._run_step(X, N, lat, forced is not None)
        self.reports.append(report)
        self._step += 1
        return Y

    def _draw_latencies(self, N: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, self._step])
        if self.latency == "shifted_exp":
            return sample_map_latencies(self.K, self.mu, N, rng)
        lat = np.asarray(self.latency(rng, self.K, self.mu, N), dtype=np.float64)
        if lat.shape != (self.K,) or not np.all(np.isfinite(lat)) or np.any(lat < 0):
            raise ValueError(f"latency: the model returned {lat!r}; it must return K = {self.K} "
                             f"finite latencies >= 0")
        return lat

    def _plan(self, Q: tuple[int, ...], N: int) -> ShufflePlan:
        key = (Q, N)
        if key not in self._plans:
            plan = shuffle_plan(self.design, Q, N)
            check_shuffle_plan(self.design, plan)
            self._plans[key] = plan
        return self._plans[key]

    def _run_step(self, X: np.ndarray, N: int, lat: np.ndarray, forced: bool):
        step, q = self._step, self.q
        t0 = time.perf_counter()
        # -- Map: all K servers; wait for the fastest q, cancel the rest
        X_ref = ray.put(X)
        pending = {}
        t_map = time.perf_counter()
        for k, server in enumerate(self._servers):
            delay = None if not math.isfinite(lat[k]) else float(lat[k]) * self.time_scale
            pending[server.map.remote(step, X_ref, delay, self._version)] = k
        done: list[dict] = []
        failed: list[int] = []
        try:
            while len(done) < q:
                if len(pending) < q - len(done):
                    raise RuntimeError(
                        f"step {step}: only {len(done) + len(pending)} servers can finish the "
                        f"Map, fewer than q = {q} (failed: {failed})")
                ready, _ = ray.wait(list(pending), num_returns=q - len(done))
                for r in ready:
                    k = pending.pop(r)
                    try:
                        done.append(ray.get(r))
                    except ray.exceptions.RayError as exc:
                        log.warning("step %d: server %d failed in the Map: %s", step, k, exc)
                        failed.append(k)
            map_s = time.perf_counter() - t_map
        finally:
            for r in pending:
                ray.cancel(r)
        done.sort(key=lambda d: (d["finished"], d["elapsed_s"]))
        order = tuple(d["server"] for d in done)
        Q = tuple(sorted(order))
        stragglers = tuple(sorted(set(range(self.K)) - set(Q)))
        D, L = latency_load(self.K, self.mu, N, q)

        # -- Shuffle: each server of Q puts its packets; each receiver fetches and decodes
        t_shuffle = time.perf_counter()
        plan = self._plan(Q, N)
        plan_ref = ray.put(plan)
        sent_lists = ray.get([self._servers[k].send.remote(step, plan_ref) for k in Q])
        inbox: dict[int, list] = {k: [] for k in Q}
        values_sent = 0
        packets = 0
        by_round: dict[int, int] = {}
        for sent in sent_lists:
            for i, ref, size in sent:
                t = plan.transmissions[i]
                values_sent += size
                packets += 1
                by_round[t.round] = by_round.get(t.round, 0) + size
                for k in t.receivers:
                    inbox[k].append((i, ref))
        received = ray.get([self._servers[k].receive.remote(step, inbox[k]) for k in Q])
        del sent_lists, inbox
        shuffle_s = time.perf_counter() - t_shuffle

        # -- Reduce: each server of Q decodes its N/q outputs; the driver gathers them
        t_reduce = time.perf_counter()
        Y = self.field.zeros((self.m, N))
        for outs, vals in ray.get([self._servers[k].reduce.remote(step) for k in Q]):
            Y[:, list(outs)] = vals
        reduce_s = time.perf_counter() - t_reduce
        total_s = time.perf_counter() - t0

        load = Fraction(values_sent, self.m)
        report = UnifiedReport(
            step=step, q=q, fastest=order, stragglers=stragglers, forced=forced,
            latencies=tuple(float(v) for v in lat),
            model_latency=float(np.partition(lat, q - 1)[q - 1]),
            map_latency_s=map_s,
            map_latency_units=map_s / self.time_scale if self.time_scale > 0 else math.nan,
            D=D, values_sent=values_sent, load=load, L=L, load_matches=load == L,
            packets=packets,
            values_by_round=tuple(sorted(by_round.items(), key=lambda kv: -kv[0])),
            values_received=int(sum(received)), shuffle_s=shuffle_s, reduce_s=reduce_s,
            total_s=total_s)
        if not report.load_matches:
            log.warning("step %d: measured load %s differs from L(q) = %s", step, load, L)
        return Y, report

    # -- lifecycle ----------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the servers (and the embedded Ray, if this cluster started it)."""
        if self._closed:
            return
        self._closed = True
        pool, self._pool = self._pool, []
        stop(pool, self._own_ray)

    def __enter__(self) -> "UnifiedCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"<UnifiedCluster {self.m}x{self.n} over {self.field.name}: K={self.K}, "
                f"mu={self.mu}, q={self.q}, steps={self._step}>")
