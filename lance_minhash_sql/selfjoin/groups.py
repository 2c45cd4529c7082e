"""Consecutive shards grouped over one pool of their candidates' signatures, the buckets
that can give nothing new pruned first (``docs/scale.md``, *Time under a budget*).

A first pass over consecutive shards marks their candidate docs in a bit set of all docs
(one bit a row) while the distinct candidates fit a pool (:func:`.sizing.pool_rows`).
Before a shard is marked, the buckets that can give nothing new are dropped
(:mod:`lance_minhash_sql.kernels.prune`): for clusters those already one component of the
links found so far (:meth:`.parent.UnionFind.prune`), for pairs those whose docs all carry
one *label* (:class:`Labels`: a bucket of an earlier band with equal values, labelled
while it was verified). Shards come in key order, so band after band, and a
near-duplicate's later bands mostly repeat its first: pruning drops most of the later
bands' candidate rows, and a group's pool holds several bands' candidates. A group's
shards are then loaded over its pool (:func:`group_loader`), each shard's docs located
in the pool by their rank in the bit set.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterator, NamedTuple

import numpy as np

from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.tuning import READ_AHEAD, READ_ROW_BYTES
from lance_minhash_sql.kernels.components import count_unmarked, marked_ids, ranks, set_marks
from lance_minhash_sql.io.file_arrays import FileArray
from lance_minhash_sql.kernels.prune import drop_labelled, label_pure, marked_buckets
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.selfjoin.pool import CarriedPool, count, read_multi
from lance_minhash_sql.selfjoin.shards import Shard, ShardData
from lance_minhash_sql.selfjoin.sizing import keep_rows, shard_rows

__all__ = ["Prune", "GroupShard", "ShardGroup", "shard_groups", "unpruned", "Labels", "group_loader"]

Prune = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]  # (keys, gids) -> kept (keys, gids)


def unpruned(keys: np.ndarray, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The :data:`Prune` that drops nothing."""
    return keys, gids


def _read_bytes(read: tuple) -> int:
    return read[2][0].size * READ_ROW_BYTES


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


def shard_groups(shards: list[Shard], budget: Budget, max_docs: int, marks: np.ndarray, prune: Prune = unpruned,
                 stamp: Callable[[], int] | None = None) -> Iterator[ShardGroup]:
    """Consecutive shards in groups whose distinct candidates number at most ``max_docs``,
    yielded as a :class:`ShardGroup` of no ``alone`` with exactly their candidates set
    in ``marks`` (cleared when the consumer asks for the next group): a shard's rows as
    read, less the buckets ``prune`` drops, are kept while the group's kept rows number at
    most :func:`.sizing.keep_rows` (else None: read again, and only the buckets whose docs
    are all marked verified). A shard alone over ``max_docs`` is yielded as a group of that
    shard with ``alone`` its rows as pruned. ``prune`` runs here, once the
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


class Labels:
    """The pairs' labels of docs (:mod:`lance_minhash_sql.kernels.prune`): set while a
    group's buckets are verified (on its threads, each bucket its own label), read when
    the next groups' shards are read (:meth:`prune`), maybe while a group still sets its
    own: a label is one aligned store and names one bucket, so docs that all show one
    label were all given it by that bucket, whatever is still being written. Labels are
    ``uint32``; once they run out, no more are given (those given stay true) and pruning
    only fades. ``in_file``: held in a temporary file, memory-mapped (labels past the
    budget's ``labels`` part, ``selfjoin/sizing.py: pairs_pool``), whose pages
    :meth:`hand_back` gives back after each group; :meth:`close` removes it."""

    def __init__(self, total_docs: int, rows_per_band: int, in_file: bool = False):
        self.file = FileArray(total_docs, np.uint32) if in_file else None
        self.values = np.zeros(total_docs, dtype=np.uint32) if self.file is None else self.file.array
        if in_file:
            count("labels_in_file")
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

    def hand_back(self) -> None:
        """The file's touched pages back to the OS (its data stays in the file; nothing
        in memory)."""
        if self.file is not None:
            self.file.hand_back()

    def close(self) -> None:
        if self.file is not None:
            self.values = None
            self.file.close()


def group_loader(carried: CarriedPool, marks: np.ndarray) -> Callable[[GroupShard], ShardData | None]:
    """A function loading one shard of the group over the group's pool (its candidates:
    the docs set in ``marks``), filled here."""
    ugids, prefix = marked_ids(marks)
    rows = carried.fill(ugids)

    def load(item: GroupShard) -> ShardData | None:
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
