"""What the driver does differently for each storage family, as data: how ``A`` is loaded and
checked, what is checked before Ray starts, what goes into the object store, how a step's
inputs are read, how a step is run and checked, and three traits (:class:`FamilySetup`).  Each
family's :class:`~elastic_coded.families.Family` names its setup; the driver looks it up by
family (:func:`setup_of`) and never branches on the family's name."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
import scipy.sparse as sp

from ..algebra import sparse
from ..errors import ArgumentError
from ..families import family_of, resolve
from . import inputs

ORDER_RUN, ORDER_RUN_FROM = 32, 1 << 16
"""A sparse ``A`` of ``ORDER_RUN_FROM`` rows or more is balanced by runs of ``ORDER_RUN`` rows
(:func:`~elastic_coded.algebra.sparse.balanced_order`): each step's product is then put back in
``A``'s order by whole runs (0.5 ms instead of 5 ms for a 1,000,000-row vector), and the runs'
nonzeros are still spread evenly; a smaller ``A`` is balanced row by row."""

__all__ = ["FamilySetup", "Loaded", "setup_of", "chunks", "matrix_of",
           "load_matrix", "read_npz", "densify_message", "one_source", "matrix_inputs"]


@dataclass(frozen=True)
class Loaded:
    """``A`` as checked before Ray starts.  ``data``: an array, ``("npy", path)`` (each
    worker reads its own rows) or, for ``hetero``, the list of the masters' matrices;
    ``shape``: ``A``'s (``hetero``: total rows, ``None``); ``masters``: the masters' shapes.

    A sparse ``A`` (:mod:`elastic_coded.algebra.sparse`): ``data`` is its CSR array with the
    rows in ``order`` (row ``order[i]`` of ``A`` at row ``i``, so that any run of rows holds
    nonzeros in proportion to its length); ``weights`` counts a row range's nonzeros, and the
    controller's family plans units of equal nonzeros (:mod:`elastic_coded.schemes.row_units`).
    Everything downstream (storage, plans, checks) sees the reordered rows; the product is put
    back in ``A``'s order."""

    data: Any
    shape: tuple
    masters: tuple = ()
    order: Any = None
    weights: Any = None
    run: int = 1
    """``order`` moves whole runs of this many rows (:func:`~elastic_coded.algebra.sparse.
    balanced_order`)."""

    @property
    def mats(self) -> list:
        """The matrices themselves (memory-mapped from an ``.npy`` file)."""
        return list(self.data) if isinstance(self.data, list) else [matrix_of(self.data)]


@dataclass(frozen=True)
class FamilySetup:
    """One storage family on the driver.

    ``takes_LS``: the family codes with ``(L, S)`` (the USCTEC family: ``L`` and ``S`` are
    required, a lower ``S`` may be allowed, the step's code is reported); ``learns_speeds``:
    a call's time follows its products, so the driver measures speeds from it (the unified
    and hetero calls are paced by latency models built on the configured speeds, which
    measuring would feed their own draws); ``prefetches``: the next step's plan is asked for
    as a step ends.  ``load(F, A) -> Loaded``; ``precheck(F, L, S, options, seed,
    allow_lower_S, specs, loaded) -> codes`` raises what can be found before Ray starts;
    ``sources(loaded, chunk_rows, codes) -> ({name: source}, masters' rows)``;
    ``inputs(F, loaded, B) -> (X, shape, columns)``.  ``checks``: the verifier's checks,
    ``checks(verifier) -> FamilyChecks`` (:mod:`.verify_common`); ``executors``: by
    :attr:`~elastic_coded.schemes.registry.Policy.execution`, the step's executor
    ``(ctx, X, events, prepared) -> (product, Outcome)`` (:mod:`.executors`).  ``state``:
    makes what the family's executors keep on the driver from step to step (``None``: nothing;
    the unified family's cache of Shuffle plans and stored designs), handed to them as
    :attr:`~.context.StepContext.state`.  Each may be given as a ``"module:attribute"``
    string (imported when first used)."""

    name: str
    takes_LS: bool
    learns_speeds: bool
    prefetches: bool
    load: Callable
    precheck: Callable
    sources: Callable
    inputs: Callable
    checks: Any = None
    executors: Mapping = dataclasses.field(default_factory=dict)
    state: Any = None

    def make_checks(self, verifier):
        """The family's checks for ``verifier``."""
        return resolve(self.checks)(verifier)

    def make_state(self) -> Any:
        """A fresh driver-side state of the family's executors (``None``: they keep none)."""
        return None if self.state is None else resolve(self.state)()

    def executor(self, execution: str) -> Callable:
        """The executor of ``execution`` (a key of :attr:`executors`)."""
        if execution not in self.executors:
            raise ArgumentError(f"execution: family {self.name!r} runs {sorted(self.executors)}, "
                                f"got {execution!r}")
        return resolve(self.executors[execution])


