"""The USCTEC runtime on real Ray actors: exact results, stragglers, membership, recovery."""

import numpy as np
import pytest

from elastic_coded.algebra import field, relative_error
from elastic_coded.churn import StepEvents
from elastic_coded.runtime import ElasticCluster

pytestmark = pytest.mark.ray

F = field("gf(65521)")


def machines(n, speeds=None, storage=0.9):
    speeds = speeds or [1.0 + (i % 3) for i in range(n)]
    return [{"id": f"m{i}", "speed": speeds[i], "storage": storage} for i in range(n)]


@pytest.mark.parametrize("policy", ["usctec", "cyclic", "uncoded"])
def test_exact_in_gfp_for_every_policy(ray_session, policy):
    rng = np.random.default_rng(1)
    A = F.random((90, 20), rng)
    with ElasticCluster(A, policy, L=3, S=2, machines=machines(7), field=F, time_scale=0.02) as c:
        for _ in range(3):
            B = F.random((20, 5), rng)  # 5 columns: padded to a multiple of L inside
            assert np.array_equal(c.multiply(B), F.matmul(A, B))
        assert len(c.reports) == 3
        r = c.reports[-1]
        assert r.policy == policy and set(r.available) == {f"m{i}" for i in range(7)}
        assert r.t_total >= r.t_compute >= 0


def test_real_field_vector_and_stragglers(ray_session):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((120, 30))
    with ElasticCluster(A, "usctec", L=4, S=2, machines=machines(8), time_scale=0.05) as c:
        x = rng.standard_normal(30)
        ev = StepEvents(slow={"m0": 20.0, "m1": 20.0})
        y = c.multiply(x, events=ev)  # the coded plan (usctec-auto may run lean on a first step)
        assert y.shape == (120,)
        assert relative_error(y, A @ x) <= 1e-9
        r = c.reports[-1]
        # the two 20x stragglers were not waited for
        assert {"m0", "m1"} & set(r.stragglers)
        assert not ({"m0", "m1"} & {m for ms in r.decoded_by.values() for m in ms})


def test_join_and_leave(ray_session):
    rng = np.random.default_rng(3)
    A = F.random((60, 10), rng)
    with ElasticCluster(A, L=2, S=1, machines=machines(5), field=F, time_scale=0.02) as c:
        B = F.random((10, 4), rng)
        assert np.array_equal(c.multiply(B), F.matmul(A, B))
        moved = c.add_machines([{"id": "new", "speed": 4.0, "storage": 0.5}])
        assert moved == 30
        assert np.array_equal(c.multiply(B), F.matmul(A, B))
        r = c.reports[-1]
        assert r.joined == ("new",) and "new" in r.available
        c.remove_machine("m0")
        c.remove_machine("m1")
        assert np.array_equal(c.multiply(B), F.matmul(A, B))
        r = c.reports[-1]
        assert set(r.left) == {"m0", "m1"} and "m0" not in r.available
        assert c.placement().min_replication() >= 3


def test_more_than_S_crashes_mid_step_are_recovered(ray_session):
    rng = np.random.default_rng(4)
    A = F.random((80, 12), rng)
    ms = machines(6, speeds=[1.0] * 6, storage=1.0)
    with ElasticCluster(A, L=2, S=1, machines=ms, field=F, time_scale=0.3,
                        placement="cyclic", learn_speeds=False) as c:
        B = F.random((12, 2), rng)
        # three crashes in one step: every piece loses at least one result, some lose more than S
        Y = c.multiply(B, events=StepEvents(crash=("m0", "m1", "m2")))
        assert np.array_equal(Y, F.matmul(A, B))
        r = c.reports[-1]
        assert set(r.failed) == {"m0", "m1", "m2"}
        assert r.recovered_pieces
        Y = c.multiply(B)
        assert np.array_equal(Y, F.matmul(A, B))
        assert set(c.reports[-1].available) == {"m3", "m4", "m5"}


def test_too_few_machines_is_a_clear_error_not_a_hang(ray_session):
    rng = np.random.default_rng(5)
    A = F.random((30, 6), rng)
    with ElasticCluster(A, L=2, S=2, machines=machines(5, storage=1.0), field=F,
                        time_scale=0.01) as c:
        B = F.random((6, 2), rng)
        c.remove_machine("m0")
        c.remove_machine("m1")
        with pytest.raises(ValueError, match=r"fewer than L\+S = 4"):
            c.multiply(B)
        assert len(c.reports) == 0  # the failed step left no report and no partial result
        c.add_machines([{"id": "back", "speed": 1.0, "storage": 1.0}])
        assert np.array_equal(c.multiply(B), F.matmul(A, B))


