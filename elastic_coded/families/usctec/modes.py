"""``usctec-auto``'s choice of execution for each step: pull units with coded backups, the
whole ``(L, S)`` plan at once (``"eager"``), or the whole ``(1, 0)`` split (``"lean"``), from
the steps before it; and the execution expected of the next step, whose plan is asked for
ahead.  Pure: no Ray.  (Re-exported by :mod:`.pull`.)"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MODES", "PROBE_EVERY", "choose_mode", "next_mode", "prefer_pull"]

MODES = ("pull", "eager", "lean")
"""``usctec-auto``'s executions of a step (:func:`choose_mode`)."""


PROBE_EVERY = 16
"""``usctec-auto`` runs a lean step (whose stragglers are seen) at least once every this many
steps: the whole ``(L, S)`` plan cancels its slowest calls, so it never sees who straggled."""


def choose_mode(history: Iterable[tuple[bool, int]], pull_pays: bool,
                probe_every: int = PROBE_EVERY) -> str:
    """``usctec-auto``'s execution of a step, from its recent steps (``history``: ``(observed,
    slowed)`` per step, oldest first; ``observed`` whether the step could see its stragglers,
    ``slowed`` how many it saw) and :func:`prefer_pull`:

    * ``"lean"``: the last step that could see stragglers (within the last ``probe_every``)
      saw none: no redundancy, so nothing to decode either: the ``(1, 0)`` plan (rows split in
      proportion to the speeds) dispatched whole, the step deadline's coded backups guarding
      against a surprise.  Also the probe when no step in the last ``probe_every`` could see;
    * ``"pull"``: stragglers seen (or not known) and a step long enough for pulling to pay;
    * ``"eager"``: the same on a short step: the whole ``(L, S)`` plan at once."""
    hist = list(history)
    seen = [(i, n) for i, (obs, n) in enumerate(hist) if obs]
    recent = seen and seen[-1][0] >= len(hist) - probe_every
    if recent and seen[-1][1] == 0:
        return "lean"
    if pull_pays:
        return "pull"
    return "eager" if recent else "lean"


def next_mode(history: Iterable[tuple[bool, int]], mode: str, pull_pays: bool,
              probe_every: int = PROBE_EVERY) -> str:
    """The execution :func:`choose_mode` is expected to pick for the step after one run in
    ``mode`` on ``history`` (its plan is asked for while that step runs): as if the step saw
    what its mode saw before (none slowed after a lean step, some after a pull step; an eager
    step sees nothing).  Wrong only when a lean step sees a straggler or a pull step none."""
    guess = (mode != "eager", 0 if mode == "lean" else 1)
    return choose_mode(list(history) + [guess], pull_pays, probe_every)


def prefer_pull(expected_s: float, L: int, S: int, machines: int, units: int,
                call_cost_s: float) -> bool:
    """``usctec-auto``'s choice: pull when the work the whole plan's redundancy adds,
    ``S / L`` of the step's expected time ``expected_s``, exceeds the driver's cost of the calls
    a pull makes (``units`` plus two slow-start calls per machine, ``call_cost_s`` each, the
    driver making them one after another)."""
    return S > 0 and S / L * expected_s > machines * (units + 2) * call_cost_s
