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
    ({"storage": "0.5"}, ValueError, r"^storage: '0.5' must be a number in \(0, 1\] \(the default "
                                     r"storage budget\)"),
    ({"field": "gf(3)"}, ValueError, r"^L, S: L=2, S=1 need L\+S\+L = 5 distinct points .* "
                                     r"GF\(3\) has only 3 elements"),
    ({"field": "gf(7)", "L": 40, "S": 20, "machines": 60}, ValueError,
     r"^L, S: L=40, S=20 need L\+S\+L = 100 distinct points of the field .* GF\(7\) has "
     r"only 7 elements; use a larger field, or smaller L and S"),
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
                with pytest.raises(ShortOfMachines, match=r"^storage: .* hold every row only L\+0 "
                                                          r"times"):
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


@pytest.mark.parametrize("policy", ["usctec", "hetero"])
def test_a_new_controller_never_names_the_old_ones_plans(ray_session, policy):
    """The driver holds the last plans by serial number and the controller leaves out a plan
    the driver holds: a controller that replaces one that died must not take the old serials
    for plans of its own (the driver would run the old plan, for machines since gone)."""
    rng = np.random.default_rng(6)
    if policy == "hetero":
        A, kw = [F.random((20, 4), rng), F.random((16, 4), rng)], {}
        make_B = lambda: [F.random((4, 1), rng), F.random((4, 2), rng)]  # noqa: E731
        want = lambda B: [F.matmul(a, b) for a, b in zip(A, B)]  # noqa: E731
    else:
        A, kw = F.random((36, 4), rng), {"L": 2, "S": 1}
        make_B = lambda: F.random((4, 2), rng)  # noqa: E731
        want = lambda B: [F.matmul(A, B)]  # noqa: E731
    with ElasticCluster(A, policy, machines=ms(7), field=F, time_scale=0.003, **kw) as c:
        for step in range(9):
            if step == 4:
                ray.kill(c.controller, no_restart=True)
                c.remove_machine("m1")
            if step == 6:
                c.add_machines([{"id": "n0"}])
            B = make_B()
            Y = c.multiply(B, policy=policy if policy == "hetero" else
                           ("usctec", "usctec-pull")[step % 2])
            assert all(np.array_equal(y, w) for y, w in
                       zip(Y if policy == "hetero" else [Y], want(B))), step
            if step >= 4:
                assert "m1" not in c.reports[-1].available
        assert c.revivals == 1


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


# -- no fault leaves the cluster unusable (issue 21) --------------------------------------

def _family(policy, rng):
    """``(A, kwargs, make_B, want)`` for a small cluster of ``policy`` over GF(p)."""
    if policy == "hetero":
        A = [F.random((20, 4), rng), F.random((16, 4), rng)]
        return (A, {}, lambda: [F.random((4, 1), rng), F.random((4, 2), rng)],
                lambda B: [F.matmul(a, b) for a, b in zip(A, B)])
    if policy == "unified":
        A = F.random((40, 4), rng)
        return (A, {"mu": "1/2", "q": 4, "N": 4}, lambda: F.random((4, 4), rng),
                lambda B: [F.matmul(A, B)])
    A = F.random((36, 4), rng)
    return A, {"L": 2, "S": 1}, lambda: F.random((4, 2), rng), lambda B: [F.matmul(A, B)]


def _exact_steps(c, policy, make_B, want, n=2):
    for _ in range(n):
        B = make_B()
        Y = c.multiply(B)
        assert all(np.array_equal(y, w) for y, w in zip(Y if policy == "hetero" else [Y],
                                                          want(B)))
    return c.reports[-1]


@pytest.mark.parametrize("policy", ["usctec", "unified", "hetero"])
def test_a_liar_that_crashes_in_its_lying_step_leaves_the_cluster_usable(ray_session, policy):
    import pickle

    A, kw, make_B, want = _family(policy, np.random.default_rng(10))
    churn = parse_churn({"events": [{"step": 1, "corrupt": "m1"}, {"step": 1, "crash": "m1"}]})
    with ElasticCluster(A, policy, machines=ms(6), field=F, time_scale=0.005, churn=churn,
                        **kw) as c:
        _exact_steps(c, policy, make_B, want, 3)  # step 1: m1 lies, then crashes
        assert "m1" not in c.machines() and "m1" not in c.reports[-1].available
        assert "m1" not in c._handles  # dropped from the driver's tables too
        c.add_machines([{"id": "m1"}])  # the id is free again
        assert "m1" in _exact_steps(c, policy, make_B, want, 1).available
        assert max(len(pickle.dumps(r)) for r in c.reports) <= 20_000


