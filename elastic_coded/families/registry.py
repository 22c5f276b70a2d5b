"""The family registry itself (:mod:`elastic_coded.families` registers the built-in ones).
Pure: no Ray."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from ..errors import ArgumentError, ArgumentTypeError

__all__ = ["Family", "SimModel", "register_family", "unregister_family", "family_of",
           "family_names", "built_in", "resolve"]


def resolve(ref: Any) -> Any:
    """``ref`` itself, or the object a ``"module:attribute"`` string names (imported now)."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class SimModel:
    """A family as the simulator runs it by name: ``variant(options, masters)`` makes its
    variant (a frozen value with a ``name`` and a ``family``) from the options the simulation
    was given for it; ``runner(variant, trace, configured, env)`` makes the object whose
    ``step(ctx, record)`` simulates one step (:mod:`elastic_coded.sim.runner`)."""

    variant: Callable[..., Any]
    runner: Callable[..., Any]


@dataclass(frozen=True)
class Family:
    """Everything the library keys by scheme, for one scheme.

    ``storage``: ``Setup -> storage family``.  ``runtime``: its driver-side
    :class:`~elastic_coded.runtime.family_setup.FamilySetup`, or a function of no arguments
    that makes it (may import Ray; resolved only by the runtime).  ``options``: the class of
    its policies' typed options (``None``: none).  ``executions``: the
    :attr:`~elastic_coded.schemes.registry.Policy.execution` values its policies may run
    (default: the family's name).  ``plans``: its policies carry a plan function (else the
    storage is the plan).  ``sim``: its :class:`SimModel` (``None``: the simulator does not
    run it by name).  ``coded_LS``: the family is coded with ``L`` and ``S`` (any ``L`` of
    ``L + S`` results decode), so a configuration's ``L`` and ``S`` are its and it needs
    ``L + S`` machines.  ``masters``: a step multiplies one matrix per master, so the family
    has no single ``A``: no linear operator, no iterate (no power iteration, no checkpoint).
    ``jobs``: the configuration jobs (:data:`elastic_coded.config.JOBS`) it runs; ``None``:
    every one.  Every field but ``name``, ``executions``, ``plans``, ``coded_LS``, ``masters``
    and ``jobs`` may be a ``"module:attribute"`` string."""

    name: str
    storage: Any
    runtime: Any
    options: Any = None
    executions: tuple[str, ...] = ()
    plans: bool = False
    sim: Any = None
    coded_LS: bool = False
    masters: bool = False
    jobs: tuple[str, ...] | None = ("matmul",)

    def runs_job(self, job: str) -> bool:
        """The family runs the configuration job ``job``."""
        return self.jobs is None or job in self.jobs

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentError(f"name: a family's name is a non-empty string, got {self.name!r}")
        object.__setattr__(self, "executions", tuple(self.executions) or (self.name,))

    def make_storage(self, setup: Any) -> Any:
        """The family's storage made with ``setup``."""
        return resolve(self.storage)(setup)

    def options_class(self) -> type | None:
        return None if self.options is None else resolve(self.options)

    def sim_model(self) -> SimModel:
        """The family's :class:`SimModel` (an error when the simulator does not run it)."""
        if self.sim is None:
            raise ArgumentError(f"family: {self.name!r} has no simulator model; the simulator "
                                f"runs {[n for n in family_names() if family_of(n).sim]} by name")
        return cast(SimModel, resolve(self.sim))

    def runtime_setup(self) -> Any:
        """The driver-side setup (imports the runtime, and so Ray): ``runtime`` itself, the
        object it names, or what it returns when it is a function of no arguments."""
        obj = resolve(self.runtime)
        return obj() if callable(obj) else obj


_REGISTRY: dict[str, Family] = {}
_BUILT_IN: set[str] = set()
"""The families this package registers itself (:func:`unregister_family` keeps them)."""


def register_family(family: Family) -> Family:
    """Add ``family`` (the same value again changes nothing; another value under a name already
    there is an error); the config, the runtime and the simulator then know it.  Returns it."""
    if not isinstance(family, Family):
        raise ArgumentTypeError(f"family: a Family, got {type(family).__name__}")
    if family.name in _REGISTRY and _REGISTRY[family.name] != family:
        raise ArgumentError(f"family: {family.name!r} is already registered; registered: "
                            f"{family_names()}")
    _REGISTRY[family.name] = family
    return family


def unregister_family(name: str) -> None:
    """Take a family added by :func:`register_family` out again (tests)."""
    if name in _BUILT_IN:
        raise ArgumentError(f"family: {name!r} is built in; built in: {sorted(_BUILT_IN)}")
    _REGISTRY.pop(name, None)


def family_of(name: Any) -> Family:
    """The registered family ``name``; an unknown one gets an error listing the known ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ArgumentError(f"family: unknown family {name!r}; known: "
                            f"{', '.join(family_names())}") from None


def built_in(name: str) -> bool:
    """``name`` is one of the families this package registers itself."""
    return name in _BUILT_IN


def family_names() -> tuple[str, ...]:
    """Every registered family's name, sorted."""
    return tuple(sorted(_REGISTRY))
