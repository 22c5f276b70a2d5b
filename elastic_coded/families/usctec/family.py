"""The USCTEC family (MATH.md §1): uncoded rows of ``A`` on every machine within its budget, each
step planned by a policy's plan function and executed whole or by pulling."""

from ..registry import Family

__all__ = ["USCTEC"]

USCTEC = Family(
    "usctec",
    storage="elastic_coded.families.usctec.store:make_usctec",
    runtime="elastic_coded.families.usctec.runtime:USCTEC_SETUP",
    options="elastic_coded.families.usctec.pull:PullOptions",
    executions=("whole", "pull"),
    plans=True,
    coded_LS=True,
    jobs=None,
)
