"""The shingle sets of exact verification: each candidate row fetched and shingled once per
self-join, its set kept on disk.

Exact verification (``verify="exact"``) needs the shingle sets of the rows of every
candidate pair it checks. A row is a candidate in many pairs, in several bands (so several
shards) and several chunks of pairs. :class:`ShingleSets` serves them for the whole
self-join:

* before the pairs are verified, :meth:`ShingleSets.prefetch` reads the shards' buckets
  once and fetches every live row that shares a bucket with another (the rows of every
  candidate pair the shards can give, :func:`candidate_rows`) in row-id order, in
  sequential runs: one Lance take per :data:`SHINGLE_FETCH_ROWS` ascending row ids,
  shingled on threads (:meth:`lance_minhash_sql.index.sign.Signer.shingle_sets`: sorted
  distinct XXH64 hashes per row) while the next take runs. Rows taken in scattered
  chunks of pairs would read a page of the text column for each few rows;
* a row asked for and not held (a caller that did not prefetch) is fetched the same way
  with its chunk's other missing rows;
* their hashes are appended to an unnamed temporary file read back through a memory map
  (:class:`lance_minhash_sql.io.spilled.AppendedValues`): file pages, never anonymous
  memory, so nothing is dropped and fetched again when the sets outgrow the budget;
* what is held in memory is the index, 24 bytes per row seen: its row id and where its
  set starts and ends in the file, sorted by row id (a chunk's new rows merged in).

Shards run on threads: a chunk's missing rows are fetched and merged under a lock (the
fetch and the shingling use their own threads); the sets are then read from the
snapshot the lock handed out, without it.
"""

from __future__ import annotations

import threading

import numpy as np

from lance_minhash_sql.core.arrays import readonly, sorted_unique
from lance_minhash_sql.core.tuning import FETCH_ROWS, SHINGLE_FETCH_ROWS
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.spilled import AppendedValues
from lance_minhash_sql.io.takes import take_rows
from lance_minhash_sql.kernels.components import marked_ids, new_marks, set_marks
from lance_minhash_sql.runtime.cache import Counters
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.selfjoin.pool import read_multi, row_ids
from lance_minhash_sql.selfjoin.shards import Shard

__all__ = ["SHINGLE_FETCH_ROWS", "INDEX_BYTES", "ShingleSets", "Located", "STATS", "candidate_rows"]

STATS = Counters("exact verification's shingle sets", "fetched_rows", "prefetched_rows", "asked_rows")
INDEX_BYTES = 24  # held per row seen: row id, start and end of its set in the file


class Located:
    """Where the sets of a chunk's pairs are: row ``r``'s set is
    ``hashes[starts[r]:ends[r]]``; ``left`` and ``right`` are the pairs' rows."""

    __slots__ = ("starts", "ends", "hashes", "left", "right")

    def __init__(self, starts, ends, hashes, left, right):
        self.starts, self.ends, self.hashes, self.left, self.right = starts, ends, hashes, left, right


class ShingleSets:
    """Shingle sets of rows of ``opened`` (an :class:`lance_minhash_sql.index.opened.OpenedIndex`)
    by row id, each row fetched and shingled once (module doc). Call :meth:`close` when
    done (the file goes with the process anyway)."""

    def __init__(self, opened):
        self.opened = opened
        self.signer = signer_for(opened.params)
        # (ids, starts, ends): replaced whole under the lock, read whole without it
        self.index = (np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
        self.values = AppendedValues(np.uint64)
        self.lock = threading.Lock()

    def locate(self, left: np.ndarray, right: np.ndarray) -> Located:
        """The sets of the rows of pairs ``(left[i], right[i])`` (row ids), fetching the
        rows not held (none once :meth:`prefetch` read the pairs' shards)."""
        left = np.asarray(left, dtype=np.uint64)
        right = np.asarray(right, dtype=np.uint64)
        STATS.add("asked_rows", left.size + right.size)
        (ids, starts, ends), hashes = self.index, self.values.view()  # (the index first: the file holds its sets)
        ia, ib = _positions(ids, left), _positions(ids, right)
        if ia is None or ib is None:
            want = sorted_unique(np.concatenate((left, right)))
            with self.lock:
                missing = want[~_held(self.index[0], want)]
                if missing.size:
                    STATS.add("fetched_rows", missing.size)
                    self._fetch(missing)
                (ids, starts, ends), hashes = self.index, self.values.view()
            ia, ib = np.searchsorted(ids, left), np.searchsorted(ids, right)
        return Located(starts, ends, hashes, readonly(ia), readonly(ib))

    def prefetch(self, shards: list[Shard]) -> None:
        """Fetch and shingle, in row-id order, every live row of the candidate pairs
        ``shards`` can give (:func:`candidate_rows`) not held yet."""
        if not shards:
            return
        rows = candidate_rows(shards)
        with self.lock:
            missing = rows[~_held(self.index[0], rows)]
            STATS.add("prefetched_rows", missing.size)
            self._fetch(missing)

    def _fetch(self, missing: np.ndarray) -> None:
        """Fetch, shingle and append the sorted rows ``missing`` (the next take running
        while a batch is shingled); merge them into the index."""
        column = self.opened.column
        starts = np.empty(missing.size, dtype=np.int64)
        ends = np.empty(missing.size, dtype=np.int64)
        batches = list(range(0, missing.size, SHINGLE_FETCH_ROWS))

        def take(s: int):
            rows = missing[s:s + SHINGLE_FETCH_ROWS]
            texts = take_rows(self.opened.ds, rows, [column], "the exact verification", self.opened.uri)
            yield s, texts.column(column).combine_chunks()

        for s, texts in run_ordered(batches, take, workers=2, ahead=1):
            offsets, hashes = self.signer.shingle_sets(texts)
            del texts
            first = self.values.append(hashes)
            starts[s:s + offsets.size - 1] = first + offsets[:-1]
            ends[s:s + offsets.size - 1] = first + offsets[1:]
        ids, old_starts, old_ends = self.index
        at = np.searchsorted(ids, missing)
        self.index = (readonly(np.insert(ids, at, missing)), readonly(np.insert(old_starts, at, starts)),
                      readonly(np.insert(old_ends, at, ends)))

    def held_bytes(self) -> int:
        """The bytes of the index in memory (the sets themselves are file pages)."""
        return sum(a.nbytes for a in self.index)

    def close(self) -> None:
        self.values.close()


def _positions(ids: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """The positions of ``rows`` in sorted ``ids``; None when one is not there."""
    at = np.searchsorted(ids, rows)
    if at.size and (at.max() >= ids.size or not np.array_equal(ids[at], rows)):
        return None
    return at


def _held(ids: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Which of sorted ``want`` are in sorted ``ids``."""
    at = np.searchsorted(ids, want)
    hit = at < ids.size
    hit[hit] = ids[at[hit]] == want[hit]
    return hit


def candidate_rows(shards: list[Shard]) -> np.ndarray:
    """Ascending row ids of the live rows that share a bucket with another row in
    ``shards``: every row of a candidate pair they can give. Each shard's buckets read
    once (the next read while one is marked), marked in a bit set of the index's docs."""
    plan = shards[0].plan
    marks = new_marks(plan.total_docs)

    def read(shard: Shard):
        got = read_multi(shard)
        if got is not None:
            yield sorted_unique(got[1])

    for gids in run_ordered(shards, read):
        set_marks(marks, gids, True)
    gids, _ = marked_ids(marks)
    del marks
    rows = row_ids(plan, gids, FETCH_ROWS)
    rows = rows[plan.opened.liveness.alive(rows)] if rows.size else rows
    return sorted_unique(rows)
