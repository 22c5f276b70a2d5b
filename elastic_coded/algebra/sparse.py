"""Sparse matrices over the fields: ``A`` kept as a SciPy CSR array (``scipy.sparse.csr_array``)
with the field's dtype, its products exact over GF(p), and the few helpers the runtime needs
to treat a CSR row block like a dense one (stacking, norms, nonzero counts).

Only the reals and GF(p) take a sparse ``A``: GF(2^T)'s products run through ``galois`` on
dense arrays, so a sparse ``A`` there is refused with an error that says so.

**Exact products over GF(p).**  The entries are residues below ``p < 2^31``, so one product is
below ``2^62`` and a row of ``k`` nonzeros sums to below ``k p^2``: when that fits in int64 the
product is one SciPy int64 product, reduced once.  Otherwise the dense operand is split into
16-bit limbs (products below ``2^47``, sums exact for rows of up to ``2^16`` nonzeros) and,
for longer rows, the sparse operand too (products below ``2^32``).  The limbs are recombined
modulo ``p`` with every intermediate below ``2^63``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import ArgumentError, ArgumentTypeError

__all__ = ["is_sparse", "as_field_sparse", "matmul", "vstack", "row_view", "sq_norm", "top",
           "row_nnz", "take_rows", "stack_rows", "RowWeights", "weights_of", "balanced_order",
           "in_order"]

INT64_LIMIT = 2 ** 63
LIMB = 16
_MASK = (1 << LIMB) - 1


def is_sparse(x: Any) -> bool:
    """Whether ``x`` is a SciPy sparse matrix or array."""
    return bool(sp.issparse(x))


def as_field_sparse(F: Any, x: Any, name: str = "A", integer: bool = False) -> Any:
    """``x`` (any SciPy sparse matrix or array) as a 2-D CSR array of ``F``'s values: float64 in
    the reals, int64 residues (each checked to lie in ``[0, p)``) over GF(p).  Raises naming
    ``name`` for a sparse array that is not 2-D, a complex or non-numeric dtype, non-finite
    values, or a field without sparse support."""
    if getattr(x, "ndim", 2) != 2:
        raise ArgumentError(f"{name}: a sparse matrix must be 2-D, got {x.ndim}-D shape {x.shape}")
    kind = x.dtype.kind
    if kind == "c":
        raise ArgumentTypeError(f"{name}: complex sparse matrices are not supported (dtype "
                                f"{x.dtype}); the fields are the reals and GF(p): pass the real "
                                f"and imaginary parts as two matrices")
    if kind not in "biuf":
        raise ArgumentTypeError(f"{name}: a sparse matrix needs a numeric dtype, got {x.dtype}")
    data_dtype: type[np.number]
    if not getattr(F, "exact", False):
        data_dtype = np.float64
    elif hasattr(F, "p"):
        data_dtype = np.int64
    else:
        raise ArgumentTypeError(f"{name}: sparse matrices are supported over the reals and GF(p), "
                                f"not {F.name}; use field 'real' or 'gf(p)', or pass A dense")
    A = sp.csr_array(x, copy=True)
    A.sum_duplicates()
    if data_dtype is np.float64:
        data = A.data.astype(np.float64, copy=False)
        if not np.all(np.isfinite(data)):
            raise ArgumentError(f"{name}: real field values must be finite (found NaN or inf)")
    else:
        data = F.asarray(A.data, name)  # the dense rule: integers in [0, p)
    A = sp.csr_array((data, A.indices.astype(np.int64, copy=False),
                      A.indptr.astype(np.int64, copy=False)), shape=A.shape)
    A.eliminate_zeros()
    return A


def row_nnz(A: Any) -> np.ndarray:
    """Nonzeros per row of a CSR ``A``."""
    return np.diff(A.indptr)


def vstack(parts: list[Any]) -> Any:
    """Row blocks stacked (CSR)."""
    return sp.csr_array(sp.vstack(parts, format="csr"))


def take_rows(block: Any, a: int, b: int) -> Any:
    """Rows ``a:b`` of a row block, dense (read from a memory map if it is one) or CSR."""
    return block[a:b] if sp.issparse(block) else np.asarray(block[a:b])


def row_view(block: Any, a: int, b: int) -> Any:
    """Rows ``a:b`` of a stored row block without copying its nonzeros: a dense block's slice,
    or a CSR block whose data and column indices are views of ``block``'s (only the ``b - a + 1``
    row pointers are new).  Slicing a CSR block (``block[a:b]``) copies every nonzero of the
    rows, which at real speed cost a worker more than the product itself."""
    if not sp.issparse(block):
        return block[a:b]
    lo, hi = int(block.indptr[a]), int(block.indptr[b])
    out = sp.csr_array((b - a, block.shape[1]), dtype=block.dtype)
    out.indptr = block.indptr[a:b + 1] - lo
    out.indices = block.indices[lo:hi]
    out.data = block.data[lo:hi]
    return out


def stack_rows(parts: list[Any]) -> Any:
    """Row blocks (all dense or all CSR) stacked into one new block (a copy, even of one)."""
    if sp.issparse(parts[0]):
        return vstack(parts) if len(parts) > 1 else sp.csr_array(parts[0], copy=True)
    return np.concatenate(parts) if len(parts) > 1 else np.array(parts[0], copy=True)


def sq_norm(A: Any) -> float:
    """``||A||_F^2`` of a sparse ``A``."""
    return float(np.sum(np.asarray(A.data, dtype=np.float64) ** 2))


def top(A: Any) -> float:
    """``max |A|`` of a sparse ``A`` (0 when it has no nonzeros)."""
    return float(np.max(np.abs(A.data))) if A.nnz else 0.0


# -- products --------------------------------------------------------------------------------------

def matmul(F: Any, a: Any, b: Any) -> np.ndarray:
    """``a @ b`` over ``F`` where one operand is sparse: a dense array.  Exact over GF(p)
    (module docstring)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ArgumentError(f"matmul: shape mismatch {a.shape} @ {b.shape}: a.shape[1] must equal "
                            f"b.shape[0] (both 2-D)")
    if not F.exact:
        return np.asarray(_csr(a, np.float64) @ _dense(b, np.float64)) if sp.issparse(a) \
            else np.asarray(_dense(a, np.float64) @ _csr(b, np.float64))
    if sp.issparse(a) and not sp.issparse(b):
        return _mod_product(_csr(a, np.int64), _dense(b, np.int64), F.p)
    if sp.issparse(b) and not sp.issparse(a):  # (b^T a^T)^T
        return np.ascontiguousarray(
            _mod_product(_csr(b.T, np.int64), _dense(a, np.int64).T, F.p).T)
    raise ArgumentTypeError("matmul: over GF(p) one operand must be dense")


