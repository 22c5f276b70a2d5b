"""Run configurations for every policy family: the examples parse, and every bad key gets an
error naming the key, the value and the rule (no Ray)."""

import os
from fractions import Fraction

import pytest

from elastic_coded.config import ConfigError, load_config, parse_config
from elastic_coded.schemes.policies import HeteroOptions, PullOptions, UnifiedOptions

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


@pytest.mark.parametrize("name, policy", [("quickstart.yaml", "usctec-auto"),
                                          ("unified.yaml", "unified"),
                                          ("hetero.yaml", "hetero")])
def test_examples_parse(name, policy):
    cfg = load_config(os.path.join(EXAMPLES, name))
    assert cfg.policy == policy
    if policy == "usctec-auto":
        assert cfg.options == PullOptions() and cfg.masters == ()
    elif policy == "unified":
        assert cfg.options == UnifiedOptions(mu=Fraction(1, 2), q=4, N=4)
    else:
        assert isinstance(cfg.options, HeteroOptions) and len(cfg.masters) == 2


BASE = {"job": "matmul", "field": "gf(p)", "machines": 8}


@pytest.mark.parametrize("doc, match", [
    ({"policy": "nope"}, r"'policy': 'nope' must be one of \['cyclic', 'dynamic', 'hetero'"),
    ({"policy": "unified", "options": {"mu": "x"}}, r"'options': mu: 'x' is not a storage"),
    ({"policy": "unified", "options": {"K": 3}}, r"'options': options: \['K'\] are not options"),
    ({"policy": "unified", "options": [1]}, r"'options': \[1\] must be a mapping"),
    ({"policy": "usctec", "options": {"mu": 1}}, r"are not options of policy 'usctec'; known: "
                                                 r"\['units', 'chunks', 'depth', 'call_cost_s'\]"),
    ({"policy": "hetero"}, r"'masters': None must be a non-empty list of \{rows, cols\}"),
    ({"policy": "hetero", "masters": [{"rows": 0, "cols": 3}]}, r"'masters\[0\]'|'rows': 0"),
    ({"policy": "unified", "masters": [{"rows": 3, "cols": 3}]},
     r"is only for a family with one matrix per master"),
    ({"policy": "hetero", "job": "power_iteration", "field": "real",
      "matrix": {"rows": 4, "cols": 4},
      "masters": [{"rows": 3, "cols": 3}]},
     r"'job': 'power_iteration' must be one of \['matmul'\]"),
    ({"policy": "usctec", "machines": 3}, r"'machines': 3 must be at least L\+S = 6"),
    ({"machines": [1, True]}, r"'machines\[1\]': True must be"),
    ({"verify": {"tol": 1}}, r"'verify': \{'tol': 1\} has unknown keys \['tol'\]; known: \['on'"),
    ({"verify": [1]}, r"'verify': \[1\] must be a mapping of VerifyOptions's keys \(or true"),
    ({"verify": {"tolerance": -1}}, r"'verify.tolerance': -1 must be a relative error bound"),
    ({"verify": {"strict": True, "tolerance": None}},
     r"'verify.strict': True needs verify.tolerance"),
    ({"verify": {"exclude_after": 0}}, r"'verify.exclude_after': 0 must be an int >= 1"),
    ({"machines_per_process": 0}, r"'machines_per_process': 0 must be an int >= 1 or None"),
    ({"ray": {"machines_per_process": 0}}, r"'ray.machines_per_process': 0 must be an int >= 1"),
    ({"time_scale": -1}, r"'time_scale': -1 must be finite and >= 0"),
    ({"run": {"deadline": 0.5}}, r"'run.deadline': 0.5 must be a number >= 1 .* or None"),
    ({"run": {"speed": 1}}, r"'run': \{'speed': 1\} has unknown keys \['speed'\]"),
    ({"time_scale": 0.1, "run": {"time_scale": 0.2}}, r"'time_scale': 0.1 is also set as "
                                                      r"run.time_scale"),
    ({"report": {"window": 0}}, r"'report.window': 0 must be an int >= 1 or None"),
    ({"ray": {"ping_timeout": 0}}, r"'ray.ping_timeout': 0 must be a number > 0"),
    ({"storage": 1.5}, r"'storage': 1.5 must be a number in \(0, 1\]"),
    ({"placement": "x"}, r"'placement': 'x' must be 'design' or 'cyclic'"),
    ({"machines_per_process": True}, r"'machines_per_process': True must be an int >= 1"),
])
def test_bad_configs_name_key_value_and_rule(doc, match):
    with pytest.raises(ConfigError, match=match):
        parse_config({**BASE, **doc})


