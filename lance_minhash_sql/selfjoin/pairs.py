"""The self-join: every pair of rows whose MinHash similarity reaches a threshold.

>>> import lance_minhash_sql as lms
>>> for batch in lms.pairs("corpus.lance", "text", 0.8):  # doctest: +SKIP
...     print(batch.num_rows)

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
* ``verify="exact"`` replaces the estimate by the exact Jaccard of the two rows' shingle
  sets (same tokenizer and shingle size as the index): candidates whose estimate reaches
  :func:`lance_minhash_sql.core.banding.exact_candidate_floor` (4 standard deviations of
  the estimate under the threshold) are kept iff their ``jaccard >= threshold``. It finds
  the pairs at the threshold whose estimate fell under it (``verify="estimate"`` drops
  them); the ``jaccard`` column is filled.

How: the band-key space ``[0, num_bands << 56)`` is cut into key-range shards
(:func:`.shards.pair_shards`; band keys are hashes, so each holds about the same number of
band rows; a bucket never spans two), sized by ``memory_limit``; their candidates are
pooled and verified group by group within the budget (:mod:`.steps`, verified by
:mod:`.verify`). The executor (``selfjoin/executor.py``) runs that plan in this process
or as Ray tasks; the pairs are the same.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.checks import check_threshold, check_verify
from lance_minhash_sql.index.results import PAIRS_EXACT_SCHEMA, PAIRS_SCHEMA
from lance_minhash_sql.io.handles import options_for
from lance_minhash_sql.selfjoin.executor import LOCAL, Executor

__all__ = ["PAIRS_SCHEMA", "PAIRS_EXACT_SCHEMA", "pairs"]


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
    budget = Budget.parse(memory_limit)
    storage_options = options_for(dataset, storage_options)
    return executor.pairs(dataset, column, threshold, verify, budget, storage_options)
