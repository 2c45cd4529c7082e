"""A group's candidates as the self-join under a memory budget holds them
(:mod:`.steps`, ``docs/scale.md``): a shard's band rows in buckets of two or more, the
candidates' signatures and row ids fetched once in doc order (sorted docs gathered from
the memory map of ``signatures.lance`` on a few threads, the pages handed back after each
copy, their row ids looked up in the segment's row id runs,
:mod:`lance_minhash_sql.index.rowid_runs`; never a take per row; segments on an object
store or read through Lance's reader use the ranged reads of
:meth:`lance_minhash_sql.index.entries.SegmentEntry.shard_docs`), and a shard's rows over
that pool as the kernels take them (:class:`.shards.ShardData`).

:data:`STATS` records the most signature rows any one read held (tests check that a
giant bucket is never held whole), what the groups did, and what the clusters' union-find
did in its file (:mod:`.parent`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.tuning import FETCH_ROWS
from lance_minhash_sql.index.rowid_runs import rowid_runs
from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.kernels.bucket_pairs import bucket_bounds, multi_rows
from lance_minhash_sql.kernels.components import marked_ids, ranks
from lance_minhash_sql.runtime.cache import Counters
from lance_minhash_sql.runtime.threads import run_chunks
from lance_minhash_sql.selfjoin.shards import EMPTY_SLOT, Plan, Shard, ShardData, doc_rows, merge_runs, shard_runs

__all__ = ["STATS", "count", "held", "candidate_rows", "read_multi", "fetch_signatures", "prepare_fetch", "row_ids", "shard_data",
           "pool", "span_data", "MarkedPool", "marked_pool", "CarriedPool"]

STATS = Counters("the bounded self-join's reads, groups and union-find", "max_pool_rows", "groups", "streamed_shards",
                 "pruned_rows", "fetched_rows", "carried_rows", "parent_in_file", "parent_handbacks",
                 "max_parent_blocks", "labels_in_file")


def held(rows: int) -> None:
    """Record that one read held ``rows`` signature rows."""
    STATS.high("max_pool_rows", rows)



def count(what: str, n: int = 1) -> None:
    """Add ``n`` to ``STATS[what]``."""
    STATS.add(what, n)


def candidate_rows(parts: list[tuple[int, np.ndarray, np.ndarray]], offsets: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """The band rows of one key range in buckets of two or more, ``(keys, global docs)``
    sorted by ``(key, doc)`` (deleted rows not yet dropped), from ``parts``: ``(run, keys,
    docs)`` of each run that has rows in the range (:func:`.shards.shard_runs`), the
    runs' first global docs ``offsets``. None when no bucket has two rows."""
    if not parts:
        return None
    if len(parts) == 1:
        r, keys, docs = parts[0]
        keys, docs = multi_rows(readonly(keys), readonly(docs))
        gids = docs.astype(np.uint32) + np.uint32(offsets[r])
    else:
        keys, gids = merge_runs(parts, offsets)
        keys, gids = multi_rows(readonly(keys), readonly(gids))
    if keys.size == 0:
        return None
    return keys, gids


def read_multi(shard: Shard) -> tuple[np.ndarray, np.ndarray] | None:
    """The shard's band rows in buckets of two or more (:func:`candidate_rows`)."""
    return candidate_rows(shard_runs(shard), shard.plan.offsets)


def _runs_of(plan: Plan, gids: np.ndarray):
    """``(entry, a, b, local docs)`` of sorted ``gids`` per run."""
    bounds = np.searchsorted(gids, plan.offsets)
    for r, entry in enumerate(plan.entries):
        a, b = int(bounds[r]), int(bounds[r + 1])
        if a < b:
            yield entry, a, b, (gids[a:b].astype(np.int64) - int(plan.offsets[r])).astype(np.uint32)


def _runs(entry):
    """The entry's row id runs when its signatures are read from a memory map, else None."""
    files = entry.files
    if files is None or files.signature_map is None or entry.docs.full:
        return None
    return rowid_runs(entry)


def prepare_fetch(plan: Plan) -> None:
    """Build the row id runs :func:`fetch_signatures` reads (once per segment entry) now,
    e.g. on a thread of its own while the caller lists what it will fetch."""
    for entry in plan.entries:
        _runs(entry)