def test_unified_and_hetero_take_few_machines():
    cfg = parse_config({**BASE, "policy": "unified", "machines": 2, "options": {"q": 2}})
    assert cfg.machines == 2 and cfg.options.q == 2
    cfg = parse_config({**BASE, "policy": "hetero", "machines": [1, 2, 3],
                        "masters": [{"rows": 4, "cols": 2}], "options": {"assignment": "exact"}})
    assert cfg.masters == ((4, 2),) and cfg.options.assignment == "exact"


def test_verify_key_reaches_the_cluster_arguments():
    from elastic_coded.algebra import field
    from elastic_coded.jobs import cluster_kwargs
    from elastic_coded.options import VerifyOptions

    cfg = parse_config({**BASE, "verify": {"tolerance": 1e-6, "strict": True}})
    kw = cluster_kwargs(cfg, field("gf(p)"))
    assert kw["verify"] == VerifyOptions(on=True, tolerance=1e-6, strict=True, exclude_after=2)
    assert cluster_kwargs(parse_config({**BASE, "verify": False}), field("gf(p)"))["verify"] \
        == VerifyOptions(on=False)
    assert cluster_kwargs(parse_config(BASE), field("gf(p)"))["verify"] == VerifyOptions()


def test_machines_per_process_reaches_the_cluster_and_defaults_by_speed_mode():
    from elastic_coded.algebra import field
    from elastic_coded.jobs import cluster_kwargs
    from elastic_coded.machines import per_process

    cfg = parse_config({**BASE, "machines_per_process": 3})
    assert cluster_kwargs(cfg, field("gf(p)"))["ray"].machines_per_process == 3
    assert cluster_kwargs(parse_config(BASE), field("gf(p)"))["ray"].machines_per_process is None
    assert per_process(None, 0.2) == 4 and per_process(None, 0.0) == 1
    assert per_process(7, 0.0) == 7
    with pytest.raises(ValueError, match=r"machines_per_process: must be an integer >= 1"):
        per_process(0, 0.2)


def test_yaml_1_1_readings_of_on_and_exponents_are_undone(tmp_path):
    """PyYAML reads ``on:`` as the key ``true`` and ``1e-6`` as a string; the settings mean
    what they say."""
    from elastic_coded.options import RunOptions, VerifyOptions

    path = tmp_path / "c.yaml"
    path.write_text("job: matmul\nfield: gf(p)\nverify: {on: false, tolerance: 1e-6}\n"
                    "run: {time_scale: 5e-2}\n")
    cfg = load_config(str(path))
    assert cfg.verify == VerifyOptions(on=False, tolerance=1e-6)
    assert cfg.run == RunOptions(time_scale=0.05)
    path.write_text("job: matmul\nfield: gf(p)\nrun: {time_scale: fast}\n")
    with pytest.raises(ConfigError, match=r"'run.time_scale': 'fast' must be finite"):
        load_config(str(path))


def test_the_documented_config_with_every_key_parses():
    """docs/options.md's YAML block, every key with its default or an example value, is a
    config that parses to what it says."""
    import yaml

    from elastic_coded.options import RayOptions, RunOptions, VerifyOptions

    text = open(os.path.join(EXAMPLES, "..", "docs", "options.md")).read()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    doc = yaml.safe_load(block)
    doc.pop("masters")  # hetero's key, beside a usctec-auto policy
    doc["churn"] = os.path.join(EXAMPLES, "churn.yaml")
    cfg = parse_config(doc)
    assert cfg.run == RunOptions(time_scale=0.2, storage=0.8)
    assert cfg.verify == VerifyOptions() and cfg.ray == RayOptions(num_cpus=2,
                                                                   machines_per_process=4)
