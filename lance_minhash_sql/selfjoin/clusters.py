"""Clusters of near-duplicates: connected components over verified links.

>>> from lance_minhash_sql.selfjoin.clusters import clusters  # doctest: +SKIP
>>> clusters("corpus.lance", "text", 0.8)  # doctest: +SKIP
pyarrow.Table
_rowid: uint64 not null
cluster_id: uint64 not null
cluster_size: int64 not null

Every live row in a cluster of two rows or more gets one row: its ``_rowid``, the
``cluster_id`` (the smallest row id of its cluster) and ``cluster_size``; ordered by
``(cluster_id, _rowid)``. Buckets, runs, shards and deletions are those of
:mod:`.pairs` (all segments and the unindexed rows; deleted rows are never linked).

**Which links are verified** (the rule, per LSH bucket, i.e. per run of equal band keys
in any band; a bucket of ``m`` live rows costs ``O(m * MAX_REPS)``, never ``O(m^2)``):

1. The bucket's members are taken in ascending row id order.
2. The first member is a *representative* (rep).
3. Every later member ``x`` is verified against **every** current rep ``y`` — MinHash
   similarity ``float32(eq) / float32(k) >= threshold`` over the full signatures, as
   :func:`.pairs.pairs` verifies — and linked to each rep it passes.
4. A member that passes no rep becomes a rep itself, while the bucket holds fewer than
   :data:`MAX_REPS` (16) reps; past that it is left unlinked in this bucket.

Clusters are the connected components of all links of all buckets (union-find). The
links depend only on each bucket's set of live rows, so the answer does not depend on
the number of shards, segments or threads.

**Compared with all-pairs clustering** (single linkage over every verified candidate
pair, i.e. the components of the graph of :func:`.pairs.pairs`):

* *Precision*: every link is a verified candidate pair, so every cluster lies inside one
  all-pairs component: rows are never put together that all-pairs clustering would keep
  apart (the clusters refine the all-pairs components).
* *Recall*: an all-pairs component can be split. A verified pair ``u < v`` (row ids)
  shares at least one bucket. There it is linked directly when ``u`` is a rep; otherwise
  ``u`` was linked to some rep ``A`` (or reps had run out) and ``v`` still lands in
  ``u``'s cluster when it passes ``A`` or any rep already connected to ``A``. The pair is
  lost only when this fails in *every* bucket the two share: non-transitive similarity
  (``u ~ A``, ``u ~ v``, but ``v`` passes only reps of other clusters, or none), or a
  bucket with more than ``MAX_REPS`` mutually dissimilar members ahead of ``u``.
  Near-duplicates at a high similarity share many bands, so they get many chances.
* *Exactness*: if in every bucket "verified" is an equivalence relation on the live
  members (the verified pairs within a bucket form disjoint cliques) and every bucket has
  at most ``MAX_REPS`` classes, the clusters equal the all-pairs components exactly: each
  class's first member becomes a rep (it fails the other classes' reps), every later
  member of the class passes it, and no link joins two classes.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.checks import check_clustering_verify, check_threshold
from lance_minhash_sql.core.params import exact_candidate_floor, warn_if_low_recall
from lance_minhash_sql.core.errors import InvalidParameterError, LowRecallWarning
from lance_minhash_sql.core.tuning import DEFAULT_CHUNK_PAIRS, LINK_CHUNK
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.results import CLUSTERS_SCHEMA
from lance_minhash_sql.io.handles import dataset_handle
from lance_minhash_sql.io.scan import options_for
from lance_minhash_sql.kernels.lsh import sorted_unique
from lance_minhash_sql.kernels.pairs import link_chunk, min_matches, new_cursor, order_buckets
from lance_minhash_sql.kernels.unionfind import component_min, component_sizes, flatten, new_union_find, union_pairs
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.selfjoin.pairs import data_pairs
from lance_minhash_sql.selfjoin.shingles import ShingleSets, budget_sets
from lance_minhash_sql.selfjoin.shards import Shard, ShardData, load_shard, plan_shards, shard_windows
from lance_minhash_sql.selfjoin.star import star_clusters

__all__ = ["CLUSTERS_SCHEMA", "MAX_REPS", "clusters", "linked_components", "unbounded_clusters", "components", "shard_links", "data_links",
           "exact_links"]

MAX_REPS = 16  # representatives per bucket: a member is verified against at most this many


def shard_links(shard: Shard, chunk: int = LINK_CHUNK) -> Iterator[tuple[np.ndarray, ...]]:
    """One shard's verified links as global doc ids.

    Yields ``("rows", gids, rowids)`` once (the shard's candidate docs and their row ids),
    then ``("links", a, b)`` chunks of at most ``chunk`` links, each as full as the links
    allow: :func:`lance_minhash_sql.runtime.pipeline.run_ordered` lets a shard's thread run only a couple of items
    ahead of the consumer, so a chunk per window (a shard has ~100 windows at 10M rows)
    kept the next shard's thread waiting for the current one, and clusters ran on about
    one core.
    """
    if not isinstance(shard, Shard):
        raise InvalidParameterError(f"shard={shard!r} must be a Shard from pair_shards()")
    data = load_shard(shard)
    if data is None:
        return
    local = data.local_ids()
    yield "rows", data.global_ids(local), data.local_rowids(local)
    yield from data_links(shard, data, chunk)


def data_links(shard: Shard, data: ShardData, chunk: int = LINK_CHUNK) -> Iterator[tuple[np.ndarray, ...]]:
    """``("links", a, b)`` chunks of a shard's loaded data (:func:`.shards.load_shard`, or a
    part of a shard loaded under a memory budget, :mod:`.bounded`), as global doc ids."""
    if not data.rowids_ascend():
        order_buckets(data.docs, data.slot, data.rowids, data.starts, data.ends)
    k = shard.params.num_hashes
    min_eq = min_matches(shard.threshold, k)
    cap = max(chunk, MAX_REPS)
    out_a = np.empty(cap, dtype=np.uint32)
    out_b = np.empty(cap, dtype=np.uint32)
    reps = np.empty(MAX_REPS, dtype=np.int64)
    held: list[tuple[np.ndarray, np.ndarray]] = []
    count = 0
    for w in shard_windows(data):
        cursor = new_cursor()
        done = False
        while not done:
            n, done = link_chunk(w.keys, w.docs, w.starts, w.ends, w.words, w.slot, k, min_eq, MAX_REPS, cursor,
                                 reps, out_a, out_b)
            if not n:
                continue
            if count + n > chunk and held:
                yield "links", *_joined(held)
                held, count = [], 0
            held.append((w.global_ids(data, out_a[:n]), w.global_ids(data, out_b[:n])))
            count += n
    if held:
        yield "links", *_joined(held)


def exact_links(shard: Shard, data: ShardData, chunk: int = DEFAULT_CHUNK_PAIRS, shingles: ShingleSets | None = None
                ) -> Iterator[tuple[np.ndarray, ...]]:
    """``("links", a, b)`` chunks of a shard's loaded data for ``verify="exact"``
    components: every candidate pair of a bucket whose estimate reaches
    :func:`exact_candidate_floor` and whose exact shingle Jaccard reaches the threshold
    (:func:`.pairs.data_pairs`, the pairs of ``verify := 'exact'``), as global doc ids.
    Not the representatives' rule: a pair verified by exact Jaccard is a link whatever
    the other members of its bucket, so the components are those of all the exact pairs.
    ``shingles``: the rows' shingle sets, shared by the shards (:func:`.pairs.pair_verifier`)."""
    local = sorted_unique(data.docs)
    rowid, gid = data.local_rowids(local), data.global_ids(local)
    order = np.argsort(rowid)
    rowid, gid = rowid[order], gid[order]
    for batch in data_pairs(shard, data, True, chunk, verify="exact", shingles=shingles):
        left = batch.column(0).to_numpy()
        right = batch.column(1).to_numpy()
        yield "links", gid[np.searchsorted(rowid, left)], gid[np.searchsorted(rowid, right)]