def _csr(x: Any, dtype: Any) -> Any:
    if not (isinstance(x, (sp.csr_array, sp.csr_matrix))):  # a CSR operand is used as it is
        x = sp.csr_array(x)
    return x if x.dtype == dtype else x.astype(dtype)


def _dense(x: Any, dtype: Any) -> np.ndarray:
    return np.asarray(x, dtype=dtype)


def _mod_product(A: Any, X: np.ndarray, p: int) -> np.ndarray:
    """``A X mod p`` for a CSR ``A`` and a dense ``X`` of residues (module docstring)."""
    k = int(row_nnz(A).max()) if A.shape[0] and A.nnz else 0
    if k * (p - 1) ** 2 < INT64_LIMIT:
        return np.asarray(A @ X) % p
    lo, hi = X & _MASK, X >> LIMB
    shift = (1 << LIMB) % p
    if k * (p - 1) * _MASK < INT64_LIMIT:
        out: np.ndarray = (np.asarray(A @ lo) % p + (np.asarray(A @ hi) % p) * shift % p) % p
        return out
    A_lo = sp.csr_array((A.data & _MASK, A.indices, A.indptr), shape=A.shape)
    A_hi = sp.csr_array((A.data >> LIMB, A.indices, A.indptr), shape=A.shape)
    ll, lh = np.asarray(A_lo @ lo) % p, np.asarray(A_lo @ hi) % p
    hl, hh = np.asarray(A_hi @ lo) % p, np.asarray(A_hi @ hi) % p
    mid = (lh + hl) % p * shift % p
    high = hh * (shift * shift % p) % p
    total: np.ndarray = (ll + mid + high) % p
    return total


