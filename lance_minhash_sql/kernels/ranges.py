"""Copies of row ranges out of memory-mapped index files, without the GIL.

A flat mini-block column (``io/chunks.py``) stores its values in chunks of a few hundred
rows; chunk ``c`` holds rows ``[first_row[c], first_row[c + 1])`` starting at element
``value_index[c]`` of the file viewed as values. A self-join shard reads millions of band
rows at once: one kernel call copies them chunk by chunk (a Python loop over 4,000
chunks held the GIL for 30 ms a shard), and page faults of the mapping are taken while
other threads run.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .config import JIT

__all__ = ["copy_chunk_range"]


@njit(**JIT)
def copy_chunk_range(values, first_row, value_index, num_rows, start, out):
    """Rows ``[start, start + out.size)`` of a chunked column into ``out``."""
    count = out.size
    c = np.searchsorted(first_row, start, side="right") - 1
    at = start
    end = start + count
    while at < end:
        stop = first_row[c + 1] if c + 1 < first_row.size else num_rows
        n = min(stop, end) - at
        i = value_index[c] + at - first_row[c]
        out[at - start:at - start + n] = values[i:i + n]
        at += n
        c += 1
