"""The heterogeneous-masters family (MATH.md §3): coded rows of every master, re-planned when
the machines change; every master decodes from its first coded rows."""

from ..registry import Family

__all__ = ["HETERO"]

HETERO = Family(
    "hetero",
    storage="elastic_coded.families.hetero.store:make_hetero",
    runtime="elastic_coded.families.hetero.runtime:HETERO_SETUP",
    options="elastic_coded.families.hetero.policy:HeteroOptions",
    sim="elastic_coded.families.hetero.sim:SIM_MODEL",
    masters=True,
)
