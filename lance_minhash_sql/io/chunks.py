"""Rows of the index files read by position: ``bands.lance``'s fixed-width columns chunk
by chunk, ``signatures.lance``'s signatures as plain byte ranges (docs/index-format.md).

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
share one ranged read (gaps up to the caller's ``gap``, :data:`ROW_GAP_BYTES` by default;
an object store's reader passes its cost model's, so a dense request reads the file
sequentially), ranges of at most :data:`READ_SPAN_BYTES`, at most
:data:`READ_WINDOW_BYTES` of them fetched and held at once.

Which layout a page has is read from the file's own encoding messages
(:mod:`.lancefile`), never from pylance's display text. A column whose pages do not all
match (another writer, another format version) is not read here: :func:`layout_problem`
says why, and the caller names the file and the encoding in its warning or error. Every
chunk's header is checked against its table entry before its values are used.

Local files are memory-mapped and read by the same layout (:mod:`.mapped`).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from lance_minhash_sql.core.errors import CorruptIndexError
from lance_minhash_sql.core.tuning import CHUNK_READ_WORKERS, READ_SPAN_BYTES, READ_WINDOW_BYTES, ROW_GAP_BYTES
from lance_minhash_sql.io.lancefile import REPDEF_ALL_VALID_ITEM, FileLayout, PageLayout

__all__ = ["ChunkedColumn", "FixedRows", "chunked_column", "fixed_rows", "read_columns", "layout_problem",
           "rows_problem", "pages_of_layout", "chunk_bounds", "row_pages", "CHUNK_HEADER"]

CHUNK_HEADER = 8  # u16 levels, u32 value bytes, 2 bytes of padding


@dataclass
class _Page:
    first_row: int
    num_rows: int
    table: tuple[int, int]  # (position, size) of the chunk table
    data: int  # position of the first chunk
    starts: np.ndarray | None = None  # int64 first row (within the page) of each chunk, + num_rows
    offsets: np.ndarray | None = None  # int64 file position of each chunk, + end


def _mini_block_problem(layout: PageLayout, bits: int) -> str | None:
    if layout.kind != "MiniBlockLayout":
        return "not a mini-block page"
    v = layout.values
    if v is None or v.kind != "Flat" or v.buffer_compressed:
        return "values are not stored flat"
    if v.bits_per_value != bits:
        return f"{v.bits_per_value} bits per value, not {bits}"
    if layout.rep or layout.definition or layout.dictionary or layout.repetition_index_depth:
        return "repetition/definition levels or a dictionary"
    if layout.layers not in ((), (REPDEF_ALL_VALID_ITEM,)) or layout.num_buffers != 1 or not layout.large_chunks:
        return "not one buffer of large chunks of all-valid items"
    return None


def layout_problem(layout: FileLayout, index: int, bits: int) -> str | None:
    """None when column ``index`` is a flat mini-block column of ``bits``-bit values as this
    module reads it; else what differs."""
    if not 0 <= index < len(layout.columns) or not layout.columns[index]:
        return f"no column {index}"
    for page in layout.columns[index]:
        why = _mini_block_problem(page.layout, bits)
        if why is None and len(page.buffers) != 2:
            why = f"{len(page.buffers)} page buffers"
        if why is not None:
            return why
    if sum(p.num_rows for p in layout.columns[index]) != layout.num_rows:
        return "its pages do not add up to the file's rows"
    return None


def pages_of_layout(layout: FileLayout, index: int) -> list[_Page]:
    pages, first = [], 0
    for page in layout.columns[index]:
        (tpos, tsize), (dpos, _) = page.buffers
        pages.append(_Page(first, int(page.num_rows), (int(tpos), int(tsize)), int(dpos)))
        first += int(page.num_rows)
    return pages


def chunk_bounds(path: str, page: _Page, raw) -> tuple[np.ndarray, np.ndarray]:
    """A page's chunk table -> (first row of each chunk within the page, + num_rows;
    file position of each chunk, + end)."""
    if len(raw) % 4:
        raise CorruptIndexError(f"{path}: chunk table of {len(raw)} bytes is not a multiple of 4")
    words = np.frombuffer(raw, dtype="<u4").astype(np.int64)
    sizes = ((words >> 4) + 1) * 8
    counts = np.left_shift(1, words & 0xF)
    if words.size:
        counts[-1] = page.num_rows - int(counts[:-1].sum())
    if words.size == 0 or counts[-1] <= 0 or (counts[:-1] <= 1).any():
        raise CorruptIndexError(f"{path}: chunk table does not add up to the page's {page.num_rows} rows")
    starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    offsets = page.data + np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return starts, offsets


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
        starts, offsets = chunk_bounds(self.path, page, raw)
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
        head = np.frombuffer(chunk[:CHUNK_HEADER], dtype=np.uint8)
        levels = int(head[0]) | int(head[1]) << 8
        nbytes = int.from_bytes(bytes(head[2:6]), "little")
        if len(chunk) < CHUNK_HEADER + n * width or levels != 0 or nbytes != n * width:
            raise CorruptIndexError(f"{self.path}: a chunk's header does not match its chunk table entry "
                                    f"({len(chunk)} bytes, {levels} levels, {nbytes} value bytes for {n} values)")
        return np.frombuffer(chunk, dtype=self.dtype.newbyteorder("<"), count=n, offset=CHUNK_HEADER)


_READERS: ThreadPoolExecutor | None = None
_READERS_LOCK = threading.Lock()


def _readers() -> ThreadPoolExecutor:
    global _READERS
    with _READERS_LOCK:
        if _READERS is None:
            _READERS = ThreadPoolExecutor(CHUNK_READ_WORKERS, thread_name_prefix="lms-chunks")
        return _READERS


def _fetch(jobs: list) -> list[bytes]:
    """The bytes of every ``(read, (offset, length))``, read concurrently (pylance releases
    the GIL while it waits)."""
    if len(jobs) <= 1:
        return [read(*span) for read, span in jobs]
    return list(_readers().map(lambda job: job[0](*job[1]), jobs))


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


def chunked_column(read_range, path: str, layout: FileLayout, index: int, dtype) -> ChunkedColumn | None:
    """A :class:`ChunkedColumn` for column ``index`` of a file's layout, or None when its
    pages are not laid out as this module reads them (:func:`layout_problem` says why)."""
    dtype = np.dtype(dtype)
    if layout_problem(layout, index, dtype.itemsize * 8) is not None:
        return None
    return ChunkedColumn(read_range, path, pages_of_layout(layout, index), dtype)


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

    def spans(self, rows: np.ndarray, gap: int = ROW_GAP_BYTES
              ) -> tuple[np.ndarray, list[tuple[int, int]], np.ndarray]:
        """``(file offset of each row, [(offset, length)] reads, bounds)``, the rows of read
        ``i`` being ``bounds[i]:bounds[i + 1]``: rows less than ``gap`` bytes apart share a
        read, a read spans at most :data:`READ_SPAN_BYTES` (or one row)."""
        page = np.searchsorted(self.starts, rows, side="right") - 1
        offs = self.positions[page] + (rows - self.starts[page]) * self.row_bytes
        ends = offs + self.row_bytes
        new = np.ones(rows.size, dtype=np.bool_)
        new[1:] = offs[1:] - ends[:-1] > gap
        # a longer run is cut where its rows cross a multiple of READ_SPAN_BYTES from its start
        run_start = offs[new][np.cumsum(new) - 1]
        part = (ends - run_start - 1) // max(READ_SPAN_BYTES, self.row_bytes)
        new[1:] |= part[1:] != part[:-1]
        bounds = np.append(np.flatnonzero(new), rows.size)
        spans = [(int(offs[a]), int(ends[b - 1] - offs[a])) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
        return offs, spans, bounds

    def read_rows(self, rows: np.ndarray, gap: int = ROW_GAP_BYTES) -> np.ndarray:
        """``uint8[n, row_bytes]`` of the sorted, distinct ``rows``: their reads (:meth:`spans`)
        run concurrently, as many at a time as hold :data:`READ_WINDOW_BYTES` together."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((rows.size, self.row_bytes), dtype=np.uint8)
        if rows.size == 0:
            return out
        if rows[0] < 0 or rows[-1] >= self.num_rows:
            raise CorruptIndexError(f"{self.path}: rows {rows[0]}..{rows[-1]} outside its {self.num_rows} rows")
        offs, spans, bounds = self.spans(rows, gap)
        w0 = 0
        while w0 < len(spans):
            w1, held = w0, 0
            while w1 < len(spans) and (w1 == w0 or held + spans[w1][1] <= READ_WINDOW_BYTES):
                held += spans[w1][1]
                w1 += 1
            raws = _fetch([(self._read, span) for span in spans[w0:w1]])
            for i, raw in zip(range(w0, w1), raws):
                span = spans[i]
                if len(raw) != span[1]:
                    raise CorruptIndexError(f"{self.path}: a read of {span[1]} bytes at {span[0]} gave {len(raw)} "
                                            "bytes; the file is truncated")
                r0, r1 = int(bounds[i]), int(bounds[i + 1])
                buf = np.frombuffer(raw, dtype=np.uint8)
                rel = offs[r0:r1] - span[0]
                out[r0:r1] = buf[rel[:, None] + np.arange(self.row_bytes)]
            del raws
            w0 = w1
        return out


