"""The constructor's arguments of :class:`~.cluster.ElasticCluster`, checked: its code
``(L, S)``, churn script and the policy's options.  Plain Python: no Ray."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import numpy as np

from ..churn import ChurnScript, load_churn, parse_churn
from ..errors import ArgumentError
from ..machines import machine_specs

__all__ = ["check_int", "code_of", "churn_script", "option_fields", "machines_of",
           "controller_kwargs"]


def check_int(name: str, val, lo: int) -> int:
    """``val`` as an int ``>= lo`` (no bool), else an error naming ``name``."""
    if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
        raise ArgumentError(f"{name}: must be an int >= {lo}, got {val!r}")
    return int(val)


def code_of(policy: str, takes_LS: bool, L, S) -> tuple[int, int]:
    """The cluster's ``(L, S)``: both given for a policy of the USCTEC family (``takes_LS``),
    neither for any other (then ``(1, 0)``)."""
    if takes_LS:
        if L is None or S is None:
            raise ArgumentError(f"{'L' if L is None else 'S'}: policy {policy!r} needs L and S")
        return check_int("L", L, 1), check_int("S", S, 0)
    if L is not None or S is not None:
        raise ArgumentError(f"L, S: policy {policy!r} takes no L or S (got L={L!r}, "
                            f"S={S!r}); see its options")
    return 1, 0


def churn_script(churn) -> ChurnScript:
    """A churn script from ``None``, a YAML path, a mapping or a :class:`ChurnScript`."""
    if churn is None:
        return ChurnScript()
    if isinstance(churn, (str, os.PathLike)):
        return load_churn(str(churn))
    return churn if isinstance(churn, ChurnScript) else parse_churn(churn)


def option_fields(options) -> dict:
    """The policy's options as a mapping, from ``None``, a mapping or the options dataclass."""
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    raise ArgumentError(f"options: a mapping or the policy's options dataclass, got {options!r}")


def machines_of(machines, storage, cpus_per_worker) -> tuple[dict | None, list]:
    """``(auto, specs)``: ``machines="auto"`` follows Ray's nodes (``auto``: the controller's
    settings, no spec); otherwise the machines' specs (``storage``: their default budget)."""
    if isinstance(machines, str) and machines == "auto":
        return {"cpus_per_worker": cpus_per_worker}, []
    return None, machine_specs(machines, storage)


def controller_kwargs(cluster, run, ray_opts, sources: dict, masters: tuple, **kw) -> dict:
    """The controller's arguments for ``cluster`` (its family, ``A``'s rows and code, field,
    time scale and options), the ``run`` and ``ray`` settings, the family's ``sources`` and
    ``masters`` (:meth:`~.family_setup.FamilySetup.sources`), and ``kw`` (``auto``,
    ``machines_per_process``, ``row_prefix``)."""
    from ..schemes.registry import added_policies

    return dict(
        family=cluster.family, num_rows=cluster.shape[0], L=cluster.L, S=cluster.S,
        field_spec=cluster.F, sources=sources, time_scale=cluster.time_scale,
        placement=run.placement, seed=run.seed, learn_speeds=run.learn_speeds,
        ping_timeout=ray_opts.ping_timeout, default_storage=run.storage,
        health_interval=ray_opts.health_interval, options=cluster.options,
        max_restarts=ray_opts.max_restarts, masters=masters, policies=added_policies(), **kw)
