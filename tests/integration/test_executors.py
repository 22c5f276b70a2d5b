"""The USCTEC family's step executors called directly, without the cluster: a hand-built
:class:`~elastic_coded.runtime.context.StepContext` over real machines in real worker processes
and a fake controller.  Each step's product equals ``A @ B`` exactly in GF(p), the outcome
accounts for every call, and a machine that dies mid-step is recovered through the controller
client, whose new machine the driver's tables learn (the context itself is read-only)."""

import time
from types import MappingProxyType

import numpy as np
import pytest
import ray

from elastic_coded.algebra import field
from elastic_coded.churn import StepEvents
from elastic_coded.families.usctec import cyclic_placement, plan_step
from elastic_coded.families.usctec import pull as pl
from elastic_coded.families.usctec.executor_pull import run_pull
from elastic_coded.families.usctec.executor_whole import run_whole
from elastic_coded.runtime.context import ControllerClient, StepContext
from elastic_coded.runtime.hosting import HostPool, kill
from elastic_coded.runtime.tables import DriverTables
from elastic_coded.schemes.wire import PreparedStep, Reassignment

pytestmark = pytest.mark.ray

P = 65521
F = field(f"gf({P})")
L, S = 2, 1
MACHINES = ("m0", "m1", "m2", "m3", "m4")


class FakeController:
    """The controller calls a step makes: ``recover`` re-plans lost tasks on the spare machine
    (which stores every row and is not among the step's machines)."""

    def __init__(self, spare):
        self.spare, self.asked = spare, []

    def __call__(self, method, *args):
        self.asked.append(method)
        if method == "recover":
            lost, _dead = args
            return [Reassignment("spare", self.spare, tuple(lost))]
        return None  # mark_dead


@pytest.fixture(scope="module")
def setting(ray_session):
    rng = np.random.default_rng(3)
    A = rng.integers(0, P, size=(30, 6))
    placement = cyclic_placement(A.shape[0], MACHINES, L, S)
    pool = HostPool(2)
    handles = {}
    for m in MACHINES + ("spare",):
        h, ready = pool.place(m, None, F, 1.0, 0.0)
        ray.get(ready)
        ranges = [(0, A.shape[0])] if m == "spare" else placement.rows_of(m)
        ray.get(h.store_chunks.remote("A", ranges, [a for a, _ in ranges],
                                      *[A[a:b] for a, b in ranges]))
        handles[m] = h
    return A, placement, handles


def _step(setting, policy, plan, *, dead=()):
    A, placement, handles = setting
    tables = DriverTables()
    tables.begin({m: handles[m] for m in MACHINES}, {}, placement)
    ctrl = FakeController(handles["spare"])
    ctx = StepContext(step=0, F=F, policy=policy, handles=MappingProxyType(tables.handles),
                      ctrl=ControllerClient(ctrl, learn=tables.learn),
                      options=pl.PullOptions() if policy != "usctec" else None)
    prep = PreparedStep(plan=plan, handles={}, joined=(), left=(), rows_moved=0,
                        speeds={m: 1.0 for m in MACHINES}, emulated={}, t_plan=0.0,
                        storage=placement)
    B = np.random.default_rng(4).integers(0, P, size=(A.shape[1], 4))
    run = run_whole if policy == "usctec" else run_pull
    Y, out = run(ctx, B, StepEvents(), prep)
    assert np.array_equal(Y, F.matmul(A, B))  # exact, in GF(p)
    return out, tables, ctrl


def test_the_whole_plan_executor_decodes_exactly_and_counts_its_calls(setting):
    _, placement, _ = setting
    plan = plan_step(placement, MACHINES, np.ones(len(MACHINES)), L, S)
    out, tables, ctrl = _step(setting, "usctec", plan)
    g = out.gather
    assert set(g.finished) <= set(MACHINES) and not g.failed and not out.recovered
    assert len(g.finished) >= L  # every piece decoded from L positions of finished machines
    assert {r.outcome for r in g.calls} <= {"used", "late", "cancelled"}
    assert out.total_products == 30 * 4
    assert set(tables.handles) == set(MACHINES) and "recover" not in ctrl.asked


def test_the_pull_executor_decodes_exactly_at_real_speed(setting):
    _, placement, _ = setting
    plan = pl.coded_pull_plan(placement, MACHINES, np.ones(len(MACHINES)), L, S)
    out, tables, _ = _step(setting, "usctec-pull", plan)
    assert out.gather.finished and not out.gather.failed
    assert out.extra["decisions"] > 0 and out.pull_lag is not None
    assert set(tables.handles) == set(MACHINES)


def test_a_machine_dead_before_its_call_is_recovered_on_a_machine_the_tables_learn(setting):
    _, placement, handles = setting
    # no spare positions (S = 0): every task of the dead machine is needed, so it is recovered
    plan = plan_step(placement, MACHINES, np.ones(len(MACHINES)), L, 0)
    victim = next(m for m in MACHINES if plan.tasks().get(m))
    kill(handles[victim])
    host = handles[victim].host
    deadline = time.time() + 20  # kill() does not wait: the process drops it soon after
    while victim in ray.get(host.hosted.remote()) and time.time() < deadline:
        time.sleep(0.05)
    out, tables, ctrl = _step(setting, "usctec", plan)
    assert out.gather.failed == [victim] and out.recovered
    assert {t.piece for t in plan.tasks()[victim]} == set(out.recovered)
    assert "recover" in ctrl.asked and "spare" in out.gather.finished
    # the context's view stayed read-only; the tables learnt the spare through the client
    assert tables.handles["spare"] is handles["spare"] and "spare" in tables.ever
