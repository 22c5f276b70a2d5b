"""The driver's plan pipeline: a step's plan asked for (or taken from one asked ahead), the
plans held, the execution chosen, and the membership changes of plans not used.

* :class:`PlanSetting`: what planning reads of the cluster, fixed at its start.
* :func:`choose_modes`: the execution a policy that chooses one each step (``usctec-auto``)
  will run, so that the controller makes only its plan.
* :class:`PlanPipeline`: a step's plan (:meth:`~PlanPipeline.prepare`); for the USCTEC family
  the next step's plan is asked for as a step starts (:meth:`~PlanPipeline.ask_ahead`), used
  only if no machine joined, left or failed in between and the step did not fail (the
  membership epoch of :class:`~.tables.DriverTables` says so).  Plain Python: the controller
  is reached through a :class:`~.membership.ControllerLink` (or a fake with ``call``, ``ask``
  and ``told``), object refs through ``get``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ShortOfMachines
from ..families.usctec.executor_pull import pull_pays
from ..families.usctec.modes import choose_mode, next_mode
from ..schemes.registry import policy_of, step_code
from ..schemes.wire import StepRequest, result_of
from .report import summarize_plan
from .tables import DriverTables

__all__ = ["PlanSetting", "PlanPipeline", "choose_modes", "no_carry", "PLANS_HELD"]

log = logging.getLogger(__name__)

PLANS_HELD = 4
"""Plans the driver keeps, so that the controller need not send one again
(:meth:`PlanPipeline.received`)."""


@dataclass(frozen=True)
class PlanSetting:
    """What planning reads of the cluster: its field, code ``(L, S)``, whether ``S`` may be
    lowered, whether the family takes ``L, S``, the cost of ``A``'s rows (``rows``: its
    nonzeros when sparse), the time scale and the policy's options."""

    F: Any
    L: int
    S: int
    allow_lower_S: bool = False
    takes_LS: bool = True
    rows: int = 0
    time_scale: float = 0.0
    options: Any = None


def no_carry() -> dict:
    """Membership changes not yet reported (a failed step's are carried to the next report)."""
    return {"joined": (), "left": (), "rows_moved": 0, "draining": (), "preempted": (),
            "restarted": (), "not_restarted": ()}


def choose_modes(setting: PlanSetting, policy: str, n_cols: int, speeds: dict, hist,
                 pull_rate: float | None, ahead: bool = False, S: int | None = None) -> tuple:
    """The execution a policy that chooses one each step (``usctec-auto``) will run, so the
    controller makes only its plan (``()``: every plan, before any speed is known).  ``hist``:
    the policy's recent steps (:func:`~elastic_coded.families.usctec.executor_pull.history`);
    ``ahead``: the one expected
    of the next step (:func:`~elastic_coded.families.usctec.modes.next_mode`)."""
    if not policy_of(policy).modes or not speeds or not setting.takes_LS:
        return ()
    S = setting.S if S is None else S
    L_s, S_s, _ = step_code(policy, setting.L, S, max(1, n_cols), setting.F)
    pays = pull_pays(setting.F, setting.rows, L_s, S_s, n_cols, speeds, setting.time_scale,
                     pull_rate, setting.options)
    mode = choose_mode(list(hist), pays)
    return (next_mode(hist, mode, pays) if ahead else mode,)


def _no_history(policy: str) -> tuple:
    return ()


