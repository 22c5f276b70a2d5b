"""Preemption notices: Ray nodes that are draining, and machines lost to a preempted node.

Ray marks a node DRAINING before it takes it away: the autoscaler does so for a spot instance's
preemption notice (up to 120 s ahead on AWS) and for idle termination, and a person can with
``ray drain-node`` or the GCS client's ``drain_node`` (:func:`drain_node`).  The drain carries a
deadline (0: none); Ray schedules nothing new there.  GCS lists the draining nodes
(:func:`draining_nodes`; ``ray.nodes()`` does not show the drain).  A node taken after a
preemption drain's deadline passed dies with the reason ``AUTOSCALER_DRAIN_PREEMPTED``: its
actors' errors carry ``preempted=True`` (:func:`is_preempted`) and ``ray.nodes()`` gives the
reason (:func:`node_states`).

The controller treats a draining machine as a graceful departure announced ahead: it is planned
out at once and its rows are copied to the machines left before its deadline
(:class:`Drains`); its actor stays until its node goes (a step planned before the notice may
still use it) and is stopped after the deadline.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import ray

from ..errors import ClusterError

__all__ = ["draining_nodes", "node_states", "is_preempted", "drain_node", "Drains",
           "PREEMPTED"]

log = logging.getLogger(__name__)

PREEMPTED = 3
"""``ray.nodes()[i]["DeathReason"]`` of a node taken after a preemption drain
(``NodeDeathInfo.AUTOSCALER_DRAIN_PREEMPTED``)."""


def draining_nodes() -> dict:
    """``{node id (hex): deadline}`` of the Ray nodes draining now; the deadline in seconds
    since the epoch, ``inf`` for none.  ``{}`` if GCS does not answer (the next check asks
    again)."""
    try:
        raw = ray._private.state.state.get_draining_nodes()
    except Exception as exc:  # GCS busy or restarting: no notice this time
        log.debug("draining nodes unavailable: %s", exc)
        return {}
    return {n: (ms / 1000.0 if ms else math.inf) for n, ms in raw.items()}


def node_states() -> tuple[set, set]:
    """``(alive, preempted)``: ids of the Ray nodes alive, and of those dead after a
    preemption drain."""
    alive, preempted = set(), set()
    for n in ray.nodes():
        if n.get("Alive"):
            alive.add(n["NodeID"])
        elif n.get("DeathReason") == PREEMPTED:
            preempted.add(n["NodeID"])
    return alive, preempted


def is_preempted(exc: BaseException) -> bool:
    """Whether an actor error says its node was preempted (``RayActorError.preempted``)."""
    return bool(getattr(exc, "preempted", False))


def drain_node(node_id: str, deadline_s: float | None = None, *, reason: str = "preemption",
               message: str = "preemption notice") -> None:
    """Ask Ray to drain a node, as the autoscaler does for a preemption notice (the same call
    as ``ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION``): ``deadline_s`` seconds from
    now (``None``: no deadline).  Ray only marks the node; taking it away is the caller's (or
    the cloud's) part.  Raises ``RuntimeError`` if Ray rejects the drain."""
    from ray.core.generated import autoscaler_pb2

    # generated protobuf and a worker attribute set at run time: unknown to the type checker
    code = autoscaler_pb2.DrainNodeReason.Value(  # type: ignore[attr-defined]
        f"DRAIN_NODE_REASON_{reason.upper()}")
    deadline_ms = 0 if deadline_s is None else int((time.time() + deadline_s) * 1000)
    gcs = ray._private.worker.global_worker.gcs_client  # type: ignore[attr-defined]
    ok, why = gcs.drain_node(node_id, code, message, deadline_ms)
    if not ok:
        raise ClusterError(f"drain: Ray rejected draining node {node_id}: {why}")


@dataclass
class Drains:
    """The controller's record of draining machines.

    ``retiring``: ``{machine: (handle, node, deadline)}`` planned out, actor kept until its node
    goes or the deadline passes.  ``pending_draining`` and ``pending_preempted``: what the next
    step's report says (machines planned out for a drain; machines lost to a preempted node)."""

    retiring: dict = field(default_factory=dict)
    pending_draining: list = field(default_factory=list)
    pending_preempted: list = field(default_factory=list)

    def newly_draining(self, members: dict, nodes: dict) -> list:
        """``[(machine, deadline)]`` of present machines on draining ``nodes``."""
        return [(m, nodes[v.node]) for m, v in members.items()
                if v.node is not None and v.node in nodes]

    def retire(self, machine: str, handle, node: str | None, deadline: float) -> None:
        self.retiring[machine] = (handle, node, deadline)
        self.pending_draining.append(machine)
        left = deadline - time.time()
        log.info("machine %s: its node is draining (%s); planned out, its rows copied to the "
                 "machines left", machine,
                 "no deadline" if math.isinf(deadline) else f"deadline in {left:.0f} s")

    def settle(self, alive: set, grace_s: float = 1.0) -> list:
        """Forget retiring machines whose node is gone or that are past their deadline
        (``grace_s`` later); return them, ``[(machine, handle)]``, for the caller to stop."""
        now, stop = time.time(), []
        for m, (h, node, deadline) in list(self.retiring.items()):
            if node not in alive or now > deadline + grace_s:
                del self.retiring[m]
                stop.append((m, h))
        return stop

    def take(self) -> tuple[tuple, tuple]:
        """The draining and preempted machines since the last call (for a step's report)."""
        out = (tuple(dict.fromkeys(self.pending_draining)),
               tuple(dict.fromkeys(self.pending_preempted)))
        self.pending_draining, self.pending_preempted = [], []
        return out
