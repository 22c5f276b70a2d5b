"""The worker actor: holds its uncoded rows ``Z_n`` of ``A`` and computes ``H_{g,n}`` (eq. 3).

An async actor, so that a running step can be cancelled (``ray.cancel``) and a ping is answered
while it computes.  For experiments on one machine it can emulate a speed: the work of a step is
paced to ``work / speed * time_scale`` seconds, ``work`` being the products it computed over
those of the whole ``A @ B`` (``rows * cols / (q * r)``), times a straggling factor; it can also pause or crash in the middle of a step.  All of it is driven by the arguments
of :meth:`Worker.compute`, so scripts and seeds decide it, never the worker.
"""

from __future__ import annotations

import asyncio
import os
import time

import numpy as np
import ray

from ..algebra.fields import field as make_field

__all__ = ["Worker"]


@ray.remote(num_cpus=0)
class Worker:
    """One machine of the cluster."""

    def __init__(self, machine_id: str, field_spec, speed: float = 1.0, time_scale: float = 0.0,
                 num_rows: int = 1):
        self.id = machine_id
        self.F = make_field(field_spec)
        self.speed = float(speed)
        self.time_scale = float(time_scale)
        self.num_rows = int(num_rows)
        self.chunks: list[tuple[int, int, np.ndarray]] = []  # (start, stop, rows)

    async def ping(self) -> dict:
        return {"id": self.id, "node": ray.get_runtime_context().get_node_id(),
                "rows": self.stored_rows()}

    def stored_rows(self) -> int:
        return sum(b - a for a, b, _ in self.chunks)

    # -- storage ---------------------------------------------------------------------------
    async def store_chunks(self, ranges, chunk_starts, *chunks) -> int:
        """Keep rows ``ranges`` (list of ``(start, stop)``) cut from the row chunks of ``A``
        (``chunks[i]`` holds rows ``chunk_starts[i]..``).  Returns rows now stored."""
        for a, b in ranges:
            parts = []
            for s0, ch in zip(chunk_starts, chunks):
                s1 = s0 + ch.shape[0]
                lo, hi = max(a, s0), min(b, s1)
                if lo < hi:
                    parts.append(np.asarray(ch[lo - s0:hi - s0]))
            rows = np.concatenate(parts) if len(parts) > 1 else np.array(parts[0], copy=True)
            if rows.shape[0] != b - a:
                raise ValueError(f"store: rows {a}:{b} not covered by the chunks sent")
            self.chunks.append((a, b, self.F.asarray(rows, "A")))
        self._merge()
        return self.stored_rows()

    async def store_npy(self, ranges, path: str) -> int:
        """Keep rows ``ranges`` read from the ``.npy`` file at ``path`` (memory-mapped)."""
        A = np.load(path, mmap_mode="r")
        for a, b in ranges:
            self.chunks.append((a, b, self.F.asarray(np.array(A[a:b]), "A")))
        self._merge()
        return self.stored_rows()

    def _merge(self) -> None:
        """Keep chunks sorted, disjoint and maximal, so any stored row range is one slice."""
        out: list[tuple[int, int, np.ndarray]] = []
        for a, b, arr in sorted(self.chunks, key=lambda c: c[0]):
            if out and a <= out[-1][1]:
                pa, pb, parr = out[-1]
                if b > pb:
                    out[-1] = (pa, b, np.concatenate([parr, arr[pb - a:]]))
            else:
                out.append((a, b, arr))
        self.chunks = out

    async def keep_only(self, ranges) -> int:
        """Forget every stored row outside ``ranges``."""
        keep = []
        for a, b, arr in self.chunks:
            for c, d in ranges:
                lo, hi = max(a, c), min(b, d)
                if lo < hi:
                    keep.append((lo, hi, arr[lo - a:hi - a].copy()))
        self.chunks = keep
        self._merge()  # adjacent kept ranges become one slice again
        return self.stored_rows()

    def _rows(self, rows) -> np.ndarray:
        a, b = rows
        for s0, s1, arr in self.chunks:
            if s0 <= a and b <= s1:
                return arr[a - s0:b - s0]
        raise KeyError(f"machine {self.id} does not store rows {a}:{b}")

    # -- compute -------------------------------------------------------------------------------
    async def compute(self, step: int, tasks, total_cols: int, slow: float = 1.0,
                      pause: float = 0.0, crash_at: float | None = None, *coded) -> dict:
        """Compute ``tasks`` = ``[(piece, arg, (start, stop), cols), ...]`` on ``coded[arg]``;
        ``total_cols`` is ``r``, the column count of the step's whole ``B``.

        Returns ``{"machine", "step", "results": [H per task, in order], "rows", "work",
        "compute_s", "elapsed_s"}``.  ``crash_at`` in [0, 1]: exit the process after that fraction of the
        paced time.
        """
        t0 = time.perf_counter()
        results = []
        rows_done = 0
        products = 0
        for piece, arg, rows, cols in tasks:
            A_rows = self._rows(rows)
            Bt = coded[arg] if cols is None else coded[arg][:, cols[0]:cols[1]]
            results.append(await asyncio.to_thread(self.F.matmul, A_rows, Bt))
            rows_done += rows[1] - rows[0]
            products += (rows[1] - rows[0]) * Bt.shape[1]
        compute_s = time.perf_counter() - t0
        work = products / (self.num_rows * max(1, total_cols))
        if self.time_scale > 0:
            target = work / self.speed * self.time_scale * slow + pause
        else:
            target = compute_s * slow + pause
        if crash_at is not None:
            try:
                await asyncio.sleep(max(0.0, target * crash_at - (time.perf_counter() - t0)))
            finally:  # a scripted crash happens even if the step no longer needs this result
                os._exit(1)
        await asyncio.sleep(max(0.0, target - (time.perf_counter() - t0)))
        return {"machine": self.id, "step": step, "results": results, "rows": rows_done,
                "work": work, "compute_s": compute_s, "elapsed_s": time.perf_counter() - t0}

    async def exit(self) -> None:
        """Graceful departure."""
        ray.actor.exit_actor()
