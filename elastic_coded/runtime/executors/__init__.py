"""Running a step by its executor, one per
:attr:`~elastic_coded.schemes.registry.Policy.execution`, each in its family's folder:

* ``whole`` (:mod:`elastic_coded.families.usctec.executor_whole`): the USCTEC family's whole
  plan dispatched at once;
* ``pull`` (:mod:`elastic_coded.families.usctec.executor_pull`): units pulled as machines free
  up (``usctec-pull``, ``usctec-auto``, ``dynamic``);
* ``unified`` (:mod:`elastic_coded.families.unified.executor`): Map, Shuffle and Reduce;
* ``hetero`` (:mod:`elastic_coded.families.hetero.executor`): every master decoded from its
  first coded rows.

What they share is :mod:`.common` (the :class:`Outcome`, crashes, encoded inputs).  Each
family's :class:`~..family_setup.FamilySetup` names its executors; each is a function
``(ctx, X, events, prepared) -> (product, Outcome)`` over a frozen
:class:`~..context.StepContext`: none imports the cluster.
"""

from __future__ import annotations

from ...schemes.registry import policy_of
from ..family_setup import setup_of
from .common import Outcome

__all__ = ["run_step", "Outcome"]


def run_step(ctx, X, ev, prep):
    """The step of ``ctx.policy`` by its executor: ``(product, Outcome)``."""
    policy = policy_of(ctx.policy)
    return setup_of(policy.family).executor(policy.execution)(ctx, X, ev, prep)
