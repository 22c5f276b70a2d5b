"""What the checks and the fault location share: the sketch rows (and projections) a field
needs, and the check of an int argument (pure: numpy only)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import ArgumentError
from .fields import Field

if TYPE_CHECKING:
    from .fields import BinaryExtField, PrimeField

FALSE_ACCEPT = 1e-9  # target false-accept probability of a check in a finite field
REAL_SKETCH_ROWS = 8


def default_repeats(F: Field) -> int:
    """Sketch rows ``t`` (and projections ``J``): over a finite field of order ``q`` the smallest
    ``t >= 2`` with ``q^-t <= 1e-9``; ``8`` in the reals (module docstring)."""
    if not F.exact:
        return REAL_SKETCH_ROWS
    order = cast("PrimeField | BinaryExtField", F).order   # an exact field's
    return max(2, math.ceil(math.log(1 / FALSE_ACCEPT) / math.log(order)))


def positive_int(name: str, val: Any, lo: int = 1) -> int:
    if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < lo:
        raise ArgumentError(f"{name}: must be an int >= {lo}, got {val!r}")
    return int(val)
