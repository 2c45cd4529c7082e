"""Rows of a local index file's fixed-width column read through a memory map.

``signatures.lance`` stores each signature page as plain rows of ``2k`` bytes (the
layout :func:`.chunks.fixed_rows` recognizes). On an object store those rows are read as
byte ranges; on a local disk a memory map gathers any set of rows with one vectorized copy
per page, from the OS page cache: about 0.1 us a row against 12-30 us for a Lance
``take_rows`` of the same rows. A self-join over a segment whose signatures do not fit
the process cache needs a few hundred thousand scattered rows per shard, so this is what
keeps its time linear in the rows.

Memory: the pages a gather touches count as resident (file-backed, clean) only until
that page's copy is done; they are then handed back with ``madvise(MADV_DONTNEED)``, so
the process holds at most one page's touched bytes (16 MiB for 65,536 rows of k=128)
beyond the rows it asked for. The OS page cache keeps the file either way.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from ..errors import CorruptIndexError

__all__ = ["MappedRows", "mapped_rows"]

_PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)  # not on Windows: pages then stay mapped


class MappedRows:
    """The rows of :class:`.chunks.FixedRows`'s layout (``starts``, ``positions``,
    ``row_bytes``) in a local file, read through one read-only memory map."""

    def __init__(self, path: str, starts: np.ndarray, positions: np.ndarray, row_bytes: int):
        self.path = path
        self.starts = starts
        self.positions = positions
        self.row_bytes = int(row_bytes)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            end = int(positions[-1]) + int(starts[-1] - starts[-2]) * self.row_bytes if positions.size else 0
            if end > size:
                raise CorruptIndexError(f"{path}: its rows end at byte {end} but the file has {size} bytes; "
                                        "the file is truncated; rebuild the index")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None

    @property
    def num_rows(self) -> int:
        return int(self.starts[-1])

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """``uint8[n, row_bytes]`` of the sorted, distinct ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((rows.size, self.row_bytes), dtype=np.uint8)
        if rows.size == 0:
            return out
        if rows[0] < 0 or rows[-1] >= self.num_rows:
            raise CorruptIndexError(f"{self.path}: rows {rows[0]}..{rows[-1]} outside its {self.num_rows} rows")
        bounds = np.searchsorted(rows, self.starts)
        for p in np.flatnonzero(bounds[1:] > bounds[:-1]).tolist():
            a, b = int(bounds[p]), int(bounds[p + 1])
            first, count = int(self.starts[p]), int(self.starts[p + 1] - self.starts[p])
            pos = int(self.positions[p])
            page = np.frombuffer(self._map, dtype=np.uint8, count=count * self.row_bytes, offset=pos)
            out[a:b] = page.reshape(count, self.row_bytes)[rows[a:b] - first]
            del page
            if _DONTNEED is not None:
                lo = pos - pos % _PAGE
                self._map.madvise(_DONTNEED, lo, pos + count * self.row_bytes - lo)
        return out


def mapped_rows(path: str, layout) -> MappedRows | None:
    """A :class:`MappedRows` over ``layout`` (a :class:`.chunks.FixedRows`, or None when the
    column is not laid out as plain rows: None then)."""
    if layout is None:
        return None
    return MappedRows(path, layout.starts, layout.positions, layout.row_bytes)
