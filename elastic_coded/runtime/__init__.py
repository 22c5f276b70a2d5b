"""The Ray runtime: worker processes, the controller actor and the driver API.

Names are imported on first use, so that a worker process, which imports only
:mod:`.hosting` and :mod:`.worker`, does not load the driver's modules."""

from __future__ import annotations

from .._lazy import lazy_names

_LAZY = {"ElasticCluster": "cluster", "MachineSpec": "cluster", "StepReport": "report",
         "summarize": "report"}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
