"""The plain parts ElasticCluster is a façade over, against fakes, without Ray: the driver's
tables, the controller link, the churn events, the plan pipeline, the step report (a verdict
held whole) and the constructor's arguments."""

import dataclasses
from types import MappingProxyType, SimpleNamespace

import numpy as np
import pytest
import ray.exceptions

from elastic_coded.churn import parse_events
from elastic_coded.errors import ArgumentError, ShortOfMachines, StepFailed
from elastic_coded.machines import MachineSpec
from elastic_coded.runtime import membership
from elastic_coded.runtime.arguments import code_of, option_fields
from elastic_coded.runtime.context import ControllerClient, StepContext
from elastic_coded.runtime.events import ChurnEvents
from elastic_coded.runtime.planning import PLANS_HELD, PlanPipeline, PlanSetting, no_carry
from elastic_coded.runtime.report import VERDICT_FIELDS, ReportLog, StepReport, summarize
from elastic_coded.runtime.stepping import build_report
from elastic_coded.runtime.tables import DriverTables
from elastic_coded.runtime.verifying import Verdict
from elastic_coded.schemes.wire import PreparedStep, Reassignment, Rescued


def _tables(*ids, forgot=None):
    t = DriverTables(on_forget=(forgot.append if forgot is not None else lambda m: None))
    t.begin({m: f"h-{m}" for m in ids}, {m: MachineSpec(m, 1.0) for m in ids}, "storage")
    t.speeds = {m: 2.0 for m in ids}
    return t


def _prep(machines, serial=0, plan="plan", **kw):
    kw = {"joined": (), "left": (), "rows_moved": 0, **kw}
    return PreparedStep(plan=plan, handles={}, speeds={m: 1.0 for m in machines}, emulated={},
                        t_plan=0.01, specs={m: MachineSpec(m, 1.0) for m in machines},
                        serial=serial, **kw)


# -- the tables -----------------------------------------------------------------------------------
def test_forget_drops_a_machine_from_every_table_and_moves_the_epoch():
    forgot: list = []
    t = _tables("a", "b", "c", forgot=forgot)
    t.present = ["a", "b", "c"]
    assert t.forget(["b", "x"]) == ["b"]
    assert forgot == ["b"] and "b" not in t.handles and "b" not in t.specs
    assert "b" not in t.speeds and t.present == ["a", "c"] and t.epoch == 1
    assert t.forget(["x"]) == [] and t.epoch == 1  # nothing known: nothing changes
    assert t.ever == {"a", "b", "c"}  # every id the cluster had stays


def test_joined_took_and_stepped():
    t = _tables("a", "b")
    t.joined({"c": "h-c"}, [MachineSpec("c", 3.0)])
    assert t.present is None and t.epoch == 1 and "c" in t.ever and t.specs["c"].speed == 3.0
    t.took(_prep(["a", "c"]))  # b is no longer planned: gone from the tables
    assert list(t.handles) == ["a", "c"] and t.present == ["a", "c"]
    assert t.speeds == {"a": 1.0, "c": 1.0}
    epoch = t.epoch
    t.stepped(["a", "c"], {"c"})
    assert t.present == ["a"] and list(t.handles) == ["a"] and t.epoch == epoch + 2


def test_a_steps_context_is_read_only_and_learns_the_machines_handed_to_it():
    t = _tables("a", "b")
    answers = {"recover": [Reassignment("c", "h-c", ()), Reassignment("a", "h-a2", ())],
               "hetero_rescue": Rescued("d", "h-d", ((0, 1),))}
    client = ControllerClient(lambda method, *args: answers[method], learn=t.learn)
    ctx = StepContext(step=0, F=None, handles=MappingProxyType(t.handles), ctrl=client)
    with pytest.raises(TypeError):
        ctx.handles["x"] = "h-x"  # type: ignore[index]
    assert [r.machine for r in client.recover(["task"], [])] == ["c", "a"]
    assert client.hetero_rescue(0, 1, {3}, ["d"]).machine == "d"
    # the tables learnt them, and the step's view shows them at once
    assert dict(ctx.handles) == {"a": "h-a2", "b": "h-b", "c": "h-c", "d": "h-d"}
    assert {"c", "d"} <= t.ever and t.epoch == 0  # no new membership: the plan stands
    assert StepContext(step=0, F=None).handles == {}  # the default is read-only too
    with pytest.raises(TypeError):
        StepContext(step=0, F=None).handles["x"] = 1  # type: ignore[index]


