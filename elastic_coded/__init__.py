"""elastic_coded: coded, elastic, straggler-tolerant distributed matrix computation on Ray.

The public API.  Names are imported on first use, so ``import elastic_coded`` (and every worker
process, which imports the package) stays light; planning and algebra never import Ray.
"""

from __future__ import annotations

from ._lazy import lazy_names

__version__ = "0.1.0"

_LAZY = {
    "ElasticCluster": "runtime.cluster", "MachineSpec": "machines",
    "field": "algebra.fields",
    "optimal_load": "schemes.usctec", "fill": "schemes.usctec",
    "cyclic_placement": "schemes.usctec", "design_placement": "schemes.usctec",
    "plan_step": "schemes.usctec", "validate": "schemes.usctec",
    "expected_time": "schemes.usctec", "SpeedModel": "schemes.usctec",
    "Placement": "schemes.plan", "StepPlan": "schemes.plan",
    "ChurnScript": "churn", "load_churn": "churn", "parse_churn": "churn",
    **{name: "options" for name in ("RunOptions", "VerifyOptions", "RayOptions",
                                    "ReportOptions", "OptionError")},
    **{name: "errors" for name in ("ElasticCodedError", "ConfigError", "PlanError",
                                   "BudgetError", "ShortOfMachines", "StepFailed",
                                   "VerificationError", "ToleranceExceeded")},
}

__all__ = sorted(_LAZY) + ["__version__"]

__getattr__, __dir__ = lazy_names(__name__, _LAZY, ("__version__",))
