"""How a segment reads its docs: row ids and signatures of candidates into the doc store,
a self-join's candidates of all its shards at once, or the whole file once the partial
reads have cost as much as one whole read; without the lock, docs gathered in place (a
local file's memory map, or the store held whole); stored row ids mapped to the dataset
version's.

:class:`DocReader` owns the segment's doc store (:class:`.stores.DocStore`); the segment
entry (``index/entries.py``) holds one.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from lance_minhash_sql.core.arrays import readonly, sorted_unique
from lance_minhash_sql.core.tuning import TAKE_ROW_SECONDS, whole_read_pays
from lance_minhash_sql.index.stores import DocStore
from lance_minhash_sql.io.takes import MAX_TAKE

__all__ = ["DocReader"]


class DocReader:
    """A segment's docs: its store (:attr:`store`) and how the files fill it.

    ``files``, ``cost``, ``account`` and ``stats`` as for
    :class:`~lance_minhash_sql.index.band_reads.BandReader`; ``lock`` is the entry's (the
    methods that may run without it take it where they touch the store); ``remap`` maps
    stored row ids to the dataset version's (a deferred compaction remap), or is None.
    """

    def __init__(self, files, store: DocStore, cost, account, stats: dict, lock: threading.RLock, remap=None):
        self.files = files
        self.store = store
        self.cost = cost
        self.account = account
        self.stats = stats
        self.lock = lock
        self.remap = remap
        self._rowid_hint = None  # (docs, stored row ids) of the last candidates' take

    def reset(self) -> None:
        """Drop the docs and row ids in the store."""
        self._rowid_hint = None
        self.store = DocStore(self.store.num_docs, self.store.k)

    def map_rowids(self, rowids: np.ndarray) -> np.ndarray:
        """Stored row ids as the dataset version knows them: through the fragment-reuse
        index of a deferred compaction remap (a dropped row gets ``entries.DROPPED_ROWID``)."""
        if self.remap is None or rowids.size == 0:
            return rowids
        return self.remap(rowids)

    def arrays(self, docs: np.ndarray):
        """``(doc_slot, rowids, signatures)`` with every doc of sorted unique ``docs`` loaded."""
        store, cost = self.store, self.cost
        if store.full:
            return store.arrays()
        missing = store.missing(docs)
        if missing.size == 0:
            return store.arrays()
        partial = cost.call_seconds + missing.size * (TAKE_ROW_SECONDS if not cost.remote
                                                      else store.row_bytes / cost.bytes_per_second)
        whole = store.file_bytes() / cost.bytes_per_second
        if self.files is not None and whole_read_pays(cost.rent["docs"], partial, whole):
            extra = store.file_bytes() - store.nbytes
            if self.account.reserve(extra):
                rowids, sigs = self.read_all()
                store.set_full(rowids, sigs)
                self.account.settle()
                return store.arrays()
        if self.account.reserve(store.grow_bytes(missing.size)):
            store.ensure_capacity(missing.size)  # grow once, by exactly what was reserved
        else:
            store = store.copy_docs(docs)  # transient: not cached
        t0 = time.perf_counter()
        for s in range(0, missing.size, MAX_TAKE):
            part = missing[s:s + MAX_TAKE]
            rowids, sig = self._read_docs(part)
            store.add_docs(part, self.map_rowids(rowids), sig)
        cost.charge("docs", t0, partial)
        self.stats["docs_read"] += int(missing.size)
        if store is self.store:
            self.account.settle()
        return store.arrays()

    def shard_docs(self, docs: np.ndarray):
        """``(slot, rowids, signatures, compact)`` of sorted unique ``docs`` for a self-join
        shard, which asks for a quarter of a million random docs at once.

        Docs already in the store are used from there; the missing ones of a mapped local
        segment are gathered from the memory map *outside* the lock (the file never
        changes), so the other shard's thread is not kept waiting, then added to the store
        while the cache has room. Past that they come back ``compact``: ``slot`` empty and
        row ``i`` holding ``docs[i]``, with no per-doc map of the whole segment (which
        would cost every shard O(segment rows)). Segments read through Lance's reader or an object store take
        :meth:`arrays` under the lock.
        """
        with self.lock:
            store = self.store
            if store.full:
                return (*store.arrays(), False)
            if self.files is None or self.files.signature_map is None or self.all_rowids() is None:
                return (*self.arrays(docs), False)
            raw = self.store.all_rowids
            missing = store.missing(docs)
            if missing.size == 0:  # all in the store
                return (*store.arrays(), False)
        sigs = self.files.read_signature_rows(missing)
        rowids = self.map_rowids(raw[missing])
        with self.lock:
            store = self.store
            if store.full:
                return (*store.arrays(), False)
            if missing.size:
                fresh = store.missing(missing)  # another shard may have added some meanwhile
                if fresh.size != missing.size:
                    at = np.searchsorted(missing, fresh)
                    missing, sigs, rowids = fresh, sigs[at], rowids[at]
                if self.account.reserve(store.grow_bytes(missing.size)):
                    store.add_docs(missing, rowids, sigs)
                    self.stats["docs_read"] += int(missing.size)
                    self.account.settle()
                    missing = missing[:0]
            if missing.size == 0 and store.missing(docs).size == 0:
                return (*store.arrays(), False)
            # compact: the rows in the store from there, the others from this read (or, for docs
            # evicted with the store meanwhile, read now)
            out_sigs = np.empty((docs.size, store.k), dtype=np.uint16)
            out_rowids = np.empty(docs.size, dtype=np.uint64)
            in_store = np.zeros(docs.size, dtype=np.bool_) if store.doc_slot.size == 0 else store.doc_slot[docs] >= 0
            slots = store.doc_slot[docs[in_store]]
            out_sigs[in_store] = store.sigs[slots]
            out_rowids[in_store] = store.rowids[slots]
            rest = np.flatnonzero(~in_store)
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

    def _read_docs(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stored ``(row ids, signatures)`` of sorted ``docs``: on an object store the
        signatures as byte ranges (one request per run of nearby docs, all concurrent) and
        the row ids from memory (see :meth:`stored_rowids`), else one Lance take."""
        files = self.files
        if files.direct_signatures:
            if not self.cost.remote:
                self.all_rowids()  # local: one read of the row id column, then none per query
            return self._raw_rowids(docs), files.read_signature_rows(docs, self.cost.gap_bytes)
        return files.take_docs(docs)

    def stored_rowids(self, docs: np.ndarray) -> np.ndarray | None:
        """Row ids (as the dataset version knows them) of candidate ``docs`` on an object
        store, None elsewhere: from the segment's row id column once it is resident (read
        whole when the ski rental says it pays: at once for a small segment), until then
        with one take of just these docs, kept for the signature reads that follow."""
        if self.store.full:
            return self.store.rowids[docs]
        if not self.cost.remote or self.files is None or not self.files.direct_signatures:
            return None
        store = self.store
        if store.all_rowids is None:
            whole = self.files.rowid_bytes / self.cost.bytes_per_second
            if whole_read_pays(self.cost.rent["rowids"], self.cost.call_seconds, whole):
                self.all_rowids()
        if store.all_rowids is None:
            wanted = sorted_unique(docs)
            self._rowid_hint = (wanted, self.files.take_rowids(wanted))
            self.cost.rent["rowids"] += self.cost.call_seconds
        return self.map_rowids(self._raw_rowids(docs))

    def _raw_rowids(self, docs: np.ndarray) -> np.ndarray:
        """Stored row ids of sorted ``docs``: resident, kept from the last take, or read now."""
        if self.store.all_rowids is not None:
            return self.store.all_rowids[docs]
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

    def all_rowids(self) -> np.ndarray | None:
        """Every doc's stored row id, read once into the store when the cache has room; None if not."""
        store = self.store
        if store.all_rowids is None and self.account.reserve(store.num_docs * 8):
            store.all_rowids = self.files.read_rowids()
            self.account.settle()
        return store.all_rowids

    def read_all(self):
        """Every doc of the file: ``(row ids as the dataset version knows them, signatures)``."""
        self.stats["full_loads"] += 1
        rowids, sigs = self.files.read_all_docs(self.store.all_rowids)
        return self.map_rowids(rowids), sigs

    def direct(self, docs: np.ndarray, out: np.ndarray, release: bool = False) -> np.ndarray | None:
        """Row ids of sorted unique ``docs``, their signatures written to ``out``
        (``[n, k]``), read without the lock: from the signatures in memory, or from a local
        segment's memory map once every row id is resident (read once, under the lock).
        The store is neither consulted nor grown (a gather from the map costs what one from
        a store does). ``release``: the mapped pages read are handed back as
        :meth:`io.mapped.MappedRows.read_rows` does. ``None`` elsewhere: use :meth:`arrays`."""
        store = self.store
        if store.full:
            out[...] = store.sigs[docs]
            return store.rowids[docs]
        if self.files is None or self.files.signature_map is None:
            return None
        stored = store.all_rowids
        if stored is None:
            with self.lock:
                stored = self.all_rowids()
            if stored is None:
                return None  # the cache has no room for them
        self.files.signature_map.read_rows(docs, out=out, release=release)
        if self.remap is None:
            return stored[docs]
        with self.lock:
            return self.map_rowids(stored[docs])
