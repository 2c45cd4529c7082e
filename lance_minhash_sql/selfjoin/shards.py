"""The self-join's plan: key-range shards of an index and one shard's data.

:func:`pair_shards` cuts the band-key space ``[0, num_bands << 56)`` into equal key
ranges (band keys are hashes, so each holds about the same number of band rows; a bucket
never spans two). A shard's key range is read from every *run* (:func:`read_run`) — each
segment's ``bands.lance`` (page-table search, then one read of the pages) and the
in-memory sorted band rows of the unindexed fragments (signed once per index version,
when the shards are planned) — and merged by ``(key, global doc)`` (:func:`merge_runs`);
:mod:`.pool` keeps the buckets of two live rows or more and gathers their docs'
signatures (:func:`doc_rows`) into a :class:`ShardData`. :func:`shard_windows` hands the
buckets to the kernels in windows of gathered signatures; :mod:`.verify` and
:mod:`.links` verify the candidates.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.checks import check_int, check_threshold
from lance_minhash_sql.core.errors import ResourceLimitError, UnsupportedIndexError
from lance_minhash_sql.core.lance_format import BAND_SHIFT
from lance_minhash_sql.core.params import MinHashParams, warn_if_low_recall
from lance_minhash_sql.core.tuning import (BUCKET_WINDOW_ROWS, MAX_SHARDS, SELF_JOIN_PLANS, SHARD_BAND_ROWS,
                                           SIGNATURE_READ_ROWS, WHOLE_SIGNATURES_SHARE)
from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.index.opened import OpenedIndex, open_index
from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.kernels.bucket_pairs import gather_rows, padded_hashes, windows
from lance_minhash_sql.kernels.sort import DIGIT_BITS, radix_sort_run
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = ["EMPTY_SLOT", 
    "shard_runs",
    "Plan",
    "plan_for",
    "Shard",
    "plan_shards",
    "pair_shards",
    "ShardData",
    "read_run",
    "merge_runs",
    "doc_rows",
    "Window",
    "shard_windows",
]

_U64_END = 1 << 64


# --------------------------------------------------------------------------- validation


# --------------------------------------------------------------------------- plan and shards


class Plan:
    """The runs of one opened index: each segment, then the unindexed fragments' rows."""

    def __init__(self, opened: OpenedIndex):
        self.opened = opened
        self.params = opened.params
        seen: dict[int, str] = {}
        for info in opened.segments:
            for f in info.fragment_ids:
                if f in seen:
                    raise UnsupportedIndexError(
                        f"fragment {f} of {opened.uri!r} is covered by two MinHash segments ({seen[f]} and "
                        f"{info.uuid}) of the index on {opened.column!r}; rebuild it with "
                        f"minhash_build('{opened.uri}', '{opened.column}', replace := true)")
                seen[f] = info.uuid
        self.entries: list[SegmentEntry] = opened.segment_entries()
        flat = opened.unindexed_entry()
        if flat is not None:
            self.entries.append(flat)
        sizes = [e.docs.num_docs for e in self.entries]
        self.offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.total_docs = int(self.offsets[-1])
        if self.total_docs >= 2**32:
            raise ResourceLimitError(
                f"the index on {opened.column!r} of {opened.uri!r} and its unindexed rows hold "
                f"{self.total_docs:,} rows; the self-join handles fewer than 2**32")
        self.total_band_rows = sum(e.bands.num_rows for e in self.entries)


_plans = ByteCache.for_objects("self-join plans", SELF_JOIN_PLANS)  # id(opened index) -> its Plan
_plans_lock = threading.Lock()


def plan_for(opened: OpenedIndex) -> Plan:
    """One plan per opened index version (signing the unindexed rows once)."""
    key = id(opened)
    with _plans_lock:
        hit = _plans.get(key)
        if hit is not None and hit.opened is opened:
            return hit
        plan = Plan(opened)
        _plans.put(key, plan)
        return plan


@dataclass(frozen=True, eq=False)
class Shard:
    """Band keys ``[lo, hi)`` of one index, joined across all its runs: an independent unit."""

    index: int
    num_shards: int
    lo: int
    hi: int
    threshold: float
    plan: Plan = field(repr=False)

    @property
    def uri(self) -> str:
        return self.plan.opened.uri

    @property
    def version(self) -> int:
        return self.plan.opened.version

    @property
    def column(self) -> str:
        return self.plan.opened.column

    @property
    def params(self) -> MinHashParams:
        return self.plan.params


