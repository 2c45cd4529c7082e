"""Index files on a local disk, read through a memory map by the layout of
:mod:`.chunks` (docs/index-format.md): ``bands.lance``'s columns (:class:`MappedColumn`)
and ``signatures.lance``'s rows (:class:`MappedRows`). The chunk tables are decoded once
when the file is opened; a row is then a computed position in the mapping, so a query
costs no Lance call and no system call.

Mapped pages count in the process's resident set until they are handed back
(``MADV_DONTNEED``; the OS page cache keeps the file): bulk reads hand theirs back as
they go, a query's few pages are handed back in batches.
"""

from __future__ import annotations

import mmap
import threading
from typing import Iterator

import numpy as np

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.errors import CorruptIndexError
from lance_minhash_sql.core.tuning import (FAULT_AROUND_BYTES, PAGEWISE_RELEASE_ROWS, RELEASE_BYTES,
                                          RELEASE_SPAN_BYTES, SMALL_GATHER_ROWS)
from lance_minhash_sql.io.chunks import CHUNK_HEADER, chunk_bounds, layout_problem, pages_of_layout, row_pages, rows_problem
from lance_minhash_sql.io.lancefile import FileLayout
from lance_minhash_sql.kernels.config import numba_loaded
from lance_minhash_sql.kernels.gather import copy_range, gather_rows, gather_values, values_at

__all__ = ["MappedColumn", "MappedRows", "mapped_column", "mapped_rows", "map_file", "hand_back", "RELEASE_BYTES"]



_OS_PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)  # not on every OS: pages then stay mapped


def map_file(path: str) -> np.ndarray:
    """The file's bytes as a read-only ``uint8`` array over a memory map (a plain ndarray:
    no ``np.memmap`` bookkeeping on every index operation)."""
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mm, dtype=np.uint8)


