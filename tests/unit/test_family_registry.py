"""The family registry: one Family value per scheme, and a scheme added from outside the package
(tests/unit/replication_family.py) that the simulator runs with one registration line."""

import pickle

import numpy as np
import pytest
import replication_family as rf

from elastic_coded.errors import ArgumentError, ElasticCodedError
from elastic_coded.families import (
    Family,
    built_in,
    family_names,
    family_of,
    register_family,
    unregister_family,
)
from elastic_coded.schemes.families import Setup, make_family
from elastic_coded.schemes.policies import parse_options
from elastic_coded.schemes.registry import Policy, policy_of
from elastic_coded.sim import simulate


@pytest.fixture
def replication():
    rf.register()
    yield rf
    rf.unregister()


def test_every_built_in_family_is_one_value():
    for name in ("usctec", "unified", "hetero"):
        fam = family_of(name)
        assert isinstance(fam, Family) and fam.name == name and built_in(name)
    assert family_of("usctec").executions == ("whole", "pull") and family_of("usctec").plans
    assert family_of("unified").executions == ("unified",)
    assert family_of("usctec").options_class().__name__ == "PullOptions"
    assert family_of("hetero").sim_model().variant(None, (4, 4)).masters == (4, 4)


def test_what_a_family_can_do_is_asked_of_it_not_of_its_name():
    """The config, the jobs, the CLI and the cluster ask a family's capabilities (coded with
    L and S, one matrix per master, the jobs it runs) rather than compare family names."""
    from elastic_coded.config import JOBS
    from elastic_coded.schemes.policies import family_spec

    usctec, unified, hetero = (family_of(n) for n in ("usctec", "unified", "hetero"))
    assert usctec.coded_LS and not unified.coded_LS and not hetero.coded_LS
    assert hetero.masters and not usctec.masters and not unified.masters
    assert all(usctec.runs_job(j) for j in JOBS)
    assert [j for j in JOBS if unified.runs_job(j)] == ["matmul"]
    assert [j for j in JOBS if hetero.runs_job(j)] == ["matmul"]
    for policy in ("usctec-auto", "dynamic", "cyclic"):
        assert family_spec(policy) is usctec
    assert family_spec("hetero") is hetero
    toy = Family("toy-caps", storage=None, runtime=None, coded_LS=True, jobs=None)
    assert toy.runs_job("pagerank") and toy.coded_LS and not toy.masters


def test_an_unknown_family_names_the_argument_the_value_and_the_known_ones():
    with pytest.raises(ArgumentError, match=r"family: unknown family 'nope'; known: hetero"):
        family_of("nope")
    with pytest.raises(ElasticCodedError, match="family: a Family"):
        register_family("usctec")
    with pytest.raises(ArgumentError, match="'usctec' is already registered"):
        register_family(Family("usctec", storage=dict, runtime=None))
    with pytest.raises(ArgumentError, match="'usctec' is built in"):
        unregister_family("usctec")
    with pytest.raises(ArgumentError, match="execution: a usctec policy runs"):
        Policy("bad", "usctec", rf.Copies, "replication")
    with pytest.raises(ArgumentError, match="has no simulator model"):
        family_of("usctec").sim_model()


def test_the_toy_family_is_known_everywhere_once_registered(replication):
    assert "replication" in family_names() and not built_in("replication")
    assert policy_of("replication").family == "replication"
    assert parse_options("replication", {}) is None
    fam = make_family("replication", Setup(10, 1, 0))
    assert fam.start([type("Spec", (), {"id": "m0"})()]).moves == (("A", 0, 10, "m0"),)
    # pickled with its family: another process learns both
    again = pickle.loads(pickle.dumps(policy_of("replication")))
    assert again == policy_of("replication")


def test_the_toy_family_runs_in_the_simulator(replication):
    res = simulate(4, 20, L=2, S=1, policies=("replication", "uncoded"), baseline="uncoded",
                   seed=2)
    t = res.times["replication"]
    assert t.shape == (20,) and np.all(np.isfinite(t)) and np.all(t > 0)
    # the first of four whole copies is never faster than splitting the rows over four
    assert res.summary["replication"]["mean"] >= 0.5 * res.summary["uncoded"]["mean"]


def test_the_toy_family_is_gone_once_unregistered():
    rf.register()
    rf.unregister()
    assert "replication" not in family_names()
    with pytest.raises(ArgumentError, match="unknown family 'replication'"):
        make_family("replication", Setup(10, 1, 0))


def test_a_family_names_the_driver_state_its_executors_keep():
    """The unified family's executor keeps its Shuffle plans on the driver between steps, in a
    state its setup makes (a fresh one per cluster); the others keep none."""
    from elastic_coded.families.unified.executor import UnifiedCache
    from elastic_coded.runtime.family_setup import setup_of

    a, b = setup_of("unified").make_state(), setup_of("unified").make_state()
    assert isinstance(a, UnifiedCache) and isinstance(b, UnifiedCache) and a is not b
    assert setup_of("usctec").make_state() is None and setup_of("hetero").make_state() is None