def setup_of(family: str) -> FamilySetup:
    """The driver-side setup of the registered family ``family``."""
    return family_of(family).runtime_setup()


def matrix_of(data):
    """``A`` itself, or memory-mapped from the ``.npy`` file it came in."""
    return np.load(data[1], mmap_mode="r") if isinstance(data, tuple) else data


def chunks(A: np.ndarray, chunk_rows: int | None) -> tuple:
    """``A`` in the object store in row chunks (about 64 unless ``chunk_rows``)."""
    step = chunk_rows or max(1, math.ceil(A.shape[0] / 64))
    starts = list(range(0, A.shape[0], step))
    return ("chunks", starts, [ray.put(A[s:s + step]) for s in starts])


# -- one matrix (usctec, unified) ------------------------------------------------------------------

def read_npz(path: str):
    if not os.path.exists(path):
        raise ArgumentError(f"A: no file at {path!r}")
    try:
        return sp.load_npz(path)
    except (ValueError, OSError, KeyError) as exc:
        raise ArgumentError(f"A: the file {path!r} does not hold a sparse matrix written by "
                            f"scipy.sparse.save_npz ({exc})") from None


def _load_sparse(F, A) -> Loaded:
    """A sparse ``A``: checked, as CSR in the balanced row order (:class:`Loaded`)."""
    A = F.asarray(A, "A")
    if min(A.shape) < 1:
        raise ArgumentError(f"A: must be a non-empty 2-D matrix, got shape {A.shape}")
    run = ORDER_RUN if A.shape[0] >= ORDER_RUN_FROM else 1
    order = sparse.balanced_order(sparse.row_nnz(A), run)
    Ap = sp.csr_array(A[order])
    return Loaded(Ap, A.shape, order=order, weights=sparse.weights_of(Ap), run=run)


def load_matrix(F, A) -> Loaded:
    if isinstance(A, (str, os.PathLike)) and str(A).endswith(".npz"):
        A = read_npz(os.path.abspath(str(A)))
    if sparse.is_sparse(A):
        return _load_sparse(F, A)
    if isinstance(A, (str, os.PathLike)):
        path = os.path.abspath(str(A))
        if not os.path.exists(path):
            raise ArgumentError(f"A: no file at {path!r}")
        try:
            mm = np.load(path, mmap_mode="r")
        except ValueError as exc:
            raise ArgumentError(f"A: the file {path!r} does not hold a plain numeric array "
                                f"({exc})") from None
        if mm.ndim != 2:
            raise ArgumentError(f"A: must be 2-D, the file holds shape {mm.shape}")
        F.asarray(np.asarray(mm[:1]), "A")  # dtype check on a row
        return Loaded(("npy", path), mm.shape)
    A = F.asarray(A, "A")
    if A.ndim != 2 or min(A.shape) < 1:
        raise ArgumentError(f"A: must be a non-empty 2-D array, got shape {A.shape}")
    return Loaded(A, A.shape)


def one_source(loaded: Loaded, chunk_rows, codes) -> tuple:
    data = loaded.data
    return {"A": data if isinstance(data, tuple) else chunks(data, chunk_rows)}, ()


def matrix_inputs(F, loaded: Loaded, B):
    X, shape, cols = inputs.matrix_inputs(F, loaded.shape, B)
    if loaded.order is None:
        return X, shape, cols
    return X, lambda Y: shape(sparse.in_order(Y, loaded.order, loaded.run)), cols


def densify_message(policy: str, name: str, A) -> str:
    m, n = A.shape[0], A.shape[-1]
    return (f"{name}: policy {policy!r} codes A itself (its coded storage is dense), so a "
            f"sparse {m} x {n} A would be stored dense: {m * n * 8 / 2**20:,.1f} MiB per "
            f"copy instead of {sparse_bytes(A) / 2**20:,.1f} MiB. Pass A.toarray() to accept "
            f"that, or use a USCTEC-family policy (usctec-auto, usctec, usctec-pull, dynamic, "
            f"proportional), which store A's rows uncoded and keep them sparse")


def sparse_bytes(A) -> int:
    """Bytes of a sparse matrix's CSR arrays (data, indices, row pointers)."""
    A = sp.csr_array(A)
    return int(A.data.nbytes + A.indices.nbytes + A.indptr.nbytes)