def _mapping(mm: np.ndarray) -> mmap.mmap | None:
    """The ``mmap`` under an array from :func:`map_file` (None for other arrays)."""
    base = mm.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def hand_back(mapping: mmap.mmap | None, lo: int, hi: int) -> None:
    """``MADV_DONTNEED`` on the mapped bytes ``[lo, hi)`` now, widened to the blocks of
    :data:`FAULT_AROUND_BYTES` the kernel maps around a fault (left mapped, the blocks at
    both ends of every shard's read would add up): the copies
    are made and the OS page cache keeps the file, so the resident set drops. A block
    another thread is reading is mapped again on its next touch."""
    if mapping is None or _DONTNEED is None or hi <= lo:
        return
    lo -= lo % FAULT_AROUND_BYTES
    hi = -(-hi // FAULT_AROUND_BYTES) * FAULT_AROUND_BYTES  # (madvise clips it to the mapping)
    mapping.madvise(_DONTNEED, lo, hi - lo)


def _view(mm: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The mapping as an array of ``dtype`` (little-endian), from byte 0."""
    width = dtype.itemsize
    return mm[: mm.size - mm.size % width].view(dtype.newbyteorder("<"))


def _chunk_headers(mm: np.ndarray, head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(levels, value bytes)`` of the chunk headers at byte positions ``head`` (u16 and
    u32, little-endian): one 8-byte read a header where every one is 8-byte aligned (the
    writers align chunks), else byte by byte."""
    if head.size and not (head % 8).any() and int(head[-1]) + 8 <= mm.size:
        word = _view(mm, np.dtype(np.uint64))[head // 8]
        nbytes = (word >> np.uint64(16)) & np.uint64(0xFFFFFFFF)
        return (word & np.uint64(0xFFFF)).astype(np.int64), nbytes.astype(np.int64)
    levels = mm[head].astype(np.int64) | mm[head + 1].astype(np.int64) << 8
    return levels, sum(mm[head + 2 + i].astype(np.int64) << (8 * i) for i in range(4))


class MappedColumn:
    """A flat mini-block column of a memory-mapped file: every chunk table decoded at open
    (and every chunk header checked), then rows are gathered by computed position."""

    def __init__(self, mm: np.ndarray, path: str, layout: FileLayout, index: int, dtype):
        self.path = path
        self.dtype = np.dtype(dtype)
        width = self.dtype.itemsize
        mapping = _mapping(mm)
        firsts, values = [], []
        for page in pages_of_layout(layout, index):
            tpos, tsize = page.table
            if tpos + tsize > mm.size:
                raise CorruptIndexError(f"{path}: a chunk table ends past the end of the file; rebuild the index")
            starts, offsets = chunk_bounds(path, page, mm[tpos:tpos + tsize])
            if offsets[-1] > mm.size:
                raise CorruptIndexError(f"{path}: chunks end past the end of the file; rebuild the index")
            head = offsets[:-1]
            levels, nbytes = _chunk_headers(mm, head)
            counts = np.diff(starts)
            if (levels != 0).any() or (nbytes != counts * width).any() or (np.diff(offsets) < CHUNK_HEADER + nbytes).any():
                raise CorruptIndexError(f"{path}: a chunk's header does not match its chunk table entry; "
                                        "rebuild the index")
            firsts.append(page.first_row + starts[:-1])
            values.append(head + CHUNK_HEADER)
            # reading every chunk's header maps most of the page's file pages (the kernel
            # maps the pages around each fault too), the self-join's peak once resident:
            # hand them back at once
            hand_back(mapping, int(tpos), int(tpos + tsize))
            hand_back(mapping, int(offsets[0]), int(offsets[-1]))
        self.first_row = np.concatenate(firsts)  # global first row of each chunk
        value_pos = np.concatenate(values)
        if (value_pos % width).any():
            raise CorruptIndexError(f"{path}: chunk values are not aligned to {width} bytes")
        self.value_index = value_pos // width  # index in the typed view of each chunk's first value
        self.num_rows = int(layout.num_rows)
        self._values = _view(mm, self.dtype)
        self._first_row_ro = readonly(self.first_row.astype(np.int64))
        self._value_index_ro = readonly(self.value_index.astype(np.int64))
        self._map = _mapping(mm)

    def chunks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(values, first_row, value_index)`` over the mapped file, nothing copied: row
        ``r`` of chunk ``c`` is ``values[value_index[c] + r - first_row[c]]`` (read-only
        arrays; the chunks follow each other in row order)."""
        return self._values, self._first_row_ro, self._value_index_ro

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """Values of global ``rows`` (any order)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= self.num_rows):
            raise CorruptIndexError(f"{self.path}: rows {rows.min()}..{rows.max()} outside its {self.num_rows} rows")
        if rows.size < SMALL_GATHER_ROWS:
            return values_at(self._values, self.first_row, self.value_index, rows).astype(self.dtype)
        out = np.empty(rows.size, dtype=self.dtype)
        gather_values(self._values, self.value_index, self.first_row, self.num_rows, rows, out)  # rows checked
        return out

    def read_range(self, start: int, count: int, release: bool = False) -> np.ndarray:
        """Values of rows ``[start, start + count)``, copied chunk by chunk; ``release``:
        then hand the mapped pages of the span back to the OS (``MADV_DONTNEED``; a bulk
        read's pages are not read again soon, and the OS page cache keeps the file)."""
        if start < 0 or count < 0 or start + count > self.num_rows:
            raise CorruptIndexError(f"{self.path}: rows {start}..{start + count - 1} outside its {self.num_rows} rows")
        out = np.empty(count, dtype=self.dtype)
        if count:
            copy_range(self._values, self.value_index, self.first_row, self.num_rows, start, out)
            if release:
                c0, c1 = np.searchsorted(self.first_row, [start, start + count - 1], side="right") - 1
                width = self.dtype.itemsize
                hand_back(self._map, int(self.value_index[c0]) * width,
                           (int(self.value_index[c1]) + start + count - int(self.first_row[c1])) * width)
        return out


def _slices(rows: np.ndarray, step: int, span: int) -> Iterator[tuple[int, int]]:
    """``[at, end)`` slices of ``rows`` of at most ``step`` rows; when ``span`` and the rows
    ascend, each slice also covers rows less than ``span`` apart from its first."""
    if span <= 0 or rows.size < 2 or rows[-1] - rows[0] < span or not (rows[1:] >= rows[:-1]).all():
        for at in range(0, rows.size, step):
            yield at, min(at + step, rows.size)
        return
    at = 0
    while at < rows.size:
        end = min(at + step, int(np.searchsorted(rows, rows[at] + span, side="left")))
        yield at, max(end, at + 1)
        at = max(end, at + 1)


class MappedRows:
    """Fixed-size-list rows of a memory-mapped file (see :func:`rows_problem`)."""

    def __init__(self, mm: np.ndarray, path: str, layout: FileLayout, index: int, items: int, item_bytes: int):
        self.path = path
        self.starts, positions = row_pages(layout, index)
        self.items = int(items)
        row_bytes = items * item_bytes
        if (positions % item_bytes).any():
            raise CorruptIndexError(f"{path}: signature pages are not aligned to {item_bytes} bytes")
        if positions.size and int((positions + np.diff(self.starts) * row_bytes).max()) > mm.size:
            raise CorruptIndexError(f"{path}: rows end past the end of the file; rebuild the index")
        self.first_item = positions // item_bytes
        self.item_bytes = int(item_bytes)
        self._items = _view(mm, np.dtype(f"u{item_bytes}"))
        self._map = _mapping(mm)
        # one [num_rows, items] view when the pages lie back to back (both writers do): few rows, one gather
        n, first = self.num_rows, int(self.first_item[0]) if positions.size else 0
        back_to_back = (self.first_item == first + self.starts[:-1] * self.items).all()
        self._rows = self._items[first:first + n * self.items].reshape(n, self.items) if back_to_back else None
        self._touched = (0, 0, 0)  # (bytes, first, end) of the gathers since the last release
        self._touched_lock = threading.Lock()

    @property
    def num_rows(self) -> int:
        return int(self.starts[-1])

    def read_rows(self, rows: np.ndarray, out: np.ndarray | None = None, release: bool = True) -> np.ndarray:
        """``[n, items]`` values of global ``rows`` (any order), into ``out`` when given
        (any ``[n, items]`` view of the values' type, e.g. the first columns of a wider
        buffer). ``release``: hand the pages read back to the OS (:meth:`_release`)."""
        rows = np.asarray(rows, dtype=np.int64)
        if out is None:
            out = np.empty((rows.size, self.items), dtype=self._items.dtype.newbyteorder("="))
        if rows.size < SMALL_GATHER_ROWS and (self._rows is not None or not numba_loaded()):
            return self._read_few(rows, out, release)
        # a large gather goes slice by slice, each slice's pages handed back once copied
        pagewise = release and rows.size >= PAGEWISE_RELEASE_ROWS
        for at, end in _slices(rows, PAGEWISE_RELEASE_ROWS if pagewise else max(rows.size, 1),
                               RELEASE_SPAN_BYTES // (self.items * self.item_bytes) if pagewise else 0):
            part = rows[at:end]
            ok, lowest, highest = gather_rows(self._items, self.first_item, self.starts, part, out[at:end])
            if not ok:
                raise CorruptIndexError(f"{self.path}: rows {rows.min()}..{rows.max()} outside its {self.num_rows} rows")
            if not release:
                continue
            if pagewise:
                hand_back(self._map, int(lowest) * self.item_bytes, int(highest) * self.item_bytes)
            else:
                self._release(int(lowest), int(highest), part.size)
        return out

    def _read_few(self, rows: np.ndarray, out: np.ndarray, release: bool) -> np.ndarray:
        """:meth:`read_rows` of a few rows by numpy: one row gather when the pages lie back
        to back, else (numba not loaded: a few queries' numpy route) one gather of each
        row's items from its page, as :func:`gather_rows` reads them."""
        if not rows.size:
            return out
        if rows.min() < 0 or rows.max() >= self.num_rows:
            raise CorruptIndexError(f"{self.path}: rows {rows.min()}..{rows.max()} outside its {self.num_rows} rows")
        if self._rows is not None:
            out[...] = self._rows[rows]
            first = int(self.first_item[0])
            lowest, highest = first + int(rows.min()) * self.items, first + (int(rows.max()) + 1) * self.items
        else:
            page = np.searchsorted(self.starts, rows, side="right") - 1
            base = self.first_item[page] + (rows - self.starts[page]) * self.items
            out[...] = self._items[base[:, None] + np.arange(self.items, dtype=np.int64)]
            lowest, highest = int(base.min()), int(base.max()) + self.items
        if release:
            self._release(lowest, highest, rows.size)
        return out

    def _release(self, lowest: int, highest: int, count: int) -> None:
        """Hand the mapped pages gathers touched back to the OS (``MADV_DONTNEED``) once
        they may add up to :data:`RELEASE_BYTES`: the copies are made, the OS page cache
        keeps the file, and the process's resident set grows by at most that much, not by
        every page of a large file it visits. ``[lowest, highest)``: the items this gather
        read, ``count`` rows."""
        if self._map is None or _DONTNEED is None:
            return
        lo, hi = lowest * self.item_bytes, highest * self.item_bytes
        row_pages = -(-self.items * self.item_bytes // _OS_PAGE) + 1  # pages one row can touch
        with self._touched_lock:
            size, t_lo, t_hi = self._touched
            if size:
                lo, hi = min(lo, t_lo), max(hi, t_hi)
            size += min(count * row_pages * _OS_PAGE, hi - lo + _OS_PAGE)
            if size < RELEASE_BYTES:
                self._touched = (size, lo, hi)
                return
            self._touched = (0, 0, 0)
        hand_back(self._map, lo, hi)

    def read_range(self, start: int, count: int, release: bool = False, out: np.ndarray | None = None
                   ) -> np.ndarray:
        """``[count, items]`` values of rows ``[start, start + count)``, copied page by page
        into ``out`` when given; ``release``: each page's mapped span handed back to the OS
        once copied."""
        if start < 0 or count < 0 or start + count > self.num_rows:
            raise CorruptIndexError(f"{self.path}: rows {start}..{start + count - 1} outside its {self.num_rows} rows")
        if out is None:
            out = np.empty((count, self.items), dtype=self._items.dtype.newbyteorder("="))
        page = int(np.searchsorted(self.starts, start, side="right") - 1)
        at, end = start, start + count
        while at < end:
            n = min(int(self.starts[page + 1]), end) - at
            i = int(self.first_item[page]) + (at - int(self.starts[page])) * self.items
            out[at - start:at - start + n] = self._items[i:i + n * self.items].reshape(n, self.items)
            if release:
                hand_back(self._map, i * self.item_bytes, (i + n * self.items) * self.item_bytes)
            at += n
            page += 1
        return out


def mapped_column(mm: np.ndarray, path: str, layout: FileLayout, index: int, dtype) -> MappedColumn | None:
    """A :class:`MappedColumn`, or None when :func:`layout_problem` finds the layout differs."""
    dtype = np.dtype(dtype)
    if layout_problem(layout, index, dtype.itemsize * 8) is not None:
        return None
    return MappedColumn(mm, path, layout, index, dtype)


def mapped_rows(mm: np.ndarray, path: str, layout: FileLayout, index: int, items: int, item_bytes: int
                ) -> MappedRows | None:
    """A :class:`MappedRows`, or None when :func:`rows_problem` finds the layout differs."""
    if rows_problem(layout, index, items, item_bytes) is not None:
        return None
    return MappedRows(mm, path, layout, index, items, item_bytes)