def fetch_signatures(plan: Plan, gids: np.ndarray, out: np.ndarray, release: bool = True) -> np.ndarray:
    """Signatures of sorted unique ``gids`` into ``out`` (``[n, k]``), in doc order; returns
    their row ids (as the dataset version knows them). A mapped segment's rows are
    gathered on :func:`lance_minhash_sql.runtime.threads.num_threads` threads, each chunk's
    pages handed back when ``release`` (a caller that reads the same pages again soon, as
    the cross-dataset join's shards of other bands do, keeps them mapped)."""
    held(gids.size)
    rowids = np.empty(gids.size, dtype=np.uint64)
    for entry, a, b, docs in _runs_of(plan, gids):
        runs = _runs(entry)
        if runs is None:
            rowids[a:b] = doc_rows(entry, docs, out[a:b])
            continue
        mapped, dst = entry.files.signature_map, out[a:b]

        def gather(lo: int, hi: int) -> None:
            mapped.read_rows(docs[lo:hi], out=dst[lo:hi], release=release)

        run_chunks(gather, docs.size, FETCH_ROWS)
        rowids[a:b] = entry.map_rowids(runs.lookup(docs))
    return rowids


def row_ids(plan: Plan, gids: np.ndarray, max_rows: int) -> np.ndarray:
    """Row ids of sorted unique ``gids``, ``max_rows`` at a time (looked up in the row id
    runs, or with the signatures read where a segment has none): what is held beside the
    answer is a slice's, whatever the number of ``gids``."""
    out = np.empty(gids.size, dtype=np.uint64)
    k = plan.params.num_hashes
    for entry, a, b, docs in _runs_of(plan, gids):
        runs = _runs(entry)
        if runs is not None:
            for s in range(0, b - a, max_rows):
                part = docs[s:s + max_rows]
                out[a + s:a + s + part.size] = entry.map_rowids(runs.lookup(part))
            continue
        scratch = np.empty((min(max_rows, b - a), k), dtype=np.uint16)
        for s in range(0, b - a, max_rows):
            part = docs[s:s + max_rows]
            held(part.size)
            out[a + s:a + s + part.size] = doc_rows(entry, part, scratch[:part.size])
    return out


def shard_data(keys: np.ndarray, docs: np.ndarray, ugids: np.ndarray, sigs: np.ndarray,
          rowids: np.ndarray, alive: np.ndarray | None) -> ShardData | None:
    """A shard's (or a window's) rows as the kernels take them: ``docs`` index the pool's
    rows, whose global docs are ``ugids`` (ascending, or in the order of a
    :class:`CarriedPool`) with their signatures and row ids; deleted docs dropped."""
    if alive is not None:
        keep = alive[docs]
        if not keep.all():
            keys, docs = multi_rows(readonly(keys[keep]), readonly(docs[keep]))
    if keys.size == 0:
        return None
    starts, ends = bucket_bounds(readonly(keys))
    return ShardData(readonly(keys), docs, readonly(starts), readonly(ends), readonly(sigs), EMPTY_SLOT,
                     readonly(rowids), 0, ugids.astype(np.int64, copy=False))


def pool(plan: Plan, ugids: np.ndarray):
    """The signatures, row ids and liveness (None: all alive) of sorted unique ``ugids``."""
    sigs = np.empty((ugids.size, plan.params.num_hashes), dtype=np.uint16)
    rowids = fetch_signatures(plan, ugids, sigs)
    liveness = plan.opened.liveness
    alive = None if liveness.trivial else liveness.alive(rowids)
    return sigs, rowids, alive


def span_data(plan: Plan, keys: np.ndarray, gids: np.ndarray) -> ShardData | None:
    """Rows ``(keys, gids)`` over a pool of their own docs."""
    ugids = sorted_unique(gids)
    sigs, rowids, alive = pool(plan, ugids)
    return shard_data(keys, np.searchsorted(ugids, gids).astype(np.uint32), ugids, sigs, rowids, alive)


