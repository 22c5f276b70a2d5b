"""One Policy value per policy: the registry's invariants, and what a new policy takes, shown by
adding ``proportional`` with backup copies here and running it through the config and the
simulator (the runtime runs it in tests/integration/test_runtime.py)."""

import numpy as np
import pytest

from elastic_coded.config import load_config
from elastic_coded.schemes.policies import family_of, parse_options, policy_names
from elastic_coded.schemes.registry import (
    REGISTRY,
    Policy,
    get_policy,
    policy_of,
    proportional_plan,
    register_policy,
    step_code,
    unregister_policy,
)
from elastic_coded.sim import simulate
from elastic_coded.sim.models import Compose, IIDStragglers, ShiftedExponential, UniformSpeeds

NEW = "proportional-backups"


@pytest.fixture
def new_policy():
    p = register_policy(Policy(NEW, "usctec", proportional_plan, speculation=1.5, uncoded=True))
    yield p
    unregister_policy(NEW)


def test_every_policy_is_consistent():
    for name, p in REGISTRY.items():
        assert p.name == name and family_of(name) == p.family
        if p.family == "usctec":
            assert callable(get_policy(name)) and p.execution in ("whole", "pull")
            assert step_code(name, 4, 2, 8)[:2] == ((1, 0) if p.uncoded else (4, 2))
        else:
            assert p.plan is None and p.execution == p.family
            with pytest.raises(ValueError, match="no plan function"):
                get_policy(name)
    assert policy_of("usctec-auto").pulls and not policy_of("usctec").pulls
    assert policy_of("speculative").speculation == 1.5


@pytest.mark.parametrize("bad, match", [
    (dict(name="", family="usctec", plan=proportional_plan), "name"),
    (dict(name="x", family="nope", plan=proportional_plan), "family"),
    (dict(name="x", family="usctec", plan=None), "plan"),
    (dict(name="x", family="unified", plan=proportional_plan, execution="unified"), "plan"),
    (dict(name="x", family="usctec", plan=proportional_plan, execution="unified"), "execution"),
    (dict(name="x", family="usctec", plan=proportional_plan, execution="pull",
          speculation=1.5), "speculation"),
    (dict(name="x", family="usctec", plan=proportional_plan, speculation=0.5), "speculation"),
])
def test_a_bad_policy_value_names_its_field(bad, match):
    with pytest.raises(ValueError, match=match):
        Policy(**bad)


def test_registering_twice_or_unknown_names_are_errors(new_policy):
    with pytest.raises(ValueError, match="already registered"):
        register_policy(new_policy)
    with pytest.raises(ValueError, match="built in"):
        unregister_policy("usctec")
    with pytest.raises(ValueError, match="unknown policy 'nope'.*known"):
        policy_of("nope")


def test_a_new_policy_is_known_to_config_and_options(new_policy, tmp_path):
    assert NEW in policy_names() and family_of(NEW) == "usctec"
    assert parse_options(NEW, {}) is not None  # the family's options
    path = tmp_path / "c.yaml"
    path.write_text(f"policy: {NEW}\nL: 2\nS: 1\nmachines: 4\nmatrix: {{rows: 40, cols: 4}}\n")
    assert load_config(str(path)).policy == NEW


@pytest.mark.parametrize("seed", [0, 1])
def test_a_new_policy_runs_in_the_simulator_with_its_backups(new_policy, seed):
    """Registered once, the simulator runs it like the built-ins: the speed-weighted uncoded
    split, with backup copies from its speculation field, so never slower than proportional
    without them on the same straggling trace, and faster on the mean."""
    res = simulate(20, 40, L=2, S=1, policies=("proportional", NEW), seed=seed, baseline=None,
                   delays=Compose((IIDStragglers(p=0.1, factor=6), ShiftedExponential(0.3))),
                   speeds=UniformSpeeds(1, 3))
    assert np.all(res.times[NEW] <= res.times["proportional"] * (1 + 1e-12))
    assert res.summary[NEW]["copies"] > 0 and res.summary["proportional"]["copies"] == 0
    assert res.summary[NEW]["mean"] < res.summary["proportional"]["mean"]
