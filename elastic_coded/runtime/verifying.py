"""Verified steps: every product is checked against a sketch of ``A`` before it is returned, a
wrong one is repaired from results that check, and every real-field step carries an error bound.

**The check.**  The driver keeps a Freivalds sketch ``U A`` of each source
(:func:`~elastic_coded.algebra.verify.make_sketch`, drawn once from fresh entropy, so no machine
can know ``U``; hetero: one per master) and checks the step's product ``Y`` by comparing
``U Y`` with ``(U A) B``: ``t (m r + n r)`` multiply-adds, never a product with ``A``.  Over a
finite field the comparison is exact and a wrong ``Y`` passes with probability at most
``q^-t <= 1e-9``.  In the reals it accepts within a tolerance derived from the decode's
conditioning, which an honest ``Y`` always meets (``algebra/verify.py``).

**Repair** (USCTEC family).  When the product fails, each piece is checked; for a wrong piece
every result the step holds (the ``L`` decoded from and any that arrived later) is checked on its
own, against the coded input it was computed from (``rows`` of the sketch, a plain product's
tolerance), which names the machines that lied, however many.  The piece is decoded again from
``L`` results that check; when fewer than ``L`` are at hand, the missing positions are computed
again, first by the machines the plan gave them to, then by other machines storing the piece's
rows that were not caught, and checked in turn.  A piece that still lacks ``L`` good results
raises :class:`VerificationError` (naming the machines caught): never a wrong or partial product.
Heterogeneous masters repair a wrong master from the coded rows that check (each against a
sketch of the master's coded matrix).  The unified scheme repairs from the Map results its
fastest servers kept, each checked against a sketch of the coded storage (:mod:`.verify_unified`).

**Exclusion.**  A machine caught in ``exclude_after`` steps (default
:data:`~elastic_coded.churn.CAUGHT_LIMIT`, 2) is removed after the step (as a graceful departure:
its rows are stored elsewhere at the next step).

**Error bound** (real field).  ``condition``: the largest decode condition ``kappa(P)`` over the
step's pieces (``lagrange.py``); ``error_bound = 1.01 gamma_{n + 10 L} kappa ||A||_F ||B||_F``
bounds ``||Y - A B||_F`` (the pieces tile the product, so the per-piece bounds add up in squares
to it); ``relative_error_bound`` divides it by ``||Y||_F``.  Heterogeneous masters: the same
form with the Skeel condition of the coded rows decoded from, times ``k`` for the solve (an
estimate, not a proof); unified: the same form with the largest solve condition of the
Reduce's decodes (:mod:`.verify_unified`; an estimate above ``m = 64``).  Above a
``tolerance`` it warns, or raises :class:`ToleranceExceeded` with ``strict=True``.

**Verified bound** (real field).  ``error_bound`` assumes every result was computed honestly.  A
lie smaller than the check can see passes it (an honest product must always pass, so the check
allows for the worst honest error in every direction), and may exceed ``error_bound``.
``verified_error_bound`` holds whatever the machines did: the residual of the check that accepted
the product bounds ``||U E||``, and so ``||E||`` (:meth:`~elastic_coded.algebra.verify.CheckResult.accepted_error`,
failing with probability about ``1e-13``); it is at least ``error_bound`` and, from the
check's own rounding, typically 100-3000x above it.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import ray

from ..algebra.lagrange import UNIT_ROUNDOFF, rounding_bound
from ..algebra.scaling import norm
from ..algebra.verify import DEFAULT_TOLERANCE, check, check_piece, make_sketch
from ..churn import CAUGHT_LIMIT
from ..errors import ToleranceExceeded, VerificationError
from ..schemes.policies.collect import decode_mds
from ..schemes.reference import assemble
from ..schemes.wire import Call, TaskSpec
from .verify_repair import LagrangeRepair, StepState

__all__ = ["Verifier", "Verdict", "VerificationError", "ToleranceExceeded"]

log = logging.getLogger(__name__)



PATIENCE_MARGIN = 100.0
"""A piece waits for better-conditioned results while its condition exceeds
``tolerance / (PATIENCE_MARGIN u)``: errors run at about ``u kappa``, so this keeps the typical
error 100x inside the tolerance."""


@dataclass(frozen=True)
class Verdict:
    """What verification found in one step (copied into the step report)."""

    verified: bool | None = None
    """``True``: the product was checked (and repaired if needed); ``None``: not checked."""
    caught: tuple = ()
    """Machines whose results were found wrong."""
    repaired: tuple = ()
    """Outputs (pieces; hetero: masters) decoded again from results that check."""
    recomputed: int = 0
    """Results computed again to repair them."""
    excluded: tuple = ()
    """Machines removed after the step for being caught in ``CAUGHT_LIMIT`` steps."""
    condition: float | None = None
    error_bound: float | None = None
    relative_error_bound: float | None = None
    t_verify: float = 0.0
    verified_error_bound: float | None = None
    """Real field: a bound on ``||Y - A B||_F`` whatever the machines did, from the accepting
    check's residual (:meth:`~elastic_coded.algebra.verify.CheckResult.accepted_error`; fails
    with probability about ``1e-13``), at least ``error_bound``."""
    relative_verified_error_bound: float | None = None
    estimated_error: float | None = None
    """Real field, verified: the accepting checks' estimate of ``||Y - A B||_F`` itself."""
    relative_estimated_error: float | None = None
    improved: tuple = ()
    """Pieces decoded again from better-conditioned results to meet the tolerance."""

    def fields(self) -> dict:
        return {"verified": self.verified, "caught": self.caught, "repaired": self.repaired,
                "recomputed": self.recomputed, "excluded": self.excluded,
                "condition": self.condition, "error_bound": self.error_bound,
                "relative_error_bound": self.relative_error_bound, "t_verify": self.t_verify,
                "verified_error_bound": self.verified_error_bound,
                "relative_verified_error_bound": self.relative_verified_error_bound,
                "estimated_error": self.estimated_error,
                "relative_estimated_error": self.relative_estimated_error,
                "improved": self.improved}


