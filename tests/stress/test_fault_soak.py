"""A fault soak over every policy family: seeded crashes (scripted mid-step, and removals as
crashes), departures, joins, re-adds of departed ids, slow machines, liars (some crashing in
their lying step), controller kills (before the first step, in the middle of ``add_machines``,
in the middle of a step, and again while it is being replaced) and steps that fail because too
many machines left (the user adds machines and the same step runs).  Every call runs under a
timeout.  It asserts 0 wrong products, 0 stuck calls, 0 wedged states (every fault leaves the
cluster usable: the next step runs exact, or fails clearly and runs after the public call that
fixes it), 0 false accusations (only the step's liars are ever caught or excluded), reports of
at most 20 KB, and a driver whose memory stays flat.

In CI each case runs a few dozen steps (about 60-90 s in all); set ``ELASTIC_CODED_SOAK_STEPS``
for more steps per case (every family then runs in both fields), and
``ELASTIC_CODED_SOAK_OUT`` to a file to get each case's figures as JSON lines."""

import concurrent.futures
import gc
import json
import os
import pickle
import threading

import numpy as np
import pytest
import ray

from elastic_coded.algebra import field
from elastic_coded.runtime import ElasticCluster
from elastic_coded.runtime.verifying import VerificationError
from elastic_coded.schemes.plan import PlanError

pytestmark = [pytest.mark.ray, pytest.mark.stress, pytest.mark.slow]

GF = field("gf(2147483647)")
REAL = field("real")
LONG = int(os.environ.get("ELASTIC_CODED_SOAK_STEPS", "0"))
STEPS = LONG or 16
TIMEOUT_S = 180  # a call still running after this is stuck
USCTEC = ("usctec-auto", "usctec", "usctec-pull")
CASES = [("usctec", "gf"), ("usctec", "real"), ("unified", "gf"), ("hetero", "real")]
if LONG:
    CASES += [("unified", "real"), ("hetero", "gf")]


class Stuck(AssertionError):
    pass


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _setup(family, F, rng):
    """``(A, options, make_B, product, floor, ceiling)``."""
    if family == "hetero":
        A = [F.random((24, 5), rng), F.random((18, 5), rng)] if F.exact else \
            [rng.standard_normal((24, 5)), rng.standard_normal((18, 5))]
        make = (lambda: [F.random((5, 2), rng), F.random((5, 1), rng)]) if F.exact else \
            (lambda: [rng.standard_normal((5, 2)), rng.standard_normal((5, 1))])
        return A, {}, make, lambda B: [F.matmul(a, b) for a, b in zip(A, B)], 4, 10
    A = F.random((48, 5), rng) if F.exact else rng.standard_normal((48, 5))
    cols = 4 if family == "unified" else 3
    make = (lambda: F.random((5, cols), rng)) if F.exact else \
        (lambda: rng.standard_normal((5, cols)))
    opts = {"mu": "1/2", "q": 4, "N": 4} if family == "unified" else {"L": 2, "S": 1}
    return A, opts, make, lambda B: [F.matmul(A, B)], 5, 10


