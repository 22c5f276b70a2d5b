"""The unified coding framework's executor (MATH.md §2): Map on every live server, the fastest
``q`` go on to the coded-multicast Shuffle (server to server, by reference) and the Reduce.
When crashes leave fewer than ``q`` servers able to finish the Map, the storage is re-encoded
for the machines left (the controller's repair, through ``ctx.ctrl.replan``) and the step runs
again, without the events already applied."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import ray

from ...errors import InternalError, StepFailed
from ...runtime.context import StepContext
from ...runtime.executors.common import Outcome, crash_at
from ...runtime.gather import Gather, QuorumCollector
from ...schemes.policies import rules
from ...schemes.wire import Call
from . import check_shuffle_plan, latency_load, shuffle_plan
from . import policy as uni
from .verify import UnifiedRun

__all__ = ["run_unified", "UnifiedCache"]


class UnifiedCache:
    """The driver's Shuffle plans (by storage version, fastest servers and width) and the
    object-store copy of the design in force; an older design's are dropped."""

    def __init__(self):
        self._shuffles: dict = {}
        self._designs: dict = {}

    def shuffle_plan(self, st, Q: tuple, N: int):
        key = (st.version, Q, N)
        if key not in self._shuffles:
            if any(k[0] != st.version for k in self._shuffles):
                self._shuffles = {k: v for k, v in self._shuffles.items() if k[0] == st.version}
            plan = shuffle_plan(st.design, Q, N)
            check_shuffle_plan(st.design, plan)
            self._shuffles[key] = plan
        return self._shuffles[key]

    def design_ref(self, st):
        if st.version not in self._designs:
            self._designs = {st.version: ray.put(st.design)}
        return self._designs[st.version]


def run_unified(ctx: StepContext, X: np.ndarray, ev, prep, attempts: int = 3):
    """A unified step (see the module docstring).  Returns ``(A @ X, Outcome)``."""
    cache = ctx.state if ctx.state is not None else UnifiedCache()
    for attempt in range(attempts):
        try:
            Y, out = _unified_once(ctx, cache, X, ev, prep)
            return Y, (replace(out, prep=prep) if attempt else out)
        except _TooFewServers as exc:
            if attempt == attempts - 1 or ctx.ctrl.replan is None:
                raise StepFailed(f"step {ctx.step}: {exc}; re-encoding did not help") from None
            ctx.ctrl.mark_dead(exc.dead)
            ev = type(ev)(slow=ev.slow)
            prep = ctx.ctrl.replan()
    raise InternalError("unreachable")  # pragma: no cover


class _TooFewServers(StepFailed):
    def __init__(self, msg: str, dead):
        super().__init__(msg)
        self.dead = tuple(dead)


def _unified_once(ctx: StepContext, cache: UnifiedCache, X: np.ndarray, ev, prep):
    st: uni.UnifiedStorage = prep.plan
    d = st.design
    step, ts, N = ctx.step, ctx.time_scale, X.shape[1]
    t1 = time.perf_counter()
    refs = [ray.put(X)]
    t2 = time.perf_counter()
    total = d.m * N
    lat = uni.map_latencies(st, N, np.random.default_rng([ctx.seed, step]))
    col = QuorumCollector(d.q)
    g = Gather(refs, ctx.handles, col, lambda m, c: [])
    g.cols_of = {0: N}
    server_of = {mach: k for k, mach in enumerate(st.servers)}
    for k in st.live(ctx.handles):
        mach = st.servers[k]
        slow = float(ev.slow.get(mach, 1.0))
        pace = rules.paced(lat[k], ts, slow, prep.emulated.get(mach, 1.0)) if ts > 0 else None
        g.dispatch(mach, None, Call(step, uni.map_tasks(st, k), total, slow, pace,
                                    crash_at(mach, ev), keep=True))
    try:
        g.run()
    except RuntimeError:
        raise _TooFewServers(f"{len(col.finished)} servers finished the Map, fewer than "
                             f"q = {d.q}", g.failed) from None
    t_map = time.perf_counter()
    Q = tuple(sorted(server_of[o.machine] for o in col.finished[:d.q]))
    plan = cache.shuffle_plan(st, Q, N)
    Y, values_sent, packets, t_shuffle = _shuffle_reduce(ctx, cache, st, plan, Q, N)
    D, Lq = latency_load(d.K, d.mu, N, d.q)
    extra = {"K": d.K, "q": d.q, "fastest": Q, "values_sent": values_sent, "packets": packets,
             "load": values_sent / d.m, "L_theory": float(Lq), "D_theory": float(D),
             "model_latency": rules.quorum_time(lat, d.q),
             "map_s": t_map - t2, "shuffle_s": t_shuffle - t_map,
             "reduce_s": time.perf_counter() - t_shuffle, "pad_rows": st.pad_rows,
             "version": st.version}
    used = {0: tuple(st.servers[k] for k in Q)}
    return Y[:st.m], Outcome(g, t2 - t1, time.perf_counter() - t_shuffle, total, used, (), extra,
                             collector=UnifiedRun(st, plan, Q))


def _shuffle_reduce(ctx: StepContext, cache: UnifiedCache, st, plan, Q: tuple, N: int):
    """The Shuffle among the fastest ``Q`` (server to server, by reference) and the Reduce:
    ``(Y, values sent, packets, time the Shuffle ended)``."""
    step, d = ctx.step, st.design
    design_ref, plan_ref = cache.design_ref(st), ray.put(plan)
    h = {k: ctx.handles[st.servers[k]] for k in Q}
    sent = ray.get([h[k].shuffle_send.remote(step, design_ref, plan_ref, k) for k in Q])
    inbox: dict = {k: [] for k in Q}
    values_sent = packets = 0
    for lst in sent:
        for i, ref, size in lst:
            values_sent += size
            packets += 1
            for k in plan.transmissions[i].receivers:
                inbox[k].append((i, ref))
    ray.get([h[k].shuffle_receive.remote(step, design_ref, plan_ref, k, inbox[k]) for k in Q])
    t_shuffle = time.perf_counter()
    Y = ctx.F.zeros((d.m, N))
    for outs, vals in ray.get([h[k].reduce.remote(step, design_ref, plan_ref, k) for k in Q]):
        Y[:, list(outs)] = vals
    return Y, values_sent, packets, t_shuffle
