"""The controller's I/O with Ray: the :class:`~.storage.Transfer` that
:class:`~.storage.Storage` applies its changes through.

Sources are the matrices machines are sent rows of: the driver's ``A`` (row chunks in the
object store, or a ``.npy`` file each worker reads) and the coded sources a family asks for,
put in the object store in about :data:`CHUNKS` row chunks.  Rows go to a machine through its
handle (``store_chunks``, ``store_npy``, ``keep_only``); a machine whose actor is dead is
returned, with Ray's error noted in :attr:`~.members.Members.why`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping

import numpy as np
import ray

from .hosting import HostPool
from .members import Members

__all__ = ["RayTransfer", "CHUNKS"]

CHUNKS = 64  # a source goes into the object store in about this many row chunks


class RayTransfer:
    """Sources in the object store and rows sent to the members' handles.

    ``sources``: ``{name: ("chunks", starts, [refs]) | ("npy", path)}``; ``field`` reads a
    ``.npy`` source."""

    def __init__(self, sources: dict, field, members: Members, hosts: HostPool):
        self.sources = dict(sources)
        self.F, self.members, self.hosts = field, members, hosts

    # -- sources --------------------------------------------------------------------------------
    def read_source(self, name: str) -> np.ndarray:
        """The whole matrix of a source (the driver's copy, through the object store)."""
        src = self.sources[name]
        if src[0] == "npy":
            return self.F.asarray(np.load(src[1]), "A")
        return np.concatenate(ray.get(list(src[2])), axis=0)

    def put_source(self, name: str, matrix: np.ndarray) -> None:
        step = max(1, math.ceil(matrix.shape[0] / CHUNKS))
        starts = list(range(0, matrix.shape[0], step))
        self.sources[name] = ("chunks", starts, [ray.put(matrix[s:s + step]) for s in starts])

    def drop_source(self, name: str) -> None:
        self.sources.pop(name, None)

    def has_source(self, name: str) -> bool:
        return name in self.sources

    def release(self, machine: str) -> None:
        self.hosts.release(machine)

    # -- rows -----------------------------------------------------------------------------------
    def _store_call(self, h, source: str, ranges: list):
        src = self.sources[source]
        if src[0] == "npy":
            return h.store_npy.remote(source, ranges, src[1])
        starts, refs = src[1], src[2]
        ends = list(starts[1:]) + [math.inf]
        need = [i for i in range(len(starts))
                if any(a < ends[i] and starts[i] < b for a, b in ranges)]
        return h.store_chunks.remote(source, ranges, [starts[i] for i in need],
                                     *[refs[i] for i in need])

    async def store(self, moves) -> list:
        """Send rows ``[(source, start, stop, machine), ...]`` to the machines present.
        Returns the machines found dead on the way, sorted (the caller re-plans storage
        without them); any other error is raised."""
        by: dict = {}
        for src, a, b, m in moves:
            by.setdefault((m, src), []).append((a, b))
        calls, who = [], []
        for (m, src), ranges in by.items():
            if m in self.members:
                calls.append(self._store_call(self.members[m].handle, src, ranges))
                who.append(m)
        dead = []
        for m, out in zip(who, await asyncio.gather(*calls, return_exceptions=True)):
            if isinstance(out, ray.exceptions.RayActorError):
                self.members.why[m] = str(out).splitlines()[-1][:300]
                dead.append(m)
            elif isinstance(out, BaseException):
                raise out
        return sorted(set(dead))

    async def keep_only(self, shrink: Mapping) -> None:
        calls = [self.members[m].handle.keep_only.remote(src, list(rs))
                 for m, by in shrink.items() if m in self.members for src, rs in by.items()]
        await asyncio.gather(*calls, return_exceptions=True)
