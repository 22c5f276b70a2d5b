"""The restart bookkeeping of runtime/restart.py without Ray: the bound per machine, the
reasons reported, all machines of a dead process added back at once, none twice."""

import asyncio

from elastic_coded.machines import MachineSpec
from elastic_coded.runtime.restart import Restarts


def _run(r, specs, present=(), fail=None):
    added = []

    async def add(ss):
        if fail:
            raise fail
        added.append([s.id for s in ss])

    asyncio.run(r.run(specs, add, asyncio.Lock(), lambda: set(present)))
    return added


def test_machines_of_one_process_come_back_in_one_addition_and_are_reported_once():
    r = Restarts(limit=2)
    specs = [MachineSpec(f"m{i}", 1.0, 0.5) for i in range(3)]
    assert all(r.allowed(s.id) for s in specs)
    assert _run(r, specs, present={"m2"}) == [["m0", "m1"]]  # m2 added back meanwhile
    assert r.take() == (("m0", "m1"), ())
    assert r.take() == ((), ())


def test_the_bound_refuses_with_a_reason_and_a_failed_restart_is_reported():
    r = Restarts(limit=1)
    assert r.allowed("m0") and not r.allowed("m0")
    restarted, refused = r.take()
    assert restarted == () and refused[0][0] == "m0" and "died 2 times" in refused[0][1]
    assert _run(r, [MachineSpec("m1", 1.0, 0.5)], fail=RuntimeError("node gone")) == []
    assert r.take() == ((), (("m1", "restart failed: node gone"),))


def test_no_restarts_when_the_limit_is_zero():
    r = Restarts(limit=0)
    assert not r.allowed("m0")
    assert "restarts stop after 0" in r.take()[1][0][1]
