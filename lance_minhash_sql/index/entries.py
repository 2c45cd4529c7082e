"""A segment in the process cache: its files, its pools, and how it reads.

:func:`segment_entry` returns the cached :class:`SegmentEntry` of a segment (opening its
files on a miss), keyed by ``(dataset uri, segment uuid)``: segment files never change
once written. A cold query reads only what it needs: the page table at open; for each
bucket a window of band rows around its predicted position (all windows in one read;
band keys are hashes, so interpolation inside a page lands within a few dozen rows) or,
where a window cannot prove the bucket's bounds, its pages; then the signatures and row
ids of its candidates. Local files are read through memory maps, object stores by ranged
reads (io/chunks.py). Pages and signatures go into the segment's pools (:mod:`.pools`)
that later queries reuse (windows are not kept). A segment that keeps paying for small
reads is loaded whole when it fits (ski rental: once the time spent on partial reads
reaches the estimated time of one full read). Usage never exceeds the segment cache's
capacity (:mod:`.cache`): room is reserved (evicting least recently used segments)
before a pool grows; when a segment's data cannot fit, the query reads what it needs into
a transient pool that is not cached.

:func:`flat_entry` holds the rows of fragments no segment covers, signed on the fly.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.lance_format import BAND_ROW_BYTES
from lance_minhash_sql.core.params import DEFAULT_PAGE_ROWS, MinHashParams
from lance_minhash_sql.core.tuning import (MAPPED_READ_CALL_SECONDS, PAGE_GAP, POOL_READ_ROWS, READ_BYTES_PER_SECOND,
                                           READ_CALL_SECONDS, REMOTE_READ_BYTES_PER_SECOND, REMOTE_READ_CALL_SECONDS,
                                           TAKE_ROW_SECONDS, WINDOW_MAX_ROWS, WINDOW_ROWS)
from lance_minhash_sql.index.pools import BandStore, DocStore, runs
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.index.spill import sort_runs
from lance_minhash_sql.io.manifest import SegmentInfo, segment_dir
from lance_minhash_sql.io.rowids import FragReuse
from lance_minhash_sql.io.rowids import remap as remap_rowids
from lance_minhash_sql.io.scan import fragments_of, scan_text
from lance_minhash_sql.io.segments import SegmentFiles, open_segment
from lance_minhash_sql.io.store import is_remote
from lance_minhash_sql.io.takes import MAX_TAKE
from lance_minhash_sql.kernels.lsh import (band_rows, bucket_rows, page_table_of, pages_needed, sorted_unique,
                                           window_indices, window_plan, window_rows)
from lance_minhash_sql.runtime.cache import segment_cache
from lance_minhash_sql.runtime.threads import num_threads, run_chunks

__all__ = ["SegmentEntry", "segment_entry", "flat_entry", "signed_rows", "signed_entry", "needs_remap", "whole_read_pays", "DROPPED_ROWID"]

# the row id given to a row that a compaction dropped (fragment 0xFFFFFFFF never exists)
DROPPED_ROWID = np.uint64(0xFFFFFFFFFFFFFFFF)
_ONE_CHUNK = readonly(np.zeros(1, dtype=np.int64))  # an in-memory column as one chunk



def whole_read_pays(rent: float, partial: float, whole: float) -> bool:
    """Ski rental: read a file whole once the time spent on partial reads (``rent``, measured)
    plus this read's estimate (``partial``) reaches the estimate of one whole read."""
    return rent + partial >= whole


