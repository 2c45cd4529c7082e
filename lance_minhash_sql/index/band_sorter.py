"""Sorting the build's band rows within a memory budget, spilling to disk when needed.

A build hands :class:`BandSorter` each batch's band keys (``uint64[n, b]``, doc ids
continuing from the running count) and then reads every ``(band_key, doc_id)`` row back
in global ``(band_key, doc_id)`` order, ready for ``BandsWriter``.

**Budget.** ``memory_limit`` bytes if given, else the environment variable
``LANCE_MEM_POOL_SIZE`` (the variable Lance's own build reads), else 64 MiB
(:data:`~lance_minhash_sql.core.params.DEFAULT_MEMORY_BUDGET`). It bounds the
build's own buffers, in every phase:

* **scan** (:func:`plan_sort` sizes it): the *pipeline* share, a quarter of the budget
  (at most 256 MiB, at least :func:`pipeline_floor`), for what is in flight while the
  column is scanned and signed: the scanner's reads (``io_buffer_size``, a quarter of
  that share within 8..64 MiB), the decoded batches queued ahead (``batch_readahead``),
  the batch being signed with its signatures and band keys, the previous batch's band keys
  (handed to the sorter on its own thread), and the signature batches queued for the
  writer thread (with that writer's 16 MiB cache); the scan batch is the
  largest power of two of rows (4,096..65,536) whose share fits, assuming
  :data:`TEXT_BYTES` of text per row. Beside it, either all band keys (in-memory sort)
  or the *spill buffer* (:func:`spill_buffer_bytes`: band keys of the docs not yet
  appended, plus the same rows partitioned, so that each spill file gets appends of
  :data:`SPILL_APPEND_BYTES` on average whatever the batch size; no larger than that
  needs);
* **sort**: the *sort* share, all but the *writer* share (an eighth, at most 32 MiB,
  for ``bands.lance``'s write buffers): band rows held for sorting (12 bytes each: u64
  key, u32 doc), the radix sort's scratch (12 bytes per row of each run being sorted,
  one run per thread), and the previous group of sorted rows, still being written while
  the next one is sorted.

It does not count the process baseline (Python, numba's compiled kernels, pyarrow,
lance) nor Lance's own decoder and writer internals;
below 64 MiB (k=128, b=16; more with more hashes) the pipeline's floor
(:func:`pipeline_floor`: 4,096-row batches, an 8 MiB read buffer, the signature writer's
cache) leaves less than an eighth of the budget, and the scan phase goes over it.

* **In memory** when all band keys plus the pipeline share fit during the scan, and the
  keys plus two groups of doc ids plus scratch (:func:`in_memory_bytes`) plus the writer
  share fit while sorting (rows from ``count_rows()``, an upper bound on the rows
  signed): each band is radix-sorted on its own, bands in parallel. When that working
  set is above half the budget, or the sort spills, and the build has at least
  :data:`HEAP_BOUND_MIN_ROWS` rows, the plan is *tight*: the build then also keeps
  glibc's heap from holding freed batches (``runtime/memory.py``).
* **Spill** otherwise: rows are partitioned by key prefix, band id (top byte) plus the
  next ``p`` bits, with ``p`` chosen so that a partition of the expected size is at most
  an eighth of the sort share; the buffered rows are appended to per-partition files in
  a private temp folder (``temp_dir`` or ``$TMPDIR``). Then partitions are loaded,
  sorted and emitted one group at a time in key order (a group and its scratch within
  half the sort share, beside the previous group): partitions are contiguous key ranges,
  so their concatenation is globally sorted. A partition that still does not fit (a
  giant bucket of near-duplicates) is split again on the next differing key bits,
  streamed in budget-sized chunks; a partition holding a single key is already in doc
  order and is streamed as it is.

Before spilling, the spill size (``rows * bands * 12``, an upper bound) is checked
against ``LANCE_MAX_TEMP_DIRECTORY_SIZE`` (default 100 GiB; bytes or a size as
:mod:`lance_minhash_sql.core.sizes` reads it, e.g. ``512MiB``, ``2GB``) and the free space of
the temp folder; if it does not fit, :func:`plan_sort` raises :class:`ResourceLimitError`
before anything is written. The temp folder is always removed (:meth:`BandSorter.close`).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from lance_minhash_sql.core.errors import InvalidParameterError, ResourceLimitError
from lance_minhash_sql.core.lance_format import BAND_ROW_BYTES as ROW_BYTES  # u64 band_key + u32 doc_id
from lance_minhash_sql.core.params import DEFAULT_MAX_TEMP_SIZE, DEFAULT_MEMORY_BUDGET, MIN_MEMORY_BUDGET
from lance_minhash_sql.core.sizes import format_bytes, parse_bytes
from lance_minhash_sql.core.tuning import (HEAP_BOUND_MIN_ROWS, IO_BUFFER_SHARE, LANCE_WRITER_CACHE, MAX_IO_BUFFER,
                                           MAX_PARTITIONS, MAX_PIPELINE_BYTES, MAX_SCAN_ROWS, MAX_SPILL_BUFFER_BYTES,
                                           MAX_WRITER_BYTES, MIN_IO_BUFFER, MIN_SCAN_ROWS, MIN_SPILL_BUFFER_SHARE,
                                           PIPELINE_SHARE, SCAN_READAHEAD, SPILL_APPEND_BYTES, TEXT_BYTES,
                                           WRITER_DEPTH, WRITER_SHARE)
from lance_minhash_sql.kernels import sort as ks
from lance_minhash_sql.kernels.config import numba_loaded
from lance_minhash_sql.runtime.memory import is_tight
from lance_minhash_sql.runtime.threads import in_chunks, num_threads, run_chunks

__all__ = [
    "ENV_MEMORY",
    "ENV_MAX_TEMP",
    "DEFAULT_MEMORY_BUDGET",
    "DEFAULT_MAX_TEMP_SIZE",
    "MIN_MEMORY_BUDGET",
    "ROW_BYTES",
    "TEXT_BYTES",
    "HEAP_BOUND_MIN_ROWS",
    "SPILL_APPEND_BYTES",
    "memory_budget",
    "max_temp_size",
    "in_memory_bytes",
    "scan_row_bytes",
    "pipeline_floor",
    "pipeline_bytes",
    "io_buffer_bytes",
    "writer_bytes",
    "scan_batch_rows",
    "spill_buffer_bytes",
    "SortPlan",
    "plan_sort",
    "BandSorter",
]

ENV_MEMORY = "LANCE_MEM_POOL_SIZE"
ENV_MAX_TEMP = "LANCE_MAX_TEMP_DIRECTORY_SIZE"
SPILL_PREFIX = "lance-minhash-spill-"

def memory_budget(memory_limit=None) -> int:
    """The sort budget in bytes: ``memory_limit``, else ``$LANCE_MEM_POOL_SIZE``, else 64 MiB."""
    if memory_limit is not None:
        n, name = parse_bytes(memory_limit, "memory_limit"), "memory_limit"
    elif os.environ.get(ENV_MEMORY, "").strip():
        n, name = parse_bytes(os.environ[ENV_MEMORY], f"${ENV_MEMORY}"), f"${ENV_MEMORY}"
    else:
        return DEFAULT_MEMORY_BUDGET
    if n < MIN_MEMORY_BUDGET:
        raise InvalidParameterError(
            f"{name}={n} bytes is below the minimum of {format_bytes(MIN_MEMORY_BUDGET)} for sorting "
            "band rows; use e.g. '512MiB'")
    return n


def max_temp_size() -> int:
    """``$LANCE_MAX_TEMP_DIRECTORY_SIZE`` in bytes, default 100 GiB."""
    raw = os.environ.get(ENV_MAX_TEMP, "").strip()
    return parse_bytes(raw, f"${ENV_MAX_TEMP}") if raw else DEFAULT_MAX_TEMP_SIZE


def in_memory_bytes(rows: int, bands: int, threads: int) -> int:
    """Working set of the in-memory sort: all band keys, the doc ids of two groups of
    ``min(threads, bands)`` bands (one being written while the next is sorted) and one
    run's scratch per thread."""
    m = min(threads, bands)
    return rows * bands * 8 + m * rows * (2 * 4 + ROW_BYTES)


