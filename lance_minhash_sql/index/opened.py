"""An opened MinHash LSH index: one dataset version and column, and the process cache.

:func:`open_index` returns an :class:`OpenedIndex`: the column's segments (from the
manifest), each segment's files (opened and validated by :func:`open_segment`), the
parameters (identical across segments, or the index is refused), the fragments the
segments cover and the dataset's current fragments (the rest are *unindexed* and are
searched by signing them on the fly), and :class:`Liveness`, which tells deleted row ids
from live ones.

Segment data lives in one process-wide LRU cache with a byte capacity
(:data:`DEFAULT_CACHE_BYTES`, ``LANCE_MINHASH_CACHE_BYTES`` overrides,
:func:`set_cache_capacity` changes it at run time), keyed by ``(dataset uri, segment
uuid)``: segment files never change once written. A cold query reads only what it needs:
the page table at open; for each bucket a window of band rows around its predicted
position (all windows in one take; band keys are hashes, so interpolation inside a page
lands within a few dozen rows) or, where a window cannot prove the bucket's bounds, its
pages; then the signatures and row ids of its candidates. Pages and signatures go into
per-segment *pools* that later queries reuse (windows are not kept). A segment that
keeps paying for small reads is loaded whole when it fits (ski rental: once the time spent
on partial reads reaches the estimated time of one full read), and a batch whose reads
would cost about as much as a full read loads it whole at once. Usage never exceeds the
capacity: room is reserved (evicting least recently used segments) before a pool grows;
when a segment's data cannot fit, the query reads what it needs into a transient pool
that is not cached.

All Lance access goes through ``io/`` (files, manifest, scans) or through methods of the
dataset object that ``io.scan.open_dataset`` returned (fragments, ``_take_rows``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import (
    CorruptIndexError,
    DatasetError,
    IndexNotFoundError,
    InvalidParameterError,
    UnsupportedIndexError,
)
from ..io.manifest import SegmentInfo, minhash_segments, segment_dir
from ..io.rowids import FragReuse, frag_reuse
from ..io.rowids import remap as remap_rowids
from ..io.scan import open_dataset, options_for, scan_text, text_field
from ..io.segments import SegmentFiles, open_segment
from ..io.store import is_remote
from ..kernels.lsh import (bucket_rows, page_table_of, pages_needed, sort_bands, sorted_unique, window_indices,
                           window_plan, window_rows)
from ..params import DEFAULT_PAGE_ROWS, INDEX_VERSION, SIGNATURE_VERSION, MinHashParams
from .sign import signer_for

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "CACHE_ENV",
    "CacheInfo",
    "cache_capacity",
    "set_cache_capacity",
    "cache_usage",
    "cache_info",
    "clear_cache",
    "SegmentEntry",
    "Liveness",
    "OpenedIndex",
    "open_index",
    "dataset_handle",
    "dataset_at",
    "DROPPED_ROWID",
]

DEFAULT_CACHE_BYTES = 1 << 30
CACHE_ENV = "LANCE_MINHASH_CACHE_BYTES"

# Read cost model (measured on the 2-core development machine, pylance 14.0.2, local
# disk): one read_range / take_rows call costs 0.3-0.7 ms before its bytes; whole-file
# reads stream at 160-220 MB/s.
READ_CALL_SECONDS = 5e-4
READ_BYTES_PER_SECOND = 180e6
# Object stores: a round trip of tens of milliseconds (S3 first byte: 10-50 ms) and one
# stream at about 100 MB/s. Remote segments charge the estimates, not the measured time,
# to the ski rental below, so a slow store cannot make a whole-file read look cheap.
REMOTE_READ_CALL_SECONDS = 0.03
REMOTE_READ_BYTES_PER_SECOND = 100e6
PAGE_GAP = 3  # read up to 2 unneeded pages rather than make another call
WINDOW_ROWS = 256  # rows fetched around a cold bucket's predicted position (error ~32 rows)
WINDOW_MAX_ROWS = 1 << 16  # above this many window rows a batch reads pages instead
# a local segment's row ids are read whole (8 bytes a doc) once a read asks for at least
# 1/64 of its docs (a self-join shard); fewer go through a take of the row ids only
_LOCAL_ROWIDS_FRACTION = 64
TAKE_ROW_SECONDS = 2e-5  # signatures.lance take_rows: 30 us a row for tens, 12 us for 10,000
_FIRST_POOL_PAGES = 64
_FIRST_POOL_DOCS = 1024
_MAX_TAKE = 1 << 20  # row ids per Lance take call
_MAX_OPENED = 64  # opened dataset versions kept (small objects; segment data is in the cache)
# the row id given to a row that a compaction dropped (fragment 0xFFFFFFFF never exists)
DROPPED_ROWID = np.uint64(0xFFFFFFFFFFFFFFFF)


# --------------------------------------------------------------------------- the cache


def _parse_bytes(value: str) -> int:
    text = value.strip().upper().removesuffix("B")
    scale = 1
    for suffix, mult in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if text.endswith(suffix):
            text, scale = text[:-1], mult
            break
    try:
        n = int(float(text) * scale)
    except ValueError:
        n = -1
    if n < 0:
        raise InvalidParameterError(
            f"{CACHE_ENV}={value!r} is not a byte count; use e.g. 1073741824, 512M or 2G")
    return n


def _check_capacity(nbytes: Any) -> int:
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
        raise InvalidParameterError(
            f"cache capacity {nbytes!r} must be an integer number of bytes >= 0; e.g. 1 << 30 (1 GiB), "
            "or 0 to cache nothing")
    return int(nbytes)


@dataclass(frozen=True)
class CacheInfo:
    capacity: int
    usage: int
    entries: int
    hits: int
    misses: int
    evictions: int


class _ByteLRU:
    """An LRU of objects with byte sizes; the sum never exceeds ``capacity``."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.usage = 0
        self.sizes: OrderedDict[Any, int] = OrderedDict()
        self.values: dict[Any, Any] = {}
        self.lock = threading.RLock()
        self.hits = self.misses = self.evictions = 0

    def get(self, key):
        with self.lock:
            if key in self.values:
                self.sizes.move_to_end(key)
                self.hits += 1
                return self.values[key]
            self.misses += 1
            return None

    def _evict_for(self, extra: int, keep) -> bool:
        for other in list(self.sizes):
            if self.usage + extra <= self.capacity:
                break
            if other == keep:
                continue
            self._drop(other)
            self.evictions += 1
        return self.usage + extra <= self.capacity

    def _drop(self, key) -> None:
        self.usage -= self.sizes.pop(key)
        value = self.values.pop(key)
        detach = getattr(value, "_detach", None)
        if detach is not None:
            detach()

    def put(self, key, value, nbytes: int) -> bool:
        """Insert (replacing ``key``); False, and nothing cached, if it cannot fit."""
        with self.lock:
            if key in self.values:
                self._drop(key)
            if nbytes > self.capacity or not self._evict_for(nbytes, key):
                return False
            self.sizes[key] = nbytes
            self.values[key] = value
            self.usage += nbytes
            return True

    def adopt(self, key, value, nbytes: int):
        """The value cached under ``key``: one another thread cached first, else ``value``
        (cached if it fits). Concurrent openers thus share one entry instead of replacing,
        and emptying, each other's."""
        with self.lock:
            if key in self.values:
                self.sizes.move_to_end(key)
                return self.values[key]
            value.cached = self.put(key, value, nbytes)
            return value

    def reserve(self, key, extra: int) -> bool:
        """Grow ``key``'s size by ``extra`` bytes, evicting others; False if impossible."""
        with self.lock:
            if key not in self.values:
                return False
            if extra <= 0:
                self.sizes[key] += extra
                self.usage += extra
                return True
            if not self._evict_for(extra, key):
                return False
            self.sizes[key] += extra
            self.usage += extra
            self.sizes.move_to_end(key)
            return True

    def set_capacity(self, capacity: int) -> None:
        with self.lock:
            self.capacity = capacity
            self._evict_for(0, None)

    def clear(self) -> None:
        with self.lock:
            for key in list(self.sizes):
                self._drop(key)


