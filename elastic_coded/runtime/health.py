"""The controller's watch over its workers: pings, and the metrics it reports to Ray."""

from __future__ import annotations

import asyncio

import ray

from .drain import is_preempted

__all__ = ["ping", "step_metrics"]


async def ping(handle, timeout: float):
    """``("ok", info)``, ``("dead", preempted)`` or ``("slow", None)``: ``preempted`` says the
    actor's node was taken after a preemption notice (:func:`~.drain.is_preempted`)."""
    async def once():
        return await handle.ping.remote()
    try:
        return "ok", await asyncio.wait_for(once(), timeout)
    except asyncio.TimeoutError:
        return "slow", None
    except ray.exceptions.RayError as exc:
        return "dead", is_preempted(exc)


def step_metrics() -> dict:
    """Ray metrics (``ray.util.metrics``) of the steps: time, decode time, stragglers, machines."""
    from ray.util import metrics

    return {
        "step": metrics.Histogram("elastic_coded_step_seconds", "Step time",
                                  boundaries=[0.01, 0.05, 0.1, 0.5, 1, 5, 10],
                                  tag_keys=("policy",)),
        "decode": metrics.Histogram("elastic_coded_decode_seconds", "Decode time",
                                    boundaries=[0.001, 0.01, 0.1, 1], tag_keys=("policy",)),
        "stragglers": metrics.Counter("elastic_coded_stragglers", "Straggling results",
                                      tag_keys=("policy",)),
        "machines": metrics.Gauge("elastic_coded_machines", "Machines present"),
    }
