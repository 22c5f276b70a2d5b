"""The heterogeneous-masters family's storage as the runtime keeps it: coded rows of every
master, re-planned when the machines change.  Pure: no Ray.

Its :class:`~elastic_coded.schemes.families.Family` (the protocol every storage family answers,
in :mod:`elastic_coded.schemes.families` with the values it returns); made by name through the
family registry (:func:`~elastic_coded.schemes.families.make_family`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import cast

import numpy as np

from ...machines import MachineSpec
from ...schemes.families import Change, Family, Present, Setup, Spans, no_holders
from ...schemes.policies.rules import hetero_needs_replan
from ...schemes.wire import StepRequest
from . import policy as het

__all__ = ["HeteroFamily", "make_hetero"]


class HeteroFamily:
    """Coded rows of every master (sources ``C{m}``), re-planned when the machines change."""

    name = "hetero"
    has_LS = False

    def __init__(self, opts: het.HeteroOptions, L: Iterable[int], field_order: int | None,
                 seed: int = 0):
        self.opts, self.Lm, self.seed = opts, tuple(L), seed
        self.caps = het.capacities(opts, self.Lm, field_order)
        self._storage: het.HeteroStorage | None = None
        self.explicit: dict[Hashable, tuple[np.ndarray, np.ndarray]] = {}
        self._fresh: set[Hashable] = set()

    @property
    def storage(self) -> het.HeteroStorage | None:
        return self._storage

    def sources(self) -> tuple[str, ...]:
        return tuple(het.source_name(m) for m in range(len(self.Lm)))

    def _replan(self, machines: tuple[Hashable, ...], speeds: Mapping[Hashable, float]) -> Change:
        self._storage, moves, shrink = het.plan_storage(
            self.opts, self.Lm, list(machines), {m: speeds[m] for m in machines},
            self._storage, self.explicit, self.caps, seed=self.seed, fresh=self._fresh)
        self._fresh = set()
        return Change(moves, shrink)

    def start(self, specs: list[MachineSpec]) -> Change:
        ids = tuple(s.id for s in specs)
        self.explicit = het.explicit_columns(self.opts, len(self.Lm), ids)
        return Change(self._replan(ids, {s.id: s.speed for s in specs}).moves)

    def join(self, spec: MachineSpec) -> Change:
        self._fresh.add(spec.id)
        return Change()  # stored at the next repair, with the plan that includes it

    def snapshot(self) -> tuple[het.HeteroStorage | None, set[Hashable]]:
        return (self._storage, set(self._fresh))

    def members(self) -> tuple[Hashable, ...]:
        return () if self._storage is None else self._storage.machines

    def restore(self, state: tuple[het.HeteroStorage | None, Iterable[Hashable]]) -> None:
        self._storage, self._fresh = state[0], set(state[1])

    def forget(self, machine: Hashable) -> None:
        pass

    def repair(self, present: Present, S: int, n_cols: int | None = None) -> Change:
        """Planned anew for the machines ``present`` and their speeds when they changed
        (:func:`~elastic_coded.schemes.policies.rules.hetero_needs_replan`); ``S`` and
        ``n_cols`` do not enter."""
        if not hetero_needs_replan(self._storage, present.machines, self._fresh):
            return Change()
        return self._replan(present.machines, present.speeds)

    def rescue(self, m: int, need: int, exclude: set[int], machines: list[Hashable]) -> Change:
        """Fresh coded rows of master ``m`` on the first of ``machines`` (mid-step)."""
        # the storage start() planned
        self._storage, moves = het.rescue(cast(het.HeteroStorage, self._storage), m, need,
                                          exclude, machines)
        return Change(moves)

    def plan(self, policy: str, present: Present, S: int, request: StepRequest
             ) -> het.HeteroStepPlan:
        st = cast(het.HeteroStorage, self._storage)   # the storage start() planned
        het.check_decodable(st, present.machines)
        rng = np.random.default_rng([self.seed, int(request.step)])
        return het.step_plan(st, rng)

    def holders(self, rows: tuple[int, int], present: Iterable[Hashable]) -> Spans:
        raise no_holders(self.name)

    def state_key(self) -> None:
        return None  # plans are drawn per step


def make_hetero(s: Setup) -> Family:
    return HeteroFamily(s.options, s.masters, getattr(s.field, "order", None), s.seed)
