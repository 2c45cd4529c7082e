"""Where a Lance 2.2 file keeps its pages, and how each page is encoded: read from the
file's own footer and column metadata (docs/index-format.md, "Finding pages").

pylance's ``LanceFileReader.metadata()`` gives page buffer positions but describes each
page's encoding only as display text. The file itself holds the encoding as protocol
buffers, so this module reads them:

* the last 40 bytes (the footer): column metadata start (u64), column metadata offsets
  start (u64), global buffer offsets start (u64), number of global buffers (u32), number
  of columns (u32), major and minor version (u16 each), ``LANC``;
* the column metadata offsets table: ``(position, size)`` u64 pairs, one per column;
* each column's ``ColumnMetadata`` message: field 2 holds its pages; a page has packed
  buffer positions (field 1) and sizes (field 2), its row count (3) and its encoding
  (4), which wraps (field 2, then field 1) a ``google.protobuf.Any`` whose value is a
  ``lance.encodings21.PageLayout``.

Only the fields this package needs are decoded (:class:`PageLayout`, :class:`Compression`);
everything else is skipped by wire type, as protocol buffers allow.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from types import MappingProxyType

from lance_minhash_sql.core.errors import CorruptIndexError
from lance_minhash_sql.core.tuning import TAIL_READ_BYTES
from lance_minhash_sql.runtime.cache import memoized

__all__ = ["FOOTER_BYTES", "TAIL_READ_BYTES", "Compression", "PageLayout", "Page", "FileLayout", "FileTail",
           "parse_layout", "parse_descriptor", "tail_span", "read_layout", "read_file_tail"]

FOOTER_BYTES = 40
_MAGIC = b"LANC"
_PAGE_LAYOUT = "/lance.encodings21.PageLayout"
_LAYOUTS = MappingProxyType({1: "MiniBlockLayout", 2: "ConstantLayout", 3: "FullZipLayout", 4: "BlobLayout", 5: "SparseLayout"})
_COMPRESSIONS = MappingProxyType({1: "Flat", 2: "Variable", 3: "Constant", 4: "OutOfLineBitpacking", 5: "InlineBitpacking",
                 6: "Fsst", 7: "Dictionary", 8: "Rle", 9: "ByteStreamSplit", 10: "General", 11: "FixedSizeList",
                 12: "PackedStruct", 13: "VariablePackedStruct", 14: "Range", 15: "Delta"})
REPDEF_ALL_VALID_ITEM = 1


class _Bad(ValueError):
    pass


def _varint(b: bytes, i: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if i >= len(b):
            raise _Bad("truncated varint")
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return out, i


def _fields(b: bytes) -> dict[int, list]:
    """Field number -> values (ints for varint / fixed, bytes for length-delimited)."""
    out: dict[int, list] = {}
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(b, i)
        elif wire == 1:
            value, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wire == 5:
            value, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        elif wire == 2:
            n, i = _varint(b, i)
            value, i = bytes(b[i:i + n]), i + n
        else:
            raise _Bad(f"wire type {wire}")
        if i > len(b):
            raise _Bad("truncated field")
        out.setdefault(num, []).append(value)
    return out


def _packed(values: list) -> list[int]:
    """A repeated uint64 field: packed (bytes) or not (ints)."""
    out: list[int] = []
    for v in values:
        if isinstance(v, bytes):
            i = 0
            while i < len(v):
                x, i = _varint(v, i)
                out.append(x)
        else:
            out.append(v)
    return out


def _one(fields: dict, num: int, default=None):
    values = fields.get(num)
    return values[-1] if values else default


@dataclass(frozen=True)
class Compression:
    """A compressive encoding: its kind (``Flat``, ``FixedSizeList``, ``InlineBitpacking``,
    ...), bits per value (``Flat``), items per value and validity (``FixedSizeList``),
    whether a ``Flat`` buffer is compressed, and the inner encoding where there is one."""

    kind: str
    bits_per_value: int = 0
    items_per_value: int = 0
    has_validity: bool = False
    buffer_compressed: bool = False
    inner: "Compression | None" = None

    def __str__(self) -> str:
        if self.kind == "Flat":
            return f"Flat({self.bits_per_value} bits{', compressed' if self.buffer_compressed else ''})"
        if self.kind == "FixedSizeList":
            return f"FixedSizeList({self.items_per_value}{', validity' if self.has_validity else ''}, {self.inner})"
        return self.kind + (f"({self.inner})" if self.inner is not None else "")


def _compression(b: bytes) -> Compression:
    f = _fields(b)
    for num, kind in _COMPRESSIONS.items():
        if num in f:
            inner = _fields(f[num][-1])
            if kind == "Flat":
                return Compression(kind, bits_per_value=_one(inner, 1, 0), buffer_compressed=2 in inner)
            if kind == "FixedSizeList":
                values = _one(inner, 2)
                return Compression(kind, items_per_value=_one(inner, 1, 0), has_validity=bool(_one(inner, 3, 0)),
                                   inner=None if values is None else _compression(values))
            return Compression(kind)
    return Compression("none")


@dataclass(frozen=True)
class PageLayout:
    """The structural layout of one page, with the fields the fast readers check."""

    kind: str  # MiniBlockLayout, FullZipLayout, ConstantLayout, ... or "legacy" / "unknown"
    values: Compression | None = None
    rep: bool = False  # repetition levels present (mini-block: rep_compression set; full-zip: bits_rep)
    definition: bool = False
    dictionary: bool = False
    layers: tuple[int, ...] = ()
    num_buffers: int = 0  # mini-block: value buffers per chunk
    repetition_index_depth: int = 0
    num_items: int = 0
    large_chunks: bool = False  # mini-block: u32 value sizes in chunk headers (2.2)
    bits_per_value: int = 0  # full-zip fixed width

    def __str__(self) -> str:
        extra = []
        if self.rep or self.definition:
            extra.append("rep/def levels")
        if self.dictionary:
            extra.append("dictionary")
        if self.layers and self.layers != (REPDEF_ALL_VALID_ITEM,):
            extra.append(f"layers {list(self.layers)}")
        if self.kind == "MiniBlockLayout":
            extra.append(f"{self.num_buffers} buffer(s)")
            if not self.large_chunks:
                extra.append("small chunks")
        if self.kind == "FullZipLayout":
            extra.append(f"{self.bits_per_value} bits per row")
        return f"{self.kind}(values {self.values}{''.join(', ' + e for e in extra)})"


@memoized(256)
def _page_layout(encoding: bytes) -> PageLayout:
    """Page encoding (``Encoding``: field 2 ``direct`` -> field 1 bytes = ``Any``); the
    pages of a column share one, parsed once."""
    direct = _one(_fields(encoding), 2)
    if direct is None:
        return PageLayout("unknown")
    any_msg = _fields(_one(_fields(direct), 1, b""))
    if _one(any_msg, 1, b"").decode(errors="replace") != _PAGE_LAYOUT:
        return PageLayout("legacy")  # a 2.0 file's ArrayEncoding
    layout = _fields(_one(any_msg, 2, b""))
    for num, kind in _LAYOUTS.items():
        if num not in layout:
            continue
        f = _fields(layout[num][-1])
        if kind == "MiniBlockLayout":
            return PageLayout(kind, values=_compression(_one(f, 3, b"")), rep=1 in f, definition=2 in f,
                              dictionary=4 in f, layers=tuple(_packed(f.get(6, []))), num_buffers=_one(f, 7, 0),
                              repetition_index_depth=_one(f, 8, 0), num_items=_one(f, 9, 0),
                              large_chunks=bool(_one(f, 10, 0)))
        if kind == "FullZipLayout":
            return PageLayout(kind, values=_compression(_one(f, 7, b"")), rep=bool(_one(f, 1, 0)),
                              definition=bool(_one(f, 2, 0)), layers=tuple(_packed(f.get(8, []))),
                              num_items=_one(f, 5, 0), bits_per_value=_one(f, 3, 0))
        return PageLayout(kind)
    return PageLayout("unknown")


@dataclass(frozen=True)
class Page:
    num_rows: int
    buffers: tuple[tuple[int, int], ...]  # (position, size) in the file
    layout: PageLayout


@dataclass(frozen=True)
class FileLayout:
    """Every column's pages, and the file's format version."""

    path: str
    version: tuple[int, int]
    columns: tuple[tuple[Page, ...], ...]
    num_rows: int = 0
    global_buffers: tuple[tuple[int, int], ...] = field(default=(), repr=False)

    def describe(self, column: int) -> str:
        """The distinct page layouts of a column, for messages."""
        seen = []
        for page in self.columns[column]:
            text = str(page.layout)
            if text not in seen:
                seen.append(text)
        return "; ".join(seen) or "no pages"


def tail_span(file_meta) -> tuple[int, int]:
    """``(position, size)`` of the file's column metadata, offset tables and footer, from
    pylance's metadata: it starts after the data pages and global buffers."""
    start = int(file_meta.num_data_bytes) + int(file_meta.num_global_buffer_bytes)
    size = int(file_meta.num_column_metadata_bytes) + 16 * len(file_meta.global_buffers) + FOOTER_BYTES
    return start, size


