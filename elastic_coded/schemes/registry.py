"""Policies by name (DESIGN.md principle 3): a policy turns the step state into a StepPlan.

Every entry is a pure function ``(placement, available, speeds, L, S) -> StepPlan``; the runtime and
the simulator look policies up here.  Imports are lazy, and an unknown name gets an error listing
the known ones.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["get_policy", "POLICIES", "SPECULATION", "UNCODED", "PULL", "usctec_plan",
           "uncoded_plan", "cyclic_plan", "proportional_plan", "usctec_pull_plan", "usctec_auto_plan",
           "dynamic_plan",
           "ideal_time", "step_code"]


def usctec_plan(placement, available, speeds, L, S):
    """USCTEC (MATH.md §1): the per-step optimum for the speeds given."""
    from .usctec import plan_step

    return plan_step(placement, available, speeds, L, S)


def cyclic_plan(placement, available, speeds, L, S):
    """Coded elastic computing (Yang et al.): equal loads ``(L+S)/N_t``, blind to speeds."""
    from .usctec import plan_step

    return plan_step(placement, available, np.ones(len(tuple(available))), L, S)


def uncoded_plan(placement, available, speeds, L, S):
    """Uncoded: rows split evenly over the machines present (``L=1, S=0``), wait for all."""
    from .usctec import plan_step

    return plan_step(placement, available, np.ones(len(tuple(available))), 1, 0)


def proportional_plan(placement, available, speeds, L, S):
    """Uncoded, rows split in proportion to the speed estimates (``L=1, S=0``), wait for all."""
    from .usctec import plan_step

    return plan_step(placement, available, speeds, 1, 0)


def usctec_pull_plan(placement, available, speeds, L, S):
    """USCTEC executed by pulling (the default, :mod:`.policies.pull`): the plan for ``(L, 0)``,
    with ``S`` coded backups per piece computed by machines that would otherwise be idle."""
    from .policies.pull import coded_pull_plan

    return coded_pull_plan(placement, available, speeds, L, S)


def usctec_auto_plan(placement, available, speeds, L, S):
    """The default: :func:`usctec_pull_plan` with the whole ``(L, S)`` plan beside it, which
    the driver dispatches at once when the step is too short for pulling to pay."""
    from .policies.pull import coded_pull_plan

    return coded_pull_plan(placement, available, speeds, L, S, eager=True)


def dynamic_plan(placement, available, speeds, L, S):
    """The hand-written baseline (:mod:`.policies.pull`): uncoded chunks pulled by the machines,
    backup copies once none is left."""
    from .policies.pull import dynamic_plan as plan

    return plan(placement, available, speeds, 1, 0)


POLICIES: dict[str, Callable] = {
    "usctec-auto": usctec_auto_plan,
    "usctec-pull": usctec_pull_plan,
    "usctec": usctec_plan,
    "dynamic": dynamic_plan,
    "proportional": proportional_plan,
    "cyclic": cyclic_plan,
    "uncoded": uncoded_plan,
    # the uncoded split, executed with speculative backup tasks (see SPECULATION)
    "speculative": uncoded_plan,
}

PULL = frozenset({"usctec-auto", "usctec-pull", "dynamic"})
"""Policies executed by pulling units (:mod:`elastic_coded.runtime.pull`) rather than by
dispatching the whole plan at once."""

#: Policies whose execution launches backup copies: a task running longer than this multiple of
#: the median completed task's time gets a copy on a machine holding a replica of its rows, and
#: the first copy to finish wins (Spark's speculation, cubed's backup rule).
SPECULATION: dict[str, float] = {"speculative": 1.5}


UNCODED = frozenset({"uncoded", "speculative", "dynamic", "proportional"})
"""Policies that plan the uncoded split (``L = 1, S = 0``)."""


def step_code(policy: str, L: int, S: int, r: int, field=None) -> tuple[int, int, int]:
    """The code a step with ``r`` input columns runs: ``(L_step, S_step, pad)``.

    The uncoded policies run ``(1, 0)`` and never pad.  A coded policy splits ``B`` into
    ``L_step <= L`` column blocks of ``ceil(r / L_step)`` columns, choosing the ``L_step`` that
    dispatches the fewest products, ``(L_step + S) ceil(r / L_step)`` per row: ``L`` itself when
    ``L`` divides ``r``, ``r`` when ``r < L`` (no zero columns; redundancy ``(r + S) / r``), and
    otherwise the best trade between the redundancy ``(L_step + S) / L_step`` and the ``pad``
    zero columns that make ``r`` a multiple of ``L_step`` (ties: the larger ``L_step``).  Over
    the reals (``field``) a complex code's blocks take columns in pairs
    (:attr:`~elastic_coded.algebra.lagrange.LagrangeCode.width` ``w``): the count is then
    ``(L_step + S) w ceil(r / (w L_step))``."""
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise ValueError(f"r: the input's column count must be an int >= 1, got {r!r}")
    if policy in UNCODED:
        return 1, 0, 0
    if field is None:
        width = lambda l: 1  # noqa: E731
    else:
        from ..algebra.lagrange import code_width

        width = lambda l: code_width(field, l, S)  # noqa: E731
    block = {l: width(l) * l for l in range(1, L + 1)}  # the columns r must be a multiple of
    best = min(range(1, L + 1), key=lambda l: ((l + S) * -(-r // block[l]) * (block[l] // l), -l))
    return best, S, (-r) % block[best]


def ideal_time(speeds, L: int, S: int) -> float:
    """The ideal bound on a step's computation time: the step's total work with the ``(L+S)/L``
    redundancy, spread perfectly over the machines present, in the units of MATH.md §1 divided by
    ``L`` (work of the whole ``A @ B`` = 1)."""
    s = np.asarray(speeds, dtype=np.float64)
    return float((L + S) / L / s.sum())


def get_policy(name: str) -> Callable:
    """The plan function of policy ``name``."""
    try:
        return POLICIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"policy: unknown policy {name!r}; known: {sorted(POLICIES)}") from None