def scan_row_bytes(num_hashes: int, bands: int) -> int:
    """Bytes in flight per row of a scan batch (the pipeline share's unit)."""
    sig = 2 * num_hashes + 8  # signature + row id
    return ((SCAN_READAHEAD + 1) * (TEXT_BYTES + 8)  # decoded batches: queued and current
            + 2 * sig + 1  # signatures, has-signature flags, rows kept (copies)
            + 2 * bands * 8  # band keys: the batch's, and the previous batch's on the sorter's thread
            + WRITER_DEPTH * sig)  # signature batches queued for the writer


def pipeline_floor(num_hashes: int = 128, bands: int = 16) -> int:
    """The smallest pipeline: 4,096-row batches, an 8 MiB read buffer, the signature
    writer's cache (32 MiB for the defaults)."""
    return MIN_IO_BUFFER + LANCE_WRITER_CACHE + MIN_SCAN_ROWS * scan_row_bytes(num_hashes, bands)


def pipeline_bytes(budget: int, num_hashes: int = 128, bands: int = 16) -> int:
    """The budget's share for the scan / sign / signature-write pipeline: a quarter, at
    most 256 MiB, at least :func:`pipeline_floor`."""
    return max(pipeline_floor(num_hashes, bands), min(int(budget * PIPELINE_SHARE), MAX_PIPELINE_BYTES))


