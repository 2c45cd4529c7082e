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

__all__ = ["sort_values", "order_by_pair"]

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
