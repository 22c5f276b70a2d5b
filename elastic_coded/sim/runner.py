"""``simulate``: policies side by side on one seeded trace.  Pure: numpy and scipy (no Ray).

Each step, for every policy: the machines present (the trace), the storage placement kept the
runtime's way (``extend_placement`` for joiners, then ``repair_placement`` with the machines'
storage budgets, whenever membership changes), the plan from the same policy function the runtime
calls (``schemes.registry``) fetched through a :class:`~elastic_coded.sim.executor.PlanCache`, and
the step executed in simulated time (:mod:`elastic_coded.sim.executor`).  Speed estimates start at
each machine's configured speed; with learning on they follow the controller's rule (EMA 0.5 of the
measured ``work / elapsed`` of machines that returned, and of the upper bound ``work / step time``
for those cancelled when it is lower).

As in the runtime, where one cluster (one placement) serves every policy, the built-in policies run
on the designed placement (``design_placement``), except ``usctec-cyclic`` and ``cec`` which run on
the cyclic placement of coded elastic computing.

Bounds, reported like policies:

- ``ideal``: the step's work with the ``(L+S)/L`` redundancy over the sum of the present machines'
  base speeds (``schemes.registry.ideal_time`` times ``time_scale``): a coded step with perfectly
  balanced loads and nothing straggling.  A reference, not a theorem: with nothing straggling the
  uncoded split (no redundancy) beats it.
- ``lower_bound``: ``time_scale / sum(speed / slowdown)`` over the machines that do not crash: the
  products of ``A B`` computed at the machines' realised speeds with no redundancy at all; no
  policy can beat it in any step.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..schemes.policies.rules import update_speed
from ..schemes.registry import SPECULATION, get_policy, ideal_time
from ..schemes.usctec import (SpeedModel, cyclic_placement, design_placement, extend_placement,
                              repair_placement, validate)
from .executor import (SPEED_BLIND, PlanCache, Speculation, _Compiled, _execute,
                       _PlacementIndex)
from .trace import Trace, make_trace

__all__ = ["Variant", "VARIANTS", "BOUNDS", "SimResult", "simulate", "summarize_times"]

BOUNDS = ("ideal", "lower_bound")


@dataclass(frozen=True)
class Variant:
    """A policy as the simulator runs it: a plan function (a registry name or a callable
    ``(placement, available, speeds, L, S) -> StepPlan``) on a placement kind (``"cyclic"`` or
    ``"design"``), optionally with speculative backups (uncoded split only; a registry policy
    listed in ``SPECULATION`` gets them by default, with its multiplier) and its own learning
    switch (``None``: the simulation's)."""

    name: str
    plan: object = "usctec"
    placement: str = "design"
    speculation: Speculation | None = None
    learn: bool | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: a non-empty string, got {self.name!r}")
        if isinstance(self.plan, str):
            get_policy(self.plan)
        elif not callable(self.plan):
            raise TypeError(f"plan: a registry name or a plan function, got {self.plan!r}")
        if self.placement not in ("cyclic", "design"):
            raise ValueError(f"placement: 'cyclic' or 'design', got {self.placement!r}")
        if self.speculation is None and isinstance(self.plan, str) and self.plan in SPECULATION:
            object.__setattr__(self, "speculation", Speculation(SPECULATION[self.plan]))
        if self.speculation is not None and self.plan not in ("uncoded", "speculative"):
            raise ValueError(f"speculation: runs on the uncoded split ('uncoded' or "
                             f"'speculative'), not {self.plan!r}")

    @property
    def speed_blind(self) -> bool:
        return isinstance(self.plan, str) and self.plan in SPEED_BLIND

    @property
    def plan_key(self):
        """Variants with the same plan function on the same placement kind share plans."""
        fn = self.plan_fn()
        return (getattr(fn, "__module__", ""), getattr(fn, "__qualname__", ""), id(fn),
                self.placement)

    def plan_fn(self) -> Callable:
        return get_policy(self.plan) if isinstance(self.plan, str) else self.plan


VARIANTS: dict[str, Variant] = {
    "usctec": Variant("usctec", "usctec", "design"),
    "uncoded": Variant("uncoded", "uncoded", "design"),
    "speculative": Variant("speculative", "speculative", "design"),
    "cyclic": Variant("cyclic", "cyclic", "design"),
    "usctec-cyclic": Variant("usctec-cyclic", "usctec", "cyclic"),
    "cec": Variant("cec", "cyclic", "cyclic"),
}
"""Built-in policies: ``usctec`` (the runtime's default, on ``design_placement``), and on that same
placement ``uncoded`` (rows split evenly, wait for all), ``speculative`` (the uncoded split with
backup tasks) and ``cyclic`` (equal loads ``(L+S)/N_t``); on the cyclic placement,
``usctec-cyclic`` (USCTEC's plan) and ``cec`` (coded elastic computing as published: cyclic
placement, equal loads)."""


def summarize_times(times: np.ndarray) -> dict:
    """``mean``, ``median``, ``p95``, ``max`` of the completed steps, and ``lost`` (steps that
    could not complete)."""
    t = np.asarray(times, dtype=np.float64)
    ok = t[np.isfinite(t)]
    if not ok.size:
        return {"mean": math.nan, "median": math.nan, "p95": math.nan, "max": math.nan,
                "lost": int(t.size)}
    return {"mean": float(ok.mean()), "median": float(np.median(ok)),
            "p95": float(np.percentile(ok, 95)), "max": float(ok.max()),
            "lost": int(t.size - ok.size)}


@dataclass(frozen=True)
class SimResult:
    """Per-step times of every policy on one trace, and their summary."""

    names: tuple
    times: dict = field(repr=False)
    """``{name: (steps,) step times}`` (``inf``: the step could not complete)."""
    plan_seconds: dict = field(repr=False)
    """``{name: (steps,) measured planning seconds}`` (0 when the plan came from the cache)."""
    storage_seconds: dict = field(repr=False)
    """``{placement kind: (steps,) measured seconds of extend/repair}``."""
    recovered: dict = field(repr=False)
    """``{name: (steps,) pieces that crashes left short of L live results}``."""
    redispatched: dict = field(repr=False)
    """``{name: (steps,) tasks re-dispatched after crashes}``."""
    copies: dict = field(repr=False)
    """``{name: (steps,) speculative copies launched}``."""
    replans: dict
    """``{name: plans solved}`` (cache misses; policies sharing a plan function and placement
    share plans, the first to ask pays)."""
    machines: np.ndarray = field(repr=False)
    """``(steps,)`` machines present."""
    counts: dict
    """Churn totals (joins, leaves, crashes, membership changes)."""
    wall: dict
    """Measured seconds: ``total``, ``trace``, ``placement`` (initial), ``storage``, ``planning``,
    ``execution``."""
    baseline: str | None
    summary: dict
    """``{name: summarize_times(...) + ratio_mean, ratio_median (to the baseline), plan_ms (mean
    planning ms per step), replans, recovered, redispatched, copies}``."""

    def __repr__(self) -> str:
        steps = len(self.machines)
        parts = ", ".join(f"{n}={self.summary[n]['mean']:.4g}" for n in self.names)
        return f"SimResult({steps} steps, mean times: {parts})"

    def to_dict(self) -> dict:
        """The summary and totals as plain JSON-able data."""
        return {"names": list(self.names), "baseline": self.baseline, "summary": self.summary,
                "replans": self.replans, "counts": self.counts, "wall": self.wall,
                "steps": int(len(self.machines))}


def _resolve(policies) -> list:
    out, seen = [], set()
    for p in policies:
        if isinstance(p, Variant):
            v = p
        elif isinstance(p, str) and p in BOUNDS:
            v = p
        elif isinstance(p, str) and p in VARIANTS:
            v = VARIANTS[p]
        else:
            raise ValueError(f"policies: unknown policy {p!r}; known: "
                             f"{sorted(VARIANTS) + list(BOUNDS)} or a Variant")
        name = v if isinstance(v, str) else v.name
        if name in seen:
            raise ValueError(f"policies: {name!r} given twice")
        seen.add(name)
        out.append(v)
    if not out:
        raise ValueError("policies: give at least one")
    return out


class _Storage:
    """One placement kind's storage, kept the runtime's way as membership changes."""

    def __init__(self, placement):
        self.placement = placement
        self.version = 0
        self.member = -1  # membership index the placement was last brought up to date for
        self._index = None

    def index(self) -> _PlacementIndex:
        if self._index is None:
            self._index = _PlacementIndex(self.placement)
        return self._index

    def update(self, trace: Trace, t: int, L: int, S: int) -> None:
        present = trace.present(t)
        for j in trace.joined[t]:
            self.placement, _ = extend_placement(self.placement, j.id, j.storage)
        if set(self.placement.machines) != set(present):
            budgets = {m: float(trace.storage[s]) for m, s in zip(present, trace.slots(t))}
            self.placement, _ = repair_placement(self.placement, present, L, S, budgets)
        self.version += 1
        self.member = int(trace.member_of[t])
        self._index = None


def simulate(N: int | None = None, steps: int | None = None, *, L: int, S: int,
             policies: Sequence = ("uncoded", "speculative", "cyclic", "usctec", "ideal"),
             delays=None, speeds=None, churn=None, seed: int = 0, estimates=None,
             num_rows: int | None = None, storage: float = 1.0, time_scale: float = 1.0,
             learn_speeds: bool = False, plan_tol: float = 0.05, baseline: str | None = "uncoded",
             design_samples: int = 8, crash_at: float = 0.5, check_plans: bool = False,
             trace: Trace | None = None) -> SimResult:
    """Run ``policies`` side by side on one trace of ``steps`` steps on ``N`` machines.

    ``delays``/``speeds``: models from :mod:`elastic_coded.sim.models` (or an array of ``N``
    speeds); ``churn``: a churn script; ``seed`` drives the models (the churn script has its own
    seed, as in the runtime).  Or pass a ready ``trace`` (then ``N``, ``steps``, the models and the
    churn come from it).  ``estimates``: the speeds the controller starts with (default the true
    base speeds, as in the runtime, whose machines are configured with their speed); a number
    means every machine.  ``num_rows``: rows of ``A`` (default ``100 N``).  ``storage``: every
    initial machine's budget.  ``plan_tol``: the plan cache's tolerance
    (:class:`~elastic_coded.sim.executor.PlanCache`).  ``design_samples``: speed samples
    ``design_placement`` scores candidates on (the runtime uses 16; each costs an LP per
    candidate).  ``check_plans``: validate every new plan against its placement.
    """
    t_start = time.perf_counter()
    if trace is None:
        if N is None or steps is None:
            raise ValueError("N, steps: give both, or a trace")
        trace = make_trace(N, steps, L, S, delays=delays, speeds=speeds, churn=churn, seed=seed,
                           storage=storage)
    elif not isinstance(trace, Trace):
        raise TypeError(f"trace: a Trace from make_trace, got {type(trace).__name__}")
    elif (trace.L, trace.S) != (L, S):
        raise ValueError(f"trace: drawn for L={trace.L}, S={trace.S}, not L={L}, S={S}")
    t_trace = time.perf_counter() - t_start
    steps = trace.steps
    N0 = trace.N
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale: positive and finite, got {time_scale!r}")
    if not 0 <= crash_at <= 1:
        raise ValueError(f"crash_at: a fraction in [0, 1], got {crash_at!r}")
    q = int(num_rows) if num_rows is not None else 100 * N0
    if q < 1:
        raise ValueError(f"num_rows: a positive int, got {num_rows!r}")
    variants = _resolve(policies)
    names = tuple(v if isinstance(v, str) else v.name for v in variants)
    if baseline is not None and baseline not in names:
        raise ValueError(f"baseline: {baseline!r} is not among the policies {list(names)}")
    ts = float(time_scale)

    # speed estimates the controller starts with
    configured = trace.configured.copy()
    if estimates is not None:
        est0 = np.asarray(estimates, dtype=np.float64).reshape(-1)
        if est0.size == 1:
            configured[:] = float(est0[0])
        elif est0.size == N0:
            configured[:N0] = est0
        else:
            raise ValueError(f"estimates: a number or {N0} values, got {est0.size}")
        if not np.all(np.isfinite(configured) & (configured > 0)):
            raise ValueError("estimates: every estimate must be positive and finite")

    # initial placements, as the controller designs them
    t0 = time.perf_counter()
    ids0 = trace.ids[:N0]
    budgets0 = [float(b) for b in trace.storage[:N0]]
    stores: dict[str, _Storage] = {}
    kinds = {v.placement for v in variants if isinstance(v, Variant)}
    if "cyclic" in kinds:
        stores["cyclic"] = _Storage(cyclic_placement(
            q, ids0, L, S, budgets=None if all(b >= 1 for b in budgets0) else budgets0))
    if "design" in kinds:
        model = SpeedModel(tuple(float(x) for x in configured[:N0]), straggle_prob=0.1,
                           straggle_factor=5.0)
        stores["design"] = _Storage(design_placement(q, ids0, budgets0, model, L, S,
                                                     samples=design_samples, seed=seed))
    t_placement = time.perf_counter() - t0

    cache = PlanCache(plan_tol)
    est = {v.name: configured.copy() for v in variants
           if isinstance(v, Variant) and not v.speed_blind
           and (v.learn if v.learn is not None else learn_speeds)}
    times = {n: np.zeros(steps) for n in names}
    plan_s = {n: np.zeros(steps) for n in names}
    storage_s = {k: np.zeros(steps) for k in stores}
    recovered = {n: np.zeros(steps, dtype=np.int64) for n in names}
    copies = {n: np.zeros(steps, dtype=np.int64) for n in names}
    redispatched = {n: np.zeros(steps, dtype=np.int64) for n in names}
    replans = {n: 0 for n in names}
    machines = np.zeros(steps, dtype=np.int64)
    t_exec = 0.0
    for t in range(steps):
        m_idx = int(trace.member_of[t])
        present = trace.members[m_idx]
        slots = trace.member_slots[m_idx]
        machines[t] = len(present)
        for kind, st in stores.items():
            if st.member != m_idx:
                t1 = time.perf_counter()
                st.update(trace, t, L, S)
                storage_s[kind][t] = time.perf_counter() - t1
        tx = time.perf_counter()
        speed = trace.speed[t, slots]
        eff = speed / trace.slowdown[t, slots]
        crashed = None
        if trace.crashed[t]:
            crashed = np.zeros(len(present), dtype=bool)
            crashed[[present.index(m) for m in trace.crashed[t]]] = True
        t_exec += time.perf_counter() - tx
        for v in variants:
            if isinstance(v, str):
                if v == "ideal":
                    times[v][t] = ideal_time(speed, L, S) * ts
                else:
                    live = eff if crashed is None else eff[~crashed]
                    times[v][t] = ts / float(live.sum())
                continue
            st = stores[v.placement]
            learning = v.name in est
            cur = (est[v.name] if learning else configured)[slots]

            def build(v=v, st=st, cur=cur):
                plan = v.plan_fn()(st.placement, present, cur, L, S)
                if check_plans:
                    validate(plan, st.placement)
                return plan

            comp, hit, secs = cache.get((v.plan_key, st.version, m_idx),
                                        None if v.speed_blind else cur, build)
            plan_s[v.name][t] = secs
            replans[v.name] += 0 if hit else 1
            tx = time.perf_counter()
            take = comp.take.get(m_idx)
            if take is None:
                avail = comp.plan.available
                take = (None if avail == present
                        else np.array([present.index(m) for m in avail], dtype=np.int64))
                comp.take[m_idx] = take
            e = eff if take is None else eff[take]
            c = crashed if (take is None or crashed is None) else crashed[take]
            out = _execute(comp, st.index, e, c, cur if take is None else cur[take], ts,
                           crash_at, v.speculation)
            times[v.name][t] = out.time
            recovered[v.name][t] = len(out.recovered)
            copies[v.name][t] = out.copies
            redispatched[v.name][t] = out.redispatched
            if learning and math.isfinite(out.time) and out.time > 0:
                _learn(est[v.name], slots if take is None else slots[take], comp, out, e, c, ts)
            t_exec += time.perf_counter() - tx

    summary = {}
    base = summarize_times(times[baseline]) if baseline is not None else None
    for n in names:
        s = summarize_times(times[n])
        s["ratio_mean"] = (s["mean"] / base["mean"]) if base and base["mean"] > 0 else None
        s["ratio_median"] = (s["median"] / base["median"]) if base and base["median"] > 0 else None
        s["plan_ms"] = float(plan_s[n].mean() * 1e3) if steps else 0.0
        s["replans"] = replans[n]
        s["recovered"] = int(recovered[n].sum())
        s["redispatched"] = int(redispatched[n].sum())
        s["copies"] = int(copies[n].sum())
        summary[n] = s
    total = time.perf_counter() - t_start
    wall = {"total": total, "trace": t_trace, "placement": t_placement,
            "storage": float(sum(a.sum() for a in storage_s.values())),
            "planning": float(sum(a.sum() for a in plan_s.values())), "execution": t_exec}
    return SimResult(names, times, plan_s, storage_s, recovered, redispatched, copies, replans,
                     machines, trace.counts(), wall, baseline, summary)


def _learn(est: np.ndarray, slots: np.ndarray, comp: _Compiled, out, eff: np.ndarray,
           crashed: np.ndarray | None, ts: float) -> None:
    """The controller's update (:func:`~elastic_coded.schemes.policies.rules.update_speed`) from
    the measured speed of machines that returned, and the upper bound ``work / step time`` of
    those cancelled."""
    work = comp.work
    f = out.finish
    T = out.time
    has = work > 0
    if crashed is not None:
        has &= ~crashed
    done = has & (f <= T)
    value = np.where(done, eff, np.where(has, work * ts / T, np.nan))
    est[slots] = update_speed(est[slots], value, ~done)
