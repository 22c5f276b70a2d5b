"""The cluster's settings in four groups, each a frozen dataclass with its defaults and checks
written once: :class:`RunOptions`, :class:`VerifyOptions`, :class:`RayOptions` and
:class:`ReportOptions`.

:class:`~elastic_coded.runtime.ElasticCluster` takes them as ``run=``, ``verify=``, ``ray=`` and
``report=`` (a group, a mapping of its fields, or for ``verify`` also ``True``/``False``), and
the YAML configuration has a section of the same name with the same keys.  The older flat
keywords (``time_scale=``, ``tolerance=``, ``address=``, ``report_window=``, ...) still work: the
table :data:`FLAT` names the group and field each one sets, for the cluster and the YAML alike.

A bad value raises :class:`OptionError` (a :class:`~elastic_coded.errors.ConfigError`) naming the
setting as it was given (``group.field``, or the flat keyword), the value and the rule.  Pure:
no Ray.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from .algebra.verify import DEFAULT_TOLERANCE
from .churn import CAUGHT_LIMIT
from .errors import ConfigError

__all__ = ["RunOptions", "VerifyOptions", "RayOptions", "ReportOptions", "GROUPS", "FLAT",
           "OptionError", "group_of", "split_flat"]


class OptionError(ConfigError):
    """A setting out of its rule: ``key`` (``group.field``), ``value`` and ``rule``."""

    def __init__(self, key: str, value: Any, rule: str):
        super().__init__(f"{key}: {value!r} {rule}")
        self.key, self.value, self.rule = key, value, rule

    def __reduce__(self):
        return type(self), (self.key, self.value, self.rule)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v) -> bool:
    import numbers

    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _check(ok: bool, key: str, value, rule: str) -> None:
    if not ok:
        raise OptionError(key, value, rule)


def _bool(key: str, v) -> None:
    _check(isinstance(v, bool), key, v, "must be True or False")


def _int_or_none(key: str, v, lo: int = 1) -> None:
    _check(v is None or (_is_int(v) and v >= lo), key, v, f"must be an int >= {lo} or None")


def _positive(key: str, v) -> None:
    _check(_is_num(v) and math.isfinite(v) and v > 0, key, v, "must be a number > 0 (seconds)")


@dataclass(frozen=True)
class RunOptions:
    """How steps run.  ``time_scale`` > 0 emulates speeds (a machine computing the fraction
    ``w`` of a step takes ``w / speed * time_scale`` s; ``0``: real speed); ``seed`` (the plans'
    and the churn's randomness); ``placement`` (``"design"`` or ``"cyclic"``); ``storage`` (the
    default storage budget, in ``(0, 1]``); ``learn_speeds`` (estimate speeds from measured
    times); ``allow_lower_S`` (run with a lower ``S`` when fewer than ``L+S`` machines are
    left); ``deadline`` (a call still running that many times the median completed call's time
    gets coded backups; ``None``: wait); ``chunk_rows`` (rows per piece a worker reads of an
    ``.npy`` ``A``; ``None``: all its rows at once); ``transpose`` (also store the rows of
    ``A^T``, for ``A^T`` products: ``rmatvec`` of
    :meth:`~.runtime.ElasticCluster.as_linear_operator`; the USCTEC family only)."""

    time_scale: float = 0.0
    seed: int = 0
    placement: str = "design"
    storage: float = 1.0
    learn_speeds: bool = True
    allow_lower_S: bool = False
    deadline: float | None = 3.0
    chunk_rows: int | None = None
    transpose: bool = False

    def __post_init__(self):
        ts = self.time_scale
        _check(_is_num(ts) and math.isfinite(ts) and ts >= 0, "run.time_scale", ts,
               "must be finite and >= 0")
        _check(_is_int(self.seed) and self.seed >= 0, "run.seed", self.seed, "must be an int >= 0")
        _check(self.placement in ("design", "cyclic"), "run.placement", self.placement,
               "must be 'design' or 'cyclic'")
        st = self.storage
        _check(_is_num(st) and 0 < st <= 1, "run.storage", st,
               "must be a number in (0, 1] (the default storage budget)")
        _bool("run.learn_speeds", self.learn_speeds)
        _bool("run.allow_lower_S", self.allow_lower_S)
        dl = self.deadline
        _check(dl is None or (_is_num(dl) and dl >= 1), "run.deadline", dl,
               "must be a number >= 1 (a multiple of the median completed call's time) or None")
        _int_or_none("run.chunk_rows", self.chunk_rows)
        _bool("run.transpose", self.transpose)


@dataclass(frozen=True)
class VerifyOptions:
    """Verification (docs/verification.md): ``on`` (check every product against a sketch of
    ``A`` and repair it from results that check); ``tolerance`` (real field: the relative error
    a product may have, by the check's estimate; ``None`` accepts any product that checks);
    ``strict`` (the a priori error bound must meet the tolerance too); ``exclude_after``
    (remove a machine caught in that many steps; ``None``: never)."""

    on: bool = True
    tolerance: float | None = DEFAULT_TOLERANCE
    strict: bool = False
    exclude_after: int | None = CAUGHT_LIMIT

    def __post_init__(self):
        _bool("verify.on", self.on)
        _bool("verify.strict", self.strict)
        tol = self.tolerance
        _check(tol is None or (_is_num(tol) and tol > 0), "verify.tolerance", tol,
               "must be a relative error bound > 0 or None")
        _check(not (self.strict and tol is None), "verify.strict", self.strict,
               "needs verify.tolerance (the bound not to exceed), not None")
        _int_or_none("verify.exclude_after", self.exclude_after)


@dataclass(frozen=True)
class RayOptions:
    """Ray and hosting: ``address`` (``None`` starts an embedded local Ray, ``"auto"`` joins a
    running cluster); ``num_cpus`` (the embedded Ray's CPUs; ``None``: all); ``cpus_per_worker``
    (``machines="auto"``: one machine per that many CPUs of a node; ``None``: 1);
    ``machines_per_process`` (machines sharing one worker process; ``None``: 4 with emulated
    speeds, else 1); ``ping_timeout`` and ``health_interval`` (seconds: a machine silent that
    long is dead; between health checks); ``driver_blas_threads`` (the BLAS threads the driver
    uses during a step, :mod:`~elastic_coded.runtime.blas`; ``None``: numpy's own);
    ``max_restarts`` (a machine whose worker process dies while its node lives is restarted in
    a fresh process at most this many times, :mod:`~elastic_coded.runtime.restart`; 0: never)."""

    address: str | None = None
    num_cpus: int | None = None
    cpus_per_worker: float | None = None
    machines_per_process: int | None = None
    ping_timeout: float = 5.0
    health_interval: float = 1.0
    driver_blas_threads: int | None = 1
    max_restarts: int = 3

    def __post_init__(self):
        _check(self.address is None or isinstance(self.address, str), "ray.address",
               self.address, "must be a Ray address, 'auto' or None")
        _int_or_none("ray.num_cpus", self.num_cpus)
        cpw = self.cpus_per_worker
        _check(cpw is None or (_is_num(cpw) and cpw > 0), "ray.cpus_per_worker", cpw,
               "must be a number > 0 or None")
        _int_or_none("ray.machines_per_process", self.machines_per_process)
        _positive("ray.ping_timeout", self.ping_timeout)
        _positive("ray.health_interval", self.health_interval)
        _int_or_none("ray.driver_blas_threads", self.driver_blas_threads)
        mr = self.max_restarts
        _check(isinstance(mr, int) and not isinstance(mr, bool) and mr >= 0, "ray.max_restarts",
               mr, "must be an int >= 0")


@dataclass(frozen=True)
class ReportOptions:
    """Step reports: ``window`` (the reports kept in ``cluster.reports``; ``None``: all);
    ``file`` (a JSON-lines file every report is appended to); ``keep_plans`` (keep each
    step's whole plan in ``report.full_plan``, for debugging)."""

    window: int | None = 1000
    file: str | None = None
    keep_plans: bool = False

    def __post_init__(self):
        _int_or_none("report.window", self.window)
        _check(self.file is None or isinstance(self.file, str), "report.file", self.file,
               "must be a path or None")
        _bool("report.keep_plans", self.keep_plans)


GROUPS: dict[str, type] = {"run": RunOptions, "verify": VerifyOptions, "ray": RayOptions,
                           "report": ReportOptions}
"""The groups by their parameter (and YAML section) name."""

FLAT: dict[str, tuple[str, str]] = {
    **{f.name: ("run", f.name) for f in fields(RunOptions)},
    "verify": ("verify", "on"), "tolerance": ("verify", "tolerance"),
    "strict": ("verify", "strict"), "exclude_after": ("verify", "exclude_after"),
    **{f.name: ("ray", f.name) for f in fields(RayOptions)},
    "report_window": ("report", "window"), "report_file": ("report", "file"),
    "keep_plans": ("report", "keep_plans"),
}
"""Every flat keyword: the group and field it sets."""


def group_of(name: str, value) -> Any:
    """The group ``name`` from ``None`` (its defaults), an instance, a mapping of its fields,
    or (``verify``) a bool."""
    cls = GROUPS[name]
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if name == "verify" and isinstance(value, bool):
        return cls(on=value)
    if not isinstance(value, Mapping):
        raise OptionError(name, value, f"must be a {cls.__name__}, a mapping of its fields"
                                       f"{' or True/False' if name == 'verify' else ''}")
    known = [f.name for f in fields(cls)]
    bad = sorted(set(value) - set(known))
    if bad:
        raise OptionError(name, dict(value), f"has unknown keys {bad}; known: {known}")
    return cls(**value)


_WARNED: set = set()
"""The flat keywords warned about in this process (each warns once)."""


def _warn_flat(key: str, group: str, fld: str) -> None:
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(f"{key}=: a flat keyword, kept for old code; give it as {group}="
                  f"{GROUPS[group].__name__}({fld}=...) or {group}={{{fld!r}: ...}}",
                  DeprecationWarning, stacklevel=4)


def split_flat(groups: Mapping[str, Any], flat: Mapping[str, Any]) -> tuple[dict, dict]:
    """The four groups with the flat keywords applied, and the keywords left (the policy's
    options).  A setting given both in its group and flat is an error."""
    out = {name: group_of(name, groups.get(name)) for name in GROUPS}
    rest: dict = {}
    by_group: dict = {}
    for key, value in flat.items():
        if key not in FLAT:
            rest[key] = value
            continue
        group, fld = FLAT[key]
        _warn_flat(key, group, fld)
        g = groups.get(group)
        if isinstance(g, GROUPS[group]) or (isinstance(g, Mapping) and fld in g):
            raise OptionError(key, value, f"is set twice: also by {group}= (give it once)")
        by_group.setdefault(group, {})[fld] = value
    for group, changes in by_group.items():
        try:
            out[group] = replace(out[group], **changes)
        except OptionError as exc:  # name the keyword as the caller wrote it
            written = next((k for k in flat if FLAT.get(k) == tuple(exc.key.split(".", 1))),
                           None)
            raise OptionError(written or exc.key, exc.value, exc.rule) from None
    return out, rest
