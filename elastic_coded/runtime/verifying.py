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
fastest servers kept, each checked against a sketch of the coded storage
(:mod:`~elastic_coded.families.unified.verify`).

**Exclusion.**  A machine caught in ``exclude_after`` steps (default
:data:`~elastic_coded.churn.CAUGHT_LIMIT`, 2) is removed after the step (as a graceful departure:
its rows are stored elsewhere at the next step).

**Error bound** (real field).  ``condition``: the largest decode condition ``kappa(P)`` over the
step's pieces (``lagrange.py``); ``error_bound = 1.01 gamma_{n + 10 L} kappa ||A||_F ||B||_F``
bounds ``||Y - A B||_F`` (the pieces tile the product, so the per-piece bounds add up in squares
to it); ``relative_error_bound`` divides it by ``||Y||_F``.  Heterogeneous masters: the same
form with the Skeel condition of the coded rows decoded from, times ``k`` for the solve (an
estimate, not a proof); unified: the same form with the largest solve condition of the
Reduce's decodes (:mod:`~elastic_coded.families.unified.verify`; an estimate above
``m = 64``).  Above a
``tolerance`` it warns, or raises :class:`ToleranceExceeded` with ``strict=True``.

**Verified bound** (real field).  ``error_bound`` assumes every result was computed honestly.  A
lie smaller than the check can see passes it (an honest product must always pass, so the check
allows for the worst honest error in every direction), and may exceed ``error_bound``.
``verified_error_bound`` holds whatever the machines did: the residual of the check that accepted
the product bounds ``||U E||``, and so ``||E||``
(:meth:`~elastic_coded.algebra.verify.CheckResult.accepted_error`, failing with probability about
``1e-13``); it is at least ``error_bound`` and, from the check's own rounding, typically 100-3000x
above it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from typing import cast

import numpy as np
import ray

