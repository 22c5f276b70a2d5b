"""Run configuration: a YAML file read into a frozen dataclass, every error naming the key, the
value and the rule.

Example (``examples/quickstart.yaml`` is a complete one)::

    job: subspace_iteration     # matmul | power_iteration | subspace_iteration | regression |
                                # pagerank
    steps: 30                   # pagerank: at most this many iterations
    seed: 0
    matrix: {rows: 480, cols: 480}   # generated (seeded); or {path: A.npy}, or a sparse
                                # {path: A.npz}; pagerank: {nodes, edges} or {path: G.npz}
    pagerank: {damping: 0.85, tol: 1e-10}    # pagerank only
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
    machines: 12                # a count, a list of {id, speed, storage}, or auto
    churn: examples/churn.yaml  # a path or an inline mapping (see elastic_coded.churn)
    run: {time_scale: 0.2, storage: 0.8}     # the settings groups (elastic_coded.options),
    verify: {on: true, tolerance: 1e-9}      # one section each, with the dataclass's fields;
    ray: {address: null, num_cpus: 2}        # verify may be true / false
    report: {window: 1000}

``seed``, ``placement``, ``storage``, ``time_scale``, ``allow_lower_S`` and
``machines_per_process`` may also be top-level keys.  docs/options.md lists every key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from dataclasses import fields as dc_fields
from typing import Any

from .algebra.fields import field as make_field
from .churn import ChurnScript, load_churn, parse_churn
from .errors import ConfigError
from .options import (
    FLAT,
    GROUPS,
    OptionError,
    RayOptions,
    ReportOptions,
    RunOptions,
    VerifyOptions,
    group_of,
)
from .schemes.policies import family_spec, parse_options, policy_names

__all__ = ["RunConfig", "load_config", "parse_config", "ConfigError"]

JOBS = ("matmul", "power_iteration", "subspace_iteration", "regression", "pagerank")


@dataclass(frozen=True)
class RunConfig:
    """A run: the job and its data, the cluster's policy and machines, and the cluster's four
    settings groups (:mod:`elastic_coded.options`), one to one with the YAML sections."""

    job: str = "matmul"
    steps: int = 10
    rows: int = 240
    cols: int = 120
    path: str | None = None
    input_cols: int = 4
    field: str = "real"
    policy: str = "usctec-auto"
    L: int = 4
    S: int = 2
    machines: Any = 8
    churn: ChurnScript = dc_field(default_factory=ChurnScript)
    check: bool = True
    options: Any = None
    """The policy's typed options (:class:`~elastic_coded.schemes.policies.PullOptions` for
    the USCTEC family)."""
    masters: tuple = ()
    """hetero: ``((rows, cols), ...)`` of the generated matrices, one per master."""
    run: RunOptions = dc_field(default_factory=RunOptions)
    verify: VerifyOptions = dc_field(default_factory=VerifyOptions)
    ray: RayOptions = dc_field(default_factory=RayOptions)
    report: ReportOptions = dc_field(default_factory=ReportOptions)
    edges: int = 0
    """pagerank: edges of the generated graph (of ``rows`` nodes)."""
    damping: float = 0.85
    """pagerank: the damping factor."""
    tol: float = 1e-10
    """pagerank: stop once an iteration changes the ranks by less than this (L1)."""

    @property
    def seed(self) -> int:
        """The run's seed (``run.seed``): the generated data's, the plans' and the churn's."""
        return self.run.seed


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
    known = {"job", "steps", "matrix", "input_cols", "field", "policy", "L", "S", "machines",
             "churn", "check", "options", "masters", "pagerank", *GROUPS, *_TOP_LEVEL}
    unknown = set(doc) - known
    if unknown:
        raise ConfigError(f"config: unknown keys {sorted(unknown)}; known: {sorted(known)}")
    job = doc.get("job", "matmul")
    if job not in JOBS:
        raise _err("job", job, f"must be one of {list(JOBS)}")
    matrix = doc.get("matrix", {}) or {}
    if not isinstance(matrix, Mapping):
        raise _err("matrix", matrix, "must be a mapping {rows, cols} or {path}")
    keys = ("nodes", "edges", "path") if job == "pagerank" else ("rows", "cols", "path")
    bad = set(matrix) - set(keys)
    if bad:
        raise ConfigError(f"config key 'matrix': unknown keys {sorted(bad)} for job {job!r}; "
                          f"known: {', '.join(keys)}")
    path = matrix.get("path")
    if path is not None:
        path = os.path.join(base_dir, path) if not os.path.isabs(path) else path
        if not os.path.exists(path):
            raise _err("matrix.path", matrix.get("path"), "must name an existing .npy or .npz file")
        if job == "pagerank" and not path.endswith(".npz"):
            raise _err("matrix.path", matrix.get("path"), "must name a graph's .npz file "
                       "(elastic_coded.pagerank.save_graph) for job 'pagerank'")
    if job == "pagerank":
        matrix = {"rows": matrix.get("nodes", 100_000), "cols": matrix.get("nodes", 100_000),
                  "edges": matrix.get("edges", 1_000_000)}
    rows = _int({"matrix.rows": matrix.get("rows", 240)}, "matrix.rows", 240, 1)
    cols = _int({"matrix.cols": matrix.get("cols", 120)}, "matrix.cols", 120, 1)
    pr = _pagerank(doc, job, matrix)
    if job in ("power_iteration", "subspace_iteration") and path is None and rows != cols:
        raise ConfigError(f"config key 'matrix': {job} needs a square matrix, got "
                          f"rows={rows}, cols={cols}")
    fld = doc.get("field", "real")
    try:
        make_field(fld)
    except (TypeError, ValueError) as exc:
        raise _err("field", fld, f"is not a field: {exc}") from None
    if job in ("power_iteration", "subspace_iteration", "regression", "pagerank") and \
            make_field(fld).exact:
        raise _err("field", fld, f"must be 'real' for job {job!r} (it normalises vectors)")
    policy = doc.get("policy", "usctec-auto")
    if policy not in policy_names():
        raise _err("policy", policy, f"must be one of {list(policy_names())}")
    options, masters = _policy_options(doc, policy, job)
    L = _int(doc, "L", 4, 1)
    S = _int(doc, "S", 2, 0)
    machines = _machines(doc.get("machines", 8), L + S if family_spec(policy).coded_LS else 1)
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
    groups = _groups(doc)
    if not isinstance(doc.get("check", True), bool):
        raise _err("check", doc.get("check"), "must be true or false")
    return RunConfig(
        job=job, steps=_int(doc, "steps", 10, 1), rows=rows, cols=cols, path=path,
        input_cols=_int(doc, "input_cols", 4, 1), field=fld, policy=policy, L=L, S=S,
        machines=machines, churn=churn, check=doc.get("check", True), options=options,
        masters=masters, **pr, **groups)


def _pagerank(doc: Mapping, job: str, matrix: Mapping) -> dict:
    """pagerank's settings (``matrix.edges``, ``pagerank: {damping, tol}``), checked."""
    sec = doc.get("pagerank")
    if job != "pagerank":
        if sec is not None:
            raise _err("pagerank", sec, "is only for job 'pagerank'")
        return {}
    sec = sec or {}
    if not isinstance(sec, Mapping) or set(sec) - {"damping", "tol"}:
        raise _err("pagerank", sec, "must be a mapping with keys damping, tol")
    damping = _num({"pagerank.damping": sec.get("damping", 0.85)}, "pagerank.damping", 0.85,
                   0, 1, lo_open=True)
    if damping >= 1:
        raise _err("pagerank.damping", damping, "must be < 1")
    return {"edges": _int({"matrix.edges": matrix["edges"]}, "matrix.edges", 0, 1),
            "damping": damping, "tol": _num({"pagerank.tol": sec.get("tol", 1e-10)},
                                            "pagerank.tol", 1e-10, 0, lo_open=True)}


