"""Reliability on real Ray: membership and churn operations are atomic, any ``S`` crashes per
piece succeed whatever the budgets, late results get coded backups, the cluster survives the
death of its controller, and bad input fails early and clearly (before Ray work starts)."""

import json

import numpy as np
import pytest
import ray

from elastic_coded.algebra import field
from elastic_coded.churn import StepEvents, parse_churn
from elastic_coded.runtime import ElasticCluster
from elastic_coded.schemes.plan import ShortOfMachines

pytestmark = pytest.mark.ray

F = field("gf(2147483647)")


def ms(n, storage=1.0, speed=1.0):
    return [{"id": f"m{i}", "speed": speed, "storage": storage} for i in range(n)]


def exact(c, A, B, **kw):
    Y = c.multiply(B, **kw)
    assert np.array_equal(Y, F.matmul(A, B))
    return c.reports[-1]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return F.random((36, 6), rng), F.random((6, 3), rng)


# -- before Ray starts (these run first in the module, before its Ray session) ----------

@pytest.mark.parametrize("kwargs, exc, match", [
    ({"machines": 2}, ValueError, r"^machines: 2 given, fewer than L\+S = 3"),
    ({"machines": [{"id": "a"}, {"id": "a"}, {"id": "b"}]}, ValueError,
     r"^machines: ids must be distinct, \['a'\]"),
    ({"machines": None}, ValueError, r"^machines: a count, a list"),
    ({"storage": "0.5"}, ValueError, r"^storage: the default storage budget must be a number"),
    ({"field": "gf(3)"}, ValueError, r"GF\(3\) has only 3 elements, asked for 5"),
    ({"deadline": 0.5}, ValueError, r"^deadline: 0.5 must be a number >= 1"),
    ({"address": "127.0.0.1:9"}, ConnectionError, r"^address: no Ray cluster answers"),
    ({"report_window": 0}, ValueError, r"^report_window: 0 must be an int >= 1"),
])
def test_bad_construction_fails_before_ray_starts(kwargs, exc, match):
    assert not ray.is_initialized()
    args = {"L": 2, "S": 1, "machines": 4, "field": "gf(p)", **kwargs}
    with pytest.raises(exc, match=match):
        ElasticCluster(np.ones((8, 3), dtype=np.int64), **args)
    assert not ray.is_initialized()


