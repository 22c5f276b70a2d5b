"""``usctec-auto``'s choice of execution for each step: pull units with coded backups, the
whole ``(L, S)`` plan at once (``"eager"``), or the whole ``(1, 0)`` split (``"lean"``), from
the steps before it; and the execution expected of the next step, whose plan is asked for
ahead.  Pure: no Ray.  (Re-exported by :mod:`.pull`.)"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import median
from typing import Any

__all__ = ["MODES", "PROBE_EVERY", "EAGER_TRIAL", "EAGER_MARGIN", "choose_mode", "next_mode",
           "prefer_pull"]

MODES = ("pull", "eager", "lean")
"""``usctec-auto``'s executions of a step (:func:`choose_mode`)."""


PROBE_EVERY = 16
"""``usctec-auto`` runs a lean step (whose stragglers are seen) at least once every this many
steps: the whole ``(L, S)`` plan cancels its slowest calls, so it never sees who straggled."""

EAGER_TRIAL = 3
"""At real speed (steps timed), the eager steps after a lean step that saw a straggler are set
against that lean step's time once this many have run (:func:`choose_mode`)."""

EAGER_MARGIN = 1.25
"""... and a lean step comes back when their median is more than this many times that lean
step's time (a margin over the noise of steps timed on a shared host)."""


def choose_mode(history: Iterable[tuple[Any, ...]], pull_pays: bool,
                probe_every: int = PROBE_EVERY) -> str:
    """``usctec-auto``'s execution of a step, from its recent steps (``history``: ``(observed,
    slowed)`` per step, oldest first; ``observed`` whether the step could see its stragglers,
    ``slowed`` how many it saw) and :func:`prefer_pull`:

    * ``"lean"``: the last step that could see stragglers (within the last ``probe_every``)
      saw none: no redundancy, so nothing to decode either: the ``(1, 0)`` plan (rows split in
      proportion to the speeds) dispatched whole, the step deadline's coded backups guarding
      against a surprise.  Also the probe when no step in the last ``probe_every`` could see;
    * ``"pull"``: stragglers seen (or not known) and a step long enough for pulling to pay;
    * ``"eager"``: the same on a short step: the whole ``(L, S)`` plan at once; but a lean
      step again when the steps are timed (an entry's third item: its seconds, at real speed)
      and the eager steps since that lean step cost more than it did, straggler and all
      (:func:`_eager_costs_more`)."""
    hist = list(history)
    seen = [(i, e[1]) for i, e in enumerate(hist) if e[0]]
    recent = seen and seen[-1][0] >= len(hist) - probe_every
    if recent and seen[-1][1] == 0:
        return "lean"
    if pull_pays:
        return "pull"
    if recent and _eager_costs_more(hist, seen[-1][0]):
        return "lean"
    return "eager" if recent else "lean"


def _eager_costs_more(hist: Sequence[tuple[Any, ...]], j: int) -> bool:
    """Whether the timed eager steps after step ``j`` (a lean one that saw a straggler), at
    least :data:`EAGER_TRIAL` of them, took longer at the median than step ``j`` did, by more
    than :data:`EAGER_MARGIN`.  At real
    speed the whole ``(L, S)`` plan's redundancy is work the machines really do (on a host
    with fewer cores than machines, or a memory-bound product, it can cost more than a
    straggler it would hide); a straggler that really holds a step up makes the lean step the
    longer one, and the eager steps stay."""
    if len(hist[j]) < 3 or hist[j][2] is None:
        return False
    times = [e[2] for e in hist[j + 1:] if len(e) > 2 and e[2] is not None]
    return len(times) >= EAGER_TRIAL and median(times) > EAGER_MARGIN * hist[j][2]


def next_mode(history: Iterable[tuple[Any, ...]], mode: str, pull_pays: bool,
              probe_every: int = PROBE_EVERY) -> str:
    """The execution :func:`choose_mode` is expected to pick for the step after one run in
    ``mode`` on ``history`` (its plan is asked for while that step runs): as if the step saw
    what its mode saw before (none slowed after a lean step, some after a pull step; an eager
    step sees nothing; the guess is not timed).  Wrong when a lean step sees a straggler or a
    pull step none, and, with timed steps, when the eager step's time makes the lean step come
    back (:func:`_eager_costs_more`)."""
    guess = (mode != "eager", 0 if mode == "lean" else 1)
    return choose_mode(list(history) + [guess], pull_pays, probe_every)


def prefer_pull(expected_s: float, L: int, S: int, machines: int, units: int,
                call_cost_s: float) -> bool:
    """``usctec-auto``'s choice: pull when the work the whole plan's redundancy adds,
    ``S / L`` of the step's expected time ``expected_s``, exceeds the driver's cost of the calls
    a pull makes (``units`` plus two slow-start calls per machine, ``call_cost_s`` each, the
    driver making them one after another)."""
    return S > 0 and S / L * expected_s > machines * (units + 2) * call_cost_s
