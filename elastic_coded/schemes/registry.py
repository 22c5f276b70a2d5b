"""Policies by name (DESIGN.md principle 3): one :class:`Policy` value per policy, in one
registry that the runtime, the simulator, the config and the CLI all read.

A USCTEC-family policy's plan is a pure function ``(placement, available, speeds, L, S) ->
StepPlan``; its execution (whole or pulled), speculation, uncoded split and speed blindness are
fields of its value, not entries in separate tables.  Imports are lazy, and an unknown name gets
an error listing the known ones.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from ..families import built_in, family_names, family_of, register_family

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..families import Family
    from ..families.usctec.pull import PullPlan
    from .plan import Placement, StepPlan

__all__ = ["Policy", "REGISTRY", "register_policy", "unregister_policy", "policy_of",
           "added_policies",
           "get_policy", "usctec_plan",
           "uncoded_plan", "cyclic_plan", "proportional_plan", "usctec_pull_plan",
           "usctec_auto_plan",
           "dynamic_plan",
           "ideal_time", "step_code"]


def usctec_plan(placement: Placement, available: Iterable[Hashable], speeds: npt.ArrayLike,
                L: int, S: int) -> StepPlan:
    """USCTEC (MATH.md §1): the per-step optimum for the speeds given."""
    from ..families.usctec import plan_step

    return plan_step(placement, available, speeds, L, S)


def cyclic_plan(placement: Placement, available: Iterable[Hashable], speeds: npt.ArrayLike,
                L: int, S: int) -> StepPlan:
    """Coded elastic computing (Yang et al.): equal loads ``(L+S)/N_t``, blind to speeds."""
    from ..families.usctec import plan_step

    return plan_step(placement, available, np.ones(len(tuple(available))), L, S)


def uncoded_plan(placement: Placement, available: Iterable[Hashable], speeds: npt.ArrayLike,
                 L: int, S: int) -> StepPlan:
    """Uncoded: rows split evenly over the machines present (``L=1, S=0``), wait for all."""
    from ..families.usctec import plan_step

    return plan_step(placement, available, np.ones(len(tuple(available))), 1, 0)


def proportional_plan(placement: Placement, available: Iterable[Hashable],
                      speeds: npt.ArrayLike, L: int, S: int) -> StepPlan:
    """Uncoded, rows split in proportion to the speed estimates (``L=1, S=0``), wait for all."""
    from ..families.usctec import plan_step

    return plan_step(placement, available, speeds, 1, 0)


def usctec_pull_plan(placement: Placement, available: Iterable[Hashable],
                     speeds: npt.ArrayLike, L: int, S: int) -> PullPlan:
    """USCTEC executed by pulling (the default, :mod:`~elastic_coded.families.usctec.pull`): the
    plan for ``(L, 0)``, with ``S`` coded backups per piece computed by machines that would
    otherwise be idle."""
    from ..families.usctec.pull import coded_pull_plan

    return coded_pull_plan(placement, available, speeds, L, S)


def usctec_auto_plan(placement: Placement, available: Iterable[Hashable],
                     speeds: npt.ArrayLike, L: int, S: int,
                     modes: tuple[str, ...] | None = None) -> PullPlan:
    """The default: :func:`usctec_pull_plan` with the whole ``(L, S)`` and ``(1, 0)`` plans
    beside it, which the driver dispatches at once when the step is too short for pulling to
    pay or none straggles; ``modes`` makes only the plans of those executions."""
    from ..families.usctec.pull import coded_pull_plan

    return coded_pull_plan(placement, available, speeds, L, S, eager=True, modes=modes)


def dynamic_plan(placement: Placement, available: Iterable[Hashable], speeds: npt.ArrayLike,
                 L: int, S: int) -> PullPlan:
    """The hand-written baseline (:mod:`~elastic_coded.families.usctec.pull`): uncoded chunks
    pulled by the machines, backup copies once none is left."""
    from ..families.usctec.pull import dynamic_plan as plan

    return plan(placement, available, speeds, 1, 0)


@dataclass(frozen=True)
class Policy:
    """Everything the runtime, the simulator, the config and the CLI know about one policy.

    ``family``: what the machines store (``usctec``, ``unified``, ``hetero``).  ``plan``: the
    plan function ``(placement, available, speeds, L, S) -> StepPlan`` (USCTEC family; ``None``
    for the other families, whose storage is their plan).  ``execution``: ``"whole"`` (the plan
    dispatched at once) or ``"pull"`` (units pulled as machines free up,
    :mod:`~elastic_coded.families.usctec.pull`);
    the other families run their own executor (``"unified"``, ``"hetero"``).  ``speculation``:
    the multiple of the median task time after which a running task gets a backup copy
    (``None``: none).  ``uncoded``: the plan is the uncoded split (``L = 1, S = 0``).
    ``speed_blind``: the plan ignores the speed estimates (the simulator caches it without
    them)."""

    name: str
    family: str
    plan: Callable[..., StepPlan | PullPlan] | None = None
    execution: str = "whole"
    speculation: float | None = None
    uncoded: bool = False
    speed_blind: bool = False
    modes: tuple[str, ...] = ()
    """The executions the policy chooses among each step (``usctec-auto``: pull, eager, lean);
    its plan function then takes ``modes=`` and makes only the plans asked for
    (:attr:`~elastic_coded.schemes.wire.StepRequest.modes`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentError(f"name: a policy's name is a non-empty string, got {self.name!r}")
        if not isinstance(self.family, str) or self.family not in family_names():
            raise ArgumentError(f"family: one of {family_names()}, got {self.family!r}")
        fam = family_of(self.family)
        if self.execution not in fam.executions:
            raise ArgumentError(f"execution: a {self.family} policy runs {fam.executions}, got "
                                f"{self.execution!r}")
        if (self.plan is None) == fam.plans:
            raise ArgumentError(f"plan: a plan function for a family whose policies plan "
                                f"({[n for n in family_names() if family_of(n).plans]}) only, "
                                f"got {self.plan!r} for {self.family}")
        if self.speculation is not None and not (self.speculation > 1 and
                                                 self.execution == "whole"):
            raise ArgumentError(f"speculation: a multiple > 1 on a whole plan, got "
                                f"{self.speculation!r} ({self.execution})")

    @property
    def pulls(self) -> bool:
        return self.execution == "pull"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its family when that was added
        (:func:`~elastic_coded.families.register_family`), so that the process unpickling it
        (the controller) learns the family with the policy."""
        fam = None if built_in(self.family) else family_of(self.family)
        return (_policy, (fam, {f.name: getattr(self, f.name) for f in fields(self)}))


def _policy(family: Family | None, kwargs: dict[str, Any]) -> Policy:
    if family is not None and family.name not in family_names():
        register_family(family)
    return Policy(**kwargs)


REGISTRY: dict[str, Policy] = {}
"""Every policy by name, in the order listed (:func:`register_policy` adds one)."""


def register_policy(policy: Policy) -> Policy:
    """Add ``policy`` to the registry (a name already there is an error); the runtime, the
    simulator, the config and the CLI then know it.  Register before building an
    ``ElasticCluster``: its controller learns the added policies when it starts.  Returns it."""
    if not isinstance(policy, Policy):
        raise ArgumentTypeError(f"policy: a Policy, got {type(policy).__name__}")
    if policy.name in REGISTRY:
        raise ArgumentError(f"policy: {policy.name!r} is already registered")
    REGISTRY[policy.name] = policy
    return policy


def unregister_policy(name: str) -> None:
    """Take a policy added by :func:`register_policy` out again (tests)."""
    if name in _BUILT_IN:
        raise ArgumentError(f"policy: {name!r} is built in")
    REGISTRY.pop(name, None)


def added_policies() -> tuple[Policy, ...]:
    """The policies registered beyond the built-in ones (a driver sends them to its
    controller, which registers them in its own process)."""
    return tuple(p for n, p in REGISTRY.items() if n not in _BUILT_IN)


def policy_of(name: Any) -> Policy:
    """The registered policy ``name``; an unknown name gets an error listing the known ones."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ArgumentError(f"policy: unknown policy {name!r}; known: {sorted(REGISTRY)}") from None


for _p in (
    Policy("usctec-auto", "usctec", usctec_auto_plan, "pull", modes=("pull", "eager", "lean")),
    Policy("usctec-pull", "usctec", usctec_pull_plan, "pull"),
    Policy("usctec", "usctec", usctec_plan),
    Policy("dynamic", "usctec", dynamic_plan, "pull", uncoded=True),
    Policy("proportional", "usctec", proportional_plan, uncoded=True),
    Policy("cyclic", "usctec", cyclic_plan, speed_blind=True),
    Policy("uncoded", "usctec", uncoded_plan, uncoded=True, speed_blind=True),
    # the uncoded split, executed with speculative backup tasks (Spark's speculation, cubed's
    # backup rule): a task running longer than 1.5x the median completed task gets a copy on a
    # machine holding a replica of its rows, and the first copy to finish wins
    Policy("speculative", "usctec", uncoded_plan, speculation=1.5, uncoded=True,
           speed_blind=True),
    Policy("unified", "unified", execution="unified"),
    Policy("hetero", "hetero", execution="hetero"),
):
    register_policy(_p)
_BUILT_IN = frozenset(REGISTRY)


def step_code(policy: str, L: int, S: int, r: int, field: Any = None) -> tuple[int, int, int]:
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
        raise ArgumentError(f"r: the input's column count must be an int >= 1, got {r!r}")
    if policy_of(policy).uncoded:
        return 1, 0, 0
    width: Callable[[int], int]
    if field is None:
        width = lambda l: 1  # noqa: E731
    else:
        from ..algebra.lagrange import code_width

        width = lambda l: code_width(field, l, S)  # noqa: E731
    block = {l: width(l) * l for l in range(1, L + 1)}  # the columns r must be a multiple of
    best = min(range(1, L + 1), key=lambda l: ((l + S) * -(-r // block[l]) * (block[l] // l), -l))
    return best, S, (-r) % block[best]


def ideal_time(speeds: npt.ArrayLike, L: int, S: int) -> float:
    """The ideal bound on a step's computation time: the step's total work with the ``(L+S)/L``
    redundancy, spread perfectly over the machines present, in the units of MATH.md §1 divided by
    ``L`` (work of the whole ``A @ B`` = 1)."""
    s = np.asarray(speeds, dtype=np.float64)
    return float((L + S) / L / s.sum())


def get_policy(name: str) -> Callable[..., Any]:  # Any: callers take a pull plan's base by getattr
    """The plan function of USCTEC-family policy ``name``."""
    p = policy_of(name)
    if p.plan is None:
        raise ArgumentError(f"policy: {name!r} stores for {p.family} and has no plan function; "
                            f"the USCTEC family's: "
                            f"{sorted(n for n, q in REGISTRY.items() if q.plan)}")
    return p.plan
