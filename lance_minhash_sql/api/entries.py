"""The public entries of the build and the self-join: each picks its executor here.

``executor="local"`` (the default) runs the plan in this process
(``selfjoin/executor.py``); ``executor="ray"`` runs the same plan as Ray tasks
(``extras/ray_executor.py``) on the Ray of this process, else ``ray_address``, else
``RAY_ADDRESS``, else the cluster running on this machine. The answer is the same on
both, in every mode (``docs/distributed.md``). The engine does not import Ray; the local
executor never loads it.

``exact=True`` is the older spelling of ``verify="exact"``
(:func:`lance_minhash_sql.core.checks.verify_or_exact`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from lance_minhash_sql.indexer.builder import BuildResult
from lance_minhash_sql.indexer.builder import build_index as build_local
from lance_minhash_sql.core.checks import check_bool, check_executor, verify_or_exact
from lance_minhash_sql.core.errors import InvalidParameterError

if TYPE_CHECKING:
    from lance_minhash_sql.selfjoin.dedup import DedupResult
    from lance_minhash_sql.selfjoin.executor import Executor
    from lance_minhash_sql.lifecycle.ingest import IngestResult

# The self-join's and the ingest's modules and Ray's executor load on the first call that
# needs them: a process that only builds (a notebook's first cell) does not import them.

__all__ = ["executor_of", "build_index", "pairs", "clusters", "keep_flags", "dedup", "join", "ingest_plan", "ingest"]


def _local(executor: str, ray_address: str | None) -> bool:
    """Whether ``executor`` (checked) is ``"local"``; ``ray_address`` only with ``"ray"``."""
    if check_executor(executor) != "local":
        return False
    if ray_address is not None:
        raise InvalidParameterError(
            f"ray_address={ray_address!r} is for executor := 'ray'; pass executor := 'ray' too, or leave "
            "ray_address NULL")
    return True


def executor_of(executor: str = "local", ray_address: str | None = None) -> Executor:
    """The executor named ``executor`` (checked); ``ray_address`` only with ``"ray"``."""
    if _local(executor, ray_address):
        from lance_minhash_sql.selfjoin.executor import LOCAL

        return LOCAL
    from lance_minhash_sql.extras.ray_executor import RayExecutor

    return RayExecutor(ray_address)


def build_index(dataset, column: str, *, num_hashes: int = 128, num_bands: int | None = None,
                shingle_size: int = 3, threshold: float | None = None, tokenizer=None, replace: bool = True,
                name: str | None = None, memory_limit=None, temp_dir: str | None = None,
                storage_options: dict | None = None, progress: bool = False, executor: str = "local",
                ray_address: str | None = None, fragment_groups=None, merge: bool = False) -> BuildResult:
    """Build a MinHash LSH index on ``column`` (``indexer/builder.py``: ``build_index``).
    ``executor="ray"``: one Ray task per fragment group (``fragment_groups``: ``None`` for
    one per fragment, a number of contiguous groups, or lists of fragment ids), one commit
    (``extras/distributed.py``); ``memory_limit`` and ``temp_dir`` then apply to each task,
    and ``merge=True`` merges the tasks' segments into one afterwards (a local build writes
    one segment)."""
    options = dict(num_hashes=num_hashes, num_bands=num_bands, shingle_size=shingle_size, threshold=threshold,
                   tokenizer=tokenizer, replace=replace, name=name, memory_limit=memory_limit, temp_dir=temp_dir,
                   storage_options=storage_options)
    if _local(executor, ray_address):
        if fragment_groups is not None:
            raise InvalidParameterError(
                f"fragment_groups={fragment_groups!r} is for executor := 'ray' (one task per group); pass "
                "executor := 'ray' too, or leave fragment_groups NULL")
        check_bool("merge", merge)
        return build_local(dataset, column, progress=progress, **options)
    return executor_of(executor, ray_address).build(dataset, column, fragment_groups=fragment_groups, merge=merge,
                                                    progress=progress, **options)


def pairs(dataset, column: str, threshold: float = 0.8, *, verify: str = "estimate", exact: bool = False,
          memory_limit=None, storage_options: dict | None = None, executor: str = "local",
          ray_address: str | None = None) -> Iterator[pa.RecordBatch]:
    """Every verified pair of ``column``'s index, as record batches (``selfjoin/pairs.py``)."""
    from lance_minhash_sql.selfjoin import pairs as _pairs

    return _pairs.pairs(dataset, column, threshold, verify=verify_or_exact(verify, exact), memory_limit=memory_limit,
                        storage_options=storage_options, executor=executor_of(executor, ray_address))


