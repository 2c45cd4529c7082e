"""Clusters of near-duplicates: connected components over verified links, or
(``clustering="star"``) the stars each component splits into (:mod:`.star`).

>>> import lance_minhash_sql as lms
>>> lms.clusters("corpus.lance", "text", 0.8)  # doctest: +SKIP
pyarrow.Table
_rowid: uint64 not null
cluster_id: uint64 not null
cluster_size: int64 not null

Every live row in a cluster of two rows or more gets one row: its ``_rowid``, the
``cluster_id`` (the smallest row id of its cluster) and ``cluster_size``; ordered by
``(cluster_id, _rowid)``. Buckets, runs, shards and deletions are those of
:mod:`.pairs` (all segments and the unindexed rows; deleted rows are never linked).

Which links are verified, and how ``verify`` changes them: :mod:`.links`. Which
executor verifies them (this process, or Ray tasks): :mod:`.executor`; the table is the
same on every executor and under every budget. How these clusters compare with the components of all verified pairs (they refine them,
and equal them when every bucket's verified pairs form disjoint cliques): :mod:`.links`.
"""

from __future__ import annotations

import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.checks import check_bool, check_clustering_verify, check_threshold
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.results import CLUSTERS_SCHEMA
from lance_minhash_sql.io.handles import dataset_handle, options_for
from lance_minhash_sql.runtime.memory import bounded_heap, trim_heap
from lance_minhash_sql.selfjoin.executor import LOCAL, Executor
from lance_minhash_sql.selfjoin.links import link_rule
from lance_minhash_sql.selfjoin.star import star_clusters

__all__ = ["CLUSTERS_SCHEMA", "clusters", "linked_components"]


def clusters(dataset, column: str, threshold: float = 0.8, *, clustering: str = "components",
             verify: str = "estimate", memory_limit=None, storage_options: dict | None = None,
             executor: Executor = LOCAL, progress: bool = False) -> pa.Table:
    """Near-duplicate clusters of ``column``'s rows (see the module doc for the exact rule):
    ``_rowid``, ``cluster_id`` (smallest row id of the cluster), ``cluster_size`` for every
    row in a cluster of two or more, ordered by ``(cluster_id, _rowid)``. At most
    ``memory_limit`` (bytes or a size text such as ``'1GiB'``; default
    :data:`~lance_minhash_sql.core.params.DEFAULT_SELF_JOIN_MEMORY`) is held beside the
    process (:mod:`.steps`); the table does not depend on it.

    ``clustering="star"``: each component split into stars (:mod:`.star`, members walked
    by lowest row id): a cluster is a kept row (its ``cluster_id``) and the rows dropped
    for it, those similar to it and to no kept row before it
    (:func:`.star.star_members`: the clusters of :func:`.dedup.keep_flags` with the same
    arguments and ``keep="first"``); with ``verify="exact"`` similar by exact Jaccard.
    ``executor`` runs the components (:mod:`.executor`); the star walk runs here, on every
    executor. ``progress``: progress bars on stderr, the shards linked and
    the rows the star walk visited."""
    clustering, verify = check_clustering_verify(clustering, verify)
    budget = Budget.parse(memory_limit)
    progress = check_bool("progress", progress)
    storage_options = options_for(dataset, storage_options)
    table = linked_components(dataset, column, threshold, verify, budget, storage_options, clustering, executor,
                              progress)
    if clustering == "components":
        return table
    _, ds = dataset_handle(dataset, storage_options)
    with bounded_heap():  # (the walk's steps: as the self-join's, selfjoin/steps.py's module doc, 7)
        trim_heap()
        return star_clusters(open_index(ds, column, storage_options), threshold, table, verify, budget, progress)


def linked_components(dataset, column: str, threshold: float, verify: str, budget: Budget, storage_options,
                      clustering: str = "star", executor: Executor = LOCAL, progress: bool = False) -> pa.Table:
    """The components table (:func:`clusters`' rule) of the links :func:`.links.link_rule`
    gives ``clustering`` and ``verify``, computed by ``executor`` within ``budget``
    (``progress``: with a progress bar)."""
    threshold = check_threshold(threshold)
    rule = link_rule(open_index(dataset, column, storage_options).params, threshold, verify, clustering)
    return executor.components(dataset, column, rule, budget, storage_options, progress=progress)
