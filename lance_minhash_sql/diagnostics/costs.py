"""What a full ``minhash_pairs`` would cost on this machine: seconds, peak memory and
temporary disk (``docs/estimate.md``, *What the full run would cost*).

**Work.** The self-join (:mod:`lance_minhash_sql.selfjoin.bounded`) reads every band row
of the index, keeps the buckets of two rows or more (the *candidate band rows*), reads
the signatures of their rows into a pool group by group (the *fetched rows*), visits
every pair of rows of each bucket (the *visits*) and emits the pairs that pass. How many
of each: :class:`Work`, from the sampled rows' buckets (:mod:`.workload`) and the
planner's own sizes (:func:`~lance_minhash_sql.selfjoin.bounded.pool_rows` under the
budget): when one pool holds every row with a candidate, each is fetched once and no
bucket is dropped; otherwise a bucket is fetched per group and the labels drop the
buckets contained in the band before's (``workload.py``), for the share of band
boundaries that fall between groups. The visits are counted per class of bucket size
(:data:`BUCKET_CLASSES`), in the kept buckets and in the others (:attr:`Work.class_visits`).
A group's shards past the band rows it keeps from its marking pass
(:func:`~lance_minhash_sql.selfjoin.bounded.keep_rows`) are read again
(:attr:`Work.read_again`).

**Rates.** :func:`calibrate` runs the self-join's own steps on
:data:`CALIBRATION_SHARDS` small key-range shards of this index (spread evenly over the
bands, :func:`~lance_minhash_sql.selfjoin.shards.pair_shards`), on the engine's threads:
each shard's band rows read (:func:`~lance_minhash_sql.selfjoin.pool.read_multi`), its
buckets laid out as the self-join lays out a group's shard (its candidates marked in a bit
set of every doc, a band row's pool row its doc's rank among the marked ones:
:func:`~lance_minhash_sql.kernels.components.ranks`,
:func:`~lance_minhash_sql.selfjoin.pool.shard_data`), as many rows' signatures fetched
back to back (:func:`~lance_minhash_sql.selfjoin.pool.pool`); the first set's shards
(every third) also fetch their own rows, spread over the signatures' file, and are
linked (below): such a fetch costs more the larger the file. The verification
(:func:`~lance_minhash_sql.selfjoin.verify.pair_verifier`) is timed on the sampled rows'
own buckets (:func:`_class_sets`: per class of bucket size and kind, sets read by their
docs and verified on data just loaded, at each threshold asked), a rate per visit of each
class with its pairs' share, less a call's own cost (:func:`_class_rates`); only without
them (or with ``verify="exact"``) do all the shards fetch their own rows, and only
without them are the shards' pairs verified, at the lowest threshold asked
then at 1.0 and at the threshold again (at 1.0 a visit stops at its first unequal hash
and no pair passes: the difference of the last two, fitted over the shards to their
visits and pairs, gives the cost of a pair; the first, less its pairs', fitted to the
visits and candidate band rows, the cost of a visit on data just loaded, as the
self-join's). Each
step's CPU time over its count is a rate of this machine and this index (how the index's
size fills the caches included). With ``verify="exact"`` two more: the shingle sets'
prefetch of the sampled shards' candidate rows (:meth:`~lance_minhash_sql.selfjoin.
shingles.ShingleSets.prefetch`: taken, shingled and written once), over those rows, and
the exact verification's CPU time beyond the estimate's, over the pairs at the exact
floor. For the clusters, the links of each linked shard to its buckets' representatives
(:func:`~lance_minhash_sql.selfjoin.links.data_links`), over its candidate band rows, and
their one-thread steps on :data:`CALIBRATION_SERIAL_ROWS` rows (:func:`_serial`). The
shards are measured in :data:`CALIBRATION_REPEATS` sets (every third shard), and each
rate is the median of the sets'.

**Clusters and dedup.** ``minhash_clusters`` (components) does the pairs' reads and
fetches in the pool its union-find and bit set leave, drops after the first group the
buckets already one component (counted as the labels' drops are), and links each
candidate band row instead of visiting every pair (with ``verify="exact"`` its links are
the exact pairs, priced as the pairs are); then on one thread it unites the links, sweeps
every row of the index and builds the clustered rows' table; a counting
``minhash_dedup`` adds the keep order of the clustered rows (:func:`project` with
``dedup``). The clustered rows are the rows with a pair.

**Seconds.** The work times the rates is the full run's CPU time. The self-join reads,
lays out and verifies its shards on all the engine's threads, and fills each group's
pool on its own thread: the wall time is the threads' CPU over the cores they get
(:attr:`Rates.parallel`: :func:`cores_now`, from the load, the last minute's or the
threads runnable now when fewer, and the cores this process may run on), plus the pool fills' and the clusters' one-thread
steps' CPU over at most one core. A shard whose buckets hold more than :data:`CALIBRATION_VISITS` pairs is read and
fetched but not verified (a giant bucket would cost the calibration more than the sample).

**Memory.** Peak resident memory, a process that loaded the engine included:

    peak_memory = SELF_JOIN_BASE_BYTES + pool_bytes(memory_limit) + rows * SELF_JOIN_ROW_BYTES
                  (+ clustered rows * CLUSTERED_ROW_BYTES for clusters and dedup)

(with ``verify="exact"`` plus the shingle sets' index, ``INDEX_BYTES`` a candidate row,
and Lance's text reader, ``TEXT_READER_BYTES``; the budget's pool share filled with candidates' signatures; per row, the pairs' labels,
the candidates' bit set and the index pages the shards map while they read them, which
count in the resident set and which a budget does not bound).

**Temporary disk.** The pairs' self-join verified by the estimate holds everything within
its budget and writes no temporary file: ``temp_disk`` is 0. With ``verify="exact"`` it
writes the candidate rows' shingle sets (8 bytes a shingle) to one: ``temp_disk`` is
their bytes, ``N`` times the sampled rows' mean of ``8 |set|`` over those with a
candidate. The clusters' self-join (``minhash_clusters``,
``minhash_dedup``) writes one when its union-find of every row and the candidates' bit
set pass their share of the pool (:func:`~lance_minhash_sql.selfjoin.parent.spills`):
the union-find's file, :func:`~lance_minhash_sql.selfjoin.parent.parent_bytes`
(:func:`clusters_spill`).

``benchmarks/estimate.py`` measures projected against measured.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.core.errors import LowRecallWarning
from lance_minhash_sql.core.params import exact_candidate_floor
from lance_minhash_sql.core.tuning import (BUCKET_CLASSES, CALIBRATION_CLASS_ROWS, CALIBRATION_CLASS_VISITS,
                                           CALIBRATION_REPEATS, CALIBRATION_SERIAL_ROWS, CALIBRATION_SHARD_ROWS,
                                           CALIBRATION_SHARDS, CALIBRATION_VISITS, CLUSTERED_ROW_BYTES,
                                           DEFAULT_CHUNK_PAIRS, MAX_SHARDS, MIN_WINDOW_ROWS, SELF_JOIN_BASE_BYTES,
                                           SELF_JOIN_ROW_BYTES, TEXT_READER_BYTES)
from lance_minhash_sql.core.usage import usable_cores
from lance_minhash_sql.diagnostics.workload import size_class
from lance_minhash_sql.kernels.components import count_unmarked, marked_ids, new_marks, ranks, set_marks
from lance_minhash_sql.index.opened import OpenedIndex
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.runtime.threads import num_threads
from lance_minhash_sql.selfjoin.bounded import (chunk_pairs, clusters_table, components_bytes, keep_rows, pairs_pool,
                                                pool_bytes, pool_rows, shard_rows)
from lance_minhash_sql.selfjoin.links import data_links
from lance_minhash_sql.selfjoin.parent import UnionFind, parent_bytes, spills
from lance_minhash_sql.selfjoin.pool import pool, read_multi, row_ids, shard_data, span_data
from lance_minhash_sql.selfjoin.shingles import INDEX_BYTES, STATS as SHINGLE_STATS
from lance_minhash_sql.selfjoin.shards import pair_shards, plan_for
from lance_minhash_sql.selfjoin.verify import data_visits, pair_verifier

__all__ = ["Projection", "Rates", "Work", "calibrate", "cores_now", "runnable_others", "work", "project", "clusters_spill",
           "busy_factor", "PROBE_CPU_SECONDS"]

LOADAVG = "/proc/loadavg"  # Linux: the load averages, then "running/total" threads


PROBE_CPU_SECONDS = 0.1  # the busy factor's probe: CPU time of the calling thread (about 0.1 s idle)
CALL_TRIES = 3  # calls on one bucket of two rows timed for a verification call's own cost (the least)
WARM_TRIES = 4  # shards tried (from the last) until one has pairs to verify: the kernels' first calls, untimed


@dataclass(frozen=True)
class Projection:
    seconds: float
    peak_memory: int
    temp_disk: int
    cpu_seconds: float


@dataclass(frozen=True)
class Rates:
    """CPU seconds of the self-join's steps on this machine and index (:func:`calibrate`),
    and :attr:`parallel`, the cores its threads get (module doc, *Seconds*)."""

    band_row: float  # a band row read and its buckets of two rows or more kept
    candidate_row: float  # a candidate band row laid out over its pool
    fetched_row: float  # a row's signature and row id fetched into the pool, rows back to back
    group_fetch: float  # a group's fetch of rows spread over the file, beyond the rows themselves
    visit: float  # a pair of a bucket visited
    bucket_row: float  # a candidate band row verified, whatever the pairs of its bucket
    pair: float  # a pair emitted
    exact_pair: float  # a pair at the exact floor verified by its exact Jaccard (0: not measured)
    exact_row: float  # a candidate row's text taken, shingled and written (0: not measured)
    parallel: float
    link_row: float = 0.0  # clusters: a candidate band row linked to its bucket's representatives
    union_link: float = 0.0  # clusters: a link united in the union-find (one thread)
    index_row: float = 0.0  # clusters: a row of the index through the union-find's members sweep (one thread)
    table_row: float = 0.0  # clusters: a clustered row's row id read and its place in the table (one thread)
    keep_row: float = 0.0  # dedup: a clustered row ordered and flagged, its cluster counted (one thread)
    # a visit in a bucket of each size class (BUCKET_CLASSES) at one threshold, its
    # bucket's rows' and its pairs' share included, in kept buckets then in the others
    # (Work.class_visits); () when not measured (then visit, bucket_row and pair price the
    # verification); per threshold: by_threshold, ((t, rates), ...)
    class_visit: tuple = ()
    by_threshold: tuple = ()

    def at(self, threshold: float) -> "Rates":
        """These rates with the class rates measured at ``threshold`` (if any)."""
        return replace(self, class_visit=dict(self.by_threshold).get(threshold, ()))


@dataclass(frozen=True)
class Work:
    """What the full self-join does (module doc)."""

    band_rows: float
    candidate_rows: float
    fetched_rows: float
    groups: float  # the pools filled: one per group
    visits: float
    pairs: float
    exact_pairs: float  # pairs at the exact floor (verify="exact"), else 0
    exact_rows: float = 0.0  # rows whose shingle sets are fetched (verify="exact"), else 0
    shingle_bytes: float = 0.0  # their sets' bytes on disk
    index_rows: float = 0.0  # clusters: the rows of the index (the union-find's)
    clustered: float = 0.0  # clusters: rows in a cluster of two or more
    # the visits per class of bucket size (BUCKET_CLASSES) in kept buckets, then in the
    # others (within their rows' bucket of the band before) that are not dropped
    class_visits: tuple = ()
    # band rows read a second time: a group's shards past the rows it keeps from the
    # marking pass (selfjoin/bounded.py: keep_rows) are read again to be verified
    read_again: float = 0.0


def busy_factor() -> float:
    """How much longer than on an idle machine work takes now: the wall time of
    :data:`PROBE_CPU_SECONDS` of the calling thread's CPU, over that CPU time, at least 1."""
    wall, cpu = time.perf_counter(), time.thread_time()
    spent, x = 0.0, 0
    while spent < PROBE_CPU_SECONDS:
        for i in range(10_000):  # pure computation: no memory traffic, no I/O
            x = (x * 31 + i) & 0xFFFF
        spent = time.thread_time() - cpu
    return max(1.0, (time.perf_counter() - wall) / spent)