def writer_bytes(budget: int) -> int:
    """The budget's share for ``bands.lance``'s write buffers."""
    return min(int(budget * WRITER_SHARE), MAX_WRITER_BYTES)


def spill_buffer_bytes(budget: int, num_hashes: int = 128, bands: int = 16) -> int:
    """The spill buffer (band keys of the docs not yet appended, and their band rows
    partitioned), used during the scan beside the pipeline share: the rest of the
    budget, at most 96 MiB (an eighth of the budget when the pipeline's floor leaves less)."""
    return min(MAX_SPILL_BUFFER_BYTES, max(int(budget * MIN_SPILL_BUFFER_SHARE),
                                           budget - pipeline_bytes(budget, num_hashes, bands)))


def io_buffer_bytes(pipeline: int, num_hashes: int = 128, bands: int = 16) -> int:
    """The scanner's ``io_buffer_size``: a quarter of the pipeline share within 8..64 MiB,
    leaving room for the smallest batches."""
    room = pipeline - LANCE_WRITER_CACHE - MIN_SCAN_ROWS * scan_row_bytes(num_hashes, bands)
    return max(MIN_IO_BUFFER, min(MAX_IO_BUFFER, int(pipeline * IO_BUFFER_SHARE), room))


def scan_batch_rows(pipeline: int, io_buffer: int, num_hashes: int, bands: int) -> int:
    """Rows per scan batch: the largest power of two whose batches in flight fit
    ``pipeline`` beside the scanner's ``io_buffer`` and the signature writer's cache."""
    per_row = scan_row_bytes(num_hashes, bands)
    room = pipeline - io_buffer - LANCE_WRITER_CACHE
    rows = MAX_SCAN_ROWS
    while rows > MIN_SCAN_ROWS and rows * per_row > room:
        rows //= 2
    return rows


def _threads() -> int:
    return num_threads()


def sort_runs(keys: np.ndarray, docs: np.ndarray, starts: np.ndarray, lengths: np.ndarray, threads: int,
              bits: int = ks.DIGIT_BITS) -> None:
    """Sort each run ``[starts[i], starts[i] + lengths[i])`` of ``keys`` / ``docs`` stably
    by key, in place: the serial radix sort (``bits``-bit digits) on up to ``threads``
    threads at once, each with its own scratch (so at most ``threads`` runs' scratch is
    alive)."""

    def one(i: int, _stop: int) -> None:
        s, n = int(starts[i]), int(lengths[i])
        ks.radix_sort_run(keys[s:s + n], docs[s:s + n], ks.empty_u64(n), ks.empty_u32(n), bits)

    run_chunks(one, len(starts), 1, threads)


