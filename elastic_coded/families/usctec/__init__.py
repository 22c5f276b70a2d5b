"""USCTEC planning (MATH.md §1): optimal loads, filling, placements, per-step plans, validation.

Pure: numpy and scipy only.  Every function takes plain data and returns frozen dataclasses from
:mod:`elastic_coded.schemes.plan`.

Submodules: ``_load`` (water-filling and filling), ``_placement`` (cyclic, filled and designed
placements; expected time), ``_fractional`` (atoms and the per-step LP), ``_rounding`` (the exact
integer optimum and its layout), ``_plan`` (``plan_step``), ``_validate`` (constraints
(9b)-(9f)), ``_repair`` (storage repair and joiners), ``_milp`` (the integer optimum by a MILP, a
yardstick for tests and benchmarks).  Imported by name, not by this package: ``pull`` (the pull
policies, over ``queues``, ``queue_base``, ``dynamic_queue``, ``queue_times``, ``asking``,
``modes`` and ``pull_step``), ``store`` (the storage as the runtime keeps it), and the driver
side, which imports Ray: ``runtime`` (the setup), ``executor_whole``, ``executor_pull``,
``verify`` and ``verify_repair``.

Rounding (how a fractional plan becomes integer rows): ``plan_step`` returns the *integer
optimum* ``c_int`` over whole rows, found by parametric max-flow, and

    c <= c_int <= max_n ceil(q theta[n]) / (q s[n]) < c + 1 / (q min_{theta[n] > 0} s[n])

(:func:`rounding_bound`).  Columns are not split (``F_g = 1``, every piece covers all ``r/L``
columns), so columns need no rounding.
"""

# The plan types and the private helpers are re-exported (``name as name``) for the modules and
# tests that import them from here; ``__all__`` lists the public planner only.
from ...schemes.plan import Group as Group
from ...schemes.plan import Piece as Piece
from ...schemes.plan import Placement as Placement
from ...schemes.plan import PlanError as PlanError
from ...schemes.plan import RowBlock as RowBlock
from ...schemes.plan import StepPlan as StepPlan
from ._checks import _check_budgets as _check_budgets
from ._checks import _check_enough as _check_enough
from ._checks import _check_rows as _check_rows
from ._checks import _machines as _machines
from ._checks import _placement_args as _placement_args
from ._checks import check_code, check_speeds
from ._fractional import _mean_c as _mean_c
from ._fractional import _present_atoms as _present_atoms
from ._fractional import _step_lp as _step_lp
from ._layout import _cum_round as _cum_round
from ._layout import _merge_blocks as _merge_blocks
from ._layout import _sorted_holders as _sorted_holders
from ._load import _TOL as _TOL
from ._load import fill, optimal_load
from ._milp import integer_optimum
from ._placement import cyclic_placement, design_placement, expected_time, filled_placement
from ._plan import plan_step
from ._repair import _rebalance as _rebalance
from ._repair import extend_placement, repair_placement
from ._rounding import rounding_bound
from ._speed_model import SpeedModel
from ._speed_model import _speed_samples as _speed_samples
from ._validate import _covers as _covers
from ._validate import _stored_ranges as _stored_ranges
from ._validate import validate

__all__ = [
    "SpeedModel", "optimal_load", "fill", "cyclic_placement", "filled_placement",
    "design_placement", "plan_step", "validate", "expected_time", "rounding_bound",
    "repair_placement", "extend_placement", "check_speeds", "check_code", "integer_optimum",
]
