"""The controller's storage: a family's storage kept whole for the machines present, and each
step's plan.  Plain Python: no Ray.

:class:`Storage` holds the storage family (:mod:`elastic_coded.schemes.families`) and the
machines' table (:class:`~.members.Members`), and applies what the family returns through a
:class:`Transfer`, the runtime's I/O (the controller's is Ray: rows sent to worker actors, coded
sources in the object store; a unit test's is a fake).  It runs the repair loop (a repair
redone when machines die while storing; a lower ``S`` when the budgets cannot hold ``L+S``,
:attr:`Storage.short_S`; shrinks a repair left for later applied at the next), caches plans
while nothing changed, re-plans lost work on live holders (:meth:`Storage.recover`) and stores
fresh coded rows mid-step (:meth:`Storage.rescue`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from ..errors import BudgetError, InternalError, PlanError, StepFailed
from ..schemes.families import Change, Family
from ..schemes.policies.rules import REPLAN_SPEED_CHANGE, assign_recovery, keep_plan
from ..schemes.wire import StepRequest, TaskSpec
from .members import Members

__all__ = ["Transfer", "Storage"]

log = logging.getLogger(__name__)


class Transfer(Protocol):
    """The runtime's I/O, as :class:`Storage` uses it."""

    async def store(self, moves: Sequence[tuple]) -> list:
        """Send rows ``[(source, start, stop, machine), ...]`` to the machines present; return
        the machines found dead on the way (sorted)."""

    async def keep_only(self, shrink: Mapping) -> None:
        """Have machines keep only ``{machine: {source: ranges}}`` of what they hold."""

    def read_source(self, name: str) -> np.ndarray:
        """The whole matrix of source ``name``."""

    def put_source(self, name: str, matrix: np.ndarray) -> None:
        """Make ``matrix`` source ``name``, which machines can be sent rows of."""

    def drop_source(self, name: str) -> None:
        """Forget source ``name``."""

    def has_source(self, name: str) -> bool:
        """Whether source ``name`` is held."""

    def release(self, machine: str) -> None:
        """``machine`` ended: its process may stop once it hosts no other."""


