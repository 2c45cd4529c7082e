"""The ingest plan's corpus side under the estimate (``selfjoin/ingest.py``): each batch
row's best corpus row, the corpus read in doc order.

The answer is the cross-dataset join's (:mod:`.join_shards`) reduced to each left row's
best right row, :func:`kernels.ingest.keep_best`'s rule: a corpus row is a candidate of a
batch row when the two share a band key of the corpus index, it counts when at least
``candidate_matches(threshold, k, 'estimate')`` (:mod:`.verify`) of their values are
equal, and the best is the one with the most equal values, ties to the lowest corpus row
id. Deleted corpus rows never count.

What differs from the join is the order of the work. The join walks key ranges and
gathers, for each, the signatures of the corpus rows met there; a small batch meets
corpus rows all over the signature file, each range's from anywhere in it. Here:

1. the key ranges are walked once (on threads, each range's corpus band rows searched for
   the batch's keys in place, :func:`.join_shards.shared_band_rows`), listing each
   *match*: a corpus doc and the position of the batch key it shares;
2. the matches are sorted by doc (:func:`kernels.sort.radix_sort_run`);
3. the corpus signatures of the matched docs are read once each, in file order, block by
   block (the pages handed back after each), and each doc is compared with the batch rows
   of its keys (:func:`kernels.ingest.best_in_block`), a batch row met through two keys of
   one doc compared once, and only when their sketches (the low 4 bits of each value,
   :func:`kernels.ingest.nibble_sketches`) leave it a chance to count and win. Blocks are
   read and compared on a few threads, each into bests of its own, folded at the end by
   the same rule (:func:`kernels.ingest.keep_best`). The batch rows are numbered for the
   walk in the order it meets them (:func:`kernels.ingest.visit_order`), so the rows it
   compares one after another lie side by side in memory.

Memory: :data:`MATCH_BYTES` a match while they are sorted, then 12 bytes a match, and on
each thread one block of :data:`BLOCK_DOCS` signatures and 24 bytes a batch row; the batch
rows' sketches and their numbering, ``k / 2 + 16`` bytes a row, and 4 bytes a band key.
:func:`best_rows` gives up (returns None) as soon as the matches pass the budget's
``pool`` part; the caller then joins, whose memory follows the shards.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.kernels.ingest import (best_in_block, first_positions, keep_best, nibble_sketches,
                                               visit_order)
from lance_minhash_sql.kernels.sort import DIGIT_BITS, radix_sort_run
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.runtime.threads import run_chunks
from lance_minhash_sql.selfjoin.join_shards import (Side, SignedLeft, count_shards, key_bounds, live_mask,
                                                    shared_band_rows)
from lance_minhash_sql.selfjoin.pool import fetch_signatures, prepare_fetch
from lance_minhash_sql.selfjoin.verify import candidate_matches

__all__ = ["MATCH_BYTES", "BestRows", "best_rows"]

MATCH_BYTES = 24  # a match while sorted: its doc (u64) and key position (u32), and the sort's scratch of both
BLOCK_DOCS = 1 << 14  # corpus signatures a thread reads, then compares, at once (4 MiB at k = 128)


class BestRows(NamedTuple):
    """Each batch row's best corpus row, by position in the signed batch rows."""

    found: np.ndarray  # bool[n]
    rowid: np.ndarray  # uint64[n]: the best corpus row's id (where found)
    eq: np.ndarray  # int64[n]: its equal values (where found)


def _matches(batch: SignedLeft, corpus: Side, budget: Budget) -> tuple[np.ndarray, np.ndarray] | None:
    """``(docs u64, key positions u32)`` of every corpus band row sharing a key with the
    batch, in key-range order; None once they pass the budget's ``pool`` part."""
    lkeys = readonly(batch.keys)
    bounds = key_bounds(corpus.params, count_shards(lkeys.size + corpus.band_rows, budget))
    at = np.searchsorted(lkeys, np.array(bounds, dtype=np.uint64))

    def read(s: int):
        a, b = int(at[s]), int(at[s + 1])
        if a == b:
            return
        lk = lkeys[a:b]
        rk, rg = shared_band_rows(corpus, bounds[s], bounds[s + 1], lk, np.zeros(b - a, dtype=np.bool_))
        if rk.size:
            yield rg.astype(np.uint64), first_positions(lk, rk, np.int64(a))

    docs, pos, held = [], [], 0
    for d, p in run_ordered(list(range(len(bounds) - 1)), read):
        held += d.size * MATCH_BYTES
        if held > budget.pool:
            return None
        docs.append(d)
        pos.append(p)
    if not docs:
        return np.empty(0, np.uint64), np.empty(0, np.uint32)
    return np.concatenate(docs), np.concatenate(pos)


