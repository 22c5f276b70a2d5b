"""One step of each storage family on the one runtime: encode the inputs, dispatch the plan's
calls, gather through :class:`~.gather.Gather` into the scheme's collector, decode.

* :func:`run_lagrange` (USCTEC and its baselines, MATH.md §1): Lagrange-coded inputs, every
  piece decoded from its first ``L`` positions; the work of a machine that dies is re-planned on
  live holders of its rows; ``speculative`` launches backup copies.
* :func:`run_hetero` (MATH.md §3): every master decodes from its first ``L_m`` coded rows; rows
  lost to a crash, or missing from a probabilistic draw, are topped up from other holders.
* :func:`run_unified` (MATH.md §2): Map on every live server, the fastest ``q`` go on to the
  coded-multicast Shuffle (server to server, by reference) and the Reduce.

Each returns the product and a :class:`Outcome` the driver turns into the step report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import ray

from ..algebra.lagrange import lagrange_code
from ..errors import StepFailed
from ..schemes.policies import hetero as het
from ..schemes.policies import rules
from ..schemes.policies import unified as uni
from ..schemes.policies.collect import LagrangeCollector, MDSCollector
from ..schemes.reference import assemble
from ..schemes.registry import policy_of
from ..schemes.unified import check_shuffle_plan, latency_load, shuffle_plan
from ..schemes.wire import Call, TaskSpec
from .gather import Gather, QuorumCollector
from .verify_unified import UnifiedRun

__all__ = ["Outcome", "run_lagrange", "run_hetero", "run_unified"]


@dataclass
class Outcome:
    """What a step did, for the report."""

    gather: Gather
    t_encode: float
    t_decode: float
    total_products: int
    decoded_by: dict
    recovered: tuple = ()
    extra: dict = field(default_factory=dict)
    prep: object = None
    """The prepared step that ran, when the step had to be planned again (unified re-encoding
    after crashes mid-step)."""
    collector: object = None
    """The step's collector (its results by piece and position), for checks after decoding."""


def _crash(m, ev) -> float | None:
    return 0.5 if m in ev.crash else None


def run_lagrange(cl, B: np.ndarray, policy: str, ev, prep):
    """USCTEC-family step (see the module docstring); the pull policies run
    :func:`~.pull.run_pull`."""
    if policy_of(policy).pulls:
        from .pull import run_pull

        return run_pull(cl, B, policy, ev, prep)
    plan = prep.plan
    t1 = time.perf_counter()
    r = B.shape[1]
    code, coded, refs = encode_inputs(cl, B, plan.L, plan.S)
    t2 = time.perf_counter()
    total = plan.num_rows * r  # the products of A @ B: emulated work is measured against it
    step = cl._step
    col = LagrangeCollector(plan, code, cl._verifier.patience)
    recovered: set = set()

    def on_lost(machine, call):
        lost = [t for t in call.tasks if col.needs(t)]
        if not lost:
            cl._ctrl("mark_dead", [machine])
            return []
        recovered.update(t.piece for t in lost)
        return [(r.machine, r.handle, Call(step, r.tasks, total))
                for r in cl._ctrl("recover", lost, [machine])]

    g = Gather(refs, cl._handles, col, on_lost)
    g.cols_of = {p: coded.shape[2] for p in range(plan.K)}
    for m, ts in plan.tasks().items():
        specs = tuple(TaskSpec("A", t.rows, t.position, t.cols, t.piece, t.position) for t in ts)
        g.dispatch(m, None, Call(step, specs, total, float(ev.slow.get(m, 1.0)),
                                 crash_at=_crash(m, ev)))
    factor = policy_of(policy).speculation or cl.deadline
    if factor:
        g.backup = _speculator(g, factor, lambda: cl._ctrl("holders_of", plan),
                               col, step, total)
        g.run(lambda: _backup_timeout(g, factor))
    else:
        g.run()
    td = time.perf_counter()
    Y = assemble(plan, col.decoded, coded.shape[2], cl.F.dtype)[:, :r]
    from .pull import slowed

    extra = {"slowed": slowed(g, prep.speeds, total, cl.time_scale or 1.0)}
    return Y, Outcome(g, t2 - t1, time.perf_counter() - td, total, col.used_by,
                      tuple(sorted(recovered)), extra, collector=col)


