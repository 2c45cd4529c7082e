"""Index segment files: ``signatures.lance`` and ``bands.lance`` (docs/index-format.md).

Every format rule is written here, next to the code that writes and reads it:

The files are written by ``io/segment_writers.py`` (with the schemas below) and read here.

* Layout: ``<dataset>/_indices/<segment uuid>/{signatures,bands}.lance``, Lance file
  format 2.2, nothing else in the folder.
* ``signatures.lance``: ``_rowid: uint64 not null``, ``signature:
  fixed_size_list<item: uint16 not null, k> not null`` (field metadata
  ``lance-encoding:structural-encoding=fullzip``, ``lance-encoding:compression=none``);
  row ``i`` is doc id ``i``, rows in dataset scan order. Schema metadata
  ``minhash_lsh_details`` (hex of the details protobuf) and ``minhash_lsh_index_version=0``.
* ``bands.lance``: ``band_key: uint64 not null``, ``doc_id: uint32 not null`` (both
  ``lance-encoding:compression=none``), ``num_docs * num_bands`` rows sorted by
  ``(band_key, doc_id)``. Schema metadata: details, index version, ``minhash_lsh_num_docs``,
  ``minhash_lsh_page_rows`` and ``minhash_lsh_page_table_buffer`` (the global buffer
  index of the page table: ``ceil(rows / page_rows)`` little-endian u64, entry ``p`` = the
  band key of the last row of page ``p``).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from lance.file import LanceFileReader, LanceFileSession

from lance_minhash_sql.core.errors import CorruptIndexError, DatasetError, UnsupportedIndexError
from lance_minhash_sql.core.params import INDEX_VERSION, MinHashParams
from lance_minhash_sql.core.tuning import MAPPED_MAX_ROWS, ROW_GAP_BYTES
from lance_minhash_sql.io.chunks import FixedRows, chunked_column, fixed_rows, layout_problem, read_columns, rows_problem
from lance_minhash_sql.io.mapped import MappedColumn, MappedRows, map_file, mapped_column, mapped_rows
from lance_minhash_sql.io.details import params_from_hex
from lance_minhash_sql.io.lancefile import (FOOTER_BYTES, FileLayout, FileTail, parse_layout, read_file_tail,
                                            read_layout, tail_span)
from lance_minhash_sql.io.store import is_remote, redact, redact_uri
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = [
    "SIGNATURES_FILE",
    "BANDS_FILE",
    "FILE_VERSION",
    "SegmentFiles",
    "open_segment",
    "iter_signatures",
    "local_path",
]

log = logging.getLogger("lance_minhash_sql")


SIGNATURES_FILE = "signatures.lance"
BANDS_FILE = "bands.lance"
FILE_VERSION = "2.2"

KEY_DETAILS = "minhash_lsh_details"
KEY_VERSION = "minhash_lsh_index_version"
KEY_NUM_DOCS = "minhash_lsh_num_docs"
KEY_PAGE_ROWS = "minhash_lsh_page_rows"
KEY_PAGE_TABLE = "minhash_lsh_page_table_buffer"

def _metadata(reader: LanceFileReader, path: str):
    """``(file metadata, schema metadata as str -> str)`` of one file, read once."""
    try:
        meta = reader.metadata()
        raw = meta.schema.metadata or {}
    except Exception as exc:  # lance raises OSError / ValueError / RuntimeError for bad files
        raise CorruptIndexError(f"{path}: cannot read the file ({exc})") from None
    return meta, {k.decode(): v.decode() for k, v in raw.items()}


def _require(meta: dict[str, str], key: str, path: str) -> str:
    if key not in meta:
        raise CorruptIndexError(f"{path}: missing schema metadata key {key!r}; rebuild the index")
    return meta[key]


def _int(meta: dict[str, str], key: str, path: str) -> int:
    value = _require(meta, key, path)
    try:
        return int(value)
    except ValueError:
        raise CorruptIndexError(f"{path}: metadata {key}={value!r} is not an integer") from None


@dataclass
class SegmentFiles:
    """An opened segment: parameters, page table, and readers for both files."""

    seg_dir: str
    params: MinHashParams
    num_docs: int
    page_rows: int
    page_table: np.ndarray  # uint64[num_pages]
    num_band_rows: int
    # bands.lance's reader; None on an object store when the file was opened from its tail
    # (:attr:`bands` opens it on first use)
    band_file: LanceFileReader | None
    # signatures.lance's reader: of both columns, or (object stores, where signatures are
    # read as byte ranges) of ``_rowid`` only; :attr:`signatures` is always of both
    sig_file: LanceFileReader
    storage_options: dict | None = None
    sig_rowids_only: bool = False
    _full_signatures: LanceFileReader | None = None

    @property
    def bands(self) -> LanceFileReader:
        """A reader of bands.lance (opened on first use when the file was opened from its tail)."""
        if self.band_file is None:
            self.band_file = LanceFileReader(os.path.join(self.seg_dir, BANDS_FILE),
                                             storage_options=self.storage_options)
        return self.band_file

    @bands.setter
    def bands(self, reader) -> None:
        self.band_file = reader

    @property
    def signatures(self) -> LanceFileReader:
        """A reader of signatures.lance's two columns (opened on first use when only the
        row ids' reader is open)."""
        if not self.sig_rowids_only:
            return self.sig_file
        if self._full_signatures is None:
            self._full_signatures = LanceFileReader(os.path.join(self.seg_dir, SIGNATURES_FILE),
                                                    storage_options=self.storage_options)
        return self._full_signatures
    # bands.lance's (band_key, doc_id) columns read by chunk through cached chunk tables,
    # and signatures.lance's signatures as byte ranges (io/chunks.py); set for object
    # stores, where each read is a request
    band_chunks: tuple | None = None
    signature_rows: FixedRows | None = None
    # local files: bands.lance's two columns and signatures.lance's signatures addressed
    # in a memory map of each file (io/mapped.py)
    band_map: tuple[MappedColumn, MappedColumn] | None = None
    signature_map: MappedRows | None = None
    # why a file is read through Lance instead (None when both files take the fast path)
    slow_reason: str | None = None

    @property
    def fast_path(self) -> bool:
        """True when band rows and signature rows are read directly (memory map or ranged
        reads), without a Lance reader call per query."""
        if is_remote(self.seg_dir):
            return self.band_chunks is not None and self.signature_rows is not None
        return self.band_map is not None and self.signature_map is not None

    @property
    def direct_signatures(self) -> bool:
        return self.signature_map is not None or self.signature_rows is not None

    def read_signature_rows(self, docs: np.ndarray, gap: int = ROW_GAP_BYTES) -> np.ndarray:
        """``uint16[m, k]`` signatures of sorted, distinct ``docs``: byte ranges of rows less
        than ``gap`` bytes apart, read concurrently (object stores), else Lance's take."""
        if self.signature_map is not None:
            return self.signature_map.read_rows(docs)
        if self.signature_rows is None:
            return self.read_signatures(docs)
        k = self.params.num_hashes
        return self.signature_rows.read_rows(docs, gap).view("<u2").reshape(-1, k).astype(np.uint16, copy=False)

    def read_band_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(band_key, doc_id)`` of sorted, distinct band ``rows`` in one batch of reads."""
        if self.band_map is not None:
            return self.band_map[0].read_rows(rows), self.band_map[1].read_rows(rows)
        if self.band_chunks is not None:
            keys, docs = read_columns(list(self.band_chunks), rows)
            return keys, docs
        t = self.bands.take_rows(np.asarray(rows, dtype=np.uint64).tolist(),
                                 batch_size=max(1024, len(rows))).to_table()
        return t.column(0).to_numpy(), t.column(1).to_numpy()

    def read_bands(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``(band_key, doc_id)`` of band rows ``[start, start + count)``."""
        if count <= 0:
            return np.empty(0, np.uint64), np.empty(0, np.uint32)
        if self.band_map is not None and count <= MAPPED_MAX_ROWS:
            return self.band_map[0].read_range(start, count), self.band_map[1].read_range(start, count)
        t = self.bands.read_range(start, count, batch_size=max(1024, count)).to_table()
        return (t.column(0).to_numpy(), t.column(1).to_numpy())

    def map_bands(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(band_key, doc_id)`` of band rows ``[start, start + count)`` copied out of the
        memory map whatever their number (a kernel without the GIL), None when the file is
        not mapped. Needs no lock: the file never changes and the copy touches no shared
        state, so a self-join's shards read their key ranges at the same time."""
        if self.band_map is None:
            return None
        return (self.band_map[0].read_range(start, count, release=True),
                self.band_map[1].read_range(start, count, release=True))

    def take_docs(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stored ``(row ids, signatures)`` of sorted, distinct ``docs``: one Lance take."""
        t = self.signatures.take_rows(np.asarray(docs, dtype=np.int64).tolist(),
                                      batch_size=max(1024, len(docs))).to_table()
        return self._rowids_and_signatures(t)

    def read_doc_range(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Stored ``(row ids, signatures)`` of docs ``[start, start + count)``."""
        t = self.signatures.read_range(start, count, batch_size=max(1, count)).to_table()
        return self._rowids_and_signatures(t)

    def _rowids_and_signatures(self, t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        sigs = t.column(1).combine_chunks().values.to_numpy().reshape(-1, self.params.num_hashes)
        return t.column(0).to_numpy(), sigs

    def read_all_bands(self) -> tuple[np.ndarray, np.ndarray]:
        """Every band row: ``(band_key u64[n], doc_id u32[n])``."""
        n = self.num_band_rows
        if self.band_map is not None and n <= MAPPED_MAX_ROWS:
            return self.read_bands(0, n)
        keys = np.empty(n, dtype=np.uint64)
        docs = np.empty(n, dtype=np.uint32)
        w = 0
        for batch in self.bands.read_all(batch_size=1 << 20).to_batches():
            m = batch.num_rows
            keys[w:w + m] = batch.column(0).to_numpy()
            docs[w:w + m] = batch.column(1).to_numpy()
            w += m
        return keys, docs

    def read_all_docs(self, stored_rowids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Every doc's stored ``(row id, signature)`` (``stored_rowids``: already read)."""
        n, k = self.num_docs, self.params.num_hashes
        if self.signature_map is not None and n <= MAPPED_MAX_ROWS:
            rowids = stored_rowids if stored_rowids is not None else self.read_rowids()
            return rowids, self.signature_map.read_range(0, n)
        rowids = np.empty(n, dtype=np.uint64)
        sigs = np.empty((n, k), dtype=np.uint16)
        w = 0
        for batch in self.signatures.read_all(batch_size=1 << 16).to_batches():
            m = batch.num_rows
            rowids[w:w + m] = batch.column(0).to_numpy()
            sigs[w:w + m] = batch.column(1).values.to_numpy().reshape(-1, k)
            w += m
        return rowids, sigs

    @functools.cached_property
    def rowid_bytes(self) -> int:
        """Stored size of signatures.lance's ``_rowid`` column."""
        return sum(int(b.size) for p in self.sig_file.metadata().columns[0].pages for b in p.buffers)

    def take_rowids(self, docs: np.ndarray) -> np.ndarray:
        """Stored row ids of sorted, distinct ``docs`` (one take of the ``_rowid`` column)."""
        reader = self.sig_file if self.sig_rowids_only else self.signatures
        t = reader.take_rows(np.asarray(docs, dtype=np.uint64).tolist(), batch_size=max(1024, len(docs))).to_table()
        return t.column("_rowid").to_numpy()

    def read_rowids(self, start: int = 0, count: int | None = None) -> np.ndarray:
        """Stored row ids of docs ``[start, start + count)`` (default: every doc), in doc order."""
        reader = self.sig_file if self.sig_rowids_only else LanceFileReader(
            os.path.join(self.seg_dir, SIGNATURES_FILE), columns=["_rowid"], storage_options=self.storage_options)
        if count is not None:
            return reader.read_range(start, count, batch_size=max(1, count)).to_table().column(0).to_numpy()
        ids = reader.read_all(batch_size=1 << 20).to_table().column(0).to_numpy()
        if ids.size != self.num_docs:
            raise CorruptIndexError(f"{os.path.join(self.seg_dir, SIGNATURES_FILE)}: {ids.size} row ids for "
                                    f"{self.num_docs} docs; rebuild the index")
        return ids

    def read_signatures(self, docs: np.ndarray | None = None, start: int = 0, count: int | None = None) -> np.ndarray:
        """``uint16[m, k]`` signatures of sorted doc ids, or of a contiguous doc range."""
        reader = LanceFileReader(os.path.join(self.seg_dir, SIGNATURES_FILE), columns=["signature"],
                                 storage_options=self.storage_options)
        if docs is not None:
            t = reader.take_rows(np.asarray(docs, dtype=np.uint64).tolist()).to_table() if len(docs) else None
        else:
            count = self.num_docs - start if count is None else count
            t = reader.read_range(start, count, batch_size=1 << 16).to_table() if count else None
        k = self.params.num_hashes
        if t is None:
            return np.empty((0, k), np.uint16)
        col = t.column(0).combine_chunks()
        return col.values.to_numpy().reshape(-1, k)


def iter_signatures(files: SegmentFiles, batch_rows: int = 1 << 16):
    """``(row ids u64[n], signatures u16[n, k])`` of a segment's docs in doc order, read in
    chunks of ``batch_rows`` (a merge streams a segment without holding it whole)."""
    k = files.params.num_hashes
    for start in range(0, files.num_docs, batch_rows):
        n = min(batch_rows, files.num_docs - start)
        t = files.signatures.read_range(start, n, batch_size=n).to_table()
        rowids = t.column(0).to_numpy()
        sigs = t.column(1).combine_chunks().values.to_numpy().reshape(-1, k)
        del t
        yield rowids, sigs


# pylance 14.0.2's LanceFileReader.read_global_buffer blocks on Lance's runtime while it
# holds the GIL; with other threads inside Lance at the same moment (8 threads searching
# while an index is rebuilt) the process deadlocks: the read waits for Lance's I/O, which
# waits for a thread that waits for the GIL. The file's metadata gives the buffer's
# position and size, so a local file is read directly; other stores go through Lance one
# read at a time.
_GLOBAL_BUFFER_LOCK = threading.Lock()


def local_path(path: str) -> str | None:
    """The file system path of a local file (plain or ``file://``), None for object stores."""
    return path[7:] if path.startswith("file://") else None if "://" in path else path


def _global_buffer(reader: LanceFileReader | FileTail, file_meta, path: str, index: int, read_range=None) -> bytes:
    buffers = file_meta.global_buffers
    if not 0 <= index < len(buffers):
        raise CorruptIndexError(f"{path}: global buffer {index} (the page table) is missing (the file has {len(buffers)}); "
                                "rebuild the index")
    desc = buffers[index]
    local = local_path(path)
    if isinstance(reader, FileTail):  # opened from its tail: the buffer is one ranged read
        position, size = desc
        data = read_range(position, size)
        if len(data) != size:
            raise CorruptIndexError(f"{path}: global buffer {index} ends past the end of the file; rebuild the index")
        return data
    if local is None:
        with _GLOBAL_BUFFER_LOCK:
            return reader.read_global_buffer(index)
    with open(local, "rb") as f:
        f.seek(desc.position)
        data = f.read(desc.size)
    if len(data) != desc.size:
        raise CorruptIndexError(f"{path}: global buffer {index} ends past the end of the file; rebuild the index")
    return data


def _read_failure(path: str, exc: Exception, storage_options) -> tuple[str, str]:
    """``(path, message)`` of a failed read of an index file, both with the storage options
    and credentials of the URI redacted: the one place a segment's errors are redacted."""
    return redact_uri(path), redact(str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__, storage_options)


def _open_reader(path: str, storage_options, columns=None) -> LanceFileReader:
    try:
        return LanceFileReader(path, storage_options=storage_options, columns=columns)
    except Exception as exc:
        where, msg = _read_failure(path, exc, storage_options)
        if is_remote(path):
            raise DatasetError(f"{where}: cannot read index file ({msg}); check the credentials "
                               "and endpoint in storage_options, or rebuild the index if it is damaged") from None
        raise CorruptIndexError(f"{path}: cannot open index file ({msg}); rebuild the index") from None


def _bands_tail(session, bpath: str, total_bytes: int | None, sfile, storage_options) -> FileTail | None:
    """bands.lance opened from its tail on an object store, without Lance's reader (which
    asks for the file's size, then reads its tail): its size is the segment's size in the
    manifest less signatures.lance's, so one read gives the footer, the column metadata
    and the schema metadata. None when the manifest records no size or the bytes there are
    not a Lance file's tail (then Lance's reader opens it); a store that fails is an error."""
    start, size = tail_span(sfile)
    band_bytes = (total_bytes or 0) - (start + size)
    if band_bytes <= FOOTER_BYTES:
        return None
    try:
        return read_file_tail(_reader_of(session, BANDS_FILE), bpath, band_bytes)
    except CorruptIndexError as exc:  # the manifest's size is not the files' (the one case to fall back)
        log.debug("%s: %s; opening it with Lance's reader", redact_uri(bpath), exc)
        return None
    except (OSError, ValueError, RuntimeError) as exc:  # the store failed: Lance's reader would too
        where, msg = _read_failure(bpath, exc, storage_options)
        raise DatasetError(f"{where}: cannot read index file ({msg}); check the credentials and "
                           "endpoint in storage_options") from None


def open_segment(seg_dir: str, storage_options=None, total_bytes: int | None = None) -> SegmentFiles:
    """Open and validate a segment's two files (metadata, versions, page table, counts).

    ``total_bytes`` (the segment's size in the manifest) lets an object store's
    bands.lance be opened from one read of its tail (:func:`_bands_tail`)."""
    bpath = os.path.join(seg_dir, BANDS_FILE)
    spath = os.path.join(seg_dir, SIGNATURES_FILE)
    remote = is_remote(seg_dir)
    session = LanceFileSession(seg_dir, storage_options=storage_options or None) if remote else None
    sigs = _open_reader(spath, storage_options, ["_rowid"] if remote else None)
    sfile, smeta = _metadata(sigs, spath)
    bands = _bands_tail(session, bpath, total_bytes, sfile, storage_options) if remote else None
    if bands is None:
        bands = _open_reader(bpath, storage_options)
        bfile, bmeta = _metadata(bands, bpath)
    else:
        bfile, bmeta = bands, bands.metadata
    for meta, path in ((bmeta, bpath), (smeta, spath)):
        version = _require(meta, KEY_VERSION, path)
        if version != str(INDEX_VERSION):
            raise UnsupportedIndexError(
                f"{path}: minhash_lsh_index_version={version}, but this package reads version "
                f"{INDEX_VERSION} (pylance 14.0.x); rebuild the index with minhash_build"
            )
    params = params_from_hex(_require(bmeta, KEY_DETAILS, bpath), bpath)
    if params_from_hex(_require(smeta, KEY_DETAILS, spath), spath) != params:
        raise CorruptIndexError(f"{seg_dir}: signatures.lance and bands.lance record different parameters")
    num_docs = _int(bmeta, KEY_NUM_DOCS, bpath)
    page_rows = _int(bmeta, KEY_PAGE_ROWS, bpath)
    if page_rows <= 0:
        raise CorruptIndexError(f"{bpath}: {KEY_PAGE_ROWS}={page_rows} must be positive")
    sig_rows = sfile.num_rows
    band_rows = bfile.num_rows
    if sig_rows != num_docs:
        raise CorruptIndexError(f"{bpath}: {KEY_NUM_DOCS}={num_docs} but signatures.lance has {sig_rows} rows")
    if band_rows != num_docs * params.num_bands:
        raise CorruptIndexError(
            f"{bpath}: {band_rows} band rows, expected num_docs * num_bands = {num_docs * params.num_bands}")
    try:
        raw = _global_buffer(bands, bfile, bpath, _int(bmeta, KEY_PAGE_TABLE, bpath),
                             _reader_of(session, BANDS_FILE) if remote else None)
    except CorruptIndexError:
        raise
    except Exception as exc:
        raise CorruptIndexError(f"{bpath}: cannot read the page table ({exc})") from None
    if len(raw) % 8:
        raise CorruptIndexError(f"{bpath}: page table of {len(raw)} bytes is not a multiple of 8")
    table = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
    if len(table) != -(-band_rows // page_rows):
        raise CorruptIndexError(f"{bpath}: page table has {len(table)} entries, expected ceil({band_rows} / {page_rows})")
    if len(table) > 1 and not (table[1:] >= table[:-1]).all():
        raise CorruptIndexError(f"{bpath}: band rows are not sorted (page table decreases); rebuild the index")
    files = SegmentFiles(seg_dir, params, num_docs, page_rows, table, band_rows,
                         None if isinstance(bands, FileTail) else bands, sigs, storage_options, sig_rowids_only=remote)
    k = params.num_hashes
    if remote:
        blayout = bands.layout if isinstance(bands, FileTail) else read_layout(_reader_of(session, BANDS_FILE), bpath, bfile)
        slayout = read_layout(_reader_of(session, SIGNATURES_FILE), spath, sfile)
        files.band_chunks = _band_chunks(session, bpath, blayout)
        files.signature_rows = fixed_rows(_reader_of(session, SIGNATURES_FILE), spath, slayout, 1, k, 2)
    else:
        files.band_map, files.signature_map, blayout, slayout = _local_maps(bpath, spath, bfile, sfile, k)
    files.slow_reason = _slow_reason(blayout, slayout, k)
    if files.slow_reason is not None and num_docs > 1:  # one doc: its doc column is constant by necessity
        log.warning("%s: %s; this segment is read through Lance's reader, one call per read",
                    redact_uri(seg_dir), files.slow_reason)
    return files


_MAPS = ByteCache.for_objects("memory maps of segment files", 16)  # (paths, k, file stamps) -> _local_maps


def _stamp(path: str) -> tuple[int, int, int]:
    st = os.stat(local_path(path))
    return st.st_ino, st.st_size, st.st_mtime_ns


def _local_maps(bpath: str, spath: str, bfile, sfile, k: int) -> tuple:
    """``(band_map, signature_map, bands layout, signatures layout)`` of a local segment:
    both files memory-mapped, their layouts parsed and every chunk header checked once
    per file (its path, inode, size and modification time: a segment's files are never
    rewritten), so the opens of one segment that follow (a plan, then the index update
    and its commit) cost a lookup."""
    key = (bpath, spath, k, _stamp(bpath), _stamp(spath))
    hit = _MAPS.get(key)
    if hit is not None:
        return hit
    bmap, smap = _mapped(bpath), _mapped(spath)
    blayout, slayout = _mapped_layout(bmap, bpath, bfile), _mapped_layout(smap, spath, sfile)
    keys = mapped_column(bmap, bpath, blayout, 0, np.uint64)
    docs = mapped_column(bmap, bpath, blayout, 1, np.uint32)
    band_map = None if keys is None or docs is None else (keys, docs)
    got = (band_map, mapped_rows(smap, spath, slayout, 1, k, 2), blayout, slayout)
    _MAPS.put(key, got)
    return got


def _mapped(path: str) -> np.ndarray:
    local = local_path(path)
    try:
        return map_file(local)
    except (OSError, ValueError) as exc:
        raise CorruptIndexError(f"{path}: cannot map the index file ({exc}); rebuild the index") from None


def _mapped_layout(mm: np.ndarray, path: str, file_meta) -> FileLayout:
    start, size = tail_span(file_meta)
    if start + size != mm.size:
        raise CorruptIndexError(f"{path}: the file is {mm.size} bytes, its metadata says {start + size}; "
                                "rebuild the index")
    return parse_layout(path, mm[start:].tobytes(), start, int(file_meta.num_rows))


def _slow_reason(blayout: FileLayout, slayout: FileLayout, k: int) -> str | None:
    """Why a segment's files are not laid out as the fast readers read them, naming the
    file, the column and its encoding; None when they are."""
    checks = ((blayout, 0, layout_problem(blayout, 0, 64)), (blayout, 1, layout_problem(blayout, 1, 32)),
              (slayout, 1, rows_problem(slayout, 1, k, 2)))
    for layout, index, why in checks:
        if why is not None:
            name = os.path.basename(layout.path)
            encoding = layout.describe(index) if index < len(layout.columns) else "none"
            return f"{name} column {index} is not read directly ({why}; encoding: {encoding})"
    return None


def _reader_of(session: LanceFileSession, name: str):
    def read(offset: int, length: int) -> bytes:
        return session.read_range(name, offset, length)

    return read


def _band_chunks(session: LanceFileSession, bpath: str, layout: FileLayout) -> tuple | None:
    """Chunk readers of bands.lance's two columns, or None when its layout is not the one
    :mod:`.chunks` reads (the Lance reader is used then, with a warning)."""
    read = _reader_of(session, BANDS_FILE)
    keys = chunked_column(read, bpath, layout, 0, np.uint64)
    docs = chunked_column(read, bpath, layout, 1, np.uint32)
    return None if keys is None or docs is None else (keys, docs)

