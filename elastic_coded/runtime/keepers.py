"""Storage keepers: how the controller keeps each scheme's storage for the machines present.

One small class per storage family, each a thin adapter over the scheme's pure functions
(:mod:`elastic_coded.schemes.usctec`, :mod:`elastic_coded.schemes.policies.hetero`,
:mod:`elastic_coded.schemes.policies.unified`).  All three answer the same calls from the
controller: ``start`` (first storage), ``join`` (a machine came), ``repair`` (before a step, for
the machines present), ``plan`` (the step's plan) and ``recover`` (work lost to a crash
mid-step).  Moves are ``[(source, start, stop, machine), ...]``; the controller sends them.
"""

from __future__ import annotations

import logging

import numpy as np

from ..schemes.plan import PlanError
from ..schemes.policies import hetero as het
from ..schemes.policies import unified as uni
from ..schemes.policies.rules import hetero_needs_replan
from ..schemes.registry import get_policy, step_code
from ..schemes.usctec import (SpeedModel, cyclic_placement, design_placement, extend_placement,
                              repair_placement, validate)

__all__ = ["UsctecKeeper", "HeteroKeeper", "UnifiedKeeper", "make_keeper"]

log = logging.getLogger(__name__)


class UsctecKeeper:
    """Uncoded rows of ``A`` (source ``"A"``) on every machine, within its budget (MATH.md §1)."""

    family = "usctec"

    def __init__(self, ctrl, placement_kind: str):
        self.c = ctrl
        self.kind = placement_kind
        self.placement = None

    def sources(self) -> tuple:
        return ("A",)

    def start(self, specs) -> list:
        c = self.c
        ids = [s.id for s in specs]
        budgets = [s.storage for s in specs]
        if self.kind == "cyclic":
            self.placement = cyclic_placement(
                c.q, ids, c.L, c.S, budgets=None if all(b >= 1 for b in budgets) else budgets)
        else:
            model = SpeedModel(tuple(s.speed for s in specs), straggle_prob=0.1,
                               straggle_factor=5.0)
            self.placement = design_placement(c.q, ids, budgets, model, c.L, c.S, samples=16,
                                              seed=c.seed)
        return [("A", a, b, m) for m in ids for a, b in self.placement.rows_of(m)]

    def join(self, spec) -> list:
        self.placement, moved = extend_placement(self.placement, spec.id, spec.storage)
        return [("A", a, b, m) for a, b, m in moved]

    def forget(self, machine) -> None:
        """A machine left: its copies are gone now (a later machine of the same id starts
        empty); the next repair restores the replication."""
        self.placement = self.placement.without(machine)

    def snapshot(self):
        return self.placement

    def members(self) -> tuple:
        return self.placement.machines

    def restore(self, state) -> None:
        self.placement = state

    def repair(self, S: int) -> tuple[list, dict]:
        c = self.c
        present = list(c.members)
        budgets = {m: c.members[m].spec.storage for m in present}
        before = {m: self.placement.stored_rows(m) for m in present}
        self.placement, moved = repair_placement(self.placement, present, c.L, S, budgets)
        got = {}
        for a, b, m in moved:
            got[m] = got.get(m, 0) + b - a
        shrink = {m: {"A": tuple(self.placement.rows_of(m))} for m in present
                  if self.placement.stored_rows(m) < before[m] + got.get(m, 0)}
        return [("A", a, b, m) for a, b, m in moved], shrink

    def plan(self, policy: str, present: list, speeds: dict, S: int, request):
        """The step's plan for its code (:func:`~elastic_coded.schemes.registry.step_code`:
        fewer column blocks than ``L`` for narrow inputs, never zero columns below ``L``)."""
        sp = tuple(speeds[m] for m in present)
        L_step, S_step, _ = step_code(policy, self.c.L, S, max(1, request.n_cols), self.c.F)
        plan = get_policy(policy)(self.placement, present, sp, L_step, S_step)
        validate(getattr(plan, "base", plan), self.placement)  # a pull plan: its base
        return plan

    def holders(self, rows: tuple) -> list:
        """Present holders of ``rows``, cut at block boundaries (:meth:`Placement.holders_of`)."""
        return self.placement.holders_of(rows, self.c.members)

    def state_key(self):
        return self.placement