_cache: _ByteLRU | None = None
_cache_lock = threading.Lock()


def _the_cache() -> _ByteLRU:
    global _cache
    if _cache is None:
        with _cache_lock:
            if _cache is None:
                env = os.environ.get(CACHE_ENV)
                _cache = _ByteLRU(DEFAULT_CACHE_BYTES if env is None or not env.strip() else _parse_bytes(env))
    return _cache


def cache_capacity() -> int:
    """The segment cache's capacity in bytes."""
    return _the_cache().capacity


def set_cache_capacity(nbytes: int) -> int:
    """Set the segment cache's capacity (bytes; evicts at once if needed); returns the old one."""
    cache = _the_cache()
    old = cache.capacity
    cache.set_capacity(_check_capacity(nbytes))
    return old


def cache_usage() -> int:
    """Bytes held by the segment cache now (never above :func:`cache_capacity`)."""
    return _the_cache().usage


def cache_info() -> CacheInfo:
    c = _the_cache()
    with c.lock:
        return CacheInfo(c.capacity, c.usage, len(c.sizes), c.hits, c.misses, c.evictions)


def clear_cache() -> None:
    """Drop every cached segment and opened dataset version."""
    _the_cache().clear()
    with _opened_lock:
        _opened.clear()
        _datasets.clear()


# --------------------------------------------------------------------------- segment data


def whole_read_pays(rent: float, partial: float, whole: float) -> bool:
    """Ski rental: read a file whole once the time spent on partial reads (``rent``, measured)
    plus this read's estimate (``partial``) reaches the estimate of one whole read."""
    return rent + partial >= whole


