"""The USCTEC family's driver side (imports Ray, through the runtime): its
:class:`~elastic_coded.runtime.family_setup.FamilySetup` (``A`` dense or sparse, the field's
points checked before Ray starts, one source of uncoded rows, its two executors and its
checks)."""

from __future__ import annotations

from ...algebra.lagrange import lagrange_code
from ...errors import ArgumentError
from ...runtime.family_setup import FamilySetup, load_matrix, matrix_inputs, one_source

__all__ = ["USCTEC_SETUP"]


def _precheck(F, L, S, options, seed, allow_lower_S, specs, loaded) -> tuple:
    try:  # the field has the K + L points it needs
        lagrange_code(F, L, S)
    except ValueError as exc:
        raise ArgumentError(
               f"L, S: L={L}, S={S} need L+S+L = {2 * L + S} distinct points of the field (L+S "
               f"coded positions, L to interpolate at), and {F.name} has only "
               f"{getattr(F, 'order', '?')} elements; use a larger field, or smaller L and S "
               f"({exc})") from None
    need, n = (L if allow_lower_S else L + S), len(specs)
    if specs and n < need:
        raise ArgumentError(
               f"machines: {n} given, fewer than {'L' if allow_lower_S else 'L+S'} = {need}" +
               ("" if allow_lower_S else "; add machines, or pass allow_lower_S=True"))
    return ()


_EX = "elastic_coded.families.usctec."

USCTEC_SETUP = FamilySetup(
    "usctec", True, True, True, load_matrix, _precheck, one_source, matrix_inputs,
    "elastic_coded.families.usctec.verify:LagrangeChecks",
    {"whole": _EX + "executor_whole:run_whole", "pull": _EX + "executor_pull:run_pull"})