def _joined(held: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([a for a, _ in held]), np.concatenate([b for _, b in held])


def clusters(dataset, column: str, threshold: float = 0.8, *, clustering: str = "components",
             verify: str = "estimate", memory_limit=None, storage_options: dict | None = None) -> pa.Table:
    """Near-duplicate clusters of ``column``'s rows (see the module doc for the exact rule):
    ``_rowid``, ``cluster_id`` (smallest row id of the cluster), ``cluster_size`` for every
    row in a cluster of two or more, ordered by ``(cluster_id, _rowid)``. At most
    ``memory_limit`` (bytes or a size text such as ``'1GiB'``; default
    :data:`~lance_minhash_sql.params.DEFAULT_SELF_JOIN_MEMORY`) is held beside the
    process (:mod:`.bounded`); the table does not depend on it.

    ``clustering="star"``: each component split into stars (:mod:`.star`, members walked
    by lowest row id): a cluster is a kept row (its ``cluster_id``) and the rows similar
    to it that are similar to no kept row before it; with ``verify="exact"`` similar by
    exact Jaccard."""
    clustering, verify = check_clustering_verify(clustering, verify)
    storage_options = options_for(dataset, storage_options)
    table = linked_components(dataset, column, threshold, verify, memory_limit, storage_options, clustering)
    if clustering == "components":
        return table
    _, ds = dataset_handle(dataset, storage_options)
    return star_clusters(ds, column, open_index(ds, column, storage_options).params, threshold, table, verify,
                         memory_limit)


def linked_components(dataset, column: str, threshold: float, verify: str, memory_limit, storage_options,
                      clustering: str = "star") -> pa.Table:
    """The components table (:func:`clusters`' rule). ``verify="exact"``: for star, the
    components of the links whose estimate reaches :func:`exact_candidate_floor` (a wider
    bound for star's exact twins; the planning warns of low recall for ``threshold``
    itself, not the floor); for components, those of the exact pairs
    (:func:`exact_links`)."""
    from lance_minhash_sql.selfjoin.bounded import bounded_clusters, memory_limit_bytes

    threshold = check_threshold(threshold)
    if verify == "exact" and clustering == "components":
        shingles = budget_sets(open_index(dataset, column, storage_options), memory_limit_bytes(memory_limit))
        links = partial(exact_links, shingles=shingles)
        return bounded_clusters(dataset, column, threshold, links=links, max_reps=0,
                                memory_limit=memory_limit, storage_options=storage_options)
    if verify == "exact":
        params = open_index(dataset, column, storage_options).params
        warn_if_low_recall(params, threshold)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LowRecallWarning)
            return bounded_clusters(dataset, column, exact_candidate_floor(threshold, params.num_hashes),
                                    links=data_links, max_reps=MAX_REPS, memory_limit=memory_limit,
                                    storage_options=storage_options)
    return bounded_clusters(dataset, column, threshold, links=data_links, max_reps=MAX_REPS,
                            memory_limit=memory_limit, storage_options=storage_options)


