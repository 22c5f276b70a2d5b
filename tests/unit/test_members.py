"""The controller's table of machines (runtime/members.py) without Ray: departures and what
changed, deaths found by pings, speed learning and its calibration, the count check."""

import pytest

from elastic_coded.errors import ShortOfMachines
from elastic_coded.machines import MachineSpec
from elastic_coded.runtime.members import Members
from elastic_coded.schemes.speeds import new_estimate, observe


def _members(n=4, calibrated=True, speeds=None):
    mem = Members(calibrated=calibrated)
    for i in range(n):
        mem.add(MachineSpec(f"m{i}", 1.0 if speeds is None else speeds[i], 0.5), handle=f"h{i}")
    return mem


def test_members_keep_the_order_they_came_and_present_them_by_id_on_request():
    mem = Members()
    for m in ("c", "a", "b"):
        mem.add(MachineSpec(m, speed=2.0, storage=0.25), handle=m.upper())
    assert mem.ids() == ["c", "a", "b"] and len(mem) == 3 and "a" in mem
    assert mem.present().machines == ("c", "a", "b")
    p = mem.present(sort=True)
    assert p.machines == ("a", "b", "c") and p.budgets == {"a": 0.25, "b": 0.25, "c": 0.25}
    assert p.speeds == {"a": 2.0, "b": 2.0, "c": 2.0}
    assert mem.handles(["a"]) == {"a": "A"}


def test_an_adopted_member_starts_at_the_speed_it_had():
    mem = Members()
    mem.add(MachineSpec("a", speed=1.0), handle=None, speed=3.5)
    assert mem["a"].speed_est == 3.5 and mem["a"].node is None


def test_drop_records_a_departure_once_and_remove_records_none():
    mem = _members(3)
    assert mem.drop("m1") is True
    assert mem.drop("m1") is False  # already gone
    assert mem.remove("m2").handle == "h2"  # an addition undone: no departure
    mem.pending_joined.append("m0")
    mem.pending_moved += 7
    assert mem.take_pending() == (("m0",), ("m1",), 7)
    assert mem.take_pending() == ((), (), 0)
    assert mem.ids() == ["m0"]


def test_deaths_found_by_pings_take_effect_at_apply_deaths_by_id():
    mem = _members(4)
    mem.note_ping("m3", "dead", True)   # its node was preempted
    mem.note_ping("m1", "dead", False)
    mem.note_ping("m0", "slow", None)   # a slow answer stays
    mem.note_ping("m2", "ok", {"node": "n2"})
    assert mem["m2"].node == "n2" and len(mem) == 4
    dropped = []
    preempted = mem.apply_deaths(lambda m: (dropped.append(m), mem.drop(m)))
    assert dropped == ["m1", "m3"] and preempted == ["m3"]
    assert mem.ids() == ["m0", "m2"] and mem.pending_left == ["m1", "m3"]
    assert mem.apply_deaths(dropped.append) == [] and dropped == ["m1", "m3"]  # cleared


def test_a_machine_already_gone_when_deaths_apply_is_not_reported_preempted():
    mem = _members(2)
    mem.note_ping("m1", "dead", True)
    mem.drop("m1")  # gone meanwhile (a failed call)
    assert mem.apply_deaths(mem.drop) == []


def test_a_known_node_is_not_overwritten_by_a_ping():
    mem = Members()
    mem.add(MachineSpec("a", node="n1"), None)
    mem.note_ping("a", "ok", {"node": "n9"})
    assert mem["a"].node == "n1"


def test_speed_learning_follows_the_speed_rule():
    mem = _members(2)
    mem.learn({"m0": (2.0, "value"), "m1": (0.5, "upper"), "gone": (9.0, "value")})
    assert mem["m0"].est == observe(new_estimate(1.0), 2.0, "value")
    assert mem["m1"].est == observe(new_estimate(1.0), 0.5, "upper")
    mem.learn({"m0": (float("inf"), "value"), "m1": (0.0, "value")})  # not finite or not > 0
    assert mem["m0"].est.window == (1.0, 2.0) and mem["m1"].est.window == (1.0, 0.5)


def test_uncalibrated_speeds_are_rescaled_once_by_the_median_measured_ratio():
    mem = _members(3, calibrated=False, speeds=[1.0, 2.0, 4.0])
    # ratios 10 (m0) and 30 (m1): median 20; the upper bound of m2 does not calibrate
    mem.learn({"m0": (10.0, "value"), "m1": (60.0, "value"), "m2": (1.0, "upper")})
    assert mem.calibrated
    assert mem["m0"].est.window == (20.0, 10.0)
    assert mem["m1"].est.window == (40.0, 60.0)
    assert mem["m2"].est.window == (80.0, 1.0)  # rescaled, then the bound below it enters
    mem.learn({"m0": (10.0, "value")})  # calibrated: no second rescale
    assert mem["m1"].est.window == (40.0, 60.0)


def test_uncalibrated_speeds_wait_for_a_measured_value():
    mem = _members(2, calibrated=False)
    mem.learn({"m0": (0.5, "upper")})
    assert not mem.calibrated and mem["m1"].est.window == (1.0,)