class HeteroKeeper:
    """Coded rows of every master (sources ``C{m}``), re-planned when the machines change."""

    family = "hetero"

    def __init__(self, ctrl, opts: het.HeteroOptions, L: tuple, field_order):
        self.c, self.opts, self.Lm = ctrl, opts, L
        self.caps = het.capacities(opts, L, field_order)
        self.storage: het.HeteroStorage | None = None
        self.explicit: dict = {}
        self._fresh: set = set()

    def sources(self) -> tuple:
        return tuple(het.source_name(m) for m in range(len(self.Lm)))

    def _replan(self) -> tuple[list, dict]:
        c = self.c
        present = list(c.members)
        speeds = {m: c.members[m].speed_est for m in present}
        self.storage, moves, shrink = het.plan_storage(
            self.opts, self.Lm, present, speeds, self.storage, self.explicit, self.caps,
            seed=c.seed, fresh=self._fresh)
        self._fresh = set()
        return moves, shrink

    def start(self, specs) -> list:
        self.explicit = het.explicit_columns(self.opts, len(self.Lm), tuple(s.id for s in specs))
        moves, _ = self._replan()
        return moves

    def join(self, spec) -> list:
        self._fresh.add(spec.id)
        return []  # stored at the next repair, with the plan that includes it

    def snapshot(self):
        return (self.storage, set(self._fresh))

    def members(self) -> tuple:
        return () if self.storage is None else self.storage.machines

    def restore(self, state) -> None:
        self.storage, self._fresh = state[0], set(state[1])

    def forget(self, machine) -> None:
        pass

    def repair(self, S: int) -> tuple[list, dict]:
        if not hetero_needs_replan(self.storage, self.c.members, self._fresh):
            return [], {}
        return self._replan()

    def rescue(self, m: int, need: int, exclude: set, machines: list) -> list:
        """Fresh coded rows of master ``m`` on the first of ``machines`` (mid-step)."""
        self.storage, moves = het.rescue(self.storage, m, need, exclude, machines)
        return moves

    def plan(self, policy: str, present: list, speeds: dict, S: int, request):
        het.check_decodable(self.storage, present)
        rng = np.random.default_rng([self.c.seed, int(request.step)])
        return het.step_plan(self.storage, rng)

    def state_key(self):
        return None  # plans are drawn per step


class UnifiedKeeper:
    """Coded batches (source ``U{version}``), re-encoded when the code can no longer cover."""

    family = "unified"

    def __init__(self, ctrl, opts: uni.UnifiedOptions, field):
        self.c, self.opts, self.F = ctrl, opts, field
        self.storage: uni.UnifiedStorage | None = None
        self.N = opts.N or opts.q
        self.values_moved = 0
        self.redesigns: list = []

    def sources(self) -> tuple:
        return () if self.storage is None else (self.storage.source,)

    def _redesign(self, N: int) -> list:
        st, new = uni.plan_storage(self.opts, self.c.q, list(self.c.members), self.storage, N,
                                   self.F)
        if not new:
            return []
        old = self.storage
        self.storage = st
        A = self.c.read_source("A")
        self.c.put_source(st.source, uni.coded_matrix(st, A))
        if old is not None:
            self.c.drop_source(old.source)
            self.redesigns.append(st.reason)
            log.info("unified: re-encoded for K=%d (%s)", st.design.K, st.reason)
        rows, values = uni.values_moved(st, A.shape[1])
        self.values_moved += values
        return [(st.source, a, b, mach) for mach, rs in uni.store_orders(st).items()
                for a, b in rs]

    def start(self, specs) -> list:
        return self._redesign(self.N)

    def join(self, spec) -> list:
        """A machine joins: used at the next re-design; a re-used id of a server of the design in
        force gets that server's rows again at once."""
        st = self.storage
        if st is None or spec.id not in st.servers:
            return []
        if st.source not in self.c.sources:  # lost with a controller that died: encode anew
            self.c.put_source(st.source, uni.coded_matrix(st, self.c.read_source("A")))
        k = st.servers.index(spec.id)
        return [(st.source, a, b, spec.id) for a, b in st.ranges_of(k)]

    def forget(self, machine) -> None:
        pass

    def snapshot(self):
        return self.storage

    def members(self) -> tuple:
        return ()  # servers that left stay in the design: the Map waits for those present

    def restore(self, state) -> None:
        self.storage = state

    def repair(self, S: int, N: int | None = None) -> tuple[list, dict]:
        return self._redesign(self.N if N is None else N), {}

    def plan(self, policy: str, present: list, speeds: dict, S: int, request):
        st = self.storage
        live = st.live(present)
        if len(live) < st.q:
            raise PlanError(f"machines: {len(live)} servers of the design are present, fewer "
                            f"than q = {st.q}")
        return st

    def state_key(self):
        return None


def make_keeper(ctrl, family: str, options, placement_kind: str, L_masters, field):
    if family == "usctec":
        return UsctecKeeper(ctrl, placement_kind)
    if family == "hetero":
        return HeteroKeeper(ctrl, options, L_masters, getattr(field, "order", None))
    if family == "unified":
        return UnifiedKeeper(ctrl, options, field)
    raise ValueError(f"family: unknown storage family {family!r}")
