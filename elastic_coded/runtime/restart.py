"""Worker processes that die come back (the controller's).

A worker process can die while its node lives on: the OOM killer, a segfault in a native
library, an operator's ``kill -9``.  Its machines' calls fail with Ray's ``ActorDiedError`` and
the step they die in recovers from the others, as for any crash.  Then, rather than leave the
cluster smaller for good, the controller starts a fresh process for each such machine, with
the same id, speed, storage budget and node, and loads its storage again from the placement
(the join path: :meth:`Controller._add_machines`).  The machines are planned in again from the
first step after their process is up, and that step's report lists them in ``restarted``.

What does not come back:

* a machine whose process is alive (a crash scripted by a churn script or
  ``remove_machine(crash=True)`` ends the machine inside a live process: it was meant);
* a machine whose node is gone (the node table handles it, :meth:`Controller.check_nodes`);
* a machine restarted ``limit`` times already: it is removed, and the report's
  ``not_restarted`` says why (so does a restart that failed).

Machines that died in a step are restarted before the driver's call that ends the step
returns (the step takes the time a process takes to start, and the machines are back for the
next one); those found dead by a health ping, when the next step is prepared.  Either way under
the storage lock, from the drop to the restart, so a step is never planned with a machine half
added, nor between the drop of a dead process's machines and their restart (it would see too
few machines and be refused).

A machine restarted mid-step is still named by the step's later failed calls to its old process
(and by a health ping that was out): a death reported of a machine restarted before is taken
only if its fresh process does not answer for it, and a ping's answer counts only for the
handle it was sent to (:meth:`.Members.note_ping`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

import ray

__all__ = ["MAX_RESTARTS", "Restarts", "process_dead", "process_of"]

log = logging.getLogger(__name__)

MAX_RESTARTS = 3
"""Restarts per machine before it is removed for good."""

PROBE_S = 2.0
"""How long a process has to answer before it is taken for dead."""


def process_of(handle) -> object:
    """The id of the worker process behind a machine's ``handle`` (the handle itself where it is
    not hosted in a shared process)."""
    host = getattr(handle, "host", None)
    if host is None:
        return handle
    actor = getattr(host, "_actor_id", None)
    return actor.hex() if actor is not None else host


async def process_dead(handle) -> bool:
    """Whether the worker process behind ``handle`` (a machine's) is gone: Ray says its actor
    died, or it does not answer within :data:`PROBE_S`."""
    host = getattr(handle, "host", None)
    if host is None:
        return False
    try:
        await asyncio.wait_for(host.hosted.remote(), PROBE_S)
    except (ray.exceptions.RayActorError, asyncio.TimeoutError):
        return True
    except Exception:  # any other answer: it is alive enough to have raised
        return False
    return False


@dataclass
class Restarts:
    """The restarts of one controller: counts per machine, and what the next step reports."""

    limit: int = MAX_RESTARTS
    counts: dict = field(default_factory=dict)
    restarted: list = field(default_factory=list)
    refused: list = field(default_factory=list)  # (machine, why)

    def allowed(self, machine: str) -> bool:
        """Count a restart of ``machine``; ``False`` (and the reason noted) past the limit."""
        n = self.counts.get(machine, 0)
        if n >= self.limit:
            self.refused.append((machine, f"its worker process died {n + 1} times; restarts "
                                          f"stop after {self.limit}"))
            return False
        self.counts[machine] = n + 1
        return True

    async def run(self, specs, add, lock, present) -> None:
        """Restart ``specs``: ``add(specs)`` under ``lock`` (``None``: held already), skipping
        those ``present()`` holds (added back by the user meanwhile)."""
        async with lock or contextlib.nullcontext():  # all at once: one fresh process
            specs = [s for s in specs if s.id not in present()]
            try:
                if specs:
                    await add(specs)
            except Exception as exc:  # the node went meanwhile, or the budgets do not fit
                log.warning("restart of machines %s failed: %s", [s.id for s in specs], exc)
                self.refused += [(s.id, f"restart failed: {exc}") for s in specs]
                return
        self.restarted += [s.id for s in specs]

    def take(self) -> tuple[tuple, tuple]:
        """``(restarted, refused)`` since the last call (for a step's answer)."""
        out = (tuple(self.restarted), tuple(self.refused))
        self.restarted, self.refused = [], []
        return out
