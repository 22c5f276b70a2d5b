"""elastic_coded: coded, elastic, straggler-tolerant distributed matrix computation on Ray.

The public API.  Planning and algebra are pure (no Ray); the runtime (``ElasticCluster``) is
imported on first use, so ``import elastic_coded`` stays light.
"""

from __future__ import annotations

from .algebra import field
from .churn import ChurnScript, load_churn, parse_churn
from .schemes.plan import Placement, PlanError, StepPlan
from .schemes.usctec import (SpeedModel, cyclic_placement, design_placement, expected_time, fill,
                             optimal_load, plan_step, validate)

__version__ = "0.1.0"

__all__ = [
    "ElasticCluster", "MachineSpec", "field", "optimal_load", "fill", "cyclic_placement",
    "design_placement", "plan_step", "validate", "expected_time", "SpeedModel", "Placement",
    "StepPlan", "PlanError", "ChurnScript", "load_churn", "parse_churn", "__version__",
]

_LAZY = {"ElasticCluster": "runtime.cluster", "MachineSpec": "runtime.controller"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'elastic_coded' has no attribute {name!r}")