def parse_layout(path: str, tail: bytes, tail_start: int, num_rows: int = 0) -> FileLayout:
    """The layout of a file from its bytes ``[tail_start, end)`` (at least the footer,
    offset tables and column metadata). :class:`CorruptIndexError` if they do not parse."""
    try:
        if len(tail) < FOOTER_BYTES or tail[-4:] != _MAGIC:
            raise _Bad("no Lance footer")
        cm_start, cm_offsets, gb_offsets, n_gb, n_cols, major, minor = struct.unpack(
            "<QQQIIHH", tail[-FOOTER_BYTES:-4])

        def at(pos: int, size: int) -> bytes:
            rel = pos - tail_start
            if rel < 0 or rel + size > len(tail):
                raise _Bad(f"bytes {pos}..{pos + size} outside the file's tail")
            return tail[rel:rel + size]

        table = struct.unpack(f"<{2 * n_cols}Q", at(cm_offsets, 16 * n_cols))
        gbs = struct.unpack(f"<{2 * n_gb}Q", at(gb_offsets, 16 * n_gb))
        columns = []
        for c in range(n_cols):
            meta = _fields(at(table[2 * c], table[2 * c + 1]))
            pages = []
            for raw in meta.get(2, []):
                p = _fields(raw)
                positions, sizes = _packed(p.get(1, [])), _packed(p.get(2, []))
                if len(positions) != len(sizes):
                    raise _Bad("page buffer positions and sizes differ in number")
                pages.append(Page(_one(p, 3, 0), tuple(zip(positions, sizes)), _page_layout(_one(p, 4, b""))))
            columns.append(tuple(pages))
        del cm_start
    except (_Bad, struct.error, UnicodeDecodeError) as exc:
        raise CorruptIndexError(f"{path}: cannot read the file's column metadata ({exc}); rebuild the index") from None
    return FileLayout(path, (major, minor), tuple(columns), num_rows,
                      tuple((gbs[2 * i], gbs[2 * i + 1]) for i in range(n_gb)))