def _readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view (the kernels compile once, for read-only arrays)."""
    v = a.view()
    v.setflags(write=False)
    return v


def _runs(idx: np.ndarray, gap: int = 1) -> list[tuple[int, int]]:
    """Sorted indices → runs ``(first, count)``, bridging holes of fewer than ``gap`` indices."""
    if idx.size == 0:
        return []
    cut = np.flatnonzero(np.diff(idx) > gap) + 1
    firsts = np.concatenate(([0], cut))
    lasts = np.concatenate((cut, [idx.size]))
    return [(int(idx[a]), int(idx[b - 1] - idx[a] + 1)) for a, b in zip(firsts, lasts)]


class BandStore:
    """Band pages of one segment in a pool: page ``p`` at rows ``[slot[p] * page_rows, ...)``."""

    def __init__(self, page_table: np.ndarray, page_rows: int, num_rows: int):
        self.page_table = _readonly(np.ascontiguousarray(page_table, dtype=np.uint64))
        self.page_rows = int(page_rows)
        self.num_rows = int(num_rows)
        self.num_pages = int(page_table.size)
        self.page_slot = np.full(self.num_pages, -1, dtype=np.int32)
        self.keys = np.empty(0, dtype=np.uint64)
        self.docs = np.empty(0, dtype=np.uint32)
        self.used = 0  # pool slots filled
        self.full = False

    @property
    def nbytes(self) -> int:
        return self.page_table.nbytes + self.page_slot.nbytes + self.keys.nbytes + self.docs.nbytes

    def file_bytes(self) -> int:
        return self.num_rows * 12

    def missing(self, need: np.ndarray) -> np.ndarray:
        return np.flatnonzero(need & (self.page_slot < 0))

    def grow_bytes(self, new_pages: int) -> int:
        """Extra bytes the pool needs to hold ``new_pages`` more pages."""
        cap = self.keys.size // max(self.page_rows, 1)
        want = self.used + new_pages
        if want <= cap:
            return 0
        new_cap = max(_FIRST_POOL_PAGES, cap * 2, want)
        new_cap = min(new_cap, self.num_pages)
        return (new_cap - cap) * self.page_rows * 12

    def _ensure_capacity(self, new_pages: int) -> None:
        extra = self.grow_bytes(new_pages)
        if extra:
            cap = self.keys.size // self.page_rows + extra // (self.page_rows * 12)
            keys = np.empty(cap * self.page_rows, dtype=np.uint64)
            docs = np.empty(cap * self.page_rows, dtype=np.uint32)
            n = self.used * self.page_rows
            keys[:n] = self.keys[:n]
            docs[:n] = self.docs[:n]
            self.keys, self.docs = keys, docs

    def add_pages(self, first: int, count: int, keys: np.ndarray, docs: np.ndarray) -> None:
        """Store pages ``first .. first + count - 1`` (their rows, in order) not yet stored."""
        new = int((self.page_slot[first:first + count] < 0).sum())
        self._ensure_capacity(new)
        pr = self.page_rows
        for i in range(count):
            p = first + i
            if self.page_slot[p] >= 0:
                continue
            rows = min(pr, self.num_rows - p * pr)
            src = slice(i * pr, i * pr + rows)
            dst = self.used * pr
            self.keys[dst:dst + rows] = keys[src]
            self.docs[dst:dst + rows] = docs[src]
            self.page_slot[p] = self.used
            self.used += 1

    def set_full(self, keys: np.ndarray, docs: np.ndarray) -> None:
        self.keys, self.docs = keys, docs
        self.page_slot = np.arange(self.num_pages, dtype=np.int32)
        self.used = self.num_pages
        self.full = True

    def arrays(self):
        return (_readonly(self.page_slot), _readonly(self.keys), _readonly(self.docs))

    def copy_pages(self, need: np.ndarray) -> "BandStore":
        """A new store holding the already-loaded pages among ``need``."""
        out = BandStore(self.page_table, self.page_rows, self.num_rows)
        have = np.flatnonzero(need & (self.page_slot >= 0))
        for first, count in _runs(have):
            for p in range(first, first + count):
                s = int(self.page_slot[p]) * self.page_rows
                rows = min(self.page_rows, self.num_rows - p * self.page_rows)
                out.add_pages(p, 1, self.keys[s:s + rows], self.docs[s:s + rows])
        return out


class DocStore:
    """Row ids and signatures of one segment's docs in a pool addressed by ``doc_slot``.

    ``doc_slot`` is empty once the store is full (slot = doc id).
    """

    def __init__(self, num_docs: int, num_hashes: int):
        self.num_docs = int(num_docs)
        self.k = int(num_hashes)
        self.doc_slot = np.empty(0, dtype=np.int32)
        self.rowids = np.empty(0, dtype=np.uint64)
        self.sigs = np.empty((0, self.k), dtype=np.uint16)
        self.used = 0
        self.full = False
        # every doc's stored row id, kept for object stores (one read per segment): the
        # signatures of candidates are then plain byte ranges
        self.all_rowids: np.ndarray | None = None

    @property
    def row_bytes(self) -> int:
        return 8 + 2 * self.k

    @property
    def nbytes(self) -> int:
        extra = 0 if self.all_rowids is None else self.all_rowids.nbytes
        return self.doc_slot.nbytes + self.rowids.nbytes + self.sigs.nbytes + extra

    def file_bytes(self) -> int:
        return self.num_docs * self.row_bytes

    def missing(self, docs: np.ndarray) -> np.ndarray:
        """The (sorted, unique) ``docs`` not in the pool."""
        if self.full:
            return docs[:0]
        if self.doc_slot.size == 0:
            return docs
        return docs[self.doc_slot[docs] < 0]

    def grow_bytes(self, new_docs: int) -> int:
        extra = 0
        if not self.full and self.doc_slot.size == 0 and self.num_docs:
            extra += self.num_docs * 4
        cap = self.rowids.size
        want = self.used + new_docs
        if want > cap:
            new_cap = min(max(_FIRST_POOL_DOCS, cap * 2, want), self.num_docs)
            extra += (new_cap - cap) * self.row_bytes
        return extra

    def ensure_capacity(self, new_docs: int) -> None:
        """Grow the pool (and allocate ``doc_slot``) as :meth:`grow_bytes` accounts for."""
        if self.doc_slot.size == 0:
            self.doc_slot = np.full(self.num_docs, -1, dtype=np.int32)
        cap = self.rowids.size
        want = self.used + new_docs
        if want > cap:
            new_cap = min(max(_FIRST_POOL_DOCS, cap * 2, want), self.num_docs)
            r = np.empty(new_cap, dtype=np.uint64)
            s = np.empty((new_cap, self.k), dtype=np.uint16)
            r[:self.used] = self.rowids[:self.used]
            s[:self.used] = self.sigs[:self.used]
            self.rowids, self.sigs = r, s

    def add_docs(self, docs: np.ndarray, rowids: np.ndarray, sigs: np.ndarray) -> None:
        self.ensure_capacity(docs.size)
        end = self.used + docs.size
        self.rowids[self.used:end] = rowids
        self.sigs[self.used:end] = sigs
        self.doc_slot[docs] = np.arange(self.used, end, dtype=np.int32)
        self.used = end

    def set_full(self, rowids: np.ndarray, sigs: np.ndarray) -> None:
        self.rowids, self.sigs = rowids, sigs
        self.all_rowids = None
        self.doc_slot = np.empty(0, dtype=np.int32)
        self.used = self.num_docs
        self.full = True

    def arrays(self):
        return (_readonly(self.doc_slot), _readonly(self.rowids), _readonly(self.sigs))

    def copy_docs(self, docs: np.ndarray) -> "DocStore":
        out = DocStore(self.num_docs, self.k)
        have = docs if self.full else (docs[self.doc_slot[docs] >= 0] if self.doc_slot.size else docs[:0])
        if have.size:
            slots = have.astype(np.int64) if self.full else self.doc_slot[have]
            out.add_docs(have, self.rowids[slots], self.sigs[slots])
        return out


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
        self.call_seconds = REMOTE_READ_CALL_SECONDS if self.remote else READ_CALL_SECONDS
        self.bytes_per_second = REMOTE_READ_BYTES_PER_SECOND if self.remote else READ_BYTES_PER_SECOND
        self.stats = {"band_pages_read": 0, "window_rows_read": 0, "docs_read": 0, "full_loads": 0}

    @property
    def nbytes(self) -> int:
        return self.bands.nbytes + self.docs.nbytes

    def _detach(self) -> None:
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
            self._settle()

    def _rent(self, t0: float, estimate: float) -> float:
        """What a partial read costs the ski rental: the time it took (local files), or the
        estimate (object stores)."""
        return estimate if self.remote else time.perf_counter() - t0

    def _reserve(self, extra: int) -> bool:
        return self.cached and _the_cache().reserve(self.key, extra)

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
        win_docs = _readonly(np.empty(0, dtype=np.uint32))
        resolved = None
        # On an object store every take costs a round trip per storage chunk however few
        # rows it wants, so whole pages (cached for later queries) cost what windows cost.
        if not store.full and self.files is not None and not self.remote:
            slot_ro = _readonly(store.page_slot)
            ws, we = window_plan(qkeys, lo, hi, store.page_table, slot_ro, store.page_rows, store.num_rows,
                                 WINDOW_ROWS)
            windows = int(np.count_nonzero(ws >= 0))
            rows = window_indices(ws, we) if 0 < windows * WINDOW_ROWS <= WINDOW_MAX_ROWS else ws[:0]
            if rows.size:
                t0 = time.perf_counter()
                t = self.files.bands.take_rows(rows.tolist(), batch_size=max(1024, rows.size)).to_table()
                self.rent_bands += self._rent(t0, self.call_seconds + rows.size * 12 / self.bytes_per_second)
                self.stats["window_rows_read"] += int(rows.size)
                win_keys = _readonly(np.ascontiguousarray(t.column(0).to_numpy()))
                win_docs = _readonly(np.ascontiguousarray(t.column(1).to_numpy()))
                wstart, wend, exact = window_rows(qkeys, ws, we, _readonly(rows), win_keys,
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
        runs = _runs(missing, PAGE_GAP)
        pages = sum(c for _, c in runs)
        calls = 1 if self.remote else len(runs)  # remote runs go in one concurrent take
        partial = calls * self.call_seconds + pages * store.page_rows * 12 / self.bytes_per_second
        whole = store.file_bytes() / self.bytes_per_second
        if self.files is not None and whole_read_pays(self.rent_bands, partial, whole):
            extra = store.file_bytes() + store.page_table.nbytes + store.num_pages * 4 - store.nbytes
            if self._reserve(extra):
                keys, docs = self._read_all_bands()
                store.set_full(keys, docs)
                self._settle()
                return store.arrays()
        if self._reserve(store.grow_bytes(pages)):
            store._ensure_capacity(pages)  # grow once, by exactly what was reserved
        else:
            store = store.copy_pages(need)  # transient: not cached
        t0 = time.perf_counter()
        pr = store.page_rows
        spans = [(first, count, first * pr, min(count * pr, store.num_rows - first * pr)) for first, count in runs]
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
            self._settle()
        return store.arrays()

    def _read_all_bands(self):
        n = self.bands.num_rows
        keys = np.empty(n, dtype=np.uint64)
        docs = np.empty(n, dtype=np.uint32)
        w = 0
        for batch in self.files.bands.read_all(batch_size=1 << 20).to_batches():
            m = batch.num_rows
            keys[w:w + m] = batch.column(0).to_numpy()
            docs[w:w + m] = batch.column(1).to_numpy()
            w += m
        self.stats["full_loads"] += 1
        return keys, docs

    # -- docs -----------------------------------------------------------------------

    def doc_arrays(self, docs: np.ndarray):
        """``(doc_slot, rowids, signatures)`` with every doc of sorted unique ``docs`` loaded."""
        store = self.docs
        if store.full:
            return store.arrays()
        missing = store.missing(docs)
        if missing.size == 0:
            return store.arrays()
        mapped = not self.remote and self.files is not None and self.files.signature_rows is not None
        partial = self.call_seconds + missing.size * (store.row_bytes / self.bytes_per_second
                                                      if self.remote or mapped else TAKE_ROW_SECONDS)
        whole = store.file_bytes() / self.bytes_per_second
        if self.files is not None and whole_read_pays(self.rent_docs, partial, whole):
            extra = store.file_bytes() - store.nbytes
            if self._reserve(extra):
                rowids, sigs = self._read_all_docs()
                store.set_full(rowids, sigs)
                self._settle()
                return store.arrays()
        if self._reserve(store.grow_bytes(missing.size)):
            store.ensure_capacity(missing.size)  # grow once, by exactly what was reserved
        else:
            store = store.copy_docs(docs)  # transient: not cached
        t0 = time.perf_counter()
        for s in range(0, missing.size, _MAX_TAKE):
            part = missing[s:s + _MAX_TAKE]
            rowids, sig = self._read_docs(part)
            store.add_docs(part, self.map_rowids(rowids), sig)
        self.rent_docs += self._rent(t0, partial)
        self.stats["docs_read"] += int(missing.size)
        if store is self.docs:
            self._settle()
        return store.arrays()

    def _read_docs(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stored ``(row ids, signatures)`` of sorted ``docs``: on an object store the
        signatures as byte ranges (one request per run of nearby docs, all concurrent) and
        the row ids from memory (see :meth:`stored_rowids`); on a local disk the signatures
        from a memory map and the row ids from memory once many docs are asked for (8
        bytes a doc, read whole), else with one take; failing both, one Lance take."""
        files = self.files
        if files.signature_rows is not None:
            if not self.remote and docs.size * _LOCAL_ROWIDS_FRACTION >= self.docs.num_docs:
                self._all_rowids()
            return self._raw_rowids(docs), files.read_signature_rows(docs)
        t = files.signatures.take_rows(docs.astype(np.int64).tolist(), batch_size=max(1024, docs.size)).to_table()
        return t.column(0).to_numpy(), t.column(1).combine_chunks().values.to_numpy().reshape(-1, self.docs.k)

    def stored_rowids(self, docs: np.ndarray) -> np.ndarray | None:
        """Row ids (as the dataset version knows them) of candidate ``docs`` on an object
        store, None elsewhere: from the segment's row id column once it is resident (read
        whole when the ski rental says it pays: at once for a small segment), until then
        with one take of just these docs, kept for the signature reads that follow."""
        if self.docs.full:
            return self.docs.rowids[docs]
        if not self.remote or self.files is None or self.files.signature_rows is None:
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
        if store.all_rowids is None and self._reserve(store.num_docs * 8):
            store.all_rowids = self.files.read_rowids()
            self._settle()
        return store.all_rowids

    def _read_all_docs(self):
        n, k = self.docs.num_docs, self.docs.k
        rowids = np.empty(n, dtype=np.uint64)
        sigs = np.empty((n, k), dtype=np.uint16)
        w = 0
        for batch in self.files.signatures.read_all(batch_size=1 << 16).to_batches():
            m = batch.num_rows
            rowids[w:w + m] = batch.column(0).to_numpy()
            sigs[w:w + m] = batch.column(1).values.to_numpy().reshape(-1, k)
            w += m
        self.stats["full_loads"] += 1
        return self.map_rowids(rowids), sigs

    def map_rowids(self, rowids: np.ndarray) -> np.ndarray:
        """Stored row ids as the dataset version knows them: through the fragment-reuse
        index of a deferred compaction remap (a dropped row gets :data:`DROPPED_ROWID`)."""
        if self.remap is None or rowids.size == 0:
            return rowids
        return self.remap(rowids)

    def _settle(self) -> None:
        """Make the cache's account of this entry exact (pool growth rounds differently)."""
        if self.cached:
            cache = _the_cache()
            with cache.lock:
                if self.key in cache.sizes:
                    diff = self.nbytes - cache.sizes[self.key]
                    if diff and not cache.reserve(self.key, diff):
                        cache._drop(self.key)


