"""Union-find over dense ids ``0 .. n-1``: path halving, union by size.

A structure is the tuple ``(parent, size)`` of integer arrays (:func:`new_union_find`);
``parent[x] == x`` marks a root and ``size[root]`` is its component's size (other entries
of ``size`` are stale). Amortised cost per operation is the inverse Ackermann function.

>>> import numpy as np
>>> parent, size = new_union_find(5)
>>> union_pairs(parent, size, np.array([0, 3]), np.array([1, 4]))
2
>>> union_pairs(parent, size, np.array([1]), np.array([0]))
0
>>> roots = flatten(parent)
>>> bool(roots[0] == roots[1]), bool(roots[3] == roots[4]), bool(roots[0] == roots[3])
(True, True, False)
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["new_union_find", "find", "union", "union_pairs", "flatten", "component_sizes", "component_min"]


def new_union_find(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(parent, size)`` of ``n`` singletons (int32 below 2**31 ids, else int64)."""
    dtype = np.int32 if n < 2**31 else np.int64
    return np.arange(n, dtype=dtype), np.ones(n, dtype=dtype)


@njit(**JIT, inline="always")
def find(parent, x):
    """Root of ``x``, halving the path on the way."""
    while parent[x] != x:
        g = parent[parent[x]]
        parent[x] = g
        x = g
    return x


@njit(**JIT, inline="always")
def union(parent, size, a, b):
    """Merge the components of ``a`` and ``b`` (the smaller under the larger); True if merged."""
    ra = find(parent, a)
    rb = find(parent, b)
    if ra == rb:
        return False
    if size[ra] < size[rb]:
        ra, rb = rb, ra
    parent[rb] = ra
    size[ra] += size[rb]
    return True


@njit(**JIT)
def union_pairs(parent, size, a, b):
    """``union(a[i], b[i])`` for every i; returns the number of merges."""
    merges = 0
    for i in range(a.size):
        if union(parent, size, a[i], b[i]):
            merges += 1
    return merges


@njit(**JIT)
def flatten(parent):
    """Root of every id (and every ``parent`` entry pointed straight at it)."""
    n = parent.size
    roots = np.empty(n, dtype=parent.dtype)
    for x in range(n):
        r = find(parent, x)
        roots[x] = r
        parent[x] = r
    return roots


@njit(**JIT)
def component_sizes(roots):
    """Size of each id's component, from :func:`flatten`'s roots."""
    n = roots.size
    count = np.zeros(n, dtype=np.int64)
    for x in range(n):
        count[roots[x]] += 1
    out = np.empty(n, dtype=np.int64)
    for x in range(n):
        out[x] = count[roots[x]]
    return out


@njit(**JIT)
def component_min(roots, values):
    """Smallest ``values[y]`` over each id's component."""
    n = roots.size
    best = np.empty(n, dtype=values.dtype)
    seen = np.zeros(n, dtype=np.bool_)
    for x in range(n):
        r = roots[x]
        if not seen[r] or values[x] < best[r]:
            best[r] = values[x]
            seen[r] = True
    out = np.empty(n, dtype=values.dtype)
    for x in range(n):
        out[x] = best[roots[x]]
    return out