def _tolerance(tolerance, strict) -> float | None:
    if tolerance is not None and (isinstance(tolerance, bool) or
                                  not isinstance(tolerance, (int, float)) or not tolerance > 0):
        raise ValueError(f"tolerance: a relative error bound > 0 or None, got {tolerance!r}")
    if not isinstance(strict, bool):
        raise ValueError(f"strict: True or False, got {strict!r}")
    if strict and tolerance is None:
        raise ValueError("strict: True needs a tolerance (the relative error bound not to exceed)")
    return None if tolerance is None else float(tolerance)


class Verifier:
    """The driver's verification state: sketches, catches per machine, the last verdict.

    ``data``: what :meth:`ElasticCluster._load` returned (an array, ``("npy", path)`` or, for
    hetero, the masters' matrices); ``seed`` (tests only) fixes the sketches."""

    def __init__(self, F, family: str, data, *, verify: bool = True, strict: bool = False,
                 tolerance: float | None = DEFAULT_TOLERANCE,
                 exclude_after: int | None = CAUGHT_LIMIT, seed=None):
        if not isinstance(verify, bool):
            raise ValueError(f"verify: True or False, got {verify!r}")
        if exclude_after is not None and (isinstance(exclude_after, bool) or
                                          not isinstance(exclude_after, int) or exclude_after < 1):
            raise ValueError(f"exclude_after: an int >= 1 (steps a machine may be caught "
                             f"lying in before it is removed) or None, got {exclude_after!r}")
        self.limit = exclude_after if exclude_after is not None else math.inf
        self.tolerance = _tolerance(tolerance, strict)
        self.F, self.family, self.on, self.strict = F, family, verify, strict
        mats = list(data) if family == "hetero" else [_matrix(data)]
        self.mats = mats
        self.norms = [0.0 if F.exact else norm(a) for a in mats]  # in range however large
        self.seed = seed  # None: fresh entropy, so that no machine can know the sketch
        self.sketches = [make_sketch(F, a, seed=seed) for a in mats] if verify else None
        self._coded_sketches: dict = {}  # hetero: master -> sketch of its coded rows (lazy)
        self._unified = None  # unified: its checks (:mod:`.verify_unified`, lazy)
        self.counts: dict[str, int] = {}
        self._armed: set = set()  # machines told to lie in the current step
        self.last = Verdict()

    @property
    def patience(self) -> float | None:
        """The condition above which a piece waits for better results (``None``: never)."""
        if self.F.exact or self.tolerance is None or not self.on:
            return None
        return self.tolerance / (PATIENCE_MARGIN * UNIT_ROUNDOFF)

    # -- before a step ---------------------------------------------------------------------------
    def arm(self, cl, ev) -> list:
        """Tell the machines the churn script makes lie in this step (``corrupt`` events).
        Returns the machines found dead on the way (a dead liar has nothing to be told)."""
        liars = {m for m in getattr(ev, "corrupt", ()) if m in cl._handles}
        calls = {m: cl._handles[m].lie.remote((cl._step,) if m in liars else ())
                 for m in liars | {m for m in self._armed if m in cl._handles}}
        dead = []
        for m, ref in calls.items():  # a retried step may name other liars than its first did
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:
                dead.append(m)
        self._armed = liars - set(dead)
        return dead

    # -- after a step -----------------------------------------------------------------------------
    def verify(self, cl, X, Y, out, prep=None):
        """The step's product, checked (and repaired, and decoded again from better-conditioned
        results where its estimated error exceeds the tolerance); sets :attr:`last`.  Raises
        :class:`VerificationError` or :class:`ToleranceExceeded` instead of returning a product
        that failed."""
        t0 = time.perf_counter()
        self.last = Verdict()
        col = out.collector
        state = StepState()
        if self.family == "usctec" and col is not None:
            Y = self._lagrange(cl, X, Y, col, out, state)
            bound = self._lagrange_bound(X, Y, col, state)
        elif self.family == "hetero" and col is not None:
            Y = self._hetero(cl, X, Y, col, state, (out.prep or prep).plan)
            bound = self._hetero_bound(X, Y, col, cl)
        elif self.family == "unified" and col is not None:
            from .verify_unified import UnifiedChecks

            if self._unified is None:
                self._unified = UnifiedChecks(self)
            if self.on:
                Y, kappa = self._unified.verify(cl, X, Y, col, state)
            else:
                kappa = 1.0 if self.F.exact else self._unified.condition(col)
            bound = (None, 0.0, 0.0) if self.F.exact else self._unified.bound(X, Y, kappa, col)
        else:
            bound = (None, None, None)
        est = self._estimate(state, Y)
        if self._over(est) and self.family == "usctec" and col is not None:
            Y = self._lagrange_improve(cl, X, Y, col, out, state)
            bound = self._lagrange_bound(X, Y, col, state)
            est = self._estimate(state, Y)
        if self._over(est):
            self._too_far(cl, bound[0], est[1])
        excluded = self._count(state.caught)
        vb = self._accepted_bound(state, bound[1], Y)
        self.last = Verdict(state.checked or None, tuple(sorted(state.caught, key=str)),
                            tuple(sorted(state.repaired)), state.recomputed, excluded, *bound,
                            time.perf_counter() - t0, *vb, *est,
                            tuple(sorted(state.improved)))
        self._tolerance_check(cl)
        return Y

    def _estimate(self, state, Y) -> tuple:
        """``(estimated_error, its relative form)`` from the checks that accepted the outputs
        (``(None, None)`` over finite fields or unverified)."""
        if self.F.exact or not state.accepted:
            return None, None
        est = math.sqrt(sum(c.estimated_error() ** 2 for c in state.accepted.values()))
        ys = Y if isinstance(Y, list) else [Y]
        return est, _relative(est, np.concatenate([np.ravel(y) for y in ys]))

    def _over(self, est) -> bool:
        # NaN (the check's own arithmetic overflowed near float64's limit) says nothing: not over
        return self.tolerance is not None and est[1] is not None and est[1] > self.tolerance

    def _too_far(self, cl, condition, rel: float):
        why = f"decode condition {condition:.3g}" if condition is not None else "its decodes"
        hint = {"unified": "a smaller q or K (its real decodes are lanes of q C(K, r) / K rows)",
                "hetero": "a smaller code"}.get(self.family, "a smaller L + S")
        raise ToleranceExceeded(
            f"step {cl._step}: the estimated relative error {rel:.3g} ({why}) exceeds the "
            f"tolerance {self.tolerance:.3g}, and no better-conditioned results were to be had; "
            f"use a finite field, {hint}, or tolerance=None to accept it", condition, rel)

    def _accepted_bound(self, state, bound, Y) -> tuple:
        """``(verified_error_bound, its relative form)``: the checks that accepted the outputs
        bound their errors whoever computed them (the outputs tile the product: in squares)."""
        if not state.accepted:
            return None, None
        if self.F.exact:
            return 0.0, 0.0
        acc = math.sqrt(sum(c.accepted_error() ** 2 for c in state.accepted.values()))
        vb = max(float(bound), acc)
        ys = Y if isinstance(Y, list) else [Y]
        return vb, _relative(vb, np.concatenate([np.ravel(y) for y in ys]))

    def _fail(self, cl, state, msg: str):
        # not counted: only a step that completes counts its catches (:meth:`exclude`)
        caught = tuple(sorted(state.caught, key=str))
        raise VerificationError(f"step {cl._step}: {msg}" + (
            f"; machines caught returning wrong results: {list(caught)}" if caught else ""),
            caught)

    def _count(self, caught) -> tuple:
        """The machines ``caught`` that this step brings to ``exclude_after`` catches (the
        catches are counted once the step completes, :meth:`exclude`)."""
        return tuple(sorted((m for m in caught if self.counts.get(m, 0) + 1 >= self.limit),
                            key=str))

    def _tolerance_check(self, cl) -> None:
        """``strict=True``: the error bound itself must meet the tolerance."""
        rel = self.last.relative_error_bound
        if not self.strict or rel is None or rel <= self.tolerance:
            return
        why = ("decode condition " + f"{self.last.condition:.3g}"
               if self.last.condition is not None else "estimated from the sketch")
        raise ToleranceExceeded(
            f"step {cl._step}: the relative error bound {rel:.3g} ({why}) exceeds the tolerance "
            f"{self.tolerance:.3g} (strict=True holds the bound to it, not only the estimate)",
            self.last.condition, self.last.relative_estimated_error)

    def exclude(self, cl) -> tuple:
        """Count the completed step's catches, and remove the machines caught in
        ``exclude_after`` steps (after the step's report)."""
        for m in (m for m in self.last.caught if m in cl._handles):  # not those gone since
            self.counts[m] = self.counts.get(m, 0) + 1
        gone = [m for m, k in self.counts.items() if k >= self.limit and m in cl._handles]
        for m in gone:
            log.warning("machine %s was caught returning wrong results in %d steps; removing it",
                        m, self.counts[m])
            cl.remove_machine(m)
            self.counts.pop(m, None)
        return tuple(gone)

    def forget(self, machine) -> None:
        """A machine that ended: no longer told to lie, nor counted (a later machine of the
        same id starts afresh)."""
        self._armed.discard(machine)
        self.counts.pop(machine, None)

    # -- USCTEC family --------------------------------------------------------------------------
    def _lagrange(self, cl, X, Y, col, out, state):
        if not self.on:
            return Y
        sk, code, plan = self.sketches[0], col.code, col.plan
        state.checked = True
        kappa = 1.0 if self.F.exact else self._kappa(col, state)
        res = state.accepted[0] = check(sk, X, Y, condition=kappa, extra_terms=code.extra_terms)
        if res:
            return Y
        Bp = _padded(self.F, X, plan.L * code.width)
        c = Bp.shape[1] // plan.L
        bad = [pi for pi, piece, grp in plan.iter_pieces()
               if not check_piece(sk, code, Bp, col.decoded[pi], grp.rows, piece.cols,
                                  positions=self._positions(col, state, pi))]
        if not bad:  # the pieces check but their sum does not: nothing to repair from
            self._fail(cl, state, "the product failed verification though every piece checks")
        LagrangeRepair(self, cl, col, out, Bp, state).run(bad)
        Y = assemble(plan, col.decoded, c, self.F.dtype)[:, :X.shape[1]]
        kappa = 1.0 if self.F.exact else self._kappa(col, state)
        state.accepted[0] = check(sk, X, Y, condition=kappa, extra_terms=code.extra_terms)
        if not state.accepted[0]:
            self._fail(cl, state, "the repaired product failed verification")
        return Y

    def _lagrange_improve(self, cl, X, Y, col, out, state):
        """The product with its worst pieces decoded again from better-conditioned results
        (those in hand, late ones included, then positions computed again): the pieces with
        the largest estimated errors, until the others' would meet the tolerance."""
        sk, code, plan = self.sketches[0], col.code, col.plan
        Bp = _padded(self.F, X, plan.L * code.width)
        c = Bp.shape[1] // plan.L
        est = {pi: check_piece(sk, code, Bp, col.decoded[pi], grp.rows, piece.cols,
                               positions=self._positions(col, state, pi)).estimated_error()
               for pi, piece, grp in plan.iter_pieces()}
        budget = (0.5 * self.tolerance * norm(Y)) ** 2
        left = sum(e * e for e in est.values())
        worst = []
        for pi in sorted(est, key=est.get, reverse=True):
            if left <= budget:
                break
            worst.append(pi)
            left -= est[pi] ** 2
        LagrangeRepair(self, cl, col, out, Bp, state).improve(worst, self._positions)
        Y = assemble(plan, col.decoded, c, self.F.dtype)[:, :X.shape[1]]
        state.accepted[0] = check(sk, X, Y, condition=self._kappa(col, state),
                                  extra_terms=code.extra_terms)
        if not state.accepted[0]:
            self._fail(cl, state, "the product decoded again for its conditioning failed "
                                  "verification")
        return Y

    @staticmethod
    def _positions(col, state, pi) -> tuple:
        return (state.positions.get(pi) or getattr(col, "positions", {}).get(pi)
                or tuple(list(col.results[pi])[:col.code.L]))

    def _kappa(self, col, state) -> float:
        pats = {self._positions(col, state, pi) for pi in range(len(col.plan.pieces))}
        return max(col.code.decode_condition(P) for P in pats)

    def _lagrange_bound(self, X, Y, col, state) -> tuple:
        if self.F.exact:
            return None, 0.0, 0.0
        kappa = self._kappa(col, state)
        bound = rounding_bound(X.shape[0] + col.code.extra_terms, kappa, self.norms[0],
                               float(np.linalg.norm(X)))
        return kappa, bound, _relative(bound, Y)

    # -- heterogeneous masters -----------------------------------------------------------------
    def _hetero(self, cl, xs, Y, col, state, plan):
        if not self.on:
            return Y
        state.checked = True
        for m, (x, y) in enumerate(zip(xs, Y)):
            kappa = 1.0 if self.F.exact else self._mds_kappa(cl._codes[m], col.used_rows[m])
            k = cl._codes[m].k
            state.accepted[m] = check(self.sketches[m], x, y, condition=kappa,
                                      extra_terms=10 * k)
            if state.accepted[m]:
                continue
            Y[m] = self._hetero_repair(cl, m, x, col, state, plan)
        return Y

    def _hetero_repair(self, cl, m: int, x, col, state, plan):
        """Master ``m`` decoded again from coded rows that check: those received, then rows
        fetched from machines not caught (each run checked against a sketch of ``G_m A_m``)."""
        code = cl._codes[m]
        if m not in self._coded_sketches:
            self._coded_sketches[m] = make_sketch(self.F, code.encode(self.mats[m]),
                                                  seed=self.seed)
        sk = self._coded_sketches[m]
        good, bad = {}, set()
        by_machine: dict = {}
        for i in sorted(col.rows[m]):
            by_machine.setdefault(col.rows[m][i][0], []).append(i)
        for mach, idx in by_machine.items():
            got = {i: col.rows[m][i][1] for i in idx}
            self._screen_rows(sk, x, mach, got, good, bad, state)
        xref, asked, rescues = None, set(), 0
        while len(good) < code.k:
            usable = [n for n in cl._handles if n not in state.caught]
            exclude = good.keys() | bad | asked
            asks = _row_asks(plan.storage, m, code.k - len(good), exclude, usable)
            if not asks and usable and rescues < 2:  # fresh coded rows on a machine not caught
                rescues += 1
                got = cl._ctrl("hetero_rescue", m, code.k - len(good), sorted(exclude),
                               sorted(usable, key=str))
                cl._handles[got.machine] = got.handle
                asks = [(got.machine, got.ranges)]
            if not asks:
                break
            xref = xref if xref is not None else ray.put(x)
            for mach, ranges in asks:
                asked |= {i for a, b in ranges for i in range(a, b)}
                got = _fetch_rows(cl, mach, m, ranges, xref, state)
                self._screen_rows(sk, x, mach, got, good, bad, state)
        if len(good) < code.k:
            self._fail(cl, state, f"master {m}'s product failed verification and only "
                                  f"{len(good)} of the {code.k} coded rows it needs check")
        y, col.used_by[m], col.used_rows[m] = decode_mds(code, good, rows=True)
        kappa = 1.0 if self.F.exact else self._mds_kappa(code, col.used_rows[m])
        state.accepted[m] = check(self.sketches[m], x, y, condition=kappa, extra_terms=10 * code.k)
        if not state.accepted[m]:
            self._fail(cl, state, f"master {m}'s repaired product failed verification")
        state.repaired.add(m)
        return y

    @staticmethod
    def _screen_rows(sk, x, mach, got: dict, good: dict, bad: set, state) -> None:
        """File ``got = {coded row: value row}`` from ``mach`` as good, or catch ``mach``."""
        if not got:
            return
        idx = sorted(got)
        if all(check(sk, x, np.stack([got[i] for i in run]), (run[0], run[-1] + 1))
               for run in _runs(idx)):
            good.update({i: (mach, got[i]) for i in idx})
        else:
            bad.update(idx)
            state.caught.add(mach)

    @staticmethod
    def _mds_kappa(code, rows) -> float:
        G = np.asarray(code.generator)[list(rows)]
        skeel = float(np.linalg.norm(np.abs(np.linalg.inv(G)) @ np.abs(G), 2))
        return max(1.0, skeel * code.k)

    def _hetero_bound(self, xs, Y, col, cl) -> tuple:
        if self.F.exact:
            return None, 0.0, 0.0
        kappas, sq, rel = [], 0.0, 0.0
        for m, (x, y) in enumerate(zip(xs, Y)):
            kap = self._mds_kappa(cl._codes[m], col.used_rows[m])
            b = rounding_bound(x.shape[0] + 10 * cl._codes[m].k, kap, self.norms[m],
                               float(np.linalg.norm(x)))
            kappas.append(kap)
            sq += b * b
            rel = max(rel, _relative(b, y))
        return max(kappas), math.sqrt(sq), rel


