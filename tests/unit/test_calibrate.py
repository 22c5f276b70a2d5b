"""The calibration's host-CPU fit (:mod:`elastic_coded.sim.calibration`): pure functions, no
Ray."""

import os
import subprocess
import sys
import time

import pytest

from elastic_coded.sim import calibration


def _points(a, b, c, d, sizes=(8, 24, 72), calls_per=(1.2, 5.0, 9.1)):
    """Steps with few cancellations and steps with many, their host CPU
    ``a + b M + c calls + d cancelled``."""
    def row(M, k, x):
        return {"calls": k * M, "cancelled": x, "host_cpu_s": a + b * M + c * k * M + d * x}

    return [{"machines": M, "host_steps": [row(M, k, 0.1 * k) for k in calls_per] +
             [row(M, 7.0, 0.3 * M), row(M, 6.5, 0.25 * M)]} for M in sizes]


def test_host_fit_recovers_the_cpu_per_step_machine_call_and_cancellation():
    got = calibration.host_fit(_points(0.004, 0.001, 0.0023, 0.0012))
    assert got == pytest.approx((0.004, 0.001, 0.0023, 0.0012), rel=1e-6)


def test_host_fit_keeps_every_term_non_negative():
    # a negative cost per machine is no cost: the fit takes it as 0 and the rest absorbs it
    a, b, c, d = calibration.host_fit(_points(0.05, -0.0002, 0.002, 0.001))
    assert b == 0.0 and a >= 0 and c > 0 and d >= 0


def test_host_fit_needs_every_host_figure():
    pts = _points(0.0, 0.001, 0.002, 0.001)
    pts[1]["host_steps"][0]["host_cpu_s"] = None
    assert calibration.host_fit(pts) is None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="the host's CPU is read from /proc")
def test_host_busy_counts_a_busy_loop():
    h0 = calibration.host_busy()
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:
        pass
    assert calibration.host_busy() - h0 >= 0.2


def test_calibration_does_not_import_ray():
    code = ("import sys, elastic_coded.sim.calibration; "
            "sys.exit(1 if 'ray' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
