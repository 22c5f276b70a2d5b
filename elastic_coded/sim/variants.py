"""The policies the simulator runs, as values: :class:`Variant` (a USCTEC-family plan function on a
placement kind), the variants of the families the simulator runs by name (each family's
:class:`~elastic_coded.families.SimModel`:
:class:`~elastic_coded.families.unified.sim.UnifiedVariant`,
:class:`~elastic_coded.families.hetero.sim.HeteroVariant`, ...), and the bounds.  Pure (no Ray)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeGuard, cast

from ..errors import ArgumentError, ArgumentTypeError
from ..families import family_names, family_of
from ..families.hetero.policy import HeteroOptions
from ..families.unified.policy import UnifiedOptions
from ..schemes.registry import REGISTRY, get_policy, policy_of
from .executor import Speculation

if TYPE_CHECKING:
    from ..families.usctec.pull import PullPlan
    from ..schemes.plan import StepPlan

__all__ = ["Variant", "VARIANTS", "BOUNDS", "sim_families", "resolve_policies"]


class FamilyVariant(Protocol):
    """A family's own variant value (:class:`~elastic_coded.families.SimModel`'s ``variant``)."""

    @property
    def name(self) -> str: ...

    @property
    def family(self) -> str: ...


BOUNDS = ("ideal", "lower_bound")
"""USCTEC-family bounds, reported like policies (see :mod:`elastic_coded.sim.runner`)."""

FamilyOptions = Mapping[str, object]
"""By family name, the options of another family the simulator runs by name."""


def sim_families() -> tuple[str, ...]:
    """The registered families the simulator runs by name (those with a
    :class:`~elastic_coded.families.SimModel`; their options come with :func:`simulate`)."""
    return tuple(n for n in family_names() if family_of(n).sim is not None)


def _family_variant(p: object) -> TypeGuard[FamilyVariant]:
    """``p`` is a family's own variant value (it names a family the simulator runs)."""
    family = getattr(p, "family", None)
    return isinstance(family, str) and family in sim_families() and not isinstance(p, type)


@dataclass(frozen=True)
class Variant:
    """A policy as the simulator runs it: a plan function (a registry name or a callable
    ``(placement, available, speeds, L, S) -> StepPlan``) on a placement kind (``"cyclic"`` or
    ``"design"``), optionally with speculative backups (uncoded split only; a registry policy
    with a ``speculation`` in the registry gets them by default, with its multiplier) and its own
    learning switch (``None``: the simulation's)."""

    name: str
    plan: str | Callable[..., StepPlan | PullPlan] = "usctec"
    placement: str = "design"
    speculation: Speculation | None = None
    learn: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentError(f"name: a non-empty string, got {self.name!r}")
        if isinstance(self.plan, str):
            get_policy(self.plan)
        elif not callable(self.plan):
            raise ArgumentTypeError(f"plan: a registry name or a plan function, got {self.plan!r}")
        if self.placement not in ("cyclic", "design"):
            raise ArgumentError(f"placement: 'cyclic' or 'design', got {self.placement!r}")
        if self.speculation is None and isinstance(self.plan, str) and \
                policy_of(self.plan).speculation:
            multiplier = cast(float, policy_of(self.plan).speculation)   # not None (just above)
            object.__setattr__(self, "speculation", Speculation(multiplier))
        if self.speculation is not None and not (isinstance(self.plan, str) and
                                                 policy_of(self.plan).uncoded):
            raise ArgumentError(f"speculation: runs on the uncoded split (a policy with "
                                f"uncoded=True, such as 'uncoded' or 'speculative'), not "
                                f"{self.plan!r}")

    @property
    def pulls(self) -> bool:
        """Executed by pulling (``Policy.execution == "pull"``: ``usctec-auto``,
        ``usctec-pull``, ``dynamic``), as an event-driven schedule
        (:mod:`elastic_coded.sim.pull`)."""
        return isinstance(self.plan, str) and policy_of(self.plan).pulls

    @property
    def speed_blind(self) -> bool:
        return isinstance(self.plan, str) and policy_of(self.plan).speed_blind

    @property
    def plan_key(self) -> tuple[str, str, int, str]:
        """Variants with the same plan function on the same placement kind share plans."""
        fn = self.plan_fn()
        return (getattr(fn, "__module__", ""), getattr(fn, "__qualname__", ""), id(fn),
                self.placement)

    def plan_fn(self) -> Callable[..., StepPlan | PullPlan]:
        return get_policy(self.plan) if isinstance(self.plan, str) else self.plan


