"""The unified family's driver side (imports Ray, through the runtime): its
:class:`~elastic_coded.runtime.family_setup.FamilySetup` (a dense ``A``, its storage designed
before Ray starts, its executor and its checks)."""

from __future__ import annotations

import os

from ...algebra import sparse
from ...errors import ArgumentError
from ...runtime.family_setup import (
    FamilySetup,
    Loaded,
    densify_message,
    load_matrix,
    matrix_inputs,
    one_source,
    read_npz,
)
from . import policy as uni

__all__ = ["UNIFIED_SETUP"]


def _dense_only(policy: str):
    """The unified scheme's loader: it codes ``A`` itself, so a sparse ``A`` is refused."""
    def load(F, A) -> Loaded:
        if isinstance(A, (str, os.PathLike)) and str(A).endswith(".npz"):
            A = read_npz(os.path.abspath(str(A)))
        if sparse.is_sparse(A):
            raise ArgumentError(densify_message(policy, "A", A))
        return load_matrix(F, A)
    return load


def _unified_precheck(F, L, S, options, seed, allow_lower_S, specs, loaded) -> tuple:
    if specs:
        uni.plan_storage(options, loaded.shape[0], [s.id for s in specs], None,
                         options.N or options.q, F)
    return ()


UNIFIED_SETUP = FamilySetup(
    "unified", False, False, False, _dense_only("unified"), _unified_precheck, one_source,
    matrix_inputs, "elastic_coded.families.unified.verify:UnifiedChecks",
    {"unified": "elastic_coded.families.unified.executor:run_unified"},
    "elastic_coded.families.unified.executor:UnifiedCache")