def test_calibrated_speeds_are_never_rescaled():
    mem = _members(2, calibrated=True, speeds=[1.0, 2.0])
    mem.learn({"m0": (10.0, "value")})
    assert mem["m1"].est.window == (2.0,)


def test_too_few_machines_for_L_plus_S_carries_the_largest_S_possible():
    mem = _members(4)
    mem.check_count(2, 2)  # 4 present: enough
    with pytest.raises(ShortOfMachines, match=r"machines: 4 present .* fewer than L\+S = 5; "
                                              r".*S = 2") as exc:
        mem.check_count(2, 3)
    assert exc.value.S_max == 2
    with pytest.raises(ShortOfMachines) as exc:
        mem.check_count(5, 1)
    assert exc.value.S_max == 0


def test_storage_short_of_L_plus_S_carries_the_S_the_budgets_reached():
    mem = _members(6)
    mem.check_count(2, 1, short_S=1)  # reached the S asked
    with pytest.raises(ShortOfMachines, match=r"storage: .* only L\+1 times, fewer than "
                                              r"L\+S = 5") as exc:
        mem.check_count(2, 3, short_S=1)
    assert exc.value.S_max == 1


def test_estimates_taken_are_given_back_whole_or_not_at_all():
    mem = _members(3)
    mem.learn({"m0": (2.0, "value"), "m1": (0.5, "value")})
    saved = mem.estimates()
    for _ in range(3):
        mem.learn({"m0": (0.1, "value")})
    assert mem.speeds()["m0"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"\['gone'\] are not present"):
        mem.restore({**saved, "gone": new_estimate(1.0)})
    with pytest.raises(ValueError, match=r"\['m2'\] are not SpeedEstimate"):
        mem.restore({"m0": saved["m0"], "m2": 3.0})
    assert mem.speeds()["m0"] == pytest.approx(0.1)  # a refused restore changed nothing
    mem.restore(saved)
    assert mem.estimates() == saved
    assert mem.speeds() == {"m0": 2.0, "m1": 1.0, "m2": 1.0}


def test_a_health_check_pings_only_machines_no_step_heard_from_lately(monkeypatch):
    """A machine whose result a step measured is alive as of then: the health loop skips it
    for ``within`` seconds (steps running show it alive), not one only bounded (its call was
    cancelled) nor one whose node is still unknown."""
    import elastic_coded.runtime.members as members_mod

    clock = [100.0]
    monkeypatch.setattr(members_mod.time, "monotonic", lambda: clock[0])
    mem = _members(4)
    for i in range(3):
        mem[f"m{i}"].node = "n1"
    assert mem.unheard(1.0) == ["m0", "m1", "m2", "m3"]
    mem.learn({"m0": (1.0, "value"), "m1": (0.5, "upper"), "m3": (1.0, "value")})
    assert mem.unheard(1.0) == ["m1", "m2", "m3"]  # m3: its node is not known yet
    clock[0] += 1.5
    assert mem.unheard(1.0) == ["m0", "m1", "m2", "m3"]
    mem.learn({"m0": (1.0, "value")})
    mem.drop("m0")
    assert "m0" not in mem.heard and mem.unheard(1.0) == ["m1", "m2", "m3"]


def test_a_process_found_gone_is_a_death_noted_for_a_restart():
    mem = _members(3)
    mem.note_ping("m1", "gone", False)  # its worker process died
    mem.note_ping("m2", "dead", False)  # ended inside a live process
    assert mem.found_dead == {"m1", "m2"} and mem.found_gone == {"m1"}
    assert mem.apply_deaths(mem.drop) == [] and mem.ids() == ["m0"]
    assert not mem.found_gone  # cleared with the deaths


def _restart(mem, machine):
    """``machine`` dropped and added back with a fresh handle (a restart in a new process)."""
    spec = mem[machine].spec
    mem.drop(machine)
    mem.add(spec, handle=object())


def test_a_ping_answer_about_a_handle_replaced_while_it_was_out_is_ignored():
    mem = Members()
    for i in range(3):
        mem.add(MachineSpec(f"m{i}", 1.0, 0.5), handle=object())
    old = mem["m1"].handle
    _restart(mem, "m1")                       # the ping of `old` was still out
    mem.note_ping("m1", "gone", False, old)   # its (dead) old process answers late
    mem.note_ping("m2", "dead", False, mem["m2"].handle)
    assert mem.found_dead == {"m2"} and not mem.found_gone
    assert mem.apply_deaths(mem.drop) == [] and mem.ids() == ["m0", "m1"]


def test_a_death_found_before_a_restart_does_not_drop_the_fresh_machine():
    mem = Members()
    for i in range(3):
        mem.add(MachineSpec(f"m{i}", 1.0, 0.5), handle=object())
    mem.note_ping("m1", "gone", True, mem["m1"].handle)  # found dead, not applied yet
    mem.note_ping("m0", "dead", False, mem["m0"].handle)
    _restart(mem, "m1")                                   # a failed call restarted it first
    fresh = mem["m1"].handle
    dropped = []
    assert mem.apply_deaths(lambda m: (dropped.append(m), mem.drop(m))) == []
    assert dropped == ["m0"] and mem["m1"].handle is fresh and mem.ids() == ["m2", "m1"]
    assert not (mem.found_dead or mem.found_gone or mem.found_preempted or mem.found_as)