def _remapper(ds):
    def remap(rowids: np.ndarray) -> np.ndarray:
        out, kept = remap_rowids(ds, rowids)
        out[~kept] = DROPPED_ROWID
        return out
    return remap


def needs_remap(info: SegmentInfo, reuse: FragReuse | None) -> bool:
    """True if the segment predates a compaction whose index remap was deferred."""
    return reuse is not None and info.dataset_version < reuse.dataset_version


def _segment_entry(uri: str, info: SegmentInfo, ds, storage_options, reuse: FragReuse | None = None) -> SegmentEntry:
    stale = needs_remap(info, reuse)
    # remapped row ids belong to one fragment-reuse index (a new round has a new uuid)
    key = (uri, info.uuid, reuse.uuid) if stale else (uri, info.uuid)
    cache = _the_cache()
    entry = cache.get(key)
    if entry is not None:
        return entry
    files = open_segment(segment_dir(ds, info.uuid), storage_options=storage_options)
    bands = BandStore(files.page_table, files.page_rows, files.num_band_rows)
    docs = DocStore(files.num_docs, files.params.num_hashes)
    entry = SegmentEntry(key, f"segment {info.uuid}", files.params, files, bands, docs)
    if stale:
        entry.remap = _remapper(ds)
    return cache.adopt(key, entry, entry.nbytes)