def encode_inputs(cl, B: np.ndarray, L: int, S: int):
    """``B`` Lagrange-coded for ``(L, S)`` and each of its ``L + S`` positions put in the
    object store once: ``(code, coded, refs)``.  Zero columns are added only when ``L`` (times
    the code's width, 2 for a complex code) does not divide ``B``'s column count (see
    ``step_code``)."""
    code = lagrange_code(cl.F, L, S)
    pad = (-B.shape[1]) % (L * code.width)
    if pad:
        B = np.concatenate([B, cl.F.zeros((B.shape[0], pad))], axis=1)
    coded = code.encode(B)
    return code, coded, [ray.put(coded[p]) for p in range(code.K)]


def _backup_timeout(g: Gather, factor: float) -> float | None:
    med = g.median_done()
    if med is None:
        return None
    due = [t for r, (_, _, t) in g.pending.items() if r not in g.speculated]
    if not due:
        return None
    return max(0.0, min(due) + factor * med - time.perf_counter())


def _speculator(g: Gather, factor: float, holders_of, col, step: int, total: int):
    """Backups for late calls (:func:`~elastic_coded.schemes.policies.rules.backup_copies`): a
    call running ``factor`` times the median completed call gets a copy of each task still
    needed on the least busy other machine storing its rows.  Under ``speculative`` these are
    Spark's backup copies; under the coded policies they are the step deadline's coded backups
    (a position of a piece recomputed elsewhere, useful whoever finishes first).  The holders
    are asked for once, when a first backup is due."""
    g.speculated = set()
    holders: dict = {}

    def backup(now: float) -> list:
        med = g.median_done()
        due = [(r, m, [t.piece for t in call.tasks]) for r, (m, call, t_sent) in g.pending.items()
               if r not in g.speculated and rules.backup_due(now - t_sent, med, factor)]
        g.speculated.update(r for r, _, _ in due)
        if due and not holders:
            holders.update(holders_of())
        busy: dict = {}
        for m, _, _ in g.pending.values():
            busy[m] = busy.get(m, 0) + 1
        copies = rules.backup_copies(due, holders, busy, lambda p: p not in col.decoded)
        return [(h, None, Call(step, (g.pending[r][1].tasks[i],), total)) for r, i, h in copies]

    return backup


# -- heterogeneous masters -----------------------------------------------------------------------

def run_hetero(cl, xs: list, ev, prep):
    """Heterogeneous-masters step (see the module docstring)."""
    plan: het.HeteroStepPlan = prep.plan
    t1 = time.perf_counter()
    refs = [ray.put(x) for x in xs]
    t2 = time.perf_counter()
    step, ts = cl._step, cl.time_scale
    total = sum(Lm * x.shape[1] for Lm, x in zip(plan.L, xs))
    col = MDSCollector(plan.L, cl._codes)
    dead: set = set()
    rescued: set = set()
    g = Gather(refs, cl._handles, col, lambda m, c: [])
    g.cols_of = {m: x.shape[1] for m, x in enumerate(xs)}

    def top_up(m: int) -> None:
        """Dispatch more of master ``m``'s coded rows until ``L_m`` are received or in flight
        (:func:`~elastic_coded.schemes.policies.rules.top_up`), then fresh rows."""
        inflight = {t.rows[0] + i for _, c, _ in g.pending.values() for t in c.tasks
                    if t.piece == m for i in range(t.num_rows)}
        have = col.have(m) | inflight
        busy = {mm for mm, _, _ in g.pending.values()}
        usable = [n for n in cl._handles if n not in dead]
        asks, short, order = rules.top_up(plan.storage, m, have, busy, usable)
        for n, rows in asks:
            _send_rows(n, m, rows, have)
        if short > 0:  # every live holder is used: fresh coded rows on the best machine
            got = cl._ctrl("hetero_rescue", m, short, sorted(have), order)
            cl._handles[got.machine] = got.handle
            _send_rows(got.machine, m, got.ranges, have)

    def _send_rows(n, m: int, rows, have: set) -> int:
        tasks = tuple(TaskSpec(het.source_name(m), r, m, None, m, r[0]) for r in rows)
        count = sum(b - a for a, b in rows)
        pace = rules.paced(rules.top_up_time(plan.storage, m, n, count), ts) if ts > 0 else None
        g.dispatch(n, None, Call(step, tasks, total, pace_s=pace))
        rescued.add(m)
        have |= {i for a, b in rows for i in range(a, b)}
        return count

    def on_lost(machine, call):
        dead.add(machine)
        cl._ctrl("mark_dead", [machine])
        for m in sorted({t.piece for t in call.tasks if col.needs(t)}):
            top_up(m)
        return []

    g.on_lost = on_lost
    for n, m in plan.serve.items():
        slow = float(ev.slow.get(n, 1.0))
        pace = rules.paced(plan.pace[n], ts, slow) if ts > 0 else None
        g.dispatch(n, None, Call(step, plan.tasks_for(n, m), total, slow, pace,
                                 crash_at=_crash(n, ev)))
    for m in range(len(plan.L)):
        top_up(m)
    g.run()
    td = time.perf_counter()
    Y = [col.decoded[m] for m in range(len(plan.L))]
    extra = {"serve": dict(plan.serve), "t_star": plan.t_star, "rescued": tuple(sorted(rescued)),
             "assignment": plan.storage.assignment.method}
    return Y, Outcome(g, t2 - t1, time.perf_counter() - td, total, col.used_by,
                      tuple(sorted(rescued)), extra, collector=col)


