"""The driver's tables of the machines: plain Python, no Ray.

:class:`DriverTables` is the driver's copy of what the controller knows (handles, specs,
planning speeds, the storage of the last step: what a new controller is rebuilt from), the
machines present (``None``: ask the controller), every id the cluster has had (churn events
name them), the machines a step's events crash without a call to crash in, and the membership
epoch: a counter that moves whenever the membership may have changed, so that a plan asked for
ahead under another membership is dropped (:mod:`.planning`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..schemes.wire import Member

__all__ = ["DriverTables"]


def _ignore(machine) -> None:
    return None


class DriverTables:
    """The driver's tables (module docstring).  ``on_forget(machine)`` is told of every machine
    that leaves them (the verifier forgets its catches)."""

    def __init__(self, on_forget: Callable[[str], None] = _ignore):
        self.on_forget = on_forget
        self.handles: dict = {}
        self.specs: dict = {}
        self.speeds: dict = {}
        self.storage = None
        self.present: list | None = None
        self.ever: set = set()
        self.epoch = 0
        self.crash_idle: list = []

    def begin(self, handles: dict, specs: dict, storage) -> None:
        """The controller's first answer: the machines started."""
        self.handles, self.specs, self.storage = handles, specs, storage
        self.ever.update(handles)

    def learn(self, machine, handle) -> None:
        """A machine the controller handed a step mid-way (a recovery, a rescue)."""
        self.handles[machine] = handle
        self.ever.add(machine)

    def changed(self) -> None:
        """The membership changed (or may have): present unknown, a new epoch."""
        self.present = None
        self.epoch += 1

    def forget(self, machines: Iterable) -> list:
        """Machines that ended (crashed, left, found dead) leave every table; returns those
        that were in them."""
        gone = [m for m in machines if m in self.handles or m in self.specs]
        for m in gone:
            self.handles.pop(m, None)
            self.specs.pop(m, None)
            self.speeds = {k: v for k, v in self.speeds.items() if k != m}
            self.on_forget(m)
        if gone:
            if self.present is not None:
                self.present = [m for m in self.present if m not in gone]
            self.epoch += 1  # plans asked for ahead counted them in
        return gone

    def joined(self, handles: dict, specs: Iterable) -> None:
        """Machines added (their handles and specs)."""
        self.handles.update(handles)
        self.specs.update({s.id: s for s in specs})
        self.ever.update(self.handles)
        self.changed()

    def took(self, prep) -> None:
        """A prepared step: its machines (the others leave), their specs, speeds and storage."""
        self.handles.update(prep.handles)
        self.forget([m for m in self.handles if m not in prep.speeds])
        self.ever.update(prep.speeds)
        self.present = list(prep.speeds)
        self.specs, self.speeds, self.storage = dict(prep.specs), prep.speeds, prep.storage

    def stepped(self, planned: Iterable, gone: Iterable) -> None:
        """A step ran on ``planned``; ``gone`` ended in it."""
        gone = set(gone)
        self.present = [m for m in planned if m not in gone]
        self.forget(gone)  # out of every table, now
        if gone:
            self.epoch += 1  # the plan asked for ahead counted them in

    def members(self) -> tuple:
        """What a new controller is rebuilt from: a :class:`~elastic_coded.schemes.wire.Member`
        per machine with a spec (its speed: the estimate, else its spec's)."""
        return tuple(Member(self.specs[m], h, self.speeds.get(m, self.specs[m].speed))
                     for m, h in self.handles.items() if m in self.specs)