def read_layout(read_range, path: str, file_meta) -> FileLayout:
    """The layout of an opened file: one read of its tail (``read_range(offset, length)``)."""
    start, size = tail_span(file_meta)
    return parse_layout(path, bytes(read_range(start, size)), start, int(file_meta.num_rows))


def parse_descriptor(raw: bytes, path: str) -> tuple[int, dict[str, str]]:
    """``(rows, schema metadata)`` from a file's global buffer 0, its ``FileDescriptor``:
    field 1 the schema (whose field 5 is the metadata map, entries ``key = 1``, ``value = 2``),
    field 2 the number of rows."""
    try:
        desc = _fields(raw)
        schema = _fields(_one(desc, 1, b""))
        meta = {}
        for entry in schema.get(5, []):
            e = _fields(entry)
            meta[_one(e, 1, b"").decode()] = _one(e, 2, b"").decode()
        return int(_one(desc, 2, 0)), meta
    except (_Bad, UnicodeDecodeError, AttributeError) as exc:
        raise CorruptIndexError(f"{path}: cannot read the file's descriptor ({exc}); rebuild the index") from None


@dataclass(frozen=True)
class FileTail:
    """What a file's tail holds: its layout, rows, schema metadata, and global buffers
    ``(position, size)``."""

    layout: FileLayout
    num_rows: int
    metadata: dict
    global_buffers: tuple[tuple[int, int], ...]


def read_file_tail(read_range, path: str, size: int) -> FileTail:
    """A file of ``size`` bytes opened from its tail without Lance's reader: one read of its
    last :data:`TAIL_READ_BYTES` (a second when its column metadata or descriptor starts
    earlier). :class:`CorruptIndexError` when the bytes are not a Lance file's tail."""
    start = max(0, size - TAIL_READ_BYTES)
    tail = bytes(read_range(start, size - start))
    if len(tail) != size - start or len(tail) < FOOTER_BYTES or tail[-4:] != _MAGIC:
        raise CorruptIndexError(f"{path}: no Lance footer at {size} bytes; rebuild the index")
    cm_start, _, gb_offsets, n_gb, _, _, _ = struct.unpack("<QQQIIHH", tail[-FOOTER_BYTES:-4])
    if n_gb < 1 or not start <= gb_offsets <= size - 16 * n_gb - FOOTER_BYTES:
        raise CorruptIndexError(f"{path}: no descriptor buffer in the file's tail; rebuild the index")
    gb0 = struct.unpack("<QQ", tail[gb_offsets - start:gb_offsets - start + 16])
    need = min(cm_start, gb0[0])
    if need < start:
        tail = bytes(read_range(need, start - need)) + tail
        start = need
    layout = parse_layout(path, tail, start)
    if gb0[0] + gb0[1] > size:
        raise CorruptIndexError(f"{path}: the descriptor ends past the end of the file; rebuild the index")
    rows, meta = parse_descriptor(tail[gb0[0] - start:gb0[0] - start + gb0[1]], path)
    if any(sum(p.num_rows for p in col) != rows for col in layout.columns):
        raise CorruptIndexError(f"{path}: its columns do not have the descriptor's {rows} rows; rebuild the index")
    return FileTail(FileLayout(layout.path, layout.version, layout.columns, rows, layout.global_buffers),
                    rows, meta, layout.global_buffers)
