"""The shingle sets of exact verification: each candidate row fetched and shingled once per
self-join, its set kept on disk.

Exact verification (``verify="exact"``) needs the shingle sets of the rows of every
candidate pair it checks. A row is a candidate in many pairs, in several bands (so several
shards) and several chunks of pairs. :class:`ShingleSets` serves them for the whole
self-join:

* before the pairs are verified, :meth:`ShingleSets.prefetch` reads the shards' buckets
  once and fetches every live row that shares a bucket with another (the rows of every
  candidate pair the shards can give, :func:`candidate_rows`) in row-id order, in
  sequential runs: one Lance take per :data:`SHINGLE_FETCH_ROWS` ascending row ids
  (through a handle of the sets' own, :func:`lance_minhash_sql.io.handles.take_reader`,
  whose caches stay small and go with the sets), shingled on threads
  (:meth:`lance_minhash_sql.index.sign.Signer.shingle_sets`: sorted distinct XXH64
  hashes per row) while the next take runs. Rows taken in scattered
  chunks of pairs would read a page of the text column for each few rows;
* a row asked for and not held (a caller that did not prefetch) is fetched the same way
  with the other missing rows of its shard;
* their hashes are appended to an unnamed temporary file read back through a memory map
  (:class:`lance_minhash_sql.io.file_arrays.AppendedValues`): file pages, never anonymous
  memory, so nothing is dropped and fetched again when the sets outgrow the budget;
* what is held in memory is the index, :data:`INDEX_BYTES` per row seen: its row id,
  where its set starts and ends in the file, its signature's row (star clustering's walk
  keeps the members' signatures in a file beside) and its set's bucket counts
  (:func:`lance_minhash_sql.kernels.similarity.bucket_counts`: most candidate pairs are
  settled under the threshold by them, without reading their sets from the file), sorted
  by row id (each fetch's rows merged in). It is held in memory while it takes at most
  the self-join's budget's ``sets`` part (:class:`lance_minhash_sql.core.budget.Budget`,
  given to :meth:`ShingleSets.prefetch`); past it its columns live in temporary files,
  memory-mapped (:class:`lance_minhash_sql.io.file_arrays.FileArray`: file pages too),
  built and merged a slice of :data:`FETCH_ROWS` rows at a time. What it holds in memory
  and what Lance's reader keeps are taken from the self-join's budget before the pairs
  are verified (:meth:`ShingleSets.budget_bytes`).

Shards run on threads: rows not held are fetched and merged under a lock (the fetch and
the shingling use their own threads); a fetch replaces the index whole, so positions
taken in a snapshot of it stay valid and the sets are read without the lock.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from lance_minhash_sql.core.arrays import readonly, sorted_unique
from lance_minhash_sql.core.tuning import FETCH_ROWS, SHINGLE_FETCH_ROWS, TEXT_READER_BYTES
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.file_arrays import AppendedValues, FileArray
from lance_minhash_sql.io.handles import take_reader
from lance_minhash_sql.io.takes import take_rows
from lance_minhash_sql.kernels.components import marked_ids, new_marks, set_marks
from lance_minhash_sql.kernels.csr import spans_take
from lance_minhash_sql.kernels.similarity import COUNT_BUCKETS, bucket_counts
from lance_minhash_sql.runtime.cache import Counters
from lance_minhash_sql.runtime.memory import trim_heap
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.selfjoin.pool import read_multi, row_ids
from lance_minhash_sql.selfjoin.shards import Shard, ShardData

__all__ = ["SHINGLE_FETCH_ROWS", "INDEX_BYTES", "index_in_memory", "ShingleSets", "Index", "Snapshot", "STATS",
           "candidate_rows", "live_rows"]

STATS = Counters("exact verification's shingle sets", "fetched_rows", "prefetched_rows", "asked_rows",
                 "index_in_files")
INDEX_BYTES = 32 + COUNT_BUCKETS  # held per row seen: row id, start and end of its set, signature row, counts


def index_in_memory(rows: int, held_most: int | None) -> bool:
    """Is the index of ``rows`` rows held in memory under ``held_most`` bytes (a budget's
    ``sets`` part; None: no bound)? Past it, its columns are held in files."""
    return held_most is None or rows * INDEX_BYTES <= held_most


class Index(NamedTuple):
    """Where each row seen is, by row id (``ids`` ascending): its set is
    ``values[starts[i]:ends[i]]``, its signature row ``sig_rows[i]`` of the signatures'
    file (-1 without signatures), ``counts[i]`` its set's bucket counts (no columns
    without sets)."""

    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    sig_rows: np.ndarray
    counts: np.ndarray


class Snapshot(NamedTuple):
    """The index and the sets' values at one moment: positions taken in it stay valid
    whatever is fetched after (a fetch replaces the index, never changes it)."""

    index: Index
    hashes: np.ndarray

    def rowids(self, positions: np.ndarray) -> np.ndarray:
        return self.index.ids[positions]


def _empty_index(counts: bool) -> Index:
    return Index(np.empty(0, np.uint64), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
                 np.empty((0, COUNT_BUCKETS if counts else 0), np.uint8))


class ShingleSets:
    """Shingle sets of rows of ``opened`` (an :class:`lance_minhash_sql.index.opened.OpenedIndex`,
    or a side of a cross-dataset join, ``selfjoin/join_sets.py``: its ``ds``, ``uri``,
    ``column`` and ``params`` are read) by row id, each row fetched and shingled once
    (module doc); with ``signatures`` their MinHash signatures too (signed from the same
    texts: bit-identical to the index's), and without ``sets`` those alone; without
    ``counts`` the sets' bucket counts are not kept (star's walk does not read them).
    Call :meth:`close` when done (the files go with the process anyway)."""

    def __init__(self, opened, signatures: bool = False, sets: bool = True, counts: bool = True,
                 held_most: int | None = None):
        self.opened = opened
        self.signer = signer_for(opened.params)
        self.k = opened.params.num_hashes
        self.with_sets = sets
        self.index = _empty_index(sets and counts)  # replaced whole under the lock, read whole without it
        self.values = AppendedValues(np.uint64)
        self.signatures = AppendedValues(np.uint16) if signatures else None
        self.lock = threading.Lock()
        self.held_most = held_most  # the index's bytes in memory at most (None: no bound), else in files
        self.files: list[FileArray] = []  # the index's columns when it is held in files
        self.reader = None  # the texts' handle (io/handles.py:take_reader), opened at the first fetch

    def positioned(self, data: ShardData) -> tuple[ShardData, Snapshot]:
        """``data`` (a loaded shard) with its pool's row ids replaced by the rows'
        positions in the index of the returned snapshot (fetching the shard's rows not
        held), so the pair kernel writes positions: in row-id order as the row ids are,
        looked up once per pool row rather than twice per candidate pair. Pool rows the
        shard's band rows do not reference (deleted ones) get position 0."""
        rows = data.rowids
        used = sorted_unique(data.docs if data.slot.size == 0 else data.slot[data.docs]).astype(np.int64)
        STATS.add("asked_rows", used.size)
        snap, pos = self.placed(rows[used])
        at = np.zeros(rows.size, dtype=np.uint64)
        at[used] = pos
        return replace(data, rowids=readonly(at)), snap

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """``(signatures uint16[n, k] or None, offsets, hashes)`` of ``rows`` (row ids, held
        or fetched now), the sets as a CSR of their own (empty without ``sets``)."""
        rows = np.asarray(rows, dtype=np.uint64)
        snap, pos = self.placed(rows)
        index = snap.index
        sigs = None
        if self.signatures is not None:
            sigs = self.signatures.view().reshape(-1, self.k)[index.sig_rows[pos]]
        if not self.with_sets:
            return sigs, np.zeros(rows.size + 1, dtype=np.int64), np.empty(0, dtype=np.uint64)
        offsets, hashes = spans_take(index.starts, index.ends, snap.hashes, pos)
        return sigs, offsets, hashes

    def placed(self, rows: np.ndarray) -> tuple[Snapshot, np.ndarray]:
        """A snapshot holding every one of ``rows`` (the missing fetched first) and their
        positions in it."""
        snap = Snapshot(self.index, self.values.view())  # (the index first: the file holds its sets)
        pos = _positions(snap.index.ids, rows)
        if pos is None:
            self.fetch_rows(sorted_unique(rows), "fetched_rows")
            snap = Snapshot(self.index, self.values.view())
            pos = np.searchsorted(snap.index.ids, rows)
        return snap, pos

    def row_bytes(self, rows: np.ndarray) -> np.ndarray:
        """What :meth:`gather` holds for each of ``rows`` (held row ids): its signature,
        its set's offset and values."""
        index = self.index
        pos = np.searchsorted(index.ids, np.asarray(rows, dtype=np.uint64))
        out = np.full(pos.size, 2 * self.k if self.signatures is not None else 0, dtype=np.int64)
        if self.with_sets:
            out += 8 * (index.ends[pos] - index.starts[pos]) + 8
        return out

    def prefetch(self, shards: list[Shard], docs: np.ndarray | None = None, held_most: int | None = None) -> None:
        """Fetch and shingle, in row-id order, every live row of the candidate pairs
        ``shards`` can give (:func:`candidate_rows`) not held yet; ``docs``: the shards'
        docs in buckets of two rows or more when the caller read them already.
        ``held_most``: the bytes of the index held in memory at most (a budget's ``sets``
        part), for this fetch and every later one; past it the index is held in files."""
        if held_most is not None:
            self.held_most = held_most
        if shards:
            rows = candidate_rows(shards) if docs is None else live_rows(shards[0].plan, sorted_unique(docs))
            self.fetch_rows(rows, "prefetched_rows")
            del rows
            trim_heap()  # (the candidate rows, freed only now)

    def fetch_rows(self, rows: np.ndarray, counter: str = "prefetched_rows") -> None:
        """Fetch, in row-id order, the rows of sorted unique ``rows`` not held yet (counted
        as ``counter`` in :data:`STATS`)."""
        with self.lock:
            missing = rows if self.index.ids.size == 0 else rows[~_held(self.index.ids, rows)]
            STATS.add(counter, missing.size)
            if missing.size:
                self._fetch(missing)
        trim_heap()  # (the threads' freed texts and sets handed back)

    def _fetch(self, missing: np.ndarray) -> None:
        """Fetch, shingle (and sign) and append the sorted rows ``missing`` (the next take
        running while a batch is worked on); merge them into the index."""
        column = self.opened.column
        if self.reader is None:
            self.reader = take_reader(self.opened.ds)
        old = self.index
        in_files = not index_in_memory(old.ids.size + missing.size, self.held_most)
        made: list[FileArray] = []
        ids, starts, ends, sig_rows, counts = _columns(missing.size, old.counts.shape[1], made if in_files else None)
        ids[:] = missing
        batches = list(range(0, missing.size, SHINGLE_FETCH_ROWS))

        def take(s: int):
            rows = missing[s:s + SHINGLE_FETCH_ROWS]
            texts = take_rows(self.reader, rows, [column], "the exact verification", self.opened.uri)
            yield s, texts.column(column).combine_chunks()

        for s, texts in run_ordered(batches, take, workers=2, ahead=1):
            n = len(texts)
            if self.with_sets:
                offsets, hashes = self.signer.shingle_sets(texts)
                first = self.values.append(hashes)
                starts[s:s + n] = first + offsets[:-1]
                ends[s:s + n] = first + offsets[1:]
                if counts.shape[1]:
                    counts[s:s + n] = bucket_counts(offsets, hashes)
            if self.signatures is not None:
                sigs, _ = self.signer.sign(texts)
                sig_rows[s:s + n] = self.signatures.append(sigs.reshape(-1)) // self.k + np.arange(n)
            del texts
        new = (ids, starts, ends, sig_rows, counts)
        if old.ids.size == 0:  # the first fetch (a prefetch, star's members): the arrays as built, not copied
            self._replace(Index(*(readonly(v) for v in new)), made)
            return
        at = np.searchsorted(old.ids, missing)
        if not in_files:
            self._replace(Index(*(readonly(np.insert(a, at, v, axis=0)) for a, v in zip(old, new))), [])
            return
        files: list[FileArray] = []
        out = _columns(old.ids.size + missing.size, old.counts.shape[1], files)
        _merge_into(out, old, new, at)
        for f in made:
            f.close()
        self._replace(Index(*(readonly(v) for v in out)), files)

    def _replace(self, index: Index, files: list[FileArray]) -> None:
        """Hold ``index`` (its columns in ``files``, or in memory when none), the files of
        the index before closed (snapshots still mapping them keep their pages)."""
        old, self.files = self.files, files
        self.index = index
        if files:
            STATS.add("index_in_files")
        for f in old:
            f.close()

    def held_bytes(self) -> int:
        """The bytes of the index in memory (the sets themselves are file pages, and the
        index too once it is held in files: none then)."""
        return 0 if self.files else sum(a.nbytes for a in self.index)

    def budget_bytes(self) -> int:
        """What the sets take of a self-join's budget while its pairs are verified: the
        index, and what Lance's reader keeps once it took the texts
        (:data:`TEXT_READER_BYTES`)."""
        return self.held_bytes() + TEXT_READER_BYTES

    def close(self) -> None:
        self.values.close()
        if self.signatures is not None:
            self.signatures.close()
        self._replace(self.index, [])
        self.reader = None


