"""Run configuration: a YAML file read into a frozen dataclass, every error naming the key, the
value and the rule.

Example (``examples/quickstart.yaml`` is a complete one)::

    job: subspace_iteration     # matmul | power_iteration | subspace_iteration | regression
    steps: 30
    seed: 0
    matrix: {rows: 480, cols: 480}   # generated (seeded); or {path: A.npy}
    input_cols: 4               # columns of B per step (matmul; subspace_iteration: k vectors)
    field: real                 # real | gf(p) | gf(<prime>) | gf(2^T)
    policy: usctec-auto         # usctec-auto | usctec | usctec-pull | dynamic | proportional |
                                # cyclic | uncoded | speculative | unified | hetero
    L: 4                        # usctec family only
    S: 2
    options: {}                 # the policy's options: unified {mu, q, N, grow};
                                # usctec family {units, chunks, depth, call_cost_s};
                                # hetero {assignment, a0, u0, capacity}
    masters: [{rows: 40, cols: 20}, {rows: 60, cols: 20}]   # hetero: one matrix per master
    placement: design           # design | cyclic
    storage: 0.8                # default storage budget e[n]
    time_scale: 0.2             # emulated speeds: seconds per unit of work; 0 = real speed
    verify: {on: true, tolerance: 1e-9, strict: false, exclude_after: 2}   # or true / false;
                                # tolerance: null accepts any product that checks
    machines: 12                # a count, a list of {id, speed, storage}, or auto
    machines_per_process: 4     # machines sharing a worker process (default: 4 emulated, 1 real)
    churn: examples/churn.yaml  # a path or an inline mapping (see elastic_coded.churn)
    allow_lower_S: false
    ray: {address: null, num_cpus: 2}
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field as dc_field
from typing import Any, Mapping

from .algebra.fields import field as make_field
from .algebra.verify import DEFAULT_TOLERANCE
from .churn import ChurnScript, load_churn, parse_churn
from .errors import ConfigError
from .schemes.policies import family_of, parse_options, policy_names

__all__ = ["RunConfig", "load_config", "parse_config", "ConfigError"]

JOBS = ("matmul", "power_iteration", "subspace_iteration", "regression")


@dataclass(frozen=True)
class RunConfig:
    job: str = "matmul"
    steps: int = 10
    seed: int = 0
    rows: int = 240
    cols: int = 120
    path: str | None = None
    input_cols: int = 4
    field: str = "real"
    policy: str = "usctec-auto"
    L: int = 4
    S: int = 2
    placement: str = "design"
    storage: float = 1.0
    time_scale: float = 0.0
    machines: Any = 8
    churn: ChurnScript = dc_field(default_factory=ChurnScript)
    allow_lower_S: bool = False
    address: str | None = None
    num_cpus: int | None = None
    check: bool = True
    options: Any = None
    """The policy's typed options (:class:`~elastic_coded.schemes.policies.PullOptions` for
    the USCTEC family)."""
    masters: tuple = ()
    """hetero: ``((rows, cols), ...)`` of the generated matrices, one per master."""
    verify: Mapping = dc_field(default_factory=dict)
    """Verification options for the cluster: ``verify``, ``tolerance``, ``strict``,
    ``exclude_after`` (the YAML key ``verify: {on, tolerance, strict, exclude_after}``)."""
    machines_per_process: int | None = None
    """Machines sharing one worker process (``None``: 4 with emulated speeds, else 1)."""


def _err(key: str, value: Any, rule: str) -> ConfigError:
    return ConfigError(f"config key '{key}': {value!r} {rule}")


def _int(doc, key, default, lo=None):
    v = doc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo):
        raise _err(key, v, f"must be an int{f' >= {lo}' if lo is not None else ''}")
    return v


def _num(doc, key, default, lo=None, hi=None, lo_open=False):
    v = doc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _err(key, v, "must be a number")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise _err(key, v, f"must be {'>' if lo_open else '>='} {lo}")
    if hi is not None and v > hi:
        raise _err(key, v, f"must be <= {hi}")
    return float(v)


def parse_config(doc: Mapping, base_dir: str = ".") -> RunConfig:
    """A :class:`RunConfig` from a parsed YAML mapping; relative paths are taken from
    ``base_dir``."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"config: a mapping of keys, got {type(doc).__name__}")
    known = {"job", "steps", "seed", "matrix", "input_cols", "field", "policy", "L", "S",
             "placement", "storage", "time_scale", "machines", "churn", "allow_lower_S", "ray",
             "check", "options", "masters", "verify", "machines_per_process"}
    unknown = set(doc) - known
    if unknown:
        raise ConfigError(f"config: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    job = doc.get("job", "matmul")
    if job not in JOBS:
        raise _err("job", job, f"must be one of {list(JOBS)}")
    matrix = doc.get("matrix", {}) or {}
    if not isinstance(matrix, Mapping):
        raise _err("matrix", matrix, "must be a mapping {rows, cols} or {path}")
    bad = set(matrix) - {"rows", "cols", "path"}
    if bad:
        raise ConfigError(f"config key 'matrix': unknown keys {sorted(bad)}; known: rows, cols, path")
    path = matrix.get("path")
    if path is not None:
        path = os.path.join(base_dir, path) if not os.path.isabs(path) else path
        if not os.path.exists(path):
            raise _err("matrix.path", matrix.get("path"), "must name an existing .npy file")
    rows = _int({"matrix.rows": matrix.get("rows", 240)}, "matrix.rows", 240, 1)
    cols = _int({"matrix.cols": matrix.get("cols", 120)}, "matrix.cols", 120, 1)
    if job in ("power_iteration", "subspace_iteration") and path is None and rows != cols:
        raise ConfigError(f"config key 'matrix': {job} needs a square matrix, got "
                          f"rows={rows}, cols={cols}")
    fld = doc.get("field", "real")
    try:
        make_field(fld)
    except (TypeError, ValueError) as exc:
        raise _err("field", fld, f"is not a field: {exc}") from None
    if job in ("power_iteration", "subspace_iteration", "regression") and make_field(fld).exact:
        raise _err("field", fld, f"must be 'real' for job {job!r} (it normalises vectors)")
    policy = doc.get("policy", "usctec-auto")
    if policy not in policy_names():
        raise _err("policy", policy, f"must be one of {list(policy_names())}")
    options, masters = _policy_options(doc, policy, job)
    placement = doc.get("placement", "design")
    if placement not in ("design", "cyclic"):
        raise _err("placement", placement, "must be 'design' or 'cyclic'")
    L = _int(doc, "L", 4, 1)
    S = _int(doc, "S", 2, 0)
    machines = _machines(doc.get("machines", 8), L + S if family_of(policy) == "usctec" else 1)
    churn = doc.get("churn")
    try:
        if isinstance(churn, str):
            cpath = churn if os.path.isabs(churn) else os.path.join(base_dir, churn)
            if not os.path.exists(cpath):
                raise _err("churn", churn, "must name an existing YAML file")
            churn = load_churn(cpath)
        else:
            churn = parse_churn(churn)
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(f"config key 'churn': {exc}") from None
    ray_doc = doc.get("ray", {}) or {}
    if not isinstance(ray_doc, Mapping) or set(ray_doc) - {"address", "num_cpus"}:
        raise _err("ray", ray_doc, "must be a mapping with keys address, num_cpus")
    num_cpus = ray_doc.get("num_cpus")
    if num_cpus is not None and (not isinstance(num_cpus, int) or num_cpus < 1):
        raise _err("ray.num_cpus", num_cpus, "must be a positive int")
    per = doc.get("machines_per_process")
    if per is not None and (isinstance(per, bool) or not isinstance(per, int) or per < 1):
        raise _err("machines_per_process", per, "must be an int >= 1 or null")
    for key in ("allow_lower_S", "check"):
        if not isinstance(doc.get(key, False), bool):
            raise _err(key, doc.get(key), "must be true or false")
    return RunConfig(
        job=job, steps=_int(doc, "steps", 10, 1), seed=_int(doc, "seed", 0, 0), rows=rows,
        cols=cols, path=path, input_cols=_int(doc, "input_cols", 4, 1), field=fld,
        policy=policy, L=L, S=S, placement=placement,
        storage=_num(doc, "storage", 1.0, 0, 1, lo_open=True),
        time_scale=_num(doc, "time_scale", 0.0, 0), machines=machines, churn=churn,
        allow_lower_S=doc.get("allow_lower_S", False), address=ray_doc.get("address"),
        num_cpus=num_cpus, check=doc.get("check", True), options=options, masters=masters,
        verify=_verify(doc.get("verify")), machines_per_process=per)


def _verify(doc) -> dict:
    """The ``verify`` key: ``{on, tolerance, strict, exclude_after}`` (all optional) as
    :class:`~elastic_coded.runtime.ElasticCluster` arguments."""
    if doc is None:
        return {}
    if isinstance(doc, bool):
        return {"verify": doc}
    if not isinstance(doc, Mapping) or set(doc) - {"on", "tolerance", "strict", "exclude_after"}:
        raise _err("verify", doc, "must be true, false or a mapping with keys on, tolerance, "
                                  "strict, exclude_after")
    out = {"verify": doc.get("on", True), "tolerance": doc.get("tolerance", DEFAULT_TOLERANCE),
           "strict": doc.get("strict", False), "exclude_after": doc.get("exclude_after", 2)}
    for key, name in (("verify", "verify.on"), ("strict", "verify.strict")):
        if not isinstance(out[key], bool):
            raise _err(name, out[key], "must be true or false")
    tol = out["tolerance"]
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float))
                            or not tol > 0):
        raise _err("verify.tolerance", tol, "must be a relative error bound > 0")
    if out["strict"] and tol is None:
        raise _err("verify.strict", True, "needs verify.tolerance (the bound not to exceed), "
                                          "not null")
    ex = out["exclude_after"]
    if ex is not None and (isinstance(ex, bool) or not isinstance(ex, int) or ex < 1):
        raise _err("verify.exclude_after", ex, "must be an int >= 1 or null")
    return out


