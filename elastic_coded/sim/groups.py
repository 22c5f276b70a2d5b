"""``simulate(run=..., options=...)``: the option groups :class:`~elastic_coded.ElasticCluster`
takes, read for the simulator.  Pure.

``run`` (a :class:`~elastic_coded.options.RunOptions` or a mapping of its fields) sets the
simulation's ``time_scale``, ``seed``, ``storage``, ``learn_speeds`` and ``deadline`` as the
runtime reads them, so one ``RunOptions`` value means the same thing in both (the runtime's
defaults: speeds learnt, a step deadline of 3.0).  What only a Ray cluster has is refused
rather than ignored: a ``time_scale`` of 0 (real speed: the simulator has no real machines),
``allow_lower_S``, ``chunk_rows``, ``transpose``, and a ``placement`` other than the designed
one (the simulator names its placement per policy: ``usctec-cyclic``, ``cec``).

``options``: the policies' options as :class:`~elastic_coded.ElasticCluster` takes its
policy's: a :class:`~elastic_coded.families.usctec.pull.PullOptions`,
:class:`~elastic_coded.families.unified.policy.UnifiedOptions` or
:class:`~elastic_coded.families.hetero.policy.HeteroOptions` value, a sequence of them (one per
kind, for several families side by side), or a mapping by family name.

A setting given both ways (``run=`` and the flat ``time_scale=``, ``options=`` and
``pull_options=``) is an error naming both, as :class:`~elastic_coded.ElasticCluster`'s is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from ..errors import ArgumentError
from ..families.hetero.policy import HeteroOptions
from ..families.unified.policy import UnifiedOptions
from ..families.usctec.pull import PullOptions
from ..options import OptionError, RunOptions, group_of

__all__ = ["from_groups", "RUN_FIELDS", "OPTION_KINDS"]

RUN_FIELDS = ("time_scale", "seed", "storage", "learn_speeds", "deadline")
"""The fields of ``run`` the simulator reads, each a parameter of ``simulate`` of that name."""

OPTION_KINDS: dict[type, str] = {PullOptions: "pull_options", UnifiedOptions: "unified_options",
                                 HeteroOptions: "hetero_options"}
"""A policy options type and the ``simulate`` parameter it sets."""

_RUNTIME_ONLY = {"allow_lower_S": "a Ray cluster's fallback when machines run short",
                 "chunk_rows": "how a worker reads an .npy A",
                 "transpose": "the runtime's A^T products"}


def from_groups(run: Any, options: Any, flat: Mapping[str, Any],
                defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``simulate``'s parameters with ``run`` and ``options`` applied (module docstring):
    ``flat`` holds the values given, ``defaults`` the parameters' defaults (a flat value other
    than its default is taken as given)."""
    out = dict(flat)
    if run is not None:
        out.update(_run_fields(group_of("run", run), flat, defaults))
    if options is not None:
        out.update(_option_fields(options, flat, defaults))
    return out


def _given(name: str, flat: Mapping[str, Any], defaults: Mapping[str, Any]) -> bool:
    return flat[name] is not defaults[name] and flat[name] != defaults[name]


def _run_fields(run: RunOptions, flat: Mapping[str, Any],
                defaults: Mapping[str, Any]) -> dict[str, Any]:
    base = RunOptions()
    for f in fields(RunOptions):
        if f.name in _RUNTIME_ONLY and getattr(run, f.name) != getattr(base, f.name):
            raise OptionError(f"run.{f.name}", getattr(run, f.name),
                              f"is {_RUNTIME_ONLY[f.name]}; the simulator has none (leave it "
                              f"{getattr(base, f.name)!r})")
    if run.placement != "design":
        raise OptionError("run.placement", run.placement,
                          "names one placement for every policy; the simulator names it per "
                          "policy ('usctec-cyclic', 'cec' or a Variant): leave it 'design'")
    if not run.time_scale > 0:
        raise OptionError("run.time_scale", run.time_scale,
                          "must be > 0 in the simulator (the seconds a speed-1 machine takes "
                          "for all of A @ B; 0, real speed, needs real machines)")
    both = [n for n in RUN_FIELDS if _given(n, flat, defaults)]
    if both:
        raise OptionError(both[0], flat[both[0]],
                          f"is set twice: also by run= (give it once; run.{both[0]} = "
                          f"{getattr(run, both[0])!r})")
    return {n: getattr(run, n) for n in RUN_FIELDS}


def _option_fields(options: Any, flat: Mapping[str, Any],
                   defaults: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(options, Mapping):
        if _given("family_options", flat, defaults):
            raise ArgumentError("options: a mapping by family name is family_options=; give "
                                "one of them")
        return {"family_options": dict(options)}
    values = options if isinstance(options, (tuple, list)) else (options,)
    out: dict[str, Any] = {}
    for v in values:
        kind = OPTION_KINDS.get(type(v))
        if kind is None:
            raise ArgumentError(
                f"options: {v!r} is not a policy's options; give a "
                f"{', '.join(t.__name__ for t in OPTION_KINDS)} value, a sequence of them or a "
                f"mapping by family name")
        if kind in out:
            raise ArgumentError(f"options: two {type(v).__name__} values; give one per kind")
        if _given(kind, flat, defaults):
            raise ArgumentError(f"options: its {type(v).__name__} is set twice: also by "
                                f"{kind}= (give it once)")
        out[kind] = v
    return out