def clusters(dataset, column: str, threshold: float = 0.8, *, clustering: str = "components",
             verify: str = "estimate", memory_limit=None, storage_options: dict | None = None,
             progress: bool = False, executor: str = "local", ray_address: str | None = None) -> pa.Table:
    """Near-duplicate clusters of ``column``'s rows (``selfjoin/clusters.py``)."""
    from lance_minhash_sql.selfjoin import clusters as _clusters

    return _clusters.clusters(dataset, column, threshold, clustering=clustering, verify=verify,
                              memory_limit=memory_limit, storage_options=storage_options,
                              executor=executor_of(executor, ray_address), progress=progress)


def keep_flags(dataset, column: str, threshold: float = 0.8, *, keep: str = "first", order_by: str | None = None,
               clustering: str = "components", verify: str = "estimate", memory_limit=None,
               storage_options: dict | None = None, progress: bool = False, executor: str = "local",
               ray_address: str | None = None) -> pa.Table:
    """Every row of a near-duplicate cluster with its ``keep`` flag (``selfjoin/dedup.py``)."""
    from lance_minhash_sql.selfjoin import dedup as _dedup

    return _dedup.keep_flags(dataset, column, threshold, keep=keep, order_by=order_by, clustering=clustering,
                             verify=verify, memory_limit=memory_limit, storage_options=storage_options,
                             executor=executor_of(executor, ray_address), progress=progress)


def dedup(dataset, column: str, threshold: float = 0.8, *, keep: str = "first", order_by: str | None = None,
          clustering: str = "components", verify: str = "estimate", output: str | None = None,
          delete_in_place: bool = False, progress: bool = False, memory_limit=None,
          storage_options: dict | None = None, executor: str = "local",
          ray_address: str | None = None) -> DedupResult:
    """Remove (or count, as a dry run) the rows dedup does not keep (``selfjoin/dedup.py``)."""
    from lance_minhash_sql.selfjoin import dedup as _dedup

    return _dedup.dedup(dataset, column, threshold, keep=keep, order_by=order_by, clustering=clustering,
                        verify=verify, output=output, delete_in_place=delete_in_place, progress=progress,
                        memory_limit=memory_limit, storage_options=storage_options,
                        executor=executor_of(executor, ray_address))


def join(left, right, column: str, threshold: float = 0.8, *, verify: str = "estimate", exact: bool = False,
         right_column: str | None = None, memory_limit=None, left_storage_options: dict | None = None,
         right_storage_options: dict | None = None, executor: str = "local",
         ray_address: str | None = None) -> Iterator[pa.RecordBatch]:
    """Every verified (left, right) pair of two datasets, as record batches (``selfjoin/join.py``)."""
    from lance_minhash_sql.selfjoin import join as _join

    return _join.join(left, right, column, threshold, verify=verify_or_exact(verify, exact),
                      right_column=right_column, memory_limit=memory_limit,
                      left_storage_options=left_storage_options, right_storage_options=right_storage_options,
                      executor=executor_of(executor, ray_address))


def ingest_plan(corpus, batch, column: str, threshold: float = 0.8, *, verify: str = "estimate",
                order_by: str | None = None, memory_limit=None, corpus_storage_options: dict | None = None,
                batch_storage_options: dict | None = None, executor: str = "local",
                ray_address: str | None = None) -> pa.Table:
    """One row per batch row: whether the corpus takes it, and its twin (``selfjoin/ingest.py``)."""
    from lance_minhash_sql.selfjoin import ingest as _ingest_plan

    return _ingest_plan.ingest_plan(corpus, batch, column, threshold, verify=verify, order_by=order_by,
                                    memory_limit=memory_limit, corpus_storage_options=corpus_storage_options,
                                    batch_storage_options=batch_storage_options,
                                    executor=executor_of(executor, ray_address))


def ingest(corpus, batch, column: str, threshold: float = 0.8, *, verify: str = "estimate",
           order_by: str | None = None, memory_limit=None, corpus_storage_options: dict | None = None,
           batch_storage_options: dict | None = None, progress: bool = False, executor: str = "local",
           ray_address: str | None = None) -> IngestResult:
    """Append the batch rows the plan keeps to the corpus, its index extended over them, in
    one new version (``lifecycle/ingest.py``)."""
    from lance_minhash_sql.lifecycle import ingest as _ingest

    return _ingest.ingest(corpus, batch, column, threshold, verify=verify, order_by=order_by,
                          memory_limit=memory_limit, corpus_storage_options=corpus_storage_options,
                          batch_storage_options=batch_storage_options, progress=progress,
                          executor=executor_of(executor, ray_address))
