"""Speed estimates (schemes/speeds.py) on scripted traces: transient stragglers keep their speed,
persistent changes are learnt, cancellation bounds pull down only when persistent."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_coded.schemes.speeds import KINDS, SpeedEstimate, new_estimate, observe, rescale


def _run(est, trace):
    """Feed ``(value, kind)`` observations; the planning speed before each step."""
    out = []
    for value, kind in trace:
        out.append(est.speed)
        est = observe(est, value, kind)
    return est, out + [est.speed]


def _ema(est, value, kind):
    """The rule this replaces: an EMA of weight 1/2 (upper bounds only when below)."""
    return est if kind == "upper" and value >= est else 0.5 * est + 0.5 * value


def test_occasional_straggler_keeps_its_speed():
    """True speed 3, slowed 5x for one step in every five: the speed planned for the next step
    stays at the true speed (the EMA would plan with 0.6 of it)."""
    true = 3.0
    trace = [(true / 5 if t % 5 == 2 else true, "value") for t in range(40)]
    _, planned = _run(new_estimate(true), trace)
    for t in range(len(trace)):
        if t % 5 == 2:
            assert planned[t + 1] >= 0.8 * true
    assert min(planned) >= 0.8 * true
    ema = true
    worst = true
    for value, kind in trace:
        ema = _ema(ema, value, kind)
        worst = min(worst, ema)
    assert worst < 0.8 * true  # the old rule fails the same trace


@pytest.mark.parametrize("warm", [0, 1, 3, 10])
def test_persistent_slowdown_learnt_within_five_steps(warm):
    """After ``warm`` steps at speed 4 the machine becomes 4x slower for good."""
    est = new_estimate(4.0)
    for _ in range(warm):
        est = observe(est, 4.0)
    planned = []
    for _ in range(5):
        est = observe(est, 1.0)
        planned.append(est.speed)
    assert abs(planned[-1] - 1.0) <= 0.25
    k = next(i for i, p in enumerate(planned) if abs(p - 1.0) <= 0.25)
    assert k <= 2  # learnt on the third slow step at the latest
    assert all(abs(p - 1.0) <= 0.25 for p in planned[k:])


def test_persistent_speedup_learnt():
    est = new_estimate(1.0)
    for _ in range(5):
        est = observe(est, 1.0)
    for _ in range(3):
        est = observe(est, 3.0)
    assert est.speed == 3.0


def test_always_cancelled_converges_down():
    """A machine cancelled every step, each bound 20% under the speed it was planned with."""
    est = new_estimate(4.0)
    speeds = [est.speed]
    for _ in range(30):
        est = observe(est, 0.8 * est.speed, "upper")
        speeds.append(est.speed)
    assert all(b <= a for a, b in zip(speeds, speeds[1:]))  # never up
    assert speeds[-1] < 0.25 * speeds[0]


def test_constant_upper_bound_is_reached():
    """Bounds at 1.1 (the machine is slower than that) pull a speed of 4 down to 1.1."""
    est = new_estimate(4.0)
    for _ in range(3):
        est = observe(est, 1.1, "upper")
    assert est.speed == pytest.approx(1.1)


def test_single_cancellation_does_not_drag():
    est = new_estimate(2.0)
    for _ in range(5):
        est = observe(est, 2.0)
    est = observe(est, 0.1, "upper")
    assert est.speed == 2.0


def test_upper_bound_above_speed_is_no_information():
    est = observe(new_estimate(2.0), 1.5)
    assert est.speed == 2.0
    assert observe(est, 2.5, "upper") is est
    assert observe(est, est.speed, "upper") is est


@given(st.lists(st.tuples(st.floats(1e-6, 1e6), st.sampled_from(KINDS)), max_size=40),
       st.integers(1, 9))
def test_speed_stays_within_the_evidence(trace, size):
    est = new_estimate(1.0, size)
    for value, kind in trace:
        before = est.speed
        est = observe(est, value, kind)
        assert len(est.window) <= size
        assert min(est.window) <= est.speed <= max(est.window)
        if kind == "upper":
            assert est.speed <= before


def test_rescale_and_immutability():
    est = observe(new_estimate(2.0), 3.0)
    r = rescale(est, 10)
    assert r.window == (20.0, 30.0) and r.speed == 30.0
    assert est.window == (2.0, 3.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.size = 3  # type: ignore[misc]


@pytest.mark.parametrize("call, match", [
    (lambda: new_estimate(0), r"initial_speed: must be a positive finite speed, got 0"),
    (lambda: new_estimate(float("nan")), "initial_speed: must be a positive finite speed"),
    (lambda: new_estimate(1, size=0), r"size: must be an int >= 1, got 0"),
    (lambda: observe(new_estimate(1), -2), r"value: must be a positive finite speed, got -2"),
    (lambda: observe(new_estimate(1), 2, "lower"), r"kind: must be one of \['value', 'upper'\]"),
    (lambda: rescale(new_estimate(1), float("inf")), "factor: must be a positive finite speed"),
    (lambda: SpeedEstimate((1.0, 2.0), size=1), "window: holds 2 observations, more than size"),
    (lambda: SpeedEstimate(()), "window: must hold at least one observation"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_observe_needs_an_estimate():
    with pytest.raises(TypeError, match="est: expected a SpeedEstimate, got float"):
        observe(2.0, 1.0)  # type: ignore[arg-type]
