"""A segment in the process cache: its files, its stores, and how it reads.

:func:`segment_entry` returns the cached :class:`SegmentEntry` of a segment (opening its
files on a miss), keyed by ``(dataset uri, segment uuid)``: segment files never change
once written. A cold query reads only what it needs: the page table at open; for each
bucket a window of band rows around its predicted position (all windows in one read;
band keys are hashes, so interpolation inside a page lands within a few dozen rows) or,
where a window cannot prove the bucket's bounds, its pages; then the signatures and row
ids of its candidates. Local files are read through memory maps, object stores by ranged
reads (io/mapped.py, io/chunks.py). Pages and signatures go into the segment's stores (:mod:`.stores`)
that later queries reuse (windows are not kept). A segment that keeps paying for small
reads is loaded whole when it fits (ski rental: once the time spent on partial reads
reaches the estimated time of one full read). Usage never exceeds the segment cache's
capacity (:mod:`..runtime.cache`): room is reserved (evicting least recently used segments)
before a store grows; when a segment's data cannot fit, the query reads what it needs into
a transient store that is not cached.

:func:`flat_entry` holds the rows of fragments no segment covers, signed on the fly.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from lance_minhash_sql.core.params import DEFAULT_PAGE_ROWS, MinHashParams
from lance_minhash_sql.core.tuning import (MAPPED_READ_CALL_SECONDS, READ_BYTES_PER_SECOND, READ_CALL_SECONDS,
                                           REMOTE_READ_BYTES_PER_SECOND, REMOTE_READ_CALL_SECONDS,
                                           REMOTE_ROW_GAP_BYTES, ROW_GAP_BYTES)
from lance_minhash_sql.index.band_reads import BandReader
from lance_minhash_sql.index.doc_reads import DocReader
from lance_minhash_sql.index.stores import BandStore, DocStore
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.index.band_sorter import sort_runs
from lance_minhash_sql.io.handles import DatasetVersion
from lance_minhash_sql.io.manifest import FragReuse, SegmentInfo, segment_dir
from lance_minhash_sql.io.rowids import remap as remap_rowids
from lance_minhash_sql.io.scan import fragments_of, scan_text
from lance_minhash_sql.io.segments import SegmentFiles, open_segment
from lance_minhash_sql.io.store import is_remote
from lance_minhash_sql.kernels.lsh import band_rows, page_table_of
from lance_minhash_sql.runtime.cache import segment_cache
from lance_minhash_sql.runtime.threads import num_threads

__all__ = ["SegmentEntry", "ReadCost", "segment_entry", "flat_entry", "signed_rows", "signed_entry", "needs_remap",
           "DROPPED_ROWID"]

# the row id given to a row that a compaction dropped (fragment 0xFFFFFFFF never exists)
DROPPED_ROWID = np.uint64(0xFFFFFFFFFFFFFFFF)


class ReadCost:
    """What a segment's reads cost (core/tuning.py's read cost model: a call, a byte; local
    files, memory maps, object stores) and what its partial reads of each kind (``bands``,
    ``docs``, ``rowids``) have cost so far: the rent of the ski rental that decides when a
    file is read whole (``core/tuning.py: whole_read_pays``)."""

    __slots__ = ("remote", "call_seconds", "bytes_per_second", "gap_bytes", "rent")

    def __init__(self, files: SegmentFiles | None):
        self.remote = files is not None and is_remote(files.seg_dir)
        self.call_seconds = (REMOTE_READ_CALL_SECONDS if self.remote else
                             MAPPED_READ_CALL_SECONDS if files is not None and files.fast_path else READ_CALL_SECONDS)
        self.bytes_per_second = REMOTE_READ_BYTES_PER_SECOND if self.remote else READ_BYTES_PER_SECOND
        self.gap_bytes = REMOTE_ROW_GAP_BYTES if self.remote else ROW_GAP_BYTES  # rows this close share a read
        self.reset()

    def reset(self) -> None:
        self.rent = {"bands": 0.0, "docs": 0.0, "rowids": 0.0}

    def charge(self, kind: str, t0: float, estimate: float) -> None:
        """Add a partial read to the rent of its kind: the time it took since ``t0`` (local
        files), or ``estimate`` (object stores, so a slow store cannot make a whole-file
        read look cheap)."""
        self.rent[kind] += estimate if self.remote else time.perf_counter() - t0


class SegmentEntry:
    """One segment in the process cache: its files, its lock, its account in the segment
    cache, and its two readers, each owning its store: the band rows
    (:class:`.band_reads.BandReader`, :attr:`bands` its store) and the docs
    (:class:`.doc_reads.DocReader`, :attr:`docs` its store). Use under :attr:`lock` (Lance
    readers are not thread-safe) except where a method says otherwise; arrays handed out
    stay valid after the lock is released. The methods below are the entry's face to the
    search, the self-join, prewarm and reports; each hands on to one reader."""

    def __init__(self, key, name: str, params: MinHashParams, files: SegmentFiles | None,
                 bands: BandStore, docs: DocStore, remap=None):
        self.key = key
        self.name = name  # for messages: segment uuid or "unindexed fragments [...]"
        self.params = params
        self.files = files
        self.lock = threading.RLock()
        self.cached = False
        self.cost = ReadCost(files)
        # reads from the files: pages and windows of band rows and docs into the stores
        # (kernels), bucket rows and docs gathered without stores (query/probe.py), whole loads
        self.stats = {"band_pages_read": 0, "window_rows_read": 0, "bucket_rows_read": 0, "docs_read": 0,
                      "full_loads": 0}
        self.remote = self.cost.remote
        # row ids as stored -> row ids of the dataset version (a deferred compaction remap)
        self.remap = remap
        self.band_reads = BandReader(files, bands, self.cost, self, self.stats)
        self.doc_reads = DocReader(files, docs, self.cost, self, self.stats, self.lock, remap)
        self._stores()

    def _stores(self) -> None:
        """:attr:`bands` and :attr:`docs`: the readers' stores (replaced only by :meth:`_empty`)."""
        self.bands: BandStore = self.band_reads.store
        self.docs: DocStore = self.doc_reads.store

    @property
    def nbytes(self) -> int:
        return self.bands.nbytes + self.docs.nbytes

    # ------------------------------------------------------------------ the cache account

    def reserve(self, extra: int) -> bool:
        """Room for ``extra`` more bytes in the segment cache (evicting others); False when
        this entry is not cached or the room cannot be made."""
        return self.cached and segment_cache().reserve(self.key, extra)

    def settle(self) -> None:
        """Make the cache's account of this entry exact (a store's growth rounds differently)."""
        if self.cached:
            segment_cache().settle(self.key, self.nbytes)

    def detach(self) -> None:
        """Evicted: drop the data, which the files can give again. An in-memory segment of
        unindexed rows keeps its data: searches holding it still use it, and it is freed
        with the last of them."""
        self.cached = False
        if self.files is not None:
            self._empty()

    def _empty(self) -> None:
        self.cost.reset()
        self.band_reads.reset()
        self.doc_reads.reset()
        self._stores()

    def reset(self) -> None:
        """Drop the cached band pages, signatures and row ids; keep the files open."""
        if self.files is None:
            return  # an in-memory segment of unindexed rows is all data
        with self.lock:
            self._empty()
            self.settle()

    # ------------------------------------------------------------------ band rows (band_reads.py)

    def buckets(self, qkeys: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        return self.band_reads.buckets(qkeys, lo, hi)

    def mapped_buckets(self, qkeys: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        """:meth:`buckets` searched in the band file's memory map, nothing stored, or None
        (:meth:`.band_reads.BandReader.mapped_buckets`)."""
        return self.band_reads.mapped_buckets(qkeys, lo, hi)

    def band_arrays(self, need: np.ndarray):
        return self.band_reads.arrays(need)

    def read_all_bands(self):
        return self.band_reads.read_all()

    def band_chunks(self):
        """Band keys readable without :attr:`lock` (:meth:`.band_reads.BandReader.chunks`)."""
        return self.band_reads.chunks()

    # ------------------------------------------------------------------ docs (doc_reads.py)

    def doc_arrays(self, docs: np.ndarray):
        return self.doc_reads.arrays(docs)

    def shard_docs(self, docs: np.ndarray):
        """A self-join shard's docs (:meth:`.doc_reads.DocReader.shard_docs`); takes :attr:`lock` itself."""
        return self.doc_reads.shard_docs(docs)

    def stored_rowids(self, docs: np.ndarray) -> np.ndarray | None:
        return self.doc_reads.stored_rowids(docs)

    def read_all_docs(self):
        return self.doc_reads.read_all()

    def direct_docs(self, docs: np.ndarray, out: np.ndarray, release: bool = False) -> np.ndarray | None:
        """Docs gathered without :attr:`lock` (:meth:`.doc_reads.DocReader.direct`)."""
        return self.doc_reads.direct(docs, out, release)

    def map_rowids(self, rowids: np.ndarray) -> np.ndarray:
        return self.doc_reads.map_rowids(rowids)

    def count_direct_reads(self, bucket_rows: int, docs: int) -> None:
        """Account a lock-free read (:meth:`band_chunks`, :meth:`direct_docs`) in :attr:`stats`:
        rows and docs that came from the files rather than from memory."""
        with self.lock:
            if not self.bands.full:
                self.stats["bucket_rows_read"] += int(bucket_rows)
            if not self.docs.full:
                self.stats["docs_read"] += int(docs)


def remapper(ds):
    def remap(rowids: np.ndarray) -> np.ndarray:
        out, kept = remap_rowids(ds, rowids)
        out[~kept] = DROPPED_ROWID
        return out
    return remap


def needs_remap(info: SegmentInfo, reuse: FragReuse | None) -> bool:
    """True if the segment predates a compaction whose index remap was deferred."""
    return reuse is not None and info.dataset_version < reuse.dataset_version


def segment_entry(handle: DatasetVersion, info: SegmentInfo, reuse: FragReuse | None = None) -> SegmentEntry:
    """The cached entry of the segment ``info`` of the dataset version ``handle`` (its files
    opened on a miss, with the storage options the handle holds)."""
    uri, ds = handle.uri, handle.ds
    stale = needs_remap(info, reuse)
    # remapped row ids belong to one fragment-reuse index (a new round has a new uuid)
    key = (uri, info.uuid, reuse.uuid) if stale else (uri, info.uuid)
    cache = segment_cache()
    entry = cache.get(key)
    if entry is not None:
        return entry
    files = open_segment(segment_dir(ds, info.uuid), storage_options=handle.storage_options,
                         total_bytes=info.size_bytes)
    bands = BandStore(files.page_table, files.page_rows, files.num_band_rows)
    docs = DocStore(files.num_docs, files.params.num_hashes)
    entry = SegmentEntry(key, f"segment {info.uuid}", files.params, files, bands, docs,
                         remapper(ds) if stale else None)
    return cache.adopt(key, entry, entry.nbytes)


def signed_rows(ds, column: str, params: MinHashParams, fragments=None) -> tuple[np.ndarray, np.ndarray]:
    """Row ids (uint64[n]) and signatures (uint16[n, k]) of the rows of ``column`` (of
    ``fragments``, or all) that have tokens, signed with ``params``, in scan order."""
    signer = signer_for(params)
    rowid_parts, sig_parts = [], []
    for rowids, texts in scan_text(ds, column, fragments=fragments):
        sigs, has = signer.sign(texts)
        rowid_parts.append(rowids[has])
        sig_parts.append(sigs[has])
    rowids = np.concatenate(rowid_parts).astype(np.uint64, copy=False) if rowid_parts else np.empty(0, np.uint64)
    sigs = np.concatenate(sig_parts) if sig_parts else np.empty((0, params.num_hashes), np.uint16)
    return rowids, sigs


def signed_entry(key, label: str, params: MinHashParams, rowids: np.ndarray, sigs: np.ndarray) -> SegmentEntry:
    """Signed rows (``rowids`` uint64[n], ``sigs`` uint16[n, k]) as a whole in-memory
    segment: band keys computed and sorted, page table built, both stores full."""
    keys, docs = band_rows(signer_for(params).band_keys(sigs))
    n = rowids.size
    # each band a run (kernels.lsh.sort_bands), the runs sorted at once on threads
    sort_runs(keys, docs, np.arange(params.num_bands, dtype=np.int64) * n,
              np.full(params.num_bands, n, dtype=np.int64), num_threads())
    bands = BandStore(page_table_of(keys, DEFAULT_PAGE_ROWS), DEFAULT_PAGE_ROWS, keys.size)
    bands.set_full(keys, docs)
    store = DocStore(rowids.size, params.num_hashes)
    store.set_full(rowids.astype(np.uint64, copy=False), sigs)
    return SegmentEntry(key, label, params, None, bands, store)


def flat_entry(opened, fragment_ids: tuple[int, ...]) -> SegmentEntry:
    """The unindexed fragments as an in-memory segment: signed now, sorted, cached."""
    ds = opened.ds
    frags, files_key = fragments_of(ds, fragment_ids)
    key = (opened.uri, "unindexed", opened.params, files_key)
    cache = segment_cache()
    entry = cache.get(key)
    if entry is not None:
        return entry
    rowids, sigs = signed_rows(ds, opened.column, opened.params, frags)
    entry = signed_entry(key, f"unindexed fragments {list(fragment_ids)}", opened.params, rowids, sigs)
    return cache.adopt(key, entry, entry.nbytes)