def _flat_entry(opened: "OpenedIndex", fragment_ids: tuple[int, ...]) -> SegmentEntry:
    """The unindexed fragments as an in-memory segment: signed now, sorted, cached."""
    ds = opened.ds
    frags = [ds.get_fragment(f) for f in fragment_ids]
    files_key = tuple((f.fragment_id, tuple(d.path for d in f.data_files())) for f in frags)
    key = (opened.uri, "unindexed", opened.params, files_key)
    cache = _the_cache()
    entry = cache.get(key)
    if entry is not None:
        return entry
    signer = signer_for(opened.params)
    rowid_parts, sig_parts = [], []
    for rowids, texts in scan_text(ds, opened.column, fragments=frags):
        sigs, has = signer.sign(texts)
        rowid_parts.append(rowids[has])
        sig_parts.append(sigs[has])
    k = opened.params.num_hashes
    rowids = np.concatenate(rowid_parts) if rowid_parts else np.empty(0, np.uint64)
    sigs = np.concatenate(sig_parts) if sig_parts else np.empty((0, k), np.uint16)
    keys, docs = sort_bands(signer.band_keys(sigs))
    pages = page_table_of(keys, DEFAULT_PAGE_ROWS)
    bands = BandStore(pages, DEFAULT_PAGE_ROWS, keys.size)
    bands.set_full(keys, docs)
    store = DocStore(rowids.size, k)
    store.set_full(rowids.astype(np.uint64, copy=False), sigs)
    entry = SegmentEntry(key, f"unindexed fragments {list(fragment_ids)}", opened.params, None, bands, store)
    return cache.adopt(key, entry, entry.nbytes)


