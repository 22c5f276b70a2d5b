"""The cluster as a SciPy ``LinearOperator`` (:class:`ClusterOperator`), and the transposed
source that gives it ``rmatvec`` (:func:`start_transposed`).

Every ``matvec``/``matmat`` is one coded, elastic, verified step of the cluster
(:meth:`~.cluster.ElasticCluster.multiply`), with its report in ``cluster.reports``; so
``scipy.sparse.linalg``'s ``eigsh``, ``svds``, ``lsqr``, ``cg`` and ``gmres`` run on the
cluster unchanged, and churn, crashes and verification apply to every product they ask for.

**The transposed source.**  ``A^T`` products cannot be computed from ``A``'s row storage
(every machine would need every column).  With ``ElasticCluster(..., transpose=True)`` the
cluster also stores the rows of ``A^T`` (the columns of ``A``; sparse stays sparse), on a second
set of machines with the same ids, speeds and storage budgets, and its own placement, plans and
verification; ``rmatvec``/``rmatmat`` are its steps (reports in ``cluster.transposed.reports``).
The churn script applies to both, each at its own step count, and :meth:`add_machines` /
:meth:`remove_machine` change both.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from ..errors import ArgumentError

__all__ = ["ClusterOperator", "start_transposed", "transpose_of", "check_transpose"]


class ClusterOperator(LinearOperator):
    """``A`` on the cluster as a ``LinearOperator`` (module docstring).  ``rmatvec`` and
    ``rmatmat`` need a cluster built with ``transpose=True``."""

    def __init__(self, cluster):
        self.cluster = cluster
        super().__init__(dtype=np.dtype(cluster.F.dtype), shape=tuple(cluster.shape))

    def _matvec(self, x):
        return self.cluster.multiply(np.ravel(x))

    def _matmat(self, X):
        return self.cluster.multiply(np.asarray(X))

    def _rmatvec(self, x):
        return self.cluster.multiply_transpose(np.ravel(np.conj(x)) if np.iscomplexobj(x)
                                               else np.ravel(x))

    def _rmatmat(self, X):
        return self.cluster.multiply_transpose(np.asarray(X))

    def __repr__(self) -> str:
        return f"<ClusterOperator {self.shape[0]}x{self.shape[1]} on {self.cluster!r}>"


def transpose_of(loaded):
    """``A^T`` from the driver's copy of ``A`` (:class:`~.family_setup.Loaded`): CSR for a
    sparse ``A`` (its rows put back in ``A``'s order first), a dense array otherwise (an
    ``.npy`` file is read whole)."""
    from .family_setup import matrix_of

    if loaded.order is not None:
        A = sp.csr_array(loaded.data)[np.argsort(loaded.order)]
        return sp.csr_array(A.T)
    return np.ascontiguousarray(np.asarray(matrix_of(loaded.data)).T)


def start_transposed(cluster, args: dict):
    """The cluster of ``A^T`` beside ``cluster`` (module docstring; of ``cluster``'s class):
    the same policy, code,
    field, machines, churn script, options and settings (``args``), in the same Ray session;
    its reports in memory only (the report file, if any, is ``cluster``'s)."""
    check_transpose(cluster.policy, cluster._fam.takes_LS)
    report = replace(args["report"], file=None)
    return type(cluster)(transpose_of(cluster._loaded), args["policy"], args["machines"],
                         L=cluster.L, S=cluster.S, field=cluster.F, churn=args["churn"],
                         options=cluster.options, run=replace(args["run"], transpose=False),
                         verify=args["verify"], ray=args["ray"], report=report)


def check_transpose(policy: str, takes_LS: bool) -> None:
    """``transpose=True`` is for the USCTEC family, whose rows are stored uncoded."""
    if not takes_LS:
        raise ArgumentError(f"transpose: policy {policy!r} codes A itself and cannot store A^T "
                            f"beside it; transpose=True needs a USCTEC-family policy "
                            f"(usctec-auto, usctec, usctec-pull, dynamic, proportional)")
