"""The USCTEC family's storage as the runtime keeps it: uncoded rows of ``A`` on every
machine within its budget, repaired to ``L+S`` holders when machines change.  Pure: no Ray.

Its :class:`~elastic_coded.schemes.families.Family` (the protocol every storage family answers,
in :mod:`elastic_coded.schemes.families` with the values it returns); made by name through the
family registry (:func:`~elastic_coded.schemes.families.make_family`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, cast

from ...errors import ArgumentError
from ...machines import MachineSpec
from ...schemes.families import Change, Family, Present, Setup, Spans, no_rescue
from ...schemes.plan import Placement, StepPlan
from ...schemes.registry import get_policy, policy_of, step_code
from ...schemes.row_units import UnitsFamily, row_units
from ...schemes.wire import StepRequest
from . import (
    SpeedModel,
    cyclic_placement,
    design_placement,
    extend_placement,
    repair_placement,
    validate,
)
from .pull import PullPlan

__all__ = ["UsctecFamily", "make_usctec"]

_Plan = StepPlan | PullPlan


class UsctecFamily:
    """Uncoded rows of ``A`` (source ``"A"``) on every machine, within its budget (MATH.md §1)."""

    name = "usctec"
    has_LS = True
    pure_repair = True

    def __init__(self, num_rows: int, L: int, S: int, field: Any, seed: int = 0,
                 placement_kind: str = "design", design_samples: int = 16):
        self.q, self.L, self.S, self.F, self.seed = int(num_rows), int(L), int(S), field, seed
        self.kind, self.samples = placement_kind, int(design_samples)
        self.placement: Placement | None = None

    @property
    def storage(self) -> Placement | None:
        return self.placement

    @property
    def _placed(self) -> Placement:
        """The placement, once :meth:`start` (or :meth:`restore`) made one."""
        return cast(Placement, self.placement)

    def sources(self) -> tuple[str, ...]:
        return ("A",)

    def start(self, specs: list[MachineSpec]) -> Change:
        ids = [s.id for s in specs]
        budgets = [s.storage for s in specs]
        if self.kind == "cyclic":
            self.placement = cyclic_placement(
                self.q, ids, self.L, self.S,
                budgets=None if all(b >= 1 for b in budgets) else budgets)
        else:
            model = SpeedModel(tuple(s.speed for s in specs), straggle_prob=0.1,
                               straggle_factor=5.0)
            self.placement = design_placement(self.q, ids, budgets, model, self.L, self.S,
                                              samples=self.samples, seed=self.seed)
        ranges = self.placement.ranges_by_machine()
        return Change([("A", a, b, m) for m in ids for a, b in ranges.get(m, ())])

    def join(self, spec: MachineSpec) -> Change:
        self.placement, moved = extend_placement(self._placed, spec.id, spec.storage)
        return Change([("A", a, b, m) for a, b, m in moved])

    def forget(self, machine: Hashable) -> None:
        """A machine left: its copies are gone now (a later machine of the same id starts
        empty); the next repair restores the replication."""
        self.placement = self._placed.without(machine)

    def snapshot(self) -> Placement | None:
        return self.placement

    def members(self) -> tuple[Hashable, ...]:
        return self._placed.machines

    def restore(self, state: Placement | None) -> None:
        self.placement = state

    def repair(self, present: Present, S: int, n_cols: int | None = None) -> Change:
        """Every row on ``L+S`` of the machines ``present`` within their budgets
        (:func:`~elastic_coded.families.usctec.repair_placement`; a
        :class:`~elastic_coded.errors.BudgetError` when they cannot hold that).  A machine
        whose rows the repair moved elsewhere keeps only its new ranges (``shrink``)."""
        ids = list(present.machines)
        budgets = {m: present.budgets[m] for m in ids}
        whole = self._placed.rows_by_machine()   # becomes: what each would hold, kept whole
        self.placement, moved = repair_placement(self._placed, ids, self.L, S, budgets)
        for a, b, m in moved:
            whole[m] = whole.get(m, 0) + b - a
        now = self.placement.ranges_by_machine()
        shrink = {m: {"A": tuple(now.get(m, ()))} for m in ids
                  if sum(b - a for a, b in now.get(m, ())) < whole.get(m, 0)}
        return Change([("A", a, b, m) for a, b, m in moved], shrink)

    def rescue(self, m: int, need: int, exclude: set[Hashable], machines: list[Hashable]) -> Change:
        raise no_rescue(self.name, m)

    def plan(self, policy: str, present: Present, S: int, request: StepRequest) -> _Plan:
        """The step's plan for its code (:func:`~elastic_coded.schemes.registry.step_code`:
        fewer column blocks than ``L`` for narrow inputs, never zero columns below ``L``)."""
        ids = list(present.machines)
        sp = tuple(present.speeds[m] for m in ids)
        L_step, S_step, _ = step_code(policy, self.L, S, max(1, request.n_cols), self.F)
        modes = getattr(request, "modes", ())
        kw = {"modes": tuple(modes)} if modes and policy_of(policy).modes else {}
        plan: _Plan = get_policy(policy)(self.placement, ids, sp, L_step, S_step, **kw)
        base = cast("StepPlan | None", getattr(plan, "base", plan))
        if base is not None:   # a pull plan: its base (its whole plans: checked)
            validate(base, self._placed)
        return plan

    def holders(self, rows: tuple[int, int], present: Iterable[Hashable]) -> Spans:
        """Present holders of ``rows``, cut at block boundaries (:meth:`Placement.holders_of`)."""
        return self._placed.holders_of(rows, present)

    def state_key(self) -> Placement | None:
        return self.placement


def make_usctec(s: Setup) -> Family:
    """The USCTEC family, over row units of equal nonzeros for a sparse ``A``."""
    units = None if s.row_prefix is None else row_units(s.row_prefix)
    if units is None:
        return UsctecFamily(s.num_rows, s.L, s.S, s.field, s.seed, s.placement)
    if units.num_rows != s.num_rows:
        raise ArgumentError(f"row_prefix: covers {units.num_rows} rows, A has {s.num_rows}")
    inner = UsctecFamily(units.num_units, s.L, s.S, s.field, s.seed, s.placement)
    return UnitsFamily(inner, units)
