"""A shard alone over the pool: one whose candidates exceed a group's pool (a giant
bucket: one text repeated millions of times) is taken in windows of consecutive buckets,
each fetching only its own docs (:func:`spans`, :func:`alone_pairs`, :func:`alone_links`).

A single bucket larger than a window is linked in chunks of rows in row-id order, the
bucket's representatives (at most :data:`.links.MAX_REPS` signatures) carried from chunk
to chunk in front of the next chunk's rows (:func:`giant_links`). Re-verifying the
carried representatives against each other reproduces them exactly (each became one by
failing the representatives before it), so the links are those of the whole bucket.
Pairs of such a bucket are ``m (m - 1) / 2`` and need every row at once: a pairs bucket
larger than a window is read whole.

:data:`.pool.STATS` records the most signature rows any one read held (tests check that a
giant bucket is never held whole).
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly, sorted_unique
from lance_minhash_sql.core.tuning import GIANT_LINKS
from lance_minhash_sql.kernels.bucket_pairs import (bucket_bounds, link_chunk, min_matches, new_bucket_cursor,
                                                    padded_hashes, windows)
from lance_minhash_sql.selfjoin.links import Links
from lance_minhash_sql.selfjoin.pool import count, fetch_signatures, held, row_ids, span_data
from lance_minhash_sql.selfjoin.shards import EMPTY_SLOT, Plan, Shard, ShardData
from lance_minhash_sql.selfjoin.sizing import window_rows

__all__ = ["spans", "giant_links", "alone_links", "alone_pairs"]


def spans(keys: np.ndarray, max_rows: int) -> Iterator[tuple[int, int]]:
    """``(r0, r1)`` row spans of consecutive buckets of at most ``max_rows`` rows (a larger
    bucket alone)."""
    starts, ends = bucket_bounds(readonly(keys))
    for b0, b1 in windows(starts, ends, max_rows):
        yield int(starts[b0]), int(ends[b1 - 1])


def giant_links(plan: Plan, shard: Shard, gids: np.ndarray, max_rows: int, max_reps: int) -> Iterator[Links]:
    """Links of one bucket of sorted ``gids`` larger than ``max_rows``, in chunks of rows
    in row-id order with the representatives carried (module doc)."""
    k = plan.params.num_hashes
    kp = padded_hashes(k)
    rowids = row_ids(plan, gids, max_rows)
    liveness = plan.opened.liveness
    if not liveness.trivial:
        alive = liveness.alive(rowids)
        gids, rowids = gids[alive], rowids[alive]
    if gids.size < 2:
        return
    if not (rowids[1:] >= rowids[:-1]).all():
        gids = gids[np.argsort(rowids, kind="stable")]
    del rowids
    min_eq = min_matches(shard.threshold, k)
    out_a = np.empty(GIANT_LINKS, dtype=np.uint32)
    out_b = np.empty(GIANT_LINKS, dtype=np.uint32)
    rep_sigs = np.empty((0, kp), dtype=np.uint16)
    rep_gids = np.empty(0, dtype=np.int64)
    step = max_rows - max_reps
    for c0 in range(0, gids.size, step):
        part = gids[c0:c0 + step]
        order = np.argsort(part, kind="stable")
        n0 = rep_gids.size
        pool = np.zeros((n0 + part.size, kp), dtype=np.uint16)  # padding lanes 0: equal in every row
        pool[:n0] = rep_sigs
        fetched = np.empty((part.size, k), dtype=np.uint16)
        fetch_signatures(plan, part[order], fetched)
        held(n0 + part.size)
        pool[n0 + order, :k] = fetched
        del fetched
        pool_gids = np.concatenate((rep_gids, part.astype(np.int64)))
        n = pool_gids.size
        keys = readonly(np.zeros(n, dtype=np.uint64))
        docs = readonly(np.arange(n, dtype=np.uint32))
        starts = readonly(np.zeros(1, dtype=np.int64))
        ends = readonly(np.full(1, n, dtype=np.int64))
        words = readonly(pool.view(np.uint64))
        reps = np.full(max_reps, -1, dtype=np.int64)
        cursor = new_bucket_cursor()
        done = False
        while not done:
            m, done = link_chunk(keys, docs, starts, ends, words, EMPTY_SLOT, k, min_eq, max_reps, cursor, reps,
                                 out_a, out_b)
            if m:
                yield Links(pool_gids[out_a[:m]], pool_gids[out_b[:m]])
        kept = reps[reps >= 0]
        rep_sigs = pool[kept].copy()
        rep_gids = pool_gids[kept]


def alone_links(shard: Shard, keys: np.ndarray, gids: np.ndarray, max_docs: int,
                links: Callable[[Shard, ShardData], Iterator[Links]], max_reps: int) -> Iterator[Links]:
    """Links of a shard's rows ``(keys, gids)`` whose candidates exceed a pool of
    ``max_docs``, window by window; ``max_reps=0`` (``links`` links every pair, exact
    verification): a bucket larger than a window is read whole, as pairs read it."""
    count("streamed_shards")
    plan = shard.plan
    max_rows = window_rows(max_docs)
    for r0, r1 in spans(keys, max_rows):
        if r1 - r0 > max_rows and max_reps:
            yield from giant_links(plan, shard, gids[r0:r1], max_rows, max_reps)
            continue
        data = span_data(plan, keys[r0:r1], gids[r0:r1])
        if data is not None:
            yield from links(shard, data)


def alone_pairs(shard: Shard, keys: np.ndarray, gids: np.ndarray, max_docs: int,
                verify: Callable[..., Iterator[pa.RecordBatch]], chunk: int) -> Iterator[pa.RecordBatch]:
    """Pairs of a shard's rows ``(keys, gids)``, in batches of at most ``chunk`` rows: over
    a pool of their own when their candidates number at most ``max_docs``, else window by
    window, one after the other."""
    if sorted_unique(gids).size <= max_docs:
        parts = [(0, keys.size)]
    else:
        count("streamed_shards")
        parts = list(spans(keys, window_rows(max_docs)))
    for r0, r1 in parts:
        data = span_data(shard.plan, keys[r0:r1], gids[r0:r1])
        if data is not None:
            yield from verify(shard, data, chunk)
