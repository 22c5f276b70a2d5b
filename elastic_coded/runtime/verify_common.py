"""What the verifier and its family checks share: a step's :class:`StepState`, the
:class:`FamilyChecks` protocol each storage family's checks follow, and small helpers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NoReturn, Protocol

import numpy as np

from ..algebra.scaling import norm
from ..errors import VerificationError

__all__ = ["StepState", "FamilyChecks", "fail", "relative", "padded", "runs"]


@dataclass
class StepState:
    """What verification found so far in one step."""

    checked: bool = False
    caught: set = field(default_factory=set)
    repaired: set = field(default_factory=set)
    recomputed: int = 0
    positions: dict = field(default_factory=dict)  # piece -> positions it was decoded again from
    # output (0; hetero: master) -> the check that accepted it
    accepted: dict = field(default_factory=dict)
    improved: set = field(default_factory=set)     # pieces decoded again for their conditioning

    def __post_init__(self):
        self.caught, self.repaired, self.positions, self.accepted = set(), set(), {}, {}
        self.improved = set()


class FamilyChecks(Protocol):
    """One storage family's checks, picked by :class:`~.verifying.Verifier` by family."""

    hint: str
    """What lowers the family's decode condition (in :class:`~.verifying.ToleranceExceeded`)."""

    def check(self, ctx, X, Y, out, prep, state: StepState) -> tuple:
        """``(Y, (condition, error bound, relative bound))``: the product checked and repaired
        (when verification is on), with its a priori bound (``(None, 0, 0)`` over finite
        fields)."""

    def improve(self, ctx, X, Y, out, state: StepState) -> tuple | None:
        """The product decoded again from better-conditioned results, as :meth:`check`
        returns it, or ``None`` when the family has nothing better to decode from."""


def fail(step: int, state: StepState, msg: str) -> NoReturn:
    """Raise :class:`VerificationError` for ``step``, naming the machines caught so far (not
    counted: only a step that completes counts its catches)."""
    caught = tuple(sorted(state.caught, key=str))
    raise VerificationError(f"step {step}: {msg}" + (
        f"; machines caught returning wrong results: {list(caught)}" if caught else ""), caught)


def relative(bound: float, Y) -> float:
    nY = norm(Y)  # without overflow however large (the bound's scale is the same)
    return bound / nY if nY > 0 else (0.0 if bound == 0 else math.inf)


def padded(F, X, L: int):
    pad = (-X.shape[1]) % L
    return np.concatenate([X, F.zeros((X.shape[0], pad))], axis=1) if pad else X


def runs(idx: list) -> list:
    """Consecutive runs of sorted indices."""
    out: list = []
    for i in idx:
        if out and i == out[-1][-1] + 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out
