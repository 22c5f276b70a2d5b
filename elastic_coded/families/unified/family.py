"""The unified family (MATH.md §2): coded batches, re-encoded when the code can no longer
cover the machines present; a step is Map, Shuffle and Reduce."""

from ..registry import Family

__all__ = ["UNIFIED"]

UNIFIED = Family(
    "unified",
    storage="elastic_coded.families.unified.store:make_unified",
    runtime="elastic_coded.families.unified.runtime:UNIFIED_SETUP",
    options="elastic_coded.families.unified.policy:UnifiedOptions",
    sim="elastic_coded.families.unified.sim:SIM_MODEL",
)
