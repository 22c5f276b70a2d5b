"""The controller's table of machines present.  Plain Python: no Ray.

:class:`Members` keeps, for every machine present, its spec, its handle (opaque here), its speed
estimate (:mod:`~elastic_coded.schemes.speeds`) and its Ray node; what changed since the last
step's answer (machines joined and left, rows moved); the machines found dead by a ping or a
failed call, whose departure takes effect at the next membership-changing call
(:meth:`Members.apply_deaths`); speed learning from a step's measurements (:meth:`Members.learn`);
and the count check of a step that needs ``L+S`` machines (:meth:`Members.check_count`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, ShortOfMachines
from ..machines import MachineSpec
from ..schemes.families import Present
from ..schemes.speeds import SpeedEstimate, new_estimate, observe, rescale

__all__ = ["Member", "Members"]


@dataclass
class Member:
    """One machine present: its spec, handle, speed estimate and Ray node (``None``: not known
    yet; a ping tells)."""

    spec: MachineSpec
    handle: Any   # a machine handle: its calls are Ray remote methods
    est: SpeedEstimate
    node: str | None

    @property
    def speed_est(self) -> float:
        """The planning speed: robust to one-step stragglers
        (:mod:`~elastic_coded.schemes.speeds`)."""
        return self.est.speed


class Members:
    """The machines present and what changed (see the module docstring).

    ``calibrated``: the speeds are in the units measurements come in (emulated speeds are);
    otherwise the first measurements rescale every estimate once (:meth:`learn`)."""

    def __init__(self, calibrated: bool = True):
        self.table: dict[str, Member] = {}
        self.calibrated = bool(calibrated)
        self.pending_joined: list[str] = []
        self.pending_left: list[str] = []
        self.pending_moved = 0
        self.found_dead: set[str] = set()
        self.found_preempted: set[str] = set()
        self.found_gone: set[str] = set()  # of found_dead: their worker process died
        self.found_as: dict = {}  # of found_dead: the handle that was found dead
        self.why: dict = {}  # machine -> the error that showed it dead
        self.heard: dict = {}  # machine -> when a step last had a result of it (monotonic s)

    # -- the table ------------------------------------------------------------------------------
    def __contains__(self, machine) -> bool:
        return machine in self.table

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, machine) -> Member:
        return self.table[machine]

    def ids(self) -> list:
        """The machines present, in the order they came."""
        return list(self.table)

    def add(self, spec: MachineSpec, handle, speed: float | None = None) -> None:
        """Make ``spec`` a member, its estimate starting at ``speed`` (default its spec's)."""
        self.table[spec.id] = Member(spec, handle, new_estimate(spec.speed if speed is None
                                                                else speed), spec.node)

    def remove(self, machine) -> Member:
        """Take ``machine`` out without recording a departure (an addition undone)."""
        return self.table.pop(machine)

    def drop(self, machine) -> bool:
        """``machine`` left: gone from the table, recorded in :attr:`pending_left`.  Returns
        whether it was present."""
        if machine not in self.table:
            return False
        del self.table[machine]
        self.heard.pop(machine, None)
        self.pending_left.append(machine)
        return True

    def handles(self, machines=None) -> dict:
        return {m: self.table[m].handle for m in (self.table if machines is None else machines)}

    def speeds(self, machines=None) -> dict:
        """``{machine: planning speed}`` of ``machines`` (default: all, in the order they came)."""
        return {m: self.table[m].speed_est for m in (self.table if machines is None else machines)}

    def estimates(self) -> dict:
        """``{machine: SpeedEstimate}``: the window each planning speed is learnt from."""
        return {m: v.est for m, v in self.table.items()}

    def restore(self, estimates: dict) -> None:
        """Put back estimates taken by :meth:`estimates` (machines present only).  Raises
        ``ValueError`` naming a machine not present or a value that is no estimate; nothing
        changes then."""
        unknown = sorted((m for m in estimates if m not in self.table), key=str)
        if unknown:
            raise ArgumentError(f"estimates: machines {unknown} are not present; present: "
                                f"{sorted(self.table, key=str)}")
        bad = sorted((m for m, e in estimates.items() if not isinstance(e, SpeedEstimate)),
                     key=str)
        if bad:
            raise ArgumentError(f"estimates: the values of {bad} are not SpeedEstimate s (take "
                                f"them from speed_estimates())")
        for m, e in estimates.items():
            self.table[m].est = e

    def present(self, sort: bool = False) -> Present:
        """The machines present as a storage family sees them: in the order they came, or by
        id (``sort``), with their budgets and planning speeds."""
        ids = sorted(self.table) if sort else list(self.table)
        return Present(tuple(ids), {m: self.table[m].spec.storage for m in ids},
                       self.speeds(ids))

    def take_pending(self) -> tuple[tuple, tuple, int]:
        """``(joined, left, rows moved)`` since the last call (for a step's answer)."""
        out = (tuple(self.pending_joined), tuple(self.pending_left), int(self.pending_moved))
        self.pending_joined, self.pending_left, self.pending_moved = [], [], 0
        return out

    # -- deaths ---------------------------------------------------------------------------------
    def note_ping(self, machine, state: str, info, handle: Any = None) -> None:
        """A ping's answer (:func:`~.health.ping`): ``("dead", preempted)`` notes the machine
        found dead (and whether its node was preempted); ``("ok", info)`` learns its node.
        ``handle``: the one pinged; an answer about a handle the machine no longer has (it left,
        or was restarted in a fresh process while the ping was out) is ignored."""
        if handle is not None and (machine not in self.table
                                   or self.table[machine].handle is not handle):
            return
        if state in ("dead", "gone"):  # gone: its worker process died
            self.found_dead.add(machine)
            if machine in self.table:
                self.found_as[machine] = self.table[machine].handle
            if state == "gone":
                self.found_gone.add(machine)
            if info:
                self.found_preempted.add(machine)
        elif state == "ok" and machine in self.table and self.table[machine].node is None:
            self.table[machine].node = info["node"]

    def forget_stale(self) -> None:
        """Forget the deaths found of a handle the machine no longer has: it was dropped and
        came back (restarted, or added again) since, and the fresh one is alive."""
        stale = {m for m in self.found_dead if m in self.table and m in self.found_as
                 and self.table[m].handle is not self.found_as[m]}
        for m in stale:
            self.found_dead.discard(m)
            self.found_gone.discard(m)
            self.found_preempted.discard(m)
            del self.found_as[m]

    def apply_deaths(self, drop: Callable[[str], None]) -> list:
        """Drop (``drop(machine)``) the machines found dead since the last call, by id (not
        those back in a fresh handle since, :meth:`forget_stale`); returns those of them
        present and lost to a preempted node."""
        self.forget_stale()
        preempted = []
        for m in sorted(self.found_dead):
            if m in self.found_preempted and m in self.table:
                preempted.append(m)
            drop(m)
        self.found_dead.clear()
        self.found_preempted.clear()
        self.found_gone.clear()
        self.found_as.clear()
        return preempted

    # -- speeds ---------------------------------------------------------------------------------
    def learn(self, measured: dict) -> None:
        """Update the estimates from ``{machine: (value, 'value' | 'upper')}`` (measured
        speeds, or upper bounds from cancelled tasks).  Not :attr:`calibrated` (real mode:
        configured speeds are relative), the first measured values first rescale every
        estimate by the median ratio of measured to estimated speed."""
        if not self.calibrated:
            ratios = [v / self.table[m].speed_est for m, (v, k) in measured.items()
                      if k == "value" and m in self.table and v > 0]
            if ratios:
                f = float(np.median(ratios))
                for mem in self.table.values():
                    mem.est = rescale(mem.est, f)
                self.calibrated = True
        now = time.monotonic()
        for m, (value, kind) in measured.items():
            if m in self.table and np.isfinite(value) and value > 0:
                self.table[m].est = observe(self.table[m].est, value, kind)
                if kind == "value":  # it answered: alive as of now
                    self.heard[m] = now

    def unheard(self, within: float) -> list:
        """The machines present (in the order they came) that no step had a result of in the
        last ``within`` seconds, or whose node is not known yet: those a health check pings."""
        since = time.monotonic() - within
        return [m for m, v in self.table.items()
                if v.node is None or self.heard.get(m, -math.inf) < since]

    # -- a step's count -------------------------------------------------------------------------
    def check_count(self, L: int, S: int, short_S: int | None = None) -> None:
        """A step with code ``(L, S)`` needs ``L+S`` machines present, and storage on them for
        every row ``L+S`` times (``short_S``: the ``S`` the budgets reached, ``None``: all);
        raises :class:`~elastic_coded.errors.ShortOfMachines` with the largest ``S`` possible."""
        present = sorted(self.table)
        if len(present) < L + S:
            raise ShortOfMachines(
                f"machines: {len(present)} present ({present}), fewer than L+S = "
                f"{L + S}; add machines, or pass allow_lower_S=True to run with "
                f"S = {max(0, len(present) - L)}", max(0, len(present) - L))
        if short_S is not None and short_S < S:
            raise ShortOfMachines(
                f"storage: the budgets of the machines present hold every row only "
                f"L+{short_S} times, fewer than L+S = {L + S}; add machines or "
                f"storage, or pass allow_lower_S=True to run with S = {short_S}", short_S)