def rows_problem(layout: FileLayout, index: int, items: int, item_bytes: int) -> str | None:
    """None when column ``index`` holds fixed-size lists of ``items`` values of
    ``item_bytes`` stored as plain rows (full-zip, flat, no levels); else what differs."""
    if not 0 <= index < len(layout.columns) or not layout.columns[index]:
        return f"no column {index}"
    row_bits = items * item_bytes * 8
    for page in layout.columns[index]:
        lay, v = page.layout, page.layout.values
        if lay.kind != "FullZipLayout":
            return "not a full-zip page"
        if lay.rep or lay.definition or lay.layers not in ((), (REPDEF_ALL_VALID_ITEM,)):
            return "repetition/definition levels"
        if (v is None or v.kind != "FixedSizeList" or v.has_validity or v.items_per_value != items
                or v.inner is None or v.inner.kind != "Flat" or v.inner.buffer_compressed
                or v.inner.bits_per_value != item_bytes * 8 or lay.bits_per_value != row_bits):
            return f"values are not fixed-size lists of {items} flat {item_bytes * 8}-bit items"
        if len(page.buffers) != 1 or page.buffers[0][1] != page.num_rows * row_bits // 8:
            return "not one buffer of exactly its rows"
    if sum(p.num_rows for p in layout.columns[index]) != layout.num_rows:
        return "its pages do not add up to the file's rows"
    return None


def row_pages(layout: FileLayout, index: int) -> tuple[np.ndarray, np.ndarray]:
    starts, positions = [0], []
    for page in layout.columns[index]:
        starts.append(starts[-1] + int(page.num_rows))
        positions.append(int(page.buffers[0][0]))
    return np.array(starts, dtype=np.int64), np.array(positions, dtype=np.int64)


def fixed_rows(read_range, path: str, layout: FileLayout, index: int, items: int, item_bytes: int
               ) -> FixedRows | None:
    """A :class:`FixedRows` for column ``index`` (fixed-size lists of ``items`` values of
    ``item_bytes``), or None when its pages are not laid out as plain rows."""
    if rows_problem(layout, index, items, item_bytes) is not None:
        return None
    starts, positions = row_pages(layout, index)
    return FixedRows(read_range, path, starts, positions, items * item_bytes)
