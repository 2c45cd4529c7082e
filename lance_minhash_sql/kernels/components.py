"""Kernels of the self-join under a memory budget: a bit set of docs, and connected
components over dense ids in four bytes an id.

The union-find here keeps one ``parent`` array and no sizes: a union points the larger
root at the smaller one, so every root is its component's smallest id, and path halving
keeps the trees flat (O(log n) amortised per operation without union by size; measured on
the self-join's links it is within the noise of union by size). After :func:`flatten_roots`
``parent[x]`` is the smallest id of ``x``'s component.

>>> import numpy as np
>>> parent = np.arange(6, dtype=np.int32)
>>> union_min(parent, np.array([4, 1, 5], np.uint32), np.array([2, 4, 0], np.uint32))
3
>>> flatten_roots(parent); parent.tolist()
[0, 1, 1, 3, 1, 0]
>>> marks = new_marks(6)
>>> linked_members(parent, marks).tolist()
[0, 1, 2, 4, 5]
>>> marks = new_marks(200)
>>> set_marks(marks, np.array([3, 64, 130, 199], np.uint32), True)
>>> ids, prefix = marked_ids(marks)
>>> ids.tolist(), ranks(marks, prefix, np.array([130, 3, 199], np.uint32)).tolist()
([3, 64, 130, 199], [2, 0, 3])
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.unionfind import find

__all__ = ["new_marks", "count_unmarked", "set_marks", "marked_ids", "ranks", "union_min", "flatten_roots",
           "linked_members", "is_marked"]


def new_marks(n: int) -> np.ndarray:
    """A cleared bit set of ``n`` ids: ``uint64`` words, id ``x`` at bit ``x & 63`` of word ``x >> 6``."""
    return np.zeros((n + 63) // 64, dtype=np.uint64)


@njit(**JIT, inline="always")
def _bit(x):
    return np.uint64(1) << np.uint64(x & 63)


@njit(**JIT, inline="always")
def _popcount(v):
    v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
    v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
    v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (v * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(**JIT)
def count_unmarked(marks, ids):
    """How many of the distinct ``ids`` are not set."""
    n = 0
    for i in range(ids.size):
        x = ids[i]
        if not marks[x >> 6] & _bit(x):
            n += 1
    return n


@njit(**JIT)
def set_marks(marks, ids, value):
    """Set (``value`` True) or clear the bits of ``ids``."""
    for i in range(ids.size):
        x = ids[i]
        if value:
            marks[x >> 6] |= _bit(x)
        else:
            marks[x >> 6] &= ~_bit(x)


@njit(**JIT)
def marked_ids(marks):
    """``(ids, prefix)``: the set ids ascending (``uint32``), and per word the number of
    set bits in the words before it (for :func:`ranks`)."""
    prefix = np.empty(marks.size, dtype=np.int64)
    n = 0
    for w in range(marks.size):
        prefix[w] = n
        n += _popcount(marks[w])
    out = np.empty(n, dtype=np.uint32)
    j = 0
    for w in range(marks.size):
        v = marks[w]
        while v:
            low = v & (~v + np.uint64(1))
            out[j] = w * 64 + _popcount(low - np.uint64(1))
            j += 1
            v ^= low
    return out, prefix


@njit(**JIT)
def ranks(marks, prefix, ids):
    """Position of each (set) id among the set ids: an index into :func:`marked_ids`'s ids."""
    out = np.empty(ids.size, dtype=np.uint32)
    for i in range(ids.size):
        x = ids[i]
        below = marks[x >> 6] & (_bit(x) - np.uint64(1))
        out[i] = prefix[x >> 6] + _popcount(below)
    return out


@njit(**JIT)
def union_min(parent, a, b):
    """Merge the components of ``a[i]`` and ``b[i]`` for every i, the smaller root kept;
    returns the number of merges."""
    merges = 0
    for i in range(a.size):
        ra = find(parent, a[i])
        rb = find(parent, b[i])
        if ra == rb:
            continue
        if ra < rb:
            parent[rb] = ra
        else:
            parent[ra] = rb
        merges += 1
    return merges


@njit(**JIT)
def flatten_roots(parent):
    """Point every id at its root (the smallest id of its component), in place. Ids
    ascend and a root is smaller than its members, so one pass in id order suffices."""
    for x in range(parent.size):
        parent[x] = parent[parent[x]]


@njit(**JIT)
def linked_members(parent, marks):
    """Ascending ids in a component of two or more, from flattened ``parent``; ``marks``
    (a cleared bit set of the ids) is used as scratch and left cleared."""
    n = 0
    for x in range(parent.size):
        r = parent[x]
        if r != x:
            if not marks[r >> 6] & _bit(r):
                marks[r >> 6] |= _bit(r)
                n += 1
            n += 1
    out = np.empty(n, dtype=np.int64)
    j = 0
    for x in range(parent.size):
        if parent[x] != x or marks[x >> 6] & _bit(x):
            out[j] = x
            j += 1
    for i in range(n):
        x = out[i]
        marks[x >> 6] &= ~_bit(x)
    return out




@njit(**JIT, inline="always")
def is_marked(marks, x):
    """Is id ``x`` set in the bit set ``marks``?"""
    return (marks[x >> 6] & _bit(x)) != np.uint64(0)