# -- load by nonzeros ------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class RowWeights:
    """What a row range of ``A`` costs per input column: its rows (a dense ``A``, ``prefix``
    ``None``) or its nonzeros (a sparse one: ``prefix[i]`` nonzeros in rows ``0..i-1``).
    ``total``: the whole matrix's; ``of((a, b))``: rows ``a:b``'s."""

    num_rows: int
    prefix: np.ndarray | None = None

    @property
    def total(self) -> int:
        return self.num_rows if self.prefix is None else int(self.prefix[-1])

    def of(self, rows: Any) -> int:
        a, b = rows
        return b - a if self.prefix is None else int(self.prefix[b] - self.prefix[a])


def weights_of(A: Any) -> RowWeights:
    """:class:`RowWeights` of ``A`` (dense: rows; sparse: nonzeros)."""
    if sp.issparse(A):
        return RowWeights(A.shape[0], np.asarray(A.indptr, dtype=np.int64))
    return RowWeights(A.shape[0])


def _radical_inverse(n: int) -> np.ndarray:
    """Base-2 radical inverse (van der Corput) of ``0..n-1``, as integers of ``bits`` bits."""
    bits = max(1, int(n - 1).bit_length())
    i = np.arange(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    for b in range(bits):
        out |= ((i >> b) & 1) << (bits - 1 - b)
    return out


def balanced_order(nnz_per_row: Any, run: int = 1) -> np.ndarray:
    """A row order under which every run of consecutive rows holds nonzeros in proportion to
    its length: rows ranked by nonzeros (most first, ties by index), the rank at position
    ``i`` being the rank of ``i``'s van der Corput value among all positions'.  Any ``w``
    consecutive positions then sample the ranks evenly, so the heavy rows are spread out and a
    run's nonzeros differ from ``w`` times the mean by about the largest row's count times
    ``log2`` of the rows, not by the sum of the heavy rows that happen to sit together.
    ``run > 1``: the same over runs of ``run`` consecutive rows (their nonzeros summed), each
    run kept whole and the last ``len % run`` rows left last, so that the product is put back
    in ``A``'s order by whole runs (:func:`in_order`) rather than row by row.
    Returns ``order``: row ``order[i]`` of ``A`` goes to position ``i``."""
    nnz = np.asarray(nnz_per_row)
    run = int(run)
    if run > 1:
        full = nnz.size // run
        sums = nnz[:full * run].reshape(full, run).sum(axis=1)
        runs = balanced_order(sums) if full else np.zeros(0, dtype=np.int64)
        rows = (runs[:, None] * run + np.arange(run)).ravel()
        return np.concatenate([rows, np.arange(full * run, nnz.size)]).astype(np.int64)
    ranked = np.argsort(-nnz, kind="stable")
    pos_rank = np.argsort(np.argsort(_radical_inverse(nnz.size), kind="stable"), kind="stable")
    return ranked[pos_rank]


def in_order(Y: np.ndarray, order: np.ndarray, run: int = 1) -> np.ndarray:
    """``Y`` (rows in ``order``, :func:`balanced_order` with ``run``) put back in ``A``'s row
    order: row ``i`` of ``Y`` to row ``order[i]``.  By whole runs when ``run > 1`` (a copy of
    contiguous blocks, about 10x faster than row by row on a long vector)."""
    out = np.empty_like(Y)
    full = (Y.shape[0] // run) * run if run > 1 else 0
    if full:
        rest = Y.shape[1:]
        out[:full].reshape(full // run, run, *rest)[order[:full:run] // run] = \
            Y[:full].reshape(full // run, run, *rest)
        out[full:] = Y[full:]
        return out
    out[order] = Y
    return out