# --------------------------------------------------------------------------- deletions


class Liveness:
    """Which row ids of one dataset version are live.

    Cheap by construction: with row addresses, a version whose fragments have no deletion
    files and which still has every fragment the index covers needs no check at all, and
    ids of fragments that no longer exist are deleted without asking. Otherwise the ids
    that may be deleted (with row addresses: those in fragments with a deletion file; with
    stable row ids: all) are checked: row addresses against each such fragment's live rows,
    read once per version; stable row ids with one Lance take of the ``_rowid`` column,
    which drops deleted rows (0.1 ms for 20 ids, 0.4 ms for 1,000 on 1M rows; the first take
    of a stable-row-id version builds Lance's row id index, 37 ms on 1M rows), answers
    remembered for the version.
    """

    def __init__(self, ds, covered: frozenset):
        frags = ds.get_fragments()
        self.ds = ds
        self.current = np.array(sorted(f.fragment_id for f in frags), dtype=np.uint64)
        self.with_deletions = np.array(
            sorted(f.fragment_id for f in frags if f.metadata.deletion_file is not None), dtype=np.uint64)
        self.stable = bool(ds.has_stable_row_ids)
        self.missing_fragments = frozenset(covered) - set(int(f) for f in self.current)
        self._valid_filters: set[str] = set()
        # With stable row ids an index can hold ids that no fragment has any more (rows
        # deleted before a compaction keep their ids in the index), so every candidate
        # is checked; with row addresses a deletion always leaves a deletion file (or
        # removes the fragment), and compaction makes Lance rewrite the index.
        self.trivial = not self.stable and self.with_deletions.size == 0 and not self.missing_fragments
        self._known = np.empty(0, dtype=np.uint64)
        self._alive = np.empty(0, dtype=np.bool_)
        self._live_rows: dict[int, np.ndarray] = {}  # fragment id -> bool[physical rows]
        self._lock = threading.Lock()

    def _maybe_dead(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(alive-so-far, needs-check) for row ids."""
        if self.stable:
            return np.ones(rowids.size, dtype=np.bool_), np.ones(rowids.size, dtype=np.bool_)
        frag = rowids >> np.uint64(32)
        alive = np.isin(frag, self.current)
        return alive, alive & np.isin(frag, self.with_deletions)

    def alive(self, rowids: np.ndarray) -> np.ndarray:
        """``bool[n]`` for unique row ids."""
        if self.trivial or rowids.size == 0:
            return np.ones(rowids.size, dtype=np.bool_)
        alive, check = self._maybe_dead(rowids)
        ids = rowids[check]
        if ids.size:
            alive[check] = self._lookup(ids) if self.stable else self._by_fragment(ids)
        return alive

    def _by_fragment(self, addresses: np.ndarray) -> np.ndarray:
        """Live flags of row addresses in fragments with a deletion file, from each
        fragment's live rows, read once per version (one read of the deletion file; a
        take would read it again on every query, one request each on an object store)."""
        frag = (addresses >> np.uint64(32)).astype(np.int64)
        offset = (addresses & np.uint64(0xFFFFFFFF)).astype(np.int64)
        out = np.zeros(addresses.size, dtype=np.bool_)
        for f in np.unique(frag).tolist():
            sel = frag == f
            live = self._fragment_live(f)
            off = offset[sel]
            inside = off < live.size
            out[np.flatnonzero(sel)[inside]] = live[off[inside]]
        return out

    def load(self) -> None:
        """Read the live rows of every fragment with a deletion file now (prewarm)."""
        if not self.stable:
            for f in self.with_deletions.tolist():
                self._fragment_live(int(f))

    def _fragment_live(self, fragment_id: int) -> np.ndarray:
        with self._lock:
            live = self._live_rows.get(fragment_id)
        if live is None:
            frag = self.ds.get_fragment(fragment_id)
            addr = frag.to_table(columns=[], with_row_address=True).column(0).to_numpy()
            offsets = (addr & np.uint64(0xFFFFFFFF)).astype(np.int64)
            size = max(int(frag.metadata.physical_rows or 0), int(offsets.max()) + 1 if offsets.size else 0)
            live = np.zeros(size, dtype=np.bool_)
            live[offsets] = True
            with self._lock:
                self._live_rows[fragment_id] = live
        return live

    def _lookup(self, ids: np.ndarray) -> np.ndarray:
        with self._lock:
            known, flags = self._known, self._alive
        out = np.zeros(ids.size, dtype=np.bool_)
        if known.size:
            pos = np.minimum(np.searchsorted(known, ids), known.size - 1)
            hit = known[pos] == ids
            out[hit] = flags[pos[hit]]
        else:
            hit = np.zeros(ids.size, dtype=np.bool_)
        new = ids[~hit]
        if new.size:
            live = self.live_of(new)
            out[~hit] = live
            with self._lock:
                k2 = np.concatenate((self._known, new))
                f2 = np.concatenate((self._alive, live))
                o = np.argsort(k2, kind="stable")
                self._known, self._alive = k2[o], f2[o]
        return out

    def live_of(self, ids: np.ndarray) -> np.ndarray:
        """Ask Lance: ``bool[n]`` live flags of row ids (a take drops deleted rows)."""
        out = np.zeros(ids.size, dtype=np.bool_)
        for s in range(0, ids.size, _MAX_TAKE):
            part = ids[s:s + _MAX_TAKE]
            got = self.ds._take_rows(pa.array(part, type=pa.uint64()), ["_rowid"]).column(0).to_numpy()
            out[s:s + part.size] = np.isin(part, got)
        return out

    def _matches(self, ids: np.ndarray, expr: str) -> pa.Table:
        """``_rowid`` and ``_ok`` (the filter's value) of the live ones of ``ids``: one take."""
        try:
            t = self.ds._take_rows(pa.array(ids, type=pa.uint64()), {"_rowid": "_rowid", "_ok": expr})
        except (ValueError, OSError, RuntimeError) as exc:
            msg = str(exc).splitlines()[0][:300]
            raise InvalidParameterError(
                f"filter={expr!r} is not a valid Lance filter expression for this dataset ({msg}); "
                "use SQL over the dataset's columns, e.g. \"id > 10 AND lang = 'en'\"") from None
        if not pa.types.is_boolean(t.column("_ok").type):
            raise InvalidParameterError(
                f"filter={expr!r} must be a boolean expression, but it has type {t.column('_ok').type}; "
                "e.g. \"id > 10\"")
        return t

    def check_filter(self, expr: str) -> None:
        """Refuse a filter that is not a boolean expression over this version's columns,
        whether or not any row is a candidate (checked once per version and filter)."""
        if expr not in self._valid_filters:
            self._matches(np.empty(0, dtype=np.uint64), expr)
            self._valid_filters.add(expr)

    def filter_mask(self, ids: np.ndarray, expr: str) -> np.ndarray:
        """``bool[n]``: row ids that are live and match the Lance filter ``expr`` (one take)."""
        self.check_filter(expr)
        out = np.zeros(ids.size, dtype=np.bool_)
        if ids.size == 0:
            return out
        maybe, _ = self._maybe_dead(ids) if not self.trivial else (np.ones(ids.size, np.bool_), None)
        ask = ids[maybe]
        res = np.zeros(ask.size, dtype=np.bool_)
        for s in range(0, ask.size, _MAX_TAKE):
            part = ask[s:s + _MAX_TAKE]
            t = self._matches(part, expr)
            got = t.column("_rowid").to_numpy()
            flags = t.column("_ok").fill_null(False).to_numpy(zero_copy_only=False)
            res[s:s + part.size] = np.isin(part, got[flags])
        out[maybe] = res
        return out


# --------------------------------------------------------------------------- opened index


def _check_manifest_details(uri: str, column: str, info: SegmentInfo, params: MinHashParams, path: str) -> None:
    """The segment's files must carry the parameters the manifest records for the index, as
    Lance requires ("index file details ... do not match index details")."""
    details = info.details
    if not details:
        return
    version = details.get("signature_version") or 0
    if version != SIGNATURE_VERSION:
        raise UnsupportedIndexError(
            f"the MinHash LSH index on {column!r} of {uri!r} was built with signature_version {version}, "
            f"but this package computes version {SIGNATURE_VERSION} (pylance 14.0.x); rebuild it with "
            f"minhash_build('{uri}', '{column}')")
    diffs = [f"{key}: files {getattr(params, key)!r}, manifest {details[key]!r}"
             for key in ("num_hashes", "num_bands", "shingle_size")
             if key in details and details[key] != getattr(params, key)]
    recorded = details.get("tokenizer") or {}
    diffs += [f"tokenizer.{key}: files {value!r}, manifest {recorded[key]!r}"
              for key, value in params.tokenizer.to_dict().items() if key in recorded and recorded[key] != value]
    if diffs:
        raise CorruptIndexError(
            f"the files of segment {info.uuid} ({path}) were written with parameters other than the "
            f"index details in the manifest ({'; '.join(diffs)}); Lance refuses them too. Rebuild the "
            f"index with minhash_build('{uri}', '{column}', replace := true)")


@dataclass
class OpenedIndex:
    """A column's MinHash LSH index in one dataset version."""

    uri: str
    ds: Any
    version: int
    column: str
    params: MinHashParams
    segments: tuple[SegmentInfo, ...]
    covered: frozenset
    fragments: tuple[int, ...]
    unindexed: tuple[int, ...]
    liveness: Liveness
    storage_options: dict | None = field(default=None, repr=False)  # may hold secrets
    reuse: FragReuse | None = None  # a deferred compaction remap to apply to old segments

    def segment_entries(self) -> list[SegmentEntry]:
        """Each segment's cache entry (re-opened if it was evicted)."""
        out = []
        for info in self.segments:
            out.append(_segment_entry(self.uri, info, self.ds, self.storage_options, self.reuse))
        return out

    def unindexed_entry(self) -> SegmentEntry | None:
        if not self.unindexed:
            return None
        return _flat_entry(self, self.unindexed)

    def prewarm(self) -> bool:
        """Load the segments into the cache (as ``ds.prewarm_index`` does for Lance), up to
        its capacity (:func:`.prewarm.warm`); True if all of them fit whole."""
        from .prewarm import warm

        return warm(self).complete

    @property
    def stable_row_ids(self) -> bool:
        return self.liveness.stable


_opened: OrderedDict = OrderedDict()
_datasets: dict = {}
_pinned: OrderedDict = OrderedDict()  # (uri, options, version) -> dataset at that version
_opened_lock = threading.Lock()


def _options_key(storage_options) -> Any:
    return None if not storage_options else tuple(sorted((str(k), str(v)) for k, v in storage_options.items()))


def dataset_handle(dataset, storage_options=None):
    """``(uri, LanceDataset)``: a dataset object as given, or the latest version of a URI.

    Opened URIs are kept; each call checks for a newer version (about 0.05 ms locally).
    """
    if hasattr(dataset, "_take_rows") and hasattr(dataset, "uri"):
        return str(dataset.uri).rstrip("/"), dataset
    if not isinstance(dataset, (str, os.PathLike)):
        raise DatasetError(f"dataset={dataset!r} must be a path or URI of a Lance dataset (or a LanceDataset)")
    uri = os.fspath(dataset)
    key = (uri, _options_key(storage_options))
    with _opened_lock:
        ds = _datasets.get(key)
    if ds is not None:
        try:
            latest = ds.latest_version
        except (ValueError, OSError, RuntimeError):
            latest = None
        if latest is None:
            ds = None
        elif latest != ds.version:
            try:
                ds = ds.checkout_version(latest)
            except (ValueError, OSError, RuntimeError):
                ds = None
    if ds is None:
        ds = open_dataset(uri, storage_options=storage_options)
    with _opened_lock:
        _datasets[key] = ds
        while len(_datasets) > _MAX_OPENED:
            _datasets.pop(next(iter(_datasets)))
    return str(ds.uri).rstrip("/"), ds


def dataset_at(dataset: str, version: int, storage_options=None):
    """The dataset at ``version``, without asking the store for a newer one: the opened
    handle when it is that version, else a checkout of it (kept, like opened handles).

    A SQL search plans its columns on one version and runs on exactly that version.
    """
    uri = os.fspath(dataset)
    opts = _options_key(storage_options)
    with _opened_lock:
        ds = _datasets.get((uri, opts))
        if ds is not None and int(ds.version) == version:
            return ds
        ds = _pinned.get((uri, opts, version))
    if ds is None:
        ds = open_dataset(uri, storage_options=storage_options, version=version)
        with _opened_lock:
            _pinned[(uri, opts, version)] = ds
            while len(_pinned) > _MAX_OPENED:
                _pinned.popitem(last=False)
    return ds


def open_index(dataset, column: str, storage_options=None) -> OpenedIndex:
    """Open (or reuse) the MinHash LSH index of ``column`` in the dataset's current version."""
    storage_options = options_for(dataset, storage_options)
    uri, ds = dataset_handle(dataset, storage_options)
    version = int(ds.version)
    key = (uri, version, column, _options_key(storage_options))
    with _opened_lock:
        hit = _opened.get(key)
        if hit is not None:
            _opened.move_to_end(key)
            return hit
    text_field(ds, column, uri)
    segments = tuple(minhash_segments(ds, column))
    if not segments:
        raise IndexNotFoundError(
            f"column {column!r} of dataset {uri!r} has no MinHash LSH index; build one with "
            f"SELECT * FROM minhash_build('{uri}', '{column}') (or Lance's "
            f"create_scalar_index('{column}', 'MINHASHLSH'))")
    for info in segments:
        if info.index_version != INDEX_VERSION:
            raise UnsupportedIndexError(
                f"segment {info.uuid} of the MinHash LSH index on {column!r} has index_version "
                f"{info.index_version}, but this package reads version {INDEX_VERSION} (pylance 14.0.x); "
                f"rebuild it with minhash_build('{uri}', '{column}')")
    reuse = frag_reuse(ds)
    entries = [_segment_entry(uri, info, ds, storage_options, reuse) for info in segments]
    params = entries[0].params
    for info, entry in zip(segments[1:], entries[1:]):
        if entry.params != params:
            diff = "; ".join(params.differences(entry.params))
            raise UnsupportedIndexError(
                f"the MinHash LSH index on {column!r} of {uri!r} has segments with different parameters: "
                f"segment {segments[0].uuid} vs segment {info.uuid}: {diff}. Lance refuses such an "
                f"index too; rebuild it with minhash_build('{uri}', '{column}', replace := true)")
    for info, entry in zip(segments, entries):
        _check_manifest_details(uri, column, info, entry.params, segment_dir(ds, info.uuid))
    covered = frozenset().union(*(s.fragment_ids for s in segments))
    liveness = Liveness(ds, covered)
    if any(needs_remap(info, reuse) for info in segments):
        liveness.trivial = False  # rows a compaction dropped carry DROPPED_ROWID
    fragments = tuple(int(f) for f in liveness.current)
    unindexed = tuple(f for f in fragments if f not in covered)
    opened = OpenedIndex(uri, ds, version, column, params, segments, covered, fragments, unindexed,
                         liveness, storage_options, reuse)
    with _opened_lock:
        _opened[key] = opened
        while len(_opened) > _MAX_OPENED:
            _opened.popitem(last=False)
    return opened