def _columns(n: int, count_columns: int, files: list[FileArray] | None) -> tuple:
    """Writable ``(ids, starts, ends, sig_rows, counts)`` of ``n`` rows (sig_rows -1), in
    memory, or with ``files`` (a list the files are appended to) each in a file."""
    shapes = ((np.uint64, ()), (np.int64, ()), (np.int64, ()), (np.int64, ()), (np.uint8, (count_columns,)))
    out = []
    for dtype, tail in shapes:
        if files is None:
            out.append(np.zeros((n, *tail), dtype=dtype))
            continue
        f = FileArray(n * int(np.prod(tail, dtype=np.int64)), dtype)
        files.append(f)
        out.append(f.array.reshape(n, *tail))
    for s in range(0, n, FETCH_ROWS):
        out[3][s:s + FETCH_ROWS] = -1
    return tuple(out)


def _merge_into(out: tuple, old: Index, new: tuple, at: np.ndarray) -> None:
    """Write into ``out`` what ``np.insert(old_column, at, new_column, axis=0)`` gives for
    each column (``at``: ascending, where each new row goes among the old ones), a slice of
    :data:`FETCH_ROWS` rows at a time: no column is held whole in memory."""
    n_old, n_new = old.ids.size, at.size
    for lo in range(0, n_old, FETCH_ROWS):
        i = np.arange(lo, min(n_old, lo + FETCH_ROWS))
        to = i + np.searchsorted(at, i, side="right")  # an old row moves past the new rows before it
        for o, c in zip(out, old):
            o[to] = c[i]
    for lo in range(0, n_new, FETCH_ROWS):
        j = np.arange(lo, min(n_new, lo + FETCH_ROWS))
        to = at[j] + j  # the j-th new row after j new rows and at[j] old rows
        for o, c in zip(out, new):
            o[to] = c[j]


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
    return live_rows(plan, gids)


def live_rows(plan, gids: np.ndarray) -> np.ndarray:
    """Ascending row ids of the live docs among sorted unique ``gids`` (global docs of
    ``plan``'s index)."""
    rows = row_ids(plan, gids, FETCH_ROWS)
    if rows.size and not plan.opened.liveness.trivial:
        rows = rows[plan.opened.liveness.alive(rows)]
    if rows.size < 2 or (rows[1:] > rows[:-1]).all():  # (docs in row-id order: as a fresh index numbers them)
        return rows
    return sorted_unique(rows)
