"""One machine of the cluster, for every scheme: it holds row ranges of *sources* (``A``, or a
coded matrix built from it) and multiplies them by a step's inputs
(:class:`~elastic_coded.schemes.wire.Call`). A :class:`Machine` lives in a worker process
(:class:`~.hosting.Worker`, a Ray actor) with at most ``machines_per_process`` others; the driver
and controller reach it through a :class:`~.hosting.MachineHandle`.

For the unified framework it also keeps a Map result between the phases of a step and builds,
receives and reduces coded-multicast packets with the pure functions of
:mod:`elastic_coded.families.unified`.

Its methods are coroutines run by the process's event loop, so that a running step can be
cancelled (``ray.cancel``) and a ping is answered while it computes.  A crash (scripted, or
:meth:`die`) ends the machine, not the process: its rows are dropped and every call of it,
running or later, raises :class:`MachineDied`, as a dead actor's calls raise
``ActorDiedError``.  Emulated speeds and scripted crashes are driven by the call's arguments
(see :class:`~elastic_coded.schemes.wire.Call`), so scripts and seeds decide them, never the
worker.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import ray

from ..algebra.fields import field as make_field
from ..algebra.sparse import is_sparse, row_view, stack_rows, take_rows
from ..errors import ArgumentError, InternalError, NotStored
from ..schemes.wire import Call, CallResult, packed_result, unpacked

if TYPE_CHECKING:
    from ..algebra.fields import BinaryExtField, PrimeField

__all__ = ["Machine", "MachineDied"]


class MachineDied(ray.exceptions.ActorDiedError):
    """A machine that crashed or left: what its calls raise.  An ``ActorDiedError`` (callers
    treat it as a dead actor's error), naming the machine; ``preempted`` is ``False``."""

    def __init__(self, machine: str, actor_id: str | None = None, why: str = "crashed"):
        # Ray's own default for actor_id is None (its annotation says str)
        ray.exceptions.RayActorError.__init__(
            self, actor_id, f"machine {machine!r} {why}: its calls cannot run")  # type: ignore[arg-type]
        self.machine, self.why = machine, why

    def __reduce__(self):
        return (MachineDied, (self.machine, self.actor_id, self.why))


INLINE_PRODUCTS = 1 << 17
"""Multiply-adds below which a task is computed on the event loop, not in a thread."""


def _alive(method):
    """A machine's call: raises :class:`MachineDied` once the machine has ended."""
    @functools.wraps(method)
    async def run(self, *args):
        self.check_alive()
        return await method(self, *args)
    return run


def _context(what: str) -> str | None:
    """``get_actor_id`` or ``get_node_id`` of Ray's runtime context; ``None`` outside Ray (unit
    tests).  Never starts Ray: asking for the runtime context before ``ray.init`` would start
    one (or connect to whatever cluster the host last ran, and wait on its GCS when that one
    is gone)."""
    if not ray.is_initialized():
        return None
    try:
        return getattr(ray.get_runtime_context(), what)()
    except Exception:  # outside an actor
        return None


def _actor_id() -> str | None:
    return _context("get_actor_id")


class Machine:
    """One machine of the cluster."""

    def __init__(self, machine_id: str, field_spec, speed: float = 1.0, time_scale: float = 0.0):
        self.id = machine_id
        self.F = make_field(field_spec)
        self.speed = float(speed)
        self.time_scale = float(time_scale)
        self.stores: dict[str, list[tuple[int, int, np.ndarray]]] = {}  # source -> chunks
        self._kept: dict[int, np.ndarray] = {}     # step -> Map result (unified)
        self._got: dict[int, dict] = {}            # step -> values received (unified)
        self._warm = False
        self._cpu = asyncio.Lock()  # one call computes at a time, in arrival order (FIFO)
        self._lie: frozenset = frozenset()  # steps whose results are corrupted (churn scripts)
        self._died: asyncio.Event | None = None  # set when the machine crashes or leaves
        self.dead: str | None = None             # why it ended ("crashed", "left")

    # -- life ----------------------------------------------------------------------------------
    def die(self, why: str = "crashed") -> None:
        """End the machine: its rows are dropped, its running calls raise :class:`MachineDied`
        at their next pause, and so does every later call."""
        if self.dead is None:
            self.dead = why
            self.stores.clear()
            self._kept.clear()
            self._got.clear()
            if self._died is not None:
                self._died.set()

    def died_error(self) -> MachineDied:
        return MachineDied(self.id, _actor_id(), self.dead or "crashed")

    def check_alive(self) -> None:
        if self.dead is not None:
            raise self.died_error()

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the machine dies meanwhile (then raise)."""
        self.check_alive()
        if seconds > 0:
            if self._died is None:
                self._died = asyncio.Event()
            try:
                await asyncio.wait_for(self._died.wait(), seconds)
            except asyncio.TimeoutError:
                return
            self.check_alive()

    @_alive
    async def ping(self) -> dict:
        return {"id": self.id, "node": _context("get_node_id"),
                "rows": self.stored_rows()}

    def stored_rows(self, source: str | None = None) -> int:
        srcs = self.stores if source is None else {source: self.stores.get(source, [])}
        return sum(b - a for chunks in srcs.values() for a, b, _ in chunks)

    # -- storage ---------------------------------------------------------------------------
    @_alive
    async def store_chunks(self, source: str, ranges, chunk_starts, *chunks) -> int:
        """Keep rows ``ranges`` (``[(start, stop), ...]``) of ``source``, cut from its row
        chunks (``chunks[i]`` holds rows ``chunk_starts[i]..``).  Returns rows now stored."""
        for a, b in ranges:
            parts = []
            for s0, ch in zip(chunk_starts, chunks):
                lo, hi = max(a, s0), min(b, s0 + ch.shape[0])
                if lo < hi:
                    parts.append(take_rows(ch, lo - s0, hi - s0))
            rows = stack_rows(parts)
            if rows.shape[0] != b - a:
                raise ArgumentError(f"store: rows {a}:{b} of {source} not covered by the "
                                    "chunks sent")
            self.stores.setdefault(source, []).append((a, b, self.F.asarray(rows, "A")))
        self._merge(source)
        await self._warm_up()
        return self.stored_rows(source)

    async def _warm_up(self) -> None:
        """Run the field's arithmetic once (library imports, compiled kernels) when rows first
        arrive, so that the first step's compute times are the field's, not its start-up."""
        if not self._warm:
            a, b, arr = next(iter(self.stores.values()))[0]
            await asyncio.to_thread(self.F.matmul, arr[:1], self.F.zeros((arr.shape[1], 1)))
            self._warm = True

    @_alive
    async def store_npy(self, source: str, ranges, path: str) -> int:
        """Keep rows ``ranges`` of ``A`` read from the ``.npy`` file at ``path`` (memory-mapped)."""
        A = np.load(path, mmap_mode="r")
        for a, b in ranges:
            self.stores.setdefault(source, []).append((a, b, self.F.asarray(np.array(A[a:b]), "A")))
        self._merge(source)
        await self._warm_up()
        return self.stored_rows(source)

    def _merge(self, source: str) -> None:
        """Keep chunks sorted, disjoint and maximal, so any stored row range is one slice."""
        out: list[tuple[int, int, np.ndarray]] = []
        for a, b, arr in sorted(self.stores.get(source, []), key=lambda c: c[0]):
            if out and a <= out[-1][1]:
                pa, pb, parr = out[-1]
                if b > pb:
                    out[-1] = (pa, b, stack_rows([parr, arr[pb - a:]]))
            else:
                out.append((a, b, arr))
        self.stores[source] = out

    @_alive
    async def keep_only(self, source: str, ranges) -> int:
        """Forget every stored row of ``source`` outside ``ranges`` (all of it when empty)."""
        keep = []
        for a, b, arr in self.stores.get(source, []):
            for c, d in ranges:
                lo, hi = max(a, c), min(b, d)
                if lo < hi:
                    keep.append((lo, hi, arr[lo - a:hi - a].copy()))
        self.stores[source] = keep
        self._merge(source)  # adjacent kept ranges become one slice again
        if not self.stores[source]:
            del self.stores[source]
        return self.stored_rows(source)

    @_alive
    async def drop_sources(self, keep: tuple) -> None:
        """Forget every source not named in ``keep`` (a redesigned coded storage)."""
        for s in [s for s in self.stores if s not in keep]:
            del self.stores[s]

    def _rows(self, source: str, rows) -> Any:   # a dense block's rows or a CSR block's
        a, b = rows
        for s0, s1, arr in self.stores.get(source, []):
            if s0 <= a and b <= s1:
                return row_view(arr, a - s0, b - s0)
        raise NotStored(f"machine {self.id} does not store rows {a}:{b} of {source}")

    # -- compute -------------------------------------------------------------------------------
    @_alive
    async def lie(self, steps) -> None:
        """Return wrong results in ``steps`` (the churn script's ``corrupt`` events): every
        result of a call of those steps gets a nonzero perturbation after it is computed."""
        self._lie = frozenset(int(s) for s in steps)

    def _perturb(self, H: np.ndarray, step: int, i: int) -> np.ndarray:
        """``H`` plus a nonzero change of one entry (seeded by machine, step and task): a random
        nonzero field element, or ``1e-6 max(1, max |H|)`` in the reals."""
        rng = np.random.default_rng([step, i, *self.id.encode()])
        out = np.array(H, copy=True)
        at = tuple(int(rng.integers(n)) for n in out.shape)
        if self.F.exact:
            order = cast("PrimeField | BinaryExtField", self.F).order   # an exact field's
            delta = np.asarray([rng.integers(1, min(order, 2**62))], dtype=out.dtype)
            out[at] = self.F.add(np.asarray([out[at]], dtype=out.dtype), delta)[0]
        else:
            out[at] += 1e-6 * max(1.0, float(np.max(np.abs(out))))
        return out

    async def compute(self, call: Call, *inputs) -> CallResult:
        """Run ``call.tasks`` on ``inputs`` (see :class:`~elastic_coded.schemes.wire.Call`).

        Calls queue for the machine: one computes (and is paced) at a time, in arrival order, so
        a machine with two calls in flight takes the time of both, as a real one would.  The
        times reported start when the call starts computing."""
        return await self.compute_on(call, inputs)

    async def compute_packed(self, payload: bytes, *refs):
        """:meth:`compute` of a call packed with its inputs
        (:func:`~elastic_coded.schemes.wire.packed`; ``refs``: those sent by reference); its
        result comes back packed too when small (:func:`~elastic_coded.schemes.wire.
        packed_result`)."""
        call, inputs = unpacked(payload, refs)
        return packed_result(await self.compute_on(call, inputs))

    async def compute_on(self, call: Call, inputs) -> CallResult:
        """:meth:`compute` with the inputs indexed by a task's ``arg`` (a sequence, or a
        mapping from the ``arg`` s the call uses)."""
        async with self._cpu:
            self.check_alive()
            return await self._compute(call, inputs)

    async def _compute(self, call: Call, inputs) -> CallResult:
        t0 = time.perf_counter()
        results = []
        rows_done = products = 0
        for t in call.tasks:
            A_rows = self._rows(t.source, t.rows)
            X = inputs[t.arg] if t.cols is None else inputs[t.arg][:, t.cols[0]:t.cols[1]]
            if A_rows.size * X.shape[1] <= INLINE_PRODUCTS:  # a thread's hop costs more
                results.append(self.F.matmul(A_rows, X))
            else:  # off the event loop: the process's other machines keep their pace
                results.append(await asyncio.to_thread(self.F.matmul, A_rows, X))
            self.check_alive()
            rows_done += t.rows[1] - t.rows[0]
            products += (A_rows.nnz if is_sparse(A_rows) else A_rows.shape[0]) * X.shape[1]
        if call.step in self._lie:
            results = [self._perturb(H, call.step, i) for i, H in enumerate(results)]
        compute_s = time.perf_counter() - t0
        work = products / max(1, call.total_products)
        paced = True
        if call.pace_s is not None:
            target = call.pace_s
        elif self.time_scale > 0:
            target = work / self.speed * self.time_scale * call.slow
        else:
            target, paced = compute_s * call.slow, call.slow != 1.0
        if call.crash_at is not None:
            try:
                await self._pause(target * call.crash_at - (time.perf_counter() - t0))
            except asyncio.CancelledError:  # a scripted crash happens even if the step no
                self.die()                  # longer needs this result
                raise
            self.die()  # ends without answering: every caller sees it dead, as after a crash
            raise self.died_error()
        await self._pause(target - (time.perf_counter() - t0))
        if call.keep:
            self._forget_other_steps(call.step)
            self._kept[call.step] = (np.concatenate(results, axis=0) if len(results) > 1
                                     else results[0])
            results = []
        return CallResult(self.id, call.step, tuple(results), rows_done, products, work,
                          compute_s, time.perf_counter() - t0, time.time(),
                          target if paced else None)

    # -- unified framework: exchange phases (MATH.md §2) ---------------------------------------
    def _forget_other_steps(self, step: int) -> None:
        for state in (self._kept, self._got):
            for s in [s for s in state if s != step]:
                del state[s]

    def _kept_map(self, step: int) -> np.ndarray:
        try:
            return self._kept[step]
        except KeyError:
            raise InternalError(f"machine {self.id}: no Map result for step {step}") from None

    @_alive
    async def shuffle_send(self, step: int, design, plan, k: int) -> list:
        """Build and put (once each) the packets server ``k`` (this machine) sends in ``plan``.
        Returns ``[(transmission index, ObjectRef, values in the packet), ...]``."""
        from ..families.unified import encode_packet

        own = self._kept_map(step)
        self._got[step] = {}
        out = []
        for i, t in enumerate(plan.transmissions):
            if t.sender == k:
                packet = encode_packet(design, t, own)
                out.append((i, ray.put(packet), int(np.asarray(packet).size)))
        return out

    @_alive
    async def shuffle_receive(self, step: int, design, plan, k: int, packets: list) -> int:
        """Fetch the packets ``[(transmission index, ObjectRef), ...]`` meant for server ``k``
        and decode them.  Returns the number of values recovered."""
        from ..families.unified import receive_packet

        own = self._kept_map(step)
        arrays = await asyncio.gather(*[ref for _, ref in packets])
        got = self._got.setdefault(step, {})
        return sum(receive_packet(design, plan.transmissions[i], k, packet, own, got)
                   for (i, _), packet in zip(packets, arrays))

    @_alive
    async def reduce(self, step: int, design, plan, k: int):
        """Server ``k``'s Reduce: ``(outputs, m x len(outputs) values)``; forgets the values
        received (the Map result is kept until the next step's Map)."""
        from ..families.unified import reduce_server

        own = self._kept_map(step)
        Y = await asyncio.to_thread(reduce_server, design, plan, k, own, self._got.get(step, {}))
        self._got.pop(step, None)  # the Map result stays until the next Map, for verification
        return plan.outputs_of(k), Y

    @_alive
    async def map_result(self, step: int) -> np.ndarray:
        """The Map result kept for ``step`` (the driver checks it when a product fails)."""
        return self._kept_map(step)

    async def exit(self) -> None:
        """Graceful departure: the machine ends (its process stays for the others in it)."""
        self.die("left")
