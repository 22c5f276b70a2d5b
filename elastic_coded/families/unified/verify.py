"""Verified steps of the unified coding framework (MATH.md §2): the product checked with the
condition of the Reduce's decodes, and repaired from Map results that check.

**Condition** (real field).  Server ``k`` of the fastest ``Q`` decodes each of its outputs by
solving ``G[rows] y = v`` for the ``m`` coded rows of its Reduce
(:func:`~elastic_coded.families.unified.reduce_groups`, known from the Shuffle plan).  The real
storage code is a lane code (``families/unified/_lanes.py``): that solve is one small solve per
lane (position of a batch), each lane's values computed from its own rows of ``A`` only, so
each lane's error is bounded by its own :func:`~elastic_coded.algebra.lagrange.solve_condition`
times its rows' share of ``||A||_F ||X||_F``, and the largest of them bounds the whole
(:func:`~elastic_coded.families.unified.decode_condition`).  The step's ``condition`` is the
largest over its row sets (cached per storage version, fastest servers and width: the same
fastest servers give the same sets), and its bound ``1.01 gamma_{n + 10 d} kappa ||A||_F
||X||_F``, as for the other schemes, with ``d`` the size of the largest solve
(``StorageDesign.decode_size``: a lane's data rows; each coded row sums ``d`` terms, each lane
solve is ``d x d``); exact up to lanes of 64 data rows, an estimate above.

**Repair.**  A product that fails the check cannot tell which server lied (a wrong Map value
reaches every server it is sent to).  So every server of ``Q`` hands over the Map result it
kept (:meth:`~.worker.Machine.map_result`), and each is checked against a sketch of the coded
storage ``G [A; 0]`` (row runs of the server's batches, a plain product's tolerance): a server
whose values fail is caught.  The product is decoded at the driver from ``m`` coded rows that
check (:func:`~elastic_coded.families.unified.decoding_rows`: the systematic rows, ``A``'s own,
first; over the reals lane-balanced); when the rows of the servers of ``Q`` that check do not
decode, other servers not caught compute their Map again.  Rows that check and still do not
decode raise :class:`~.verifying.VerificationError`: never a wrong product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import ray

from ...algebra.lagrange import rounding_bound
from ...algebra.verify import check, make_sketch
from ...runtime.context import StepContext
from ...runtime.verify_common import StepState, fail, relative
from ...schemes.wire import Call
from .. import unified as uni
from . import policy as upol

__all__ = ["UnifiedRun", "UnifiedChecks"]

_CACHE = 4096  # steps' conditions kept (storage version, fastest servers, width)


@dataclass(frozen=True)
class UnifiedRun:
    """What a unified step ran: the storage in force, the Shuffle plan and the fastest ``Q``."""

    storage: upol.UnifiedStorage
    plan: uni.ShufflePlan
    fastest: tuple


class UnifiedChecks:
    """The driver's state for verifying unified steps: the steps' conditions, and a sketch of
    the coded storage per storage version (drawn like the sketch of ``A``)."""

    hint = "a smaller q or K (its real decodes are lanes of q C(K, r) / K rows)"

    def __init__(self, ver):
        self.ver = ver
        self._worst: dict = {}  # (version, fastest, N) -> the step's condition
        self._coded: dict = {}  # version -> sketch of G [A; 0]

    def condition(self, run: UnifiedRun) -> float:
        """The largest solve condition of the step's Reduce decodes (module docstring); kept
        per storage version, fastest set and width, as the Shuffle plan is."""
        key = (run.storage.version, run.fastest, run.plan.N)
        if key not in self._worst:
            if len(self._worst) >= _CACHE:
                self._worst.clear()
            self._worst[key] = self._condition(run)
        return self._worst[key]

    @staticmethod
    def _condition(run: UnifiedRun) -> float:
        d = run.storage.design
        return max([1.0] + [uni.decode_condition(d, rows)
                            for k in run.fastest for rows in uni.reduce_groups(d, run.plan, k)])

    def bound(self, X, Y, kappa: float, run: UnifiedRun) -> tuple:
        """``(condition, error bound, relative bound)``: the honest error the check allows for
        (its ``err_Y``, with :meth:`terms`)."""
        b = rounding_bound(X.shape[0] + self.terms(run.storage.design), kappa,
                           self.ver.norms[0], float(np.linalg.norm(X)))
        return kappa, b, relative(b, Y)

    @staticmethod
    def terms(design) -> int:
        """The rounding terms of a decode beyond the Map's ``n``: ``10 d``, ``d`` the size of
        its largest solve (``decode_size``), as ``10 L`` for a Lagrange piece."""
        return 10 * design.decode_size

    def check(self, ctx: StepContext, X, Y, out, prep, state: StepState) -> tuple:
        """:class:`~.verify_common.FamilyChecks`: the product checked (or repaired) when
        verification is on, with its bound from the Reduce's condition."""
        run, F = out.collector, self.ver.F
        if self.ver.on:
            Y, kappa = self.verify(ctx, X, Y, run, state)
        else:
            kappa = 1.0 if F.exact else self.condition(run)
        return Y, ((None, 0.0, 0.0) if F.exact else self.bound(X, Y, kappa, run))

    def improve(self, ctx, X, Y, out, state) -> None:
        return None

    def verify(self, ctx: StepContext, X, Y, run: UnifiedRun, state) -> tuple:
        """``(Y, kappa)``: the product checked, or repaired (module docstring)."""
        ver, F = self.ver, self.ver.F
        kappa = 1.0 if F.exact else self.condition(run)
        terms = self.terms(run.storage.design)
        state.checked = True
        state.accepted[0] = check(ver.sketches[0], X, Y, condition=kappa, extra_terms=terms)
        if state.accepted[0]:
            return Y, kappa
        Y2, kappa2 = self._repair(ctx, X, run, state)
        state.accepted[0] = check(ver.sketches[0], X, Y2, condition=kappa2, extra_terms=terms)
        if not state.accepted[0]:
            fail(ctx.step, state, "the repaired product failed verification")
        state.repaired.update(self._wrong_outputs(X, Y, run, kappa))
        return Y2, kappa2

    def _repair(self, ctx: StepContext, X, run: UnifiedRun, state) -> tuple:
        st, d = run.storage, run.storage.design
        sk = self._coded_sketch(st)
        good: dict = {}  # coded row -> value row
        xref = None
        for k in run.fastest:
            self._screen(sk, X, st, k, self._kept(ctx, st, k), good, state)
        others = [k for k in range(len(st.servers)) if k not in run.fastest]
        for k in others:
            if uni.decoding_rows(d, good) is not None:
                break
            mach = st.servers[k]
            if mach not in ctx.handles or mach in state.caught:
                continue
            xref = xref if xref is not None else ray.put(X)
            self._screen(sk, X, st, k, self._map_again(ctx, st, k, xref, state), good, state)
        rows = uni.decoding_rows(d, good)  # the systematic rows first
        if rows is None:
            fail(ctx.step, state, f"the product failed verification and the {len(good)} "
                                  f"coded rows that check do not decode (m = {d.m})")
        V = np.stack([good[r] for r in rows])
        Y = uni.reduce_outputs(d, rows, V)[:st.m]
        return Y, uni.decode_condition(d, rows)

    def _coded_sketch(self, st):
        if st.version not in self._coded:
            C = upol.coded_matrix(st, np.asarray(self.ver.mats[0]))
            self._coded = {st.version: make_sketch(self.ver.F, C, seed=self.ver.seed)}
        return self._coded[st.version]

    @staticmethod
    def _kept(ctx: StepContext, st, k):
        try:
            return ray.get(ctx.handles[st.servers[k]].map_result.remote(ctx.step))
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError, KeyError):
            return None  # gone, or it kept nothing: not a result

    @staticmethod
    def _map_again(ctx: StepContext, st, k, xref, state):
        tasks = upol.map_tasks(st, k)
        call = Call(ctx.step, tasks, 1, pace_s=0.0)
        try:
            res = ray.get(ctx.handles[st.servers[k]].compute.remote(call, xref))
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError):
            return None
        state.recomputed += 1
        return np.concatenate([np.asarray(H) for H in res.results], axis=0)

    @staticmethod
    def _screen(sk, X, st, k, M, good: dict, state) -> None:
        """File server ``k``'s Map result ``M`` (its coded rows, increasing) as good rows, or
        catch the server."""
        if M is None:
            return
        mach, M, at, ok = st.servers[k], np.asarray(M), 0, True
        ranges = st.ranges_of(k)
        if M.shape != (sum(b - a for a, b in ranges), X.shape[1]):
            ok = False
        else:
            for a, b in ranges:
                ok = ok and bool(check(sk, X, M[at:at + b - a], (a, b)))
                at += b - a
        if not ok:
            state.caught.add(mach)
            return
        at = 0
        for a, b in ranges:
            for i in range(a, b):
                good.setdefault(i, M[at + i - a])
            at += b - a

    def _wrong_outputs(self, X, Y, run: UnifiedRun, kappa: float) -> list:
        """The outputs (columns) of the failed product that fail on their own."""
        sk, terms = self.ver.sketches[0], self.terms(run.storage.design)
        return [j for j in range(X.shape[1])
                if not check(sk, X[:, j:j + 1], Y[:, j:j + 1], condition=kappa,
                             extra_terms=terms)]
