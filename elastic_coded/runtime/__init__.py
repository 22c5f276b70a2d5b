"""The Ray runtime: worker processes, the controller actor and the driver API.

Names are imported on first use, so that a worker process, which imports only
:mod:`.hosting` and :mod:`.worker`, does not load the driver's modules."""

from __future__ import annotations

import importlib

_LAZY = {"ElasticCluster": "cluster", "MachineSpec": "cluster", "StepReport": "report",
         "summarize": "report"}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'elastic_coded.runtime' has no attribute {name!r}")


def __dir__():
    return __all__
