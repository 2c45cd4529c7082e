"""The top-k of a few queries by numpy alone: buckets, candidates and scores without numba.

A single search touches a few dozen band rows and a few hundred signatures; what it
costs a new process is not that work but loading numba (its import and compiler set-up,
about half a second of CPU even when every kernel comes from the cache). So a few short
queries (``query/query_sign.py``) on segments whose rows can be read without a lock
(a local segment's memory maps, or a segment held whole in memory:
:meth:`..index.entries.SegmentEntry.band_chunks`) are answered here, with the same rules and
the same answer as the kernels of ``kernels/lsh.py`` (docs/search.md):

* a query's bucket in band ``j`` is the run of band rows whose key equals its key ``K``:
  it starts in the first page whose last key is at least ``K`` (the page table); inside
  that page a search that reads 64 evenly spread keys a step finds the start in two steps
  (a 4,096-row page); the few rows after the start (:data:`END_ROWS`) show where the run
  ends, and a longer run's end is searched for the same way in the first page whose last
  key is above ``K``;
* the candidates are the distinct docs of the query's buckets; their signatures and row
  ids are gathered from the map (or the memory), and rows that are deleted or fail the
  filter are dropped before the cut;
* the top ``limit`` by ``(mismatches, row id)`` over the candidates of every segment at
  once (``query/ranking.py``: the order both engines share), distances
  ``1 - float32(eq) / float32(k)``.

Anything else (an object store, a segment read through Lance's reader, more bucket rows
than :data:`MAX_CANDIDATES`) returns ``None`` and the caller runs the kernels.

A process that has loaded numba answers a few queries here too, the buckets then searched
by the kernel of ``kernels/probe.py`` (``compiled``): a single query then reads a dozen keys
a bucket end in place, where the batch kernels (``query/kernel_topk.py``) copy windows of
band rows and signatures into the segment's pools.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.core.tuning import END_ROWS, FANOUT, MAX_CANDIDATES
from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.io.mapped import values_at
from lance_minhash_sql.kernels.probe import mapped_bucket_bounds
from lance_minhash_sql.query.ranking import distances, first_of_each, rank_order

__all__ = ["MAX_CANDIDATES", "probe_topk", "reads_files"]


def _rows_at(chunks, rows: np.ndarray) -> np.ndarray:
    """Band keys of global ``rows`` from ``(values, first_row, value_index)`` chunks."""
    return values_at(*chunks, rows)


def _first_at_least(chunks, lo: np.ndarray, hi: np.ndarray, target: np.ndarray) -> np.ndarray:
    """For each lane, the first row in ``[lo, hi)`` whose key is at least ``target``, ``hi``
    if none (keys ascending).

    Each step reads :data:`FANOUT` keys spread evenly over the lane's range, at once for
    every lane; the count of them below the target narrows the range to the gap after the
    last of them that is below, and a range of at most :data:`FANOUT` rows is read whole.
    A position past the range reads the range's last key instead, which is below the target
    only when every key of the range is (so the count, capped at the positions inside,
    stays right)."""
    lo = lo.astype(np.int64, copy=True)
    span = hi - lo
    t = target[:, None]
    at = np.arange(FANOUT, dtype=np.int64)
    while span.any():
        step = (span + (FANOUT - 1)) // FANOUT
        np.maximum(step, 1, out=step)
        pos = step[:, None] * at
        pos += lo[:, None]
        np.minimum(pos, np.maximum(lo + span - 1, 0)[:, None], out=pos)
        below = np.count_nonzero(_rows_at(chunks, pos.ravel()).reshape(pos.shape) < t, axis=1)
        c = np.minimum(below, (span + step - 1) // step)  # keys below the target among the positions inside
        # the first row at least the target lies after position c - 1 and at or before position c
        gap = c > 0
        new_lo = np.where(gap, lo + step * (c - 1) + 1, lo)
        span = np.where(gap, np.minimum(step * c, span) - step * (c - 1) - 1, 0)
        lo = new_lo
    return lo


def bucket_bounds(chunks, page_table: np.ndarray, page_rows: int, num_rows: int, keys: np.ndarray):
    """``(start, end)`` rows of each key's bucket (``start == end``: no row has the key):
    the start is searched for in the one page that holds it (the module doc); the end is
    the first row after the start whose key is not ``K``, read from the :data:`END_ROWS`
    rows from the start (a bucket holds a row or two), and searched for like the start,
    in its own page, where the bucket runs past them."""
    first = np.searchsorted(page_table, keys, side="left")  # the page where the bucket starts
    a = np.minimum(first.astype(np.int64) * page_rows, num_rows)
    start = _first_at_least(chunks, a, np.minimum(a + page_rows, num_rows), keys)
    width = min(END_ROWS, num_rows)
    at = np.minimum(start, num_rows - width)  # the window, inside the file, holds the start
    pos = at[:, None] + np.arange(width, dtype=np.int64)
    equal = (_rows_at(chunks, pos.ravel()).reshape(pos.shape) == keys[:, None]) & (pos >= start[:, None])
    end = start + np.count_nonzero(equal, axis=1)  # keys from the start ascend: the equal ones come first
    left = np.flatnonzero((end >= at + width) & (at + width < num_rows))  # the bucket runs past the window
    if left.size:
        k = keys[left]
        after = np.searchsorted(page_table, k, side="right")  # the page where the bucket ends
        a = np.minimum(after.astype(np.int64) * page_rows, num_rows)
        b = np.minimum(a + page_rows, num_rows)
        top = k == np.iinfo(np.uint64).max  # no key is above it: the end is the page's end
        found = _first_at_least(chunks, a, b, np.where(top, k, k + np.uint64(1)))
        end[left] = np.maximum(np.where(top, b, found), start[left])
    return start, end


def _candidates(entry: SegmentEntry, qkeys: np.ndarray, compiled: bool):
    """``(query, doc)`` of every distinct candidate, sorted, or None if the entry cannot be
    read here or has too many; ``compiled``: the buckets searched by the kernel
    (``kernels/probe.py``), else by numpy."""
    chunks = entry.band_chunks()
    if chunks is None:
        return None
    values, first_row, value_index, docs_of = chunks
    store = entry.bands
    nq, nb = qkeys.shape
    if compiled:
        start, end = mapped_bucket_bounds(values, first_row, value_index, store.page_table, store.page_rows,
                                          store.num_rows, np.ascontiguousarray(qkeys.reshape(-1)))
    else:
        start, end = bucket_bounds((values, first_row, value_index), store.page_table, store.page_rows,
                                   store.num_rows, qkeys.reshape(-1))
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
    and pools, numba loaded (``query/engine.py``'s engine policy)."""
    return any(not (entry.bands.full and entry.docs.full) for entry in entries)


def probe_topk(entries: list[SegmentEntry], qsigs: np.ndarray, qkeys: np.ndarray, limit: int,
               ok_of: Callable[[np.ndarray], np.ndarray], compiled: bool = False):
    """``(query int64, row id uint64, distance float32, candidates per query int64)`` of
    each query's top ``limit``, ordered by query then ``(distance, row id)``; or None when
    an entry needs the kernels (see the module doc). ``compiled``: search the buckets with
    the kernel of ``kernels/probe.py`` (numba loaded), the rest as without it."""
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
