"""The BLAS threads the driver uses during a step.

numpy's OpenBLAS keeps a thread per core and lets its idle threads spin after every matrix
product.  A step's driver does small products between Ray calls (encoding the inputs, decoding
pieces, checking the sketch), so those threads spin the whole step: measured at 96 machines on
two cores, one spinning thread cost the driver 0.73 ms of CPU per machine and step, more than
the driver's own work.  :func:`limited` caps them for the length of a step
(``ray.driver_blas_threads``, default 1) and gives numpy its own setting back afterwards.
"""

from __future__ import annotations

import contextlib

__all__ = ["limited"]

_controller = None


def _get():
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


def limited(threads: int | None):
    """A context in which the BLAS libraries loaded use at most ``threads`` threads
    (``None``: as they are)."""
    if threads is None:
        return contextlib.nullcontext()
    return _get().limit(limits=threads, user_api="blas")