def work(opened: OpenedIndex, population: int, loads, pairs: float, exact_pairs: float, limit: int,
         set_bytes: np.ndarray | None = None, clustered: float | None = None) -> Work:
    """The :class:`Work` of the full self-join of ``opened`` (``population`` live rows)
    under ``limit`` bytes, from the sampled rows' :class:`.workload.Loads`, ``pairs`` and
    (``verify="exact"``) ``exact_pairs`` estimated, and with ``set_bytes`` (the sampled
    rows' shingle sets' bytes) the exact verification's rows and their sets. With
    ``clustered`` (the rows in a cluster, estimated): the clusters' self-join instead, its
    pool the one its union-find and bit set leave, its buckets pruned once linked."""
    plan = plan_for(opened)
    k, nb = plan.params.num_hashes, plan.params.num_bands
    n = population
    with_candidate = n * float(np.mean(loads.bands > 0))
    extra = {}
    if set_bytes is not None:  # every row with a candidate is shingled once, its set written
        extra = {"exact_rows": with_candidate, "shingle_bytes": n * float(np.mean((loads.bands > 0) * set_bytes))}
    if clustered is not None:
        extra.update(index_rows=float(plan.total_docs), clustered=float(clustered))
    candidates = n * float(np.mean(loads.bands))
    kept_candidates = n * float(np.mean(loads.kept_bands))
    visits = n / 2 * float(np.mean(loads.visits))
    kept_visits = n / 2 * float(np.mean(loads.kept_visits))
    by_class = n / 2 * np.mean(loads.class_visits, axis=0)
    kept_by_class = n / 2 * np.mean(loads.kept_class_visits, axis=0)
    if clustered is None:
        pruned, rows = pairs_pool(plan.total_docs, k, limit)
    else:  # the clusters prune the buckets already one component, whatever the budget
        pruned, rows = True, max(MIN_WINDOW_ROWS, pool_rows(limit, k, components_bytes(plan.total_docs, limit)))
    if with_candidate <= rows:  # one group: every candidate fetched once, nothing dropped
        return Work(plan.total_band_rows, candidates, with_candidate, 1.0, visits, pairs, exact_pairs,
                    class_visits=_by_class(kept_by_class, by_class, 0.0),
                    read_again=_read_again(plan.total_band_rows, candidates, 1.0, limit), **extra)
    # band boundaries between groups: all of them when a band's candidates fill groups
    # of their own, else one in (bands a group holds); the buckets dropped there are those
    # within the band before's (for clusters: one component once that band is linked)
    dropped = min(1.0, candidates / nb / max(rows, 1)) if pruned else 0.0
    cand = candidates - dropped * (candidates - kept_candidates)
    groups = float(np.ceil(cand / max(rows, 1)))
    return Work(plan.total_band_rows, cand, cand, groups, visits - dropped * (visits - kept_visits), pairs,
                exact_pairs, class_visits=_by_class(kept_by_class, by_class, dropped),
                read_again=_read_again(plan.total_band_rows, cand, groups, limit), **extra)