# -- unified coding framework --------------------------------------------------------------------

def run_unified(cl, X: np.ndarray, ev, prep, attempts: int = 3):
    """Unified-framework step (see the module docstring).  When crashes leave fewer than ``q``
    servers able to finish the Map, the storage is re-encoded for the machines left (the
    controller's repair) and the step runs again, without the events already applied."""
    for attempt in range(attempts):
        try:
            Y, out = _unified_once(cl, X, ev, prep)
            out.prep = prep if attempt else None
            return Y, out
        except _TooFewServers as exc:
            if attempt == attempts - 1:
                raise StepFailed(f"step {cl._step}: {exc}; re-encoding did not help") from None
            cl._ctrl("mark_dead", list(exc.dead))
            ev = type(ev)(slow=ev.slow)
            prep, _ = cl._prepare(cl.policy, X.shape[1])
    raise AssertionError("unreachable")  # pragma: no cover


class _TooFewServers(StepFailed):
    def __init__(self, msg: str, dead):
        super().__init__(msg)
        self.dead = tuple(dead)


def _unified_once(cl, X: np.ndarray, ev, prep):
    st: uni.UnifiedStorage = prep.plan
    d = st.design
    step, ts, N = cl._step, cl.time_scale, X.shape[1]
    t1 = time.perf_counter()
    refs = [ray.put(X)]
    t2 = time.perf_counter()
    total = d.m * N
    lat = uni.map_latencies(st, N, np.random.default_rng([cl.seed, step]))
    col = QuorumCollector(d.q)
    g = Gather(refs, cl._handles, col, lambda m, c: [])
    g.cols_of = {0: N}
    server_of = {mach: k for k, mach in enumerate(st.servers)}
    for k in st.live(cl._handles):
        mach = st.servers[k]
        slow = float(ev.slow.get(mach, 1.0))
        pace = rules.paced(lat[k], ts, slow, prep.emulated.get(mach, 1.0)) if ts > 0 else None
        g.dispatch(mach, None, Call(step, uni.map_tasks(st, k), total, slow, pace,
                                    _crash(mach, ev), keep=True))
    try:
        g.run()
    except RuntimeError:
        raise _TooFewServers(f"{len(col.finished)} servers finished the Map, fewer than "
                             f"q = {d.q}", g.failed) from None
    t_map = time.perf_counter()
    Q = tuple(sorted(server_of[o.machine] for o in col.finished[:d.q]))
    plan = cl._shuffle_plan(st, Q, N)
    design_ref, plan_ref = cl._design_ref(st), ray.put(plan)
    h = {k: cl._handles[st.servers[k]] for k in Q}
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
    Y = cl.F.zeros((d.m, N))
    for outs, vals in ray.get([h[k].reduce.remote(step, design_ref, plan_ref, k) for k in Q]):
        Y[:, list(outs)] = vals
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


def shuffle_for(st: uni.UnifiedStorage, Q: tuple, N: int):
    plan = shuffle_plan(st.design, Q, N)
    check_shuffle_plan(st.design, plan)
    return plan

