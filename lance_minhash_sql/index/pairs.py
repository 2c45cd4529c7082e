"""The self-join: every pair of rows whose MinHash similarity reaches a threshold.

>>> from lance_minhash_sql.index.pairs import pairs, pair_shards, shard_pairs  # doctest: +SKIP
>>> for batch in pairs("corpus.lance", "text", 0.8):  # doctest: +SKIP
...     print(batch.num_rows)
>>> shards = pair_shards("corpus.lance", "text", 0.8)  # doctest: +SKIP
>>> sum(b.num_rows for s in shards for b in shard_pairs(s))  # doctest: +SKIP

What is reported, exactly:

* **Candidates** are the pairs of live rows that share at least one band key (Lance's own
  candidate rule, contract §3), across *all* of the column's segments and the rows of
  fragments no segment covers (signed on the fly, as a search does). So the answer does
  not depend on how the rows are split into segments.
* Each candidate is **verified** with the full signatures: ``similarity = float32(eq) /
  float32(k)`` (``eq`` equal positions; the same value as Lance's ``1 - _distance``), kept
  when ``similarity >= threshold``. ``similarity`` is returned as float64 of that float32.
* Each unordered pair once (from the first band it shares), as row ids with
  ``left_rowid < right_rowid``. Row ids are Lance's ``_rowid``: row addresses, or stable
  row ids when the dataset has them.
* Rows deleted after the build never appear (``OpenedIndex.liveness``).
* ``exact=True`` also computes the exact Jaccard of the two rows' shingle sets (same
  tokenizer and shingle size as the index; texts fetched by row id) in a ``jaccard``
  column and keeps the verified pairs whose ``jaccard >= threshold`` too: a subset of
  ``exact=False``'s pairs, each one a true near-duplicate at the threshold.

How: the band-key space ``[0, num_bands << 56)`` is cut into ``num_shards`` equal key
ranges (band keys are hashes, so each holds about the same number of band rows; a bucket
never spans two). A shard reads its key range from every *run* — each segment's
``bands.lance`` (page-table search, then one read of the pages) and the in-memory sorted
band rows of the unindexed fragments (signed once per index version, when the shards are
planned) — merges them by ``(key, global doc)``, keeps the buckets of two rows or more,
drops deleted rows, and takes the remaining docs' signatures from the segment's process
cache (:mod:`.opened`; a shard that needs many of a segment's docs loads its signatures
whole, in bounded reads). Buckets are then processed in windows of up to
:data:`WINDOW_ROWS` rows whose members' signatures are first gathered into one buffer in
row order (members are random docs: verifying straight from the pool costs a cache miss
per row, 300-600 ns), by :func:`kernels.pairs.pair_chunk`, in chunks of at most
``chunk_pairs`` pairs. Shards are independent: DuckDB can run one per call on its
threads; :func:`pairs` runs them on a thread pool (nogil kernels) and yields their
batches in shard order.
"""

from __future__ import annotations

import math
import numbers
import os
import queue
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..errors import DatasetError, InvalidParameterError, ResourceLimitError, UnsupportedIndexError
from ..kernels.lsh import sorted_unique
from ..kernels.pairs import (bucket_bounds, gather_rows, min_matches, multi_rows, new_cursor, pair_chunk,
                             padded_hashes, pair_jaccard, windows)
from ..kernels.sort import DIGIT_BITS, radix_sort_run
from ..params import MinHashParams, lsh_probability, recall_bands
from .opened import OpenedIndex, SegmentEntry, open_index
from .sign import signer_for

__all__ = [
    "PAIRS_SCHEMA",
    "PAIRS_EXACT_SCHEMA",
    "SHARD_BAND_ROWS",
    "MAX_SHARDS",
    "DEFAULT_CHUNK_PAIRS",
    "LowRecallWarning",
    "Shard",
    "pair_shards",
    "shard_pairs",
    "pairs",
    "check_threshold",
]