def _read_again(band_rows: float, candidates: float, groups: float, limit: int) -> float:
    """The band rows read again: in each of ``groups`` groups of an equal share of the
    ``candidates`` band rows, the shards past the first :func:`keep_rows` of them (the
    shards' band rows in proportion to their candidates; a shard that does not fit whole is
    read again, half a shard's candidates short of the rows kept on average)."""
    per_group = candidates / max(groups, 1.0)
    if per_group <= 0 or band_rows <= 0:
        return 0.0
    kept = keep_rows(limit) - candidates * min(1.0, shard_rows(limit) / band_rows) / 2
    return band_rows * min(1.0, max(0.0, 1.0 - kept / per_group))


def _by_class(kept: np.ndarray, every: np.ndarray, dropped: float) -> tuple:
    """The visits per class of bucket size in the kept buckets, then in the others (those
    within the band before's), of which the labels drop the share ``dropped``."""
    return tuple(float(v) for v in kept) + tuple(float(v) for v in (1.0 - dropped) * (every - kept))


def _choose(shards: list, count: int) -> list:
    """``count`` shards spread evenly over ``shards`` (key order: over the bands)."""
    n = len(shards)
    if n <= count:
        return list(shards)
    step = n / count
    return [shards[int(i * step + step / 2)] for i in range(count)]


