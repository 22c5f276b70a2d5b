"""Every policy of the one runtime, by name, with its storage family and typed options.  Pure.

A *family* is what the machines store: ``usctec`` (uncoded rows of ``A``; the policies
``usctec-auto`` (the default), ``usctec-pull``, ``usctec``, ``cyclic``, ``uncoded``,
``speculative``, ``dynamic`` and ``proportional`` plan over it and may be switched per step;
options: :class:`PullOptions`), ``unified`` (coded batches, MATH.md §2) or ``hetero`` (coded rows
per master, MATH.md §3); each family's options class is in its
:class:`~elastic_coded.families.Family`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from ...errors import ArgumentError
from ...families import Family
from ...families import family_of as _family
from ...families.hetero.policy import HeteroOptions
from ...families.unified.policy import UnifiedOptions
from ...families.usctec.pull import PullOptions
from ..registry import REGISTRY, policy_of

__all__ = ["policy_names", "family_of", "family_spec", "parse_options", "HeteroOptions",
           "PullOptions", "UnifiedOptions"]

def family_of(policy: Any) -> str:
    """The storage family of ``policy`` (:func:`~elastic_coded.schemes.registry.policy_of`; an
    unknown name gets the known ones)."""
    return policy_of(policy).family


def family_spec(policy: Any) -> Family:
    """The :class:`~elastic_coded.families.Family` of ``policy``: what its scheme can do
    (``coded_LS``, ``masters``...), asked instead of comparing family names."""
    return _family(family_of(policy))


def policy_names() -> tuple[str, ...]:
    """Every registered policy's name, sorted."""
    return tuple(sorted(REGISTRY))


def parse_options(policy: str, options: Mapping[str, Any]) -> Any:  # the family's class
    """The typed options of ``policy`` from keyword arguments (or a config mapping); an unknown
    key is an error naming the known ones."""
    fam = family_of(policy)
    cls = _family(fam).options_class()
    known = [f.name for f in fields(cls)] if cls is not None else []
    bad = sorted(set(options) - set(known))
    if bad:
        raise ArgumentError(f"options: {bad} are not options of policy {policy!r}; known: "
                            f"{known or 'none'}")
    return cls(**options) if cls is not None else None
