"""Repairing a USCTEC-family step's pieces from results that check, and decoding them again
from better-conditioned results (:mod:`.verifying` says when).  Driver-side."""

from __future__ import annotations

import numpy as np
import ray

from ...algebra.verify import check
from ...runtime.context import StepContext
from ...runtime.executors.common import units
from ...runtime.verify_common import StepState, fail
from ...schemes.wire import Call, TaskSpec

__all__ = ["LagrangeRepair"]


class LagrangeRepair:
    """Repair the wrong pieces of one USCTEC step (module docstring)."""

    def __init__(self, sketch, ctx: StepContext, col, out, Bp, state: StepState):
        self.sketch, self.ctx, self.col, self.state = sketch, ctx, col, state
        self.plan, self.code = col.plan, col.code
        self.coded = self.code.encode(Bp)
        self.total = units(ctx, self.plan.num_rows) * Bp.shape[1]
        gone = set(getattr(out.gather, "failed", ())) | set(ctx.crashed)
        self.live = [m for m in ctx.handles if m not in gone]
        self.asked: set = set()  # (piece, position, machine) computed again
        self.refs: dict = {}

    def run(self, bad: list) -> None:
        good = {pi: self._screen(pi) for pi in bad}
        holders, rnd = None, 0
        while True:
            short = [pi for pi in bad if len(good[pi]) < self.code.L]
            if rnd and short and holders is None:
                holders = self._holders()
            asks = [a for pi in short for a in self._asks(pi, good[pi], rnd, holders)]
            if not asks and (rnd or not short):  # nothing left to ask anyone
                break
            for (pi, pos, mach), H in self._compute(asks):
                if self._ok(pi, pos, H):
                    good[pi].setdefault(pos, (mach, H))
                else:
                    self.state.caught.add(mach)
            rnd += 1
        for pi in bad:
            if len(good[pi]) < self.code.L:
                fail(self.ctx.step, self.state,
                     f"piece {pi} failed verification and only {len(good[pi])} of the "
                               f"L = {self.code.L} results it needs check, after computing the "
                               f"others again on every machine storing its rows")
            self._decode(pi, self._best(good[pi]))

    def _holders(self) -> dict:
        """``{piece: machines storing its rows}``: the plan's own (a pull plan keeps them per
        group), else the controller's."""
        by_group = getattr(self.plan, "holders", None)
        if by_group is not None:
            return {pi: tuple(by_group[piece.group]) for pi, piece in enumerate(self.plan.pieces)}
        return self.ctx.ctrl.holders_of(self.plan)

    def _screen(self, pi: int) -> dict:
        """The piece's results that check on their own; their liars are caught."""
        cand = {**self.col.late.get(pi, {}), **self.col.results[pi]}
        good = {}
        for pos, (mach, H) in cand.items():
            if self._ok(pi, pos, H):
                good[pos] = (mach, H)
            else:
                self.state.caught.add(mach)
        return good

    def _ok(self, pi: int, pos: int, H) -> bool:
        piece = self.plan.pieces[pi]
        c0, c1 = piece.cols if piece.cols is not None else (0, self.coded.shape[2])
        rows = self.plan.groups[piece.group].rows
        H = np.asarray(H)
        if H.shape != (rows[1] - rows[0], c1 - c0):
            return False
        return bool(check(self.sketch, self.coded[pos][:, c0:c1], H, rows))

    def _asks(self, pi: int, good: dict, rnd: int, holders) -> list:
        """``[(piece, position, machine)]``: positions still missing, as many as the piece
        needs, each on a live machine not caught and not asked for it before (round 0: the
        machine planned for it; later rounds: the other machines storing the piece's rows)."""
        piece = self.plan.pieces[pi]
        ok = {m for m in self.live if m not in self.state.caught}
        pool = [m for m in (holders or {}).get(pi) or () if m in ok]
        out: list = []
        used: set = set()
        for pos in (p for p in range(self.code.K) if p not in good):
            if len(out) == self.code.L - len(good):
                break
            planned = piece.machines[pos: pos + 1]  # positions past the plan's: backups only
            cands = list(planned) if rnd == 0 else sorted(pool, key=lambda m: (m in used, str(m)))
            m = next((m for m in cands if m in ok and (pi, pos, m) not in self.asked), None)
            if m is not None:
                self.asked.add((pi, pos, m))
                used.add(m)
                out.append((pi, pos, m))
        return out

    def _compute(self, asks: list) -> list:
        calls = []
        for pi, pos, mach in asks:
            piece = self.plan.pieces[pi]
            rows = self.plan.groups[piece.group].rows
            if pos not in self.refs:
                self.refs[pos] = ray.put(self.coded[pos])
            call = Call(self.ctx.step, (TaskSpec("A", rows, 0, piece.cols, pi, pos),), self.total)
            calls.append(((pi, pos, mach), self.ctx.handles[mach].compute.remote(call,
                                                                                 self.refs[pos])))
        out = []
        for key, ref in calls:
            try:
                res = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError):
                continue  # a machine that died, or that does not store the rows: not a result
            self.state.recomputed += 1
            out.append((key, res.results[0]))
        return out

    def _best(self, good: dict) -> dict:
        """The ``L`` of ``good`` to decode from: in the reals the best-conditioned."""
        if self.code.field.exact or len(good) == self.code.L:
            return good
        return {p: good[p] for p in self.code.best_positions(good)[1]}

    def improve(self, pieces: list, positions) -> None:
        """Decode ``pieces`` again from their best-conditioned results that check: those in
        hand, then, where the best ``L`` of all ``K`` positions would be better by more than
        2x, the missing ones of those computed again (planned machine first, then the other
        holders).  ``positions(col, state, pi)``: what a piece decoded from so far."""
        holders = None
        for pi in pieces:
            now = self.code.decode_condition(positions(self.col, self.state, pi))
            good = self._screen(pi)
            if len(good) < self.code.L:
                continue  # liars among them: the product's own check has the last word
            have, use = self.code.best_positions(good)
            best, target = self.code.best_positions(range(self.code.K), start=use)
            missing = [p for p in target if p not in good]
            if missing and have > 2 * best:
                holders = holders if holders is not None else self._holders()
                for (_, pos, mach), H in self._compute(self._asks_for(pi, missing, holders)):
                    if self._ok(pi, pos, H):
                        good.setdefault(pos, (mach, H))
                    else:
                        self.state.caught.add(mach)
                have, use = self.code.best_positions(good, start=use)
            if have < now:
                self._decode(pi, {p: good[p] for p in use}, improved=True)

    def _asks_for(self, pi: int, wanted: list, holders: dict) -> list:
        """``[(piece, position, machine)]`` for the positions ``wanted``: on the machine the
        plan gave each, else on a holder of the piece's rows not caught."""
        piece = self.plan.pieces[pi]
        ok = [m for m in self.live if m not in self.state.caught]
        pool = [m for m in (holders or {}).get(pi) or () if m in ok]
        out = []
        for k, pos in enumerate(wanted):
            planned = piece.machines[pos] if pos < len(piece.machines) else None
            m = planned if planned in ok else (pool[k % len(pool)] if pool else None)
            if m is not None:
                self.asked.add((pi, pos, m))
                out.append((pi, pos, m))
        return out

    def _decode(self, pi: int, good: dict, improved: bool = False) -> None:
        use = dict(list(good.items())[:self.code.L])
        self.col.decoded[pi] = self.code.decode({p: h for p, (_, h) in use.items()})
        self.col.used_by[pi] = tuple(m for m, _ in use.values())
        self.state.positions[pi] = tuple(use)
        (self.state.improved if improved else self.state.repaired).add(pi)
