"""The plain-loop sorts of kernels/order.py against numpy's sorts."""

from __future__ import annotations

import numpy as np
import pytest

from lance_minhash_sql.kernels.order import order_by, order_by_pair, sort_values


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 33, 100, 1000, 5000])
def test_sorts_equal_numpys(n):
    rng = np.random.default_rng(n)
    a = rng.integers(0, 50, n).astype(np.uint32)
    b = a.copy()
    sort_values(b)
    assert np.array_equal(b, np.sort(a))
    keys = rng.integers(0, 50, n).astype(np.uint64)
    assert np.array_equal(order_by(keys), np.argsort(keys, kind="stable"))
    primary = rng.integers(0, 5, n).astype(np.int32)
    secondary = rng.permutation(n).astype(np.uint64)
    assert np.array_equal(order_by_pair(np.arange(n), primary, secondary), np.lexsort((secondary, primary)))


def test_sort_values_sorts_a_view_in_place():
    a = np.array([9, 3, 7, 1, 8, 2] * 10, dtype=np.uint32)
    view = a[5:50]
    want = np.sort(view)
    sort_values(view)
    assert np.array_equal(a[5:50], want)
