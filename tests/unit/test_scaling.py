"""Values near float64's limits: power-of-two scaling, sketch checks that stay in range, the
GF(p) solve without galois, one step's events in the churn script's form, and plan summaries.
Pure: no Ray."""

import math

import numpy as np
import pytest

from elastic_coded.algebra import field, scaling
from elastic_coded.algebra.verify import check, make_sketch
from elastic_coded.churn import Join, StepEvents, parse_events
from elastic_coded.families.usctec import cyclic_placement, plan_step
from elastic_coded.runtime.report import summarize_plan

REAL = field("real")


def test_exponent_shift_and_norm():
    assert scaling.exponent(np.array([0.75, -3.0])) == 2  # 3 in [2^1, 2^2)
    assert scaling.exponent(np.zeros(3)) == scaling.exponent(np.array([np.inf])) == 0
    assert scaling.shift_for(2, 10) == 0  # ordinary inputs are left alone
    k = scaling.shift_for(3, 1020)  # B of 1e307
    assert 1020 - k == -3  # scaled so that A B is near 1
    x = np.full((100, 10), 1e300)
    with np.errstate(over="ignore"):
        assert np.linalg.norm(x) == np.inf
    assert scaling.norm(x) == pytest.approx(1e300 * math.sqrt(1000))
    tiny = np.full((100, 10), 1e-300)
    assert scaling.norm(tiny) == pytest.approx(1e-300 * math.sqrt(1000))  # no underflow either
    assert scaling.ldexp(1.0, 3000) == math.inf
    assert scaling.max_exponent(np.full((10_000, 2), 5.0), rows=64) == 3


@pytest.mark.parametrize("a, b", [(1.0, 1e307), (1.0, 1e-300), (1e200, 1e-200), (1e-250, 1e250)])
def test_checks_accept_honest_products_and_reject_lies_at_any_scale(a, b):
    """An honest finite ``Y = A B`` passes and a wrong one fails, whatever the scale; the
    accepted error is in ``Y``'s own units."""
    rng = np.random.default_rng(0)
    A, B = a * rng.standard_normal((30, 8)), b * rng.standard_normal((8, 3))
    Y = A @ B
    assert np.all(np.isfinite(Y)) and np.any(Y != 0)
    sk = make_sketch(REAL, A, seed=1)
    ok = check(sk, B, Y)
    assert ok, ok
    assert 0 < ok.accepted_error() <= 1e-6 * scaling.norm(Y)
    assert check(sk, B[:, :1], Y[4:9, :1], (4, 9))  # a row range of one column
    wrong = Y.copy()
    wrong[3, 1] *= 1 + 1e-6
    assert not check(sk, B, wrong)


def test_ordinary_checks_are_unchanged():
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((20, 5)), rng.standard_normal((5, 2))
    res = check(make_sketch(REAL, A, seed=3), B, A @ B)
    assert res and res.exponent == 0


def test_gfp_solve_needs_no_galois():
    F = field("gf(2147483647)")
    rng = np.random.default_rng(4)
    for n, r in [(1, 1), (7, 3), (60, 5)]:
        a, b = F.random((n, n), rng), F.random((n, r), rng)
        x = F.solve(a, b)
        assert np.array_equal(F.matmul(a, x), b)
    v = F.random((7,), rng)
    a = F.random((7, 7), rng)
    assert np.array_equal(F.matmul(a, F.solve(a, v)[:, None])[:, 0], v)
    with pytest.raises(np.linalg.LinAlgError):
        F.solve(np.array([[1, 2], [2, 4]]), np.array([[1], [1]]))
    with pytest.raises(ValueError, match=r"^solve: needs a square a"):
        F.solve(np.ones((2, 3), dtype=np.int64), np.ones((2, 1), dtype=np.int64))


def test_one_steps_events_in_the_churn_scripts_form():
    ev = parse_events({"crash": "m4", "slow": ["m1", "m2"], "factor": 6, "corrupt": ["m3"],
                       "join": [{"id": "x", "speed": 2}, "y"], "leave": "m5"})
    assert ev == StepEvents(("m5",), ("m4",), (Join("x", 2.0), Join("y")),
                            {"m1": 6.0, "m2": 6.0}, ("m3",))
    assert parse_events([{"crash": "m4"}, {"slow": {"m1": 3}}]) == StepEvents(
        crash=("m4",), slow={"m1": 3.0})
    assert parse_events(ev) is ev
    for bad, exc, match in [
            ({"crsh": "m1"}, ValueError, r"^events: unknown keys \['crsh'\]"),
            ("m1", TypeError, r"^events: a StepEvents or a mapping"),
            ({"factor": 3}, ValueError, r"^events\.factor: goes with 'slow'"),
            ([{"slow": "m1", "factor": 0.5}], ValueError, r"^events\[0\]\.factor: a number >= 1"),
            ({"join": {"speed": 2}}, ValueError, r"^events\.join: \{id, speed, storage\}")]:
        with pytest.raises(exc, match=match):
            parse_events(bad)


def test_plan_summary_keeps_what_reports_are_read_for():
    pl = cyclic_placement(24, [f"m{i}" for i in range(6)], 2, 1)
    plan = plan_step(pl, pl.machines, [1.0] * 6, 2, 1)
    s = summarize_plan(plan)
    assert (s.kind, s.L, s.S, s.K, s.groups) == ("StepPlan", 2, 1, 3, len(plan.groups))
    assert [p.machines for p in s.pieces] == [p.machines for p in plan.pieces]
    assert [p.rows for p in s.pieces] == [plan.groups[p.group].rows for p in plan.pieces]
    assert s.available == plan.available and summarize_plan(None) is None