def calibrate(opened: OpenedIndex, threshold: float, verify: str, limit: int, loads=None,
              thresholds: list[float] | None = None) -> Rates:
    """The :class:`Rates` of the self-join of ``opened`` at ``threshold`` under ``verify``
    and ``limit``, measured now (module doc): each rate the median of its measurements on
    :data:`CALIBRATION_REPEATS` sets of shards; with ``loads`` (the sampled rows'
    :class:`.workload.Loads`) the verification's rate per visit by class of bucket size
    too, at each of ``thresholds`` (default ``[threshold]``; :meth:`Rates.at`), timed on
    the buckets the sampled rows found (:func:`_class_sets`)."""
    by_shards = loads is None or not len(loads.bucket_docs)  # (else the shards' pairs are not verified)
    plan = plan_for(opened)
    num = int(min(MAX_SHARDS, max(CALIBRATION_SHARDS + 1, -(-plan.total_band_rows // CALIBRATION_SHARD_ROWS))))
    exact = verify == "exact"
    floor = exact_candidate_floor(threshold, plan.params.num_hashes)
    with warnings.catch_warnings():  # (the exact floor lies under the S-curve: the caller warned of its threshold)
        warnings.simplefilter("ignore", LowRecallWarning)
        at = {t: pair_shards(opened.ds, opened.column, t, num_shards=num)
              for t in ({threshold, 1.0, floor} if exact else {threshold, 1.0})}
    picks = [s.index for s in _choose(at[threshold], CALIBRATION_SHARDS)]
    exact_verify = pair_verifier("exact", opened) if exact else None
    chunk = chunk_pairs(limit, DEFAULT_CHUNK_PAIRS)
    band_rows_each = plan.total_band_rows / num

    def verified(verifier, shard, data) -> tuple[float, int]:
        return _timed(batch.num_rows for batch in verifier(shard, data, chunk))

    # the shards whose own rows are fetched and linked: every one when their pairs are
    # verified (no sampled bucket, or exact verification), else the first set's (a fetch
    # of rows spread over the signatures' file costs more the larger the file)
    real = by_shards or exact
    linked = set(picks[0::CALIBRATION_REPEATS])

    def measure(i: int):
        c = time.thread_time
        t0 = c()
        got = read_multi(at[threshold][i])
        t1 = c()
        out = {"band_rows": band_rows_each, "read": t1 - t0}
        if got is None:
            yield out
            return
        data = _loaded(plan, *got, real or i in linked, out)
        if data is None or "fetch" not in out:  # ("fetch": its own rows, to be linked)
            yield out
            return
        visits = data_visits(data)
        if visits > CALIBRATION_VISITS:
            yield out
            return
        out["visits"] = visits
        for name, t in (("lo", threshold), ("hi", 1.0), ("again", threshold)) if by_shards else ():
            out[name] = verified(pair_verifier("estimate"), at[t][i], data)  # ("again": as warm as "hi")
        if exact:
            out["floor"] = verified(pair_verifier("estimate"), at[floor][i], data)
            out["exact"] = verified(exact_verify, at[threshold][i], data)
        # (last: it orders the buckets' rows in place)
        out["links"] = _timed(a.size for _, a, _ in data_links(at[threshold][i], data))
        yield out

    for i in range(-1, -num - 1, -max(1, num // WARM_TRIES)):  # the steps' kernels loaded (numba's cache), untimed
        linked.add(num + i)
        found = "links" in next(measure(num + i))
        linked.discard(num + i)
        if found:
            break
    _serial(plan, limit)  # (its kernels loaded too)
    prefetch = (0.0, 0)
    if exact:  # the shingle sets of the sampled shards' candidate rows, as the self-join prepares them
        was, cpu = SHINGLE_STATS["prefetched_rows"], time.process_time()
        exact_verify.prepare([at[threshold][i] for i in picks])
        prefetch = (time.process_time() - cpu, SHINGLE_STATS["prefetched_rows"] - was)
    try:
        rates = _in_sets(picks, measure, lambda parts, wall, cpu, serial=True: _rates(
            parts, wall, cpu, exact, prefetch, _serial(plan, limit) if serial else {}))
        return _by_classes(opened, rates, loads, [threshold] if thresholds is None else thresholds, exact, chunk)
    finally:
        if exact:
            exact_verify.shingles.close()


def _loaded(plan, keys: np.ndarray, gids: np.ndarray, own: bool, out: dict):
    """A calibration shard's rows ``(keys, gids)`` laid out as the self-join lays out a
    group's shard (selfjoin/bounded.py: shard_groups, _group_data: its candidates marked in
    a bit set of every doc, each band row's pool row its doc's rank among the marked ones)
    over the shard's ``own`` rows' signatures (spread over the file: what they are linked
    with) or only as many rows back to back (the layout costs the same); the CPU times in
    ``out``: ``lay``, ``dense`` (rows back to back) and for ``own`` ``fetch`` (its rows)."""
    c = time.thread_time
    marks = new_marks(plan.total_docs)
    marks.fill(0)  # (its pages touched: the self-join's bit set is mapped once)
    t1 = c()
    ugids = sorted_unique(gids)
    count_unmarked(marks, ugids)
    set_marks(marks, ugids, True)
    t2 = c()
    first = min(int(ugids[0]), plan.total_docs - ugids.size)
    dense = np.arange(first, first + ugids.size, dtype=ugids.dtype)  # as many rows, back to back
    sigs, rowids, alive = pool(plan, ugids if own else dense)
    t3 = c()
    prefix = marked_ids(marks)[1]  # (once per group in the self-join: not the shard's)
    t3b = c()
    data = shard_data(keys, ranks(marks, prefix, gids), ugids, sigs, rowids, alive)
    t4 = c() - (t3b - t3)
    out.update(candidates=keys.size, fetched=ugids.size, lay=(t2 - t1) + (t4 - t3))
    if not own:
        out["dense"] = t3 - t2
        return data
    t5 = c()
    pool(plan, dense)
    out.update(fetch=t3 - t2, dense=c() - t5)
    return data


def _by_classes(opened: OpenedIndex, rates: Rates, loads, ts: list[float], exact: bool, chunk: int) -> Rates:
    """``rates`` with the verification's rates per class of bucket size at each threshold
    of ``ts`` (:attr:`Rates.by_threshold`), timed on :func:`_class_sets` of ``loads`` on
    the engine's threads (:func:`_class_rates`); ``rates`` alone without them."""
    plan = plan_for(opened)
    # (with verify="exact" the kernel verifies at the exact floor, the exact Jaccard after)
    kernel_at = [exact_candidate_floor(t, plan.params.num_hashes) if exact else t for t in ts]
    with warnings.catch_warnings():  # (the exact floor lies under the S-curve: the caller warned of its threshold)
        warnings.simplefilter("ignore", LowRecallWarning)
        shards = {t: pair_shards(opened.ds, opened.column, t, num_shards=1)[0] for t in set(kernel_at)}

    def verified(t: float, data) -> float:
        return _timed(b.num_rows for b in pair_verifier("estimate")(shards[t], data, chunk))[0]

    def by_class(item):  # each threshold on data just loaded, as the self-join verifies it
        c, keys, gids = item
        seconds, visits = [], 0
        # a call's own cost (its set-up, its batch of pairs), which the self-join pays once
        # a shard of thousands of buckets: the least of a few calls on the set's first
        # bucket cut to two rows, taken off the set's (a set of small buckets holds only
        # those the sample found, a few thousand visits)
        one = span_data(plan, keys[:2], gids[:2])
        for t in kernel_at:
            data = span_data(plan, keys, gids)
            if data is None:
                return
            spent = verified(t, data)
            fixed = min(verified(t, one) for _ in range(CALL_TRIES)) if one is not None else 0.0
            seconds.append((spent, fixed))
            visits = data_visits(data)
        yield c, visits, seconds

    found = list(run_ordered(_class_sets(loads), by_class))
    if not found:
        return rates
    return replace(rates, by_threshold=tuple((t, _class_rates(found, i, rates)) for i, t in enumerate(ts)))


def _in_sets(picks: list, measure, rates_of) -> Rates:
    """The :class:`Rates` of the shards ``picks`` measured in :data:`CALIBRATION_REPEATS`
    sets (every third shard): the shards' rates over all of them (a fit over a set would
    be another mix of buckets), the cores and the one-thread rates the median of the
    sets'; ``rates_of(parts, wall, cpu, serial=True)`` makes the rates of measured shards
    (with ``serial`` the one-thread steps timed once more)."""
    found, parts = [], []
    for j in range(CALIBRATION_REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        part = list(run_ordered(picks[j::CALIBRATION_REPEATS], measure))
        found.append(rates_of(part, time.perf_counter() - wall, time.process_time() - cpu))
        parts += part
    median = {name: float(np.median([getattr(r, name) for r in found]))
              for name in ("union_link", "index_row", "table_row", "keep_row")}
    return replace(rates_of(parts, 1.0, 1.0, False), parallel=cores_now(), **median)


def _class_sets(loads) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(class, band keys, global docs)``: :data:`CALIBRATION_REPEATS` sets of buckets of
    each class of bucket size (:data:`BUCKET_CLASSES`) and kind (``class`` counts the
    kept buckets' classes first, then the others', as :attr:`Work.class_visits`) among
    those the sampled rows found (``loads``), drawn at random (seed 0), each of about
    :data:`CALIBRATION_CLASS_VISITS` visits, sorted by ``(key, doc)`` as a shard's rows. A
    bucket of more than :data:`CALIBRATION_CLASS_ROWS` rows is cut to a random subset of
    that many (the share of its visits that pass, which costs more than one that fails,
    kept in expectation). A class with fewer buckets than sets repeats them."""
    if loads is None or not len(loads.bucket_docs):
        return []
    rng = np.random.default_rng(0)
    sizes = np.array([d.size for d in loads.bucket_docs])
    cls = size_class(sizes) + len(BUCKET_CLASSES) * ~loads.bucket_kept
    out = []
    for c in range(2 * len(BUCKET_CLASSES)):
        mine = rng.permutation(np.flatnonzero(cls == c))
        for j in range(CALIBRATION_REPEATS if mine.size else 0):
            picked = mine[j::CALIBRATION_REPEATS] if mine.size >= CALIBRATION_REPEATS else mine[[j % mine.size]]
            chosen, visits = [], 0
            for i in picked.tolist():
                docs = loads.bucket_docs[i]
                if docs.size > CALIBRATION_CLASS_ROWS:
                    docs = np.sort(rng.choice(docs, CALIBRATION_CLASS_ROWS, replace=False))
                chosen.append((int(loads.bucket_keys[i]), docs))
                visits += docs.size * (docs.size - 1) // 2
                if visits >= CALIBRATION_CLASS_VISITS:
                    break
            chosen.sort(key=lambda kd: kd[0])
            out.append((c, np.concatenate([np.full(d.size, k, dtype=np.uint64) for k, d in chosen]),
                        np.concatenate([d for _, d in chosen])))
    return out


def _class_rates(found: list, i: int, rates: Rates) -> tuple:
    """The verification's rate per visit of each class of bucket size at the ``i``-th
    threshold: the CPU time of each set of the class's buckets (``found``: ``(class,
    visits, [(CPU seconds, a call's own CPU seconds) at each threshold])``, its data just
    loaded at the first), its pairs' share included, less a verification call's own cost,
    over its visits; the median of the class's sets (a class whose sets take no longer than
    a call, which the median would price at nothing, keeps the calls' cost). A class
    without a set (the sampled rows found no bucket of it, so the work counts no visit in
    it): ``rates.visit``."""
    net: dict[int, list[float]] = {}
    gross: dict[int, list[float]] = {}
    for c, visits, seconds in found:
        if visits > 0:
            spent, fixed = seconds[i]
            net.setdefault(c, []).append(max(0.0, spent - fixed) / visits)
            gross.setdefault(c, []).append(spent / visits)
    out = []
    for c in range(2 * len(BUCKET_CLASSES)):
        rate = float(np.median(net[c])) if c in net else rates.visit
        out.append(rate if rate > 0 or c not in net else float(np.median(gross[c])))
    return tuple(out)


def _timed(counts) -> tuple[float, int]:
    """``(CPU seconds of this thread, sum)`` of consuming the iterator ``counts``."""
    t0, n = time.thread_time(), 0
    for c in counts:
        n += c
    return time.thread_time() - t0, n


def _serial(plan, limit: int) -> dict[str, float]:
    """CPU seconds per unit of the clusters' and dedup's steps on one thread, measured on
    :data:`CALIBRATION_SERIAL_ROWS` rows: links united (``union_link``), the union-find's
    members swept (``index_row``), the members' row ids read from this index and the
    clusters' table built (``table_row``), the keep order, flags and cluster count of
    dedup (``keep_row``)."""
    n = int(min(CALIBRATION_SERIAL_ROWS, plan.total_docs))
    rng = np.random.default_rng(0)
    a = rng.integers(0, n, n // 2).astype(np.uint32)
    b = np.minimum(a + rng.integers(1, 8, a.size), n - 1).astype(np.uint32)  # small clusters, as near-duplicates'
    # whose members lie anywhere in the index, as a near-duplicate's copies do (the union-find
    # and the clusters' table then read and sort in no order)
    spread = rng.permutation(n).astype(np.uint32)
    a, b = spread[a], spread[b]
    c = time.thread_time
    uf = UnionFind(n, pool_bytes(limit))
    try:
        t0 = c()
        uf.union(a, b)
        t1 = c()
        docs, roots = uf.members(new_marks(n))
        t2 = c()
    finally:
        uf.close()
    gids = np.sort(rng.choice(plan.total_docs, docs.size, replace=False)).astype(np.uint32)
    t3 = c()
    table = clusters_table(roots, row_ids(plan, gids, CALIBRATION_SERIAL_ROWS))
    t4 = c()
    rowid, cluster = table.column("_rowid").to_numpy(), table.column("cluster_id").to_numpy()
    order = np.lexsort((rowid, cluster))
    first = np.ones(order.size, dtype=np.bool_)
    first[1:] = cluster[order][1:] != cluster[order][:-1]
    np.unique(cluster)
    t5 = c()
    per = lambda t, m: t / m if m > 0 else 0.0  # noqa: E731
    return {"union_link": per(t1 - t0, a.size), "index_row": per(t2 - t1, n), "table_row": per(t4 - t3, docs.size),
            "keep_row": per(t5 - t4, docs.size)}


def cores_now() -> float:
    """The cores the engine's threads get: ``T`` threads among ``L`` runnable others on
    ``C`` cores get ``C T / (L + T)`` of them, at most ``T`` (and ``C``, the cores this
    process may run on). ``L`` is the load average of the last minute, or the others
    runnable now when fewer (:func:`runnable_others`): the minute's average still counts
    work that has ended, this process's own calibration and whatever ran just before it."""
    threads, cores = num_threads(), usable_cores()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    now = runnable_others()
    if now is not None:
        load = min(load, now)
    return min(threads, cores, cores * threads / (load + threads))


def runnable_others(readings: int = 5) -> float | None:
    """The threads runnable on the machine now besides the one asking (``/proc/loadavg``'s
    running count less one), the median of ``readings`` a few milliseconds apart; ``None``
    where it cannot be read."""
    seen = []
    for i in range(readings):
        try:
            with open(LOADAVG) as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, IndexError, ValueError):
            return None
        seen.append(max(0, running - 1))
        if i + 1 < readings:
            time.sleep(0.002)
    return float(sorted(seen)[len(seen) // 2])


def _rates(parts: list[dict], wall: float, cpu: float, exact: bool, prefetch: tuple[float, int],
           serial: dict[str, float]) -> Rates:
    """The :class:`Rates` of one measurement; ``parallel``: the engine's threads' CPU over
    wall time while they were measured (:func:`calibrate` adds the load average's)."""
    def total(key: str, i: int | None = None) -> float:
        return float(sum((p[key] if i is None else p[key][i]) for p in parts if key in p))

    per = lambda a, b: a / b if b > 0 else 0.0  # noqa: E731
    # a shard's rows lie spread over the signatures' file, as a group's do: what fetching
    # them costs beyond as many rows back to back is the group's, whatever its rows
    spread = [p for p in parts if "fetch" in p]
    dense = per(total("dense"), total("fetched"))
    group_fetch = per(max(0.0, sum(p["fetch"] - p["dense"] for p in spread)), len(spread))
    verified = [p for p in parts if "hi" in p]
    pair = _pair_rates(verified)[1]
    visit, bucket_row = _verify_rates(verified, pair)
    exact_pair = 0.0
    if exact:  # verified by exact Jaccard, less the same candidates' estimate
        exact_pair = per(max(0.0, total("exact", 0) - total("floor", 0)), total("floor", 1))
    linked = [p for p in parts if "links" in p]
    return Rates(band_row=per(total("read"), total("band_rows")), candidate_row=per(total("lay"), total("candidates")),
                 fetched_row=dense, group_fetch=group_fetch, visit=visit, bucket_row=bucket_row, pair=pair,
                 exact_pair=exact_pair, exact_row=per(*prefetch), parallel=max(1e-3, per(cpu, wall)),
                 link_row=per(sum(p["links"][0] for p in linked), sum(p["candidates"] for p in linked)), **serial)


def _pair_rates(parts: list[dict]) -> tuple[float, float]:
    """``(per visit, per pair)``: what verifying a shard at the threshold costs beyond
    verifying it at 1.0, both right after each other (its data as warm in both), fitted by
    least squares to its visits and its pairs beyond those at 1.0. At 1.0 a visit stops at
    its first unequal hash; at the threshold it reads on (the visits' share), and the
    pairs found are emitted (the pairs' share). Either alone when the fit gives the other
    a negative cost."""
    if not parts:
        return 0.0, 0.0
    x = np.array([[p["visits"], p["again"][1] - p["hi"][1]] for p in parts], dtype=np.float64)
    y = np.array([max(0.0, p["again"][0] - p["hi"][0]) for p in parts])
    if len(parts) >= 2:
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        if (coef >= 0).all():
            return float(coef[0]), float(coef[1])
    visits, pairs = x.sum(axis=0)
    by_pairs = float(((y - (y.sum() / visits if visits > 0 else 0.0) * x[:, 0]) ** 2).sum())
    by_visits = float(((y - (y.sum() / pairs if pairs > 0 else 0.0) * x[:, 1]) ** 2).sum())
    if pairs > 0 and (visits <= 0 or by_visits <= by_pairs):
        return 0.0, float(y.sum() / pairs)
    return (float(y.sum() / visits) if visits > 0 else 0.0), 0.0


def _verify_rates(parts: list[dict], pair: float) -> tuple[float, float]:
    """``(per visit, per candidate band row)``: the verification's CPU time of each shard
    at the threshold, its first (as the self-join verifies each shard: once, its data
    just loaded), less its pairs', fitted by least squares to its visits and its candidate
    band rows (a small bucket costs more per visit than a large one); the visits alone when
    the fit gives either a negative cost."""
    if not parts:
        return 0.0, 0.0
    x = np.array([[p["visits"], p["candidates"]] for p in parts], dtype=np.float64)
    y = np.array([max(0.0, p["lo"][0] - pair * p["lo"][1]) for p in parts])
    if len(parts) >= 2:
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        if (coef >= 0).all():
            return float(coef[0]), float(coef[1])
    return (float(y.sum() / x[:, 0].sum()) if x[:, 0].sum() > 0 else 0.0), 0.0


def project(w: Work, rates: Rates, rows: int, memory_limit: int, dedup: bool = False) -> Projection:
    """What the full self-join doing ``w`` would take at ``rates``, on an index of ``rows``
    rows under a budget of ``memory_limit`` bytes (module doc): ``minhash_pairs``, or for
    the work of the clusters' self-join (``w.index_rows``) ``minhash_clusters``, and with
    ``dedup`` a dry-run ``minhash_dedup``."""
    # on the engine's threads: the shards read, laid out and verified
    cpu = (w.band_rows + w.read_again) * rates.band_row + w.candidate_rows * rates.candidate_row
    # on the self-join's own thread: each group's pool filled, the clusters' one-thread steps
    serial = w.fetched_rows * rates.fetched_row + w.groups * rates.group_fetch
    if w.index_rows and not w.exact_rows:  # links to the buckets' representatives
        cpu += w.candidate_rows * rates.link_row
    else:  # every pair of a bucket visited (pairs; the exact components' links)
        cpu += (_visits_cpu(w, rates) + max(w.exact_pairs, 0.0) * rates.exact_pair + w.exact_rows * rates.exact_row)
    if w.index_rows:
        serial += (w.candidate_rows * rates.union_link + w.index_rows * rates.index_row
                   + w.clustered * (rates.table_row + (rates.keep_row if dedup else 0.0)))
    peak = SELF_JOIN_BASE_BYTES + pool_bytes(memory_limit) + rows * SELF_JOIN_ROW_BYTES
    peak += int(w.clustered * CLUSTERED_ROW_BYTES)
    if w.exact_rows > 0:  # exact verification's shingle sets: their index, Lance's text reader
        peak += int(w.exact_rows * INDEX_BYTES) + TEXT_READER_BYTES
    seconds = cpu / rates.parallel + serial / min(1.0, rates.parallel)
    return Projection(float(seconds), int(peak), int(w.shingle_bytes), float(cpu + serial))


def _visits_cpu(w: Work, rates: Rates) -> float:
    """The verification's CPU time: each class of bucket size's visits at its rate (its
    pairs' share included), when both are known; else every visit at ``rates.visit``,
    every candidate band row at ``rates.bucket_row`` and every pair at ``rates.pair``."""
    if rates.class_visit and len(w.class_visits) == len(rates.class_visit):
        return float(np.dot(w.class_visits, rates.class_visit))
    return w.visits * rates.visit + w.candidate_rows * rates.bucket_row + max(w.pairs, 0.0) * rates.pair


def clusters_spill(total_docs: int, memory_limit: int) -> int:
    """The bytes of the temporary file the clusters' self-join of ``total_docs`` rows
    writes under ``memory_limit``: its union-find's, once spilled, else 0 (module doc)."""
    return parent_bytes(total_docs) if spills(total_docs, pool_bytes(memory_limit)) else 0
