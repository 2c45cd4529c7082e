"""The self-join's plan, step by step: pairs and clusters whose memory is bounded by
``memory_limit``, not by the index (``docs/scale.md``, *The self-join under a memory
budget*). Every executor takes these steps; they differ only in where a step runs (this
process's threads, a Ray task, one SQL call), so the answers are the same on each:

1. **Shards** (:func:`shards_for`) are key ranges of at most :func:`.sizing.shard_rows` band
   rows (the budget's ``shard`` part, :class:`lance_minhash_sql.core.budget.Budget`, at 12
   bytes a row, at most :data:`.shards.SHARD_BAND_ROWS`). A shard's key range is read
   straight from every run (a segment's ``bands.lance`` is sorted by key: page-table
   search, one read of the pages, the mapped pages handed back), merged, and only the
   rows of buckets of two rows or more are kept (:func:`.pool.read_multi`).
2. **The verifier** is prepared with the shards it will verify (:func:`prepared`: exact
   verification's shingle sets fetched once), and what is left of the budget sizes the
   pool (:mod:`.sizing`: the candidates' signatures, ``2 k + 12`` bytes each, in the
   budget's ``pool`` part less what is held per row, :func:`.sizing.fixed_bytes`).
3. **Groups** (:mod:`.groups`): consecutive shards whose distinct candidates fit one
   pool, the buckets that can give nothing new pruned first.
4. **Signatures** of a group's candidates are read once, in doc order, into one buffer
   for all groups (:class:`.pool.CarriedPool`): the rows of the group before whose docs
   this group holds too are kept, only the others fetched.
5. **Verification**: the group's shards (the rows of the marking pass while they fit
   :func:`.sizing.keep_rows`, else read again) are verified on threads
   (:func:`.verify.data_pairs`, :func:`.links.data_links`), each shard's docs located
   in the pool by their rank in the bit set; then the next group is marked (its first
   shards already read, and for pairs pruned, on the other threads meanwhile). **A shard
   alone over the pool** (a giant bucket) is taken window by window (:mod:`.giant`).
6. **Components** (clusters, :func:`united`): a union-find over the global doc ids in one
   ``int32`` array (:class:`.parent.UnionFind`: 4 bytes a row; a union keeps the smaller
   root, so a root is its component's smallest doc), flattened in place; then the
   members (docs of a component of two or more) get their row ids, in doc order, and the
   table its cluster ids (:func:`.clusters_table.clusters_table`). The array is held in
   memory while it and the bit set take at most the budget's ``parent`` part; past that it
   lives in a temporary file, memory-mapped, whose touched pages are handed back to the OS
   whenever they may reach its ``parent_pages`` part: what clusters hold per row whatever
   the index is then the bit set, a bit a row.
7. **The heap** keeps a build's glibc thresholds while the self-join runs, and for
   clusters until their table is built (:func:`lance_minhash_sql.runtime.memory.bounded_heap`;
   ``selfjoin/dedup.py`` keeps them through the keep flags): buffers of a few MiB and more
   are mapped on their own, and a heap's free top goes back at once, so the arenas of the
   verifying and reading threads do not keep the buffers of shards they are done with, nor
   the heap the arrays of a step done with; once the links are united the heap's free
   pages are handed back (:func:`lance_minhash_sql.runtime.memory.trim_heap`) before the
   table is built.

Who takes the steps: :func:`run_pairs` and :func:`run_clusters` all of them in this
process (the local executor, ``selfjoin/executor.py``); :func:`run_shard` one shard's
pairs as an independent call; a SQL statement plans by :func:`shards_for`
(``duck/self_join.py``) and its calls share steps 2-4 (``selfjoin/shared.py``: a group's
pool a :class:`.pool.MarkedPool`); the Ray shuffle (``extras/shuffle.py``) plans by
:func:`shards_for`, reads a shard's candidate rows by :func:`.pool.candidate_rows`, takes
an over-pool shard by :func:`run_shard` or :func:`.giant.alone_links` in its tasks and
unites the links by :func:`united` on its driver; the dry run's calibration
(``diagnostics/calibration.py``) times steps 1, 4 and 5 on small shards, each shard laid
out over its pool as a SQL call's (:meth:`.pool.MarkedPool.data`).

What the fetch costs: a doc is read once per group whose shards hold it as a candidate
after pruning. Without pruning, a group smaller than a band's candidates would read each
candidate about once per band it is a candidate in; with it, the groups are few
(``docs/scale.md``, *Time under a budget*, has the benchmark's counts).
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.tuning import LINKS_AHEAD, PAIRS_AHEAD
from lance_minhash_sql.kernels.components import new_marks
from lance_minhash_sql.runtime.memory import bounded_heap, trim_heap
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.runtime.progress import progress_bar
from lance_minhash_sql.selfjoin.clusters_table import clusters_table
from lance_minhash_sql.selfjoin.giant import alone_links, alone_pairs, spans
from lance_minhash_sql.selfjoin.groups import GroupShard, Labels, ShardGroup, group_loader, shard_groups
from lance_minhash_sql.selfjoin.links import LinkRule, Links, planning
from lance_minhash_sql.selfjoin.parent import UnionFind
from lance_minhash_sql.selfjoin.pool import CarriedPool, count, read_multi, row_ids, span_data
from lance_minhash_sql.selfjoin.shards import Shard, ShardData, plan_shards
from lance_minhash_sql.selfjoin.sizing import (chunk_pairs, clusters_pool, components_bytes, pairs_pool, pool_size,
                                               shard_rows, window_rows)
from lance_minhash_sql.selfjoin.verify import prepare, remaining

__all__ = ["shards_for", "prepared", "run_pairs", "group_links", "united", "run_clusters", "run_shard"]

# what the engine verifies a loaded shard with: selfjoin/verify.py's pair_verifier and
# selfjoin/links.py's link_verifier, passed by their callers and prepared here with the
# shards they will verify (verify.prepare)
PairVerifier = Callable[..., Iterator[pa.RecordBatch]]  # (shard, data, chunk, stop=None)
LinkVerifier = Callable[[Shard, ShardData], Iterator[Links]]


def shards_for(dataset, column: str, threshold: float, budget: Budget, storage_options,
               rule: LinkRule | None = None) -> list[Shard]:
    """Step 1: the key-range shards of ``column``'s index of at most
    :func:`.sizing.shard_rows` of ``budget`` band rows each, planned in the context of the
    links' ``rule`` (:func:`.links.planning`; ``None`` for pairs)."""
    with planning(rule):
        return plan_shards(dataset, column, threshold, None, storage_options, shard_rows=shard_rows(budget))