def test_opt_in_lower_S(ray_session):
    rng = np.random.default_rng(6)
    A = F.random((30, 6), rng)
    with ElasticCluster(A, "usctec", L=2, S=2, machines=machines(4, storage=1.0), field=F,
                        time_scale=0.01, allow_lower_S=True) as c:
        c.remove_machine("m3")
        B = F.random((6, 2), rng)
        assert np.array_equal(c.multiply(B), F.matmul(A, B))
        assert c.reports[-1].plan.S == 1


def test_matrix_from_npy_file(ray_session, tmp_path):
    rng = np.random.default_rng(7)
    A = rng.standard_normal((50, 8))
    path = tmp_path / "A.npy"
    np.save(path, A)
    with ElasticCluster(str(path), L=2, S=1, machines=machines(4), time_scale=0.01) as c:
        B = rng.standard_normal((8, 2))
        assert relative_error(c.multiply(B), A @ B) <= 1e-9
        c.add_machines([{"id": "j", "speed": 2.0, "storage": 0.5}])
        c.remove_machine("m0")
        assert relative_error(c.multiply(B), A @ B) <= 1e-9


def test_bad_input(ray_session):
    A = np.zeros((10, 4))
    with pytest.raises(ValueError, match="policy: unknown policy 'fast'"):
        ElasticCluster(A, "fast", L=2, S=1, machines=3)
    with pytest.raises(ValueError, match="S: must be an int >= 0"):
        ElasticCluster(A, L=2, S=-1, machines=3)
    with pytest.raises(ValueError, match="speed of 'm0' must be positive"):
        ElasticCluster(A, L=2, S=1, machines=[{"id": "m0", "speed": 0}] * 3)
    with pytest.raises(ValueError, match="no file"):
        ElasticCluster("/nonexistent/A.npy", L=2, S=1, machines=3)
    with ElasticCluster(A, L=2, S=1, machines=3, time_scale=0.0) as c:
        with pytest.raises(ValueError, match=r"B: shape \(5, 2\) does not fit A"):
            c.multiply(np.zeros((5, 2)))
        with pytest.raises(ValueError, match="finite"):
            c.multiply(np.full((4, 2), np.nan))
        assert np.allclose(c.multiply(np.ones((4, 2))), 0)


def test_speed_estimates_follow_persistent_slowness(ray_session):
    """A machine persistently 8x slower is learnt: under ``proportional`` its calls run past
    the deadline and are replaced by backup copies, and each cancelled call bounds its speed
    (the time it ran, less what every call pays beside its machine).  No estimate goes below
    a machine's true speed: a call the default cancels on time (its piece decoded from the
    others) bounds nothing below it."""
    rng = np.random.default_rng(8)
    A = rng.standard_normal((120, 10))
    with ElasticCluster(A, L=2, S=1, machines=machines(5, speeds=[1.0] * 5, storage=1.0),
                        time_scale=0.1) as c:
        x = rng.standard_normal((10, 2))  # L = 2 columns: pieces wait for 2 of 3 results
        for _ in range(4):
            c.multiply(x, policy="proportional", events=StepEvents(slow={"m4": 8.0}))
            assert c.speeds()["m4"] >= 0.9 / 8
        est = c.speeds()
        assert est["m4"] < 0.3 * np.median([est[m] for m in ("m0", "m1", "m2", "m3")])
        for _ in range(6):
            c.multiply(x, events=StepEvents(slow={"m3": 8.0}))
            assert c.speeds()["m3"] >= 0.9 / 8
        assert c.reports[-1].extra["mode"] == "eager" and "m3" in c.reports[-1].stragglers


def test_pull_steps_leave_the_speeds_of_machines_that_kept_their_pace(ray_session):
    """A pull step ends with calls still in flight on every machine, most of them queued
    behind the one computing: none of them may drag an estimate down.  Before, each such call
    gave the bound ``work / time since sent``, and after a few ``dynamic`` steps machines that
    never slowed were planned at a fraction of their speed."""
    rng = np.random.default_rng(10)
    A = rng.standard_normal((240, 10))
    speeds = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    with ElasticCluster(A, "dynamic", L=2, S=1, machines=machines(6, speeds=speeds, storage=1.0),
                        time_scale=0.3) as c:
        x = rng.standard_normal((10, 2))
        for k in range(5):
            c.multiply(x, events=StepEvents(slow={f"m{k % 6}": 5.0}))
        est = c.speeds()
    for i, s in enumerate(speeds):
        if i >= 5:  # never slowed: planned at its own speed
            assert est[f"m{i}"] == pytest.approx(s, rel=0.2)
        assert est[f"m{i}"] >= 0.8 * s  # one slow step among five does not move an estimate


