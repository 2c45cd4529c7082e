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

``signatures.lance``'s signature column (a fixed-size list of ``uint16``) is read by
:class:`FixedRows`: its pages have the ``FullZipLayout`` without repetition or
definition levels, ``Flat`` 16-bit values and one buffer of exactly ``num_items`` rows
of ``2 * num_hashes`` bytes, so row ``i`` of a page is a plain byte range. Nearby rows
share one ranged read (gaps up to :data:`ROW_GAP_BYTES`).

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

__all__ = ["ChunkedColumn", "FixedRows", "chunked_column", "fixed_rows", "read_columns"]

_HEADER = 8  # u16 levels, u32 value bytes, 2 bytes of padding
_MAX_WORKERS = 16
_ENCODING_RULES = ("MiniBlockLayout", "rep_compression: None", "def_compression: None", "dictionary: None",
                   "RepdefAllValidItem", "num_buffers: 1", "repetition_index_depth: 0", "has_large_chunk: true",
                   "Flat {")
_FULLZIP_RULES = ("FullZipLayout", "bits_rep: 0", "bits_def: 0", "FixedSizeList {", "has_validity: false",
                  "Flat {", "bits_per_value: 16", "RepdefAllValidItem")
_ITEMS_PER_VALUE = re.compile(r"items_per_value: (\d+)")
ROW_GAP_BYTES = 4096  # rows closer than this in the file are fetched in one read
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


class FixedRows:
    """A column of fixed-width rows stored as plain byte ranges (see the module doc)."""

    def __init__(self, read_range, path: str, starts: np.ndarray, positions: np.ndarray, row_bytes: int):
        self._read = read_range
        self.path = path
        self.starts = starts  # int64 first row of each page, + total rows
        self.positions = positions  # int64 file position of each page's rows
        self.row_bytes = int(row_bytes)

    @property
    def num_rows(self) -> int:
        return int(self.starts[-1])

    def spans(self, rows: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]], np.ndarray]:
        """``(file offset of each row, [(offset, length)] reads, read index of each row)``."""
        page = np.searchsorted(self.starts, rows, side="right") - 1
        offs = self.positions[page] + (rows - self.starts[page]) * self.row_bytes
        ends = offs + self.row_bytes
        new = np.ones(rows.size, dtype=np.bool_)
        new[1:] = offs[1:] - ends[:-1] > ROW_GAP_BYTES
        first = np.flatnonzero(new)
        last = np.append(first[1:], rows.size) - 1
        spans = [(int(offs[a]), int(ends[b] - offs[a])) for a, b in zip(first.tolist(), last.tolist())]
        return offs, spans, np.cumsum(new) - 1

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """``uint8[n, row_bytes]`` of the sorted, distinct ``rows``, in one concurrent batch."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((rows.size, self.row_bytes), dtype=np.uint8)
        if rows.size == 0:
            return out
        if rows[0] < 0 or rows[-1] >= self.num_rows:
            raise CorruptIndexError(f"{self.path}: rows {rows[0]}..{rows[-1]} outside its {self.num_rows} rows")
        offs, spans, which = self.spans(rows)
        raws = _fetch([(self._read, span) for span in spans])
        for i, (span, raw) in enumerate(zip(spans, raws)):
            if len(raw) != span[1]:
                raise CorruptIndexError(f"{self.path}: a read of {span[1]} bytes at {span[0]} gave {len(raw)} bytes; "
                                        "the file is truncated")
            sel = np.flatnonzero(which == i)
            buf = np.frombuffer(raw, dtype=np.uint8)
            rel = offs[sel] - span[0]
            out[sel] = buf[rel[:, None] + np.arange(self.row_bytes)]
        return out


def fixed_rows(read_range, path: str, file_meta, index: int, items: int, item_bytes: int) -> FixedRows | None:
    """A :class:`FixedRows` for column ``index`` (fixed-size lists of ``items`` values of
    ``item_bytes``), or None when its pages are not laid out as plain rows."""
    try:
        column = file_meta.columns[index]
    except (IndexError, AttributeError):
        return None
    row_bytes = items * item_bytes
    starts, positions = [0], []
    for page in column.pages:
        enc = page.encoding or ""
        n, ipv = _ITEMS.search(enc), _ITEMS_PER_VALUE.search(enc)
        if (not all(rule in enc for rule in _FULLZIP_RULES) or item_bytes != 2 or n is None or ipv is None
                or int(ipv.group(1)) != items or len(page.buffers) != 1
                or int(page.buffers[0].size) != int(n.group(1)) * row_bytes):
            return None
        starts.append(starts[-1] + int(n.group(1)))
        positions.append(int(page.buffers[0].position))
    if not positions or starts[-1] != int(file_meta.num_rows):
        return None
    return FixedRows(read_range, path, np.array(starts, dtype=np.int64), np.array(positions, dtype=np.int64),
                     row_bytes)
