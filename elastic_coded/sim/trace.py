"""The simulator's trace: who is present at each step, who crashes, who joins, how slow everyone
is.  Drawn once per seed and shared by every policy, so comparisons are side by side on the same
trace.  Pure: numpy only.

Membership follows the runtime (``runtime.events.apply`` and the controller): machines
``m0 .. m{N-1}`` start; before step ``t`` the churn script's events for the machines present
(sorted ids, as the controller lists them) are drawn with ``ChurnRun.events``; ``leave`` removes
machines before the step, ``join`` adds them before the step, ``crash`` machines are planned for
and die in the middle of the step (their results never arrive) and are gone from the next step;
``slow`` multiplies a machine's slowdown for this step; ``corrupt`` machines are planned for and
return wrong results (each family pays for them its own way: every family's whole-plan steps
detect the wrong product after the decode when a liar's results were used and repair it with
the runtime's repair calls, :mod:`~elastic_coded.sim.lagrange_lies`,
:mod:`~elastic_coded.families.unified.sim`, :mod:`~elastic_coded.families.hetero.sim`; a
USCTEC-family pull step likewise, over the positions it took in,
:mod:`~elastic_coded.sim.pull`) and, once they lied in
:data:`~elastic_coded.churn.CAUGHT_LIMIT` steps, are excluded after the step (every lie is taken
as caught, even one whose results no policy used; the runtime counts the steps a machine was
caught in).  Two deliberate simplifications: a machine
that crashes is dropped right after its step (the runtime drops an idle one at its next health
check), and the events of step ``t+1`` are drawn for the machines actually present (the runtime
passes the previous plan's machines, which still include those that crashed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from ..churn import CAUGHT_LIMIT, ChurnScript, Join, StepEvents, parse_churn
from ..errors import ArgumentError, ArgumentTypeError
from .models import EqualSpeeds, Model, NoDelays, check_model

__all__ = ["Trace", "make_trace"]

Speeds = Model | Sequence[float] | np.ndarray
"""Base speeds: a speed model, or one speed per initial machine."""
Churn = ChurnScript | Mapping[str, Any]
"""A churn script, or its mapping (YAML) form."""


@dataclass(frozen=True)
class Trace:
    """A drawn trace (see the module docstring).  Machines are numbered by *slot*: the ``N``
    initial machines are slots ``0..N-1``, joiners get the next slots in order of arrival."""

    N: int
    """Machines at the start (slots ``0..N-1``)."""
    L: int
    """Code parameters the churn floor was drawn with (``L+S`` machines at least)."""
    S: int
    ids: tuple[str, ...]
    """``ids[slot]``: the machine's id (``"m3"``, or the joiner's id; a machine that leaves and
    joins again later gets a new slot)."""
    storage: np.ndarray
    """``storage[slot]``: the machine's storage budget ``e`` (a fraction of the rows)."""
    configured: np.ndarray
    """``configured[slot]``: the speed the machine is configured with (the controller's first
    estimate; a joiner's ``Join.speed``)."""
    speed: np.ndarray
    """``(steps, slots)`` true base speeds."""
    slowdown: np.ndarray
    """``(steps, slots)`` slowdown factors (delay model times the churn script's ``slow``)."""
    members: tuple[tuple[str, ...], ...]
    """The distinct memberships, each a sorted tuple of ids."""
    member_slots: tuple[np.ndarray, ...]
    """``member_slots[i]``: slots of ``members[i]``, aligned with it (int arrays)."""
    member_of: np.ndarray
    """``member_of[t]``: index into ``members`` of the machines present at step ``t``."""
    events: tuple[StepEvents, ...]
    """``events[t]``: the :class:`~elastic_coded.churn.StepEvents` drawn for step ``t``."""
    crashed: tuple[tuple[str, ...], ...]
    """``crashed[t]``: ids present at step ``t`` that crash in its middle."""
    joined: tuple[tuple[Join, ...], ...]
    """``joined[t]``: the ``Join`` records that took effect before step ``t``."""
    left: tuple[tuple[str, ...], ...]
    """``left[t]``: ids gone before step ``t`` (graceful leaves, last step's crashes and
    exclusions)."""
    corrupt: tuple[tuple[str, ...], ...] = ()
    """``corrupt[t]``: ids present at step ``t`` that return wrong results in it."""

    @property
    def steps(self) -> int:
        return int(self.member_of.size)

    def present(self, t: int) -> tuple[str, ...]:
        """The ids present at step ``t`` (sorted)."""
        return self.members[int(self.member_of[t])]

    def slots(self, t: int) -> np.ndarray:
        return self.member_slots[int(self.member_of[t])]

    def counts(self) -> dict[str, int]:
        """Totals of churn events over the trace."""
        return {
            "joins": sum(len(j) for j in self.joined),
            "leaves": sum(len(ev.leave) for ev in self.events),
            "crashes": sum(len(c) for c in self.crashed),
            "corrupt": sum(len(c) for c in self.corrupt),
            "membership_changes": int(np.count_nonzero(np.diff(self.member_of))),
        }