def test_the_controller_killed_before_the_first_step_then_a_crash_removal(ray_session, data):
    """The revived controller gets the constructor's storage (not none); a removal as a crash
    takes effect at once, and the id can be added again before the next step."""
    A, B = data
    with ElasticCluster(A, L=2, S=1, machines=ms(5), field=F, time_scale=0.005) as c:
        ray.kill(c.controller, no_restart=True)
        r = exact(c, A, B)
        assert c.revivals == 1 and len(r.available) == 5
        c.remove_machine("m2", crash=True)
        assert "m2" not in c.machines()
        c.add_machines([{"id": "m2"}])  # before any step
        assert c.machines().count("m2") == 1
        r = exact(c, A, B)
        assert "m2" in r.available and not r.failed
        with pytest.raises(ValueError, match=r"^machine: 'm9' is not present"):
            c.remove_machine("m9", crash=True)


def test_a_controller_killed_while_taking_over_is_replaced_again(ray_session, data,
                                                                 monkeypatch):
    from elastic_coded.runtime import membership

    A, B = data
    monkeypatch.setattr(membership, "REVIVE_TRIES", 2)
    with ElasticCluster(A, L=2, S=1, machines=ms(4), field=F, time_scale=0.005) as c:
        start, killed = c._new_controller, []

        def dies_at_once(n):  # the next n new controllers are killed as they start
            def new():
                h = start()
                if len(killed) < n:
                    killed.append(h)
                    ray.kill(h, no_restart=True)
                return h
            c._new_controller = new

        dies_at_once(1)
        ray.kill(c.controller, no_restart=True)
        r = exact(c, A, B)
        assert len(killed) == 1 and c.revivals == 1 and len(r.available) == 4
        dies_at_once(3)  # every try of the next revival: a clear error, then it recovers
        ray.kill(c.controller, no_restart=True)
        with pytest.raises(RuntimeError, match=r"^controller: 2 new controllers in a row died"):
            # the first step may run on the plan the dead controller made ahead of it; the
            # next asks the controller, finds it dead and tries to replace it
            for _ in range(2):
                exact(c, A, B)
        c._new_controller = start
        exact(c, A, B)
        assert c.revivals == 2


def test_an_add_cut_short_by_the_controllers_death_adds_each_machine_once(ray_session, data):
    """The controller is killed while it starts a machine of ``add_machines`` (its process,
    named after the call, has just appeared): the driver's retry on a new controller stops
    that process and adds the machine once.  A kill that came too late (the add done) is
    tried again, with another id."""
    import threading
    import time

    A, B = data
    with ElasticCluster(A, L=2, S=1, machines=ms(4), field=F, time_scale=0.005,
                        machines_per_process=1) as c:
        exact(c, A, B)
        for k in range(4):
            new_id, name = f"x{k}", f"ec-{c._uid}-a{c._adds + 1}-t0-0"
            errors, before = [], c.revivals
            t = threading.Thread(target=_record, args=(errors, c.add_machines,
                                                       [{"id": new_id}]))
            t.start()
            proc = None
            while proc is None and t.is_alive():
                try:
                    proc = ray.get_actor(name)
                except ValueError:
                    time.sleep(0.001)
            ray.kill(c.controller, no_restart=True)
            t.join()
            assert not errors, errors
            r = exact(c, A, B)
            assert r.available.count(new_id) == 1 and c.machines().count(new_id) == 1
            if c.revivals > before and proc is not None:  # the add was retried
                with pytest.raises(ray.exceptions.RayActorError):
                    ray.get(proc.hosted.remote())  # the first try's process was stopped
                break
        else:
            pytest.fail("no kill landed in the middle of add_machines")
        exact(c, A, B)