_TOP_LEVEL = ("seed", "placement", "storage", "time_scale", "allow_lower_S",
              "machines_per_process")
"""Settings that may also be written at the top level of the YAML (as before the sections)."""


def _groups(doc: Mapping) -> dict:
    """The four settings groups from their sections (``run:``, ``verify:``, ``ray:``,
    ``report:``, each with its dataclass's fields; ``verify`` may be true or false) and the
    top-level keys of :data:`_TOP_LEVEL`; a bad value names its key."""
    out = {}
    for name in GROUPS:
        sec = doc.get(name)
        sec = {} if sec is None else sec
        if name == "verify" and isinstance(sec, bool):
            sec = {"on": sec}
        if not isinstance(sec, Mapping):
            raise _err(name, sec, f"must be a mapping of {GROUPS[name].__name__}'s keys"
                                  f"{' (or true / false)' if name == 'verify' else ''}")
        sec = dict(sec)
        for key in _TOP_LEVEL:
            group, fld = FLAT[key]
            if group == name and key in doc:
                if fld in sec:
                    raise _err(key, doc[key], f"is also set as {name}.{fld}; give it once")
                sec[fld] = doc[key]
        sec = _yaml_1_1(GROUPS[name], sec)
        try:
            out[name] = group_of(name, sec)
        except OptionError as exc:
            top = next((k for k in _TOP_LEVEL if k in doc
                        and FLAT[k] == tuple(exc.key.split(".", 1))), None)
            raise _err(top or exc.key, exc.value, exc.rule) from None
    return out


def _yaml_1_1(cls, sec: dict) -> dict:
    """Undo two readings of YAML 1.1 (PyYAML's): the key ``on`` read as ``true``, and a number
    such as ``1e-9`` (no dot) read as a string, for the fields that take a float."""
    if True in sec and "on" not in sec:
        sec["on"] = sec.pop(True)
    floats = {f.name for f in dc_fields(cls) if "float" in str(f.type)}
    for k, v in sec.items():
        if k in floats and isinstance(v, str):
            try:
                sec[k] = float(v)
            except ValueError:  # left as it is: the check names it
                pass
    return sec


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
    spec = family_spec(policy)
    if not spec.runs_job(job):
        raise _err("job", job, f"must be one of {list(spec.jobs or ())} for policy {policy!r}")
    masters = doc.get("masters")
    if not spec.masters:
        if masters is not None:
            raise _err("masters", masters, f"is only for a family with one matrix per master "
                                           f"(policy {policy!r} is of family {spec.name!r})")
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