def test_bad_matrices_name_A(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([[object(), 1]], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"^A: the file .* does not hold a plain numeric array"):
        ElasticCluster(str(path), L=1, S=0, machines=2)
    with pytest.raises(ValueError, match=r"^A: values must lie in \[0, 2147483647\) .* found "
                                         r"9223372036854775813"):
        ElasticCluster([[2**63 + 5]], L=1, S=0, machines=2, field="gf(p)")
    with pytest.raises(ValueError, match=r"^A: real field values must be finite"):
        ElasticCluster(np.array([[np.inf, 1.0]]), L=1, S=0, machines=2)
    assert not ray.is_initialized()


# -- on Ray -------------------------------------------------------------------------------

def test_remove_then_add_the_same_id(ray_session, data):
    A, B = data
    with ElasticCluster(A, L=2, S=1, machines=ms(5), field=F, time_scale=0.01) as c:
        exact(c, A, B)
        c.remove_machine("m3")
        c.add_machines([{"id": "m3"}])  # a fresh machine under an old id: it starts empty
        for _ in range(3):
            r = exact(c, A, B)
        assert "m3" in r.available


def test_repeated_ids_add_nothing(ray_session, data):
    A, B = data
    with ElasticCluster(A, L=2, S=1, machines=ms(4), field=F, time_scale=0.01) as c:
        with pytest.raises(ValueError, match=r"ids must be distinct, \['x'\]"):
            c.add_machines([{"id": "x"}, {"id": "x"}])
        with pytest.raises(ValueError, match=r"ids \['m1'\] are already present"):
            c.add_machines([{"id": "y"}, {"id": "m1"}])
        assert c.machines() == ["m0", "m1", "m2", "m3"]  # neither call added anything
        exact(c, A, B)


def test_a_failed_step_never_replays_its_churn(ray_session, data):
    """Step 1's script takes two machines away and adds one: too few for L+S.  The step fails
    clearly; once the user adds a machine the same step runs, without re-applying its join."""
    A, B = data
    churn = parse_churn({"events": [{"step": 1, "leave": ["m0", "m1"]},
                                    {"step": 1, "join": {"id": "spot1"}}]})
    with ElasticCluster(A, L=2, S=1, machines=ms(3), field=F, time_scale=0.01,
                        churn=churn) as c:
        exact(c, A, B)
        for _ in range(2):  # the retry fails the same way: nothing was applied twice
            with pytest.raises(ShortOfMachines, match=r"2 present .* fewer than L\+S = 3"):
                c.multiply(B)
        c.add_machines([{"id": "extra"}])
        r = exact(c, A, B)
        assert r.step == 1 and set(r.available) == {"m2", "spot1", "extra"}
        exact(c, A, B)


def test_one_crash_with_tight_budgets(ray_session):
    """L=3, S=3 on 9 machines holding 0.7 of A each: a crash mid-step is re-run on live holders
    (no repair to L+S first), and storage is repaired after, within the budgets."""
    rng = np.random.default_rng(1)
    A = F.random((90, 6), rng)
    with ElasticCluster(A, L=3, S=3, machines=ms(9, storage=0.7), field=F, time_scale=0.02,
                        allow_lower_S=True) as c:
        for step in range(4):
            B = F.random((6, 3), rng)
            ev = StepEvents(crash=("m4",)) if step == 1 else None
            r = exact(c, A, B, events=ev)
        assert "m4" not in r.available


def test_allow_lower_S_covers_a_storage_shortfall(ray_session):
    """After two departures 4 machines x 0.7 hold every row only L = 2 times: without
    allow_lower_S a clear error (the cluster still usable); with it, steps at the S allowed."""
    rng = np.random.default_rng(2)
    A = F.random((40, 4), rng)
    B = F.random((4, 2), rng)
    for allow in (False, True):
        with ElasticCluster(A, L=2, S=2, machines=ms(6, storage=0.7), field=F,
                            time_scale=0.01, allow_lower_S=allow) as c:
            exact(c, A, B)
            c.remove_machine("m0")
            c.remove_machine("m1")
            if not allow:
                with pytest.raises(ShortOfMachines, match=r"^storage: .* hold every row only L\+0 times"):
                    c.multiply(B)
                c.add_machines([{"id": "n0", "storage": 1.0}, {"id": "n1", "storage": 1.0}])
                exact(c, A, B)
            else:
                r = exact(c, A, B)
                assert r.plan.S == 0


def test_crash_under_uncoded_restores_L_plus_S_holders(ray_session, data):
    A, B = data
    with ElasticCluster(A, "uncoded", L=2, S=1, machines=ms(5), field=F,
                        time_scale=0.01) as c:
        exact(c, A, B)
        exact(c, A, B, events=StepEvents(crash=("m2",)))
        r = exact(c, A, B)
        assert min(c.placement().holders_present(r.available)) >= 3


def test_step_deadline_launches_coded_backups(ray_session):
    """S+1 machines of one piece 50x slower: backups on other holders finish the step; the
    slowed machines are cancelled, not waited for."""
    rng = np.random.default_rng(3)
    A = F.random((40, 4), rng)
    with ElasticCluster(A, L=2, S=1, machines=ms(6), field=F, time_scale=0.2,
                        learn_speeds=False, deadline=2.0) as c:
        B = F.random((4, 2), rng)
        exact(c, A, B)
        piece = c.reports[-1].plan.pieces[0]
        slow = {m: 50.0 for m in piece.machines[:2]}  # S + 1 = 2 of its L + S = 3
        r = exact(c, A, B, events=StepEvents(slow=slow))
        assert r.backups >= 1
        assert set(slow) <= set(r.stragglers)


@pytest.mark.parametrize("policy", ["usctec", "hetero"])
def test_the_cluster_survives_its_controller(ray_session, policy):
    rng = np.random.default_rng(4)
    if policy == "hetero":
        A = [F.random((20, 4), rng), F.random((16, 4), rng)]
        kw = {}
        make_B = lambda: [F.random((4, 1), rng), F.random((4, 2), rng)]  # noqa: E731
        want = lambda B: [F.matmul(a, b) for a, b in zip(A, B)]  # noqa: E731
    else:
        A = F.random((36, 4), rng)
        kw = {"L": 2, "S": 1}
        make_B = lambda: F.random((4, 2), rng)  # noqa: E731
        want = lambda B: [F.matmul(A, B)]  # noqa: E731
    with ElasticCluster(A, policy, machines=ms(5), field=F, time_scale=0.01, **kw) as c:
        for step in range(6):
            if step in (2, 4):
                ray.kill(c.controller, no_restart=True)
            B = make_B()
            Y = c.multiply(B)
            assert all(np.array_equal(y, w) for y, w in
                       zip(Y if policy == "hetero" else [Y], want(B)))
        assert c.revivals == 2
        assert len(c.reports[-1].available) == 5  # the workers outlived both controllers


@pytest.mark.usefixtures("ray_session")
def test_bad_steps_change_nothing(tmp_path):
    rng = np.random.default_rng(5)
    A = 1e200 * rng.standard_normal((12, 3))
    log = tmp_path / "reports.jsonl"
    with ElasticCluster(A, L=2, S=1, machines=4, time_scale=0.01, report_window=3,
                        report_file=str(log)) as c:
        with pytest.raises(ValueError, match=r"^B: shape \(3, 0\) does not fit A"):
            c.multiply(np.zeros((3, 0)))
        with pytest.raises(ValueError, match=r"^A @ B: the product overflows float64"):
            c.multiply(np.full((3, 2), 1e200))
        with pytest.raises(ValueError, match=r"^B: real field values must be finite"):
            c.multiply(np.full((3, 2), np.nan))
        for _ in range(5):
            x = rng.standard_normal((3, 2))
            assert np.allclose(c.multiply(x), A @ x)
        # reports: a window in memory, every step in the aggregates and in the file
        assert len(c.reports) == 3 and c.reports[-1].step == 4
        s = c.summary()
        assert s["steps"] == 5
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        assert [d["step"] for d in lines] == [0, 1, 2, 3, 4]


def test_each_failure_is_counted_once(ray_session, data):
    A, B = data
    with ElasticCluster(A, L=2, S=1, machines=ms(6), field=F, time_scale=0.2) as c:
        exact(c, A, B)
        r = exact(c, A, B, events=StepEvents(crash=("m0", "m1")))
        assert len(r.failed) == len(set(r.failed))
        assert c.summary()["failures"] == sum(len(x.failed) for x in c.reports)