def test_speculative_backup_copies_beat_a_straggler(ray_session):
    rng = np.random.default_rng(9)
    A = F.random((60, 8), rng)
    with ElasticCluster(A, "speculative", L=2, S=1, machines=machines(5, speeds=[1.0] * 5),
                        field=F, time_scale=0.5, learn_speeds=False) as c:
        B = F.random((8, 3), rng)
        Y = c.multiply(B, events=StepEvents(slow={"m2": 30.0}))
        assert np.array_equal(Y, F.matmul(A, B))
        r = c.reports[-1]
        assert r.backups >= 1
        assert "m2" in r.stragglers  # its copy won; the 30x straggler was cancelled


def test_a_policy_registered_in_the_driver_runs_on_the_cluster(ray_session):
    """What a new policy takes: one Policy value (here proportional with backup copies),
    registered in the driver; the controller learns it from the cluster, and it runs with its
    speculation like the built-in ``speculative``."""
    from elastic_coded.schemes.registry import (
        Policy,
        proportional_plan,
        register_policy,
        unregister_policy,
    )

    register_policy(Policy("proportional-backups", "usctec", proportional_plan,
                           speculation=1.5, uncoded=True))
    try:
        rng = np.random.default_rng(9)
        A = F.random((60, 8), rng)
        with ElasticCluster(A, "proportional-backups", L=2, S=1,
                            machines=machines(5, speeds=[1.0] * 5), field=F, time_scale=0.5,
                            learn_speeds=False) as c:
            B = F.random((8, 3), rng)
            Y = c.multiply(B, events=StepEvents(slow={"m2": 30.0}))
            assert np.array_equal(Y, F.matmul(A, B))
            r = c.reports[-1]
            assert r.policy == "proportional-backups" and r.backups >= 1
            assert "m2" in r.stragglers
    finally:
        unregister_policy("proportional-backups")


def test_every_policy_through_one_constructor(ray_session):
    """One constructor, one class, one report type for every policy."""
    G = F  # GF(2^8) compiles anew in each fresh worker process (~20 s): test_unified_ray has it
    rng = np.random.default_rng(10)
    A = G.random((12, 5), rng)
    with ElasticCluster(A, "unified", machines=4, mu=0.5, q=4, field=G, time_scale=0.01) as u:
        assert type(u) is ElasticCluster
        X = G.random((5, 4), rng)
        assert np.array_equal(u.multiply(X), G.matmul(A, X))
    As = [F.random((8, 4), rng), F.random((6, 4), rng)]
    with ElasticCluster(As, "hetero", field=F, machines=5, time_scale=0.01) as h:
        assert type(h) is ElasticCluster
        xs = [F.random((4,), rng), F.random((4,), rng)]
        for Am, x, y in zip(As, xs, h.multiply(xs)):
            assert np.array_equal(y, F.matmul(Am, x[:, None])[:, 0])
        assert type(h.reports[-1]) is type(u.reports[-1])
    with pytest.raises(ValueError, match=r"known: \['cyclic', 'dynamic', 'hetero', "
                                         r"'proportional', 'speculative', 'uncoded', "
                                         r"'unified', 'usctec', 'usctec-auto', "
                                         r"'usctec-pull'\]"):
        ElasticCluster(A, "nope", L=1, S=0)


@pytest.mark.parametrize("config", ["unified.yaml", "hetero.yaml"])
def test_cli_runs_every_policy_from_yaml(ray_session, config, tmp_path, capsys):
    """``elastic-coded run`` reaches unified and hetero (on the session's Ray)."""
    import json
    import os

    from elastic_coded.cli import main

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", config)
    out = tmp_path / "r.json"
    assert main(["run", path, "--steps", "3", "--quiet", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["exact_steps"] == 3 and len(doc["reports"]) == 3
    assert "steps exact (vs numpy) |                    3/3" in capsys.readouterr().out