def test_members_rebuild_a_controller_from_the_tables():
    t = _tables("a", "b")
    t.speeds = {"a": 5.0}
    assert [(m.spec.id, m.handle, m.speed) for m in t.members()] == [("a", "h-a", 5.0),
                                                                   ("b", "h-b", 1.0)]


# -- the controller link --------------------------------------------------------------------------
class _Method:
    def __init__(self, handle, name):
        self.handle, self.name = handle, name

    def remote(self, *args):
        self.handle.calls.append((self.name, args))
        if self.handle.dies and self.name != "adopt":
            self.handle.dies -= 1
            raise ray.exceptions.RayActorError()
        return args


class _Handle:
    def __init__(self, dies=0):
        self.calls: list = []
        self.dies = dies

    def __getattr__(self, name):
        return _Method(self, name)


def _link(*handles, tables=None):
    made = iter(handles)
    revived: list = []
    link = membership.ControllerLink(lambda: next(made), tables or _tables("a"),
                                     on_revived=lambda: revived.append(1), get=lambda x, **k: x)
    link.handle = next(made)
    return link, revived


def test_a_call_tells_the_untold_measurements_first_unless_it_carries_them():
    link, _ = _link(_Handle())
    link.untold = "measured"
    link.call("prepare_step", 1)
    assert link.handle.calls == [("prepare_step", (1,))] and link.untold == "measured"
    assert link.told() == "measured" and link.untold is None
    link.untold = "again"
    assert link.call("snapshot") == ()
    assert link.handle.calls[1:] == [("report", ("again",)), ("snapshot", ())]


def test_a_dead_controller_is_replaced_and_the_call_made_again():
    tables = _tables("a")
    first, second = _Handle(dies=1), _Handle()
    link, revived = _link(first, second, tables=tables)
    assert link.call("remove_machine", "a", False, True) == ("a", False, True)
    assert link.handle is second and link.revivals == 1 and revived == [1]
    assert second.calls[0][0] == "adopt" and tables.epoch == 1 and tables.present is None


def test_a_revival_gives_up_after_its_tries(monkeypatch):
    monkeypatch.setattr(membership, "REVIVE_TRIES", 2)

    class _DiesAdopting(_Handle):
        def __getattr__(self, name):
            if name == "adopt":
                raise ray.exceptions.RayActorError()
            return super().__getattr__(name)

    link, revived = _link(_Handle(), _DiesAdopting(), _DiesAdopting())
    with pytest.raises(StepFailed, match=r"^controller: 2 new controllers in a row died"):
        link.revive()
    assert revived == [] and link.revivals == 0


def test_add_and_remove_keep_the_tables():
    tables = _tables("a")
    link, _ = _link(_Handle(), tables=tables)
    link.handle.add_machines = SimpleNamespace(
        remote=lambda specs, token, earlier: SimpleNamespace(
            handles={s.id: f"h-{s.id}" for s in specs}, rows_moved=7, token=token))
    assert membership.add(link, [{"id": "b"}], "ec-x-a1") == 7
    assert set(tables.handles) == {"a", "b"} and "b" in tables.specs and tables.epoch == 1
    membership.remove(link, "a")
    assert link.handle.calls[-1] == ("remove_machine", ("a", False, True))
    assert set(tables.handles) == {"b"} and tables.present is None


# -- the churn events -----------------------------------------------------------------------------
class _Cluster:
    def __init__(self, ids):
        self.ids, self.log = list(ids), []

    def machines(self):
        return list(self.ids)

    def remove_machine(self, m, crash=False):
        self.log.append(("remove", m))
        self.ids.remove(m)

    def add_machines(self, machines):
        self.log.append(("add", [s.id for s in machines]))
        self.ids += [s.id for s in machines]
        return 0


class _Script:
    def __init__(self, events):
        self.events_of, self.drawn = events, []

    def events(self, step, present, K):
        self.drawn.append(step)
        return self.events_of.get(step, parse_events({}))


def test_a_steps_events_are_drawn_and_applied_once():
    script = _Script({0: parse_events({"leave": ["b", "b"], "crash": "a",
                                       "join": [{"id": "d"}]})})
    churn, tables, cl = ChurnEvents(script, 3), _tables("a", "b", "c"), _Cluster("abc")
    ev = churn.apply(0, tables, cl)
    assert cl.log == [("remove", "b"), ("add", ["d"])] and tables.crash_idle == ["a"]
    assert churn.apply(0, tables, cl) is ev  # called again (a failed step): nothing twice
    assert cl.log == [("remove", "b"), ("add", ["d"])] and script.drawn == [0]


