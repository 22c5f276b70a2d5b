"""USCTEC: uncoded storage, coded transmission, elastic (MATH.md §1).  The public planner API."""

from .schemes.plan import Group, Piece, Placement, PlanError, RowBlock, StepPlan, Task
from .schemes.reference import run_step
from .schemes.usctec import (SpeedModel, cyclic_placement, design_placement, expected_time,
                             extend_placement, fill, filled_placement, optimal_load, plan_step,
                             repair_placement, rounding_bound, validate)

__all__ = [
    "optimal_load", "fill", "cyclic_placement", "filled_placement", "design_placement",
    "plan_step", "validate", "expected_time", "rounding_bound", "repair_placement",
    "extend_placement", "run_step", "SpeedModel", "Placement", "RowBlock", "StepPlan", "Group",
    "Piece", "Task", "PlanError",
]