from ..algebra.lagrange import UNIT_ROUNDOFF
from ..algebra.scaling import norm
from ..algebra.verify import make_sketch
from ..errors import ArgumentError, ArgumentTypeError, ToleranceExceeded, VerificationError
from ..options import VerifyOptions, split_flat
from .context import StepContext
from .family_setup import matrix_of, setup_of
from .verify_common import FamilyChecks, StepState

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
        """Every field by name (the step report has a field of the same name for each)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class Verifier:
    """The driver's verification state: sketches, catches per machine, the last verdict.

    ``data``: what :meth:`ElasticCluster._load` returned (an array, ``("npy", path)`` or, for
    hetero, the list of the masters' matrices); ``seed`` (tests only) fixes the sketches.
    The family's checks (its :attr:`~.family_setup.FamilySetup.checks`) do the checking and
    repairing."""

    def __init__(self, F, family: str, data, options: VerifyOptions | None = None, *,
                 seed=None, **flat):
        if set(flat) - {"verify", "tolerance", "strict", "exclude_after"}:
            raise ArgumentTypeError(f"Verifier: unknown keywords {sorted(flat)}")
        if options is not None and flat:
            raise ArgumentError(f"Verifier: give options or keywords {sorted(flat)}, not both")
        opts = options if options is not None else split_flat({}, flat)[0]["verify"]
        self.options = opts
        self.limit = opts.exclude_after if opts.exclude_after is not None else math.inf
        self.tolerance = None if opts.tolerance is None else float(opts.tolerance)
        self.F, self.family, self.on, self.strict = F, family, opts.on, opts.strict
        setup = setup_of(family)  # an unknown family: an error naming the known ones
        mats = list(data) if isinstance(data, list) else [matrix_of(data)]
        self.mats = mats
        self.norms = [0.0 if F.exact else norm(a) for a in mats]  # in range however large
        self.seed = seed  # None: fresh entropy, so that no machine can know the sketch
        self.sketches = [make_sketch(F, a, seed=seed) for a in mats] if self.on else None
        self.checks: FamilyChecks = setup.make_checks(self)
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
    def arm(self, handles: dict, step: int, ev) -> list:
        """Tell the machines the churn script makes lie in ``step`` (``corrupt`` events).
        Returns the machines found dead on the way (a dead liar has nothing to be told)."""
        liars = {m for m in getattr(ev, "corrupt", ()) if m in handles}
        calls = {m: handles[m].lie.remote((step,) if m in liars else ())
                 for m in liars | {m for m in self._armed if m in handles}}
        dead = []
        for m, ref in calls.items():  # a retried step may name other liars than its first did
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:
                dead.append(m)
        self._armed = liars - set(dead)
        return dead

    # -- after a step -----------------------------------------------------------------------------
    def verify(self, ctx: StepContext, X, Y, out, prep=None):
        """The step's product, checked (and repaired, and decoded again from better-conditioned
        results where its estimated error exceeds the tolerance) by the family's checks; sets
        :attr:`last`.  Raises :class:`VerificationError` or :class:`ToleranceExceeded` instead
        of returning a product that failed."""
        t0 = time.perf_counter()
        self.last = Verdict()
        state = StepState()
        bound: tuple[float | None, float | None, float | None]   # condition, bound, relative
        if out.collector is not None:
            Y, bound = self.checks.check(ctx, X, Y, out, prep, state)
        else:
            bound = (None, None, None)
        nY = _NormOf()  # ||Y||, taken once for the estimate and the bound (a pass over Y)
        est = self._estimate(state, Y, nY)
        if self._over(est) and out.collector is not None:
            better = self.checks.improve(ctx, X, Y, out, state)
            if better is not None:
                Y, bound = better
                nY = _NormOf()
                est = self._estimate(state, Y, nY)
        if self._over(est):   # then est[1] is a number
            self._too_far(ctx.step, bound[0], cast(float, est[1]))
        excluded = self._count(state.caught)
        vb = self._accepted_bound(state, bound[1], Y, nY)
        self.last = Verdict(state.checked or None, tuple(sorted(state.caught, key=str)),
                            tuple(sorted(state.repaired)), state.recomputed, excluded, *bound,
                            time.perf_counter() - t0, *vb, *est,
                            tuple(sorted(state.improved)))
        self._tolerance_check(ctx.step)
        return Y

    def _estimate(self, state, Y, nY: _NormOf) -> tuple[float | None, float | None]:
        """``(estimated_error, its relative form)`` from the checks that accepted the outputs
        (``(None, None)`` over finite fields or unverified)."""
        if self.F.exact or not state.accepted:
            return None, None
        est = math.sqrt(sum(c.estimated_error() ** 2 for c in state.accepted.values()))
        return est, nY.relative(est, Y)

    def _over(self, est) -> bool:
        # NaN (the check's own arithmetic overflowed near float64's limit) says nothing: not over
        return self.tolerance is not None and est[1] is not None and est[1] > self.tolerance

    def _too_far(self, step: int, condition, rel: float):
        why = f"decode condition {condition:.3g}" if condition is not None else "its decodes"
        hint = self.checks.hint
        raise ToleranceExceeded(
            f"step {step}: the estimated relative error {rel:.3g} ({why}) exceeds the "
            f"tolerance {self.tolerance:.3g}, and no better-conditioned results were to be had; "
            f"use a finite field, {hint}, or tolerance=None to accept it", condition, rel)

    def _accepted_bound(self, state, bound, Y, nY: _NormOf) -> tuple[float | None, float | None]:
        """``(verified_error_bound, its relative form)``: the checks that accepted the outputs
        bound their errors whoever computed them (the outputs tile the product: in squares)."""
        if not state.accepted:
            return None, None
        if self.F.exact:
            return 0.0, 0.0
        acc = math.sqrt(sum(c.accepted_error() ** 2 for c in state.accepted.values()))
        vb = max(float(bound), acc)
        return vb, nY.relative(vb, Y)

    def _count(self, caught) -> tuple:
        """The machines ``caught`` that this step brings to ``exclude_after`` catches (the
        catches are counted once the step completes, :meth:`exclude`)."""
        return tuple(sorted((m for m in caught if self.counts.get(m, 0) + 1 >= self.limit),
                            key=str))

    def _tolerance_check(self, step: int) -> None:
        """``strict=True``: the error bound itself must meet the tolerance."""
        rel = self.last.relative_error_bound
        # strict needs a tolerance (VerifyOptions checks it)
        if not self.strict or rel is None or rel <= cast(float, self.tolerance):
            return
        why = ("decode condition " + f"{self.last.condition:.3g}"
               if self.last.condition is not None else "estimated from the sketch")
        raise ToleranceExceeded(
            f"step {step}: the relative error bound {rel:.3g} ({why}) exceeds the tolerance "
            f"{self.tolerance:.3g} (strict=True holds the bound to it, not only the estimate)",
            self.last.condition, self.last.relative_estimated_error)

    def exclude(self, present) -> tuple:
        """Count the completed step's catches; the machines of ``present`` caught in
        ``exclude_after`` steps, for the driver to remove (after the step's report)."""
        for m in (m for m in self.last.caught if m in present):  # not those gone since
            self.counts[m] = self.counts.get(m, 0) + 1
        gone = [m for m, k in self.counts.items() if k >= self.limit and m in present]
        for m in gone:
            log.warning("machine %s was caught returning wrong results in %d steps; removing it",
                        m, self.counts[m])
            self.counts.pop(m, None)
        return tuple(gone)

    def forget(self, machine) -> None:
        """A machine that ended: no longer told to lie, nor counted (a later machine of the
        same id starts afresh)."""
        self._armed.discard(machine)
        self.counts.pop(machine, None)


class _NormOf:
    """``relative(bound, Y)`` for one product ``Y`` (an array, or hetero's list of them), its
    norm taken on first use and kept: the estimate and the accepted bound both divide by it."""

    def __init__(self):
        self.flat = None

    def relative(self, bound: float, Y) -> float:
        if self.flat is None:
            ys = Y if isinstance(Y, list) else [Y]
            self.flat = np.ravel(ys[0]) if len(ys) == 1 else np.concatenate(
                [np.ravel(y) for y in ys])
            self.norm = norm(self.flat)
        return bound / self.norm if self.norm > 0 else (0.0 if bound == 0 else math.inf)