def _prepare(corpus: Side) -> None:
    """:func:`.pool.prepare_fetch` ahead of the reads; a failure is left to the read that
    needs the runs, which raises it."""
    try:
        prepare_fetch(corpus)
    except Exception:  # raised again by fetch_signatures, in the caller's thread
        pass


def best_rows(batch: SignedLeft, corpus: Side, threshold: float, budget: Budget) -> BestRows | None:
    """Each row of ``batch`` (signed with the corpus index's parameters) and its best row
    of ``corpus`` (an index's side, :func:`.join_shards.index_side`) under the estimate
    (module doc); None when the matches do not fit ``budget`` (module doc)."""
    n = batch.rowids.size
    best_right = np.zeros(n, dtype=np.uint64)
    ahead = threading.Thread(target=_prepare, args=(corpus,), name="lms-rowid-runs", daemon=True)
    ahead.start()  # the corpus's row id runs read while the matches are listed
    got = _matches(batch, corpus, budget)
    ahead.join()
    if got is None:
        return None
    docs, pos = got
    if docs.size == 0:
        return BestRows(np.zeros(n, dtype=np.bool_), best_right, np.full(n, -1, dtype=np.int64))
    radix_sort_run(docs, pos, np.empty_like(docs), np.empty_like(pos), DIGIT_BITS)
    starts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
    distinct = docs[starts].astype(np.uint32)
    k = corpus.params.num_hashes
    blocks = [(s, min(s + BLOCK_DOCS, distinct.size)) for s in range(0, distinct.size, BLOCK_DOCS)]

    lkeys, lsigs = readonly(batch.keys), readonly(batch.sigs)
    # the batch rows numbered in the order the walk meets them (kernels.ingest.visit_order)
    order = visit_order(pos, lkeys, batch.docs, n)
    walk_row = np.empty(n, dtype=np.uint32)
    walk_row[order] = np.arange(n, dtype=np.uint32)
    ldocs = readonly(walk_row[batch.docs])
    lsketch = readonly(nibble_sketches(lsigs)[order])
    min_eq = np.int64(candidate_matches(threshold, k, "estimate"))
    match_at = np.append(starts, docs.size)
    folds: dict[int, tuple[np.ndarray, ...]] = {}  # a thread's (stamp, best_eq, best_right)
    lock = threading.Lock()

    def compare(lo: int, hi: int) -> None:  # blocks [lo, hi) on this thread, into its own bests
        with lock:
            fold = folds.setdefault(threading.get_ident(), (np.full(n, -1, dtype=np.int64),
                                                            np.full(n, -1, dtype=np.int64), np.zeros(n, np.uint64)))
        for a, b in blocks[lo:hi]:
            sigs = np.empty((b - a, k), dtype=np.uint16)
            rowids = fetch_signatures(corpus, distinct[a:b], sigs)
            alive = live_mask(corpus, rowids)
            best_in_block(docs, pos, int(match_at[a]), int(match_at[b]), sigs, rowids,
                          np.ones(b - a, dtype=np.bool_) if alive is None else alive, lkeys, ldocs, lsigs, order,
                          lsketch, min_eq, *fold)

    run_chunks(compare, len(blocks), 1)
    # the threads' bests folded by the same rule: each thread's equal values are the score
    # (and, kept beside it, the value to return; keep_best's Jaccard slot is not needed)
    score, eq, unused = np.full(n, -np.inf), np.zeros(n), np.zeros(n)
    for _, b_eq, b_right in folds.values():  # (in the walk's numbering: back to the batch's)
        at = np.flatnonzero(b_eq >= 0)
        e = b_eq[at].astype(np.float64)
        keep_best(order[at], b_right[at], e, e, e, score, best_right, eq, unused)
    found = score > -np.inf
    best_eq = np.where(found, eq, -1).astype(np.int64)
    return BestRows(found, best_right, best_eq)
