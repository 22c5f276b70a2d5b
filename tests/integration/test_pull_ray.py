"""The pull policies on real Ray actors: ``usctec-auto`` (the default) in each of its modes,
``usctec-pull`` and the ``dynamic`` baseline return exactly ``A @ B`` in GF(p) through
stragglers, crashes mid-step and narrow inputs; their reports count the products the workers
really computed."""

import numpy as np
import pytest

from elastic_coded.algebra import field
from elastic_coded.churn import StepEvents
from elastic_coded.runtime import ElasticCluster

pytestmark = pytest.mark.ray

F = field("gf(65521)")
L, S = 3, 2
SPEEDS = {f"m{i}": 1.0 + i % 3 for i in range(8)}


@pytest.fixture(scope="module")
def cl(ray_session):
    rng = np.random.default_rng(0)
    A = F.random((120, 6), rng)
    ms = [{"id": m, "speed": v, "storage": 1.0} for m, v in SPEEDS.items()]
    # a time scale long enough that pulling pays (usctec-auto's "pull" mode) at 8 machines
    with ElasticCluster(A, L=L, S=S, machines=ms, field=F, time_scale=0.6,
                        placement="design") as c:
        yield A, c


def _mul(A, B):
    return F.matmul(A, B)


@pytest.mark.parametrize("policy", ["usctec-pull", "dynamic", "proportional", "usctec-auto"])
def test_exact_through_stragglers(cl, policy):
    A, c = cl
    rng = np.random.default_rng(7)
    for step in range(2):
        B = F.random((6, 3), rng)
        slow = {"m1": 8.0, "m6": 8.0} if step else {}
        assert np.array_equal(c.multiply(B, policy=policy, events=StepEvents(slow=slow)),
                              _mul(A, B))
        rep = c.reports[-1]
        assert rep.useful_products == A.shape[0] * 3
        assert rep.products >= rep.useful_products - rep.wasted_products
        if policy in ("usctec-pull", "dynamic"):
            assert rep.extra["mode"] == "pull" and rep.extra["units"] > 0
            # every machine present is sent a call; a cancelled call was sent
            assert rep.extra["calls"] >= max(rep.extra["cancelled"], len(rep.available))
            # every call sent was a decision of the queue, timed on the driver
            assert rep.extra["decisions"] >= rep.extra["calls"]
            assert 0 < rep.extra["t_decide"] < rep.t_compute


def test_default_policy_is_usctec_auto(cl):
    A, c = cl
    assert c.policy == "usctec-auto"


def test_pull_step_survives_a_crash(ray_session):
    rng = np.random.default_rng(3)
    A = F.random((60, 4), rng)
    ms = [{"id": f"m{i}", "speed": 1.0, "storage": 1.0} for i in range(7)]
    with ElasticCluster(A, "usctec-pull", L=2, S=2, machines=ms, field=F,
                        time_scale=0.4) as c:
        for step in range(3):
            B = F.random((4, 2), rng)
            ev = StepEvents(crash=("m2",)) if step == 1 else StepEvents()
            assert np.array_equal(c.multiply(B, events=ev), _mul(A, B))
        assert "m2" not in c.machines()
        assert any("m2" in r.failed or "m2" in r.crashed for r in c.reports)


def test_dynamic_survives_narrow_inputs(cl):
    A, c = cl
    rng = np.random.default_rng(5)
    x = F.random((6,), rng)
    assert np.array_equal(c.multiply(x, policy="dynamic"), _mul(A, x[:, None])[:, 0])
    rep = c.reports[-1]
    # uncoded chunks: every product once, plus backup copies of chunks still running
    assert rep.products - rep.wasted_products <= rep.useful_products * 2


def test_usctec_auto_modes(ray_session):
    """Short steps with stragglers run the whole (L, S) plan ("eager") once a straggler is
    seen; that plan cannot see stragglers, so a lean probe runs every PROBE_EVERY steps, and
    once it sees calm the redundancy goes ("lean", the (1, 0) plan); every mode is exact."""
    from elastic_coded.families.usctec.pull import PROBE_EVERY

    rng = np.random.default_rng(11)
    A = F.random((48, 4), rng)
    ms = [{"id": f"m{i}", "speed": 1.0, "storage": 1.0} for i in range(7)]
    with ElasticCluster(A, L=2, S=2, machines=ms, field=F, time_scale=0.1) as c:
        modes = []
        for _step in range(5):
            B = F.random((4, 2), rng)
            assert np.array_equal(c.multiply(B, events=StepEvents(slow={"m1": 6.0})),
                                  _mul(A, B))
            modes.append(c.reports[-1].extra["mode"])
        assert modes[0] == "lean" and "eager" in modes
        for _step in range(PROBE_EVERY + 2):  # blind eager steps, then a lean probe sees calm
            B = F.random((4, 2), rng)
            assert np.array_equal(c.multiply(B, events=StepEvents()), _mul(A, B))
            modes.append(c.reports[-1].extra["mode"])
        assert modes[-1] == "lean"
        lean = [r for r in c.reports[-PROBE_EVERY:] if r.extra["mode"] == "lean"]
        assert all(r.code == (1, 0) for r in lean)
        assert all(r.products == r.useful_products for r in lean if not r.backups)


