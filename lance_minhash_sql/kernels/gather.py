"""Gathers of rows from a memory-mapped index file (io/mapped.py), one compiled loop each.

* :func:`gather_values`: a flat mini-block column (``bands.lance``): row ``r`` lies in
  the chunk ``c`` with ``first_row[c] <= r < first_row[c + 1]``, at position
  ``value_index[c] + r - first_row[c]`` of the typed values;
* :func:`gather_rows`: fixed-size-list rows stored plainly (``signatures.lance``): row
  ``r`` lies in the page ``p`` with ``starts[p] <= r < starts[p + 1]``, its ``k`` items
  from ``first_item[p] + (r - starts[p]) * k``;
* :func:`copy_range`: a range of rows of a flat mini-block column, chunk by chunk (a
  self-join shard reads millions of band rows at once: one call without the GIL rather
  than a Python loop over its chunks, so the mapping's page faults are taken while other
  threads run).

Rows may come in any order. Each returns False, leaving ``out`` partly written, when a
row is outside the file's rows (the caller names the file in its error).
"""

from __future__ import annotations

from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["gather_values", "gather_rows", "copy_range", "last_at_or_below"]


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