class MarkedPool(NamedTuple):
    """A group's pool in doc order: its candidates, the docs set in the bit set ``marks``
    (``prefix``: :func:`lance_minhash_sql.kernels.components.marked_ids`), ``ugids``
    ascending with their signatures, row ids and liveness (None: all alive)."""

    marks: np.ndarray
    prefix: np.ndarray
    ugids: np.ndarray
    sigs: np.ndarray
    rowids: np.ndarray
    alive: np.ndarray | None

    def data(self, keys: np.ndarray, gids: np.ndarray) -> ShardData | None:
        """A shard's rows ``(keys, gids)`` over the pool, each doc's pool row its rank among
        the marked docs (:func:`lance_minhash_sql.kernels.components.ranks`)."""
        return shard_data(keys, ranks(self.marks, self.prefix, gids), self.ugids, self.sigs, self.rowids, self.alive)


def marked_pool(plan: Plan, marks: np.ndarray) -> MarkedPool:
    """The pool of the docs set in ``marks``, fetched in doc order (:func:`pool`)."""
    ugids, prefix = marked_ids(marks)
    return MarkedPool(marks, prefix, ugids, *pool(plan, ugids))


class CarriedPool:
    """The pools of consecutive groups in one buffer of ``capacity`` rows, each group's
    taking over the rows of the one before whose docs it holds too: those rows are moved
    to the front in place (in slices of :data:`FETCH_ROWS`, so no second pool is held), and
    only the other docs are fetched, in doc order, behind them. A near-duplicate that is
    a candidate band after band is read once for a run of groups, not once per group. Pool
    rows are then in no doc order; :meth:`fill` gives the row of each doc."""

    def __init__(self, plan: Plan, capacity: int):
        self.plan = plan
        self.capacity = int(min(capacity, plan.total_docs))  # (untouched rows take no memory)
        self.sigs: np.ndarray | None = None  # u16[capacity, k], allocated at the first fill
        self.gids = np.empty(0, dtype=np.int64)  # the pool rows' global docs (as ShardData takes them)
        self.rowids = np.empty(0, dtype=np.uint64)
        self.alive: np.ndarray | None = None  # per pool row, None: all alive

    def fill(self, ugids: np.ndarray) -> np.ndarray:
        """Hold the sorted unique ``ugids`` (at most ``capacity``); returns each one's pool row."""
        n = ugids.size
        if self.sigs is None:
            self.sigs = np.empty((self.capacity, self.plan.params.num_hashes), dtype=np.uint16)
        old = self.gids
        at = np.searchsorted(ugids, old)
        stays = at < n
        stays[stays] = ugids[at[stays]] == old[stays]
        keep = np.flatnonzero(stays)
        for s in range(0, keep.size, FETCH_ROWS):  # sources lie at or after their slots: safe in place
            part = keep[s:s + FETCH_ROWS]
            self.sigs[s:s + part.size] = self.sigs[part]
        carried = np.zeros(n, dtype=bool)
        carried[at[keep]] = True
        new = ugids[~carried]
        m = keep.size
        rowids = np.empty(n, dtype=np.uint64)
        rowids[:m] = self.rowids[keep]
        rowids[m:] = fetch_signatures(self.plan, new, self.sigs[m:n])
        liveness = self.plan.opened.liveness
        if liveness.trivial:
            self.alive = None
        else:
            alive = np.empty(n, dtype=bool)
            if m:
                alive[:m] = self.alive[keep]
            alive[m:] = liveness.alive(rowids[m:])
            self.alive = alive
        self.gids = np.concatenate((old[keep], new.astype(np.int64)))
        self.rowids = rowids
        held(n)
        count("carried_rows", m)
        count("fetched_rows", new.size)
        rows = np.empty(n, dtype=np.uint32)
        rows[at[keep]] = np.arange(m, dtype=np.uint32)
        rows[~carried] = np.arange(m, n, dtype=np.uint32)
        return rows

    def data(self, keys: np.ndarray, rows: np.ndarray) -> ShardData | None:
        """Band rows ``keys`` whose docs are the pool ``rows``."""
        n = self.gids.size
        return shard_data(keys, rows, self.gids, self.sigs[:n], self.rowids, self.alive)

    def drop(self) -> None:
        """Let the buffer go (a group streamed window by window holds pools of its own)."""
        self.sigs = None
        self.gids = np.empty(0, dtype=np.int64)
        self.rowids = np.empty(0, dtype=np.uint64)
        self.alive = None