class PlanPipeline:
    """A step's plan, the plans held and asked ahead (module docstring).  ``link``: the
    controller (``call``, ``ask``, ``told``); ``get``: an object ref's value (``ray.get``);
    ``history(policy)``: the policy's recent steps; ``pull_rate()``: the last pull step's."""

    def __init__(self, setting: PlanSetting, tables: DriverTables, link: Any,
                 get: Callable[..., Any], history: Callable[[str], Any] = _no_history,
                 pull_rate: Callable[[], float | None] = lambda: None):
        self.setting, self.tables, self.link, self.get = setting, tables, link, get
        self.history, self.pull_rate = history, pull_rate
        self.prefetch: dict = {}  # policy -> (epoch, n_cols, ref) of a plan asked ahead
        self.plans: dict = {}  # the plans held, by serial number (:meth:`received`)
        self.mode: str | None = None  # usctec-auto's execution of the step running
        self.carry = no_carry()
        self._summarized: tuple = (None, None)

    def modes(self, policy: str, n_cols: int, ahead: bool = False, S=None) -> tuple:
        """:func:`choose_modes` with the driver's speeds and the policy's history."""
        if not policy_of(policy).modes or not self.tables.speeds or not self.setting.takes_LS:
            return ()
        return choose_modes(self.setting, policy, n_cols, self.tables.speeds,
                            self.history(policy), self.pull_rate(), ahead, S)

    def _request(self, step: int, policy: str, n_cols: int, S=None, **kw):
        return StepRequest(step, policy, S, n_cols, tuple(self.tables.handles),
                           held=tuple(self.plans), **kw)

    def prepare(self, step: int, policy: str, n_cols: int):
        """The step's plan: a prefetched one if still valid, else asked for now (with a lower
        ``S`` when machines ran short and ``allow_lower_S`` is set); the tables take it.
        Returns ``(prepared step, S used if lowered, else None)``."""
        self.drop_stale(n_cols)
        modes = self.modes(policy, n_cols)
        self.mode = modes[0] if modes else None
        prep = self._prefetched(policy, modes)
        S_override = None
        if prep is None:
            req = self._request(step, policy, n_cols, modes=modes, report=self.link.told())
            try:
                prep = self.received(self.link.call("prepare_step", req))
            except ShortOfMachines as exc:
                if not (self.setting.allow_lower_S and self.setting.takes_LS):
                    raise
                S_override = exc.S_max
                log.warning("running step %d with S=%d (%s)", step, S_override,
                            str(exc).split(";")[0])
                req = self._request(step, policy, n_cols, S_override,
                                    modes=self.modes(policy, n_cols, S=S_override))
                prep = self.received(self.link.call("prepare_step", req))
        self.tables.took(prep)
        return prep, S_override

    def _prefetched(self, policy: str, modes: tuple):
        """The plan asked ahead for ``policy``, if it came and is of the execution chosen."""
        pre = self.prefetch.pop(policy, None)
        if pre is None:
            return None
        try:
            prep = self.received(self.get(pre[2]))
        except Exception:  # e.g. too few machines: the fresh request reports it
            return None
        if prep is not None and modes and not prep.plan.has(modes[0]):
            self.carry_over(prep)  # planned for another execution: ask again
            return None
        return prep

    def received(self, reply):
        """A prepared step as the controller sent it (:func:`~elastic_coded.schemes.wire.
        result_of`), the plan filled in from those the driver holds when it was left out
        (``StepRequest.held``); the last :data:`PLANS_HELD` plans received are held.  ``None``
        when that plan is held no more (a plan asked ahead): its changes are carried over and
        the step is asked for again."""
        prep = result_of(reply)
        if prep.plan is None:
            plan = self.plans.get(prep.serial)
            if plan is None:
                self.carry_over(prep)
                return None
            return dataclasses.replace(prep, plan=plan)
        if prep.serial:
            self.plans[prep.serial] = prep.plan
            while len(self.plans) > PLANS_HELD:
                del self.plans[next(iter(self.plans))]
        return prep

    def summary(self, plan):
        """:func:`.report.summarize_plan`, kept for the plan object last summarized (a plan
        reused while nothing changed is the same object from step to step)."""
        if self._summarized[0] is not plan:
            self._summarized = (plan, summarize_plan(plan))
        return self._summarized[1]

    def ask_ahead(self, step: int, policy: str, n_cols: int) -> None:
        """Ask for step ``step + 1``'s plan (this policy, the same input width) now, so that the
        controller plans it while this step computes; it is used if no machine joins, leaves or
        fails meanwhile (the membership epoch says so), else dropped."""
        req = self._request(step + 1, policy, n_cols, ahead=True,
                            modes=self.modes(policy, n_cols, ahead=True),
                            report=self.link.told())
        self.prefetch[policy] = (self.tables.epoch, n_cols, self.link.ask(req))

    def drop_stale(self, n_cols: int) -> None:
        """Drop plans asked for ahead under another membership or input width (their joins,
        departures and copies carried into the next report)."""
        for p, (epoch, cols, ref) in list(self.prefetch.items()):
            if epoch != self.tables.epoch or cols != n_cols:
                del self.prefetch[p]
                try:
                    info = result_of(self.get(ref))
                except Exception:  # it failed: it changed nothing
                    continue
                self.carry_over(info)

    def carry_over(self, info) -> None:
        """A plan not used: its joins, departures and copies go into the next report."""
        c = self.carry
        for key in ("joined", "left", "draining", "preempted", "restarted", "not_restarted"):
            c[key] += tuple(getattr(info, key))
        c["rows_moved"] += int(info.rows_moved)

    def take_carry(self) -> dict:
        """The changes carried so far, for the step's report (none carried after)."""
        c, self.carry = self.carry, no_carry()
        return c

    def forget_plans(self) -> None:
        """A new controller took over: plans asked ahead and serial numbers are void."""
        self.prefetch.clear()
        self.plans.clear()

    def collect(self, timeout: float = 10) -> None:
        """Wait for plans asked for ahead, so that none fails unobserved (a shutdown)."""
        for _, _, ref in self.prefetch.values():
            try:
                self.get(ref, timeout=timeout)
            except Exception:
                pass