def _shards(plan: Plan, threshold: float, num_shards: int | None, shard_rows: int | None = None) -> list[Shard]:
    if num_shards is None:
        num_shards = min(MAX_SHARDS, max(1, -(-plan.total_band_rows // (shard_rows or SHARD_BAND_ROWS))))
    else:
        num_shards = check_int("num_shards", num_shards, "e.g. 8", 1, MAX_SHARDS)
    span = plan.params.num_bands << BAND_SHIFT
    bounds = [span * s // num_shards for s in range(num_shards + 1)]
    return [Shard(s, num_shards, bounds[s], bounds[s + 1], threshold, plan) for s in range(num_shards)]


def plan_shards(dataset, column: str, threshold: float, num_shards: int | None, storage_options,
                shard_rows: int | None = None) -> list[Shard]:
    """``shard_rows``: band rows per shard when ``num_shards`` is None (default
    :data:`SHARD_BAND_ROWS`)."""
    t = check_threshold(threshold)
    opened = open_index(dataset, column, storage_options)
    warn_if_low_recall(opened.params, t)
    return _shards(plan_for(opened), t, num_shards, shard_rows)


def pair_shards(dataset, column: str, threshold: float = 0.8, *, num_shards: int | None = None,
                storage_options: dict | None = None, shard_rows: int | None = None) -> list[Shard]:
    """Independent key-range shards of the self-join of ``column``'s index, across all its
    segments and the rows no segment covers; an executor's ``shard_pairs`` runs one
    (``selfjoin/executor.py``).

    ``num_shards`` defaults to one per ``shard_rows`` (default :data:`SHARD_BAND_ROWS`)
    band rows (at least 1).
    Planning reads no band data, and the opened index version and its signed unindexed
    rows are kept, so a table function can plan ``n = len(pair_shards(ds, col, t))`` once
    and then run ``pair_shards(ds, col, t, num_shards=n)[i]`` per shard,
    each call independent (pass the same opened ``LanceDataset`` to pin one version).
    The union of all shards' pairs does not depend on ``num_shards``.

    Raises :class:`InvalidParameterError` for a threshold outside ``(0, 1]`` (or NULL)
    and :class:`IndexNotFoundError` without an index; warns :class:`LowRecallWarning`
    when the threshold is far below the index's S-curve.
    """
    return plan_shards(dataset, column, threshold, num_shards, storage_options, shard_rows=shard_rows)


# --------------------------------------------------------------------------- one shard's data


@dataclass
class ShardData:
    """A shard's candidate band rows and signature pool, as the kernels take them."""

    keys: np.ndarray  # u64[n], rows of buckets of >= 2 live docs, sorted by (key, doc)
    docs: np.ndarray  # u32[n] local doc ids
    starts: np.ndarray  # int64 bucket bounds
    ends: np.ndarray
    sigs: np.ndarray  # u16[P, k] pool
    slot: np.ndarray  # int32: local id -> pool row (empty: identity)
    rowids: np.ndarray  # u64[P]
    gid_offset: int  # single run: global doc = local + gid_offset
    gids: np.ndarray | None  # several runs: global doc of each local id
    local: np.ndarray | None = None  # sorted unique local ids in ``docs``, when known

    def local_ids(self) -> np.ndarray:
        """The sorted unique local ids of the shard's docs."""
        if self.local is not None:
            return self.local
        return sorted_unique(self.docs) if self.gids is None else np.arange(self.gids.size)

    def local_rowids(self, local: np.ndarray) -> np.ndarray:
        return self.rowids[local] if self.slot.size == 0 else self.rowids[self.slot[local]]

    def rowids_ascend(self) -> bool:
        """True if the row ids never decrease along the local ids: each bucket's docs
        (ascending, as the band rows are sorted by ``(key, doc)``) are then in row id order
        already (a segment's docs are numbered in scan order), and the clusters' sort of
        each bucket by row id (``kernels/bucket_pairs.py:order_buckets``) would move none. One
        gather of the shard's row ids, against the sort's check of every bucket row
        through the pool's doc map (two cache misses a row once the pool outgrows the
        CPU's cache)."""
        r = self.local_rowids(self.local_ids())
        return bool((r[1:] >= r[:-1]).all())

    def global_ids(self, local: np.ndarray) -> np.ndarray:
        if self.gids is None:
            return local.astype(np.int64) + self.gid_offset
        return self.gids[local]


def run_span(store, lo: int, hi: int) -> tuple[int, int]:
    """``[start, stop)``: the rows of the pages of a run's band store (``BandStore``) that
    may hold keys in ``[lo, hi)`` (its page table holds each page's last key)."""
    n = store.num_rows
    pt = store.page_table
    if n == 0 or pt.size == 0:
        return 0, 0
    a = int(np.searchsorted(pt, np.uint64(lo), side="left"))
    if a >= pt.size:
        return 0, 0
    b = pt.size - 1 if hi >= _U64_END else min(int(np.searchsorted(pt, np.uint64(hi), side="left")), pt.size - 1)
    pr = store.page_rows
    return a * pr, min((b + 1) * pr, n)


def read_run(entry: SegmentEntry, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Band rows with keys in ``[lo, hi)`` of one run: page-table search, one read (of a
    mapped file without the segment's lock: shards read their ranges side by side)."""
    start, stop = run_span(entry.bands, lo, hi)  # page table and row counts never change
    if start == stop:
        return np.empty(0, np.uint64), np.empty(0, np.uint32)
    with entry.lock:
        store = entry.bands
        if store.full:
            keys, docs = store.keys[start:stop], store.docs[start:stop]
            mapped = False
        else:
            mapped = entry.files.band_map is not None
            if not mapped:
                keys, docs = entry.files.read_bands(start, stop - start)  # a Lance reader: one caller at a time
    if mapped:
        keys, docs = entry.files.map_bands(start, stop - start)
    i0 = int(np.searchsorted(keys, np.uint64(lo), side="left"))
    i1 = keys.size if hi >= _U64_END else int(np.searchsorted(keys, np.uint64(hi), side="left"))
    return keys[i0:i1], docs[i0:i1]


def merge_runs(parts: list[tuple[int, np.ndarray, np.ndarray]], offsets: np.ndarray):
    """Rows of several runs as one ``(key, global doc)``-sorted array (a stable radix sort on
    the key of the runs concatenated in run order)."""
    keys = np.concatenate([p[1] for p in parts]).astype(np.uint64, copy=False)
    gids = np.concatenate([p[2].astype(np.uint32) + np.uint32(offsets[p[0]]) for p in parts])
    radix_sort_run(keys, gids, np.empty_like(keys), np.empty_like(gids), DIGIT_BITS)
    return keys, gids


def _read_signatures_whole(entry: SegmentEntry) -> None:
    """Load a segment's row ids and signatures whole into the process cache, if they fit,
    reading ``SIGNATURE_READ_ROWS`` rows at a time (out of the memory map of a local
    file, else through Lance's reader).

    ``SegmentEntry.doc_arrays`` would load them whole too once a shard needs many docs,
    but through one ``read_all`` that Lance decodes ahead of the consumer: twice the
    file's size at the peak.
    """
    with entry.lock:
        store = entry.docs
        if store.full or entry.files is None or not entry.cached:
            return
        if not entry.reserve(store.file_bytes() - store.nbytes):
            return  # does not fit: the shard reads what it needs
        files = entry.files
        n, k = store.num_docs, store.k
        mapped = files.signature_map
        rowids = files.read_rowids() if mapped is not None else np.empty(n, dtype=np.uint64)
        sigs = np.empty((n, k), dtype=np.uint16)
        for s in range(0, n, SIGNATURE_READ_ROWS):
            c = min(SIGNATURE_READ_ROWS, n - s)
            if mapped is not None:
                mapped.read_range(s, c, release=True, out=sigs[s:s + c])
            else:
                rowids[s:s + c], sigs[s:s + c] = files.read_doc_range(s, c)
        store.set_full(entry.map_rowids(rowids), sigs)
        entry.stats["full_loads"] += 1
        entry.settle()


def _doc_arrays(entry: SegmentEntry, udocs: np.ndarray):
    """``(slot, rowids, sigs, compact)`` of sorted unique docs of one run
    (:meth:`SegmentEntry.shard_docs`): from the process cache, loaded whole first when
    the shard needs at least :data:`WHOLE_SIGNATURES_SHARE` of the segment's docs."""
    if udocs.size >= entry.docs.num_docs * WHOLE_SIGNATURES_SHARE:
        _read_signatures_whole(entry)
    return entry.shard_docs(udocs)


def doc_rows(entry: SegmentEntry, docs: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Row ids of sorted unique ``docs`` of one run, their signatures written to ``out``:
    read without the run's lock where its data cannot change under the reader
    (:meth:`SegmentEntry.direct_docs`), else through :meth:`SegmentEntry.shard_docs`."""
    rowids = entry.direct_docs(docs, out)
    if rowids is None:
        slot, rid, sig, compact = _doc_arrays(entry, docs)
        if compact:
            out[...] = sig
            return rid
        rows = docs if slot.size == 0 else slot[docs]
        out[...] = sig[rows]
        rowids = rid[rows]
    return rowids


def shard_runs(shard: Shard) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(run, keys, docs)`` of every run that has band rows in the shard's key range."""
    parts = []
    for r, entry in enumerate(shard.plan.entries):
        keys, docs = read_run(entry, shard.lo, shard.hi)
        if keys.size:
            parts.append((r, keys, docs))
    return parts


@dataclass
class Window:
    """Consecutive buckets of a shard as one kernel input: ``docs`` index the pool (``words``
    / ``halves``, two views of the same rows) and ``rowids`` through ``slot`` (empty:
    directly); bucket bounds are relative to ``keys``."""

    keys: np.ndarray
    docs: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    words: np.ndarray  # u64[P, w]
    halves: np.ndarray  # u16[P, 4w]
    slot: np.ndarray
    rowids: np.ndarray
    row0: int  # shard row of the window's first row
    gathered: bool

    def global_ids(self, data: ShardData, local: np.ndarray) -> np.ndarray:
        """Global doc ids of the kernel's local ids."""
        return data.global_ids(data.docs[self.row0 + local.astype(np.int64)] if self.gathered else local)


EMPTY_SLOT = readonly(np.empty(0, dtype=np.int32))  # ShardData's slot column where no slot is kept


def shard_windows(data: ShardData, max_rows: int | None = None) -> Iterator[Window]:
    """The shard's buckets in windows of at most ``max_rows`` (default
    :data:`BUCKET_WINDOW_ROWS`) rows, each window's signatures gathered in row order into a
    buffer reused from window to window. A bucket larger than ``max_rows`` is a window of
    its own, read from the pool directly (when ``k % 4 == 0``; else gathered whole)."""
    max_rows = BUCKET_WINDOW_ROWS if max_rows is None else max_rows
    k = data.sigs.shape[1]
    kp = padded_hashes(k)
    direct = kp == k
    spans = windows(data.starts, data.ends, max_rows)
    if spans.shape[0] == 0:
        return
    sizes = data.ends[spans[:, 1] - 1] - data.starts[spans[:, 0]]
    rows_max = int(sizes.clip(max=max_rows).max() if direct else sizes.max())
    buf = np.zeros((rows_max, kp), dtype=np.uint16)  # padding lanes stay 0: equal in every row
    buf_rowids = np.empty(rows_max, dtype=np.uint64)
    ident = readonly(np.arange(rows_max, dtype=np.uint32))
    for b0, b1 in spans:
        r0, r1 = int(data.starts[b0]), int(data.ends[b1 - 1])
        rows = r1 - r0
        keys = data.keys[r0:r1]
        st = readonly(data.starts[b0:b1] - r0)
        en = readonly(data.ends[b0:b1] - r0)
        if rows <= max_rows or not direct:
            gather_rows(data.docs, r0, r1, data.sigs, data.slot, data.rowids, buf, buf_rowids)
            halves = readonly(buf[:rows])
            yield Window(keys, ident[:rows], st, en, readonly(buf[:rows].view(np.uint64)), halves, EMPTY_SLOT,
                         readonly(buf_rowids[:rows]), r0, True)
        else:
            yield Window(keys, readonly(data.docs[r0:r1]), st, en, readonly(data.sigs.view(np.uint64)), data.sigs, data.slot,
                         data.rowids, r0, False)