def test_events_naming_an_unknown_machine_or_an_id_present_are_refused():
    churn, tables, cl = ChurnEvents(_Script({}), 3), _tables("a", "b"), _Cluster("ab")
    with pytest.raises(ArgumentError, match=r"^events: crash names machine 'z'"):
        churn.apply(0, tables, cl, {"crash": "z"})
    with pytest.raises(ArgumentError, match=r"^events: join of \['a'\]"):
        churn.apply(0, tables, cl, {"join": [{"id": "a"}]})
    assert cl.log == []


# -- the plan pipeline ----------------------------------------------------------------------------
class _FakeLink:
    def __init__(self, replies):
        self.replies, self.requests, self.asked = list(replies), [], []

    def call(self, method, req):
        self.requests.append(req)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def ask(self, req):
        self.asked.append(req)
        return ("ref", req.step)

    def told(self):
        return None


def _pipeline(replies, tables=None, **setting):
    tables = tables or _tables("a", "b")
    link = _FakeLink(replies)
    gets = {}
    pipe = PlanPipeline(PlanSetting(F=None, L=1, S=1, **setting), tables, link,
                        get=lambda ref, **kw: gets[ref])
    return pipe, link, gets


def test_a_plan_left_out_is_filled_in_from_those_held():
    pipe, link, _ = _pipeline([_prep("ab", serial=1, plan="p1"), _prep("ab", serial=1,
                                                                       plan=None)])
    assert pipe.prepare(0, "usctec", 2)[0].plan == "p1"
    prep, S = pipe.prepare(1, "usctec", 2)
    assert prep.plan == "p1" and S is None and link.requests[1].held == (1,)


def test_the_plans_held_are_bounded():
    pipe, _, _ = _pipeline([])
    for k in range(1, PLANS_HELD + 3):
        pipe.received(_prep("ab", serial=k, plan=f"p{k}"))
    assert list(pipe.plans) == list(range(3, PLANS_HELD + 3))
    assert pipe.received(_prep("ab", serial=1, plan=None)) is None  # held no more


def test_a_plan_asked_ahead_is_used_under_the_same_membership_only():
    pipe, link, gets = _pipeline([_prep("ab", plan="fresh")])
    pipe.ask_ahead(0, "usctec", 2)
    gets[("ref", 1)] = _prep("ab", plan="ahead", joined=("b",))
    assert link.asked[0].ahead and link.asked[0].step == 1
    assert pipe.prepare(1, "usctec", 2)[0].plan == "ahead"
    pipe.ask_ahead(1, "usctec", 2)
    gets[("ref", 2)] = _prep("ab", plan="stale", joined=("c",), rows_moved=5)
    pipe.tables.changed()  # a machine joined or left meanwhile: the plan is dropped
    assert pipe.prepare(2, "usctec", 2)[0].plan == "fresh"
    c = pipe.take_carry()
    assert c["joined"] == ("c",) and c["rows_moved"] == 5 and pipe.carry == no_carry()


def test_short_of_machines_lowers_S_where_allowed():
    short = ShortOfMachines("machines: 2 present; add machines", 0)
    pipe, link, _ = _pipeline([short, _prep("ab", plan="lower")], allow_lower_S=True)
    prep, S = pipe.prepare(0, "usctec", 2)
    assert prep.plan == "lower" and S == 0 and link.requests[1].S == 0
    pipe, _, _ = _pipeline([short])
    with pytest.raises(ShortOfMachines):
        pipe.prepare(0, "usctec", 2)


def test_the_summary_is_kept_for_the_same_plan_object():
    pipe, _, _ = _pipeline([])
    assert pipe.summary(None) is None
    plan = SimpleNamespace(design=SimpleNamespace(batches=[1, 2], K=3, q=2), servers=("a",),
                           version=1, m=1, N=2, reason="start")
    assert pipe.summary(plan) is pipe.summary(plan)


# -- the step report ------------------------------------------------------------------------------
def _outcome():
    g = SimpleNamespace(failed=["x", "x"], preempted=(), rows_dispatched=10, t_last=2.0,
                        slowest=0.5, backups=0, products=30, wasted=2, calls=(),
                        stragglers=lambda: ("s",), leftover_products=lambda: 1)
    return SimpleNamespace(gather=g, t_encode=0.1, t_decode=0.2, total_products=20,
                           decoded_by={0: ("a",)}, recovered=(), extra={})


