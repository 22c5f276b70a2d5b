"""A toy scheme, defined outside the package: every machine stores a whole copy of ``A`` and a
step takes the first copy of ``A @ B`` back.  :func:`register` adds it (its family and its one
policy, ``replication``); the runtime and the simulator then run it with no change elsewhere."""

import time
from dataclasses import dataclass, replace
from typing import ClassVar

from elastic_coded.errors import PlanError
from elastic_coded.families import Family, SimModel, register_family, unregister_family
from elastic_coded.schemes.families import Change
from elastic_coded.schemes.registry import Policy, register_policy, unregister_policy

NAME = "replication"


@dataclass(frozen=True)
class CopyPlan:
    """The machines asked for a copy and ``A``'s rows (and the code fields a report reads)."""
    available: tuple
    rows: int = 0
    L: int = 1
    S: int = 0
    K: int = 1
    groups: tuple = ()
    pieces: tuple = ()


class Copies:
    """The storage: the machines holding a whole copy of ``A`` (source ``"A"``)."""

    name, has_LS = NAME, False

    def __init__(self, setup):
        self.q, self.held = setup.num_rows, ()

    storage = property(lambda self: self.held)

    def _copy_to(self, machines) -> Change:
        new = [m for m in machines if m not in self.held]
        self.held += tuple(new)
        return Change([("A", 0, self.q, m) for m in new])

    start = lambda self, specs: self._copy_to([s.id for s in specs])
    join = lambda self, spec: self._copy_to([spec.id])
    repair = lambda self, present, S, n_cols=None: self._copy_to(present.machines)

    def forget(self, machine):
        self.held = tuple(m for m in self.held if m != machine)

    def rescue(self, m, need, exclude, machines):
        raise PlanError("rescue: copies are never rescued")

    plan = lambda self, policy, present, S, request: CopyPlan(
        tuple(m for m in present.machines if m in self.held), self.q)
    holders = lambda self, rows, present: [(rows, [m for m in present if m in self.held])]

    def restore(self, state):
        self.held = tuple(state)

    sources = lambda self: ("A",)
    snapshot = members = state_key = lambda self: self.held


class FirstCopy:
    """The step's collector: the first whole copy of the product."""

    def __init__(self):
        self.Y, self.used_by = None, {}

    done = property(lambda self: self.Y is not None)
    needs = lambda self, task: self.Y is None

    def add(self, machine, task, H):
        if self.Y is not None:
            return False
        self.Y, self.used_by = H, {0: [machine]}
        return True


def run_copies(ctx, X, ev, prep):
    """Every machine of the plan computes ``A @ X``; the first result is the product."""
    import ray

    from elastic_coded.runtime.executors.common import Outcome, crash_at
    from elastic_coded.runtime.gather import Gather
    from elastic_coded.schemes.wire import Call, TaskSpec

    t0, plan, col = time.perf_counter(), prep.plan, FirstCopy()
    g = Gather([ray.put(X)], ctx.handles, col, lambda m, call: [])
    g.cols_of = {0: X.shape[1]}
    total, task = plan.rows * X.shape[1], TaskSpec("A", (0, plan.rows), 0, None, 0, 0)
    for m in plan.available:
        g.dispatch(m, None, Call(ctx.step, (task,), total, float(ev.slow.get(m, 1.0)),
                                 crash_at=crash_at(m, ev)))
    g.run()
    return col.Y, Outcome(g, time.perf_counter() - t0, 0.0, total, col.used_by)


class NoChecks:
    """Copies are not decoded, so not checked (the verifier reports the step unverified)."""

    hint = "none: copies are not decoded"
    __init__ = lambda self, verifier: None
    check = lambda self, ctx, X, Y, out, prep, state: (Y, (None, 0.0, 0.0))
    improve = lambda self, ctx, X, Y, out, state: None


def runtime_setup():
    """The driver side: ``A`` loaded and put like the USCTEC family's, its own executor."""
    from elastic_coded.families.usctec.runtime import USCTEC_SETUP

    return replace(USCTEC_SETUP, name=NAME, takes_LS=False, learns_speeds=False,
                   prefetches=False, precheck=lambda *args: (), checks=NoChecks,
                   executors={NAME: run_copies})


@dataclass(frozen=True)
class CopyVariant:
    family: ClassVar[str] = NAME
    name: str = NAME


def copy_variant(options, masters):  # the variant made from the options given for it
    return CopyVariant()


class CopySim:
    """A simulated step: the fastest live machine's time for the whole product."""

    def __init__(self, v, trace, configured, env):
        self.name, self.ts = v.name, env.ts

    def step(self, ctx, rec):
        live = ctx.eff if ctx.crashed is None else ctx.eff[~ctx.crashed]
        rec.times[self.name][ctx.t] = self.ts / float(live.max()) if live.size else float("inf")


REPLICATION = Family(NAME, storage=Copies, runtime=runtime_setup,
                     sim=SimModel(copy_variant, CopySim))


def register():
    register_family(REPLICATION)
    register_policy(Policy(NAME, NAME, execution=NAME))


def unregister():
    unregister_policy(NAME)
    unregister_family(NAME)
