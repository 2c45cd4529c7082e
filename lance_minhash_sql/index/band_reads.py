"""How a segment reads its band rows: the buckets of query keys, from the store of pages,
from windows around a bucket's predicted position, or from the whole file once the partial
reads have cost as much as one whole read (docs/search.md); and, without a lock, the band
keys where they can be addressed in place (a local file's memory map, or the store held
whole).

:meth:`BandReader.mapped_buckets` finds buckets in a local segment's memory map instead,
nothing kept: a bucket costs a search inside its first and last page, from where its
key falls between the page's bounds (band keys are hashes: a few dozen key reads next to
each other), and its own rows, whatever the segment's size; for a
large batch of keys spread over a large segment (a dry run's sample,
``diagnostics/neighbours.py``), where pages would each be read whole for one bucket.

:class:`BandReader` owns the segment's band store (:class:`.stores.BandStore`); the segment
entry (``index/entries.py``) holds one and runs its reads under the entry's lock.
"""

from __future__ import annotations

import time

import numpy as np

from lance_minhash_sql.core.arrays import ONE_CHUNK, readonly
from lance_minhash_sql.core.lance_format import BAND_ROW_BYTES
from lance_minhash_sql.core.tuning import PAGE_GAP, WINDOW_MAX_ROWS, WINDOW_ROWS, whole_read_pays
from lance_minhash_sql.index.stores import BandStore, runs
from lance_minhash_sql.kernels.lsh import bucket_rows, pages_needed, window_indices, window_plan, window_rows

__all__ = ["BandReader"]


