"""The README's contract from the outside: every bad input to a live cluster or at its
construction raises an ``ElasticCodedError`` whose message names the argument, and the cluster
is usable right after (a good step returns the exact product)."""

import numpy as np
import pytest

from elastic_coded import ElasticCluster, ElasticCodedError
from elastic_coded.algebra.fields import field

pytestmark = pytest.mark.ray

P = 65521
M = 6


@pytest.fixture(scope="module")
def cluster(ray_session):
    rng = np.random.default_rng(0)
    A = rng.integers(0, P, (24, 5))
    c = ElasticCluster(A, "usctec", M, L=2, S=1, field=P, run={"storage": 0.75})
    yield c, A
    c.shutdown()


def _good_step(c, A):
    B = np.random.default_rng(1).integers(0, P, (5, 2))
    F = field(P)
    assert np.array_equal(np.asarray(c.multiply(B)), F.matmul(F.asarray(A), F.asarray(B)))


STEP_INPUTS = [
    ("nan", lambda: np.full((5, 2), np.nan), "B"),
    ("strings", lambda: np.array([["a", "b"]] * 5), "B"),
    ("complex", lambda: np.ones((5, 2), dtype=complex), "B"),
    ("3-D", lambda: np.ones((5, 2, 2), dtype=np.int64), "B"),
    ("wrong rows", lambda: np.ones((4, 2), dtype=np.int64), "B"),
    ("object", lambda: np.array([[object()] * 2] * 5, dtype=object), "B"),
    ("inf", lambda: np.full((5, 2), np.inf), "B"),
]


@pytest.mark.parametrize("what,make,arg", STEP_INPUTS, ids=[w for w, _, _ in STEP_INPUTS])
def test_a_bad_input_is_refused_by_name_and_the_cluster_goes_on(cluster, what, make, arg):
    c, A = cluster
    with pytest.raises(ElasticCodedError, match=arg):
        c.multiply(make())
    _good_step(c, A)


def test_bad_policies_events_and_membership_are_refused_by_name(cluster):
    c, A = cluster
    present = c.machines()
    cases = [
        (lambda: c.multiply(np.ones((5, 1), dtype=np.int64), policy="nope"), "policy"),
        (lambda: c.multiply(np.ones((5, 1), dtype=np.int64), events={"leave": "m99"}),
         "m99"),
        (lambda: c.multiply(np.ones((5, 1), dtype=np.int64),
                            events={"join": [{"id": "j1"}, {"id": "j1"}]}), "j1"),
        (lambda: c.add_machines([{"id": present[0], "speed": 1.0}]), present[0]),
        (lambda: c.add_machines([{"id": "neg", "speed": -1.0}]), "speed"),
        (lambda: c.remove_machine("m99"), "m99"),
    ]
    for call, named in cases:
        with pytest.raises(ElasticCodedError, match=named):
            call()
        assert c.machines() == present
    _good_step(c, A)


@pytest.mark.parametrize("kwargs,named", [
    ({"policy": "nope"}, "nope"), ({"L": 0}, "L"), ({"machines": 0}, "machines"),
    ({"field": 4}, "field"), ({"run": {"time_scale": -1}}, "time_scale"),
    ({"S": -1}, "S"), ({"L": 2.5}, "L"),
], ids=lambda v: str(v))
def test_a_bad_construction_is_refused_by_name(ray_session, kwargs, named):
    args = {"policy": "usctec", "machines": 4, "L": 2, "S": 1, **kwargs}
    A = np.ones((12, 3))
    with pytest.raises(ElasticCodedError, match=named):
        ElasticCluster(A, args.pop("policy"), args.pop("machines"), **args).shutdown()


def test_a_machine_named_twice_in_leave_leaves_once(cluster):
    """Found by the API fuzz: the second name of a doubled leave used to fail the step after
    the first had removed the machine (a failed step that changed the cluster)."""
    c, A = cluster
    present = c.machines()
    B = np.random.default_rng(2).integers(0, P, (5, 2))
    F = field(P)
    Y = c.multiply(B, events={"leave": [present[0], present[0]]})
    assert np.array_equal(np.asarray(Y), F.matmul(F.asarray(A), F.asarray(B)))
    assert c.machines() == present[1:]
    c.add_machines([{"id": present[0], "speed": 1.0, "storage": 0.75}])
    _good_step(c, A)
