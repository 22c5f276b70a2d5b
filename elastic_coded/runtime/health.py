"""The controller's watch over its workers: pings, the workers auto mode starts on each Ray
node, and the metrics it reports to Ray."""

from __future__ import annotations

import asyncio

import numpy as np
import ray

from ..machines import MachineSpec
from .drain import is_preempted
from .worker import MachineDied

__all__ = ["ping", "ping_process", "auto_specs", "auto_count", "step_metrics"]


async def ping(handle, timeout: float):
    """``("ok", info)``, ``("dead", preempted)`` (``"gone"``: its worker process died) or
    ``("slow", None)``: ``preempted`` says the
    actor's node was taken after a preemption notice (:func:`~.drain.is_preempted`)."""
    async def once():
        return await handle.ping.remote()
    try:
        return "ok", await asyncio.wait_for(once(), timeout)
    except asyncio.TimeoutError:
        return "slow", None
    except ray.exceptions.RayError as exc:  # "gone": the machine's worker process died
        gone = hasattr(handle, "host") and not isinstance(exc, MachineDied)
        return ("gone" if gone else "dead"), is_preempted(exc)


async def ping_process(host, machines: tuple, timeout: float) -> dict:
    """:func:`ping` for every machine of one worker process in one call: ``{machine: answer}``
    (a machine the process no longer hosts alive is ``("dead", False)``; a slow process
    answers so for all of them, and a dead one ``("gone", preempted)`` for all of them: their
    process died, :mod:`.restart`)."""
    async def once():
        return await host.ping_many.remote(tuple(machines))
    try:
        got = await asyncio.wait_for(once(), timeout)
    except asyncio.TimeoutError:
        return {m: ("slow", None) for m in machines}
    except ray.exceptions.RayError as exc:
        gone = ("gone", is_preempted(exc))
        return {m: gone for m in machines}
    return {m: ("dead", False) if got.get(m) is None else ("ok", got[m]) for m in machines}


def auto_specs(members: dict, per: float, storage: float, count: int, draining: set) -> list:
    """Auto mode: one worker per ``per`` CPUs of every alive Ray node not ``draining``, for
    the CPUs its ``members`` do not cover yet, named ``node{count + 1}``, ``node{count + 2}``..."""
    have: dict = {}
    for m in members.values():
        if m.node is not None:
            have[m.node] = have.get(m.node, 0) + 1
    speed = float(np.mean([m.speed_est for m in members.values()])) if members else 1.0
    out: list = []
    for node in ray.nodes():
        if not node.get("Alive") or node["NodeID"] in draining:
            continue
        nid = node["NodeID"]
        want = max(1, int(node.get("Resources", {}).get("CPU", 1) // per))
        for _ in range(want - have.get(nid, 0)):
            out.append(MachineSpec(f"node{count + len(out) + 1}", speed, storage, nid))
    return out


def auto_count(machines) -> int:
    """The highest ``k`` of the ids ``node{k}`` among ``machines`` (0 if none): a controller
    that takes over names the next auto worker after it."""
    return max([0] + [int(m[4:]) for m in machines if m.startswith("node") and m[4:].isdigit()])


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
