"""The step executors, one per :attr:`~elastic_coded.schemes.registry.Policy.execution`:

* ``whole`` (:mod:`.whole`): the USCTEC family's whole plan dispatched at once;
* ``pull`` (:mod:`.pull`): units pulled as machines free up (``usctec-pull``, ``usctec-auto``,
  ``dynamic``);
* ``unified`` (:mod:`.unified`): Map, Shuffle and Reduce;
* ``hetero`` (:mod:`.hetero`): every master decoded from its first coded rows.

Each is a function ``(ctx, X, events, prepared) -> (product, Outcome)`` over a frozen
:class:`~..context.StepContext`: none imports the cluster.
"""

from __future__ import annotations

from ...schemes.registry import policy_of
from .common import Outcome
from .hetero import run_hetero
from .pull import run_pull
from .unified import UnifiedCache, run_unified
from .whole import run_whole

__all__ = ["EXECUTORS", "run_step", "Outcome", "UnifiedCache"]

EXECUTORS = {"whole": run_whole, "pull": run_pull, "unified": run_unified, "hetero": run_hetero}


def run_step(ctx, X, ev, prep):
    """The step of ``ctx.policy`` by its executor: ``(product, Outcome)``."""
    return EXECUTORS[policy_of(ctx.policy).execution](ctx, X, ev, prep)
