"""The heterogeneous masters' checks (:mod:`.verifying` describes the check and the bound):
each master's product against the sketch of its matrix; a wrong master decoded again from the
coded rows that check (each run of rows against a sketch of the master's coded matrix), fetched
from machines not caught, and fresh coded rows when those run short."""

from __future__ import annotations

import math

import numpy as np
import ray

from ...algebra.lagrange import rounding_bound
from ...algebra.verify import check, make_sketch
from ...runtime.context import StepContext
from ...runtime.verify_common import StepState, fail, relative, runs
from ...schemes.policies.collect import decode_mds
from ...schemes.wire import Call, TaskSpec
from . import policy as het

__all__ = ["HeteroChecks"]


class HeteroChecks:
    """:class:`~.verify_common.FamilyChecks` of the heterogeneous masters."""

    hint = "a smaller code"

    def __init__(self, ver):
        self.ver = ver
        self._coded_sketches: dict = {}  # master -> sketch of its coded rows (lazy)

    def check(self, ctx: StepContext, xs, Y, out, prep, state: StepState) -> tuple:
        col, ver = out.collector, self.ver
        if ver.on:
            state.checked = True
            plan = (out.prep or prep).plan
            for m, (x, y) in enumerate(zip(xs, Y)):
                code = ctx.codes[m]
                kappa = 1.0 if ver.F.exact else mds_kappa(code, col.used_rows[m])
                state.accepted[m] = check(ver.sketches[m], x, y, condition=kappa,
                                          extra_terms=10 * code.k)
                if not state.accepted[m]:
                    Y[m] = self._repair(ctx, m, x, col, state, plan)
        return Y, self.bound(ctx, xs, Y, col)

    def improve(self, ctx, X, Y, out, state) -> None:
        return None

    def _repair(self, ctx: StepContext, m: int, x, col, state, plan):
        """Master ``m`` decoded again from coded rows that check: those received, then rows
        fetched from machines not caught (each run checked against a sketch of ``G_m A_m``)."""
        ver, code = self.ver, ctx.codes[m]
        if m not in self._coded_sketches:
            self._coded_sketches[m] = make_sketch(ver.F, code.encode(ver.mats[m]), seed=ver.seed)
        sk = self._coded_sketches[m]
        good: dict = {}
        bad: set = set()
        by_machine: dict = {}
        for i in sorted(col.rows[m]):
            by_machine.setdefault(col.rows[m][i][0], []).append(i)
        for mach, idx in by_machine.items():
            _screen_rows(sk, x, mach, {i: col.rows[m][i][1] for i in idx}, good, bad, state)
        asked: set = set()
        xref, rescues = None, 0
        while len(good) < code.k:
            usable = [n for n in ctx.handles if n not in state.caught]
            exclude = good.keys() | bad | asked
            asks = het.row_asks(plan.storage, m, code.k - len(good), exclude, usable)
            if not asks and usable and rescues < 2:  # fresh coded rows on a machine not caught
                rescues += 1
                got = ctx.ctrl.hetero_rescue(m, code.k - len(good), exclude,
                                             sorted(usable, key=str))
                asks = [(got.machine, got.ranges)]
            if not asks:
                break
            xref = xref if xref is not None else ray.put(x)
            for mach, ranges in asks:
                asked |= {i for a, b in ranges for i in range(a, b)}
                got = _fetch_rows(ctx, mach, m, ranges, xref, state)
                _screen_rows(sk, x, mach, got, good, bad, state)
        if len(good) < code.k:
            fail(ctx.step, state, f"master {m}'s product failed verification and only "
                                  f"{len(good)} of the {code.k} coded rows it needs check")
        y, col.used_by[m], col.used_rows[m] = decode_mds(code, good, rows=True)
        kappa = 1.0 if ver.F.exact else mds_kappa(code, col.used_rows[m])
        state.accepted[m] = check(ver.sketches[m], x, y, condition=kappa, extra_terms=10 * code.k)
        if not state.accepted[m]:
            fail(ctx.step, state, f"master {m}'s repaired product failed verification")
        state.repaired.add(m)
        return y

    def bound(self, ctx: StepContext, xs, Y, col) -> tuple:
        if self.ver.F.exact:
            return None, 0.0, 0.0
        kappas, sq, rel = [], 0.0, 0.0
        for m, (x, y) in enumerate(zip(xs, Y)):
            code = ctx.codes[m]
            kap = mds_kappa(code, col.used_rows[m])
            b = rounding_bound(x.shape[0] + 10 * code.k, kap, self.ver.norms[m],
                               float(np.linalg.norm(x)))
            kappas.append(kap)
            sq += b * b
            rel = max(rel, relative(b, y))
        return max(kappas), math.sqrt(sq), rel


def mds_kappa(code, rows) -> float:
    """The Skeel condition of the coded rows decoded from, times ``k`` for the solve (an
    estimate, not a proof)."""
    G = np.asarray(code.generator)[list(rows)]
    skeel = float(np.linalg.norm(np.abs(np.linalg.inv(G)) @ np.abs(G), 2))
    return max(1.0, skeel * code.k)


def _screen_rows(sk, x, mach, got: dict, good: dict, bad: set, state) -> None:
    """File ``got = {coded row: value row}`` from ``mach`` as good, or catch ``mach``."""
    if not got:
        return
    idx = sorted(got)
    if all(check(sk, x, np.stack([got[i] for i in run]), (run[0], run[-1] + 1))
           for run in runs(idx)):
        good.update({i: (mach, got[i]) for i in idx})
    else:
        bad.update(idx)
        state.caught.add(mach)


def _fetch_rows(ctx: StepContext, mach, m: int, ranges, xref, state) -> dict:
    """``{coded row: value row}`` of master ``m``'s ``ranges`` computed on ``mach`` (empty if
    it died)."""
    tasks = tuple(TaskSpec(het.source_name(m), r, 0, None, m, r[0]) for r in ranges)
    try:
        res = ray.get(ctx.handles[mach].compute.remote(Call(ctx.step, tasks, 1, pace_s=0.0),
                                                       xref))
    except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError):
        return {}
    state.recomputed += len(tasks)
    return {a + i: row for (a, _), H in zip(ranges, res.results) for i, row in
            enumerate(np.asarray(H))}