class Storage:
    """A family's storage on the machines present (see the module docstring).

    ``L``, ``S``: the configured code; ``short_S``: the ``S`` the budgets of the machines
    present allowed at the last repair, when below the ``S`` it was asked for (else ``None``);
    ``redesign``: why the storage was last designed anew (unified), until taken;
    ``values_moved``: values sent to store re-encoded sources."""

    def __init__(self, family: Family, members: Members, io: Transfer, *, L: int, S: int):
        self.family, self.members, self.io = family, members, io
        self.L, self.S = int(L), int(S)
        self.short_S: int | None = None
        self.redesign: str | None = None
        self.values_moved = 0
        self.deferred: dict = {}  # shrinks a repair left for the next (a step may be running)
        # (policy, modes) -> (key, speeds, plan, serial), reused while nothing changed: one per
        # execution, so that usctec-auto's lean and eager steps in turn keep a plan each
        self.plans: dict = {}
        self.replan_speed_change = REPLAN_SPEED_CHANGE
        self.cost_aware = False  # keep a plan while a fresh one would save less than it costs
        self.step_s: float | None = None  # the last step's slowest result used (its compute)
        self.plan_s: float | None = None  # what the last fresh plan took to make
        self._settled: tuple | None = None  # (what a repair saw, the state it left unchanged)
        # plans made so far, counted from a random start: a driver holds plans by serial
        # (``StepRequest.held``), and a controller that replaces one that died must never take
        # the old one's serial numbers for its own plans
        self.serials = secrets.randbits(40) << 20
        self.plan_serial = 0  # the serial number of the plan :meth:`plan` returned last

    def S_now(self) -> int:
        """The configured ``S``, lowered to what the machines present allow (``L+S`` of them)."""
        return max(0, min(self.S, len(self.members) - self.L))

    def drop(self, machine: str, release: bool = True) -> None:
        """Plan ``machine`` out (its copies forgotten); ``release``: it has ended."""
        if self.members.drop(machine):
            self.family.forget(machine)
        if release:
            self.io.release(machine)

    def snapshot(self):
        return self.family.snapshot()

    def restore(self, state) -> None:
        self.family.restore(state)

    def adopt(self, state) -> None:
        """Take over ``state`` (a family's snapshot, from a controller that died): copies on
        machines no longer present are forgotten."""
        self.family.restore(state)
        for m in set(self.family.members()) - set(self.members.table):
            self.family.forget(m)

    @property
    def current(self):
        """The storage in force (a placement, or the family's storage)."""
        return self.family.storage

    def take_redesign(self) -> str | None:
        out, self.redesign = self.redesign, None
        return out

    # -- applying a family's change -------------------------------------------------------------
    async def _apply(self, change: Change) -> list:
        """Put ``change``'s sources, then send its moves; returns the machines found dead."""
        for put in change.puts:
            if put.if_missing and self.io.has_source(put.name):
                continue
            A = self.io.read_source(put.base)
            self.io.put_source(put.name, put.encode(A))
            if put.drop is not None:
                self.io.drop_source(put.drop)
            self.values_moved += put.values_rows * A.shape[1]
        for m in {mv[3] for mv in change.moves}:
            self.deferred.pop(m, None)  # rows added: an older keep-only would drop them
        if not change.moves:
            return []
        return list(await self.io.store(change.moves))

    async def start(self, specs: list) -> None:
        """The first storage, for the machines ``specs`` (members already)."""
        dead = await self._apply(self.family.start(list(specs)))
        if dead:
            raise StepFailed(f"machines {dead} died while receiving their rows: "
                             f"{[self.members.why.get(m) for m in dead]}")

    async def join(self, spec) -> int:
        """Storage for machine ``spec`` that just joined (a member already); returns rows
        copied.  Raises :class:`~elastic_coded.errors.StepFailed` if it died meanwhile."""
        change = self.family.join(spec)
        if await self._apply(change):
            raise StepFailed(f"machine {spec.id!r} died while receiving its rows")
        return change.rows

    # -- repair ---------------------------------------------------------------------------------
    async def repair(self, S: int, n_cols: int | None = None, shrink_now: bool = True) -> int:
        """Restore the storage among the machines present, to ``L+S`` holders or, when the
        budgets cannot hold that, as many as they can (:attr:`short_S`, with a warning);
        machines found dead while storing are dropped and the repair is redone.
        ``shrink_now=False`` leaves the rows a machine no longer keeps for the next repair (a
        step may be running).  ``n_cols``: the step's inputs (unified designs for them).
        Returns rows copied."""
        seen = self._repair_key(S, n_cols)
        done = self._settled
        if seen is not None and done is not None and done[0] == seen and \
                done[1] is self.family.state_key() and not self.deferred:
            self.short_S = done[2]
            return 0  # as the last repair left it, changing nothing
        copied = 0
        for _ in range(len(self.members) + 2):
            change = self._repair_plan(S, n_cols)
            dead = await self._apply(change)
            copied += sum(b - a for _, a, b, m in change.moves if m not in dead)
            if change.redesign is not None:
                self.redesign = change.redesign
            if dead:
                for m in dead:
                    self.drop(m)
                continue
            shrink = dict(change.shrink)
            if shrink and not shrink_now:
                self.deferred.update(shrink)
            elif shrink or self.deferred:
                await self.io.keep_only({**self.deferred, **shrink})
                self.deferred = {}
            unchanged = not (change.moves or change.puts or shrink or change.redesign)
            key = self._repair_key(S, n_cols) if unchanged else None
            self._settled = None if key is None else (key, self.family.state_key(),
                                                      self.short_S)
            return copied
        raise StepFailed("storage: the repair did not settle")

    def _repair_key(self, S: int, n_cols: int | None):
        """What a repair depends on beside the family's state (kept apart, compared by
        identity: a change of the storage makes a new one): the machines present and their
        budgets, ``S`` and the inputs' columns; ``None`` for a family whose state is drawn
        anew (no ``state_key``) or whose repair is not a function of those alone
        (``pure_repair``)."""
        if not getattr(self.family, "pure_repair", False) or self.family.state_key() is None:
            return None
        present = self.members.present(sort=True)
        return (present.machines, tuple(present.budgets.values()), S, n_cols)

    def _repair_plan(self, S: int, n_cols: int | None) -> Change:
        """The family's repair for the machines present; a family with ``L+S`` holders per row
        (``has_LS``) falls back to the largest ``S`` the budgets hold, down to 0."""
        present = self.members.present()
        if not self.family.has_LS:
            return self.family.repair(present, S, n_cols)
        self.short_S = None
        for s in range(S, -1, -1):
            try:
                change = self.family.repair(present, s, n_cols)
            except BudgetError:
                if s == 0:
                    raise
                continue
            if s < S:
                self.short_S = s
                log.warning("storage: the budgets of the machines present hold every row only "
                            "L+%d times, not L+S = %d", s, self.L + S)
            return change
        raise InternalError("unreachable")  # pragma: no cover

    async def repair_midstep(self) -> None:
        """Repair to :meth:`S_now` without shrinking (a step may be running); the rows copied
        count in the next step's answer."""
        self.members.pending_moved += await self.repair(self.S_now(), shrink_now=False)

    # -- a step ---------------------------------------------------------------------------------
    def check_count(self, S: int) -> None:
        """A family with ``L+S`` holders per row needs ``L+S`` machines present and storage
        (:meth:`~.members.Members.check_count`)."""
        if self.family.has_LS:
            self.members.check_count(self.L, S, self.short_S)

    async def prepare(self, request: StepRequest) -> tuple:
        """Check the count, repair the storage (to as many holders as the machines allow, at
        most ``L+S``), check again and plan the step.  Returns ``(plan, rows copied)``."""
        S_eff = self.S if request.S is None else request.S
        self.short_S = None
        self.check_count(S_eff)
        S_store = min(self.S, max(S_eff, len(self.members) - self.L))  # as many as can be
        moved = await self.repair(S_store, request.n_cols, shrink_now=not request.ahead)
        self.check_count(S_eff)
        return self.plan(request, S_eff), moved

    def plan(self, request: StepRequest, S: int):
        """The step's plan for the machines present (by id), reused while the policy, ``S``,
        the inputs' columns, the machines and the storage are unchanged and no speed estimate
        moved by more than :data:`REPLAN_SPEED_CHANGE` from the one planned with (with
        :attr:`cost_aware`, also while a fresh plan would save less than it costs:
        :func:`~elastic_coded.schemes.policies.rules.keep_plan`; a family
        whose ``state_key`` is ``None`` plans every step anew).  Speeds only make a plan
        faster or slower, never wrong: a plan is valid for its machines and storage."""
        present = self.members.present(sort=True)
        key = (request.policy, S, request.n_cols, tuple(request.modes), present.machines,
               self.family.state_key())
        speeds = tuple(present.speeds.values())
        slot = (request.policy, tuple(request.modes))
        cached = self.plans.get(slot)
        costs = (self.step_s, self.plan_s) if self.cost_aware else ()
        if key[-1] is not None and cached is not None and cached[0] == key \
                and keep_plan(cached[1], speeds, self.replan_speed_change, *costs):
            self.plan_serial = cached[3]
            return cached[2]
        t0 = time.perf_counter()
        plan = self.family.plan(request.policy, present, S, request)
        self.plan_s = time.perf_counter() - t0
        self.serials += 1
        self.plan_serial = self.serials
        self.plans[slot] = (key, speeds, plan, self.plan_serial)
        return plan

    def holders_of(self, plan) -> dict:
        """``{piece: [present machines storing its rows]}`` (``[]`` when no machine stores them
        all) for speculative backups."""
        out = {}
        for pi, _piece, group in plan.iter_pieces():
            spans = self.family.holders(group.rows, self.members.table)
            out[pi] = spans[0][2] if len(spans) == 1 else []
        return out

    async def recover(self, lost: list) -> dict:
        """Lost tasks (:class:`~elastic_coded.schemes.wire.TaskSpec`) re-planned on live
        machines that store their rows; only when some rows have no live holder left is the
        storage first repaired (:meth:`repair_midstep`).  Returns ``{machine: (TaskSpec,
        ...)}``."""
        speeds = self.members.speeds()
        rows = [t.rows for t in lost]

        def spans(r):
            return self.family.holders(r, self.members.table)

        try:
            parts = assign_recovery(rows, spans, speeds)
        except PlanError:  # some rows have no live holder left
            await self.repair_midstep()
            parts = assign_recovery(rows, spans, speeds)
        out: dict = {}
        for i, a, b, m in parts:
            t = lost[i]
            out.setdefault(m, []).append(
                TaskSpec(t.source, (a, b), t.arg, t.cols, t.piece, t.position))
        return {m: tuple(ts) for m, ts in out.items()}

    async def rescue(self, m: int, need: int, exclude, machines: list) -> tuple:
        """Mid-step: ``need`` fresh coded rows of master ``m`` stored on the first live machine
        of ``machines`` (best first) that takes them; a machine found dead meanwhile is
        dropped and the next tried.  Returns ``(machine, ranges)``."""
        live = [n for n in machines if n in self.members]
        for _ in range(len(live)):
            change = self.family.rescue(m, need, set(exclude), live)
            n = change.moves[0][3]
            if not await self._apply(change):
                self.members.pending_moved += change.rows
                return n, tuple((a, b) for _, a, b, _ in change.moves)
            self.drop(n)
            live.remove(n)
        raise StepFailed(f"rescue: no live machine could take master {m}'s coded rows")
