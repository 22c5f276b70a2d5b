"""Heterogeneous masters as a policy of the one runtime, on real Ray actors (MATH.md §3): every
master's ``A_m x_m`` exact in GF(p) for every assignment method, to 1e-9 in the reals, machines
crashing mid-step, leaving and joining (assignment re-planned, coded rows topped up), and clear
errors before Ray work starts."""

import numpy as np
import pytest

from elastic_coded.algebra import field, relative_error
from elastic_coded.churn import StepEvents
from elastic_coded.families.hetero.policy import ASSIGNMENTS, source_name
from elastic_coded.runtime import ElasticCluster

pytestmark = pytest.mark.ray

F = field("gf(65521)")
SPEEDS = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0]


def _inputs(rng, As, fld=F):
    """A vector for master 0, a two-column matrix for the others."""
    return [fld.random((A.shape[1],), rng) if m == 0 else fld.random((A.shape[1], 2), rng)
            for m, A in enumerate(As)]


def _check(c, As, xs, fld=F, events=None):
    Y = c.multiply(xs, events=events)
    for m, (A, x, y) in enumerate(zip(As, xs, Y)):
        want = fld.matmul(A, x[:, None])[:, 0] if x.ndim == 1 else fld.matmul(A, x)
        if fld.exact:
            assert np.array_equal(y, want), f"master {m}"
        else:
            assert relative_error(y, want) <= 1e-9, f"master {m}"
    r = c.reports[-1]
    st = r.full_plan.storage  # the clusters keep their plans
    for m, used in r.decoded_by.items():
        # whose rows decoded master m: machines holding its coded rows, at least L_m of them
        assert set(used) <= set(st.holders(m))
        assert sum(b - a for n in used for a, b in st.rows_of(m, n)) >= st.L[m]
    assert r.products >= r.useful_products > 0
    return r


@pytest.fixture(scope="module")
def masters():
    rng = np.random.default_rng(0)
    return [F.random((30, 6), rng), F.random((40, 5), rng)]


@pytest.mark.parametrize("method", ASSIGNMENTS)
def test_every_master_exact_for_every_assignment(ray_session, masters, method):
    rng = np.random.default_rng(1)
    with ElasticCluster(masters, "hetero", machines=SPEEDS, field=F, time_scale=0.02,
                        assignment=method, seed=3, keep_plans=True) as c:
        for _ in range(3):
            r = _check(c, masters, _inputs(rng, masters))
        assert r.extra["assignment"] == r.plan.detail["assignment"]
        # no two machines hold the same coded row of a master
        st = r.full_plan.storage
        for m in range(2):
            rows = [i for n in st.holders(m) for a, b in st.rows_of(m, n) for i in range(a, b)]
            assert len(rows) == len(set(rows))


def test_crash_leave_join_replan_and_top_up(ray_session, masters):
    rng = np.random.default_rng(2)
    with ElasticCluster(masters, "hetero", machines=SPEEDS, field=F, time_scale=0.02,
                        seed=4, keep_plans=True) as c:
        r0 = _check(c, masters, _inputs(rng, masters))
        victim = r0.decoded_by[1][0]  # a machine whose rows master 1 needed
        r1 = _check(c, masters, _inputs(rng, masters))
        r2 = _check(c, masters, _inputs(rng, masters), events=StepEvents(crash=(victim,)))
        # the next step re-planned the assignment for the five machines left; the crash was
        # seen mid-step, or after the step no longer needed the victim's rows
        r3 = _check(c, masters, _inputs(rng, masters))
        assert victim in r2.failed + r3.left
        assert victim not in r3.available and len(r3.available) == 5
        c.remove_machine(r3.available[0])
        c.add_machines([{"id": "spot1", "speed": 3.0}, {"id": "spot2", "speed": 2.0}])
        r4 = _check(c, masters, _inputs(rng, masters))
        assert {"spot1", "spot2"} <= set(r4.available) and len(r4.available) == 6
        assert r4.rows_moved > 0  # joiners got coded rows: topped up, not re-encoded
        assert set(r4.joined) == {"spot1", "spot2"}
        assert r1.plan.detail["capacity"] == r4.plan.detail["capacity"]


def test_real_field_and_probabilistic(ray_session):
    rng = np.random.default_rng(5)
    As = [rng.standard_normal((20, 4)), rng.standard_normal((25, 4))]
    with ElasticCluster(As, "hetero", machines=SPEEDS, time_scale=0.02,
                        assignment="probabilistic", seed=2, keep_plans=True) as c:
        for _ in range(4):
            _check(c, As, _inputs(rng, As, field("real")), field("real"))


A2 = [np.ones((4, 3)), np.ones((5, 3))]


@pytest.mark.parametrize("kwargs, match", [
    ({"A": []}, r"^A: policy 'hetero' needs at least one matrix"),
    ({"A": np.ones((4, 3))}, r"^A: policy 'hetero' needs a list of matrices"),
    ({"A": [np.ones(4)]}, r"^A\[0\]: must be a non-empty 2-D matrix"),
    ({"assignment": "fastest"}, r"^assignment: 'fastest' is not a known method"),
    ({"a0": -1.0}, r"^a0: -1.0 must be a positive finite number"),
    ({"a": np.ones((2, 5))}, r"^u: give both a and u"),
    ({"L": 2}, r"^L, S: policy 'hetero' takes no L or S"),
    ({"q": 2}, r"^options: \['q'\] are not options of policy 'hetero'"),
    ({"machines": [1, 2, "x"]}, r"^machines\[2\]: a dict"),
])
def test_bad_construction_raises_before_ray(kwargs, match):
    import ray

    kw = {"A": A2, "machines": 5, **kwargs}
    was = ray.is_initialized()
    with pytest.raises(ValueError, match=match):
        ElasticCluster(kw.pop("A"), "hetero", **kw)
    assert ray.is_initialized() == was  # nothing was started


def test_bad_inputs_name_the_parameter(ray_session, masters):
    with ElasticCluster(masters, "hetero", machines=SPEEDS, field=F, time_scale=0.01,
                        keep_plans=True) as c:
        with pytest.raises(ValueError, match=r"^B: needs one input per master, M = 2, got 1"):
            c.multiply([np.zeros(6, dtype=np.int64)])
        with pytest.raises(ValueError, match=r"^B\[1\]: shape \(6,\) does not fit A\[1\]"):
            c.multiply([np.zeros(6, dtype=np.int64), np.zeros(6, dtype=np.int64)])
        with pytest.raises(ValueError, match=r"^policy: 'usctec' needs usctec storage"):
            c.multiply(_inputs(np.random.default_rng(0), masters), policy="usctec")
        # the cluster is still usable after refused steps
        _check(c, masters, _inputs(np.random.default_rng(1), masters))
        assert source_name(1) == "C1"
