"""Reads of a memory-mapped index file's columns (io/mapped.py): rows gathered by
position, and the buckets of a few band keys searched in place.

* :func:`gather_values`: a flat mini-block column (``bands.lance``): row ``r`` lies in
  the chunk ``c`` with ``first_row[c] <= r < first_row[c + 1]``, at position
  ``value_index[c] + r - first_row[c]`` of the typed values (:func:`values_at`: the same
  by numpy indexing);
* :func:`gather_rows`: fixed-size-list rows stored plainly (``signatures.lance``): row
  ``r`` lies in the page ``p`` with ``starts[p] <= r < starts[p + 1]``, its ``k`` items
  from ``first_item[p] + (r - starts[p]) * k``;
* :func:`copy_range`: a range of rows of a flat mini-block column, chunk by chunk (a
  self-join shard reads millions of band rows at once: one call without the GIL rather
  than a Python loop over its chunks, so the mapping's page faults are taken while other
  threads run).

Rows may come in any order. Each returns False, leaving ``out`` partly written, when a
row is outside the file's rows (the caller names the file in its error).

The bucket search (``query/probe.py``'s few queries; ``docs/search.md``): the keys of a
band file ascend over its rows. For a key ``K`` the bucket starts at the first row
``>= K`` of the first page whose last key is ``>= K`` (the page table), and ends at the
first row ``> K`` of the first page whose last key is ``> K``. The end is read from the
:data:`END_ROWS` rows after the start (most buckets hold a row or two), and searched for
like the start, in its own page, when the bucket runs past them. Twice, with the same
answer (``tests/test_probe.py``):

* :func:`mapped_bucket_bounds`, compiled (numba loaded): the start is two binary searches,
  over the chunks of its page by their first keys, then inside the one chunk that holds
  it: a dozen keys read, where reading the rows around it would copy hundreds;
* :func:`mapped_bucket_bounds_numpy`, for a process that has not loaded numba: every key
  at once, each step reading :data:`FANOUT` keys spread evenly over a key's range (a
  4,096-row page: two steps).
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core.tuning import END_ROWS, FANOUT
from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["gather_values", "gather_rows", "copy_range", "last_at_or_below", "values_at", "mapped_bucket_bounds",
           "mapped_bucket_bounds_numpy"]

_TOP = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(**JIT)
def last_at_or_below(a, x):
    """The last ``i`` with ``a[i] <= x`` (``a`` sorted, ``a[0] <= x``)."""
    lo, hi = 0, a.size
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


def values_at(values: np.ndarray, first_row: np.ndarray, value_index: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Values of ``rows`` of a flat mini-block column's chunks, by numpy indexing
    (:func:`gather_values` without numba)."""
    c = np.searchsorted(first_row, rows, side="right") - 1
    return values[value_index[c] + rows - first_row[c]]


@njit(**JIT)
def gather_values(values, value_index, first_row, num_rows, rows, out):
    """``out[i] = `` the value of row ``rows[i]``; False if a row is outside ``[0, num_rows)``."""
    nc = first_row.size
    c = 0
    for i in range(rows.size):
        r = rows[i]
        if r < 0 or r >= num_rows:
            return False
        # sorted rows mostly stay in the chunk of the row before
        if r < first_row[c] or (c + 1 < nc and r >= first_row[c + 1]):
            c = last_at_or_below(first_row, r)
        out[i] = values[value_index[c] + r - first_row[c]]
    return True


@njit(**JIT)
def gather_rows(items, first_item, starts, rows, out):
    """``out[i, :] = `` the ``k`` items of row ``rows[i]``, and ``(ok, lowest, highest)``
    item positions read (for handing the touched pages back); ``ok`` is False if a row is
    outside ``[0, starts[-1])``."""
    k = out.shape[1]
    num_rows = starts[starts.size - 1]
    lowest = items.size
    highest = 0
    for i in range(rows.size):
        r = rows[i]
        if r < 0 or r >= num_rows:
            return False, lowest, highest
        p = last_at_or_below(starts, r)
        base = first_item[p] + (r - starts[p]) * k
        for j in range(k):
            out[i, j] = items[base + j]
        lowest = min(lowest, base)
        highest = max(highest, base + k)
    return True, lowest, highest


