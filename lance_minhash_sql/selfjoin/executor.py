"""Where a self-join's work runs: the executor's part of the plan, and the local executor.

A self-join is one plan whatever runs it (``docs/architecture.md``, *A self-join, end to
end*): key-range shards sized by ``memory_limit``, candidates pooled and verified group by
group, links united into components. An *executor* runs the parts of that plan that grow
with the corpus, and only those:

* ``pairs(...)``: the verified pairs, as record batches (:func:`.pairs.pairs`' rule);
* ``components(...)``: the components table of the links of a :class:`.links.LinkRule`;
* ``shard_pairs(...)``: one shard's verified pairs, for a caller that runs shards as
  independent calls (SQL: one per ``UNION ALL`` branch, on DuckDB's threads). The calls
  that pass the same list of shards share what one self-join shares: the local executor
  pools the candidates of consecutive shards once, and with ``verify="exact"`` fetches
  and shingles the candidate rows of all of them once (:mod:`.shared`);
* ``join(...)``: the verified pairs of two datasets (:mod:`.join`), and
  ``join_shard(...)`` one shard's of them (for SQL).

Everything computed from those results is the engine's, the same code on every executor:
star clustering over the components (:mod:`.star`), the keep policies and writing
(:mod:`.dedup`). So every mode (``verify``, ``clustering``, ``keep``, ``order_by``) exists on
every executor and gives the same answer.

:data:`LOCAL` runs the plan in this process on its threads (:mod:`.steps`); the Ray
executor (``extras/ray_executor.py``) runs the same plan as Ray tasks. The engine never
imports Ray: the public entry (``api/entries.py``) picks the executor.
"""

from __future__ import annotations

from typing import Iterator, Protocol

import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.tuning import DEFAULT_CHUNK_PAIRS
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.runtime.threads import num_threads
from lance_minhash_sql.selfjoin.join_shards import JoinShard, join_all, join_shards, shared_shard_join
from lance_minhash_sql.selfjoin.links import LinkRule, link_verifier, planning
from lance_minhash_sql.selfjoin.verify import pair_verifier
from lance_minhash_sql.selfjoin.shared import SharedShards
from lance_minhash_sql.selfjoin.shards import Shard
from lance_minhash_sql.selfjoin.steps import run_clusters, run_pairs

__all__ = ["Executor", "LocalExecutor", "LOCAL"]


class Executor(Protocol):
    """What an executor runs (module doc). Arguments arrive checked; ``verify`` is
    ``'estimate'`` or ``'exact'``; ``budget`` is what each worker of the executor holds
    beside its process: the entry's ``memory_limit`` parsed once into its parts
    (:meth:`lance_minhash_sql.core.budget.Budget.parse`); for ``join`` ``None`` when no
    ``memory_limit`` was given (the default budget, the left rows signed in memory bounded
    by the segment cache alone: :func:`.join_shards.join_shards`); ``progress``: a
    progress bar of the work (``runtime/progress.py``)."""

    name: str

    def pairs(self, dataset, column: str, threshold: float, verify: str, budget: Budget, storage_options
              ) -> Iterator[pa.RecordBatch]: ...

    def components(self, dataset, column: str, rule: LinkRule, budget: Budget, storage_options,
                   progress: bool = False) -> pa.Table: ...

    def shard_pairs(self, shards: list[Shard], index: int, verify: str, budget: Budget, storage_options
                    ) -> Iterator[pa.RecordBatch]: ...

    def join(self, left, right, column: str, threshold: float, verify: str, budget: Budget | None, *, right_column,
             left_storage_options, right_storage_options) -> Iterator[pa.RecordBatch]: ...

    def join_shard(self, shard: JoinShard, verify: str, left_storage_options, right_storage_options
                   ) -> Iterator[pa.RecordBatch]: ...


class LocalExecutor:
    """The plan in this process: shards on a few threads (the kernels release the GIL),
    everything held within ``memory_limit`` (:mod:`.steps`)."""

    name = "local"

    def pairs(self, dataset, column: str, threshold: float, verify: str, budget: Budget, storage_options
              ) -> Iterator[pa.RecordBatch]:
        verifier = pair_verifier(verify, open_index(dataset, column, storage_options))
        return verifier.closing(run_pairs(dataset, column, threshold, verify=verifier, most=DEFAULT_CHUNK_PAIRS,
                                          exact=verify == "exact", budget=budget, storage_options=storage_options))

    def components(self, dataset, column: str, rule: LinkRule, budget: Budget, storage_options,
                   progress: bool = False) -> pa.Table:
        opened = open_index(dataset, column, storage_options)
        links = link_verifier(rule, opened)
        try:
            with planning(rule):
                return run_clusters(dataset, column, rule.threshold, links=links, max_reps=rule.max_reps,
                                    budget=budget, storage_options=storage_options, progress=progress)
        finally:
            links.close()

    def shard_pairs(self, shards: list[Shard], index: int, verify: str, budget: Budget, storage_options
                    ) -> Iterator[pa.RecordBatch]:
        """Shard ``shards[index]``'s pairs within ``budget``, sharing the pools and
        shingle sets of the calls of ``shards`` (:class:`.shared.SharedShards`)."""
        return SharedShards.of(shards, verify, budget).pairs(index)

    def join(self, left, right, column: str, threshold: float, verify: str, budget: Budget | None, *, right_column,
             left_storage_options, right_storage_options) -> Iterator[pa.RecordBatch]:
        shards = join_shards(left, right, column, threshold, right_column=right_column, budget=budget,
                             left_storage_options=left_storage_options, right_storage_options=right_storage_options)
        return join_all(shards, verify, Budget.or_default(budget))

    def join_shard(self, shard: JoinShard, verify: str, left_storage_options, right_storage_options
                   ) -> Iterator[pa.RecordBatch]:
        """One shard of the join, cut into parts joined on this process's threads (a SQL
        statement that keeps its order runs one shard at a time); the calls of one plan
        share exact verification's shingle sets (:func:`.join_shards.shared_shard_join`)."""
        return shared_shard_join(shard, verify, num_threads())


LOCAL = LocalExecutor()
