"""The Ray runtime: worker and controller actors and the driver API."""

from .cluster import ElasticCluster, MachineSpec
from .report import StepReport, summarize

__all__ = ["ElasticCluster", "MachineSpec", "StepReport", "summarize"]
