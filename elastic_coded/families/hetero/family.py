"""The heterogeneous-masters family (MATH.md §3): coded rows of every master, re-planned when
the machines change; every master decodes from its first coded rows."""

from ..registry import Family

__all__ = ["HETERO"]

HETERO = Family(
    "hetero",
    storage="elastic_coded.schemes.families:make_hetero",
    runtime="elastic_coded.runtime.family_setup:HETERO_SETUP",
    options="elastic_coded.schemes.policies.hetero:HeteroOptions",
    sim="elastic_coded.sim.hetero:SIM_MODEL",
    masters=True,
)
