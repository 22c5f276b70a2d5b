"""A step's churn events on the driver: drawn once per step, checked before any is applied,
and applied once.

* The churn script's events for a step are drawn once (a step that fails and is called again
  runs with the same events, and never applies their departures and joins twice).
* ``multiply(B, events=...)`` takes a :class:`~elastic_coded.churn.StepEvents` or a mapping in
  the churn script's form (:func:`~elastic_coded.churn.parse_events`).
* Before anything is applied, every machine an event names must have been in the cluster at
  some point (or join in the same step), and a join must not reuse the id of a machine present
  (one leaving in the same step excepted): otherwise a ``ValueError`` names the script's step
  (or ``events``), the event, the machine and the fix.  A machine named twice in ``leave``
  leaves once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..churn import StepEvents, machines_named, parse_events
from ..errors import ArgumentError
from ..machines import MachineSpec
from .tables import DriverTables

__all__ = ["ChurnEvents", "Membership"]


class Membership(Protocol):
    """What applying events changes: the cluster's public membership calls."""

    def machines(self) -> list[str]: ...

    def remove_machine(self, machine: str, crash: bool = False) -> None: ...

    def add_machines(self, machines: Iterable) -> int: ...


class ChurnEvents:
    """A churn script's events, drawn once per step and applied once (module docstring).
    ``generator``: the script's (``events(step, present, K)``); ``K``: the step's ``L + S``."""

    def __init__(self, generator: Any, K: int):
        self.generator, self.K = generator, K
        self.applied: tuple | None = None  # (step, events) of the churn applied last
        self.drawn: tuple | None = None    # (step, events) drawn from the churn script

    def apply(self, step: int, tables: DriverTables, cluster: Membership,
              events=None) -> StepEvents:
        """Apply step ``step``'s events once (``events``: instead of the script's) through
        ``cluster``, the machines present read from ``tables`` (else from ``cluster``); the
        machines it crashes go to ``tables.crash_idle``.  Returns them."""
        given = None if events is None else parse_events(events)
        if self.applied is not None and self.applied[0] == step:
            ev = self.applied[1] if given is None else given
            if given is not None:
                _check(tables.ever, ev, tables.present or cluster.machines(), "events",
                       joins=False)
        else:
            if tables.present is None:
                tables.present = cluster.machines()
            present = tables.present
            if given is not None:
                ev, where = given, "events"
            else:
                if self.drawn is None or self.drawn[0] != step:
                    self.drawn = (step, self.generator.events(step, present, self.K))
                ev, where = self.drawn[1], f"churn script, step {step}"
            _check(tables.ever, ev, present, where)
            for m in dict.fromkeys(ev.leave):  # a machine named twice leaves once
                if m in present:
                    cluster.remove_machine(m)
            if ev.join:
                cluster.add_machines([MachineSpec(j.id, j.speed, j.storage) for j in ev.join])
            self.applied = (step, ev)
        present = tables.present if tables.present is not None else cluster.machines()
        # a crash scheduled for a machine that gets no work this step happens all the same
        tables.crash_idle = [m for m in ev.crash if m in present]
        return ev


def _check(ever: set, ev: StepEvents, present, where: str, joins: bool = True) -> None:
    joining = [j.id for j in ev.join]
    known = ever | set(joining)
    for kind, m in machines_named(ev):
        if kind != "join" and m not in known:
            raise ArgumentError(f"{where}: {kind} names machine {m!r}, which was never in this "
                                f"cluster (present: {sorted(present)}); name a machine of the "
                                f"cluster")
    if not joins:
        return
    twice = sorted({m for m in joining if joining.count(m) > 1})
    if twice:
        raise ArgumentError(f"{where}: join names {twice} more than once; each joining machine "
                            f"needs its own id")
    clash = sorted(m for m in joining if m in present and m not in ev.leave)
    if clash:
        raise ArgumentError(f"{where}: join of {clash}: a machine of that id is already present; "
                            f"remove it first (remove_machine({clash[0]!r})), or join another id")