SimPolicy = str | Variant | FamilyVariant
"""A policy :func:`resolve_policies` gives: a bound's name, a :class:`Variant`, a family's."""


VARIANTS: dict[str, Variant] = {
    "usctec": Variant("usctec", "usctec", "design"),
    "uncoded": Variant("uncoded", "uncoded", "design"),
    "speculative": Variant("speculative", "speculative", "design"),
    "cyclic": Variant("cyclic", "cyclic", "design"),
    "usctec-cyclic": Variant("usctec-cyclic", "usctec", "cyclic"),
    "cec": Variant("cec", "cyclic", "cyclic"),
}
"""Built-in policies: ``usctec`` (the runtime's default, on ``design_placement``), and on that same
placement ``uncoded`` (rows split evenly, wait for all), ``speculative`` (the uncoded split with
backup tasks) and ``cyclic`` (equal loads ``(L+S)/N_t``); on the cyclic placement,
``usctec-cyclic`` (USCTEC's plan) and ``cec`` (coded elastic computing as published: cyclic
placement, equal loads)."""


def resolve_policies(policies: Sequence[object], unified_options: UnifiedOptions | None = None,
                     hetero_options: HeteroOptions | None = None,
                     masters: Sequence[int] | None = None,
                     family_options: FamilyOptions | None = None) -> list[SimPolicy]:
    """The variants ``policies`` name: a :data:`VARIANTS` name, another registered USCTEC-family
    policy (its plan on the design placement), a bound, the name of a family the simulator
    runs (:func:`sim_families`: ``"unified"`` with ``unified_options``, ``"hetero"`` with
    ``masters`` and ``hetero_options``, another with ``family_options[name]``), or a variant value.
    Names must be distinct; options given for a scheme not asked for are an error."""
    by_family = {"unified": unified_options, "hetero": hetero_options, **dict(family_options or {})}
    out: list[SimPolicy] = []
    seen: set[str] = set()
    v: SimPolicy
    for p in policies:
        if isinstance(p, Variant) or _family_variant(p):
            v = p
        elif isinstance(p, str) and p in BOUNDS:
            v = p
        elif isinstance(p, str) and p in VARIANTS:
            v = VARIANTS[p]
        elif isinstance(p, str) and p in sim_families():
            v = family_of(p).sim_model().variant(by_family.get(p), masters)
        elif isinstance(p, str) and p in REGISTRY and REGISTRY[p].plan is not None:
            v = Variant(p, p, "design")  # a registered policy: its plan on the design placement
        else:
            raise ArgumentError(f"policies: unknown policy {p!r}; known: "
                                f"{sorted(VARIANTS) + list(BOUNDS) + list(sim_families())} or a "
                                f"variant value")
        name = v if isinstance(v, str) else v.name
        if name in seen:
            raise ArgumentError(f"policies: {name!r} given twice")
        seen.add(name)
        out.append(v)
    if not out:
        raise ArgumentError("policies: give at least one")
    names = [p for p in policies if isinstance(p, str)]
    for key, val, scheme in (("unified_options", unified_options, "unified"),
                             ("hetero_options", hetero_options, "hetero"),
                             ("masters", masters, "hetero")):
        if val is not None and scheme not in names:
            raise ArgumentError(f"{key}: given, but {scheme!r} is not among the policies "
                                f"{list(names)} (a {scheme.capitalize()}Variant carries its own)")
    for scheme in sorted(set(family_options or {}) - set(names)):
        raise ArgumentError(f"family_options: given for {scheme!r}, which is not among the "
                            f"policies {list(names)}")
    return out
