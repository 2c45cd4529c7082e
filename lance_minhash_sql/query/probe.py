"""The top-k of a few queries by numpy alone: buckets, candidates and scores without numba.

A single search touches a few dozen band rows and a few hundred signatures; what it
costs a new process is not that work but loading numba (its import and the kernels' loads,
about a third of a second of CPU even when every kernel comes from the cache). So a few short
queries (``query/query_sign.py``) on segments whose rows can be read without a lock
(a local segment's memory maps, or a segment held whole in memory:
:meth:`..index.entries.SegmentEntry.band_chunks`) are answered here, with the same rules and
the same answer as the kernels of ``kernels/lsh.py`` (docs/search.md):

* a query's bucket in band ``j`` is the run of band rows whose key equals its key ``K``,
  found through the page table in the band keys' chunks (``kernels/gather.py:
  mapped_bucket_bounds_numpy``: a search that reads 64 evenly spread keys a step finds
  its start in two steps of a 4,096-row page);
* the candidates are the distinct docs of the query's buckets; their signatures and row
  ids are gathered from the map (or the memory), and rows that are deleted or fail the
  filter are dropped before the cut;
* the top ``limit`` by ``(mismatches, row id)`` over the candidates of every segment at
  once (``query/ranking.py``: the order both engines share), distances
  ``1 - float32(eq) / float32(k)``.

Anything else (an object store, a segment read through Lance's reader, more bucket rows
than :data:`MAX_CANDIDATES`) returns ``None`` and the caller runs the kernels.

A process that has loaded numba answers a few queries here too, the buckets then searched
by the kernel beside it (``kernels/gather.py: mapped_bucket_bounds``, ``compiled``): a
single query then reads a dozen keys a bucket end in place, where the batch kernels (``query/kernel_topk.py``) copy windows of
band rows and signatures into the segment's stores.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.core.tuning import MAX_CANDIDATES
from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.kernels.gather import mapped_bucket_bounds, mapped_bucket_bounds_numpy
from lance_minhash_sql.query.ranking import distances, first_of_each, rank_order

__all__ = ["MAX_CANDIDATES", "probe_topk", "reads_files"]


def _candidates(entry: SegmentEntry, qkeys: np.ndarray, compiled: bool):
    """``(query, doc)`` of every distinct candidate, sorted, or None if the entry cannot be
    read here or has too many; ``compiled``: the buckets searched by the kernel, else by
    numpy (``kernels/gather.py``)."""
    chunks = entry.band_chunks()
    if chunks is None:
        return None
    values, first_row, value_index, docs_of = chunks
    store = entry.bands
    nq, nb = qkeys.shape
    keys = np.ascontiguousarray(qkeys.reshape(-1))
    if compiled:
        start, end = mapped_bucket_bounds(values, first_row, value_index, store.page_table, store.page_rows,
                                          store.num_rows, keys)
    else:
        start, end = mapped_bucket_bounds_numpy(values, first_row, value_index, store.page_table, store.page_rows,
                                                store.num_rows, keys)
    sizes = end - start
    total = int(sizes.sum())
    if total > MAX_CANDIDATES:
        return None
    at = np.cumsum(sizes) - sizes
    rows = np.arange(total, dtype=np.int64) + np.repeat(start - at, sizes)
    docs = np.asarray(docs_of(rows), dtype=np.int64)
    query = np.repeat(np.arange(nq * nb, dtype=np.int64) // nb, sizes)
    pair = sorted_unique((query << 32) | docs)
    return pair >> 32, pair & 0xFFFFFFFF, total


def reads_files(entries: list[SegmentEntry]) -> bool:
    """True when a search would read some segment from its files (not held whole in
    memory): where the probe's reads in place cost less than the batch kernels' windows
    and stores, numba loaded (``query/engine.py``'s engine policy)."""
    return any(not (entry.bands.full and entry.docs.full) for entry in entries)


def probe_topk(entries: list[SegmentEntry], qsigs: np.ndarray, qkeys: np.ndarray, limit: int,
               ok_of: Callable[[np.ndarray], np.ndarray], compiled: bool = False):
    """``(query int64, row id uint64, distance float32, candidates per query int64)`` of
    each query's top ``limit``, ordered by query then ``(distance, row id)``; or None when
    an entry needs the kernels (see the module doc). ``compiled``: search the buckets with
    the kernel of ``kernels/gather.py`` (numba loaded), the rest as without it."""
    nq, k = qsigs.shape
    found = []
    for entry in entries:
        got = _candidates(entry, qkeys, compiled)
        if got is None:
            return None
        found.append(got)
    parts = []
    for entry, (query, docs, rows) in zip(entries, found):
        udocs = sorted_unique(docs)
        slot = np.searchsorted(udocs, docs)
        sigs = np.empty((udocs.size, k), dtype=np.uint16)
        rowids = entry.direct_docs(udocs, sigs, release=True)
        if rowids is None:
            return None
        entry.count_direct_reads(rows, udocs.size)
        parts.append((query, rowids[slot], sigs, slot))
    query = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    counts = np.bincount(query, minlength=nq).astype(np.int64)
    rid = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.uint64)
    eq = np.concatenate([(p[2][p[3]] == qsigs[p[0]]).sum(axis=1) for p in parts]) if parts else np.empty(0, np.int64)
    ok = ok_of(rid)
    query, rid, mism = query[ok], rid[ok], k - eq[ok]
    order = rank_order(query, mism, rid)
    query, rid, mism = query[order], rid[order], mism[order]
    keep = first_of_each(query, limit)
    query, rid, mism = query[keep], rid[keep], mism[keep]
    return query, rid.astype(np.uint64, copy=False), distances(mism, k), counts