def test_usctec_auto_plans_only_the_execution_it_runs(ray_session):
    """The driver chooses the execution before it asks for the plan, and asks ahead for the
    one the next step is expected to run: after the first step (no speeds known: every plan),
    the controller makes one plan a step, through stragglers, calm and the lean probes, and a
    step whose plan asked ahead was for another execution asks again; every step exact."""
    rng = np.random.default_rng(5)
    A = F.random((48, 4), rng)
    ms = [{"id": f"m{i}", "speed": 1.0 + i % 2, "storage": 1.0} for i in range(7)]
    with ElasticCluster(A, L=2, S=2, machines=ms, field=F, time_scale=0.1) as c:
        for step in range(24):
            slow = {"m1": 6.0} if step % 9 < 4 else {}
            B = F.random((4, 2), rng)
            assert np.array_equal(c.multiply(B, events=StepEvents(slow=slow)), _mul(A, B))
        reps = list(c.reports)
    assert reps[0].extra["planned"] == ("pull", "eager", "lean")
    assert all(r.extra["planned"] == (r.extra["mode"],) for r in reps[1:])
    assert {"eager", "lean"} <= {r.extra["mode"] for r in reps}


def test_each_pull_step_allows_the_lag_the_last_one_learnt(cl, coded_layouts):
    """The lag a coded pull step learns from its calls (``next_lag``) is what the next one's
    queue allows every call; the products stay exact."""
    from elastic_coded.families.usctec import pull_step as ps

    A, c = cl
    rng = np.random.default_rng(11)
    for step in range(3):
        B = F.random((6, 3), rng)
        ev = StepEvents(slow={"m2": 6.0} if step == 1 else {})
        assert np.array_equal(c.multiply(B, policy="usctec-pull", events=ev), _mul(A, B))
    seen = coded_layouts
    assert len(seen) == 3 and all(len(q.lags) > 0 for _, q in seen)
    for (lag, q), (nxt, _) in zip(seen, seen[1:]):
        assert nxt == ps.next_lag(q.lags, q.batch_s, lag) >= 0.0


def test_a_pull_queue_measures_emulated_machines_on_their_busy_time(cl, queue_call_times):
    """The coded queue learns each machine's rate from the time it was busy as emulated
    (``CallResult.busy_s``, as its measured speed is), not from the worker's wall time, which
    adds the host's own delays (on a crowded host, calls stretch at random and the queue would
    steal and back up for nothing): every call's time is its work over its speed, times the
    time scale and its slowdown, to the last rounding."""
    A, c = cl
    seen = queue_call_times
    slow = {"m2": 6.0}
    B = F.random((6, 3), np.random.default_rng(5))
    assert np.array_equal(c.multiply(B, policy="usctec-pull", events=StepEvents(slow=slow)),
                          _mul(A, B))
    per = [t * SPEEDS[m] / (slow.get(m, 1.0) * w) for m, w, t in seen if w > 0]
    assert len(per) >= 8
    assert max(per) - min(per) <= 1e-9 * max(per), per


def test_usctec_auto_times_its_steps_at_real_speed_only(ray_session):
    """The history ``usctec-auto`` chooses from carries each step's time at real speed (the
    eager steps are set against the lean one that saw a straggler: ``modes.choose_mode``),
    and none on emulated machines; the plan pipeline's choice and the step's context read the
    same history."""
    rng = np.random.default_rng(12)
    A = F.random((48, 4), rng)
    for ts, width in ((0.0, 3), (0.05, 2)):
        with ElasticCluster(A, L=2, S=1, machines=5, field=F, run={"time_scale": ts}) as c:
            for _ in range(3):
                B = F.random((4, 2), rng)
                assert np.array_equal(c.multiply(B), _mul(A, B))
            hist = c._loop.context("usctec-auto", 2).history
            assert len(hist) == 3 and all(len(e) == width for e in hist)
            assert c._plans.history("usctec-auto") == hist
            if width == 3:
                assert [e[2] for e in hist] == [r.t_total for r in c.reports]
