"""The plain-Ray floor and the real faults of :mod:`bench_real`: a matrix in row blocks on
plain Ray actors, and a process stopped, paused, killed or sharing its core with a busy one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import numpy as np

__all__ = ["floor_start", "floor_step", "pid_of", "Straggler", "Hog"]

# -- plain Ray: the floor ------------------------------------------------------------------------

def _floor_actor():
    import ray

    @ray.remote(num_cpus=0)
    class Block:
        def __init__(self, rows):
            self.rows = rows

        def mul(self, x):
            return self.rows @ x

    return Block


def floor_start(A, n: int) -> list:
    Block = _floor_actor()
    cuts = np.linspace(0, A.shape[0], n + 1).astype(int)
    return [Block.remote(A[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]


def floor_step(actors: list, x):
    import ray

    ref = ray.put(x)
    return np.concatenate(ray.get([a.mul.remote(ref) for a in actors]), axis=0)


# -- real stragglers -------------------------------------------------------------------------------

def pid_of(actor) -> int:
    import ray

    return int(ray.get(actor.__ray_call__.remote(lambda self: os.getpid())))


class Straggler:
    """A scenario's real fault on one process: around each step (:meth:`before` as it starts,
    :meth:`after` once it returned: ``stop300``, ``kill``) or throughout (:meth:`start`,
    :meth:`stop`: ``duty50``)."""

    def __init__(self, kind: str, pid: int):
        self.kind, self.pid = kind, pid
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()

    def _signal(self, sig) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def start(self) -> None:
        if self.kind == "duty50":
            self._thread = threading.Thread(target=self._duty, daemon=True)
            self._thread.start()

    def _duty(self) -> None:
        while not self._halt.is_set():
            self._signal(signal.SIGSTOP)
            self._halt.wait(0.04)
            self._signal(signal.SIGCONT)
            self._halt.wait(0.04)

    def before(self) -> None:
        if self.kind == "stop300":
            self._signal(signal.SIGSTOP)
            self._thread = threading.Timer(0.3, self._signal, (signal.SIGCONT,))
            self._thread.start()
        elif self.kind == "kill":
            threading.Timer(0.005, self._signal, (signal.SIGKILL,)).start()

    def after(self) -> None:
        if self.kind == "stop300" and self._thread is not None:
            self._thread.join()  # the process runs again before the next step

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()
        if self.kind != "kill":
            self._signal(signal.SIGCONT)


class Hog:
    """A busy process pinned to one core, with the ``victims`` pinned to it too (each runs
    only during its own runner's steps, so each shares the core with the hog alone)."""

    def __init__(self, victims):
        self.victims = sorted(set(victims))
        self.all = os.sched_getaffinity(0)
        core = {min(self.all)}
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for pid in [self.proc.pid] + self.victims:
            os.sched_setaffinity(pid, core)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pid in self.victims:
            try:
                os.sched_setaffinity(pid, self.all)
            except ProcessLookupError:
                pass
