"""elastic_coded: coded, elastic, straggler-tolerant distributed matrix computation on Ray.

The public API.  Names are imported on first use, so ``import elastic_coded`` (and every worker
process, which imports the package) stays light; planning and algebra never import Ray.
"""

from __future__ import annotations

from ._lazy import lazy_names

__version__ = "0.1.0"

_LAZY = {
    "ElasticCluster": "runtime.cluster", "StepReport": "runtime.report",
    "MachineSpec": "machines", "simulate": "sim.runner", "register_policy": "schemes.registry",
    "load_churn": "churn", "field": "algebra.fields",
    **{name: "options" for name in ("RunOptions", "VerifyOptions", "RayOptions",
                                    "ReportOptions")},
    **{name: "errors" for name in ("ElasticCodedError", "ArgumentError", "ConfigError",
                                   "PlanError", "ShortOfMachines", "StepFailed",
                                   "VerificationError", "ToleranceExceeded")},
}
"""The public surface (at most 20 names): what a user calls.  The planner, the algebra and the
rest of the errors stay importable from their modules."""

_MOVED = {
    "optimal_load": "families.usctec", "fill": "families.usctec",
    "cyclic_placement": "families.usctec", "design_placement": "families.usctec",
    "plan_step": "families.usctec", "validate": "families.usctec",
    "expected_time": "families.usctec", "SpeedModel": "families.usctec",
    "Placement": "schemes.plan", "StepPlan": "schemes.plan",
    "ChurnScript": "churn", "parse_churn": "churn", "OptionError": "options",
    "BudgetError": "errors",
}
"""Names the top level exported before: still found there, with a warning (once per name) that
gives their module."""

__all__ = sorted(_LAZY) + ["__version__"]

__getattr__, __dir__ = lazy_names(__name__, _LAZY, ("__version__",), moved=_MOVED)
