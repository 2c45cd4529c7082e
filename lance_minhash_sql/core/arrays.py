"""Arrays as the kernels take them.

Numba compiles a kernel once per combination of argument types, and an array's
writability is part of its type. Arrow buffers and memory maps are read-only, so every
array handed to a kernel is passed read-only: one compilation, whatever its origin.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["readonly", "sorted_unique", "permute", "ONE_CHUNK", "NPY_HEADER_LOCK"]


def readonly(a: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous view of ``a`` (a copy only when ``a`` is not contiguous).

    >>> v = readonly(np.arange(3)); v.flags.writeable, v.tolist()
    (False, [0, 1, 2])
    """
    v = np.ascontiguousarray(a).view()
    v.setflags(write=False)
    return v


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, ascending: ``np.unique`` by sorting (numpy's
    hash-based ``np.unique`` is far slower on millions of integers).

    >>> sorted_unique(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    b = np.sort(a)
    if b.size < 2:
        return b
    keep = np.empty(b.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(b[1:], b[:-1], out=keep[1:])
    return b if keep.all() else b[keep]  # (distinct already: the sorted copy, not a second)



def permute(order: np.ndarray, *arrays: np.ndarray) -> None:
    """Each of ``arrays`` reordered by ``order`` in place, one at a time: beside them only
    one gather is held, freed once copied back.

    >>> a, b = np.array([10, 20, 30]), np.array([1, 2, 3]); permute(np.array([2, 0, 1]), a, b)
    >>> a.tolist(), b.tolist()
    ([30, 10, 20], [3, 1, 2])
    """
    for a in arrays:
        a[:] = a[order]

# The chunk starts of an array read as one chunk (the chunked-column kernels take a list
# of chunk starts; an in-memory or contiguous column has one chunk, starting at row 0).
ONE_CHUNK = readonly(np.zeros(1, dtype=np.int64))


# Held while a .npy / .npz file is read: numpy parses each array's header with
# ast.literal_eval, and CPython 3.11's parser fails on concurrent threads ("SystemError:
# AST constructor recursion depth mismatch"), e.g. eight cold openers loading the Unicode
# tables, or star walks on DuckDB's threads reading their blocks back from disk.
NPY_HEADER_LOCK = threading.Lock()
