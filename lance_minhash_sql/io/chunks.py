"""Ranged reads of ``bands.lance``'s fixed-width columns, chunk by chunk.

On an object store every read is a request. pylance's ``LanceFileReader.take_rows``
fetches each page's chunk table again on every call before the chunks it needs; this
reader keeps the chunk tables it has read (about 4 bytes per 512 rows) and afterwards
fetches only the chunks holding the wanted rows, adjacent chunks as one ranged read and
all ranges concurrently.

Layout read here (pylance 14.0.x, file format 2.2, as ``BandsWriter`` writes it and as
Lance's own index writer does: ``lance-encoding:compression=none``), per page of a
column:

* encoding ``MiniBlockLayout``: no repetition or definition levels, no dictionary, value
  compression ``Flat`` with 32 or 64 bits per value, one value buffer, large chunks;
* buffer 0, the chunk table: one little-endian u32 per chunk; bits 0-3 give
  ``log2(values)`` (0 on a page's last chunk, which holds the rest of ``num_items``),
  bits 4 and up give ``bytes / 8 - 1``;
* buffer 1, the chunks back to back: a u16 level count (0), a u32 value-buffer size,
  padding to 8 bytes, then the values, little-endian.

A column whose pages do not all match (another writer, another format version) is
reported as not supported, and callers keep using ``take_rows``. Every chunk's header
is checked against its table entry before its values are used.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..errors import CorruptIndexError

__all__ = ["ChunkedColumn", "chunked_column", "read_columns"]

_HEADER = 8  # u16 levels, u32 value bytes, 2 bytes of padding
_MAX_WORKERS = 16
_ENCODING_RULES = ("MiniBlockLayout", "rep_compression: None", "def_compression: None", "dictionary: None",
                   "RepdefAllValidItem", "num_buffers: 1", "repetition_index_depth: 0", "has_large_chunk: true",
                   "Flat {")
_BITS = re.compile(r"bits_per_value: (\d+)")
_ITEMS = re.compile(r"num_items: (\d+)")


@dataclass
class _Page:
    first_row: int
    num_rows: int
    table: tuple[int, int]  # (position, size) of the chunk table
    data: int  # position of the first chunk
    starts: np.ndarray | None = None  # int64 first row (within the page) of each chunk, + num_rows
    offsets: np.ndarray | None = None  # int64 file position of each chunk, + end


def _page_of(page, first_row: int, bits: int) -> _Page | None:
    enc = page.encoding or ""
    if not all(rule in enc for rule in _ENCODING_RULES):
        return None
    b, n = _BITS.search(enc), _ITEMS.search(enc)
    if b is None or n is None or int(b.group(1)) != bits or len(page.buffers) != 2:
        return None
    t, d = page.buffers
    return _Page(first_row, int(n.group(1)), (int(t.position), int(t.size)), int(d.position))


class ChunkedColumn:
    """One fixed-width column of a Lance file, read by row through cached chunk tables."""

    def __init__(self, read_range, path: str, pages: list[_Page], dtype: np.dtype):
        self._read = read_range  # (offset, length) -> bytes
        self.path = path
        self.pages = pages
        self.dtype = np.dtype(dtype)
        self.page_starts = np.array([p.first_row for p in pages] + [pages[-1].first_row + pages[-1].num_rows],
                                    dtype=np.int64)
        self._lock = threading.Lock()

    @property
    def num_rows(self) -> int:
        return int(self.page_starts[-1])

    def _missing_tables(self, page_ids) -> list[_Page]:
        with self._lock:
            return [self.pages[i] for i in page_ids if self.pages[i].starts is None]

    def _set_table(self, page: _Page, raw: bytes) -> None:
        if len(raw) % 4:
            raise CorruptIndexError(f"{self.path}: chunk table of {len(raw)} bytes is not a multiple of 4")
        words = np.frombuffer(raw, dtype="<u4").astype(np.int64)
        sizes = ((words >> 4) + 1) * 8
        counts = np.left_shift(1, words & 0xF)
        if words.size:
            counts[-1] = page.num_rows - int(counts[:-1].sum())
        if words.size == 0 or counts[-1] <= 0 or (counts[:-1] <= 1).any():
            raise CorruptIndexError(f"{self.path}: chunk table does not add up to the page's {page.num_rows} rows")
        starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        offsets = page.data + np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        with self._lock:
            page.starts, page.offsets = starts, offsets

    def _pages_of(self, rows: np.ndarray) -> np.ndarray:
        if rows.size and (rows[0] < 0 or rows[-1] >= self.num_rows):
            raise CorruptIndexError(f"{self.path}: rows {rows[0]}..{rows[-1]} outside its {self.num_rows} rows")
        return np.searchsorted(self.page_starts, rows, side="right") - 1

    def _plan(self, rows: np.ndarray, page_of: np.ndarray):
        """The chunks holding ``rows`` (tables loaded): ``(wanted, row_chunk, spans, members)``;
        adjacent chunks in the file share one span."""
        wanted = []  # (file offset, length, page index, chunk index)
        row_chunk = np.empty(rows.size, dtype=np.int64)
        for pid in np.unique(page_of).tolist():
            page = self.pages[pid]
            sel = np.flatnonzero(page_of == pid)
            ch = np.searchsorted(page.starts, rows[sel] - page.first_row, side="right") - 1
            for c in np.unique(ch).tolist():
                row_chunk[sel[ch == c]] = len(wanted)
                wanted.append((int(page.offsets[c]), int(page.offsets[c + 1] - page.offsets[c]), pid, c))
        spans, members = [], []
        for i, (off, size, _, _) in enumerate(wanted):
            if spans and spans[-1][0] + spans[-1][1] == off:
                spans[-1] = (spans[-1][0], spans[-1][1] + size)
                members[-1].append(i)
            else:
                spans.append((off, size))
                members.append([i])
        return wanted, row_chunk, spans, members

    def _assemble(self, rows, plan, raws) -> np.ndarray:
        wanted, row_chunk, spans, members = plan
        out = np.empty(rows.size, dtype=self.dtype)
        for (span_off, _), raw, idx in zip(spans, raws, members):
            for i in idx:
                off, size, pid, c = wanted[i]
                page = self.pages[pid]
                n = int(page.starts[c + 1] - page.starts[c])
                values = self._decode(raw[off - span_off: off - span_off + size], n)
                sel = np.flatnonzero(row_chunk == i)
                out[sel] = values[rows[sel] - page.first_row - page.starts[c]]
        return out

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """Values of the sorted, distinct global ``rows``."""
        return read_columns([self], rows)[0]

    def _decode(self, chunk: bytes, n: int) -> np.ndarray:
        width = self.dtype.itemsize
        head = np.frombuffer(chunk[:_HEADER], dtype=np.uint8)
        levels = int(head[0]) | int(head[1]) << 8
        nbytes = int.from_bytes(bytes(head[2:6]), "little")
        if len(chunk) < _HEADER + n * width or levels != 0 or nbytes != n * width:
            raise CorruptIndexError(f"{self.path}: a chunk's header does not match its chunk table entry "
                                    f"({len(chunk)} bytes, {levels} levels, {nbytes} value bytes for {n} values)")
        return np.frombuffer(chunk, dtype=self.dtype.newbyteorder("<"), count=n, offset=_HEADER)


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(_MAX_WORKERS, thread_name_prefix="lms-chunks")
        return _POOL


def _fetch(jobs: list) -> list[bytes]:
    """The bytes of every ``(read, (offset, length))``, read concurrently (pylance releases
    the GIL while it waits)."""
    if len(jobs) <= 1:
        return [read(*span) for read, span in jobs]
    return list(_pool().map(lambda job: job[0](*job[1]), jobs))


def read_columns(columns: list[ChunkedColumn], rows: np.ndarray) -> list[np.ndarray]:
    """Values of the sorted, distinct ``rows`` in each column (of one file): first the
    chunk tables not yet read, then every column's chunks, each step one concurrent batch."""
    rows = np.asarray(rows, dtype=np.int64)
    pages = [col._pages_of(rows) for col in columns]
    todo = [(col, page) for col, page_of in zip(columns, pages)
            for page in col._missing_tables(np.unique(page_of).tolist())]
    for (col, page), raw in zip(todo, _fetch([(col._read, page.table) for col, page in todo])):
        col._set_table(page, raw)
    plans = [col._plan(rows, page_of) for col, page_of in zip(columns, pages)]
    jobs = [(col._read, span) for col, plan in zip(columns, plans) for span in plan[2]]
    raws = _fetch(jobs)
    out, at = [], 0
    for col, plan in zip(columns, plans):
        n = len(plan[2])
        out.append(col._assemble(rows, plan, raws[at:at + n]))
        at += n
    return out


def chunked_column(read_range, path: str, file_meta, index: int, dtype) -> ChunkedColumn | None:
    """A :class:`ChunkedColumn` for column ``index`` of an opened file's metadata, or None
    when its pages are not laid out as this module reads them."""
    dtype = np.dtype(dtype)
    try:
        column = file_meta.columns[index]
    except (IndexError, AttributeError):
        return None
    pages, first = [], 0
    for page in column.pages:
        p = _page_of(page, first, dtype.itemsize * 8)
        if p is None:
            return None
        pages.append(p)
        first += p.num_rows
    if not pages or first != int(file_meta.num_rows):
        return None
    return ChunkedColumn(read_range, path, pages, dtype)
