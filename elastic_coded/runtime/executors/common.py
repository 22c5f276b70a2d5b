"""What every executor shares: the :class:`Outcome` it returns, the Lagrange encoding of the
inputs, and the stragglers as observed (:func:`slowed`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import ray

from ...algebra.lagrange import lagrange_code
from ...families.usctec.pull_step import seen_slowed
from ..gather import Gather

__all__ = ["Outcome", "encode_inputs", "crash_at", "slowed", "units"]


@dataclass(frozen=True)
class Outcome:
    """What a step did, for the report: a frozen value (an executor that changes one returns
    a new one with :func:`dataclasses.replace`)."""

    gather: Gather
    t_encode: float
    t_decode: float
    total_products: int
    decoded_by: dict
    recovered: tuple = ()
    extra: dict = field(default_factory=dict)
    prep: object = None
    """The prepared step that ran, when the step had to be planned again (unified re-encoding
    after crashes mid-step) or ran another plan than the one prepared (``usctec-auto``)."""
    collector: object = None
    """The step's collector (its results by piece and position), for checks after decoding."""
    pull_rate: float | None = None
    """A pull step at real speed: the products per second per unit of speed it measured."""
    pull_lag: float | None = None
    """A pull step: the lag the next one allows every call
    (:func:`~elastic_coded.families.usctec.pull_step.lag_after`; ``None``: a whole plan's
    step, which leaves it as it was)."""


def units(ctx, num_rows: int) -> int:
    """The products of ``A`` times one input column: its rows, or a sparse ``A``'s nonzeros
    (``ctx.weights``).  A step's emulated work is measured against this times its columns."""
    return num_rows if ctx.weights is None else ctx.weights.total


def crash_at(machine, ev) -> float | None:
    """When a scripted crash ends ``machine``'s call (a fraction of it), or ``None``."""
    return 0.5 if machine in ev.crash else None


INLINE_BYTES = 64 << 10
"""A coded input this small travels inside each call that uses it (Ray inlines arguments
below 100 KiB), not through the object store: a put and each worker's fetch cost more than
the bytes."""


def encode_inputs(F, B: np.ndarray, L: int, S: int):
    """``B`` Lagrange-coded for ``(L, S)``: ``(code, coded, args)``, ``args[p]`` what a call
    passes for position ``p``: the block itself when it is small (:data:`INLINE_BYTES`), else
    its reference, put in the object store once.  Zero columns are added only when ``L``
    (times the code's width, 2 for a complex code) does not divide ``B``'s column count (see
    ``step_code``)."""
    code = lagrange_code(F, L, S)
    coded = code.encode(B, cols=B.shape[1] + (-B.shape[1]) % (L * code.width))
    return code, coded, [coded[p] if coded[p].nbytes <= INLINE_BYTES else ray.put(coded[p])
                         for p in range(code.K)]


def slowed(g: Gather, speeds: dict, total: int, scale: float, factor: float = 1 / 3,
           late: float = 0.8) -> tuple:
    """The step's stragglers as observed
    (:func:`~elastic_coded.families.usctec.pull_step.seen_slowed` on the gather's measured
    speeds: each machine's speed in the step over its estimate, against the step's median).
    A whole ``(L, S)`` plan cancels its slowest calls about when the others finish, so it sees
    no one: :func:`~.pull.history` marks its steps blind."""
    return seen_slowed(g.measured_speeds(total, scale), speeds, factor, late)
