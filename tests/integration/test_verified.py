"""Lying machines on real Ray: every step stays exact in GF(p) while up to ``S`` machines per
piece lie (the honest ones slowed, so that the lies arrive first and are decoded from), more
liars than can be repaired is a clear error and never a wrong product, a machine that lies for
good is caught and removed, the real field stays within its reported bound, and heterogeneous
masters repair a lying worker's rows."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field
from elastic_coded.churn import StepEvents
from elastic_coded.runtime import ElasticCluster
from elastic_coded.runtime.verifying import VerificationError

pytestmark = pytest.mark.ray

F = field("gf(65537)")
L, S = 2, 2
IDS = [f"m{i}" for i in range(6)]


def _liars_first(liars) -> StepEvents:
    """``liars`` lie; the others are 4x slower, so the lies are what the step decodes from."""
    return StepEvents(slow={m: 4.0 for m in IDS if m not in liars}, corrupt=tuple(liars))


@pytest.fixture(scope="module")
def gf(ray_session):
    rng = np.random.default_rng(0)
    A, B = F.random((48, 6), rng), F.random((6, 4), rng)
    ms = [{"id": m, "speed": 1.0, "storage": 1.0} for m in IDS]
    with ElasticCluster(A, L=L, S=S, machines=ms, field=F, time_scale=0.02,
                        exclude_after=None) as c:
        yield c, A, B


@settings(max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(liars=st.lists(st.sampled_from(IDS), max_size=S, unique=True))
def test_gfp_exact_while_up_to_S_machines_lie(gf, liars):
    c, A, B = gf
    Y = c.multiply(B, events=_liars_first(liars))
    r = c.reports[-1]
    assert np.array_equal(Y, F.matmul(A, B))
    assert r.verified is True and r.error_bound == 0.0
    assert set(r.caught) <= set(liars)
    with_work = {m for p in r.plan.pieces for m in p.machines}
    assert set(liars) & with_work <= set(r.caught)  # every lie that was decoded from is caught
    assert bool(r.repaired) == bool(r.caught)


@pytest.mark.parametrize("policy", ["usctec", "usctec-pull", "dynamic", "uncoded",
                                    "speculative"])
def test_every_execution_of_the_family_is_verified(gf, policy):
    c, A, B = gf
    Y = c.multiply(B, policy=policy, events=_liars_first(("m1", "m4")))
    r = c.reports[-1]
    assert np.array_equal(Y, F.matmul(A, B)) and r.policy == policy
    assert r.verified is True and set(r.caught) <= {"m1", "m4"} and r.caught


def test_liars_beyond_S_are_recomputed_elsewhere_or_the_step_raises(gf):
    c, A, B = gf
    liars = IDS[:S + 2]  # more than S per piece: the honest holders compute their positions
    Y = c.multiply(B, events=_liars_first(liars))
    r = c.reports[-1]
    assert np.array_equal(Y, F.matmul(A, B)) and r.recomputed > 0
    steps = len(c.reports)
    with pytest.raises(VerificationError, match=r"failed verification .* machines caught "
                                                r"returning wrong results: \[") as exc:
        c.multiply(B, events=StepEvents(corrupt=tuple(IDS)))  # nobody honest is left
    assert set(exc.value.caught) <= set(IDS) and exc.value.caught
    assert len(c.reports) == steps  # a failed step records nothing and changes nothing
    assert np.array_equal(c.multiply(B, events=StepEvents()), F.matmul(A, B))  # called again
    assert c.machines() == IDS


def test_a_machine_lying_for_good_is_caught_then_removed(ray_session):
    rng = np.random.default_rng(1)
    A, B = F.random((36, 5), rng), F.random((5, 2), rng)
    ms = [{"id": m, "speed": 4.0 if m == "m1" else 1.0, "storage": 1.0} for m in IDS]
    churn = {"events": [{"step": 1, "corrupt": "m1", "forever": True}]}
    with ElasticCluster(A, L=L, S=S, machines=ms, field=F, time_scale=0.02, churn=churn) as c:
        caught = []
        for _ in range(5):
            assert np.array_equal(c.multiply(B), F.matmul(A, B))
            caught.append(c.reports[-1].caught)
        excluded = [r.excluded for r in c.reports]
        assert ("m1",) in excluded and "m1" not in c.machines()
        assert caught.count(("m1",)) == 2  # caught twice (fast: its lies come first), then gone
        assert c.summary()["caught"] == 2


def test_real_field_within_its_reported_bound_with_liars(ray_session):
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((48, 6)), rng.standard_normal((6, 4))
    ms = [{"id": m, "speed": 1.0, "storage": 1.0} for m in IDS]
    with ElasticCluster(A, L=L, S=S, machines=ms, time_scale=0.02) as c:
        for liars in ((), ("m0",), ("m2", "m5")):
            Y = c.multiply(B, events=_liars_first(liars))
            r = c.reports[-1]
            assert set(liars) & {m for p in r.plan.pieces for m in p.machines} <= set(r.caught)
            assert np.linalg.norm(Y - A @ B) <= r.error_bound <= r.verified_error_bound
            assert r.condition >= 1 and 0 < r.relative_error_bound < 1e-10
            assert 0 <= r.relative_estimated_error <= 1e-9  # the default tolerance
            assert r.estimated_error <= r.verified_error_bound


def test_hetero_masters_repair_a_lying_worker(ray_session):
    rng = np.random.default_rng(3)
    As = [F.random((20, 5), rng), F.random((30, 5), rng)]
    xs = [F.random((5, 2), rng) for _ in As]
    with ElasticCluster(As, "hetero", machines=6, field=F) as c:
        for liars in (("m0",), ("m1", "m2")):
            Y = c.multiply(xs, events=StepEvents(corrupt=liars))
            assert all(np.array_equal(y, F.matmul(a, x)) for y, a, x in zip(Y, As, xs))
            r = c.reports[-1]
            assert r.verified is True and set(r.caught) <= set(liars)
            assert bool(r.caught) == bool(r.repaired)


@pytest.mark.parametrize("fld", ["gf(65537)", "real"])
def test_unified_catches_a_liar_and_repairs_from_map_results_that_check(ray_session, fld):
    """A lying server of the fastest q is caught from its Map result (checked against a
    sketch of the coded storage) and the product is decoded again from rows that check; the
    real field reports the Reduce's condition and stays within its bound; when every server
    lies, a clear error, never a wrong product."""
    R = field(fld)
    rng = np.random.default_rng(4)
    A, X = R.random((20, 6), rng), R.random((6, 4), rng)
    ms = [{"id": m, "speed": 1.0, "storage": 1.0} for m in IDS]
    with ElasticCluster(A, "unified", machines=ms, field=R, mu="1/2", q=4, N=4,
                        time_scale=0.02, exclude_after=None) as c:
        def good(Y):
            want = R.matmul(A, X)
            return (np.array_equal(Y, want) if R.exact else  # lies included: the verified bound
                    np.linalg.norm(Y - want) <= c.reports[-1].verified_error_bound)

        assert good(c.multiply(X)) and c.reports[-1].verified and not c.reports[-1].caught
        fastest = c.reports[-1].extra["fastest"]
        liar = IDS[fastest[0]]
        # the liar is made fast, so that it is among the q whose Map results are used; a lie
        # (one entry of its Map result) that no Reduce uses is harmless, so it lies until caught
        ev = StepEvents(slow={m: 3.0 for m in IDS if m != liar}, corrupt=(liar,))
        for _ in range(8):
            Y = c.multiply(X, events=ev)
            r = c.reports[-1]
            assert good(Y) and r.verified and r.caught in ((), (liar,))
            if r.caught:
                break
        assert r.caught == (liar,) and r.repaired
        if not R.exact:
            assert r.condition >= 1 and r.relative_error_bound < 1e-6
        with pytest.raises(VerificationError, match="coded rows (it needs check|that check do not "
                                                    "decode)"):
            c.multiply(X, events=StepEvents(corrupt=tuple(IDS)))
        assert good(c.multiply(X, events=StepEvents()))  # a failed step changed nothing
