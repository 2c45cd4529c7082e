"""The self-join's memory budget and its named parts, built once from ``memory_limit``.

A :class:`Budget` of ``total`` bytes holds one byte count for each thing the self-join
keeps at once (``docs/scale.md``, *Memory of a self-join*); every consumer
takes its part from here, never a share of its own:

* while shards are linked or paired (``selfjoin/steps.py``): :attr:`~Budget.shard` (one
  shard's band rows read at once) and :attr:`~Budget.read_ahead` (:data:`READ_AHEAD` more
  read ahead of the marking pass), :attr:`~Budget.kept` (a group's band rows kept from the
  marking pass), :attr:`~Budget.pairs` (a batch of pairs) and :attr:`~Budget.pairs_ahead`
  (:data:`PAIRS_AHEAD` batches ahead of the consumer), :attr:`~Budget.pool` (the
  candidates' signatures, and what is held per index row beside them), and in a Ray
  shuffle's task :attr:`~Budget.cache` (its worker's segment cache). These are
  :data:`SELF_JOIN_PARTS`.
* inside the pool: :attr:`~Budget.parent` (the clusters' union-find and bit set held in
  memory, ``selfjoin/parent.py``), :attr:`~Budget.parent_pages` (the pages of a file-held
  union-find resident at once), :attr:`~Budget.labels` (the pairs' labels): each at most
  the pool (:data:`POOL_PARTS`).
* once the components are built and the self-join's parts let go, the star walk
  (``selfjoin/star.py``): :attr:`~Budget.star_chunk` (a chunk of members),
  :attr:`~Budget.star_centers` (the centers held in memory) and
  :attr:`~Budget.star_walked` (the walk's arrays over all its members held in memory; past
  it they are held in files): :data:`STAR_PARTS`, beside the members' index (held in
  memory within :attr:`~Budget.sets`, as below, past it in files).
* with exact verification, before the pairs or links are verified: :attr:`~Budget.sets`
  (the candidate rows' shingle-set index held in memory, ``selfjoin/shingles.py``; past it
  the index is held in files): :data:`EXACT_PARTS`.

Each part is ``floor(total * share)`` of a share of ``core/tuning.py`` (a part of the pool:
of the pool), and the shares of one phase add up to at most 1, so the parts of a phase add
up to at most ``total`` (``tests/test_budget.py`` checks both). A consumer may take a floor
of its own on top (``MIN_SHARD_ROWS``, ``MIN_CHUNK_PAIRS``, ``MIN_WINDOW_ROWS``,
``MIN_PARENT_BLOCKS``: the least it works with whatever the budget), which only small budgets
reach. With exact verification the candidate rows' shingle-set index is held first, within
:attr:`~Budget.sets`: :meth:`Budget.less` is what is left to verify in, parted the same way.

**What the budget bounds**: what a call holds while it works, not what it returns. The
pairs are returned in batches (each within :attr:`~Budget.pairs`, at most
:data:`PAIRS_AHEAD` of them ahead of the consumer); once yielded a batch is the caller's,
who keeps or drops it. A clusters or keep-flags table (``selfjoin/clusters.py``,
``selfjoin/dedup.py``) is returned whole, a row per clustered row, so it is the caller's
the same way: it is held beside the budget (its schema's few integers a row,
``index/results.py``). So are the arrays of its width it is built from: the union-find's
members and roots, then the components table's row ids and cluster ids that star's walk
reads. The steps take those over and let each go once read
(``selfjoin/clusters_table.py``, ``selfjoin/dedup.py``): beside the table being built a
few of its columns' widths are held, never a copy of each. Everything else the
clustering holds is within the parts above (the walk's arrays over its members within
:attr:`~Budget.star_walked`, past it in files).
"""

from __future__ import annotations

from dataclasses import dataclass

from lance_minhash_sql.core.params import DEFAULT_SELF_JOIN_MEMORY, MIN_SELF_JOIN_MEMORY
from lance_minhash_sql.core.sizes import parse_bytes
from lance_minhash_sql.core.tuning import (KEEP_SHARE, LABELS_SHARE, PAIR_SHARE, PAIRS_AHEAD, PARENT_SHARE, POOL_SHARE,
                                           READ_AHEAD, SETS_SHARE, SHARD_SHARE, SHUFFLE_CACHE_SHARE,
                                           PARENT_PAGES_SHARE, STAR_CENTERS_SHARE, STAR_CHUNK_SHARE,
                                           STAR_WALKED_SHARE)

__all__ = ["memory_limit_bytes", "Budget", "SELF_JOIN_PARTS", "POOL_PARTS", "STAR_PARTS", "EXACT_PARTS"]


def memory_limit_bytes(memory_limit) -> int:
    """The self-join's budget in bytes: ``memory_limit`` (the byte-size rule of
    :mod:`lance_minhash_sql.core.sizes`, at least :data:`MIN_SELF_JOIN_MEMORY`), else
    :data:`DEFAULT_SELF_JOIN_MEMORY`."""
    if memory_limit is None:
        return DEFAULT_SELF_JOIN_MEMORY
    return parse_bytes(memory_limit, "memory_limit", minimum=MIN_SELF_JOIN_MEMORY)


SELF_JOIN_PARTS = ("shard", "read_ahead", "kept", "pairs", "pairs_ahead", "pool", "cache")
POOL_PARTS = ("parent", "parent_pages", "labels")
STAR_PARTS = ("star_chunk", "star_centers", "star_walked")
EXACT_PARTS = ("sets",)


@dataclass(frozen=True)
class Budget:
    """``total`` bytes and its parts (module doc); build it with :meth:`of`."""

    total: int
    shard: int
    read_ahead: int
    kept: int
    pairs: int
    pairs_ahead: int
    pool: int
    cache: int
    parent: int
    parent_pages: int
    labels: int
    star_chunk: int
    star_centers: int
    star_walked: int
    sets: int

    @classmethod
    def parse(cls, memory_limit) -> Budget:
        """The budget of ``memory_limit`` (:func:`memory_limit_bytes`): what an entry builds
        once from its argument and passes down."""
        return cls.of(memory_limit_bytes(memory_limit))

    @classmethod
    def or_default(cls, budget: Budget | None) -> Budget:
        """``budget``, or the default budget where none was given (a join's ``None``: no
        ``memory_limit``, so only the segment cache bounds its left rows signed in memory)."""
        return cls.parse(None) if budget is None else budget

    @classmethod
    def of(cls, total: int) -> Budget:
        """The parts of a budget of ``total`` bytes."""
        total = int(total)
        shard, pairs, pool = int(total * SHARD_SHARE), int(total * PAIR_SHARE), int(total * POOL_SHARE)
        return cls(total=total, shard=shard, read_ahead=READ_AHEAD * shard, kept=int(total * KEEP_SHARE),
                   pairs=pairs, pairs_ahead=PAIRS_AHEAD * pairs, pool=pool, cache=int(total * SHUFFLE_CACHE_SHARE),
                   parent=int(pool * PARENT_SHARE), parent_pages=int(pool * PARENT_PAGES_SHARE),
                   labels=int(pool * LABELS_SHARE), star_chunk=int(total * STAR_CHUNK_SHARE),
                   star_centers=int(total * STAR_CENTERS_SHARE), star_walked=int(total * STAR_WALKED_SHARE),
                   sets=int(total * SETS_SHARE))

    def less(self, held: int) -> Budget:
        """What is left to verify in once ``held`` bytes are held beside (exact
        verification's shingle sets, their ``budget_bytes()``): at least half of it."""
        return Budget.of(max(self.total // 2, self.total - held))