class BandReader:
    """A segment's band rows: its store (:attr:`store`) and how the files fill it.

    ``files`` is the segment's ``io.segments.SegmentFiles`` (None for rows held in memory
    only), ``cost`` its :class:`~lance_minhash_sql.index.entries.ReadCost`, ``account`` what
    charges the segment cache for the store's growth (``reserve(extra) -> bool``,
    ``settle()``), ``stats`` the segment's read counters.
    """

    def __init__(self, files, store: BandStore, cost, account, stats: dict):
        self.files = files
        self.store = store
        self.cost = cost
        self.account = account
        self.stats = stats

    def reset(self) -> None:
        """Drop the pages in the store (the page table stays: it came with the files)."""
        store = self.store
        self.store = BandStore(store.page_table, store.page_rows, store.num_rows)

    def buckets(self, qkeys: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        """Every bucket's rows: ``(start, end, kind, page_slot, store_docs, win_docs)`` as
        :func:`kernels.lsh.merge_candidates` takes them.

        Cold buckets are resolved from row windows fetched in one take where the window
        proves the bucket's bounds; the rest read their pages into the store.
        """
        store, cost = self.store, self.cost
        nq, nb = qkeys.shape
        kind = np.zeros((nq, nb), dtype=np.uint8)
        win_docs = readonly(np.empty(0, dtype=np.uint32))
        resolved = None
        # On an object store every take costs a round trip per storage chunk however few
        # rows it wants, so whole pages (cached for later queries) cost what windows cost.
        if not store.full and self.files is not None and not cost.remote:
            slot_ro = readonly(store.page_slot)
            ws, we = window_plan(qkeys, lo, hi, store.page_table, slot_ro, store.page_rows, store.num_rows,
                                 WINDOW_ROWS)
            windows = int(np.count_nonzero(ws >= 0))
            rows = window_indices(ws, we) if 0 < windows * WINDOW_ROWS <= WINDOW_MAX_ROWS else ws[:0]
            if rows.size:
                t0 = time.perf_counter()
                win_keys, win_docs = self.files.read_band_rows(rows)
                cost.charge("bands", t0, cost.call_seconds + rows.size * BAND_ROW_BYTES / cost.bytes_per_second)
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
        page_slot, store_keys, store_docs = self.arrays(need)
        start, end = bucket_rows(qkeys, lo, hi, page_slot, store_keys, store.page_rows, store.num_rows)
        if resolved is not None:
            start = np.where(resolved, wstart, start)
            end = np.where(resolved, wend, end)
            kind[resolved] = 1
        return start, end, kind, page_slot, store_docs, win_docs

    def mapped_buckets(self, qkeys: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        """Every bucket's rows as :meth:`buckets` gives them (``kind`` 1 everywhere: rows of
        ``win_docs``), searched in the band file's memory map (:mod:`module doc <.band_reads>`):
        the store is neither read nor grown; ``None`` when the file is not mapped (an object
        store, a file Lance must decode) or the store holds every page (:meth:`buckets`
        then costs no read)."""
        store = self.store
        if store.full or self.files is None or self.files.band_map is None:
            return None
        kcol, dcol = self.files.band_map
        shape = qkeys.shape
        keys = np.ascontiguousarray(qkeys, dtype=np.uint64).reshape(-1)
        lo, hi = lo.reshape(-1), hi.reshape(-1)
        pr, n = store.page_rows, store.num_rows
        has = lo < store.num_pages
        first = np.where(has, lo, 0) * pr
        end_row = np.minimum(first + pr, n)
        # band keys are hashes: inside its page a key lies about where it falls between the
        # page before's last key and the page's own (the search starts there)
        table = store.page_table
        top_key = table[np.where(has, lo, 0)].astype(np.float64)
        low_key = np.where(lo > 0, table[np.maximum(np.where(has, lo, 0) - 1, 0)], 0).astype(np.float64)
        share = np.clip((keys.astype(np.float64) - low_key) / np.maximum(top_key - low_key, 1.0), 0.0, 1.0)
        guess = first + (share * (end_row - first - 1)).astype(np.int64)
        start = _gallop(kcol, first, end_row, keys, guess, has)
        found = has & (start < n)
        found[found] = kcol.read_rows(start[found]) == keys[found]
        last = np.where(found, hi, 0) * pr
        top = keys == np.iinfo(np.uint64).max  # no key lies above it: the bucket runs to its page's end
        from_row = np.where(hi == lo, start, last)
        end = _gallop(kcol, from_row, np.minimum(last + pr, n), np.where(top, keys, keys + np.uint64(1)), from_row,
                      found & ~top)
        end = np.where(found & top, np.minimum(last + pr, n), end)
        sizes = np.where(found, end - start, 0)
        at = np.cumsum(sizes) - sizes
        rows = np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(start - at, sizes)
        win_docs = readonly(np.ascontiguousarray(dcol.read_rows(rows), dtype=np.uint32))
        self.stats["bucket_rows_read"] += int(rows.size)
        page_slot, _, store_docs = store.arrays()
        return (at.reshape(shape), (at + sizes).reshape(shape), np.ones(shape, dtype=np.uint8), page_slot,
                store_docs, win_docs)

    def arrays(self, need: np.ndarray):
        """``(page_slot, keys, docs)`` with every page in ``need`` loaded."""
        store, cost = self.store, self.cost
        if store.full:
            return store.arrays()
        missing = store.missing(need)
        if missing.size == 0:
            return store.arrays()
        spans_of = runs(missing, PAGE_GAP)
        pages = sum(c for _, c in spans_of)
        calls = 1 if cost.remote else len(spans_of)  # remote runs go in one concurrent take
        partial = calls * cost.call_seconds + pages * store.page_rows * BAND_ROW_BYTES / cost.bytes_per_second
        whole = store.file_bytes() / cost.bytes_per_second
        if self.files is not None and whole_read_pays(cost.rent["bands"], partial, whole):
            extra = store.file_bytes() + store.page_table.nbytes + store.num_pages * 4 - store.nbytes
            if self.account.reserve(extra):
                keys, docs = self.read_all()
                store.set_full(keys, docs)
                self.account.settle()
                return store.arrays()
        if self.account.reserve(store.grow_bytes(pages)):
            store.ensure_capacity(pages)  # grow once, by exactly what was reserved
        else:
            store = store.copy_pages(need)  # transient: not cached
        t0 = time.perf_counter()
        pr = store.page_rows
        spans = [(first, count, first * pr, min(count * pr, store.num_rows - first * pr)) for first, count in spans_of]
        if cost.remote:
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
        cost.charge("bands", t0, partial)
        self.stats["band_pages_read"] += int(missing.size)
        if store is self.store:
            self.account.settle()
        return store.arrays()

    def read_all(self):
        """Every band row of the file: ``(band_key u64[n], doc_id u32[n])``."""
        self.stats["full_loads"] += 1
        return self.files.read_all_bands()

    def chunks(self):
        """``(values, first_row, value_index, docs_of)``: the band keys as chunks (row ``r``
        of chunk ``c`` at ``values[value_index[c] + r - first_row[c]]``) and a function
        giving the doc ids of rows, readable without the entry's lock: the keys in memory
        (one chunk), or a local segment's memory map (nothing copied). ``None`` elsewhere
        (an object store, a file Lance must decode): read pages under the lock instead."""
        store = self.store
        if store.full:
            keys, docs = readonly(store.keys), store.docs
            return keys, ONE_CHUNK, ONE_CHUNK, docs.__getitem__
        if self.files is None or self.files.band_map is None:
            return None
        keys, docs = self.files.band_map
        return (*keys.chunks(), docs.read_rows)


def _gallop(col, lo: np.ndarray, hi: np.ndarray, target: np.ndarray, guess: np.ndarray, lanes: np.ndarray
            ) -> np.ndarray:
    """:func:`_first_at_least`, each lane's search starting at its ``guess`` in ``[lo, hi)``:
    steps of 1, 2, 4, ... rows from it, up or down, until the answer is bracketed, then a
    bisection of the bracket. A good guess reads a few keys next to each other (one page
    of the map) where a bisection of the whole range reads one key in each of several."""
    lo = np.where(lanes, lo, 0).astype(np.int64)
    hi = np.where(lanes, hi, 0).astype(np.int64)
    lane = np.flatnonzero(lo < hi)
    at = np.clip(guess[lane], lo[lane], hi[lane] - 1)
    below = col.read_rows(at) < target[lane]
    lo[lane[below]] = at[below] + 1  # the answer lies above the guess
    hi[lane[~below]] = at[~below]  # at or below it
    up, down = (lane[below], at[below]), (lane[~below], at[~below])
    step = 1
    while up[0].size or down[0].size:
        lane, at = up
        at = at + step
        inside = at < hi[lane]
        lane, at = lane[inside], at[inside]
        go = col.read_rows(at) < target[lane]
        lo[lane[go]] = at[go] + 1
        hi[lane[~go]] = at[~go]
        up = (lane[go], at[go])
        lane, at = down
        at = at - step
        inside = at >= lo[lane]
        lane, at = lane[inside], at[inside]
        go = col.read_rows(at) >= target[lane]
        hi[lane[go]] = at[go]
        lo[lane[~go]] = at[~go] + 1
        down = (lane[go], at[go])
        step *= 2
    return _first_at_least(col, lo, hi, target, lanes)


def _first_at_least(col, lo: np.ndarray, hi: np.ndarray, target: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    """For each lane of ``lanes``, the first row in ``[lo, hi)`` of the mapped column
    ``col`` (keys ascending) whose key is at least ``target``, ``hi`` if none: a bisection,
    one gather of every open lane's middle key a step (other lanes: ``lo``)."""
    lo = np.where(lanes, lo, 0).astype(np.int64)
    hi = np.where(lanes, hi, 0).astype(np.int64)
    open_ = np.flatnonzero(lo < hi)
    while open_.size:
        a, b = lo[open_], hi[open_]
        mid = (a + b) >> 1
        below = col.read_rows(mid) < target[open_]
        lo[open_] = np.where(below, mid + 1, a)
        hi[open_] = np.where(below, b, mid)
        open_ = open_[lo[open_] < hi[open_]]
    return lo
