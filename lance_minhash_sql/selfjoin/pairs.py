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
from typing import Iterator

import pyarrow as pa

from lance_minhash_sql.core.checks import check_bool, check_int, check_threshold, check_verify
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.tuning import (DEFAULT_CHUNK_PAIRS, MAX_SHARDS, SHARD_BAND_ROWS)
from lance_minhash_sql.index.results import PAIRS_EXACT_SCHEMA, PAIRS_SCHEMA
from lance_minhash_sql.io.scan import options_for
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.selfjoin.bounded import memory_limit_bytes
from lance_minhash_sql.selfjoin.executor import LOCAL, Executor
from lance_minhash_sql.selfjoin.verify import data_pairs
from lance_minhash_sql.selfjoin.shards import Shard, load_shard, pair_shards, plan_shards

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
]




# --------------------------------------------------------------------------- pairs of a shard


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


# --------------------------------------------------------------------------- all shards


def pairs(dataset, column: str, threshold: float = 0.8, *, verify: str = "estimate", memory_limit=None,
          storage_options: dict | None = None, executor: Executor = LOCAL) -> Iterator[pa.RecordBatch]:
    """Every verified pair of ``column``'s index (all shards), as record batches of
    :data:`PAIRS_SCHEMA` (:data:`PAIRS_EXACT_SCHEMA` with ``verify="exact"``); see the
    module doc. At most ``memory_limit`` (bytes or a size text such as ``'1GiB'``; default
    :data:`~lance_minhash_sql.core.params.DEFAULT_SELF_JOIN_MEMORY`) is held beside the
    process, or beside each task of a distributed ``executor`` (``selfjoin/executor.py``;
    default this process); the pairs depend on neither.

    Arguments are checked (and the index opened) when called, before the first batch.
    """
    verify = check_verify(verify)
    check_threshold(threshold)
    memory_limit_bytes(memory_limit)
    storage_options = options_for(dataset, storage_options)
    return executor.pairs(dataset, column, threshold, verify, memory_limit, storage_options)


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