def prepared(verifier, shards: list[Shard], budget: Budget, docs: np.ndarray | None = None) -> Budget:
    """Step 2: ``verifier`` prepared for ``shards`` (``docs``: their candidate docs, when
    the caller read them already; exact verification's shingle sets' index held within
    ``budget``'s ``sets`` part); what is left of ``budget`` to verify in."""
    prepare(verifier, shards, docs, budget)
    return remaining(verifier, budget)


# --------------------------------------------------------------------------- pairs


def run_pairs(dataset, column: str, threshold: float = 0.8, *, verify: PairVerifier, most: int,
              exact: bool = False, budget: Budget, storage_options: dict | None = None
              ) -> Iterator[pa.RecordBatch]:
    """:func:`.pairs.pairs` within ``budget`` (module doc), every step in this process; the
    same pairs, in batches of at most :func:`.sizing.chunk_pairs` rows, group by group."""
    return _pair_batches(shards_for(dataset, column, threshold, budget, storage_options), budget, exact, verify, most)


def _pair_batches(shards: list[Shard], budget: Budget, exact: bool, verify: PairVerifier, most: int
                  ) -> Iterator[pa.RecordBatch]:
    p = shards[0].plan
    budget = prepared(verify, shards, budget)
    labelled, max_docs = pairs_pool(p.total_docs, p.params.num_hashes, budget, exact)
    chunk = chunk_pairs(budget, most)
    marks = new_marks(p.total_docs)
    labels = Labels(p.total_docs, p.params.rows_per_band, in_file=not labelled)
    carried = CarriedPool(p, max_docs)

    def run(items: list, load, last: bool) -> Iterator[pa.RecordBatch]:
        stop = threading.Event()
        label = not last  # (labels serve the groups after this one)

        def produce(item):
            data = load(item)
            if data is None:
                return
            if label:
                labels.label(data)
            yield from verify(item[0], data, chunk, stop)
            if exact:
                trim_heap()

        yield from run_ordered(items, produce, stop=stop, ahead=PAIRS_AHEAD)

    groups = shard_groups(shards, budget, max_docs, marks, labels.prune, labels.given)
    with bounded_heap():  # (the threads' freed buffers handed back: the module doc, 7)
        try:
            for group in groups:
                count("groups")
                last = group.shards[-1].shard is shards[-1]
                labels.hand_back()  # (a file's pages: the last group's)
                if group.alone is None:
                    yield from run(group.shards, group_loader(carried, marks), last)
                    continue
                carried.drop()
                count("streamed_shards")
                keys, gids = group.alone
                parts = [(group.shards[0].shard, r0, r1) for r0, r1 in spans(keys, window_rows(max_docs))]
                yield from run(parts, lambda sp: span_data(p, keys[sp[1]:sp[2]], gids[sp[1]:sp[2]]), last)
        finally:
            groups.close()  # its readers stop now, not when collected
            carried.drop()
            labels.close()