PAIRS_SCHEMA = pa.schema([
    pa.field("left_rowid", pa.uint64(), nullable=False),
    pa.field("right_rowid", pa.uint64(), nullable=False),
    pa.field("similarity", pa.float64(), nullable=False),
])
PAIRS_EXACT_SCHEMA = PAIRS_SCHEMA.append(pa.field("jaccard", pa.float64(), nullable=False))

SHARD_BAND_ROWS = 1 << 21  # band rows per shard by default (24 MiB of band data)
MAX_SHARDS = 1 << 16
DEFAULT_CHUNK_PAIRS = 1 << 20  # pairs per record batch
WINDOW_ROWS = 1 << 14  # bucket rows whose signatures are gathered together (4 MiB at k=128)
VISIT_BUDGET = 1 << 26  # pairs a kernel call visits before Python gets control back
EXACT_CHUNK = 1 << 16  # pairs whose texts are fetched and shingled at once
SIGNATURE_READ_ROWS = 1 << 16  # rows per read when loading a segment's signatures whole
WHOLE_SIGNATURES_FRACTION = 16  # a shard needing >= 1/16 of a segment's docs loads them all
LOW_RECALL_PROBABILITY = 0.5  # warn when a pair at the threshold is a candidate less often
MAX_WORKERS = 8  # shards in flight at once in pairs() / clusters() (each holds its rows and buffers)
_QUEUE_DEPTH = 2  # batches a worker may hold ahead of the consumer
_MAX_PLANS = 8  # opened index versions whose runs (and signed unindexed rows) are kept
_U64_END = 1 << 64


class LowRecallWarning(UserWarning):
    """The threshold lies far below the index's S-curve: most pairs at it are never candidates."""


# --------------------------------------------------------------------------- validation


def check_threshold(threshold: Any) -> float:
    """The threshold as a float in ``(0, 1]``, or :class:`InvalidParameterError`."""
    if threshold is None:
        raise InvalidParameterError(
            "threshold is NULL: pass the MinHash similarity a pair must reach, a number in (0, 1]; e.g. 0.8")
    if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, numbers.Real):
        raise InvalidParameterError(
            f"threshold={threshold!r} must be a number in (0, 1] (the similarity a pair must reach); e.g. 0.8")
    t = float(threshold)
    if not math.isfinite(t) or not 0.0 < t <= 1.0:
        raise InvalidParameterError(
            f"threshold={threshold!r} is out of range: requires 0 < threshold <= 1 (the similarity a pair "
            "must reach); e.g. 0.8")
    return t


def _check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name}={value!r} must be true or false")
    return bool(value)


