"""``prewarm``: load an index into the process cache before the first query.

The segment cache (:mod:`..runtime.cache`) has a byte capacity (``LANCE_MINHASH_CACHE_BYTES``, or
:func:`~..runtime.cache.set_cache_capacity`, or ``cache_bytes=`` here). Prewarming loads, for
every segment of the column's index, first the signatures and row ids (what every
candidate needs scoring), then the band pages, each file whole when it fits and else as
many leading chunks (signatures) or pages (bands) as fit, so usage never goes above the
capacity and a later segment never evicts an earlier one's data. The live rows of
fragments with deletions are read too (small, held with the opened index, outside the
cache). Queries then read only what was not loaded.
"""

from __future__ import annotations

import time

import numpy as np

from lance_minhash_sql.core.lance_format import BAND_ROW_BYTES
from lance_minhash_sql.core.tuning import PREWARM_READ_DOCS
from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.stores import runs
from lance_minhash_sql.index.results import PrewarmResult
from lance_minhash_sql.runtime.cache import segment_cache, set_cache_capacity

__all__ = ["PrewarmResult", "prewarm", "warm"]


def _room(entries: list[SegmentEntry]) -> int:
    """Bytes the entries may still grow by without evicting each other."""
    return segment_cache().room([e.key for e in entries])


def _load_whole(entry: SegmentEntry, store, whole: int, room: int, read_all) -> bool:
    """True when the rest of ``store`` (``whole`` bytes) fits ``room``: it is then read
    whole by ``read_all`` (if the cache makes room for it) and nothing is left to do."""
    if whole > room:
        return False
    if entry.reserve(whole):
        store.set_full(*read_all())
        entry.settle()
    return True


def _reserve_units(entry: SegmentEntry, store, n: int, room: int) -> int:
    """The most units (docs or pages), up to ``n``, by which ``store`` can grow within
    ``room``, reserved in the cache and allocated; 0 when none can."""
    while n and store.grow_bytes(int(n)) > room:
        n -= 1
    if n == 0 or not entry.reserve(store.grow_bytes(int(n))):
        return 0
    store.ensure_capacity(int(n))
    return int(n)


def _warm_docs(entry: SegmentEntry, room: int) -> None:
    with entry.lock:
        store = entry.docs
        if store.full or entry.files is None or room <= 0:
            return
        if _load_whole(entry, store, store.file_bytes() - store.nbytes, room, entry.read_all_docs):
            return
        missing = store.missing(np.arange(store.num_docs, dtype=np.int64))
        m = _reserve_units(entry, store, min(missing.size, max(0, (room - store.grow_bytes(0)) // store.row_bytes)),
                           room)
        if m == 0:
            return
        for first, count in runs(missing[:m]):
            for s in range(first, first + count, PREWARM_READ_DOCS):
                n = min(PREWARM_READ_DOCS, first + count - s)
                rowids, sigs = entry.files.read_doc_range(s, n)
                store.add_docs(np.arange(s, s + n, dtype=np.int64), entry.map_rowids(rowids), sigs)
        entry.stats["docs_read"] += m
        entry.settle()


def _warm_bands(entry: SegmentEntry, room: int) -> None:
    with entry.lock:
        store = entry.bands
        if store.full or entry.files is None or room <= 0:
            return
        whole = store.file_bytes() + store.page_table.nbytes + store.num_pages * 4 - store.nbytes
        if _load_whole(entry, store, whole, room, entry.read_all_bands):
            return
        missing = store.missing(np.ones(store.num_pages, dtype=np.bool_))
        p = _reserve_units(entry, store, min(missing.size, room // (store.page_rows * BAND_ROW_BYTES)), room)
        if p == 0:
            return
        pr = store.page_rows
        for first, count in runs(missing[:p]):
            keys, docs = entry.files.read_bands(first * pr, min(count * pr, store.num_rows - first * pr))
            store.add_pages(first, count, keys, docs)
        entry.stats["band_pages_read"] += p
        entry.settle()


def warm(opened) -> PrewarmResult:
    """Prewarm an :class:`~..index.opened.OpenedIndex` (see the module docstring);
    ``warm(open_index(uri, column)).complete`` is True when every segment fits whole."""
    t0 = time.perf_counter()
    entries = opened.segment_entries()
    before = sum(e.nbytes for e in entries if e.cached)
    for e in entries:  # signatures first: every candidate needs them
        _warm_docs(e, _room(entries))
    for e in entries:
        _warm_bands(e, _room(entries))
    opened.liveness.load()
    entries = opened.segment_entries()
    cache = segment_cache()
    docs = sum(e.docs.num_docs if e.docs.full else e.docs.used for e in entries if e.cached)
    pages = sum(e.bands.num_pages if e.bands.full else e.bands.used for e in entries if e.cached)
    complete = all(e.cached and e.docs.full and e.bands.full for e in entries)
    after = sum(e.nbytes for e in entries if e.cached)
    return PrewarmResult(
        column=opened.column, segments=len(entries), bytes_loaded=max(0, after - before),
        cache_bytes=cache.usage, cache_capacity=cache.capacity, signatures_loaded=docs,
        signatures_total=sum(e.docs.num_docs for e in entries), band_pages_loaded=pages,
        band_pages_total=sum(e.bands.num_pages for e in entries), complete=complete,
        seconds=time.perf_counter() - t0)


def prewarm(dataset, column: str, *, cache_bytes: int | None = None,
            storage_options: dict | None = None) -> PrewarmResult:
    """Load the index of ``column`` into the process cache, up to its capacity (set to
    ``cache_bytes`` first when given); returns what was loaded and what the cache holds.

    Raises :class:`IndexNotFoundError` when the column has no MinHash index, and
    :class:`InvalidParameterError` for a bad ``cache_bytes``.
    """
    if cache_bytes is not None:
        set_cache_capacity(cache_bytes)
    return warm(open_index(dataset, column, storage_options))