def run_shard(shard: Shard, budget: Budget, verify: PairVerifier, most: int, exact: bool = False
              ) -> Iterator[pa.RecordBatch]:
    """One shard's pairs within ``budget``, for callers that run shards as independent
    calls (a SQL statement, on DuckDB's threads; a Ray task): the shard's candidates pooled
    alone when they fit the pool share, else window by window (:func:`.giant.alone_pairs`);
    batches of at most :func:`.sizing.chunk_pairs` rows. Runs with the self-join's heap
    thresholds (module doc, 7)."""
    with bounded_heap():
        got = read_multi(shard)
        if got is None:
            return
        keys, gids = got
        budget = prepared(verify, [shard], budget, gids)  # (the rows of the bands just read: not read again)
        yield from alone_pairs(shard, keys, gids, pool_size(budget, shard.plan.params.num_hashes, 0, exact), verify,
                               chunk_pairs(budget, most))
        if exact:
            trim_heap()


# --------------------------------------------------------------------------- clusters


def group_links(group: ShardGroup, marks: np.ndarray, links: LinkVerifier, carried: CarriedPool
                ) -> Iterator[Links]:
    """Step 5 for clusters: links of a group's shards on threads over the pool ``carried``
    holds for them (the group's candidates: the docs set in ``marks``)."""
    load = group_loader(carried, marks)

    def produce(item: GroupShard):
        data = load(item)
        if data is not None:
            yield from links(item.shard, data)

    yield from run_ordered(group.shards, produce, ahead=LINKS_AHEAD)


def united(total: int, budget: Budget, linked: Callable[[UnionFind], Iterable[Iterable[tuple]]],
           marks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Step 6: ``(members, roots)`` of the components of the links ``linked(components)``
    gives, group after group, as ``(a, b)`` arrays of global docs; ``components`` is the
    union-find of the ``total`` docs within ``budget`` they are united in (which the
    caller may prune by). ``marks``: a cleared bit set of the docs to sweep the members
    with (default a new one)."""
    components = UnionFind(total, budget)
    groups = linked(components)
    try:
        try:
            for group in groups:
                for a, b in group:
                    components.union(a, b)
        finally:
            close = getattr(groups, "close", None)
            close is None or close()
        return components.members(new_marks(total) if marks is None else marks)
    finally:
        components.close()


def run_clusters(dataset, column: str, threshold: float = 0.8, *, links: LinkVerifier, max_reps: int,
                 budget: Budget, storage_options: dict | None = None, progress: bool = False) -> pa.Table:
    """:func:`.clusters.clusters` within ``budget`` (module doc), every step in this
    process: the same table. ``max_reps=0``: ``links`` links pairs, not representatives
    (exact verification), so a bucket larger than a window is read whole, as pairs read it.
    ``progress``: a bar of the shards linked."""
    shards = shards_for(dataset, column, threshold, budget, storage_options)
    p = shards[0].plan
    total, k = p.total_docs, p.params.num_hashes
    clusters_pool(total, k, budget, p.opened.uri)
    budget = prepared(links, shards, budget)
    max_docs = pool_size(budget, k, components_bytes(total, budget))
    bar = progress_bar(progress, len(shards), "clusters", unit="shards", scale=False)
    marks = new_marks(total)

    def linked(components: UnionFind) -> Iterator[Iterator[Links]]:
        carried = CarriedPool(p, max_docs)
        groups = shard_groups(shards, budget, max_docs, marks, components.prune)
        try:
            for group in groups:
                count("groups")
                if group.alone is None:
                    yield group_links(group, marks, links, carried)
                else:
                    carried.drop()
                    yield alone_links(group.shards[0].shard, *group.alone, max_docs, links, max_reps)
                if bar is not None:  # the shards up to the group's last are linked (empty ones are skipped)
                    bar.update(group.shards[-1].shard.index + 1 - bar.n)
        finally:
            groups.close()
            carried.drop()  # (the pool's buffer is not held beside the members' arrays)

    with bounded_heap():  # (the threads' freed buffers handed back: the module doc, 7)
        try:
            members, roots = united(total, budget, linked, marks)
            if bar is not None:
                bar.update(len(shards) - bar.n)
        finally:
            if bar is not None:
                bar.close()
        del marks
        trim_heap()  # (the pool's and the links' buffers, freed in the heap's middle, handed back)
        rowid = row_ids(p, members.astype(np.uint32), window_rows(max_docs))
        del members
        return clusters_table(roots, rowid)