class SegmentEntry:
    """One segment's files and cached data. Use under :attr:`lock` (Lance readers are not
    thread-safe); arrays handed out stay valid after the lock is released."""

    def __init__(self, key, name: str, params: MinHashParams, files: SegmentFiles | None,
                 bands: BandStore, docs: DocStore):
        self.key = key
        self.name = name  # for messages: segment uuid or "unindexed fragments [...]"
        self.params = params
        self.files = files
        self.bands = bands
        self.docs = docs
        self.lock = threading.RLock()
        self.cached = False
        # row ids as stored -> row ids of the dataset version (a deferred compaction remap)
        self.remap = None
        self.rent_bands = 0.0  # seconds spent on partial reads
        self.rent_docs = 0.0
        self.rent_rowids = 0.0
        self._rowid_hint = None  # (docs, stored row ids) of the last candidates' take
        self.remote = files is not None and is_remote(files.seg_dir)
        self.call_seconds = (REMOTE_READ_CALL_SECONDS if self.remote else
                             MAPPED_READ_CALL_SECONDS if files is not None and files.fast_path else READ_CALL_SECONDS)
        self.bytes_per_second = REMOTE_READ_BYTES_PER_SECOND if self.remote else READ_BYTES_PER_SECOND
        # reads from the files: pages and windows of band rows and docs into the pools
        # (kernels), bucket rows and docs gathered without pools (query/probe.py), whole loads
        self.stats = {"band_pages_read": 0, "window_rows_read": 0, "bucket_rows_read": 0, "docs_read": 0,
                      "full_loads": 0}

    @property
    def nbytes(self) -> int:
        return self.bands.nbytes + self.docs.nbytes

    def detach(self) -> None:
        """Evicted: drop the data, which the files can give again. An in-memory segment of
        unindexed rows keeps its data: searches holding it still use it, and it is freed
        with the last of them."""
        self.cached = False
        if self.files is not None:
            self._empty()

    def _empty(self) -> None:
        self.rent_bands = self.rent_docs = self.rent_rowids = 0.0
        self._rowid_hint = None
        self.bands = BandStore(self.bands.page_table, self.bands.page_rows, self.bands.num_rows)
        self.docs = DocStore(self.docs.num_docs, self.docs.k)

    def reset(self) -> None:
        """Drop the cached band pages, signatures and row ids; keep the files open."""
        if self.files is None:
            return  # an in-memory segment of unindexed rows is all data
        with self.lock:
            self._empty()
            self.settle()

    def _rent(self, t0: float, estimate: float) -> float:
        """What a partial read costs the ski rental: the time it took (local files), or the
        estimate (object stores)."""
        return estimate if self.remote else time.perf_counter() - t0

    def reserve(self, extra: int) -> bool:
        return self.cached and segment_cache().reserve(self.key, extra)

    # -- bands ----------------------------------------------------------------------

    def buckets(self, qkeys: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        """Every bucket's rows: ``(start, end, kind, page_slot, pool_docs, win_docs)`` as
        :func:`kernels.lsh.merge_candidates` takes them.

        Cold buckets are resolved from row windows fetched in one take where the window
        proves the bucket's bounds; the rest read their pages into the pool.
        """
        store = self.bands
        nq, nb = qkeys.shape
        kind = np.zeros((nq, nb), dtype=np.uint8)
        win_docs = readonly(np.empty(0, dtype=np.uint32))
        resolved = None
        # On an object store every take costs a round trip per storage chunk however few
        # rows it wants, so whole pages (cached for later queries) cost what windows cost.
        if not store.full and self.files is not None and not self.remote:
            slot_ro = readonly(store.page_slot)
            ws, we = window_plan(qkeys, lo, hi, store.page_table, slot_ro, store.page_rows, store.num_rows,
                                 WINDOW_ROWS)
            windows = int(np.count_nonzero(ws >= 0))
            rows = window_indices(ws, we) if 0 < windows * WINDOW_ROWS <= WINDOW_MAX_ROWS else ws[:0]
            if rows.size:
                t0 = time.perf_counter()
                win_keys, win_docs = self.files.read_band_rows(rows)
                self.rent_bands += self._rent(t0, self.call_seconds + rows.size * BAND_ROW_BYTES / self.bytes_per_second)
                self.stats["window_rows_read"] += int(rows.size)
                win_keys = readonly(np.ascontiguousarray(win_keys))
                win_docs = readonly(np.ascontiguousarray(win_docs))
                wstart, wend, exact = window_rows(qkeys, ws, we, readonly(rows), win_keys,
                                                  store.page_rows, store.num_rows)
                if exact.any():
                    resolved = exact
                    lo = np.where(exact, store.num_pages, lo)
                    hi = np.where(exact, store.num_pages - 1, hi)
        need = pages_needed(lo, hi, store.num_pages)
        page_slot, pool_keys, pool_docs = self.band_arrays(need)
        start, end = bucket_rows(qkeys, lo, hi, page_slot, pool_keys, store.page_rows, store.num_rows)
        if resolved is not None:
            start = np.where(resolved, wstart, start)
            end = np.where(resolved, wend, end)
            kind[resolved] = 1
        return start, end, kind, page_slot, pool_docs, win_docs

    def band_arrays(self, need: np.ndarray):
        """``(page_slot, keys, docs)`` with every page in ``need`` loaded."""
        store = self.bands
        if store.full:
            return store.arrays()
        missing = store.missing(need)
        if missing.size == 0:
            return store.arrays()
        spans_of = runs(missing, PAGE_GAP)
        pages = sum(c for _, c in spans_of)
        calls = 1 if self.remote else len(spans_of)  # remote runs go in one concurrent take
        partial = calls * self.call_seconds + pages * store.page_rows * BAND_ROW_BYTES / self.bytes_per_second
        whole = store.file_bytes() / self.bytes_per_second
        if self.files is not None and whole_read_pays(self.rent_bands, partial, whole):
            extra = store.file_bytes() + store.page_table.nbytes + store.num_pages * 4 - store.nbytes
            if self.reserve(extra):
                keys, docs = self.read_all_bands()
                store.set_full(keys, docs)
                self.settle()
                return store.arrays()
        if self.reserve(store.grow_bytes(pages)):
            store.ensure_capacity(pages)  # grow once, by exactly what was reserved
        else:
            store = store.copy_pages(need)  # transient: not cached
        t0 = time.perf_counter()
        pr = store.page_rows
        spans = [(first, count, first * pr, min(count * pr, store.num_rows - first * pr)) for first, count in spans_of]
        if self.remote:
            # one take: Lance fetches every run's chunks concurrently, a run of calls would
            # wait for each round trip (and re-read each page's chunk table) in turn
            rows = np.concatenate([np.arange(start, start + n, dtype=np.int64) for _, _, start, n in spans])
            all_keys, all_docs = self.files.read_band_rows(rows)
            at = 0
            for first, count, _, n in spans:
                store.add_pages(first, count, all_keys[at:at + n], all_docs[at:at + n])
                at += n
        else:
            for first, count, start, n in spans:
                keys, docs = self.files.read_bands(start, n)
                store.add_pages(first, count, keys, docs)
        self.rent_bands += self._rent(t0, partial)
        self.stats["band_pages_read"] += int(missing.size)
        if store is self.bands:
            self.settle()
        return store.arrays()

    def read_all_bands(self):
        self.stats["full_loads"] += 1
        return self.files.read_all_bands()

    # -- docs -----------------------------------------------------------------------

    def doc_arrays(self, docs: np.ndarray):
        """``(doc_slot, rowids, signatures)`` with every doc of sorted unique ``docs`` loaded."""
        store = self.docs
        if store.full:
            return store.arrays()
        missing = store.missing(docs)
        if missing.size == 0:
            return store.arrays()
        partial = self.call_seconds + missing.size * (TAKE_ROW_SECONDS if not self.remote
                                                      else store.row_bytes / self.bytes_per_second)
        whole = store.file_bytes() / self.bytes_per_second
        if self.files is not None and whole_read_pays(self.rent_docs, partial, whole):
            extra = store.file_bytes() - store.nbytes
            if self.reserve(extra):
                rowids, sigs = self.read_all_docs()
                store.set_full(rowids, sigs)
                self.settle()
                return store.arrays()
        if self.reserve(store.grow_bytes(missing.size)):
            store.ensure_capacity(missing.size)  # grow once, by exactly what was reserved
        else:
            store = store.copy_docs(docs)  # transient: not cached
        t0 = time.perf_counter()
        for s in range(0, missing.size, MAX_TAKE):
            part = missing[s:s + MAX_TAKE]
            rowids, sig = self._read_docs(part)
            store.add_docs(part, self.map_rowids(rowids), sig)
        self.rent_docs += self._rent(t0, partial)
        self.stats["docs_read"] += int(missing.size)
        if store is self.docs:
            self.settle()
        return store.arrays()

    def shard_docs(self, docs: np.ndarray):
        """``(slot, rowids, signatures, compact)`` of sorted unique ``docs`` for a self-join
        shard, which asks for a quarter of a million random docs at once.

        Docs already in the pool are used from there; the missing ones of a mapped local
        segment are gathered from the memory map *outside* the lock (the file never
        changes), so the other shard's thread is not kept waiting, then added to the pool
        while the cache has room. Past that they come back ``compact``: ``slot`` empty and
        row ``i`` holding ``docs[i]``, with no per-doc map of the whole segment (a shard
        used to allocate one per call once the cache was full: 40 MB at 10M rows, every
        shard). Segments read through Lance's reader or an object store take
        :meth:`doc_arrays` under the lock.
        """
        with self.lock:
            store = self.docs
            if store.full:
                return (*store.arrays(), False)
            if self.files is None or self.files.signature_map is None or self._all_rowids() is None:
                return (*self.doc_arrays(docs), False)
            raw = self.docs.all_rowids
            missing = store.missing(docs)
            if missing.size == 0:  # all pooled (a self-join's candidates: pool_docs)
                return (*store.arrays(), False)
        sigs = self.files.read_signature_rows(missing)
        rowids = self.map_rowids(raw[missing])
        with self.lock:
            store = self.docs
            if store.full:
                return (*store.arrays(), False)
            if missing.size:
                fresh = store.missing(missing)  # another shard may have added some meanwhile
                if fresh.size != missing.size:
                    at = np.searchsorted(missing, fresh)
                    missing, sigs, rowids = fresh, sigs[at], rowids[at]
                if self.reserve(store.grow_bytes(missing.size)):
                    store.add_docs(missing, rowids, sigs)
                    self.stats["docs_read"] += int(missing.size)
                    self.settle()
                    missing = missing[:0]
            if missing.size == 0 and store.missing(docs).size == 0:
                return (*store.arrays(), False)
            # compact: pooled rows from the pool, the others from this read (or, for docs
            # evicted with the pool meanwhile, read now)
            out_sigs = np.empty((docs.size, store.k), dtype=np.uint16)
            out_rowids = np.empty(docs.size, dtype=np.uint64)
            pooled = np.zeros(docs.size, dtype=np.bool_) if store.doc_slot.size == 0 else store.doc_slot[docs] >= 0
            slots = store.doc_slot[docs[pooled]]
            out_sigs[pooled] = store.sigs[slots]
            out_rowids[pooled] = store.rowids[slots]
            rest = np.flatnonzero(~pooled)
            at = np.minimum(np.searchsorted(missing, docs[rest]), max(missing.size - 1, 0))
            got = missing[at] == docs[rest] if missing.size else np.zeros(rest.size, dtype=np.bool_)
            out_sigs[rest[got]] = sigs[at[got]]
            out_rowids[rest[got]] = rowids[at[got]]
            lost = rest[~got]
            if lost.size:
                out_sigs[lost] = self.files.read_signature_rows(docs[lost])
                out_rowids[lost] = self.map_rowids(raw[docs[lost]])
            self.stats["docs_read"] += int(missing.size + lost.size)
        return readonly(np.empty(0, dtype=np.int32)), readonly(out_rowids), readonly(out_sigs), True

    def pool_docs(self, docs: np.ndarray) -> bool:
        """Pool the sorted unique ``docs`` (a self-join's candidates of all its shards) in one
        pass over a mapped local segment's signatures, in file order, when the cache has
        room for them all; True if they are all pooled. Gathered shard by shard instead,
        each shard's scattered rows map most of the file's pages again (at 10M rows, 77
        shards of ~250k docs each over 2.6 GB: 26 s of page faults in one run;
        ``docs/scale.md``)."""
        with self.lock:
            store = self.docs
            if store.full:
                return True
            if self.files is None or self.files.signature_map is None or self._all_rowids() is None:
                return False
            missing = store.missing(docs)
            if missing.size == 0:
                return True
            if not self.reserve(store.grow_bytes(missing.size)):
                return False
            rows = store.append(missing, self.map_rowids(store.all_rowids[missing]))
            mapped = self.files.signature_map

            def gather(lo: int, hi: int) -> None:  # on a few threads: mostly page faults
                mapped.read_rows(missing[lo:hi], out=rows[lo:hi], release=True)

            run_chunks(gather, missing.size, POOL_READ_ROWS)
            store.commit(missing)
            self.stats["docs_read"] += int(missing.size)
            self.settle()
            return True

    def _read_docs(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stored ``(row ids, signatures)`` of sorted ``docs``: on an object store the
        signatures as byte ranges (one request per run of nearby docs, all concurrent) and
        the row ids from memory (see :meth:`stored_rowids`), else one Lance take."""
        files = self.files
        if files.direct_signatures:
            if not self.remote:
                self._all_rowids()  # local: one read of the row id column, then none per query
            return self._raw_rowids(docs), files.read_signature_rows(docs)
        return files.take_docs(docs)

    def stored_rowids(self, docs: np.ndarray) -> np.ndarray | None:
        """Row ids (as the dataset version knows them) of candidate ``docs`` on an object
        store, None elsewhere: from the segment's row id column once it is resident (read
        whole when the ski rental says it pays: at once for a small segment), until then
        with one take of just these docs, kept for the signature reads that follow."""
        if self.docs.full:
            return self.docs.rowids[docs]
        if not self.remote or self.files is None or not self.files.direct_signatures:
            return None
        store = self.docs
        if store.all_rowids is None:
            whole = self.files.rowid_bytes / self.bytes_per_second
            if whole_read_pays(self.rent_rowids, self.call_seconds, whole):
                self._all_rowids()
        if store.all_rowids is None:
            wanted = sorted_unique(docs)
            self._rowid_hint = (wanted, self.files.take_rowids(wanted))
            self.rent_rowids += self.call_seconds
        return self.map_rowids(self._raw_rowids(docs))

    def _raw_rowids(self, docs: np.ndarray) -> np.ndarray:
        """Stored row ids of sorted ``docs``: resident, kept from the last take, or read now."""
        if self.docs.all_rowids is not None:
            return self.docs.all_rowids[docs]
        if self._rowid_hint is None:
            return self.files.take_rowids(docs)
        known, values = self._rowid_hint
        pos = np.minimum(np.searchsorted(known, docs), max(known.size - 1, 0))
        miss = np.ones(docs.size, dtype=np.bool_) if known.size == 0 else known[pos] != docs
        out = np.empty(docs.size, dtype=np.uint64)
        out[~miss] = values[pos[~miss]]
        if miss.any():
            out[miss] = self.files.take_rowids(docs[miss])
        return out

    def _all_rowids(self) -> np.ndarray | None:
        store = self.docs
        if store.all_rowids is None and self.reserve(store.num_docs * 8):
            store.all_rowids = self.files.read_rowids()
            self.settle()
        return store.all_rowids

    def read_all_docs(self):
        self.stats["full_loads"] += 1
        rowids, sigs = self.files.read_all_docs(self.docs.all_rowids)
        return self.map_rowids(rowids), sigs

    # -- lock-free reads of data that never changes -------------------------------------

    def band_chunks(self):
        """``(values, first_row, value_index, docs_of)``: the band keys as chunks (row ``r``
        of chunk ``c`` at ``values[value_index[c] + r - first_row[c]]``) and a function
        giving the doc ids of rows, read without :attr:`lock`: the keys in memory (one
        chunk), or a local segment's memory map (nothing copied). ``None`` elsewhere (an
        object store, a file Lance must decode): read pages under the lock instead."""
        store = self.bands
        if store.full:
            keys, docs = readonly(store.keys), store.docs
            return keys, _ONE_CHUNK, _ONE_CHUNK, docs.__getitem__
        if self.files is None or self.files.band_map is None:
            return None
        keys, docs = self.files.band_map
        return (*keys.chunks(), docs.read_rows)

    def direct_docs(self, docs: np.ndarray, out: np.ndarray, release: bool = False) -> np.ndarray | None:
        """Row ids of sorted unique ``docs``, their signatures written to ``out``
        (``[n, k]``), read without :attr:`lock`: from the signatures in memory, or from a
        local segment's memory map once every row id is resident (read once, under the
        lock). The pools are neither consulted nor grown (a gather from the map costs
        what one from a pool does). ``release``: the mapped pages read are handed back
        as :meth:`io.chunks.MappedRows.read_rows` does. ``None`` elsewhere: use
        :meth:`doc_arrays`."""
        store = self.docs
        if store.full:
            out[...] = store.sigs[docs]
            return store.rowids[docs]
        if self.files is None or self.files.signature_map is None:
            return None
        stored = store.all_rowids
        if stored is None:
            with self.lock:
                stored = self._all_rowids()
            if stored is None:
                return None  # the cache has no room for them
        self.files.signature_map.read_rows(docs, out=out, release=release)
        if self.remap is None:
            return stored[docs]
        with self.lock:
            return self.map_rowids(stored[docs])

    def count_direct_reads(self, bucket_rows: int, docs: int) -> None:
        """Account a lock-free read (:meth:`band_chunks`, :meth:`direct_docs`) in :attr:`stats`:
        rows and docs that came from the files rather than from memory."""
        with self.lock:
            if not self.bands.full:
                self.stats["bucket_rows_read"] += int(bucket_rows)
            if not self.docs.full:
                self.stats["docs_read"] += int(docs)

    def map_rowids(self, rowids: np.ndarray) -> np.ndarray:
        """Stored row ids as the dataset version knows them: through the fragment-reuse
        index of a deferred compaction remap (a dropped row gets :data:`DROPPED_ROWID`)."""
        if self.remap is None or rowids.size == 0:
            return rowids
        return self.remap(rowids)

    def settle(self) -> None:
        """Make the cache's account of this entry exact (pool growth rounds differently)."""
        if self.cached:
            segment_cache().settle(self.key, self.nbytes)


