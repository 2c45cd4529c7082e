"""Small sorts written as plain loops, for kernels on a query's or a bucket's path.

numba compiles ``np.sort``, ``np.argsort`` and ``np.partition`` from generic templates:
each costs seconds of compilation per dtype on a fresh install, a plain loop a tenth
of that. These kernels sort the
few hundred or thousand values a query or a bucket holds, where a merge sort is as fast,
and compile in a fraction of the time. Both are stable bottom-up merge sorts: runs of
:data:`_RUN` values are insertion-sorted first, then merged pairwise through one scratch
buffer.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["sort_values", "sort_hashes", "new_hash_scratch", "order_by_pair"]

_RUN = 16


@njit(**JIT)
def sort_values(a):
    """Sort the 1-D array ``a`` in place (ascending)."""
    n = a.size
    for lo in range(0, n, _RUN):
        hi = min(lo + _RUN, n)
        for i in range(lo + 1, hi):
            v = a[i]
            j = i - 1
            while j >= lo and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v
    if n <= _RUN:
        return
    src = a
    dst = np.empty_like(a)
    width = _RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for w in range(lo, hi):
                if j >= hi or (i < mid and src[i] <= src[j]):
                    dst[w] = src[i]
                    i += 1
                else:
                    dst[w] = src[j]
                    j += 1
        src, dst = dst, src
        width *= 2
    if src is not a:
        for i in range(n):  # a loop: slice assignment compiles numba's broadcasting code (seconds)
            a[i] = src[i]


@njit(**JIT)
def new_hash_scratch():
    """Scratch buffers of :func:`sort_hashes` (grown by it as needed)."""
    return np.empty(1024, dtype=np.uint64), np.empty(1025, dtype=np.int64)


@njit(**JIT)
def sort_hashes(a, tmp, counts):
    """Sort ``a`` in place (ascending), for values spread evenly over ``uint64`` (hashes):
    one counting pass on the top bits into about one bucket per value, then an insertion
    sort of the nearly sorted result (each value moves past its bucket's few others). Any
    input comes out sorted; uniform hashes in linear time, faster than
    :func:`sort_values` at a row's few dozen shingles (``docs/performance.md``). ``tmp`` (uint64) and ``counts`` (int64)
    are scratch: returned, grown when ``a`` needs more (:func:`new_hash_scratch`)."""
    n = a.size
    if n < 2:
        return tmp, counts
    bits = 1
    while (1 << bits) < n:
        bits += 1
    nb = 1 << bits
    if tmp.size < n:
        tmp = np.empty(2 * n, dtype=np.uint64)
    if counts.size < nb + 1:
        counts = np.empty(2 * nb + 1, dtype=np.int64)
    shift = np.uint64(64 - bits)
    for b in range(nb + 1):
        counts[b] = 0
    for i in range(n):
        counts[(a[i] >> shift) + 1] += 1
    for b in range(nb):
        counts[b + 1] += counts[b]
    for i in range(n):
        b = a[i] >> shift
        tmp[counts[b]] = a[i]
        counts[b] += 1
    a[0] = tmp[0]
    for i in range(1, n):
        v = tmp[i]
        j = i - 1
        while j >= 0 and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v
    return tmp, counts


@njit(**JIT)
def order_by_pair(idx, primary, secondary):
    """``idx`` (int64 positions) reordered by ``(primary[i], secondary[i])``, stably."""
    n = idx.size
    src = idx.copy()
    for lo in range(0, n, _RUN):
        hi = min(lo + _RUN, n)
        for i in range(lo + 1, hi):
            v = src[i]
            j = i - 1
            while j >= lo and (primary[src[j]] > primary[v]
                               or (primary[src[j]] == primary[v] and secondary[src[j]] > secondary[v])):
                src[j + 1] = src[j]
                j -= 1
            src[j + 1] = v
    dst = np.empty(n, dtype=np.int64)
    width = _RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for w in range(lo, hi):
                if j >= hi:
                    take_left = True
                elif i >= mid:
                    take_left = False
                else:
                    a = src[i]
                    b = src[j]
                    take_left = primary[a] < primary[b] or (primary[a] == primary[b] and secondary[a] <= secondary[b])
                if take_left:
                    dst[w] = src[i]
                    i += 1
                else:
                    dst[w] = src[j]
                    j += 1
        src, dst = dst, src
        width *= 2
    return src
