"""Lock-free reads of a segment's data that never changes: band keys and docs gathered
straight from a local file's memory maps (or from a segment held whole), for the numpy
engine of a few queries (``query/probe.py``).

:class:`DirectReads` is one part of :class:`~lance_minhash_sql.index.entries.SegmentEntry`.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core.arrays import ONE_CHUNK, readonly

__all__ = ["DirectReads"]


class DirectReads:
    """Methods of a segment entry (see the module doc)."""

    def band_chunks(self):
        """``(values, first_row, value_index, docs_of)``: the band keys as chunks (row ``r``
        of chunk ``c`` at ``values[value_index[c] + r - first_row[c]]``) and a function
        giving the doc ids of rows, read without :attr:`lock`: the keys in memory (one
        chunk), or a local segment's memory map (nothing copied). ``None`` elsewhere (an
        object store, a file Lance must decode): read pages under the lock instead."""
        store = self.bands
        if store.full:
            keys, docs = readonly(store.keys), store.docs
            return keys, ONE_CHUNK, ONE_CHUNK, docs.__getitem__
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
        as :meth:`io.mapped.MappedRows.read_rows` does. ``None`` elsewhere: use
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
