"""Kernels of the self-join under a memory budget: a bit set of docs, and connected
components over dense ids in four bytes an id (the package's one union-find).

The union-find keeps one ``parent`` array and no sizes: a union points the larger
root at the smaller one, so every root is its component's smallest id, and path halving
keeps the trees flat (O(log n) amortised per operation without union by size). After :func:`flatten_roots`
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

A *meter* bounds the blocks of ``parent`` a kernel touches (a union-find larger than its
share of memory lives in a file whose mapped pages are handed back to the OS when the
meter is full: ``selfjoin/parent.py``): ``seen`` (:func:`new_marks` of the blocks) and
``meter`` (:func:`new_meter`: an ``int64`` array whose slots :data:`METER_SHIFT`,
:data:`METER_MOST` and :data:`METER_USED` hold the block size as a shift, the most blocks
and the blocks touched), id ``x`` in block ``x >> meter[METER_SHIFT]``. The ``*_within``
kernels stop before touching a block past ``most`` and say where to resume once the
caller has handed the pages back and cleared the meter (:func:`clear_meter`); what they
did before stopping stands (a halved path is still a path to the same root). The plain
kernels (:func:`union_min`, :func:`flatten_roots`, :func:`linked_members`) are the
in-memory forms, with no meter to check (the metered forms cost a check per touch).

>>> parent = np.arange(8, dtype=np.int32)
>>> seen, meter = new_marks(4), new_meter(1, 1)  # 2 ids a block, 1 block at a time
>>> union_within(parent, np.array([1, 6], np.uint32), np.array([0, 7], np.uint32), np.int64(0), seen, meter)
(1, 1)
>>> clear_meter(seen, meter); union_within(parent, np.array([1, 6], np.uint32), np.array([0, 7], np.uint32), np.int64(1), seen, meter)
(2, 1)
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["find", "new_marks", "count_unmarked", "set_marks", "marked_ids", "ranks", "union_min", "flatten_roots",
           "linked_members", "is_marked", "METER_SHIFT", "METER_MOST", "METER_USED", "new_meter", "clear_meter",
           "find_within", "union_within", "flatten_within",
           "count_linked", "collect_linked"]


@njit(**JIT, inline="always")
def find(parent, x):
    """Root of ``x``, halving the path on the way."""
    while parent[x] != x:
        g = parent[parent[x]]
        parent[x] = g
        x = g
    return x




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


# the slots of a meter (one int64 array, so the kernels take it as an argument and update it)
METER_SHIFT = 0  # id x is in block x >> meter[METER_SHIFT]
METER_MOST = 1  # the most blocks a kernel may touch before it stops
METER_USED = 2  # the blocks touched since the meter was cleared


def new_meter(shift: int, most: int) -> np.ndarray:
    """A cleared meter of blocks of ``1 << shift`` ids, at most ``most`` of them touched."""
    meter = np.zeros(3, dtype=np.int64)
    meter[METER_SHIFT], meter[METER_MOST] = shift, most
    return meter


def clear_meter(seen: np.ndarray, meter: np.ndarray) -> None:
    """Forget the blocks touched (after their pages were handed back)."""
    seen.fill(0)
    meter[METER_USED] = 0


@njit(**JIT, inline="always")
def _touch(seen, meter, x):
    """Record that id ``x``'s block is touched; False (nothing recorded) when it is a new
    block and the meter is full."""
    block = np.int64(x) >> meter[METER_SHIFT]
    if seen[block >> 6] & _bit(block):
        return True
    if meter[METER_USED] >= meter[METER_MOST]:
        return False
    seen[block >> 6] |= _bit(block)
    meter[METER_USED] += 1
    return True


@njit(**JIT, inline="always")
def find_within(parent, x, seen, meter):
    """Root of ``x``, halving the path on the way (as :func:`find`, writing only
    what changes), or -1 where the next step would touch a block past the meter."""
    while True:
        if not _touch(seen, meter, x):
            return -1
        p = parent[x]
        if p == x:
            return x
        if not _touch(seen, meter, p):
            return -1
        g = parent[p]
        if g != p:
            parent[x] = g
        x = g


@njit(**JIT)
def union_within(parent, a, b, start, seen, meter):
    """Merge the components of ``a[i]`` and ``b[i]`` for ``i`` from ``start``, the smaller
    root kept, until the meter is full; returns ``(next i, merges)`` (``next i == a.size``
    when done)."""
    merges = 0
    i = start
    while i < a.size:
        ra = find_within(parent, a[i], seen, meter)
        if ra < 0:
            break
        rb = find_within(parent, b[i], seen, meter)
        if rb < 0:
            break
        if ra < rb:
            parent[rb] = ra
            merges += 1
        elif rb < ra:
            parent[ra] = rb
            merges += 1
        i += 1
    return i, merges


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
def flatten_within(parent, start, seen, meter):
    """Point ids from ``start`` at their root (the smallest id of their component), in
    place, until the meter is full; returns the next id. Ids ascend and a root is smaller
    than its members, so one pass in id order suffices."""
    x = start
    while x < parent.size:
        if not _touch(seen, meter, x):
            break
        p = parent[x]
        if p != x:
            if not _touch(seen, meter, p):
                break
            g = parent[p]
            if g != p:
                parent[x] = g
        x += 1
    return x


@njit(**JIT)
def flatten_roots(parent):
    """Point every id at its root (the smallest id of its component), in place. Ids
    ascend and a root is smaller than its members, so one pass in id order suffices."""
    for x in range(parent.size):
        parent[x] = parent[parent[x]]


@njit(**JIT)
def count_linked(parent, marks, lo, hi):
    """First pass of :func:`linked_members` over ids ``[lo, hi)`` of flattened ``parent``
    (every span before the second): marks the roots of components of two or more in
    ``marks`` and returns how many ids of the span's components it newly counted."""
    n = 0
    for x in range(lo, hi):
        r = parent[x]
        if r != x:
            if not marks[r >> 6] & _bit(r):
                marks[r >> 6] |= _bit(r)
                n += 1
            n += 1
    return n


@njit(**JIT)
def collect_linked(parent, marks, lo, hi, ids, roots, at):
    """Second pass of :func:`linked_members` over ids ``[lo, hi)``: the span's ids in a
    component of two or more, ascending, into ``ids[at:]`` and their roots into
    ``roots[at:]``; returns the next ``at``."""
    for x in range(lo, hi):
        r = parent[x]
        if r != x or marks[x >> 6] & _bit(x):
            ids[at] = x
            roots[at] = r
            at += 1
    return at


@njit(**JIT)
def linked_members(parent, marks):
    """Ascending ids in a component of two or more, from flattened ``parent``; ``marks``
    (a cleared bit set of the ids) is used as scratch and left cleared."""
    n = count_linked(parent, marks, np.int64(0), np.int64(parent.size))
    out = np.empty(n, dtype=np.int64)
    roots = np.empty(n, dtype=parent.dtype)
    collect_linked(parent, marks, np.int64(0), np.int64(parent.size), out, roots, np.int64(0))
    for i in range(n):
        x = out[i]
        marks[x >> 6] &= ~_bit(x)
    return out


@njit(**JIT, inline="always")
def is_marked(marks, x):
    """Is id ``x`` set in the bit set ``marks``?"""
    return (marks[x >> 6] & _bit(x)) != np.uint64(0)
