"""The driver's BLAS cap during a step (runtime/blas.py)."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from elastic_coded.options import OptionError, RayOptions
from elastic_coded.runtime import blas


def _blas_threads() -> list:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_limited_caps_blas_threads_and_gives_them_back():
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded
    before = _blas_threads()
    assert before, "numpy's BLAS library was not found"
    with blas.limited(1):
        assert _blas_threads() == [1] * len(before)
        a = np.arange(64.0).reshape(8, 8)
        assert np.array_equal(a @ a, np.einsum("ij,jk->ik", a, a))
    assert _blas_threads() == before


def test_none_leaves_blas_as_it_is():
    before = _blas_threads()
    with blas.limited(None):
        assert _blas_threads() == before


def test_driver_blas_threads_defaults_to_one_and_is_checked():
    assert RayOptions().driver_blas_threads == 1
    with pytest.raises(OptionError, match=r"ray.driver_blas_threads: 0 must be an int >= 1"):
        RayOptions(driver_blas_threads=0)
