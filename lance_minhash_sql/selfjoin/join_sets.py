"""The shingle sets of the cross-dataset join's exact verification (``verify="exact"``,
:mod:`.join_shards`): the self-join's one verification step over two datasets.

A join's candidate pair is a left row and a right row; exact verification checks it as
the self-join checks its pairs (``selfjoin/verify.py``): candidates whose estimate reaches
:func:`lance_minhash_sql.core.banding.exact_candidate_floor` are kept iff
:func:`.verify.exact_kept` (the kernel
:func:`lance_minhash_sql.kernels.similarity.jaccard_at_least_between`: sizes, bucket counts,
then the merge) finds their exact Jaccard at the threshold. What differs is only where
the sets come from:

* :class:`JoinSets` holds a :class:`.shingles.ShingleSets` per side, each keyed by its
  dataset's row ids, its rows' texts tokenized with the right index's tokenizer and
  shingle size (the left rows are signed with the same parameters);
* before any pair is verified, every live row of each side that shares a band key with a
  row of the other in the shards to run (the rows of every candidate pair they can give:
  :func:`.join_shards.candidate_rows`) is fetched in row-id order, in sequential runs,
  and shingled, once (:meth:`JoinSets.fetch`); a row of several bands, shards and chunks
  of pairs is not fetched again;
* the sets' index in memory (:data:`.shingles.INDEX_BYTES` a row) and what Lance's
  reader keeps are taken from the join's ``memory_limit`` before its pairs are verified
  (:meth:`JoinSets.budget_bytes`, :meth:`lance_minhash_sql.core.budget.Budget.less`), as in the self-join;
* a SQL statement runs a join's shards as independent calls (one per ``UNION ALL``
  branch): :class:`SharedJoinSets` gives the calls of one plan one :class:`JoinSets`,
  fetched at the first call for all the shards, closed once every shard has run and no
  call runs (a statement run again fetches again).
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from lance_minhash_sql.core.arrays import readonly, sorted_unique
from lance_minhash_sql.core.tuning import TEXT_READER_BYTES
from lance_minhash_sql.selfjoin.shingles import STATS, ShingleSets, Snapshot

__all__ = ["JoinSets", "SharedJoinSets"]


class JoinSets:
    """The shingle sets of a join's candidate rows: ``left`` and ``right`` are the join's
    sides (``ds``, ``uri``, ``column`` and ``params`` read), each with a
    :class:`ShingleSets` of its own. Call :meth:`close` when done."""

    def __init__(self, left, right):
        self.left = ShingleSets(left)
        self.right = ShingleSets(right)

    def fetch(self, left_rows: np.ndarray, right_rows: np.ndarray) -> None:
        """Fetch and shingle, in row-id order, the sorted unique row ids of each side not
        held yet."""
        self.left.fetch_rows(left_rows)
        self.right.fetch_rows(right_rows)

    def positioned(self, rowids: np.ndarray, nl: int, ldocs: np.ndarray, rdocs: np.ndarray
                   ) -> tuple[np.ndarray, Snapshot, Snapshot]:
        """A shard's pool ``rowids`` (its ``nl`` left rows first, then its right rows) with
        the rows that ``ldocs`` and ``rdocs`` reference replaced by their positions in the
        returned snapshots of the left and right sets (the rows not held fetched first),
        so the join's kernel writes positions; rows referenced by neither (deleted ones)
        get position 0."""
        used_l = sorted_unique(ldocs).astype(np.int64)
        used_r = sorted_unique(rdocs).astype(np.int64)
        STATS.add("asked_rows", used_l.size + used_r.size)
        lsnap, lpos = self.left.placed(rowids[used_l])
        rsnap, rpos = self.right.placed(rowids[used_r])
        at = np.zeros(rowids.size, dtype=np.uint64)
        at[used_l] = lpos
        at[used_r] = rpos
        return readonly(at), lsnap, rsnap

    def budget_bytes(self) -> int:
        """What the sets take of the join's budget while its pairs are verified: both
        indexes, and what Lance's reader keeps once it took the texts."""
        return self.left.held_bytes() + self.right.held_bytes() + TEXT_READER_BYTES

    def close(self) -> None:
        self.left.close()
        self.right.close()


class SharedJoinSets:
    """One :class:`JoinSets` for the independent calls over the shards of one join plan
    (``left``, ``right``: its sides). :meth:`enter` gives it, fetching the rows of every
    shard at the first call (``rows()``: each side's candidate row ids); :meth:`leave`
    closes it once every one of the ``num_shards`` shards ran to its end and no call
    runs. A plan whose calls never all finish (a statement stopped by a ``LIMIT``) keeps
    its sets for its next statement, until the plan is let go."""

    def __init__(self, left, right, num_shards: int):
        self.left, self.right, self.num_shards = left, right, num_shards
        self.lock = threading.Lock()
        self.sets: JoinSets | None = None
        self.running = 0
        self.done: set[int] = set()

    def enter(self, rows: Callable[[], tuple[np.ndarray, np.ndarray]]) -> JoinSets:
        with self.lock:  # (a call arriving while the first fetches waits for the sets)
            if self.sets is None:
                sets = JoinSets(self.left, self.right)
                try:
                    sets.fetch(*rows())
                except BaseException:
                    sets.close()
                    raise
                self.sets = sets
            self.running += 1
            return self.sets

    def leave(self, index: int, finished: bool) -> None:
        with self.lock:
            self.running -= 1
            if finished:
                self.done.add(index)
            if self.running == 0 and len(self.done) == self.num_shards and self.sets is not None:
                self.sets.close()
                self.sets, self.done = None, set()