def unbounded_clusters(dataset, column: str, threshold: float = 0.8, *, storage_options: dict | None = None
                       ) -> pa.Table:
    """:func:`clusters` through the process cache, every shard's candidates pooled at once
    (memory grows with the index); kept as the reference the bounded engine is tested
    against."""
    shards = plan_shards(dataset, column, threshold, None, storage_options)
    total = shards[0].plan.total_docs if shards else 0
    return components(total, run_ordered(shards, shard_links))


def components(total: int, links: Iterable[tuple[str, np.ndarray, np.ndarray]]) -> pa.Table:
    """The clusters table of :func:`clusters` from :func:`shard_links` output of every shard
    (in any order) over ``total`` global docs: union-find, then one row per member of a
    component of two or more."""
    parent, size = new_union_find(total)
    rowid_of = np.zeros(total, dtype=np.uint64)
    for kind, a, b in links:
        if kind == "rows":
            rowid_of[a] = b
        else:
            union_pairs(parent, size, a, b)
    roots = flatten(parent)
    sizes = component_sizes(roots)
    members = np.flatnonzero(sizes >= 2)
    cid = component_min(roots, rowid_of)[members]
    rid = rowid_of[members]
    order = np.lexsort((rid, cid))
    return pa.Table.from_arrays(
        [pa.array(rid[order], pa.uint64()), pa.array(cid[order], pa.uint64()),
         pa.array(sizes[members][order], pa.int64())], schema=CLUSTERS_SCHEMA)
