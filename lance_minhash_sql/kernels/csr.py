"""Sets stored as spans of one values array (row ``r``'s values are
``values[starts[r]:ends[r]]``; a CSR is the case ``starts = offsets[:-1]``,
``ends = offsets[1:]``), gathered into a CSR of their own without index arrays: a gather by
``np.repeat`` and ``np.arange`` holds two int64 arrays the size of the values.

>>> import numpy as np
>>> o, v = csr_take(np.array([0, 2, 3, 6]), np.arange(6), np.array([2, 0]))
>>> o.tolist(), v.tolist()
([0, 3, 5], [3, 4, 5, 0, 1])
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["spans_take", "csr_take"]


@njit(**JIT)
def spans_take(starts, ends, values, rows):
    """The sets ``rows`` as a CSR of their own, ``(offsets, values)``."""
    n = rows.size
    out_offsets = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        r = rows[i]
        out_offsets[i + 1] = out_offsets[i] + ends[r] - starts[r]
    out = np.empty(out_offsets[n], dtype=values.dtype)
    for i in range(n):
        r = rows[i]
        o = out_offsets[i]
        for j in range(ends[r] - starts[r]):  # a loop: slice assignment compiles numba's broadcasting code
            out[o + j] = values[starts[r] + j]
    return out_offsets, out


def csr_take(offsets: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``rows`` of a CSR as a CSR of their own, ``(offsets, values)``."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    return spans_take(offsets[:-1], offsets[1:], values, np.asarray(rows, dtype=np.int64))
