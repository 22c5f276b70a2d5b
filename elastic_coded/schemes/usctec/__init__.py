"""USCTEC planning (MATH.md §1): optimal loads, filling, placements, per-step plans, validation.

Pure: numpy and scipy only.  Every function takes plain data and returns frozen dataclasses from
:mod:`elastic_coded.schemes.plan`.

Submodules: ``_load`` (water-filling and filling), ``_placement`` (cyclic, filled and designed
placements; expected time), ``_fractional`` (atoms and the per-step LP), ``_rounding`` (the exact
integer optimum and its layout), ``_plan`` (``plan_step``), ``_validate`` (constraints
(9b)-(9f)), ``_repair`` (storage repair and joiners), ``_milp`` (the integer optimum by a MILP, a
yardstick for tests and benchmarks).

Rounding (how a fractional plan becomes integer rows): ``plan_step`` returns the *integer
optimum* ``c_int`` over whole rows, found by parametric max-flow, and

    c <= c_int <= max_n ceil(q theta[n]) / (q s[n]) < c + 1 / (q min_{theta[n] > 0} s[n])

(:func:`rounding_bound`).  Columns are not split (``F_g = 1``, every piece covers all ``r/L``
columns), so columns need no rounding.
"""

from ..plan import Group, Piece, Placement, PlanError, RowBlock, StepPlan
from ._checks import (
                      _check_budgets,
                      _check_enough,
                      _check_rows,
                      _machines,
                      _placement_args,
                      check_code,
                      check_speeds,
)
from ._fractional import _mean_c, _present_atoms, _step_lp
from ._layout import _cum_round, _merge_blocks, _sorted_holders
from ._load import _TOL, fill, optimal_load
from ._milp import integer_optimum
from ._placement import cyclic_placement, design_placement, expected_time, filled_placement
from ._plan import plan_step
from ._repair import _rebalance, extend_placement, repair_placement
from ._rounding import rounding_bound
from ._speed_model import SpeedModel, _speed_samples
from ._validate import _covers, _stored_ranges, validate

__all__ = [
    "SpeedModel", "optimal_load", "fill", "cyclic_placement", "filled_placement",
    "design_placement", "plan_step", "validate", "expected_time", "rounding_bound",
    "repair_placement", "extend_placement", "check_speeds", "check_code", "integer_optimum",
]
