"""The calibration's host-CPU fit (``benchmarks/calibrate.py``): pure functions, no Ray."""

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "benchmarks"))

import calibrate  # noqa: E402


def _points(a, b, c, sizes=(8, 24, 72), calls_per=(1.2, 5.0, 9.1)):
    return [{"machines": M, "dynamic": [{"calls": k * M, "host_cpu_s": a + b * M + c * k * M}
                                        for k in calls_per]} for M in sizes]


def test_host_fit_recovers_the_cpu_per_step_machine_and_call():
    got = calibrate._host_fit(_points(0.004, 0.001, 0.0023))
    assert got == pytest.approx((0.004, 0.001, 0.0023), rel=1e-6)


def test_host_fit_keeps_every_term_non_negative():
    # a negative cost per machine is no cost: the fit takes it as 0 and the rest absorbs it
    a, b, c = calibrate._host_fit(_points(0.05, -0.0002, 0.002))
    assert b == 0.0 and a >= 0 and c > 0


def test_host_fit_needs_every_host_figure():
    pts = _points(0.0, 0.001, 0.002)
    pts[1]["dynamic"][0]["host_cpu_s"] = None
    assert calibrate._host_fit(pts) is None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="the host's CPU is read from /proc")
def test_host_busy_counts_a_busy_loop():
    h0 = calibrate.host_busy()
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:
        pass
    assert calibrate.host_busy() - h0 >= 0.2
