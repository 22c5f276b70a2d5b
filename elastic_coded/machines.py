"""Machine descriptions, checked before Ray starts.  Pure: no Ray."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ArgumentError

__all__ = ["MachineSpec", "machine_specs", "per_process"]

EMULATED_PER_PROCESS = 4  # machines per worker process when speeds are emulated


@dataclass(frozen=True)
class MachineSpec:
    """A machine to start: id, (emulated or initial-estimate) speed, storage budget, and the Ray
    node to pin it to (``None``: anywhere)."""

    id: str
    speed: float = 1.0
    storage: float = 1.0
    node: str | None = None


def _spec(i: int, m, default_storage: float) -> MachineSpec:
    if isinstance(m, MachineSpec):
        return m
    if isinstance(m, dict):
        bad = set(m) - {"id", "speed", "storage", "node"}
        if bad:
            raise ArgumentError(f"machines[{i}]: unknown keys {sorted(bad)}; known: id, speed, "
                                f"storage, node")
        for key in ("speed", "storage"):
            v = m.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ArgumentError(f"machines[{i}].{key}: {v!r} must be a number")
        return MachineSpec(str(m.get("id", f"m{i}")), float(m.get("speed", 1.0)),
                           float(m.get("storage", default_storage)), m.get("node"))
    if isinstance(m, (int, float)) and not isinstance(m, bool):
        return MachineSpec(f"m{i}", float(m), default_storage)
    raise ArgumentError(f"machines[{i}]: a dict {{id, speed, storage}}, a speed, or a "
                        f"MachineSpec; got {m!r}")


def machine_specs(machines, default_storage: float = 1.0, start: int = 0) -> list[MachineSpec]:
    """Specs from a count, or a list of dicts / speeds / :class:`MachineSpec`; every error names
    the machine, the value and the rule.  Ids must be distinct."""
    if isinstance(machines, (int, np.integer)) and not isinstance(machines, bool):
        if machines < 1:
            raise ArgumentError(f"machines: a positive count, got {machines}")
        return [MachineSpec(f"m{i}", 1.0, default_storage) for i in range(int(machines))]
    if machines is None or isinstance(machines, (str, bytes, dict)):
        raise ArgumentError(f"machines: a count, a list of {{id, speed, storage}}, or 'auto'; "
                            f"got {machines!r}")
    try:
        items = list(machines)
    except TypeError:
        raise ArgumentError(f"machines: a count, a list of {{id, speed, storage}}, or 'auto'; "
                            f"got {machines!r}") from None
    out = [_spec(start + i, m, default_storage) for i, m in enumerate(items)]
    for s in out:
        if not (s.speed > 0 and math.isfinite(s.speed)):
            raise ArgumentError(f"machines: speed of {s.id!r} must be positive and finite, "
                                f"got {s.speed}")
        if not 0 < s.storage <= 1:
            raise ArgumentError(f"machines: storage of {s.id!r} must lie in (0, 1], got "
                                f"{s.storage}")
    ids = [s.id for s in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ArgumentError(f"machines: ids must be distinct, {dup} appear more than once")
    return out


def per_process(value, time_scale: float) -> int:
    """The ``machines_per_process`` setting: ``None`` gives 4 machines per worker process when
    speeds are emulated (``time_scale > 0``: compute is paced, so sharing a process costs no
    accuracy) and 1 at real speed (a machine's compute never slows another's); else an
    integer >= 1."""
    if value is None:
        return EMULATED_PER_PROCESS if time_scale > 0 else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"machines_per_process: must be an integer >= 1 or None, got {value!r}")
    return value