def _row_asks(storage, m: int, need: int, exclude: set, usable) -> list:
    """``[(machine, ranges)]``: ``need`` coded rows of master ``m`` not in ``exclude``, from
    the machines ``usable`` storing them (in id order)."""
    from ..schemes.policies import hetero as het

    out = []
    for n in sorted((n for n in usable if n in storage.machines), key=str):
        if need <= 0:
            break
        ranges = het.take_rows(het.ranges_minus(storage.rows_of(m, n), set(exclude)), need)
        if ranges:
            out.append((n, ranges))
            need -= sum(b - a for a, b in ranges)
    return out


def _fetch_rows(cl, mach, m: int, ranges, xref, state) -> dict:
    """``{coded row: value row}`` of master ``m``'s ``ranges`` computed on ``mach`` (empty if
    it died)."""
    from ..schemes.policies import hetero as het

    tasks = tuple(TaskSpec(het.source_name(m), r, 0, None, m, r[0]) for r in ranges)
    try:
        res = ray.get(cl._handles[mach].compute.remote(Call(cl._step, tasks, 1, pace_s=0.0), xref))
    except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError):
        return {}
    state.recomputed += len(tasks)
    return {a + i: row for (a, _), H in zip(ranges, res.results) for i, row in
            enumerate(np.asarray(H))}


def _matrix(data):
    if isinstance(data, tuple) and data and data[0] == "npy":
        return np.load(data[1], mmap_mode="r")
    return data


def _padded(F, X, L: int):
    pad = (-X.shape[1]) % L
    return np.concatenate([X, F.zeros((X.shape[0], pad))], axis=1) if pad else X


def _relative(bound: float, Y) -> float:
    nY = norm(Y)  # without overflow however large (the bound's scale is the same)
    return bound / nY if nY > 0 else (0.0 if bound == 0 else math.inf)


def _runs(idx: list) -> list:
    """Consecutive runs of sorted indices."""
    out: list = []
    for i in idx:
        if out and i == out[-1][-1] + 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out
