"""The self-join under a memory budget: pairs and clusters whose memory is bounded by
``memory_limit``, not by the index (``docs/scale.md``, *The self-join under a memory budget*).

The answers are those of :mod:`.pairs` and :mod:`.clusters` (same buckets, same
verification, same rules); only what is held at once changes:

1. **Shards** are key ranges of at most :func:`shard_rows` band rows (the budget's
   ``shard`` part, :class:`lance_minhash_sql.core.budget.Budget`, at 12 bytes a row, at most
   :data:`.shards.SHARD_BAND_ROWS`). A shard's key range is
   read straight from every run (a segment's ``bands.lance`` is sorted by key:
   page-table search, one read of the pages, the mapped pages handed back), merged, and
   only the rows of buckets of two rows or more are kept.
2. **Groups.** A first pass over consecutive shards marks their candidate docs in a bit
   set of all docs (one bit a row) while the distinct candidates' signatures (``2 k +
   12`` bytes each) fit the budget's ``pool`` part (less what is held per row:
   :func:`fixed_bytes`). Before a shard is marked, the buckets that
   can give nothing new are dropped (:mod:`lance_minhash_sql.kernels.prune`): for
   clusters those already one component of the links found so far, for pairs those
   whose docs all carry one *label* (a bucket of an earlier band with equal values,
   labelled while it was verified). Shards come in key order, so band after band, and a
   near-duplicate's later bands mostly repeat its first: pruning drops most of the later
   bands' candidate rows, and a group's pool holds several bands' candidates
   (``docs/scale.md``, *Time under a budget*).
3. **Signatures** of a group's candidates are read once, in doc order, into one buffer
   for all groups (:class:`.pool.CarriedPool`): the rows of the group before whose docs
   this group holds too are kept, only the others fetched.
4. **Verification**: the group's shards (the rows of the marking pass while they fit
   :func:`keep_rows`, else read again) are verified on threads
   (:func:`.verify.data_pairs`, :func:`.links.data_links`), each shard's docs located
   in the pool by their rank in the bit set; then the next group is marked (its first
   shards already read, and for pairs pruned, on the other threads meanwhile).
5. **A shard alone over the pool** (a giant bucket: one text repeated millions of
   times) is taken in windows of consecutive buckets, each fetching only its own docs; a
   single bucket larger than a window is linked in chunks of rows in row-id order, the
   bucket's representatives (at most :data:`.links.MAX_REPS` signatures) carried from
   chunk to chunk in front of the next chunk's rows. Re-verifying the carried
   representatives against each other reproduces them exactly (each became one by
   failing the representatives before it), so the links are those of the whole bucket.
   Pairs of such a bucket are ``m (m - 1) / 2`` and need every row at once: a pairs
   bucket larger than a window is read whole.
6. **Components** (clusters, :mod:`.parent`): a union-find over the global doc ids in one
   ``int32`` array (4 bytes a row; a union keeps the smaller root, so a root is its
   component's smallest doc), flattened in place; then the members (docs of a component
   of two or more) get their row ids, in doc order, and the cluster id (smallest row id).
   The array is held in memory while it and the bit set take at most the budget's
   ``parent`` part; past that it lives in a temporary file, memory-mapped, whose touched
   pages are handed back to the OS whenever they may reach its ``parent_pages`` part (the unions, the
   pruning and the flattening metered in blocks, the members' sweeps in spans): what
   clusters hold per row whatever the index is then the bit set, a bit a row.
7. **The heap** keeps a build's glibc thresholds while the self-join runs
   (:func:`lance_minhash_sql.runtime.memory.bounded_heap`): buffers of a few MiB and more
   are mapped on their own, and a heap's free top goes back at once, so the arenas of the
   verifying and reading threads do not keep the buffers of shards they are done with.

What the fetch costs: a doc is read once per group whose shards hold it as a candidate
after pruning. Without pruning, a group smaller than a band's candidates would read each
candidate about once per band it is a candidate in; with it, the groups are few
(``docs/scale.md``, *Time under a budget*, has the benchmark's counts).

:data:`.pool.STATS` records the most signature rows any one read held (tests check that a
giant bucket is never held whole).
"""