def _as_script(churn: Churn | None) -> ChurnScript | None:
    if churn is None or isinstance(churn, ChurnScript):
        return churn
    from collections.abc import Mapping

    if isinstance(churn, Mapping):
        return parse_churn(churn)
    raise ArgumentTypeError(f"churn: a ChurnScript or a mapping (its YAML form), got "
                            f"{type(churn).__name__}")


def make_trace(N: int, steps: int, L: int, S: int, *, delays: Model | None = None,
               speeds: Speeds | None = None, churn: Churn | None = None,
               seed: int = 0, storage: float = 1.0) -> Trace:
    """Draw the trace of ``steps`` steps on ``N`` initial machines (module docstring).

    ``delays``: a delay model (default :class:`~elastic_coded.sim.models.NoDelays`); ``speeds``:
    a speed model or an array of ``N`` speeds (default all 1); ``churn``: a
    :class:`~elastic_coded.churn.ChurnScript` or its mapping form (its own ``seed`` drives it, as
    in the runtime).  ``seed`` drives the models.  Raises ``ValueError`` if the script leaves fewer
    than ``L+S`` machines at some step.
    """
    for name, v, lo in (("N", N, 1), ("steps", steps, 0), ("L", L, 1), ("S", S, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ArgumentError(f"{name}: an int >= {lo}, got {v!r}")
    N, steps, L, S = int(N), int(steps), int(L), int(S)
    K = L + S
    if N < K:
        raise ArgumentError(f"N: {N} machines, fewer than L+S = {K}")
    if not 0 < storage <= 1:
        raise ArgumentError(f"storage: a storage budget in (0, 1], got {storage!r}")
    delays = check_model(NoDelays() if delays is None else delays, "delays")
    script = _as_script(churn)
    ss = np.random.SeedSequence(int(seed))
    rng_speed, rng_delay = (np.random.default_rng(s) for s in ss.spawn(2))

    mb = _membership(N, steps, K, float(storage), script)
    ids, conf_join = mb["ids"], mb["conf_join"]
    n_slots = len(ids)
    sp0 = _base_speeds(speeds, rng_speed, steps, N)
    speed = np.empty((steps, n_slots))
    speed[:, :N] = sp0
    if n_slots > N:
        speed[:, N:] = np.asarray(conf_join)[None, :]
    configured = np.concatenate([sp0[0] if steps else np.ones(N), np.asarray(conf_join)])
    slowdown = _slowdowns(delays, rng_delay, steps, n_slots)
    for t, s, f in mb["slow_extra"]:
        slowdown[t, s] *= f
    return Trace(N, L, S, tuple(ids), np.asarray(mb["storage"]), configured, speed, slowdown,
                 tuple(mb["members"]), tuple(mb["member_slots"]), mb["member_of"],
                 tuple(mb["events"]), tuple(mb["crashed"]), tuple(mb["joined"]),
                 tuple(mb["left"]), tuple(mb["corrupt"]))


class _Membership(TypedDict):
    """What :func:`_membership` draws (the :class:`Trace` fields, as lists)."""

    ids: list[str]
    storage: list[float]
    conf_join: list[float]
    members: list[tuple[str, ...]]
    member_slots: list[np.ndarray]
    member_of: np.ndarray
    events: list[StepEvents]
    crashed: list[tuple[str, ...]]
    joined: list[tuple[Join, ...]]
    left: list[tuple[str, ...]]
    corrupt: list[tuple[str, ...]]
    slow_extra: list[tuple[int, int, float]]


def _membership(N: int, steps: int, K: int, storage: float, script: ChurnScript | None
                ) -> _Membership:
    """Who is present at each step, by the churn script (module docstring): ids and slots,
    the distinct memberships, and each step's events, crashes, joins and leaves."""
    ids = [f"m{i}" for i in range(N)]
    slot_of = {m: i for i, m in enumerate(ids)}
    stor = [storage] * N
    conf_join: list[float] = []
    present = set(ids)
    members: list[tuple[str, ...]] = []
    member_slots: list[np.ndarray] = []
    index_of: dict[tuple[int, ...], int] = {}  # slots of a membership (sorted by id) -> its index
    member_of = np.zeros(steps, dtype=np.int64)
    events: list[StepEvents] = []
    crashed_all: list[tuple[str, ...]] = []
    joined_all: list[tuple[Join, ...]] = []
    left_all: list[tuple[str, ...]] = []
    corrupt_all: list[tuple[str, ...]] = []
    lies: dict[str, int] = {}
    slow_extra: list[tuple[int, int, float]] = []  # (step, slot, factor)
    gen = script.generator() if script is not None else None
    gone_after: tuple[str, ...] = ()
    now = tuple(sorted(present))
    no_events = StepEvents()
    for t in range(steps):
        ev = gen.events(t, list(now), K) if gen is not None else no_events
        left = list(gone_after)
        for m in ev.leave:
            if m in present:
                present.discard(m)
                left.append(m)
        for j in ev.join:
            if j.id in present or j.id in left:
                raise ArgumentError(f"churn: step {t} joins {j.id!r}, a machine present before the "
                                    f"step (a machine may rejoin at a later step)")
            slot_of[j.id] = len(ids)  # a machine that rejoins is a new machine: a new slot
            ids.append(j.id)
            stor.append(float(j.storage))
            conf_join.append(float(j.speed))
            present.add(j.id)
        if left or ev.join:
            now = tuple(sorted(present))
        if len(now) < K:
            raise ArgumentError(f"churn: step {t} leaves {len(now)} machines ({list(now)}), fewer "
                                f"than L+S = {K}")
        crashed = tuple(m for m in ev.crash if m in present)
        corrupt = tuple(m for m in ev.corrupt if m in present and m not in crashed)
        for m, f in ev.slow.items():
            if m in present:
                slow_extra.append((t, slot_of[m], float(f)))
        key = tuple(slot_of[m] for m in now)
        if key not in index_of:
            index_of[key] = len(members)
            members.append(now)
            member_slots.append(np.array(key, dtype=np.int64))
        member_of[t] = index_of[key]
        events.append(ev)
        crashed_all.append(crashed)
        joined_all.append(tuple(ev.join))
        left_all.append(tuple(left))
        corrupt_all.append(corrupt)
        for m in corrupt:
            lies[m] = lies.get(m, 0) + 1
        excluded = tuple(m for m in corrupt if lies[m] >= CAUGHT_LIMIT and len(present) > K)
        for m in crashed + excluded:
            present.discard(m)
            lies.pop(m, None)
        if crashed or excluded:
            now = tuple(sorted(present))
        gone_after = crashed + excluded

    return {"ids": ids, "storage": stor, "conf_join": conf_join, "members": members,
            "member_slots": member_slots, "member_of": member_of, "events": events,
            "crashed": crashed_all, "joined": joined_all, "left": left_all, "corrupt": corrupt_all,
            "slow_extra": slow_extra}

def _base_speeds(speeds: Speeds | None, rng: np.random.Generator, steps: int, N: int
                 ) -> np.ndarray:
    """``(steps, N)`` base speeds of the initial machines, from an array or a speed model."""
    if isinstance(speeds, (list, tuple, np.ndarray)):
        base = np.asarray(speeds, dtype=np.float64).reshape(-1)
        if base.size != N or not np.all(np.isfinite(base) & (base > 0)):
            raise ArgumentError(f"speeds: {N} positive finite speeds, got {base.size} values "
                                f"{base.tolist()[:8]}")
        return np.broadcast_to(base, (steps, N))
    model = check_model(EqualSpeeds() if speeds is None else speeds, "speeds")
    sp0 = np.asarray(model.sample(rng, steps, N), dtype=np.float64)
    if sp0.shape != (steps, N) or not np.all(np.isfinite(sp0) & (sp0 > 0)):
        raise ArgumentError(f"speeds: the model must give positive finite speeds of shape "
                            f"{(steps, N)}, got shape {sp0.shape}")
    return sp0


def _slowdowns(delays: Model, rng: np.random.Generator, steps: int, n_slots: int) -> np.ndarray:
    """``(steps, n_slots)`` slowdowns from the delay model (a writable copy)."""
    slowdown = np.asarray(delays.sample(rng, steps, n_slots), dtype=np.float64)
    if slowdown.shape != (steps, n_slots) or not np.all(np.isfinite(slowdown) & (slowdown > 0)):
        raise ArgumentError(f"delays: the model must give positive finite slowdowns of shape "
                            f"{(steps, n_slots)}, got shape {slowdown.shape}")
    return np.array(slowdown)