def _record(errors, fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # the test's thread reports it
        errors.append(exc)


@pytest.mark.parametrize("policy", ["usctec", "unified", "hetero"])
def test_products_near_float64s_limit_accuse_no_one(ray_session, policy):
    """``B`` of 1e300-1e307 (numpy's ``A @ B`` finite): right to rounding, nobody caught, the
    relative bounds finite; a product that truly overflows is the overflow error."""
    rng = np.random.default_rng(11)
    kw = {"L": 2, "S": 1} if policy == "usctec" else {"mu": "1/2", "q": 4, "N": 4} \
        if policy == "unified" else {}
    A = [rng.standard_normal((20, 16)), rng.standard_normal((12, 16))] if policy == "hetero" \
        else rng.standard_normal((40, 16))
    As = A if policy == "hetero" else [A]
    cols = 2 if policy == "hetero" else 4
    pack = (lambda Bs: Bs) if policy == "hetero" else (lambda Bs: Bs[0])  # noqa: E731
    with ElasticCluster(A, policy, machines=6, time_scale=0.005, exclude_after=1, **kw) as c:
        for e in (300, 306, 307):
            Bs = [rng.standard_normal((16, cols)) * 10.0**e for _ in As]
            want = [a @ b for a, b in zip(As, Bs)]
            assert all(np.all(np.isfinite(w)) for w in want)
            Y = c.multiply(pack(Bs))
            r = c.reports[-1]
            for y, w in zip(Y if policy == "hetero" else [Y], want):
                assert np.linalg.norm((y - w) / 1e300) <= 1e-3 * np.linalg.norm(w / 1e300)
            assert r.verified and not r.caught and not r.excluded
            assert np.isfinite(r.relative_error_bound)
            assert np.isfinite(r.relative_verified_error_bound)
        assert len(c.machines()) == 6
        # row 0 of each product is 1e308 sum |A[0]|: past float64's range
        big = [np.outer(np.sign(a[0]), np.ones(cols)) * 1e308 for a in As]
        with pytest.raises(ValueError, match=r"^A @ B: the product overflows float64"):
            c.multiply(pack(big))
        assert len(c.machines()) == 6


def test_unified_reports_stay_small(ray_session):
    """A unified plan holds its design's generator (megabytes at m = 240): a report keeps a
    summary of it, the plan itself only with ``keep_plans=True``."""
    import pickle

    rng = np.random.default_rng(12)
    A = rng.standard_normal((240, 16))
    with ElasticCluster(A, "unified", machines=6, mu="1/2", q=4, N=16,
                        time_scale=0.005) as c:
        for _ in range(2):
            c.multiply(rng.standard_normal((16, 16)))
        assert max(len(pickle.dumps(r)) for r in c.reports) <= 20_000
        r = c.reports[-1]
        assert r.full_plan is None and r.plan.kind == "UnifiedStorage"
        assert r.plan.detail["m"] == 240 and set(r.plan.available) == set(c.machines())
        json.dumps(r.to_dict(), default=str)


def test_events_in_the_churn_scripts_form_and_inputs_that_break_a_rule(ray_session, data):
    A, B = data
    with ElasticCluster(A, L=2, S=1, machines=ms(6), field=F, time_scale=0.005) as c:
        r = exact(c, A, B, events={"crash": "m0", "slow": ["m1"], "factor": 3,
                                   "corrupt": ["m2"], "join": {"id": "j0"}})
        assert "j0" in r.available and "m0" in r.crashed
        r = exact(c, A, B, events=[{"leave": "m3"}, {"join": [{"id": "j1", "speed": 2}]}])
        assert "m3" in r.left and "j1" in r.available
        with pytest.raises(ValueError, match=r"^events: unknown keys \['crsh'\]"):
            c.multiply(B, events={"crsh": "m1"})
        with pytest.raises(ValueError, match=r"^events: crash names machine 'zz', which was "
                                             r"never in this cluster"):
            c.multiply(B, events={"crash": "zz"})
        with pytest.raises(ValueError, match=r"^B: must be 1-D \(a vector\) or 2-D \(one input "
                                             r"per column\), got 3-D shape \(6, 2, 2\)"):
            c.multiply(np.zeros((6, 2, 2), dtype=np.int64))
        with pytest.raises(TypeError, match=r"^B: an array .* of GF\(2147483647\) values with "
                                            r"6 rows, got NoneType"):
            c.multiply(None)
        with pytest.raises(ValueError, match=r"^B: a rectangular array"):
            c.multiply([[1, 2], [3]])
        exact(c, A, B, events={"leave": "m3"})  # gone since: nothing to do, no error


def test_churn_events_naming_unknown_or_present_machines_are_clear_errors(ray_session, data):
    A, B = data
    churn = parse_churn({"events": [{"step": 1, "crash": "ghost"},
                                    {"step": 2, "join": {"id": "m1"}}]})
    with ElasticCluster(A, L=2, S=1, machines=ms(4), field=F, time_scale=0.005,
                        churn=churn) as c:
        exact(c, A, B)
        with pytest.raises(ValueError, match=r"^churn script, step 1: crash names machine "
                                             r"'ghost', which was never in this cluster"):
            c.multiply(B)
        c.add_machines([{"id": "ghost"}])  # the fix: a machine of that name
        r = exact(c, A, B)
        assert "ghost" in r.crashed
        for _ in range(2):  # refused every time, nothing applied, until the user acts
            with pytest.raises(ValueError, match=r"^churn script, step 2: join of \['m1'\]: a "
                                                 r"machine of that id is already present; "
                                                 r"remove it first \(remove_machine\('m1'\)\)"):
                c.multiply(B)
        c.remove_machine("m1")
        r = exact(c, A, B)
        assert r.step == 2 and "m1" in r.joined
