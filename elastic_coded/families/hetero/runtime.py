"""The heterogeneous-masters family's driver side (imports Ray, through the runtime): its
:class:`~elastic_coded.runtime.family_setup.FamilySetup` (one dense matrix per master, each
MDS-coded into its own source, the masters' inputs, its executor and its checks)."""

from __future__ import annotations

import numpy as np

from ...algebra import sparse
from ...algebra.mds import mds_code
from ...errors import ArgumentError
from ...runtime import inputs
from ...runtime.family_setup import FamilySetup, Loaded, chunks, densify_message
from . import policy as het

__all__ = ["HETERO_SETUP"]


def _load_masters(F, As) -> Loaded:
    if isinstance(As, np.ndarray) and As.ndim == 2:
        raise ArgumentError("A: policy 'hetero' needs a list of matrices, one per master, got one "
                            "2-D array (wrap it in a list for a single master)")
    try:
        mats = list(As)
    except TypeError:
        raise ArgumentError(f"A: policy 'hetero' needs a list of 2-D matrices, got "
                            f"{type(As).__name__}") from None
    if not mats:
        raise ArgumentError("A: policy 'hetero' needs at least one matrix (one per master)")
    out = []
    for m, A in enumerate(mats):
        if sparse.is_sparse(A):
            raise ArgumentError(densify_message("hetero", f"A[{m}]", A))
        arr = F.asarray(A, f"A[{m}]")
        if arr.ndim != 2 or min(arr.shape) < 1:
            raise ArgumentError(f"A[{m}]: must be a non-empty 2-D matrix, got shape {arr.shape}")
        out.append(arr)
    return Loaded(out, (sum(a.shape[0] for a in out), None), tuple(a.shape for a in out))


def _hetero_precheck(F, L, S, options, seed, allow_lower_S, specs, loaded) -> tuple:
    """The masters' MDS codes (their capacities from the options)."""
    n, M = len(specs), len(loaded.data)
    if specs and n <= M:
        raise ArgumentError(f"machines: {n} given; policy 'hetero' needs more machines than "
                            f"masters ({M})")
    rows = tuple(a.shape[0] for a in loaded.data)
    caps = het.capacities(options, rows, getattr(F, "order", None))
    return tuple(mds_code(F, caps[m], rows[m], seed=seed + m) for m in range(M))


def _coded_masters(loaded: Loaded, chunk_rows, codes) -> tuple:
    rows = tuple(a.shape[0] for a in loaded.data)
    return ({het.source_name(m): chunks(code.encode(a), chunk_rows)
             for m, (code, a) in enumerate(zip(codes, loaded.data))}, rows)


def _master_inputs(F, loaded: Loaded, B):
    return inputs.master_inputs(F, loaded.masters, B)


HETERO_SETUP = FamilySetup(
    "hetero", False, False, False, _load_masters, _hetero_precheck, _coded_masters,
    _master_inputs, "elastic_coded.families.hetero.verify:HeteroChecks",
    {"hetero": "elastic_coded.families.hetero.executor:run_hetero"})
