"""The worker's row storage (its pure part, called directly without a Ray session)."""

import asyncio

import numpy as np

from elastic_coded.runtime.worker import Worker

WorkerClass = Worker.__ray_actor_class__


def _run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


def test_rows_stay_one_slice_after_stores_and_keep_only():
    w = WorkerClass("m0", "gf(65521)", num_rows=40)
    A = np.arange(40 * 3, dtype=np.int64).reshape(40, 3)
    _run(w.store_chunks([(0, 10)], [0], A[0:20]))
    _run(w.store_chunks([(10, 20), (30, 40)], [0, 20], A[0:20], A[20:40]))
    assert np.array_equal(w._rows((5, 15)), A[5:15])  # stored in two calls, served as one
    # dropping rows keeps what remains contiguous where it is contiguous
    _run(w.keep_only([(0, 8), (8, 16), (30, 35)]))
    assert w.stored_rows() == 21
    assert np.array_equal(w._rows((2, 14)), A[2:14])
    assert np.array_equal(w._rows((30, 35)), A[30:35])
    try:
        w._rows((14, 18))
    except KeyError as exc:
        assert "does not store rows 14:18" in str(exc)
    else:
        raise AssertionError("rows not stored were served")