class Soak:
    """One case's run and its tallies."""

    def __init__(self, family, fname, seed):
        self.family, self.F = family, GF if fname == "gf" else REAL
        self.rng = np.random.default_rng(seed)
        A, opts, self.make_B, self.product, self.floor, self.ceiling = \
            _setup(family, self.F, self.rng)
        ms = [{"id": f"m{i}", "speed": 1.0 + (i % 3) * 0.5} for i in range(7)]
        self.pool = concurrent.futures.ThreadPoolExecutor(1)
        self.c = self.call(ElasticCluster, A, family if family != "usctec" else USCTEC[0],
                           machines=ms, field=self.F, time_scale=0.003, seed=seed, **opts)
        self.fresh = (f"f{i}" for i in range(10**6))
        self.gone: list = []  # ids that left, to add again
        self.liars_ever: set = set()
        self.t = dict(steps=0, wrong=0, stuck=0, wedged=0, false_accusations=0, failed_steps=0,
                      faults=0, kills=0, report_kb=0.0)

    def call(self, fn, *args, **kw):
        fut = self.pool.submit(fn, *args, **kw)
        try:
            return fut.result(timeout=TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            self.t["stuck"] += 1
            raise Stuck(f"{getattr(fn, '__name__', fn)} ran past {TIMEOUT_S} s") from None

    # -- faults before a step (public calls) ---------------------------------------------------
    def present(self) -> list:
        return self.call(self.c.machines)

    def leave(self, crash: bool = False) -> None:
        p = self.present()
        if len(p) > self.floor:
            m = p[int(self.rng.integers(len(p)))]
            self.call(self.c.remove_machine, m, crash)
            self.gone.append(m)
            if crash and self.rng.random() < 0.5:  # re-added at once, before the next step
                self.call(self.c.add_machines, [{"id": self.gone.pop()}])

    def join(self, readd: bool) -> None:
        if len(self.present()) < self.ceiling:
            mid = self.gone.pop(0) if readd and self.gone else next(self.fresh)
            self.call(self.c.add_machines, [{"id": mid, "speed": 1.5}])

    def kill_soon(self, delay: float) -> None:
        h = self.c.controller
        threading.Timer(delay, lambda: ray.kill(h, no_restart=True)).start()
        self.t["kills"] += 1

    def kill_in_add(self) -> None:
        """Kill the controller some milliseconds into ``add_machines``."""
        mid = next(self.fresh)
        self.kill_soon(float(self.rng.uniform(0.0, 0.03)))
        self.call(self.c.add_machines, [{"id": mid}])
        assert self.present().count(mid) == 1, f"{mid} lost or doubled by a revival"

    def kill_twice(self) -> None:
        """Kill the controller, and the first one started to replace it."""
        c, start = self.c, self.c._new_controller

        def new():
            c._new_controller = start
            h = start()
            ray.kill(h, no_restart=True)
            return h
        c._new_controller = new
        ray.kill(c.controller, no_restart=True)
        self.t["kills"] += 2

    def crowd_out(self) -> None:
        """Too many machines leave: the step fails clearly, and is run again once the user
        adds machines."""
        p = self.present()
        keep = 1 if self.family == "unified" else 2  # unified runs on 2, with a lower q
        for m in p[:max(0, len(p) - keep)]:
            self.call(self.c.remove_machine, m)
            self.gone.append(m)

    # -- a step ----------------------------------------------------------------------------------
    def events(self) -> tuple:
        p, ev, liars = self.present(), {}, set()
        pick = lambda: p[int(self.rng.integers(len(p)))]  # noqa: E731
        u = self.rng.random(3)
        if u[0] < 0.3:
            ev["slow"], ev["factor"] = [pick()], 4
        if u[1] < 0.2:
            liars = {pick()}
            ev["corrupt"] = sorted(liars)
        if u[2] < 0.15 and len(p) > self.floor:
            ev["crash"] = sorted(liars) if liars and self.rng.random() < 0.5 else pick()
        return ev, liars

    def step(self, k: int) -> None:
        B = self.make_B()
        policy = USCTEC[k % 3] if self.family == "usctec" else None
        ev, liars = self.events()
        self.liars_ever |= liars
        for attempt in range(3):
            try:
                Y = self.call(self.c.multiply, B, policy=policy, events=ev)
                break
            except (PlanError, ValueError, RuntimeError) as exc:
                if isinstance(exc, VerificationError):
                    self._accused(set(exc.caught), liars)
                elif "overflow" in str(exc):
                    raise
                self.t["failed_steps"] += 1
                if attempt:
                    self.t["wedged"] += 1
                # the fix a user makes: more machines (the same step then runs)
                self.call(self.c.add_machines, [{"id": next(self.fresh)} for _ in range(3)])
        else:
            raise AssertionError(f"step {k}: still failing after the fixes")
        r = self.c.reports[-1]
        self._accused(set(r.caught), liars)
        self.t["false_accusations"] += len(set(r.excluded) - self.liars_ever)
        self.t["report_kb"] = max(self.t["report_kb"], len(pickle.dumps(r)) / 1024)
        self.t["wrong"] += not self._right(Y, B, r)
        self.t["steps"] += 1

    def _accused(self, caught: set, liars: set) -> None:
        self.t["false_accusations"] += len(caught - liars)

    def _right(self, Y, B, r) -> bool:
        got, want = (Y if self.family == "hetero" else [Y]), self.product(B)
        if self.F.exact:
            return all(np.array_equal(y, w) for y, w in zip(got, want))
        err = float(np.sqrt(sum(np.linalg.norm(y - w) ** 2 for y, w in zip(got, want))))
        size = float(np.sqrt(sum(np.linalg.norm(w) ** 2 for w in want)))
        return err <= max(r.verified_error_bound or 0.0, r.error_bound or 0.0) + 1e-12 * size

    def run(self, steps: int) -> dict:
        faults = {
            "leave": lambda: self.leave(), "crash-removal": lambda: self.leave(crash=True),
            "join": lambda: self.join(False), "re-add": lambda: self.join(True),
        }
        every = max(6, steps // 4)  # the costly faults: a few per run
        scheduled = {1: self.kill_in_add, every: self.crowd_out, 2 * every: self.kill_twice,
                     3 * every - 1: lambda: self.kill_soon(0.02)}  # mid-step
        ray.kill(self.c.controller, no_restart=True)  # before the first step
        self.t["kills"] += 1
        warm = min(8, steps // 3)
        for k in range(steps):
            periodic = LONG and k > every and k % every in (1, every - 2)  # long runs only
            if k in scheduled or periodic:
                (scheduled.get(k) or [self.kill_in_add, self.crowd_out][k % 2])()
                self.t["faults"] += 1
            elif self.rng.random() < 0.35:
                name = list(faults)[int(self.rng.integers(len(faults)))]
                faults[name]()
                self.t["faults"] += 1
            self.step(k)
            if k == warm:
                gc.collect()
                self.t["rss_start_mb"] = _rss_mb()
        gc.collect()
        self.t["rss_end_mb"] = _rss_mb()
        self.t["revivals"] = self.c.revivals
        return self.t

    def close(self) -> None:
        try:
            self.call(self.c.shutdown)
        finally:
            self.pool.shutdown(wait=False)


@pytest.mark.parametrize("family, fname", CASES)
def test_no_fault_leaves_a_cluster_unusable(ray_session, family, fname):
    soak = Soak(family, fname, seed=21)
    try:
        t = soak.run(STEPS)
    finally:
        soak.close()
    t.update(family=family, field=fname)
    print(json.dumps(t))
    if os.environ.get("ELASTIC_CODED_SOAK_OUT"):
        with open(os.environ["ELASTIC_CODED_SOAK_OUT"], "a") as fh:
            fh.write(json.dumps(t) + "\n")
    assert (t["wrong"], t["stuck"], t["wedged"], t["false_accusations"]) == (0, 0, 0, 0), t
    assert t["steps"] == STEPS and t["failed_steps"] >= 1 and t["revivals"] >= 3
    assert t["report_kb"] <= 20
    assert t["rss_end_mb"] - t["rss_start_mb"] <= 20, t