def test_a_report_holds_the_verdict_and_reads_its_fields_as_its_own():
    v = Verdict(True, ("m1",), (0,), 2, (), 1.5, 0.0, 0.0, 0.01)
    prep = _prep("ab", plan=SimpleNamespace(L=1, S=1, c_int=3.0), joined=("b",))
    carry = {**no_carry(), "joined": ("c",)}
    r = build_report(step=4, policy="usctec", prep=prep, out=_outcome(), t0=1.0, t_end=3.0,
                     carry=carry, crashed=("x",), verdict=v, summary=None, keep_plans=False,
                     takes_LS=True)
    assert r.verdict is v and r.verified is True and r.caught == ("m1",) and r.recomputed == 2
    assert r.joined == ("c", "b") and r.failed == ("x",) and r.wasted_products == 3
    assert r.t_total == 2.0 and r.code == (1, 1) and r.stragglers == ("s",)
    d = r.to_dict()
    assert "verdict" not in d and all(d[f] == getattr(v, f) for f in VERDICT_FIELDS)
    assert list(d)[list(d).index("extra") + 1] == "verified"  # where the fields always were


def test_a_report_without_a_verdict_reads_the_defaults():
    r = StepReport(0, "usctec", None, (), (), (), (), (), {}, (), 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0,
                   0.0, 0.0)
    assert r.verified is None and r.caught == () and r.t_verify == 0.0
    assert r.to_dict()["improved"] == ()



def test_the_report_log_keeps_a_window_and_sums_every_step():
    """Its running summary over 40 steps equals :func:`summarize` of all 40 reports, while it
    holds only the last 5 (its timings are kept in compact arrays, not lists)."""
    rng = np.random.default_rng(3)
    reports = [StepReport(i, "usctec", None, (), (), (), (), (), {}, (), 0, 0, 0.0, 0.0, 0.0,
                          0.0, float(t), float(t) * s, 0.0, products=i)
               for i, (t, s) in enumerate(zip(rng.random(40), rng.random(40)))]
    log = ReportLog(window=5)
    for r in reports:
        log.append(r)
    assert len(log) == 5 and [r.step for r in log] == list(range(35, 40))
    assert log.summary() == summarize(reports) and log.summary()["steps"] == 40

# -- the constructor's arguments ------------------------------------------------------------------
def test_code_of_and_option_fields():
    assert code_of("usctec", True, 2, 1) == (2, 1) and code_of("unified", False, None, None) \
        == (1, 0)
    with pytest.raises(ArgumentError, match=r"^S: policy 'usctec' needs L and S"):
        code_of("usctec", True, 2, None)
    with pytest.raises(ArgumentError, match=r"^L, S: policy 'unified' takes no L or S"):
        code_of("unified", False, 2, 1)
    assert option_fields(None) == {} and option_fields({"q": 2}) == {"q": 2}
    with pytest.raises(ArgumentError, match=r"^options: a mapping"):
        option_fields(3)


def test_pull_history_reads_the_last_steps_of_the_policy_from_the_end():
    """``history`` equals its definition (the policy's steps with a report ``extra`` among the
    last ``16 window`` reports, the last ``window`` of them), read from a list and from a
    :class:`ReportLog` alike."""
    from elastic_coded.families.usctec.executor_pull import history
    from elastic_coded.families.usctec.pull_step import history_entry

    rng = np.random.default_rng(5)
    pols, modes = ("usctec-auto", "usctec-pull", "dynamic"), ("pull", "eager", "lean", None)
    for n in (0, 1, 7, 40, 130, 600):
        reports = [StepReport(i, pols[rng.integers(3)], None, (), (), (), (), (), {}, (), 0, 0,
                              0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                              extra={} if rng.random() < 0.2 else {
                                  "mode": modes[rng.integers(4)],
                                  "slowed": ("m",) * int(rng.integers(3))})
                   for i in range(n)]
        reports = [dataclasses.replace(r, t_total=float(rng.random())) for r in reports]
        log = ReportLog(window=1000)
        for r in reports:
            log.append(r)
        for policy in pols:
            for window in (1, 3, 32):
                mine = [r for r in reports[-16 * window:] if r.policy == policy and r.extra]
                want = tuple(history_entry(r.extra.get("mode"), r.extra.get("slowed", ()))
                             for r in mine)[-window:]
                assert history(reports, policy, window) == want
                assert history(log, policy, window) == want
                timed = tuple(history_entry(r.extra.get("mode"), r.extra.get("slowed", ()),
                                            r.t_total) for r in mine)[-window:]
                assert history(log, policy, window, timed=True) == timed
                assert all(len(e) == 3 for e in timed)