def _machines(machines, need: int):
    """The ``machines`` key: a count, a list of ``{id, speed, storage}`` or speeds, or auto."""
    if machines == "auto":
        return machines
    if isinstance(machines, int) and not isinstance(machines, bool):
        if machines < need:
            raise _err("machines", machines, f"must be at least L+S = {need}")
        return machines
    if isinstance(machines, list):
        for i, m in enumerate(machines):
            if not isinstance(m, (Mapping, int, float)) or isinstance(m, bool):
                raise _err(f"machines[{i}]", m, "must be {id, speed, storage} or a speed")
        if len(machines) < need:
            raise _err("machines", f"{len(machines)} machines", f"must be at least L+S = {need}")
        return machines
    raise _err("machines", machines, "must be a count, a list of {id, speed, storage}, or auto")


def _policy_options(doc: Mapping, policy: str, job: str):
    """The policy's typed options and (hetero) the masters' matrix shapes."""
    opts = doc.get("options", {}) or {}
    if not isinstance(opts, Mapping):
        raise _err("options", opts, "must be a mapping of the policy's options")
    try:
        options = parse_options(policy, dict(opts))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config key 'options': {exc}") from None
    if family_of(policy) != "usctec" and job != "matmul":
        raise _err("job", job, f"must be 'matmul' for policy {policy!r}")
    masters = doc.get("masters")
    if policy != "hetero":
        if masters is not None:
            raise _err("masters", masters, "is only for policy 'hetero'")
        return options, ()
    if not isinstance(masters, list) or not masters:
        raise _err("masters", masters, "must be a non-empty list of {rows, cols}, one per master")
    shapes = []
    for i, m in enumerate(masters):
        if not isinstance(m, Mapping) or set(m) - {"rows", "cols"}:
            raise _err(f"masters[{i}]", m, "must be a mapping {rows, cols}")
        shapes.append((_int(m, "rows", 40, 1), _int(m, "cols", 20, 1)))
    return options, tuple(shapes)


def load_config(path: str) -> RunConfig:
    """Read and check a YAML run configuration."""
    import yaml

    if not os.path.exists(path):
        raise ConfigError(f"config: no file at {path!r}")
    with open(path) as fh:
        try:
            doc = yaml.safe_load(fh)
        except yaml.YAMLError as exc:
            raise ConfigError(f"config: {path!r} is not valid YAML: {exc}") from None
    return parse_config(doc or {}, base_dir=os.path.dirname(os.path.abspath(path)))
