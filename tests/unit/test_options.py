"""The cluster's settings groups (no Ray): one set of defaults and checks, every setting
reachable from YAML one to one, the flat keywords mapped onto the groups, at most 13 named
parameters on the cluster."""

import dataclasses
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.config import parse_config
from elastic_coded.errors import ConfigError
from elastic_coded.options import (
    FLAT,
    GROUPS,
    OptionError,
    RayOptions,
    ReportOptions,
    RunOptions,
    VerifyOptions,
    group_of,
    split_flat,
)

BASE = {"job": "matmul", "field": "gf(p)", "machines": 8}

# a valid value other than the default, for every field of every group
OTHER = {
    "run": {"time_scale": 0.25, "seed": 7, "placement": "cyclic", "storage": 0.5,
            "learn_speeds": False, "allow_lower_S": True, "deadline": None, "chunk_rows": 16,
            "transpose": True},
    "verify": {"on": False, "tolerance": 1e-6, "strict": True, "exclude_after": None},
    "ray": {"address": "auto", "num_cpus": 3, "cpus_per_worker": 0.5, "machines_per_process": 2,
            "ping_timeout": 2.5, "health_interval": 0.25, "driver_blas_threads": None,
            "max_restarts": 0},
    "report": {"window": 10, "file": "r.jsonl", "keep_plans": True},
}


def test_other_values_cover_every_field_and_differ_from_the_defaults():
    for name, cls in GROUPS.items():
        default = cls()
        assert set(OTHER[name]) == {f.name for f in dataclasses.fields(cls)}
        for key, value in OTHER[name].items():
            assert getattr(default, key) != value, (name, key)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_every_setting_is_reachable_from_its_yaml_section(name):
    cfg = parse_config({**BASE, name: OTHER[name]})
    assert getattr(cfg, name) == GROUPS[name](**OTHER[name])
    for other in set(GROUPS) - {name}:  # the rest keep their defaults
        assert getattr(cfg, other) == GROUPS[other]()


def test_every_flat_keyword_sets_its_group_field_and_no_two_share_one():
    assert len(set(FLAT.values())) == len(FLAT)
    every = {(g, f.name) for g, cls in GROUPS.items() for f in dataclasses.fields(cls)}
    assert set(FLAT.values()) == every
    for key, (group, fld) in FLAT.items():
        groups, rest = split_flat({}, {key: OTHER[group][fld]})
        assert rest == {} and getattr(groups[group], fld) == OTHER[group][fld]


def test_the_cluster_takes_at_most_13_named_parameters_and_every_group():
    from elastic_coded.runtime import ElasticCluster

    params = inspect.signature(ElasticCluster).parameters.values()
    named = [p.name for p in params if p.kind is not p.VAR_KEYWORD]
    assert len(named) <= 13 and set(GROUPS) <= set(named)
    assert named[:3] == ["A", "policy", "machines"]
    for p in params:  # each named parameter is a YAML key or the matrix itself
        if p.kind is not p.VAR_KEYWORD and p.name != "A":
            assert p.name in {"policy", "machines", "L", "S", "field", "churn", "options",
                              "trace", *GROUPS}


@settings(max_examples=60, deadline=None)
@given(picks=st.dictionaries(st.sampled_from(sorted(FLAT)), st.booleans(), max_size=8),
       extra=st.dictionaries(st.sampled_from(["units", "chunks", "mu"]), st.integers(1, 5),
                             max_size=2))
def test_flat_keywords_land_in_their_groups_and_the_rest_are_policy_options(picks, extra):
    flat = {k: OTHER[FLAT[k][0]][FLAT[k][1]] for k, use in picks.items() if use}
    if flat.get("strict") and "tolerance" in flat:  # keep the pair consistent
        flat["tolerance"] = 1e-6
    groups, rest = split_flat({}, {**flat, **extra})
    assert rest == extra
    for key, value in flat.items():
        group, fld = FLAT[key]
        assert getattr(groups[group], fld) == value
    untouched = {FLAT[k] for k in flat}
    for group, cls in GROUPS.items():
        for f in dataclasses.fields(cls):
            if (group, f.name) not in untouched:
                assert getattr(groups[group], f.name) == getattr(cls(), f.name)


