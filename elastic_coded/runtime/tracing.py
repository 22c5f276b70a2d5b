"""The cluster's side of the trace (:mod:`.trace`): where each machine runs, its process's
clock offset (measured once per process), and one :class:`~.trace.StepTimes` per step."""

from __future__ import annotations

from .hosting import clock_offset
from .restart import process_of
from .trace import StepTimes, Trace

__all__ = ["Tracer", "Tracing"]


class Tracer:
    """A :class:`~.trace.Trace` fed by one cluster's steps."""

    def __init__(self, path):
        self.trace = Trace(path)
        self.where: dict = {}    # machine -> (process key, label)
        self.offsets: dict = {}  # process key -> its clock minus the driver's (s)

    def _locate(self, handles: dict, specs: dict) -> None:
        for m, h in handles.items():
            if m in self.where:
                continue
            key = process_of(h)
            key = key if isinstance(key, str) else f"machine {m}"
            if key not in self.offsets:
                self.offsets[key] = clock_offset(h)
            node = getattr(specs.get(m), "node", None)
            n = list(self.offsets).index(key) + 1
            label = f"worker process {n}" + (f" on node {node[:8]}" if node else "")
            self.where[m] = (key, label)

    def step(self, report, out, marks: tuple, handles: dict, specs: dict, mode) -> None:
        """Write one step: ``marks`` its start, plan, run, verify and end times."""
        self._locate(handles, specs)
        g = out.gather
        start, prepared, ran, verified, end = marks
        self.trace.step(report, StepTimes(start, prepared, ran, verified, end, calls=tuple(g.calls),
                                          gather=(g.t_start, g.t_end), where=self.where,
                                          offsets=self.offsets, mode=mode))

    def close(self) -> None:
        self.trace.close()


class Tracing:
    """What :meth:`ElasticCluster.trace <elastic_coded.ElasticCluster.trace>` returns: the
    trace being written (``path``), ended by :meth:`close` or at the end of a ``with``."""

    def __init__(self, cluster):
        self._cluster, self._tracer = cluster, cluster._tracer
        self.path = self._tracer.trace.path

    def close(self) -> None:
        self._tracer.close()
        if self._cluster._tracer is self._tracer:
            self._cluster._tracer = None

    def __enter__(self) -> Tracing:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
