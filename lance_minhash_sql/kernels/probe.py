"""The buckets of a few band keys, searched in place in the band keys' chunks: the compiled
twin of the numpy search of ``query/probe.py``, for a process that has loaded numba.

The keys come as chunks (``io/mapped.py: MappedColumn.chunks``, or the keys held whole as
one chunk): row ``r`` of chunk ``c`` is ``values[value_index[c] + r - first_row[c]]``,
and the keys ascend over the rows. For a key ``K`` (``docs/search.md``,
``kernels/lsh.py``) the bucket starts at the first row ``>= K`` of the first page whose
last key is ``>= K``, and ends at the first row ``> K`` of the first page whose last key
is ``> K``. The start is two binary searches: over the chunks of its page by their first
keys, then inside the one chunk that holds it: a dozen keys read, where reading the
rows around it would copy hundreds. The end is read from the rows after the start
(``END_ROWS``: most buckets hold a row or two), and searched for like the start, in its
own page, when the bucket runs past them.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core.tuning import END_ROWS
from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.gather import last_at_or_below

__all__ = ["mapped_bucket_bounds"]

_TOP = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(**JIT)
def _first_at_least(values, first_row, value_index, lo, hi, target):
    """The first row in ``[lo, hi)`` whose key is at least ``target``; ``hi`` if none."""
    if lo >= hi:
        return lo
    a = last_at_or_below(first_row, lo)
    if values[value_index[a] + lo - first_row[a]] >= target:
        return lo
    # the last chunk of the range whose first row in the range holds a key below target
    ca, cb = a, last_at_or_below(first_row, hi - 1)
    while ca < cb:
        m = (ca + cb + 1) >> 1
        if values[value_index[m]] < target:
            ca = m
        else:
            cb = m - 1
    s = max(first_row[ca], lo)
    e = hi if ca + 1 >= first_row.size else min(first_row[ca + 1], hi)
    base = value_index[ca] - first_row[ca]
    lo2, hi2 = s + 1, e  # the key of row s is below target
    while lo2 < hi2:
        mid = (lo2 + hi2) >> 1
        if values[base + mid] < target:
            lo2 = mid + 1
        else:
            hi2 = mid
    return lo2  # e: the next chunk's first key (or hi) is the first at least target


@njit(**JIT)
def mapped_bucket_bounds(values, first_row, value_index, page_table, page_rows, num_rows, keys):
    """``(start, end)`` int64 rows of each key's bucket (``start == end``: no row has the
    key), as ``query/probe.py: bucket_bounds`` finds them."""
    n = keys.size
    start = np.empty(n, dtype=np.int64)
    end = np.empty(n, dtype=np.int64)
    for i in range(n):
        k = keys[i]
        a = min(np.searchsorted(page_table, k, side="left") * page_rows, num_rows)
        s = _first_at_least(values, first_row, value_index, a, min(a + page_rows, num_rows), k)
        # the end: the first row from the start whose key is not k, among the next few rows
        e = s
        stop = min(s + END_ROWS, num_rows)
        c = -1
        while e < stop:
            if c < 0 or (c + 1 < first_row.size and e >= first_row[c + 1]):
                c = last_at_or_below(first_row, e)
            if values[value_index[c] + e - first_row[c]] != k:
                break
            e += 1
        if e == stop and stop < num_rows:  # a longer run: search its end's page
            a = min(np.searchsorted(page_table, k, side="right") * page_rows, num_rows)
            b = min(a + page_rows, num_rows)
            e = b if k == _TOP else _first_at_least(values, first_row, value_index, a, b, k + np.uint64(1))
        start[i] = s
        end[i] = max(e, s)
    return start, end
