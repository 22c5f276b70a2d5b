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

from ..churn import StepEvents, machines_named, parse_events
from ..errors import ArgumentError
from ..machines import MachineSpec

__all__ = ["apply"]


def apply(cl, events=None) -> StepEvents:
    """Apply the step's events once (module docstring); returns them."""
    given = None if events is None else parse_events(events)
    if cl._applied is not None and cl._applied[0] == cl._step:
        ev = cl._applied[1] if given is None else given
        if given is not None:
            _check(cl, ev, cl._present or cl.machines(), "events", joins=False)
    else:
        if cl._present is None:
            cl._present = cl.machines()
        present = cl._present
        if given is not None:
            ev, where = given, "events"
        else:
            if cl._drawn is None or cl._drawn[0] != cl._step:
                cl._drawn = (cl._step, cl._churn.events(cl._step, present, cl.L + cl.S))
            ev, where = cl._drawn[1], f"churn script, step {cl._step}"
        _check(cl, ev, present, where)
        for m in dict.fromkeys(ev.leave):  # a machine named twice leaves once
            if m in present:
                cl.remove_machine(m)
        if ev.join:
            cl.add_machines([MachineSpec(j.id, j.speed, j.storage) for j in ev.join])
        cl._applied = (cl._step, ev)
    present = cl._present if cl._present is not None else cl.machines()
    # a crash scheduled for a machine that gets no work this step happens all the same
    cl._crash_idle = [m for m in ev.crash if m in present]
    return ev


def _check(cl, ev: StepEvents, present, where: str, joins: bool = True) -> None:
    joining = [j.id for j in ev.join]
    known = cl._ever | set(joining)
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
