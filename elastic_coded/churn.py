"""Churn scripts: which machines leave, crash, join or slow down at which step.

Pure (no Ray): the runtime and the simulator read the same :class:`ChurnScript`.

YAML form::

    seed: 7
    events:
      - {step: 3, leave: m2}                       # graceful departure before the step
      - {step: 5, crash: m4}                       # crash in the middle of step 5
      - {step: 7, join: {id: m12, speed: 2.0, storage: 0.8}}
      - {step: 9, slow: m1, factor: 5, steps: 3}   # 5x slower during steps 9, 10, 11
      - {step: 4, corrupt: m3}                     # returns wrong results in step 4
      - {step: 6, corrupt: [m5, m6], steps: 2}     # ... in steps 6 and 7
      - {step: 8, corrupt: m7, forever: true}      # ... from step 8 on, while present
    random:                                        # optional seeded generator, per step
      leave: 0.02        # probability that one present machine leaves gracefully
      crash: 0.02        # probability that one present machine crashes mid-step
      join: 0.04         # probability that a new machine joins
      stragglers: 2      # machines slowed in every step (chosen at random) ...
      straggle: 0.0      # ... or: each machine straggles with this probability
      factor: 5          # slowdown factor of a straggler
      join_speed: [1, 4] # speed of a joiner drawn uniformly from this range
      join_storage: 0.8
      min_machines: 8    # never let the machines present fall below this
      per_machine: false # true: leave/crash are per-machine probabilities and each of the
                         # machines present at the first step spawns a joiner with prob. join
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ArgumentError, ArgumentTypeError

__all__ = ["Join", "StepEvents", "ChurnScript", "RandomChurn", "load_churn", "parse_churn",
           "parse_events", "machines_named", "CAUGHT_LIMIT"]

CAUGHT_LIMIT = 2
"""A machine caught returning wrong results in this many steps is excluded (the runtime removes
it; the simulator drops it after that step)."""


@dataclass(frozen=True)
class Join:
    """A machine joining: its id, (emulated) speed and storage budget."""

    id: str
    speed: float = 1.0
    storage: float = 1.0


@dataclass(frozen=True)
class StepEvents:
    """What happens at one step: graceful ``leave`` before it, ``crash`` during it, ``join``
    before it, ``slow``: ``{machine: factor}`` for this step, and ``corrupt``: machines that
    return wrong results (a nonzero perturbation of what they computed) in this step."""

    leave: tuple = ()
    crash: tuple = ()
    join: tuple = ()
    slow: Mapping = field(default_factory=dict)
    corrupt: tuple = ()

    def is_empty(self) -> bool:
        return not (self.leave or self.crash or self.join or self.slow or self.corrupt)


@dataclass(frozen=True)
class RandomChurn:
    """Seeded per-step churn probabilities (see the module docstring)."""

    leave: float = 0.0
    crash: float = 0.0
    join: float = 0.0
    stragglers: int = 0
    straggle: float = 0.0
    factor: float = 5.0
    join_speed: tuple = (1.0, 1.0)
    join_storage: float = 1.0
    min_machines: int = 1
    per_machine: bool = False

    def __post_init__(self):
        for name in ("leave", "crash", "join", "straggle"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 <= v <= 1):
                raise ArgumentError(f"random.{name}: a probability in [0, 1], got {v!r}")
        if not (isinstance(self.stragglers, int) and self.stragglers >= 0):
            raise ArgumentError(f"random.stragglers: an int >= 0, got {self.stragglers!r}")
        if not (isinstance(self.factor, (int, float)) and self.factor >= 1
                and math.isfinite(self.factor)):
            raise ArgumentError(f"random.factor: a finite number >= 1, got {self.factor!r}")
        js = tuple(float(x) for x in self.join_speed)
        if len(js) != 2 or not 0 < js[0] <= js[1] or not math.isfinite(js[1]):
            raise ArgumentError(f"random.join_speed: [low, high] with 0 < low <= high, got "
                                f"{self.join_speed!r}")
        object.__setattr__(self, "join_speed", js)
        if not 0 < self.join_storage <= 1:
            raise ArgumentError(f"random.join_storage: in (0, 1], got {self.join_storage!r}")


@dataclass(frozen=True)
class ChurnScript:
    """Scripted ``events`` (``{step: StepEvents}``) plus an optional seeded generator."""

    events: Mapping = field(default_factory=dict)
    random: RandomChurn | None = None
    seed: int = 0

    def generator(self) -> ChurnRun:
        """A fresh, deterministic realisation of this script."""
        return ChurnRun(self)


class ChurnRun:
    """Draws each step's events in order; the random part depends only on the seed and on the
    machines present, so the runtime and the simulator see the same trace."""

    def __init__(self, script: ChurnScript):
        self.script = script
        self.rng = np.random.default_rng(script.seed)
        self._joined = 0
        self._base: int | None = None  # machines present at the first step (per_machine mode)
        self._slow: dict[str, tuple[float, int]] = {}  # machine -> (factor, last step)
        self._corrupt: dict[str, float] = {}  # machine -> last step it lies (inf: for good)

    def events(self, step: int, present: Iterable[str], L_plus_S: int) -> StepEvents:
        """Events at ``step`` given the machines ``present`` before it."""
        present = list(present)
        fixed = self.script.events.get(step, StepEvents())
        leave, crash = list(fixed.leave), list(fixed.crash)
        join = list(fixed.join)
        for m, (_factor, until) in list(self._slow.items()):
            if step > until:
                del self._slow[m]
        slow = {m: f for m, (f, _) in self._slow.items()}
        for m, spec in fixed.slow.items():
            factor, steps = spec if isinstance(spec, tuple) else (spec, 1)
            self._slow[m] = (factor, step + steps - 1)
            slow[m] = factor
        for m, until in fixed.corrupt:
            self._corrupt[m] = max(self._corrupt.get(m, -1), step + until - 1)
        corrupt = [m for m, until in self._corrupt.items() if step <= until and m in present]
        r = self.script.random
        if r is not None:
            floor = max(r.min_machines, L_plus_S)
            alive = [m for m in present if m not in leave and m not in crash]
            if r.per_machine:
                if self._base is None:
                    self._base = len(present)
                u = self.rng.random((len(alive), 2))
                n_join = int(self.rng.binomial(self._base, r.join))
                for m, (ul, uc) in zip(list(alive), u):
                    if len(alive) <= floor:
                        break
                    if ul < r.leave:
                        leave.append(m)
                        alive.remove(m)
                    elif uc < r.crash:
                        crash.append(m)
                        alive.remove(m)
            else:
                u = self.rng.random(3)
                if u[0] < r.leave and len(alive) > floor:
                    m = alive[self.rng.integers(len(alive))]
                    leave.append(m)
                    alive.remove(m)
                if u[1] < r.crash and len(alive) > floor:
                    m = alive[self.rng.integers(len(alive))]
                    crash.append(m)
                    alive.remove(m)
                n_join = int(u[2] < r.join)
            for _ in range(n_join):
                self._joined += 1
                speed = float(self.rng.uniform(*r.join_speed))
                join.append(Join(f"j{self._joined}", speed, r.join_storage))
            pool = [m for m in alive if m not in slow]
            k = min(r.stragglers, len(pool))
            for m in (self.rng.choice(pool, size=k, replace=False).tolist() if k else []):
                slow[m] = r.factor
            if r.straggle:
                for m in pool:
                    if m not in slow and self.rng.random() < r.straggle:
                        slow[m] = r.factor
        return StepEvents(tuple(leave), tuple(crash), tuple(join), slow, tuple(sorted(corrupt)))


def _machine(v: Any, where: str) -> str:
    if isinstance(v, (str, int)) and not isinstance(v, bool):
        return str(v)
    raise ArgumentError(f"{where}: a machine id (str), got {v!r}")


def parse_churn(doc: Mapping | None) -> ChurnScript:
    """A :class:`ChurnScript` from a parsed YAML mapping; errors name the key and the rule."""
    if doc is None:
        return ChurnScript()
    if not isinstance(doc, Mapping):
        raise ArgumentError(f"churn: a mapping with 'events' and/or 'random', got "
                            f"{type(doc).__name__}")
    unknown = set(doc) - {"events", "random", "seed"}
    if unknown:
        raise ArgumentError(f"churn: unknown keys {sorted(unknown)}; known: events, random, seed")
    seed = doc.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ArgumentError(f"churn.seed: an int, got {seed!r}")
    by_step: dict[int, dict] = {}
    for i, ev in enumerate(doc.get("events") or []):
        where = f"churn.events[{i}]"
        if not isinstance(ev, Mapping):
            raise ArgumentError(f"{where}: a mapping such as {{step: 3, leave: m2}}, got {ev!r}")
        step = ev.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ArgumentError(f"{where}.step: an int >= 0, got {step!r}")
        kinds = [k for k in ("leave", "crash", "join", "slow", "corrupt") if k in ev]
        if len(kinds) != 1:
            raise ArgumentError(f"{where}: exactly one of leave, crash, join, slow, corrupt; got "
                                f"{kinds or list(ev)}")
        known = {"step", kinds[0], "steps"} | ({"forever"} if kinds[0] == "corrupt" else {"factor"})
        extra = set(ev) - known
        if extra:
            raise ArgumentError(f"{where}: unknown keys {sorted(extra)}")
        slot = by_step.setdefault(step, _new_slot())
        _add_event(slot, ev, kinds[0], where)
    events = {s: StepEvents(tuple(v["leave"]), tuple(v["crash"]), tuple(v["join"]), v["slow"],
                            tuple(v["corrupt"]))
              for s, v in by_step.items()}
    rnd = doc.get("random")
    if rnd is not None:
        if not isinstance(rnd, Mapping):
            raise ArgumentError(f"churn.random: a mapping of probabilities, got {rnd!r}")
        known = set(RandomChurn.__dataclass_fields__)
        bad = set(rnd) - known
        if bad:
            raise ArgumentError(f"churn.random: unknown keys {sorted(bad)}; known: {sorted(known)}")
        rnd = RandomChurn(**rnd)
    return ChurnScript(events, rnd, seed)


def _new_slot() -> dict:
    return {"leave": [], "crash": [], "join": [], "slow": {}, "corrupt": []}


def _add_event(slot: dict, ev: Mapping, kind: str, where: str) -> None:
    """Parse the ``kind`` part of event ``ev`` into ``slot`` (``slow``: machine -> (factor,
    steps); ``corrupt``: (machine, steps))."""
    if kind == "corrupt":
        slot["corrupt"].extend(_corrupt_event(ev, where))
    elif kind in ("leave", "crash"):
        vals = ev[kind] if isinstance(ev[kind], list) else [ev[kind]]
        slot[kind].extend(_machine(v, f"{where}.{kind}") for v in vals)
    elif kind == "join":
        j = ev["join"]
        if isinstance(j, (str, int)):
            j = {"id": j}
        if not isinstance(j, Mapping) or "id" not in j:
            raise ArgumentError(f"{where}.join: {{id, speed, storage}}, got {j!r}")
        speed = float(j.get("speed", 1.0))
        storage = float(j.get("storage", 1.0))
        if not (speed > 0 and math.isfinite(speed)):
            raise ArgumentError(f"{where}.join.speed: positive and finite, got {j.get('speed')!r}")
        if not 0 < storage <= 1:
            raise ArgumentError(f"{where}.join.storage: in (0, 1], got {j.get('storage')!r}")
        slot["join"].append(Join(_machine(j["id"], f"{where}.join.id"), speed, storage))
    else:
        factor = ev.get("factor", 5.0)
        steps = ev.get("steps", 1)
        if not (isinstance(factor, (int, float)) and factor >= 1):
            raise ArgumentError(f"{where}.factor: a number >= 1, got {factor!r}")
        if not (isinstance(steps, int) and steps >= 1):
            raise ArgumentError(f"{where}.steps: an int >= 1, got {steps!r}")
        vals = ev["slow"] if isinstance(ev["slow"], list) else [ev["slow"]]
        for v in vals:
            slot["slow"][_machine(v, f"{where}.slow")] = (float(factor), steps)


KINDS = ("leave", "crash", "join", "slow", "corrupt")


def parse_events(doc, where: str = "events") -> StepEvents:
    """One step's events (``ElasticCluster.multiply(B, events=...)``) in the churn script's
    form, without ``step``: a mapping of any of ``leave``, ``crash``, ``join``, ``slow`` (with
    ``factor``) and ``corrupt``, each a machine id or a list (``join``: ``{id, speed,
    storage}`` or a list of them; ``slow`` also a mapping ``{machine: factor}``), such as
    ``{crash: m4, slow: [m1, m2], factor: 6}``; or a list of such mappings.  A
    :class:`StepEvents` is returned as it is."""
    if isinstance(doc, StepEvents):
        return doc
    docs = doc if isinstance(doc, list) else [doc]
    slot = _new_slot()
    for i, d in enumerate(docs):
        at = where if len(docs) == 1 and not isinstance(doc, list) else f"{where}[{i}]"
        if not isinstance(d, Mapping):
            raise ArgumentTypeError(f"{at}: a StepEvents or a mapping such as {{crash: m4, slow: "
                                    f"m1, factor: 6}}, got {type(d).__name__} {d!r}")
        extra = set(d) - set(KINDS) - {"factor"}
        if extra:
            raise ArgumentError(f"{at}: unknown keys {sorted(map(str, extra))}; known: "
                                f"{', '.join(KINDS)}, factor")
        if "factor" in d and "slow" not in d:
            raise ArgumentError(f"{at}.factor: goes with 'slow', which is not given")
        for kind in (k for k in KINDS if k in d):
            vals = d[kind] if kind == "join" and isinstance(d[kind], list) else [d[kind]]
            if kind == "slow" and isinstance(d[kind], Mapping):
                vals = [{"slow": m, "factor": f} for m, f in d[kind].items()]
            else:
                vals = [{kind: v, **({"factor": d["factor"]} if kind == "slow" and "factor" in d
                                     else {})}
                        for v in vals]
            for v in vals:
                _add_event(slot, v, kind, at)
    return StepEvents(tuple(slot["leave"]), tuple(slot["crash"]), tuple(slot["join"]),
                      {m: f for m, (f, _) in slot["slow"].items()},
                      tuple(sorted({m for m, _ in slot["corrupt"]})))


def machines_named(ev: StepEvents) -> list:
    """``[(kind, machine)]``: every machine an event names (joins by their ids)."""
    return ([("leave", m) for m in ev.leave] + [("crash", m) for m in ev.crash]
            + [("join", j.id) for j in ev.join] + [("slow", m) for m in ev.slow]
            + [("corrupt", m) for m in ev.corrupt])


def _corrupt_event(ev: Mapping, where: str) -> list:
    """``[(machine, steps), ...]`` of a ``corrupt`` event (``steps`` ``inf`` for ``forever``)."""
    forever = ev.get("forever", False)
    if not isinstance(forever, bool):
        raise ArgumentError(f"{where}.forever: true or false, got {forever!r}")
    if forever and "steps" in ev:
        raise ArgumentError(f"{where}: 'steps' or 'forever: true', not both")
    steps = ev.get("steps", 1)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ArgumentError(f"{where}.steps: an int >= 1, got {steps!r}")
    vals = ev["corrupt"] if isinstance(ev["corrupt"], list) else [ev["corrupt"]]
    return [(_machine(v, f"{where}.corrupt"), math.inf if forever else steps) for v in vals]


def load_churn(path: str) -> ChurnScript:
    """Read a churn script from a YAML file."""
    import yaml

    with open(path) as fh:
        return parse_churn(yaml.safe_load(fh))
