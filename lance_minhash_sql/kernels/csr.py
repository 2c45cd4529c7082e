"""Rows of a CSR (``offsets`` int64[n + 1], ``values``) copied without index arrays: a
gather by ``np.repeat`` and ``np.arange`` holds two int64 arrays the size of the values.

>>> import numpy as np
>>> o, v = csr_take(np.array([0, 2, 3, 6]), np.arange(6), np.array([2, 0]))
>>> o.tolist(), v.tolist()
([0, 3, 5], [3, 4, 5, 0, 1])
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["csr_take", "csr_scatter"]


@njit(**JIT)
def csr_take(offsets, values, rows):
    """The rows ``rows`` of a CSR as a CSR of their own, ``(offsets, values)``."""
    n = rows.size
    out_offsets = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        r = rows[i]
        out_offsets[i + 1] = out_offsets[i] + offsets[r + 1] - offsets[r]
    out = np.empty(out_offsets[n], dtype=values.dtype)
    for i in range(n):
        r = rows[i]
        out[out_offsets[i]:out_offsets[i + 1]] = values[offsets[r]:offsets[r + 1]]
    return out_offsets, out


@njit(**JIT)
def csr_scatter(offsets, values, dest, out):
    """Row ``i`` of a CSR copied to ``out[dest[i]:]`` (its values, in order)."""
    for i in range(offsets.size - 1):
        a, b = offsets[i], offsets[i + 1]
        out[dest[i]:dest[i] + b - a] = values[a:b]