@dataclass(frozen=True)
class SortPlan:
    """How the band rows of a build will be sorted, and how the budget is split."""

    rows: int  # upper bound on the rows signed (count_rows)
    bands: int
    budget: int
    threads: int
    in_memory: bool
    prefix_bits: int = 0  # spill: key bits after the band byte that pick a partition
    temp_dir: str | None = None
    spill_bytes: int = 0  # upper bound on the bytes spilled
    sort_bytes: int = 0  # the sort's share: rows held, scratch, the group being written
    scan_rows: int = MAX_SCAN_ROWS  # rows per scan batch
    spill_rows: int = MAX_SCAN_ROWS  # spill: docs buffered before their band rows are appended
    io_buffer: int = MAX_IO_BUFFER  # the scanner's io_buffer_size
    readahead: int = SCAN_READAHEAD  # the scanner's batch_readahead
    writer_depth: int = WRITER_DEPTH  # writes queued per writer thread
    tight: bool = False  # many rows, and buffers that may come near the budget: bound the heap too


def plan_sort(rows: int, bands: int, memory_limit=None, temp_dir: str | None = None,
              threads: int | None = None, num_hashes: int = 128) -> SortPlan:
    """Split the budget (see the module docstring); choose in-memory or spill, and for a
    spill, check the temp folder's room first."""
    budget = memory_budget(memory_limit)
    threads = threads or _threads()
    if temp_dir is not None and (not isinstance(temp_dir, (str, os.PathLike)) or not os.path.isdir(temp_dir)):
        raise InvalidParameterError(
            f"temp_dir={temp_dir!r} is not a directory; pass an existing folder for spill files")
    pipeline = pipeline_bytes(budget, num_hashes, bands)
    io_buffer = io_buffer_bytes(pipeline, num_hashes, bands)
    shares = dict(sort_bytes=max(ROW_BYTES, budget - writer_bytes(budget)),
                  scan_rows=scan_batch_rows(pipeline, io_buffer, num_hashes, bands), io_buffer=io_buffer)
    scanning = rows * bands * 8 + pipeline  # all band keys while the scan pipeline runs
    working = max(scanning, in_memory_bytes(rows, bands, threads) + writer_bytes(budget))
    many = rows >= HEAP_BOUND_MIN_ROWS
    if working <= budget:
        return SortPlan(rows, bands, budget, threads, True, tight=many and is_tight(working, budget), **shares)
    folder = os.fspath(temp_dir) if temp_dir is not None else tempfile.gettempdir()
    spill = rows * bands * ROW_BYTES
    limit = max_temp_size()
    if spill > limit:
        raise ResourceLimitError(
            f"sorting {rows:,} rows x {bands} bands needs up to {format_bytes(spill)} of spill files "
            f"(the band rows do not fit memory_limit={format_bytes(budget)}), above "
            f"{ENV_MAX_TEMP}={format_bytes(limit)}; raise {ENV_MAX_TEMP} or memory_limit, or build the "
            "index per fragment (smaller segments)")
    free = shutil.disk_usage(folder).free
    if spill > free:
        raise ResourceLimitError(
            f"sorting {rows:,} rows x {bands} bands needs up to {format_bytes(spill)} of spill files, but "
            f"{folder!r} has {format_bytes(free)} free; pass temp_dir= on a larger disk, raise "
            "memory_limit, or build the index per fragment")
    # a partition of the expected size is at most 1/8 of the sort share: with a factor 2
    # of slack for the spread of hash prefixes, `threads` runs of scratch and two groups
    # of about 3 partitions each fit at once
    part_rows = max(1, shares["sort_bytes"] // (8 * ROW_BYTES))
    p = max(0, math.ceil(math.log2(max(1.0, rows / part_rows))))
    p = min(p, 56, int(math.log2(MAX_PARTITIONS // bands)))  # bands <= 256: at least 4 bits
    nparts = bands << p
    spill_rows = max(1, min(spill_buffer_bytes(budget, num_hashes, bands) // (bands * (8 + ROW_BYTES)),
                            -(-nparts * SPILL_APPEND_BYTES // (bands * ROW_BYTES))))
    return SortPlan(rows, bands, budget, threads, False, p, folder, spill, spill_rows=spill_rows, tight=many,
                    **shares)


@dataclass
class _Part:
    base: str  # path without suffix: <base>.keys, <base>.docs
    rows: int
    kmin: int
    kmax: int


def _append(path: str, array: np.ndarray) -> None:
    with open(path, "ab") as f:
        array.tofile(f)


def _read_into(path: str, out: np.ndarray) -> None:
    with open(path, "rb") as f:
        view = memoryview(out).cast("B")
        got = f.readinto(view)
    if got != view.nbytes:
        raise OSError(f"spill file {path} is truncated ({got} of {view.nbytes} bytes)")


def _remove(part: _Part) -> None:
    for suffix in (".keys", ".docs"):
        try:
            os.remove(part.base + suffix)
        except FileNotFoundError:
            pass


class BandSorter:
    """Collects band rows batch by batch; :meth:`sorted_chunks` returns them in order."""

    def __init__(self, plan: SortPlan):
        self.plan = plan
        self.rows = 0
        self.spilled_bytes = 0
        self.spill_dir: str | None = None
        b = plan.bands
        if plan.in_memory:
            self._keys = None  # allocated at the first batch (:meth:`_numpy` decides by whom)
        else:
            self.spill_dir = tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=plan.temp_dir)
            self._nparts = b << plan.prefix_bits
            self._shift = 56 - plan.prefix_bits
            self._counts = np.zeros(self._nparts, dtype=np.int64)
            self._kmin = np.full(self._nparts, np.iinfo(np.uint64).max, dtype=np.uint64)
            self._kmax = np.zeros(self._nparts, dtype=np.uint64)
            # the spill buffer: band keys of the next docs (from doc id `_first`), and their
            # band rows partitioned, both reused from flush to flush
            self._buf = None
            self._buffered = 0
            self._first = 0
            self._out_k = self._out_d = None

    # ------------------------------------------------------------------ collect

    def add(self, keys: np.ndarray) -> None:
        """Band keys ``uint64[n, b]`` of the next ``n`` docs (doc ids ``rows .. rows + n - 1``)."""
        n = keys.shape[0]
        if n == 0:
            return
        if keys.shape[1] != self.plan.bands:
            raise ValueError(f"band key batch has {keys.shape[1]} bands, expected {self.plan.bands}")
        if self.rows + n > self.plan.rows:
            raise ResourceLimitError(
                f"the scan produced more than the {self.plan.rows:,} rows counted before the build; "
                "the dataset changed during the build: retry")
        if self.plan.in_memory:
            keys = np.ascontiguousarray(keys, dtype=np.uint64)
            at = self.rows
            if self._keys is None:
                size = self.plan.bands * self.plan.rows
                self._keys = np.empty(size, dtype=np.uint64) if self._numpy() else ks.empty_u64(size)
            if self._numpy():
                self._keys.reshape(self.plan.bands, self.plan.rows)[:, at:at + n] = keys.T
            else:
                def scatter(lo: int, hi: int) -> None:
                    ks.scatter_bands(keys[lo:hi], self._keys, self.plan.rows, at + lo)

                in_chunks(scatter, n)  # one chunk of rows a thread
        else:
            keys = np.ascontiguousarray(keys, dtype=np.uint64)
            cap = self.plan.spill_rows
            if self._buf is None:
                self._buf = ks.empty_u64(cap * self.plan.bands).reshape(cap, self.plan.bands)
            i = 0
            while i < n:  # through the spill buffer: appends of many batches at once
                m = min(n - i, cap - self._buffered)
                self._buf[self._buffered:self._buffered + m] = keys[i:i + m]
                self._buffered += m
                i += m
                if self._buffered == cap:
                    self._flush()
        self.rows += n

    def _flush(self) -> None:
        """Partition the buffered docs' band rows and append them to the partition files."""
        n = self._buffered
        if n == 0:
            return
        m = n * self.plan.bands
        if self._out_k is None:
            cap = self.plan.spill_rows * self.plan.bands
            self._out_k, self._out_d = ks.empty_u64(cap), ks.empty_u32(cap)
        pk, pd = self._out_k[:m], self._out_d[:m]
        bounds, kmin, kmax = ks.partition_band_rows_into(self._buf[:n], self._first, self._shift,
                                                         self._nparts, pk, pd)
        for p in np.flatnonzero(np.diff(bounds)):
            s, e = bounds[p], bounds[p + 1]
            base = self._base(int(p))
            _append(base + ".keys", pk[s:e])
            _append(base + ".docs", pd[s:e])
        self._counts += np.diff(bounds)
        np.minimum(self._kmin, kmin, out=self._kmin)
        np.maximum(self._kmax, kmax, out=self._kmax)
        self.spilled_bytes += m * ROW_BYTES
        self._first += n
        self._buffered = 0

    def finish(self) -> None:
        """No more rows: append what the spill buffer holds and free it (the band keys
        of an in-memory sort stay until :meth:`close`)."""
        if not self.plan.in_memory and self.spill_dir is not None:
            self._flush()
        self._buf = self._out_k = self._out_d = None

    def _base(self, p: int) -> str:
        return os.path.join(self.spill_dir, f"p{p:05d}")

    # ------------------------------------------------------------------ emit

    def sorted_chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(band_key u64, doc_id u32)`` chunks in global ``(band_key, doc_id)`` order."""
        if self.plan.in_memory:
            yield from self._in_memory()
        else:
            self.finish()
            parts = [_Part(self._base(p), int(self._counts[p]), int(self._kmin[p]), int(self._kmax[p]))
                     for p in range(self._nparts) if self._counts[p]]
            yield from self._emit(parts)

    def _numpy(self) -> bool:
        """An in-memory sort by numpy rather than the kernels: while numba is not loaded
        (the batches were signed by numpy: a small build, ``index/numpy_sign.py``), whose
        load would cost more than sorting its few rows. Same order: ``(band_key, doc_id)``."""
        return self.plan.in_memory and not numba_loaded()

    def _in_memory(self):
        """Bands sorted ``threads`` at a time; each group's doc ids get a fresh buffer, so a
        consumer may still hold the previous group while the next one is sorted."""
        b, cap, n = self.plan.bands, self.plan.rows, self.rows
        if n == 0:
            return
        if self._numpy():
            for j in range(b):
                keys = self._keys[j * cap:j * cap + n]
                docs = np.argsort(keys, kind="stable").astype(np.uint32)  # doc ids in arrival order
                yield keys[docs], docs
            return
        t = self.plan.threads
        for g in range(0, b, t):
            m = min(t, b - g)
            keys = self._keys[g * cap:(g + m) * cap]
            starts = np.arange(m, dtype=np.int64) * cap
            lengths = np.full(m, n, dtype=np.int64)
            docs = ks.empty_u32(m * cap)
            ids = np.arange(n, dtype=np.uint32)
            for s in starts:
                docs[s:s + n] = ids  # doc ids in arrival order
            sort_runs(keys, docs, starts, lengths, t)
            for s in starts:
                yield keys[s:s + n], docs[s:s + n]

    def _fits(self, total: int, longest: int, count: int) -> bool:
        """A group of ``count`` partitions, ``total`` rows, fits the sort share with its
        scratch, beside the previous group of at most as many rows (still being written)."""
        scratch = min(self.plan.threads, count) * longest
        return (2 * total + scratch) * ROW_BYTES <= self._sort_bytes()

    def _sort_bytes(self) -> int:
        return self.plan.sort_bytes or self.plan.budget

    def _emit(self, parts: list[_Part]):
        group: list[_Part] = []
        total = longest = 0
        for part in parts:
            if not self._fits(part.rows, part.rows, 1):
                yield from self._emit_group(group)
                group, total, longest = [], 0, 0
                yield from self._emit_oversized(part)
                continue
            if group and not self._fits(total + part.rows, max(longest, part.rows), len(group) + 1):
                yield from self._emit_group(group)
                group, total, longest = [], 0, 0
            group.append(part)
            total += part.rows
            longest = max(longest, part.rows)
        yield from self._emit_group(group)

    def _emit_group(self, group: list[_Part]):
        if not group:
            return
        lengths = np.array([p.rows for p in group], dtype=np.int64)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        total = int(lengths.sum())
        keys = ks.empty_u64(total)
        docs = ks.empty_u32(total)
        for part, s, n in zip(group, starts, lengths):
            _read_into(part.base + ".keys", keys[s:s + n])
            _read_into(part.base + ".docs", docs[s:s + n])
            _remove(part)
        sort_runs(keys, docs, starts, lengths, self.plan.threads)
        for s, n in zip(starts, lengths):
            yield keys[s:s + n], docs[s:s + n]

    def _chunks(self, part: _Part, chunk_rows: int):
        with open(part.base + ".keys", "rb") as fk, open(part.base + ".docs", "rb") as fd:
            for s in range(0, part.rows, chunk_rows):
                n = min(chunk_rows, part.rows - s)
                k = np.fromfile(fk, dtype=np.uint64, count=n)
                d = np.fromfile(fd, dtype=np.uint32, count=n)
                if len(k) != n or len(d) != n:
                    raise OSError(f"spill file {part.base} is truncated")
                yield k, d

    def _emit_oversized(self, part: _Part):
        """A partition larger than the budget: stream it if it holds one key, else split it.

        Chunks of a sixth of the sort share: a split holds two (read and split), a stream
        up to three (read, and two queued for the writer), beside the previous group."""
        chunk_rows = max(1, self._sort_bytes() // (6 * ROW_BYTES))
        if part.kmin == part.kmax:  # one bucket: doc ids were appended ascending
            yield from self._chunks(part, chunk_rows)
            _remove(part)
            return
        high = (part.kmin ^ part.kmax).bit_length()  # keys share every bit from `high` up
        bits = min(8, high)
        shift = high - bits
        nsub = 1 << bits
        counts = np.zeros(nsub, dtype=np.int64)
        kmin = np.full(nsub, np.iinfo(np.uint64).max, dtype=np.uint64)
        kmax = np.zeros(nsub, dtype=np.uint64)
        subs = [f"{part.base}.{q:03d}" for q in range(nsub)]
        for k, d in self._chunks(part, chunk_rows):
            bounds, sk, sd, cmin, cmax = ks.split_pairs(k, d, shift, nsub - 1, nsub)
            for q in np.flatnonzero(np.diff(bounds)):
                s, e = bounds[q], bounds[q + 1]
                _append(subs[q] + ".keys", sk[s:e])
                _append(subs[q] + ".docs", sd[s:e])
            counts += np.diff(bounds)
            np.minimum(kmin, cmin, out=kmin)
            np.maximum(kmax, cmax, out=kmax)
            self.spilled_bytes += len(k) * ROW_BYTES
        _remove(part)
        yield from self._emit([_Part(subs[q], int(counts[q]), int(kmin[q]), int(kmax[q]))
                               for q in range(nsub) if counts[q]])

    # ------------------------------------------------------------------ cleanup

    def close(self) -> None:
        """Free the keys and remove the spill folder (idempotent)."""
        self._keys = None
        self._buf = self._out_k = self._out_d = None
        if self.spill_dir is not None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
            self.spill_dir = None
