"""How a cached segment reads its band rows: the buckets of query keys, from the pool of
pages, from windows around a bucket's predicted position, or from the whole file once the
partial reads have cost as much as one whole read (docs/search.md).

:class:`BandReads` is one part of :class:`~lance_minhash_sql.index.entries.SegmentEntry`;
its methods run under the entry's lock and use the entry's files, pools and rent.
"""

from __future__ import annotations

import time

import numpy as np

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.lance_format import BAND_ROW_BYTES
from lance_minhash_sql.core.tuning import PAGE_GAP, WINDOW_MAX_ROWS, WINDOW_ROWS, whole_read_pays
from lance_minhash_sql.index.pools import runs
from lance_minhash_sql.kernels.lsh import bucket_rows, pages_needed, window_indices, window_plan, window_rows

__all__ = ["BandReads"]


class BandReads:
    """Methods of a segment entry (see the module doc)."""

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
