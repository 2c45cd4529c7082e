"""The self-join: every pair of rows whose MinHash similarity reaches a threshold.

>>> from lance_minhash_sql.selfjoin.pairs import pairs, pair_shards, shard_pairs  # doctest: +SKIP
>>> for batch in pairs("corpus.lance", "text", 0.8):  # doctest: +SKIP
...     print(batch.num_rows)
>>> shards = pair_shards("corpus.lance", "text", 0.8)  # doctest: +SKIP
>>> sum(b.num_rows for s in shards for b in shard_pairs(s))  # doctest: +SKIP

What is reported, exactly:

* **Candidates** are the pairs of live rows that share at least one band key (Lance's own
  candidate rule, ``docs/search.md``), across *all* of the column's segments and the rows of
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
* ``verify="exact"`` replaces the estimate by the exact Jaccard instead of adding to it:
  candidates whose estimate reaches :func:`lance_minhash_sql.core.params.exact_candidate_floor`
  (4 standard deviations of the estimate under the threshold) are kept iff their
  ``jaccard >= threshold``. It finds the pairs at the threshold whose estimate fell
  under it (``verify="estimate"`` drops them); the ``jaccard`` column is filled.

How: the band-key space ``[0, num_bands << 56)`` is cut into ``num_shards`` equal key
ranges (band keys are hashes, so each holds about the same number of band rows; a bucket
never spans two). A shard reads its key range from every *run* — each segment's
``bands.lance`` (page-table search, then one read of the pages) and the in-memory sorted
band rows of the unindexed fragments (signed once per index version, when the shards are
planned) — merges them by ``(key, global doc)``, keeps the buckets of two rows or more,
drops deleted rows, and takes the remaining docs' signatures from the segment's process
cache (:mod:`.opened`; a shard that needs many of a segment's docs loads its signatures
whole, in bounded reads). Buckets are then processed in windows of up to
:data:`~lance_minhash_sql.core.tuning.BUCKET_WINDOW_ROWS` rows whose members' signatures
are first gathered into one buffer in row order (members are random docs: verifying straight from the pool costs a cache miss
per row, 300-600 ns), by :func:`kernels.pairs.pair_chunk`, in chunks of at most
``chunk_pairs`` pairs. Shards are independent: DuckDB can run one per call on its
threads; :func:`pairs` runs them on a thread pool (nogil kernels) and yields their
batches in shard order.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Iterator

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.checks import check_bool, check_int, check_verify
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.params import exact_candidate_floor
from lance_minhash_sql.core.tuning import (DEFAULT_CHUNK_PAIRS, EXACT_BYTES, EXACT_CHUNK, MAX_SHARDS, SHARD_BAND_ROWS,
                                           VISIT_BUDGET)
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.results import PAIRS_EXACT_SCHEMA, PAIRS_SCHEMA
from lance_minhash_sql.io.scan import options_for
from lance_minhash_sql.kernels.pairs import min_matches, new_cursor, pair_chunk, pair_jaccard
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.selfjoin.shingles import ShingleSets, budget_sets
from lance_minhash_sql.selfjoin.shards import Plan, Shard, ShardData, load_shard, pair_shards, plan_shards, shard_windows

__all__ = [
    "PAIRS_SCHEMA",
    "PAIRS_EXACT_SCHEMA",
    "SHARD_BAND_ROWS",
    "MAX_SHARDS",
    "DEFAULT_CHUNK_PAIRS",
    "Shard",
    "pair_shards",
    "plan_shards",
    "shard_pairs",
    "pairs",
    "unbounded_pairs",
    "data_pairs",
    "pair_verifier",
]




# --------------------------------------------------------------------------- pairs of a shard


def _similarity(eq: np.ndarray, k: int) -> np.ndarray:
    return lance_similarity(eq, k).astype(np.float64)


def _exact(plan: Plan, threshold: float, left: np.ndarray, right: np.ndarray, sim: np.ndarray,
           shingles: ShingleSets | None):
    """Exact shingle Jaccard of each pair (the rows' sets from ``shingles``, each row
    fetched and shingled once while they fit its budget; a set of its own for this batch
    when ``None``), :data:`EXACT_CHUNK` pairs at a time; the pairs with ``jaccard >=
    threshold``."""
    if shingles is None:
        shingles = ShingleSets(plan.opened, EXACT_BYTES)
    parts = []
    for s in range(0, left.size, EXACT_CHUNK):
        lft, rgt = left[s:s + EXACT_CHUNK], right[s:s + EXACT_CHUNK]
        ids, offsets, hashes = shingles.sets(np.concatenate((lft, rgt)))
        jac = pair_jaccard(offsets, hashes, readonly(np.searchsorted(ids, lft)), readonly(np.searchsorted(ids, rgt)))
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
    exact = check_bool("exact", exact)
    chunk = check_int("chunk_pairs", chunk_pairs, "e.g. 1048576", 1, 1 << 30)
    return _shard_pairs(shard, exact, chunk)


def _shard_pairs(shard: Shard, exact: bool, chunk: int, stop: threading.Event | None = None
                 ) -> Iterator[pa.RecordBatch]:
    """``stop``: checked after every kernel call (at most :data:`VISIT_BUDGET` pairs visited),
    so a consumer that stops early is not kept waiting for buckets whose pairs all come
    from earlier bands (visited, none written: the generator would not yield for hours in
    a cluster of 300k copies)."""
    data = load_shard(shard)
    if data is not None:
        yield from data_pairs(shard, data, exact, chunk, stop)


def data_pairs(shard: Shard, data: ShardData, exact: bool, chunk: int, stop: threading.Event | None = None,
               verify: str = "estimate", shingles: ShingleSets | None = None) -> Iterator[pa.RecordBatch]:
    """The verified pairs of a shard's loaded data (:func:`.shards.load_shard`, or a part of
    a shard loaded under a memory budget, :mod:`.bounded`). ``verify="exact"``: candidates
    down to :func:`exact_candidate_floor`, kept by their exact Jaccard (implies ``exact``).
    ``shingles``: the rows' shingle sets, shared by the shards of one self-join
    (:func:`pair_verifier`)."""
    plan = shard.plan
    k = plan.params.num_hashes
    exact = exact or verify == "exact"
    cap = max(1, min(chunk, _pair_bound(data)))
    out_l = np.empty(cap, dtype=np.uint64)
    out_r = np.empty(cap, dtype=np.uint64)
    out_e = np.empty(cap, dtype=np.int32)
    floor = exact_candidate_floor(shard.threshold, k) if verify == "exact" else shard.threshold
    min_eq = min_matches(floor, k)
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
                yield from _emit(plan, shard.threshold, exact, schema, out_l, out_r, out_e, fill, k, shingles)
                fill = 0
    if fill:
        yield from _emit(plan, shard.threshold, exact, schema, out_l, out_r, out_e, fill, k, shingles)


def _emit(plan: Plan, threshold: float, exact: bool, schema: pa.Schema, out_l, out_r, out_e, n: int, k: int,
          shingles: ShingleSets | None):
    left, right, sim = out_l[:n].copy(), out_r[:n].copy(), _similarity(out_e[:n], k)
    if exact:
        left, right, sim, jac = _exact(plan, threshold, left, right, sim, shingles)
        if left.size == 0:
            return
        cols = [left, right, sim, jac]
    else:
        cols = [left, right, sim]
    yield pa.record_batch([pa.array(c) for c in cols], schema=schema)


# --------------------------------------------------------------------------- all shards


def pairs(dataset, column: str, threshold: float = 0.8, *, exact: bool = False, verify: str = "estimate",
          memory_limit=None, storage_options: dict | None = None) -> Iterator[pa.RecordBatch]:
    """Every verified pair of ``column``'s index (all shards), as record batches of
    :data:`PAIRS_SCHEMA` (:data:`PAIRS_EXACT_SCHEMA` when ``exact`` or ``verify="exact"``);
    see the module doc.
    At most ``memory_limit`` (bytes or a size text such as ``'1GiB'``; default
    :data:`~lance_minhash_sql.params.DEFAULT_SELF_JOIN_MEMORY`) is held beside the
    process (:mod:`.bounded`); the pairs do not depend on it.

    Arguments are checked (and the index opened) when called, before the first batch.
    """
    from lance_minhash_sql.selfjoin.bounded import bounded_pairs, memory_limit_bytes

    exact = check_bool("exact", exact) or check_verify(verify) == "exact"
    verify = check_verify(verify)
    shingles = budget_sets(open_index(dataset, column, options_for(dataset, storage_options)),
                           memory_limit_bytes(memory_limit)) if exact else None
    return bounded_pairs(dataset, column, threshold, verify=pair_verifier(verify, shingles), most=DEFAULT_CHUNK_PAIRS,
                         exact=exact, memory_limit=memory_limit, storage_options=storage_options)


def pair_verifier(verify: str, shingles: ShingleSets | None = None):
    """:func:`data_pairs` for a checked ``verify`` mode, as :mod:`.bounded` calls it;
    ``shingles``: the rows' shingle sets for exact Jaccard, shared by all its shards
    (:func:`lance_minhash_sql.selfjoin.shingles.budget_sets`)."""
    if shingles is not None:
        return partial(data_pairs, verify=verify, shingles=shingles)
    return data_pairs if verify == "estimate" else partial(data_pairs, verify=verify)


def unbounded_pairs(dataset, column: str, threshold: float = 0.8, *, exact: bool = False,
                    storage_options: dict | None = None) -> Iterator[pa.RecordBatch]:
    """:func:`pairs` through the process cache, every shard's candidates pooled at once
    (memory grows with the index); kept as the reference the bounded engine is tested
    against."""
    exact = check_bool("exact", exact)
    shards = plan_shards(dataset, column, threshold, None, storage_options)
    stop = threading.Event()
    if not exact:
        return run_ordered(shards, lambda s: _shard_pairs(s, False, DEFAULT_CHUNK_PAIRS, stop), stop=stop)
    return run_ordered(shards, lambda s: _exact_shard(s, stop), stop=stop)


def _exact_shard(shard: Shard, stop: threading.Event) -> Iterator[pa.RecordBatch]:
    """One shard with ``exact``, then the heaps' free pages handed back: texts and shingle
    sets of many sizes on two threads fragment glibc's arenas (measured: +150 MB resident
    per repeated 1M-row run without it, 2-30 ms per trim)."""
    from lance_minhash_sql.runtime.memory import release_memory

    yield from _shard_pairs(shard, True, DEFAULT_CHUNK_PAIRS, stop)
    release_memory()