from __future__ import annotations

import threading
from typing import Callable, Iterator, NamedTuple

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import ResourceLimitError
from lance_minhash_sql.core.sizes import format_bytes
from lance_minhash_sql.core.tuning import (GIANT_LINKS, LINKS_AHEAD, MIN_CHUNK_PAIRS, MIN_SHARD_ROWS, MIN_WINDOW_ROWS,
                                           PAIRS_AHEAD, POOL_SHARE, READ_AHEAD, READ_ROW_BYTES, SHARD_BAND_ROWS)
from lance_minhash_sql.index.results import CLUSTERS_SCHEMA
from lance_minhash_sql.kernels.components import count_unmarked, marked_ids, new_marks, ranks, set_marks
from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.kernels.bucket_pairs import (bucket_bounds, link_chunk, min_matches, new_bucket_cursor,
                                                    padded_hashes, windows)
from lance_minhash_sql.kernels.prune import drop_labelled, label_pure, marked_buckets
from lance_minhash_sql.runtime.memory import bounded_heap, trim_heap
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.runtime.progress import progress_bar
from lance_minhash_sql.selfjoin.parent import BLOCK_BYTES, MIN_BLOCKS, UnionFind, parent_share
from lance_minhash_sql.selfjoin.pool import (count, fetch_signatures, held, read_multi, row_ids,
                                             span_data, CarriedPool)
from lance_minhash_sql.selfjoin.shards import EMPTY_SLOT, Plan, Shard, ShardData, plan_shards
from lance_minhash_sql.selfjoin.links import Links
from lance_minhash_sql.selfjoin.verify import prepare, remaining

__all__ = ["shard_rows", "pairs_pool", "chunk_pairs", "pool_rows", "components_bytes",
           "bounded_pairs", "bounded_clusters", "clusters_table", "bounded_shard_pairs", "shard_links",
           "shard_groups", "GroupShard", "ShardGroup"]

# what the engine verifies a loaded shard with: selfjoin/verify.py's pair_verifier and
# selfjoin/links.py's link_verifier, passed by their callers and prepared here with the
# shards they will verify (verify.prepare)
PairVerifier = Callable[..., Iterator[pa.RecordBatch]]  # (shard, data, chunk, stop=None)
LinkVerifier = Callable[[Shard, ShardData], Iterator[Links]]
Prune = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]  # (keys, gids) -> kept (keys, gids)