def test_a_setting_given_twice_is_an_error():
    with pytest.raises(OptionError, match=r"^time_scale: 0.2 is set twice: also by run="):
        split_flat({"run": RunOptions(seed=3)}, {"time_scale": 0.2})
    with pytest.raises(OptionError, match=r"^tolerance: 1e-06 is set twice: also by verify="):
        split_flat({"verify": {"tolerance": 1e-3}}, {"tolerance": 1e-6})
    groups, _ = split_flat({"run": {"seed": 3}, "verify": False}, {"time_scale": 0.2,
                                                                 "tolerance": None})
    assert groups["run"] == RunOptions(seed=3, time_scale=0.2)
    assert groups["verify"] == VerifyOptions(on=False, tolerance=None)


@pytest.mark.parametrize("cls, kwargs, match", [
    (RunOptions, {"time_scale": float("inf")}, r"^run.time_scale: inf must be finite and >= 0"),
    (RunOptions, {"seed": -1}, r"^run.seed: -1 must be an int >= 0"),
    (RunOptions, {"storage": 0}, r"^run.storage: 0 must be a number in \(0, 1\]"),
    (RunOptions, {"storage": True}, r"^run.storage: True must be a number"),
    (RunOptions, {"learn_speeds": 1}, r"^run.learn_speeds: 1 must be True or False"),
    (RunOptions, {"chunk_rows": 0}, r"^run.chunk_rows: 0 must be an int >= 1 or None"),
    (VerifyOptions, {"tolerance": -1.0}, r"^verify.tolerance: -1.0 must be a relative error"),
    (RayOptions, {"num_cpus": 1.5}, r"^ray.num_cpus: 1.5 must be an int >= 1 or None"),
    (RayOptions, {"address": 3}, r"^ray.address: 3 must be a Ray address, 'auto' or None"),
    (RayOptions, {"cpus_per_worker": 0}, r"^ray.cpus_per_worker: 0 must be a number > 0"),
    (RayOptions, {"health_interval": float("nan")}, r"^ray.health_interval: nan must be"),
    (ReportOptions, {"file": 3}, r"^report.file: 3 must be a path or None"),
    (ReportOptions, {"keep_plans": "yes"}, r"^report.keep_plans: 'yes' must be True or False"),
])
def test_bad_values_name_the_setting_the_value_and_the_rule(cls, kwargs, match):
    with pytest.raises(OptionError, match=match) as info:
        cls(**kwargs)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ValueError)


def test_group_of_takes_instances_mappings_none_and_verify_bools():
    assert group_of("run", None) == RunOptions()
    r = RunOptions(seed=4)
    assert group_of("run", r) is r and group_of("run", {"seed": 4}) == r
    assert group_of("verify", False) == VerifyOptions(on=False)
    with pytest.raises(OptionError, match=r"^run: True must be a RunOptions, a mapping"):
        group_of("run", True)
    with pytest.raises(OptionError, match=r"^report: \{'windows': 3\} has unknown keys"):
        group_of("report", {"windows": 3})


def test_an_option_error_pickles_with_its_fields():
    import pickle

    e = pickle.loads(pickle.dumps(OptionError("run.seed", -1, "must be an int >= 0")))
    assert (e.key, e.value, e.rule, str(e)) == ("run.seed", -1, "must be an int >= 0",
                                                "run.seed: -1 must be an int >= 0")


def test_a_bad_flat_keyword_is_named_as_written():
    with pytest.raises(OptionError, match=r"^report_window: 0 must be an int >= 1 or None"):
        split_flat({}, {"report_window": 0})
    with pytest.raises(OptionError, match=r"^run.seed: -2 must be an int >= 0"):
        split_flat({"run": {"seed": -2}}, {})
