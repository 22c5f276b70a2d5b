"""The worker's row storage (its pure part, called directly without a Ray session)."""

import asyncio

import numpy as np
import pytest

from elastic_coded.runtime.worker import Machine as WorkerClass


def _run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


def test_rows_stay_one_slice_after_stores_and_keep_only():
    w = WorkerClass("m0", "gf(65521)")
    A = np.arange(40 * 3, dtype=np.int64).reshape(40, 3)
    _run(w.store_chunks("A", [(0, 10)], [0], A[0:20]))
    _run(w.store_chunks("A", [(10, 20), (30, 40)], [0, 20], A[0:20], A[20:40]))
    assert np.array_equal(w._rows("A", (5, 15)), A[5:15])  # stored in two calls, one slice
    # dropping rows keeps what remains contiguous where it is contiguous
    _run(w.keep_only("A", [(0, 8), (8, 16), (30, 35)]))
    assert w.stored_rows() == 21
    assert np.array_equal(w._rows("A", (2, 14)), A[2:14])
    assert np.array_equal(w._rows("A", (30, 35)), A[30:35])
    with pytest.raises(KeyError, match="does not store rows 14:18 of A"):
        w._rows("A", (14, 18))


def test_sources_are_kept_apart_and_dropped_whole():
    w = WorkerClass("m0", "gf(65521)")
    A = np.arange(20 * 2, dtype=np.int64).reshape(20, 2)
    C = A + 1
    _run(w.store_chunks("C0", [(0, 5)], [0], A))
    _run(w.store_chunks("C1", [(0, 5)], [0], C))
    assert np.array_equal(w._rows("C1", (0, 5)), C[:5])
    assert w.stored_rows("C0") == 5 and w.stored_rows() == 10
    _run(w.drop_sources(("C1",)))
    assert w.stored_rows() == 5
    with pytest.raises(KeyError, match="of C0"):
        w._rows("C0", (0, 1))
    _run(w.keep_only("C1", []))
    assert w.stored_rows() == 0 and not w.stores