def _check_count(name: str, value: Any, hi: int, example: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or not 1 <= value <= hi:
        raise InvalidParameterError(f"{name}={value!r} must be an integer in 1..{hi}; e.g. {example}")
    return int(value)


def warn_if_low_recall(params: MinHashParams, threshold: float, stacklevel: int = 2) -> None:
    """Warn (:class:`LowRecallWarning`) when a pair of similarity ``threshold`` shares a band
    with probability below :data:`LOW_RECALL_PROBABILITY` under the index's ``(b, r)``."""
    b, r = params.num_bands, params.rows_per_band
    p = lsh_probability(threshold, b, r)
    if p >= LOW_RECALL_PROBABILITY or threshold >= 1.0:
        return
    b2, r2 = recall_bands(threshold, params.num_hashes)
    warnings.warn(LowRecallWarning(
        f"threshold={threshold:g} lies far below the index's S-curve threshold {params.threshold:.3f} "
        f"(num_bands={b}, rows_per_band={r}): a pair of similarity {threshold:g} shares a band, and so "
        f"becomes a candidate, with probability {p:.3f} only, so most such pairs are missed. For this "
        f"threshold rebuild the index with num_bands={b2} (rows_per_band={r2}: probability "
        f"{lsh_probability(threshold, b2, r2):.3f}), e.g. "
        f"minhash_build(dataset, column, num_hashes := {params.num_hashes}, num_bands := {b2}) "
        f"or minhash_build(dataset, column, threshold := {threshold:g})"), stacklevel=stacklevel + 1)


# --------------------------------------------------------------------------- plan and shards


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    v = a.view()
    v.setflags(write=False)
    return v


class _Plan:
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


_plans: OrderedDict = OrderedDict()
_plans_lock = threading.Lock()


def _plan_for(opened: OpenedIndex) -> _Plan:
    """One plan per opened index version (signing the unindexed rows once)."""
    key = id(opened)
    with _plans_lock:
        hit = _plans.get(key)
        if hit is not None and hit.opened is opened:
            _plans.move_to_end(key)
            return hit
        plan = _Plan(opened)
        _plans[key] = plan
        while len(_plans) > _MAX_PLANS:
            _plans.popitem(last=False)
        return plan


@dataclass(frozen=True, eq=False)
class Shard:
    """Band keys ``[lo, hi)`` of one index, joined across all its runs: an independent unit."""

    index: int
    num_shards: int
    lo: int
    hi: int
    threshold: float
    plan: _Plan = field(repr=False)

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


def _shards(plan: _Plan, threshold: float, num_shards: int | None) -> list[Shard]:
    if num_shards is None:
        num_shards = min(MAX_SHARDS, max(1, -(-plan.total_band_rows // SHARD_BAND_ROWS)))
    else:
        num_shards = _check_count("num_shards", num_shards, MAX_SHARDS, "8")
    span = plan.params.num_bands << 56
    bounds = [span * s // num_shards for s in range(num_shards + 1)]
    return [Shard(s, num_shards, bounds[s], bounds[s + 1], threshold, plan) for s in range(num_shards)]


def plan_shards(dataset, column: str, threshold: float, num_shards: int | None, storage_options,
                stacklevel: int) -> list[Shard]:
    t = check_threshold(threshold)
    opened = open_index(dataset, column, storage_options)
    warn_if_low_recall(opened.params, t, stacklevel=stacklevel + 1)
    return _shards(_plan_for(opened), t, num_shards)


def pair_shards(dataset, column: str, threshold: float = 0.8, *, num_shards: int | None = None,
                storage_options: dict | None = None) -> list[Shard]:
    """Independent key-range shards of the self-join of ``column``'s index, across all its
    segments and the rows no segment covers; :func:`shard_pairs` runs one.

    ``num_shards`` defaults to one per :data:`SHARD_BAND_ROWS` band rows (at least 1).
    Planning reads no band data, and the opened index version and its signed unindexed
    rows are kept, so a table function can plan ``n = len(pair_shards(ds, col, t))`` once
    and then call ``shard_pairs(pair_shards(ds, col, t, num_shards=n)[i])`` per shard,
    each call independent (pass the same opened ``LanceDataset`` to pin one version).
    The union of all shards' pairs does not depend on ``num_shards``.

    Raises :class:`InvalidParameterError` for a threshold outside ``(0, 1]`` (or NULL)
    and :class:`IndexNotFoundError` without an index; warns :class:`LowRecallWarning`
    when the threshold is far below the index's S-curve.
    """
    return plan_shards(dataset, column, threshold, num_shards, storage_options, stacklevel=2)


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

    def local_rowids(self, local: np.ndarray) -> np.ndarray:
        return self.rowids[local] if self.slot.size == 0 else self.rowids[self.slot[local]]

    def global_ids(self, local: np.ndarray) -> np.ndarray:
        if self.gids is None:
            return local.astype(np.int64) + self.gid_offset
        return self.gids[local]


def _read_run(entry: SegmentEntry, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Band rows with keys in ``[lo, hi)`` of one run: page-table search, one read."""
    with entry.lock:
        store = entry.bands
        n = store.num_rows
        pt = store.page_table
        if n == 0 or pt.size == 0:
            return np.empty(0, np.uint64), np.empty(0, np.uint32)
        a = int(np.searchsorted(pt, np.uint64(lo), side="left"))
        if a >= pt.size:
            return np.empty(0, np.uint64), np.empty(0, np.uint32)
        b = pt.size - 1 if hi >= _U64_END else min(int(np.searchsorted(pt, np.uint64(hi), side="left")), pt.size - 1)
        pr = store.page_rows
        start, stop = a * pr, min((b + 1) * pr, n)
        if store.full:
            keys, docs = store.keys[start:stop], store.docs[start:stop]
        else:
            keys, docs = entry.files.read_bands(start, stop - start)
    i0 = int(np.searchsorted(keys, np.uint64(lo), side="left"))
    i1 = keys.size if hi >= _U64_END else int(np.searchsorted(keys, np.uint64(hi), side="left"))
    return keys[i0:i1], docs[i0:i1]


def _merge(parts: list[tuple[int, np.ndarray, np.ndarray]], offsets: np.ndarray):
    """Rows of several runs as one ``(key, global doc)``-sorted array (a stable radix sort on
    the key of the runs concatenated in run order)."""
    keys = np.concatenate([p[1] for p in parts]).astype(np.uint64, copy=False)
    gids = np.concatenate([p[2].astype(np.uint32) + np.uint32(offsets[p[0]]) for p in parts])
    radix_sort_run(keys, gids, np.empty_like(keys), np.empty_like(gids), DIGIT_BITS)
    return keys, gids


def _read_signatures_whole(entry: SegmentEntry) -> None:
    """Load a segment's row ids and signatures whole into the process cache, if they fit,
    reading ``SIGNATURE_READ_ROWS`` rows at a time.

    ``SegmentEntry.doc_arrays`` would load them whole too once a shard needs many docs,
    but through one ``read_all`` that Lance decodes ahead of the consumer: twice the
    file's size at the peak (1M rows: +530 MB against +265 MB here).
    TODO(lead): move this loop into ``opened.SegmentEntry._read_all_docs``.
    """
    with entry.lock:
        store = entry.docs
        if store.full or entry.files is None or not entry.cached:
            return
        if not entry._reserve(store.file_bytes() - store.nbytes):
            return  # does not fit: the shard reads what it needs
        n, k = store.num_docs, store.k
        rowids = np.empty(n, dtype=np.uint64)
        sigs = np.empty((n, k), dtype=np.uint16)
        reader = entry.files.signatures
        for s in range(0, n, SIGNATURE_READ_ROWS):
            c = min(SIGNATURE_READ_ROWS, n - s)
            t = reader.read_range(s, c, batch_size=c).to_table()
            rowids[s:s + c] = entry.map_rowids(t.column(0).to_numpy())
            sigs[s:s + c] = t.column(1).combine_chunks().values.to_numpy().reshape(-1, k)
            del t
        store.set_full(rowids, sigs)
        entry.stats["full_loads"] += 1
        entry._settle()


def _doc_arrays(entry: SegmentEntry, udocs: np.ndarray):
    """``(slot, rowids, sigs)`` of sorted unique docs of one run, from the process cache."""
    if udocs.size * WHOLE_SIGNATURES_FRACTION >= entry.docs.num_docs:
        _read_signatures_whole(entry)
    with entry.lock:
        return entry.doc_arrays(udocs)


def _pools_single(entry: SegmentEntry, docs: np.ndarray):
    udocs = sorted_unique(docs)
    slot, rowids, sigs = _doc_arrays(entry, udocs)
    return udocs, slot, rowids, sigs


def _pools_multi(plan: _Plan, gids: np.ndarray):
    """Signatures and row ids of the distinct ``gids``, gathered run by run into one pool."""
    ugids = sorted_unique(gids)
    k = plan.params.num_hashes
    sigs = np.empty((ugids.size, k), dtype=np.uint16)
    rowids = np.empty(ugids.size, dtype=np.uint64)
    bounds = np.searchsorted(ugids, plan.offsets)
    for r, entry in enumerate(plan.entries):
        a, b = int(bounds[r]), int(bounds[r + 1])
        if a == b:
            continue
        docs = (ugids[a:b] - np.uint32(plan.offsets[r])).astype(np.uint32)
        slot, rid, sig = _doc_arrays(entry, docs)
        rows = docs if slot.size == 0 else slot[docs]
        sigs[a:b] = sig[rows]
        rowids[a:b] = rid[rows]
    return ugids, sigs, rowids


def load_shard(shard: Shard) -> ShardData | None:
    """Read, merge and filter one shard; ``None`` if it has no bucket of two live docs."""
    plan = shard.plan
    parts = []
    for r, entry in enumerate(plan.entries):
        keys, docs = _read_run(entry, shard.lo, shard.hi)
        if keys.size:
            parts.append((r, keys, docs))
    if not parts:
        return None
    liveness = plan.opened.liveness
    empty_slot = _ro(np.empty(0, dtype=np.int32))
    if len(parts) == 1:
        r, keys, docs = parts[0]
        keys, docs = multi_rows(_ro(keys), _ro(docs))
        if keys.size == 0:
            return None
        udocs, slot, rowids, sigs = _pools_single(plan.entries[r], docs)
        gid_offset, gids = int(plan.offsets[r]), None
        if not liveness.trivial:
            urow = rowids[udocs] if slot.size == 0 else rowids[slot[udocs]]
            alive = liveness.alive(urow)
            if not alive.all():
                keep = np.isin(docs, udocs[~alive], invert=True)
                keys, docs = multi_rows(_ro(keys[keep]), _ro(docs[keep]))
    else:
        keys, gids_rows = _merge(parts, plan.offsets)
        keys, gids_rows = multi_rows(_ro(keys), _ro(gids_rows))
        if keys.size == 0:
            return None
        gids, sigs, rowids = _pools_multi(plan, gids_rows)
        docs = np.searchsorted(gids, gids_rows).astype(np.uint32)
        slot, gid_offset = empty_slot, 0
        gids = gids.astype(np.int64)
        if not liveness.trivial:
            alive = liveness.alive(rowids)
            if not alive.all():
                keep = alive[docs]
                keys, docs = multi_rows(_ro(keys[keep]), _ro(docs[keep]))
    if keys.size == 0:
        return None
    starts, ends = bucket_bounds(_ro(keys))
    return ShardData(_ro(keys), docs, _ro(starts), _ro(ends), _ro(sigs), _ro(slot), _ro(rowids), gid_offset, gids)


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


_EMPTY_SLOT = _ro(np.empty(0, dtype=np.int32))


def shard_windows(data: ShardData, max_rows: int | None = None) -> Iterator[Window]:
    """The shard's buckets in windows of at most ``max_rows`` (default
    :data:`WINDOW_ROWS`) rows, each window's signatures gathered in row order into a
    buffer reused from window to window. A bucket larger than ``max_rows`` is a window of
    its own, read from the pool directly (when ``k % 4 == 0``; else gathered whole)."""
    max_rows = WINDOW_ROWS if max_rows is None else max_rows
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
    ident = _ro(np.arange(rows_max, dtype=np.uint32))
    for b0, b1 in spans:
        r0, r1 = int(data.starts[b0]), int(data.ends[b1 - 1])
        rows = r1 - r0
        keys = data.keys[r0:r1]
        st = _ro(data.starts[b0:b1] - r0)
        en = _ro(data.ends[b0:b1] - r0)
        if rows <= max_rows or not direct:
            gather_rows(data.docs, r0, r1, data.sigs, data.slot, data.rowids, buf, buf_rowids)
            halves = _ro(buf[:rows])
            yield Window(keys, ident[:rows], st, en, _ro(buf[:rows].view(np.uint64)), halves, _EMPTY_SLOT,
                         _ro(buf_rowids[:rows]), r0, True)
        else:
            yield Window(keys, _ro(data.docs[r0:r1]), st, en, _ro(data.sigs.view(np.uint64)), data.sigs, data.slot,
                         data.rowids, r0, False)


# --------------------------------------------------------------------------- pairs of a shard


def _similarity(eq: np.ndarray, k: int) -> np.ndarray:
    return (eq.astype(np.float32) / np.float32(k)).astype(np.float64)


def _texts(opened: OpenedIndex, ids: np.ndarray) -> pa.Array:
    t = opened.ds._take_rows(pa.array(ids, type=pa.uint64()), [opened.column, "_rowid"])
    got = t.column("_rowid").to_numpy()
    if got.size != ids.size or not np.array_equal(got, ids):
        raise DatasetError(
            f"dataset {opened.uri!r} changed during the self-join ({ids.size} rows asked, {got.size} "
            "fetched); run it again")
    return t.column(opened.column).combine_chunks()


def _exact(plan: _Plan, threshold: float, left: np.ndarray, right: np.ndarray, sim: np.ndarray):
    """Exact shingle Jaccard of each pair (texts fetched by row id, :data:`EXACT_CHUNK`
    pairs at a time); the pairs with ``jaccard >= threshold``."""
    signer = signer_for(plan.params)
    parts = []
    for s in range(0, left.size, EXACT_CHUNK):
        lft, rgt = left[s:s + EXACT_CHUNK], right[s:s + EXACT_CHUNK]
        ids = sorted_unique(np.concatenate((lft, rgt)))
        offsets, hashes = signer.shingle_sets(_texts(plan.opened, ids))
        ia = np.searchsorted(ids, lft)
        ib = np.searchsorted(ids, rgt)
        jac = pair_jaccard(_ro(offsets), _ro(hashes), _ro(ia), _ro(ib))
        keep = np.flatnonzero(jac >= threshold)
        parts.append((keep + s, jac[keep]))
    keep = np.concatenate([p[0] for p in parts])
    jac = np.concatenate([p[1] for p in parts])
    return left[keep], right[keep], sim[keep], jac


def _pair_bound(data: ShardData) -> int:
    m = (data.ends - data.starts).astype(np.int64)
    return int((m * (m - 1) // 2).sum())


def shard_pairs(shard: Shard, *, exact: bool = False, chunk_pairs: int = DEFAULT_CHUNK_PAIRS
                ) -> Iterator[pa.RecordBatch]:
    """The verified pairs of one shard, in record batches of at most ``chunk_pairs`` rows:
    ``left_rowid`` < ``right_rowid`` (uint64), ``similarity`` (float64), and ``jaccard``
    (float64) when ``exact``. Memory stays at one chunk of pairs plus the signatures of
    one window of bucket rows, whatever the bucket sizes (a bucket of ``m`` rows yields
    its ``m (m - 1) / 2`` pairs chunk by chunk)."""
    if not isinstance(shard, Shard):
        raise InvalidParameterError(f"shard={shard!r} must be a Shard from pair_shards()")
    exact = _check_flag("exact", exact)
    chunk = _check_count("chunk_pairs", chunk_pairs, 1 << 30, "1048576")
    return _shard_pairs(shard, exact, chunk)


def _shard_pairs(shard: Shard, exact: bool, chunk: int, stop: threading.Event | None = None
                 ) -> Iterator[pa.RecordBatch]:
    """``stop``: checked after every kernel call (at most :data:`VISIT_BUDGET` pairs visited),
    so a consumer that stops early is not kept waiting for buckets whose pairs all come
    from earlier bands (visited, none written: the generator would not yield for hours in
    a cluster of 300k copies)."""
    data = load_shard(shard)
    if data is None:
        return
    plan = shard.plan
    k = plan.params.num_hashes
    cap = max(1, min(chunk, _pair_bound(data)))
    out_l = np.empty(cap, dtype=np.uint64)
    out_r = np.empty(cap, dtype=np.uint64)
    out_e = np.empty(cap, dtype=np.int32)
    min_eq = min_matches(shard.threshold, k)
    schema = PAIRS_EXACT_SCHEMA if exact else PAIRS_SCHEMA
    fill = 0
    for w in shard_windows(data):
        cursor = new_cursor()
        done = False
        while not done:
            n, done = pair_chunk(w.keys, w.docs, w.starts, w.ends, w.words, w.halves, w.slot, w.rowids, k,
                                 plan.params.num_bands, min_eq, cursor, out_l[fill:], out_r[fill:], out_e[fill:],
                                 VISIT_BUDGET)
            fill += n
            if stop is not None and stop.is_set():
                return
            if fill == cap:
                yield from _emit(plan, shard.threshold, exact, schema, out_l, out_r, out_e, fill, k)
                fill = 0
    if fill:
        yield from _emit(plan, shard.threshold, exact, schema, out_l, out_r, out_e, fill, k)


def _emit(plan: _Plan, threshold: float, exact: bool, schema: pa.Schema, out_l, out_r, out_e, n: int, k: int):
    left, right, sim = out_l[:n].copy(), out_r[:n].copy(), _similarity(out_e[:n], k)
    if exact:
        left, right, sim, jac = _exact(plan, threshold, left, right, sim)
        if left.size == 0:
            return
        cols = [left, right, sim, jac]
    else:
        cols = [left, right, sim]
    yield pa.record_batch([pa.array(c) for c in cols], schema=schema)


# --------------------------------------------------------------------------- all shards


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


_DONE = object()


def run_ordered(items: list, produce: Callable[[Any], Iterable], workers: int | None = None,
                stop: threading.Event | None = None) -> Iterator:
    """Yield everything ``produce(item)`` yields, item by item in order, with ``workers``
    items in flight on threads (each holding at most :data:`_QUEUE_DEPTH` results ahead).
    ``stop`` (else a new event) is set when the consumer stops; ``produce`` may watch it
    too, to return without yielding again."""
    workers = min(len(items), workers or min(os.cpu_count() or 1, MAX_WORKERS))
    if workers <= 1:
        for item in items:
            yield from produce(item)
        return
    stop = threading.Event() if stop is None else stop
    queues = [queue.Queue(maxsize=_QUEUE_DEPTH) for _ in items]

    def put(q: queue.Queue, value) -> bool:
        while not stop.is_set():
            try:
                q.put(value, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work(i: int) -> None:
        q = queues[i]
        try:
            for value in produce(items[i]):
                if not put(q, value):
                    return
            put(q, _DONE)
        except BaseException as exc:  # handed to the consumer
            put(q, _Failure(exc))

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="minhash-pairs")
    try:
        submitted = 0
        for i in range(len(items)):
            while submitted < min(len(items), i + workers):
                pool.submit(work, submitted)
                submitted += 1
            while True:
                value = queues[i].get()
                if value is _DONE:
                    break
                if isinstance(value, _Failure):
                    raise value.exc
                yield value
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


def pairs(dataset, column: str, threshold: float = 0.8, *, exact: bool = False,
          storage_options: dict | None = None) -> Iterator[pa.RecordBatch]:
    """Every verified pair of ``column``'s index (all shards), as record batches of
    :data:`PAIRS_SCHEMA` (:data:`PAIRS_EXACT_SCHEMA` when ``exact``); see the module doc.

    Arguments are checked (and the index opened) when called, before the first batch.
    """
    exact = _check_flag("exact", exact)
    shards = plan_shards(dataset, column, threshold, None, storage_options, stacklevel=2)
    stop = threading.Event()
    if not exact:
        return run_ordered(shards, lambda s: _shard_pairs(s, False, DEFAULT_CHUNK_PAIRS, stop), stop=stop)
    return run_ordered(shards, lambda s: _exact_shard(s, stop), stop=stop)


def _exact_shard(shard: Shard, stop: threading.Event) -> Iterator[pa.RecordBatch]:
    """One shard with ``exact``, then the heaps' free pages handed back: texts and shingle
    sets of many sizes on two threads fragment glibc's arenas (measured: +150 MB resident
    per repeated 1M-row run without it, 2-30 ms per trim)."""
    from .build import release_memory

    yield from _shard_pairs(shard, True, DEFAULT_CHUNK_PAIRS, stop)
    release_memory()


# Pieces of the self-join engine that the cross-dataset join (index/join.py) is built on.
plan_for = _plan_for
read_run = _read_run
merge_runs = _merge
pool_signatures = _pools_multi
check_flag = _check_flag
check_count = _check_count
similarity_of = _similarity