@njit(**JIT)
def copy_range(values, value_index, first_row, num_rows, start, out):
    """``out[:] = `` the values of rows ``[start, start + out.size)`` (inside the column:
    the caller checks). Element loops, not slice assignment: numba's slice-copy code
    costs seconds to compile."""
    nc = first_row.size
    c = last_at_or_below(first_row, start)
    at = start
    end = start + out.size
    while at < end:
        stop = first_row[c + 1] if c + 1 < nc else num_rows
        if stop > end:
            stop = end
        i = value_index[c] + at - first_row[c]
        for j in range(stop - at):
            out[at - start + j] = values[i + j]
        at = stop
        c += 1


# --------------------------------------------------------------------------- the bucket search


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
    key), searched in the chunks ``(values, first_row, value_index)`` of the band keys (the
    module doc)."""
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


def _first_at_least_numpy(chunks, lo: np.ndarray, hi: np.ndarray, target: np.ndarray) -> np.ndarray:
    """For each lane, the first row in ``[lo, hi)`` whose key is at least ``target``, ``hi``
    if none (keys ascending), the keys read by :func:`values_at` from ``chunks``
    (``(values, first_row, value_index)``).

    Each step reads :data:`FANOUT` keys spread evenly over the lane's range, at once for
    every lane; the count of them below the target narrows the range to the gap after the
    last of them that is below, and a range of at most :data:`FANOUT` rows is read whole.
    A position past the range reads the range's last key instead, which is below the target
    only when every key of the range is (so the count, capped at the positions inside,
    stays right)."""
    lo = lo.astype(np.int64, copy=True)
    span = hi - lo
    t = target[:, None]
    at = np.arange(FANOUT, dtype=np.int64)
    while span.any():
        step = (span + (FANOUT - 1)) // FANOUT
        np.maximum(step, 1, out=step)
        pos = step[:, None] * at
        pos += lo[:, None]
        np.minimum(pos, np.maximum(lo + span - 1, 0)[:, None], out=pos)
        below = np.count_nonzero(values_at(*chunks, pos.ravel()).reshape(pos.shape) < t, axis=1)
        c = np.minimum(below, (span + step - 1) // step)  # keys below the target among the positions inside
        # the first row at least the target lies after position c - 1 and at or before position c
        gap = c > 0
        new_lo = np.where(gap, lo + step * (c - 1) + 1, lo)
        span = np.where(gap, np.minimum(step * c, span) - step * (c - 1) - 1, 0)
        lo = new_lo
    return lo


def mapped_bucket_bounds_numpy(values, first_row, value_index, page_table: np.ndarray, page_rows: int,
                               num_rows: int, keys: np.ndarray):
    """:func:`mapped_bucket_bounds` by numpy, every key at once (the module doc)."""
    chunks = (values, first_row, value_index)
    first = np.searchsorted(page_table, keys, side="left")  # the page where the bucket starts
    a = np.minimum(first.astype(np.int64) * page_rows, num_rows)
    start = _first_at_least_numpy(chunks, a, np.minimum(a + page_rows, num_rows), keys)
    width = min(END_ROWS, num_rows)
    at = np.minimum(start, num_rows - width)  # the window, inside the file, holds the start
    pos = at[:, None] + np.arange(width, dtype=np.int64)
    equal = (values_at(*chunks, pos.ravel()).reshape(pos.shape) == keys[:, None]) & (pos >= start[:, None])
    end = start + np.count_nonzero(equal, axis=1)  # keys from the start ascend: the equal ones come first
    left = np.flatnonzero((end >= at + width) & (at + width < num_rows))  # the bucket runs past the window
    if left.size:
        k = keys[left]
        after = np.searchsorted(page_table, k, side="right")  # the page where the bucket ends
        a = np.minimum(after.astype(np.int64) * page_rows, num_rows)
        b = np.minimum(a + page_rows, num_rows)
        top = k == _TOP  # no key is above it: the end is the page's end
        found = _first_at_least_numpy(chunks, a, b, np.where(top, k, k + np.uint64(1)))
        end[left] = np.maximum(np.where(top, b, found), start[left])
    return start, end