def remapper(ds):
    def remap(rowids: np.ndarray) -> np.ndarray:
        out, kept = remap_rowids(ds, rowids)
        out[~kept] = DROPPED_ROWID
        return out
    return remap


def needs_remap(info: SegmentInfo, reuse: FragReuse | None) -> bool:
    """True if the segment predates a compaction whose index remap was deferred."""
    return reuse is not None and info.dataset_version < reuse.dataset_version


def segment_entry(uri: str, info: SegmentInfo, ds, storage_options, reuse: FragReuse | None = None) -> SegmentEntry:
    stale = needs_remap(info, reuse)
    # remapped row ids belong to one fragment-reuse index (a new round has a new uuid)
    key = (uri, info.uuid, reuse.uuid) if stale else (uri, info.uuid)
    cache = segment_cache()
    entry = cache.get(key)
    if entry is not None:
        return entry
    files = open_segment(segment_dir(ds, info.uuid), storage_options=storage_options, total_bytes=info.size_bytes)
    bands = BandStore(files.page_table, files.page_rows, files.num_band_rows)
    docs = DocStore(files.num_docs, files.params.num_hashes)
    entry = SegmentEntry(key, f"segment {info.uuid}", files.params, files, bands, docs)
    if stale:
        entry.remap = remapper(ds)
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
    segment: band keys computed and sorted, page table built, both pools full."""
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
