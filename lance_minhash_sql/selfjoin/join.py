"""The cross-dataset join (``docs/join.md``): every pair of a left row and a right row
whose MinHash similarity reaches a threshold, through the right dataset's index.

>>> import lance_minhash_sql as lms
>>> for batch in lms.join("eval.lance", "corpus.lance", "text", 0.8):  # doctest: +SKIP
...     print(batch.num_rows)

What is reported and how the shards are cut and joined: :mod:`.join_shards`. Which
executor joins them (this process, or Ray tasks): :mod:`.executor`; the pairs are the same
on every executor and under every budget.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.checks import check_threshold, check_verify
from lance_minhash_sql.selfjoin.executor import LOCAL, Executor
from lance_minhash_sql.selfjoin.join_shards import JOIN_SCHEMA

__all__ = ["JOIN_SCHEMA", "join"]


def join(left, right, column: str, threshold: float = 0.8, *, verify: str = "estimate",
         right_column: str | None = None, memory_limit=None, left_storage_options: dict | None = None,
         right_storage_options: dict | None = None, executor: Executor = LOCAL) -> Iterator[pa.RecordBatch]:
    """Every verified (left, right) pair (all shards), as record batches of
    :data:`JOIN_SCHEMA` (:mod:`.join_shards`). Arguments are checked, the right index
    opened and the left rows signed when called, before the first batch. ``memory_limit``
    (default :data:`~lance_minhash_sql.core.params.DEFAULT_SELF_JOIN_MEMORY`) sizes the
    shards and the batches (:mod:`.steps`), in this process or in each task of a
    distributed ``executor``; the pairs do not depend on it."""
    verify = check_verify(verify)
    check_threshold(threshold)
    budget = None if memory_limit is None else Budget.parse(memory_limit)
    return executor.join(left, right, column, threshold, verify, budget, right_column=right_column,
                         left_storage_options=left_storage_options, right_storage_options=right_storage_options)
