"""The dynamic scheduler a Ray user writes by hand, in plain Ray, none of this project's
runtime: a check that the runtime's ``dynamic`` policy is as strong as the real thing.

Plain actors hold the rows the placement gives them and follow the same emulation rule as the
runtime's workers (a call takes ``work / speed * time_scale * slow`` seconds, one at a time per
machine).  The driver cuts the rows into equal chunks (cut at the placement's blocks), keeps
two chunks in flight per machine, each machine pulling the next chunk among the rows it stores;
once none is left, an idle machine takes a backup copy of the longest-running chunk it stores;
the first copy of each chunk wins and the others are cancelled.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import ray


@ray.remote(num_cpus=0)
class PlainWorker:
    def __init__(self, blocks: list, speed: float, time_scale: float):
        self.blocks = blocks            # [(start, stop, rows)]
        self.speed, self.ts = speed, time_scale
        self.lock = asyncio.Lock()

    async def run(self, a: int, b: int, x, slow: float, total: int):
        async with self.lock:
            t0 = time.perf_counter()
            rows = next(r[a - s:b - s] for s, e, r in self.blocks if s <= a and b <= e)
            y = rows @ x
            target = (b - a) * x.shape[1] / total / self.speed * self.ts * slow
            await asyncio.sleep(max(0.0, target - (time.perf_counter() - t0)))
            return a, y


def start(A: np.ndarray, placement, speeds: dict, time_scale: float) -> dict:
    """One plain actor per machine of ``placement``, holding its rows."""
    out = {}
    for m in placement.machines:
        blocks = [(b.start, b.stop, A[b.start:b.stop]) for b in placement.blocks
                  if m in b.holders]
        out[m] = PlainWorker.remote(blocks, speeds[m], time_scale)
    return out


def chunks_of(placement, n: int) -> list:
    size = -(-placement.num_rows // n)
    cuts = set(range(0, placement.num_rows, size)) | {placement.num_rows}
    cuts |= {b.start for b in placement.blocks} | {b.stop for b in placement.blocks}
    c = sorted(cuts)
    out = []
    for a, b in zip(c, c[1:]):
        holders = [m for m in placement.machines
                   if any(blk.start <= a and b <= blk.stop and m in blk.holders
                          for blk in placement.blocks)]
        out.append((a, b, holders))
    return out


def step(actors: dict, chunks: list, x: np.ndarray, slow: dict, num_rows: int) -> np.ndarray:
    """One ``A @ x`` by pulling chunks, with backup copies at the end."""
    xr = ray.put(x)
    total = num_rows * x.shape[1]
    queue = list(range(len(chunks)))
    done: dict = {}
    running: dict = {}        # ref -> (machine, chunk, sent)
    copied: set = set()

    def busy(m):
        return sum(1 for v in running.values() if v[0] == m)

    def feed(m):
        while busy(m) < 2:
            pick = next((c for c in queue if m in chunks[c][2]), None)
            if pick is not None:
                queue.remove(pick)
            else:
                if queue:
                    return
                late = sorted((t, c) for mm, c, t in running.values()
                              if mm != m and c not in done and c not in copied
                              and m in chunks[c][2]
                              and not any(v[0] == m and v[1] == c for v in running.values()))
                if not late:
                    return
                pick = late[0][1]
                copied.add(pick)
            a, b, _ = chunks[pick]
            ref = actors[m].run.remote(a, b, xr, float(slow.get(m, 1.0)), total)
            running[ref] = (m, pick, time.perf_counter())

    for m in actors:
        feed(m)
    while len(done) < len(chunks):
        [ref], _ = ray.wait(list(running), num_returns=1)
        m, c, _ = running.pop(ref)
        try:
            a, y = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            continue
        if c not in done:
            done[c] = y
            for r2, (m2, c2, _) in list(running.items()):
                if c2 == c:
                    ray.cancel(r2)
                    running.pop(r2)
                    feed(m2)
        feed(m)
    for r in running:
        ray.cancel(r)
    return np.concatenate([done[c] for c in range(len(chunks))], axis=0)