def shard_rows(budget: Budget) -> int:
    """Band rows per shard: the budget's ``shard`` part (at least :data:`MIN_SHARD_ROWS`)."""
    return int(min(SHARD_BAND_ROWS, max(MIN_SHARD_ROWS, budget.shard // READ_ROW_BYTES)))


def chunk_pairs(budget: Budget, most: int) -> int:
    """Pairs per record batch: the budget's ``pairs`` part (at least
    :data:`MIN_CHUNK_PAIRS`), at most ``most``."""
    return int(min(most, max(MIN_CHUNK_PAIRS, budget.pairs // 24)))


# --------------------------------------------------------------------------- groups


def keep_rows(budget: Budget) -> int:
    """Band rows of a group kept from the marking pass: the budget's ``kept`` part at 12
    bytes a row; the group's other shards are read again."""
    return budget.kept // READ_ROW_BYTES


def pool_rows(budget: Budget, k: int, fixed: int = 0) -> int:
    """Candidates a group's pool holds: the budget's ``pool`` part, ``fixed`` bytes of it
    held elsewhere; signature, row id and doc id of each."""
    return int((budget.pool - fixed) // (2 * k + 12))


def _read_bytes(read: tuple) -> int:
    return read[2][0].size * READ_ROW_BYTES


def _unpruned(keys: np.ndarray, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return keys, gids


class GroupShard(NamedTuple):
    """A shard of a group, and its band rows ``(keys, gids)`` kept from the marking pass,
    or None: read again when verified."""

    shard: Shard
    rows: tuple | None


class ShardGroup(NamedTuple):
    """What :func:`shard_groups` yields: consecutive ``shards`` verified over one pool;
    or, with ``alone`` (its band rows ``(keys, gids)`` as pruned), one shard whose
    candidates exceed a pool, taken alone window by window."""

    shards: list[GroupShard]
    alone: tuple | None = None


def shard_groups(shards: list[Shard], budget: Budget, max_docs: int, marks: np.ndarray, prune: Prune = _unpruned,
                 stamp: Callable[[], int] | None = None) -> Iterator[ShardGroup]:
    """Consecutive shards in groups whose distinct candidates number at most ``max_docs``,
    yielded as a :class:`ShardGroup` of no ``alone`` with exactly their candidates set
    in ``marks`` (cleared when the consumer asks for the next group): a shard's rows as
    read, less the buckets ``prune`` drops, are kept while the group's kept rows number at
    most :func:`keep_rows` (else None: read again, and only the buckets whose docs are all
    marked verified). A shard alone over ``max_docs`` is yielded as a group of that shard
    with ``alone`` its rows as pruned. ``prune`` runs here, once the
    groups before are verified; with ``stamp`` (a count that changes when what ``prune``
    drops may grow) it may run on the reading threads too, while a group is still
    verified, and runs here again only when the stamp moved since."""
    group: list = []
    distinct = kept = 0
    keep_most = keep_rows(budget)

    def read(shard: Shard):
        got = read_multi(shard)
        if got is None:
            return
        rows = got[0].size
        if stamp is None:
            yield shard, rows, got, None, None
            return
        was = stamp()
        got = prune(*got)
        yield shard, rows, got, sorted_unique(got[1]), was

    # the next shards read while this one is marked, or the group before verified: at most
    # READ_AHEAD shards' worth of band rows held ahead
    reads = run_ordered(shards, read, ahead=READ_AHEAD * shard_rows(budget) * READ_ROW_BYTES, weight=_read_bytes)
    for shard, rows, got, u, was in reads:
        if u is None or stamp() != was:
            got, u = prune(*got), None
        count("pruned_rows", rows - got[0].size)
        if got[0].size == 0:
            continue
        u = sorted_unique(got[1]) if u is None else u
        new = count_unmarked(marks, u)
        if group and distinct + new > max_docs:
            yield ShardGroup(group)
            marks.fill(0)
            group, distinct, kept, new = [], 0, 0, u.size
        if u.size > max_docs:
            yield ShardGroup([GroupShard(shard, None)], got)
            continue
        set_marks(marks, u, True)
        keep = kept + got[0].size <= keep_most
        group.append(GroupShard(shard, got if keep else None))
        kept += got[0].size if keep else 0
        distinct += new
        del got, u
    if group:
        yield ShardGroup(group)
        marks.fill(0)


def _linked_pruning(components: UnionFind) -> Prune:
    """The clusters' pruning: buckets already one component of the links found so far
    dropped (:meth:`.parent.UnionFind.prune`)."""
    return components.prune


def fixed_bytes(total_docs: int, per_doc: int) -> int:
    """What the self-join holds per index row whatever the budget: ``per_doc`` bytes (the
    clusters' union-find, the pairs' labels) and the candidates' bit set."""
    return total_docs * per_doc + (total_docs + 7) // 8


class Labels:
    """The pairs' labels of docs (:mod:`lance_minhash_sql.kernels.prune`): set while a
    group's buckets are verified (on its threads, each bucket its own label), read when
    the next groups' shards are read (:meth:`prune`), maybe while a group still sets its
    own: a label is one aligned store and names one bucket, so docs that all show one
    label were all given it by that bucket, whatever is still being written. Labels are
    ``uint32``; once they run out, no more are given (those given stay true) and pruning
    only fades."""

    def __init__(self, total_docs: int, rows_per_band: int):
        self.values = np.zeros(total_docs, dtype=np.uint32)
        self.rows_per_band = rows_per_band
        self.next = 1
        self.lock = threading.Lock()

    def label(self, data: ShardData) -> None:
        """Label the pure buckets of a shard (or a window) loaded over its pool."""
        with self.lock:
            base = self.next
            if base + data.starts.size >= 2**32:
                return
            self.next += data.starts.size
        label_pure(data.keys, data.docs, data.starts, data.ends, data.sigs, data.gids, self.rows_per_band,
                   self.values, base)

    def given(self) -> int:
        """Labels given so far (a stamp: more labels may prune more)."""
        return self.next

    def prune(self, keys: np.ndarray, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.next == 1:  # no label given yet (the first group): nothing to drop
            return keys, gids
        return drop_labelled(keys, gids, self.values)


def _group_data(carried: CarriedPool, marks: np.ndarray):
    """A function loading one shard of the group over the group's pool (its candidates:
    the docs set in ``marks``), filled here."""
    ugids, prefix = marked_ids(marks)
    rows = carried.fill(ugids)

    def load(item) -> ShardData | None:
        shard, got = item
        if got is None:
            got = read_multi(shard)
            if got is None:
                return None
            got = marked_buckets(*got, marks)  # the buckets pruned when marked are gone or harmless
        keys, gids = got
        if keys.size == 0:
            return None
        return carried.data(keys, rows[ranks(marks, prefix, gids)])

    return load


def _window_rows(max_docs: int) -> int:
    return max(MIN_WINDOW_ROWS, max_docs // 2)


def _spans(keys: np.ndarray, max_rows: int):
    """``(r0, r1)`` row spans of consecutive buckets of at most ``max_rows`` rows (a larger
    bucket alone)."""
    starts, ends = bucket_bounds(readonly(keys))
    for b0, b1 in windows(starts, ends, max_rows):
        yield int(starts[b0]), int(ends[b1 - 1])


# --------------------------------------------------------------------------- pairs


def _plan(dataset, column, threshold, budget, storage_options) -> list[Shard]:
    return plan_shards(dataset, column, threshold, None, storage_options, shard_rows=shard_rows(budget))


def bounded_pairs(dataset, column: str, threshold: float = 0.8, *, verify: PairVerifier, most: int,
                  exact: bool = False, budget: Budget, storage_options: dict | None = None
                  ) -> Iterator[pa.RecordBatch]:
    """:func:`.pairs.pairs` within ``budget`` (see the module doc); the same pairs, in
    batches of at most :func:`chunk_pairs` rows, group by group."""
    shards = _plan(dataset, column, threshold, budget, storage_options)
    return _pair_batches(shards, budget, exact, verify, most)


def pairs_pool(total_docs: int, k: int, budget: Budget) -> tuple[bool, int]:
    """``(labelled, rows)`` of the pairs' self-join within ``budget``: whether it keeps the
    labels (4 bytes a row, while they fit the budget's ``labels`` part of the pool), and the
    candidates a group's pool holds beside them."""
    labelled = fixed_bytes(total_docs, 4) <= budget.labels
    return labelled, max(MIN_WINDOW_ROWS, pool_rows(budget, k, fixed_bytes(total_docs, 4 if labelled else 0)))


def _pair_batches(shards: list[Shard], budget: Budget, exact: bool, verify: PairVerifier, most: int
                  ) -> Iterator[pa.RecordBatch]:
    plan = shards[0].plan
    prepare(verify, shards)
    budget = remaining(verify, budget)
    labelled, max_docs = pairs_pool(plan.total_docs, plan.params.num_hashes, budget)
    chunk = chunk_pairs(budget, most)
    marks = new_marks(plan.total_docs)
    labels = Labels(plan.total_docs, plan.params.rows_per_band) if labelled else None
    carried = CarriedPool(plan, max_docs)

    def run(items: list, load, last: bool) -> Iterator[pa.RecordBatch]:
        stop = threading.Event()
        label = labels is not None and not last  # (labels serve the groups after this one)

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

    groups = shard_groups(shards, budget, max_docs, marks, _unpruned if labels is None else labels.prune,
                     None if labels is None else labels.given)
    with bounded_heap():  # (the threads' freed buffers handed back: the module doc, 7)
        try:
            for group in groups:
                count("groups")
                last = group.shards[-1].shard is shards[-1]
                if group.alone is None:
                    yield from run(group.shards, _group_data(carried, marks), last)
                    continue
                carried.drop()
                count("streamed_shards")
                keys, gids = group.alone
                spans = [(group.shards[0].shard, r0, r1) for r0, r1 in _spans(keys, _window_rows(max_docs))]
                yield from run(spans, lambda sp: span_data(plan, keys[sp[1]:sp[2]], gids[sp[1]:sp[2]]), last)
        finally:
            groups.close()  # its readers stop now, not when collected
            carried.drop()


# --------------------------------------------------------------------------- clusters


def _giant_links(plan: Plan, shard: Shard, gids: np.ndarray, max_rows: int, max_reps: int) -> Iterator[Links]:
    """Links of one bucket of sorted ``gids`` larger than ``max_rows``, in chunks of rows
    in row-id order with the representatives carried (see the module doc, 5)."""
    k = plan.params.num_hashes
    kp = padded_hashes(k)
    rowids = row_ids(plan, gids, max_rows)
    liveness = plan.opened.liveness
    if not liveness.trivial:
        alive = liveness.alive(rowids)
        gids, rowids = gids[alive], rowids[alive]
    if gids.size < 2:
        return
    if not (rowids[1:] >= rowids[:-1]).all():
        gids = gids[np.argsort(rowids, kind="stable")]
    del rowids
    min_eq = min_matches(shard.threshold, k)
    out_a = np.empty(GIANT_LINKS, dtype=np.uint32)
    out_b = np.empty(GIANT_LINKS, dtype=np.uint32)
    rep_sigs = np.empty((0, kp), dtype=np.uint16)
    rep_gids = np.empty(0, dtype=np.int64)
    step = max_rows - max_reps
    for c0 in range(0, gids.size, step):
        part = gids[c0:c0 + step]
        order = np.argsort(part, kind="stable")
        n0 = rep_gids.size
        pool = np.zeros((n0 + part.size, kp), dtype=np.uint16)  # padding lanes 0: equal in every row
        pool[:n0] = rep_sigs
        fetched = np.empty((part.size, k), dtype=np.uint16)
        fetch_signatures(plan, part[order], fetched)
        held(n0 + part.size)
        pool[n0 + order, :k] = fetched
        del fetched
        pool_gids = np.concatenate((rep_gids, part.astype(np.int64)))
        n = pool_gids.size
        keys = readonly(np.zeros(n, dtype=np.uint64))
        docs = readonly(np.arange(n, dtype=np.uint32))
        starts = readonly(np.zeros(1, dtype=np.int64))
        ends = readonly(np.full(1, n, dtype=np.int64))
        words = readonly(pool.view(np.uint64))
        reps = np.full(max_reps, -1, dtype=np.int64)
        cursor = new_bucket_cursor()
        done = False
        while not done:
            m, done = link_chunk(keys, docs, starts, ends, words, EMPTY_SLOT, k, min_eq, max_reps, cursor, reps,
                                 out_a, out_b)
            if m:
                yield Links(pool_gids[out_a[:m]], pool_gids[out_b[:m]])
        kept = reps[reps >= 0]
        rep_sigs = pool[kept].copy()
        rep_gids = pool_gids[kept]


def shard_links(plan: Plan, group: ShardGroup, marks: np.ndarray | None, max_docs: int, links: LinkVerifier,
                 max_reps: int, carried: CarriedPool | None = None) -> Iterator[Links]:
    """Links of a group's shards on threads over the pool ``carried`` holds for them, or of
    a shard over the pool alone window by window (``carried``'s buffer let go first)."""
    if group.alone is None:
        load = _group_data(carried, marks)

        def produce(item: GroupShard):
            data = load(item)
            if data is not None:
                yield from links(item.shard, data)

        yield from run_ordered(group.shards, produce, ahead=LINKS_AHEAD)
        return
    if carried is not None:
        carried.drop()
    count("streamed_shards")
    shard, (keys, gids) = group.shards[0].shard, group.alone
    max_rows = _window_rows(max_docs)
    for r0, r1 in _spans(keys, max_rows):
        if r1 - r0 > max_rows and max_reps:  # max_reps 0: links of every pair, the bucket read whole
            yield from _giant_links(plan, shard, gids[r0:r1], max_rows, max_reps)
            continue
        data = span_data(plan, keys[r0:r1], gids[r0:r1])
        if data is not None:
            yield from links(shard, data)


def components_bytes(total_docs: int, budget: Budget) -> int:
    """What clusters hold in the pool's part of ``budget``: the candidates' bit set and the
    union-find's share (all of it, or its resident pages once in its file:
    :func:`.parent.parent_share`)."""
    return fixed_bytes(total_docs, 0) + parent_share(total_docs, budget)


def _least_limit(total_docs: int, k: int) -> int:
    """The smallest budget (to a KiB) whose pool holds :data:`MIN_WINDOW_ROWS` twice
    beside the clusters' components (their bytes only grow slower than the pool's share
    past a few hundred KiB)."""
    def fits(limit: int) -> bool:
        budget = Budget.of(limit)
        return pool_rows(budget, k, components_bytes(total_docs, budget)) >= 2 * MIN_WINDOW_ROWS

    lo, hi = 0, 1 << 20
    while not fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1024:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def bounded_clusters(dataset, column: str, threshold: float = 0.8, *, links: LinkVerifier, max_reps: int,
                     budget: Budget, storage_options: dict | None = None, progress: bool = False) -> pa.Table:
    """:func:`.clusters.clusters` within ``budget`` (see the module doc): the same
    table. ``max_reps=0``: ``links`` links pairs, not representatives (exact
    verification), so a bucket larger than a window is read whole, as pairs read it.
    ``progress``: a bar of the shards linked."""
    shards = _plan(dataset, column, threshold, budget, storage_options)
    plan = shards[0].plan
    total, k = plan.total_docs, plan.params.num_hashes
    fixed = components_bytes(total, budget)
    if pool_rows(budget, k, fixed) < 2 * MIN_WINDOW_ROWS:
        need = _least_limit(total, k)
        raise ResourceLimitError(
            f"memory_limit={format_bytes(budget.total)} is too small for the clusters of the {total:,} rows of "
            f"{plan.opened.uri!r}: their bit set of candidates (a bit a row: {format_bytes(fixed_bytes(total, 0))}) "
            f"and their union-find ({format_bytes(fixed - fixed_bytes(total, 0))}: 4 bytes a row, or once moved to "
            f"a temporary file the pages it keeps resident, at least {MIN_BLOCKS} blocks of "
            f"{format_bytes(BLOCK_BYTES)}) "
            f"leave no room for a pool of {2 * MIN_WINDOW_ROWS} signatures in the {POOL_SHARE:.1%} of memory_limit "
            f"they share; raise memory_limit to at least {format_bytes(need)}, "
            f"e.g. memory_limit := '{-(-need // 2**20)}MiB'")
    prepare(links, shards)
    budget = remaining(links, budget)
    max_docs = max(MIN_WINDOW_ROWS, pool_rows(budget, k, components_bytes(total, budget)))
    components = UnionFind(total, budget)
    bar = progress_bar(progress, len(shards), "clusters", unit="shards", scale=False)
    with bounded_heap():  # (the threads' freed buffers handed back: the module doc, 7)
        try:
            marks = new_marks(total)
            carried = CarriedPool(plan, max_docs)
            groups = shard_groups(shards, budget, max_docs, marks, _linked_pruning(components))
            try:
                for group in groups:
                    count("groups")
                    for link in shard_links(plan, group, marks, max_docs, links, max_reps, carried):
                        components.union(link.a, link.b)
                    if bar is not None:  # the shards up to the group's last are linked (empty ones are skipped)
                        bar.update(group.shards[-1].shard.index + 1 - bar.n)
            finally:
                groups.close()
                carried.drop()  # (the pool's buffer is not held beside the members' arrays)
            members, roots = components.members(marks)
            if bar is not None:
                bar.update(len(shards) - bar.n)
        finally:
            components.close()
            if bar is not None:
                bar.close()
    del marks
    return clusters_table(roots, row_ids(plan, members.astype(np.uint32), _window_rows(max_docs)))


def clusters_table(roots: np.ndarray, rowid: np.ndarray) -> pa.Table:
    """The components table (the one builder of every components clustering) of the members of clusters
    of two or more: ``roots`` names each member's cluster (any integer, e.g. the flattened
    union-find's root), ``rowid`` its row id, in any order; the ``cluster_id`` is the
    cluster's smallest row id. (Star clusters: :func:`lance_minhash_sql.selfjoin.star.star_members`.)"""
    # components are contiguous once sorted by root (a stable sort keeps the members
    # ascending within)
    order = np.argsort(roots, kind="stable")
    roots, rowid = roots[order], rowid[order]
    first = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1]))) if roots.size else np.empty(0, np.int64)
    sizes = np.diff(np.append(first, roots.size))
    cid = np.repeat(np.minimum.reduceat(rowid, first), sizes) if roots.size else np.empty(0, np.uint64)
    size = np.repeat(sizes, sizes).astype(np.int64)
    out = np.lexsort((rowid, cid))
    return pa.Table.from_arrays([pa.array(rowid[out], pa.uint64()), pa.array(cid[out], pa.uint64()),
                                 pa.array(size[out], pa.int64())], schema=CLUSTERS_SCHEMA)


# --------------------------------------------------------------------------- one shard


def bounded_shard_pairs(shard: Shard, budget: Budget, verify: PairVerifier, most: int, exact: bool = False
                        ) -> Iterator[pa.RecordBatch]:
    """One shard's pairs within ``budget``, for callers that run shards
    as independent calls (a SQL statement, on DuckDB's threads): the shard's candidates
    pooled alone when they fit the pool share, else window by window (module doc, 5);
    batches of at most :func:`chunk_pairs` rows. Runs with the self-join's heap thresholds
    (module doc, 7)."""
    with bounded_heap():
        yield from _shard_batches(shard, budget, verify, most, exact)


def _shard_batches(shard: Shard, budget: Budget, verify: PairVerifier, most: int, exact: bool
                   ) -> Iterator[pa.RecordBatch]:
    plan = shard.plan
    got = read_multi(shard)
    if got is None:
        return
    keys, gids = got
    prepare(verify, [shard], gids)  # (the rows of the bands just read: not read again)
    budget = remaining(verify, budget)
    max_docs = max(MIN_WINDOW_ROWS, pool_rows(budget, plan.params.num_hashes))
    chunk = chunk_pairs(budget, most)
    if sorted_unique(gids).size <= max_docs:
        spans = [(0, keys.size)]
    else:
        count("streamed_shards")
        spans = list(_spans(keys, _window_rows(max_docs)))
    for r0, r1 in spans:
        data = span_data(plan, keys[r0:r1], gids[r0:r1])
        if data is not None:
            yield from verify(shard, data, chunk)
    if exact:
        trim_heap()
