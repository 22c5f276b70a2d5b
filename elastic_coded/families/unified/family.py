"""The unified family (MATH.md §2): coded batches, re-encoded when the code can no longer
cover the machines present; a step is Map, Shuffle and Reduce."""

from ..registry import Family

__all__ = ["UNIFIED"]

UNIFIED = Family(
    "unified",
    storage="elastic_coded.schemes.families:make_unified",
    runtime="elastic_coded.runtime.family_setup:UNIFIED_SETUP",
    options="elastic_coded.schemes.policies.unified:UnifiedOptions",
    sim="elastic_coded.sim.unified:SIM_MODEL",
)
