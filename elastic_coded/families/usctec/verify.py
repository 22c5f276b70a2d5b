"""The USCTEC family's checks (:mod:`.verifying` describes the check, the repair and the
bound): the product against the sketch of ``A``; a wrong one repaired piece by piece from
results that check (:class:`~.repair.LagrangeRepair`); a product whose estimated error
exceeds the tolerance decoded again, worst pieces first, from better-conditioned results."""

from __future__ import annotations

import numpy as np

from ...algebra.lagrange import rounding_bound
from ...algebra.scaling import norm
from ...algebra.verify import check, check_piece
from ...runtime.context import StepContext
from ...runtime.verify_common import StepState, fail, padded, relative
from ...schemes.reference import assemble
from .verify_repair import LagrangeRepair

__all__ = ["LagrangeChecks"]


class LagrangeChecks:
    """:class:`~.verify_common.FamilyChecks` of the USCTEC family, over a verifier's sketch,
    norms and tolerance."""

    hint = "a smaller L + S"

    def __init__(self, ver):
        self.ver = ver

    def check(self, ctx: StepContext, X, Y, out, prep, state: StepState) -> tuple:
        col = out.collector
        Y = self._verify(ctx, X, Y, col, out, state)
        return Y, self.bound(X, col, state, Y)

    def _verify(self, ctx, X, Y, col, out, state):
        ver = self.ver
        if not ver.on:
            return Y
        sk, code, plan = ver.sketches[0], col.code, col.plan
        state.checked = True
        kappa = 1.0 if ver.F.exact else self.kappa(col, state)
        res = state.accepted[0] = check(sk, X, Y, condition=kappa, extra_terms=code.extra_terms)
        if res:
            return Y
        Bp = padded(ver.F, X, plan.L * code.width)
        c = Bp.shape[1] // plan.L
        bad = [pi for pi, piece, grp in plan.iter_pieces()
               if not check_piece(sk, code, Bp, col.decoded[pi], grp.rows, piece.cols,
                                  positions=self.positions(col, state, pi))]
        if not bad:  # the pieces check but their sum does not: nothing to repair from
            fail(ctx.step, state, "the product failed verification though every piece checks")
        LagrangeRepair(sk, ctx, col, out, Bp, state).run(bad)
        Y = assemble(plan, col.decoded, c, ver.F.dtype)[:, :X.shape[1]]
        kappa = 1.0 if ver.F.exact else self.kappa(col, state)
        state.accepted[0] = check(sk, X, Y, condition=kappa, extra_terms=code.extra_terms)
        if not state.accepted[0]:
            fail(ctx.step, state, "the repaired product failed verification")
        return Y

    def improve(self, ctx: StepContext, X, Y, out, state: StepState) -> tuple | None:
        """The product with its worst pieces decoded again from better-conditioned results
        (those in hand, late ones included, then positions computed again): the pieces with
        the largest estimated errors, until the others' would meet the tolerance."""
        col, ver = out.collector, self.ver
        sk, code, plan = ver.sketches[0], col.code, col.plan
        Bp = padded(ver.F, X, plan.L * code.width)
        c = Bp.shape[1] // plan.L
        est = {pi: check_piece(sk, code, Bp, col.decoded[pi], grp.rows, piece.cols,
                               positions=self.positions(col, state, pi)).estimated_error()
               for pi, piece, grp in plan.iter_pieces()}
        budget = (0.5 * ver.tolerance * norm(Y)) ** 2
        left = sum(e * e for e in est.values())
        worst = []
        for pi in sorted(est, key=lambda p: est[p], reverse=True):
            if left <= budget:
                break
            worst.append(pi)
            left -= est[pi] ** 2
        LagrangeRepair(sk, ctx, col, out, Bp, state).improve(worst, self.positions)
        Y = assemble(plan, col.decoded, c, ver.F.dtype)[:, :X.shape[1]]
        state.accepted[0] = check(sk, X, Y, condition=self.kappa(col, state),
                                  extra_terms=code.extra_terms)
        if not state.accepted[0]:
            fail(ctx.step, state, "the product decoded again for its conditioning failed "
                                  "verification")
        return Y, self.bound(X, col, state, Y)

    @staticmethod
    def positions(col, state, pi) -> tuple:
        return (state.positions.get(pi) or getattr(col, "positions", {}).get(pi)
                or tuple(list(col.results[pi])[:col.code.L]))

    def kappa(self, col, state) -> float:
        n = len(col.plan.pieces)
        pos = getattr(col, "positions", {})
        if not state.positions and len(pos) == n:  # every piece's decode, as the collector made it
            pats = set(pos.values())
        else:
            pats = {self.positions(col, state, pi) for pi in range(n)}
        return max(col.code.decode_condition(P) for P in pats)

    def bound(self, X, col, state, Y) -> tuple:
        if self.ver.F.exact:
            return None, 0.0, 0.0
        kappa = self.kappa(col, state)
        b = rounding_bound(X.shape[0] + col.code.extra_terms, kappa, self.ver.norms[0],
                           float(np.linalg.norm(X)))
        return kappa, b, relative(b, Y)
