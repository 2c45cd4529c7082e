"""The plain-loop sorts of kernels/order.py against numpy's sorts."""

from __future__ import annotations

import numpy as np
import pytest

from lance_minhash_sql.kernels.order import new_hash_scratch, order_by_pair, sort_hashes, sort_values


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 33, 100, 1000, 5000])
def test_sorts_equal_numpys(n):
    rng = np.random.default_rng(n)
    a = rng.integers(0, 50, n).astype(np.uint32)
    b = a.copy()
    sort_values(b)
    assert np.array_equal(b, np.sort(a))
    keys = rng.integers(0, 50, n).astype(np.uint64)
    zero = np.zeros(n, dtype=np.int32)
    assert np.array_equal(order_by_pair(np.arange(n), zero, keys), np.argsort(keys, kind="stable"))
    primary = rng.integers(0, 5, n).astype(np.int32)
    secondary = rng.permutation(n).astype(np.uint64)
    assert np.array_equal(order_by_pair(np.arange(n), primary, secondary), np.lexsort((secondary, primary)))


def test_sort_values_sorts_a_view_in_place():
    a = np.array([9, 3, 7, 1, 8, 2] * 10, dtype=np.uint32)
    view = a[5:50]
    want = np.sort(view)
    sort_values(view)
    assert np.array_equal(a[5:50], want)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 38, 100, 1000, 5000])
@pytest.mark.parametrize("spread", ["hashes", "repeats", "narrow"])
def test_sort_hashes_equals_numpys_on_any_spread(n, spread):
    """Hashes spread evenly, hashes repeated, and values all in one bucket (the counting
    pass then does nothing and the insertion sort does all): each sorted, the scratch
    grown as the largest needs and handed back."""
    rng = np.random.default_rng(n)
    if spread == "hashes":
        a = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    elif spread == "repeats":
        a = np.repeat(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True), 3)[:n]
    else:
        a = rng.integers(0, 1000, n).astype(np.uint64)
    tmp, counts = new_hash_scratch()
    b = a.copy()
    tmp, counts = sort_hashes(b, tmp, counts)
    assert np.array_equal(b, np.sort(a))
    assert tmp.size >= n and counts.size > n
