"""What a full ``minhash_pairs`` would cost on this machine: seconds, peak memory and
temporary disk (``docs/estimate.md``, *What the full run would cost*): the work the full
run would do (:class:`Work`) at this machine's rates of its steps (:class:`Rates`,
measured by :func:`~.calibration.calibrate`).

**Work.** The self-join (:mod:`lance_minhash_sql.selfjoin.steps`) reads every band row
of the index, keeps the buckets of two rows or more (the *candidate band rows*), reads
the signatures of their rows into a pool group by group (the *fetched rows*), visits
every pair of rows of each bucket (the *visits*) and emits the pairs that pass. How many
of each: :class:`Work`, from the sampled rows' buckets (:mod:`.workload`) and the
planner's own sizes (:func:`~lance_minhash_sql.selfjoin.sizing.pool_rows` under the
budget): when one pool holds every row with a candidate, each is fetched once and no
bucket is dropped; otherwise a bucket is fetched per group and the labels drop the
buckets contained in the band before's (``workload.py``), for the share of band
boundaries that fall between groups. The visits are counted per class of bucket size
(:data:`~lance_minhash_sql.core.tuning.BUCKET_CLASSES`), in the kept buckets and in the
others (:attr:`Work.class_visits`). A group's shards past the band rows it keeps from its
marking pass (:func:`~lance_minhash_sql.selfjoin.sizing.keep_rows`) are read again
(:attr:`Work.read_again`).

**Rates.** The CPU seconds of each step per unit of its work, on this machine and this
index (:class:`Rates`): the self-join's own steps timed on a few small shards of the
index and on the sampled rows' buckets (:mod:`.calibration`).

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
(:attr:`Rates.parallel`: :func:`~.machine_load.cores_now`, from the load, the last
minute's or the threads runnable now when fewer, and the cores this process may run on),
plus the pool fills' and the clusters' one-thread steps' CPU over at most one core.

**Memory.** Peak resident memory, a process that loaded the engine included:

    peak_memory = SELF_JOIN_BASE_BYTES + pool + rows * SELF_JOIN_ROW_BYTES
                  (+ clustered rows * CLUSTERED_ROW_BYTES for clusters and dedup)

(with ``verify="exact"`` plus the shingle sets' index, ``INDEX_BYTES`` a candidate row
while that fits the budget's ``sets`` part, else none: it is held in files, and Lance's
text reader, ``TEXT_READER_BYTES``; ``pool`` the budget's ``pool`` part
(:class:`lance_minhash_sql.core.budget.Budget`) filled with candidates' signatures; per row, the pairs' labels,
the candidates' bit set and the index pages the shards map while they read them, which
count in the resident set and which a budget does not bound).

**Temporary disk.** The pairs' self-join verified by the estimate holds everything within
its budget and writes no temporary file: ``temp_disk`` is 0. With ``verify="exact"`` it
writes the candidate rows' shingle sets (8 bytes a shingle) to one: ``temp_disk`` is
their bytes, ``N`` times the sampled rows' mean of ``8 |set|`` over those with a
candidate. The clusters' self-join (``minhash_clusters``,
``minhash_dedup``) writes one when its union-find of every row and the candidates' bit
set pass their part of the pool (:func:`~lance_minhash_sql.selfjoin.parent.in_file`):
the union-find's file, :func:`~lance_minhash_sql.selfjoin.parent.parent_bytes`
(:func:`clusters_temp_bytes`).

``benchmarks/estimate.py`` measures projected against measured.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.tuning import (CLUSTERED_ROW_BYTES, MIN_WINDOW_ROWS, SELF_JOIN_BASE_BYTES,
                                           SELF_JOIN_ROW_BYTES, TEXT_READER_BYTES)
from lance_minhash_sql.index.opened import OpenedIndex
from lance_minhash_sql.selfjoin.sizing import components_bytes, keep_rows, pairs_pool, pool_rows, shard_rows
from lance_minhash_sql.selfjoin.parent import in_file, parent_bytes
from lance_minhash_sql.selfjoin.shingles import INDEX_BYTES, index_in_memory
from lance_minhash_sql.selfjoin.shards import plan_for

__all__ = ["Projection", "Rates", "Work", "work", "project", "clusters_temp_bytes"]


@dataclass(frozen=True)
class Projection:
    seconds: float
    peak_memory: int
    temp_disk: int
    cpu_seconds: float


@dataclass(frozen=True)
class Rates:
    """CPU seconds of the self-join's steps on this machine and index
    (:func:`~.calibration.calibrate`), and :attr:`parallel`, the cores its threads get
    (module doc, *Seconds*)."""

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
    # marking pass (selfjoin/sizing.py: keep_rows) are read again to be verified
    read_again: float = 0.0


def work(opened: OpenedIndex, population: int, loads, pairs: float, exact_pairs: float, budget: Budget,
         set_bytes: np.ndarray | None = None, clustered: float | None = None) -> Work:
    """The :class:`Work` of the full self-join of ``opened`` (``population`` live rows)
    within ``budget``, from the sampled rows' :class:`.workload.Loads`, ``pairs`` and
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
        pruned, rows = True, pairs_pool(plan.total_docs, k, budget, set_bytes is not None)[1]  # (labels: memory or file)
    else:  # the clusters prune the buckets already one component, whatever the budget
        pruned, rows = True, max(MIN_WINDOW_ROWS, pool_rows(budget, k, components_bytes(plan.total_docs, budget)))
    if with_candidate <= rows:  # one group: every candidate fetched once, nothing dropped
        return Work(plan.total_band_rows, candidates, with_candidate, 1.0, visits, pairs, exact_pairs,
                    class_visits=_by_class(kept_by_class, by_class, 0.0),
                    read_again=_read_again(plan.total_band_rows, candidates, 1.0, budget), **extra)
    # band boundaries between groups: all of them when a band's candidates fill groups
    # of their own, else one in (bands a group holds); the buckets dropped there are those
    # within the band before's (for clusters: one component once that band is linked)
    dropped = min(1.0, candidates / nb / max(rows, 1)) if pruned else 0.0
    cand = candidates - dropped * (candidates - kept_candidates)
    groups = float(np.ceil(cand / max(rows, 1)))
    return Work(plan.total_band_rows, cand, cand, groups, visits - dropped * (visits - kept_visits), pairs,
                exact_pairs, class_visits=_by_class(kept_by_class, by_class, dropped),
                read_again=_read_again(plan.total_band_rows, cand, groups, budget), **extra)


def _read_again(band_rows: float, candidates: float, groups: float, budget: Budget) -> float:
    """The band rows read again: in each of ``groups`` groups of an equal share of the
    ``candidates`` band rows, the shards past the first :func:`keep_rows` of them (the
    shards' band rows in proportion to their candidates; a shard that does not fit whole is
    read again, half a shard's candidates short of the rows kept on average)."""
    per_group = candidates / max(groups, 1.0)
    if per_group <= 0 or band_rows <= 0:
        return 0.0
    kept = keep_rows(budget) - candidates * min(1.0, shard_rows(budget) / band_rows) / 2
    return band_rows * min(1.0, max(0.0, 1.0 - kept / per_group))


def _by_class(kept: np.ndarray, every: np.ndarray, dropped: float) -> tuple:
    """The visits per class of bucket size in the kept buckets, then in the others (those
    within the band before's), of which the labels drop the share ``dropped``."""
    return tuple(float(v) for v in kept) + tuple(float(v) for v in (1.0 - dropped) * (every - kept))


def project(w: Work, rates: Rates, rows: int, budget: Budget, dedup: bool = False) -> Projection:
    """What the full self-join doing ``w`` would take at ``rates``, on an index of ``rows``
    rows within ``budget`` (module doc): ``minhash_pairs``, or for
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
    peak = SELF_JOIN_BASE_BYTES + budget.pool + rows * SELF_JOIN_ROW_BYTES
    peak += int(w.clustered * CLUSTERED_ROW_BYTES)
    if w.exact_rows > 0:  # exact verification's shingle sets: their index (unless in files), Lance's text reader
        index = int(w.exact_rows * INDEX_BYTES)
        peak += (index if index_in_memory(int(w.exact_rows), budget.sets) else 0) + TEXT_READER_BYTES
    seconds = cpu / rates.parallel + serial / min(1.0, rates.parallel)
    return Projection(float(seconds), int(peak), int(w.shingle_bytes), float(cpu + serial))


def _visits_cpu(w: Work, rates: Rates) -> float:
    """The verification's CPU time: each class of bucket size's visits at its rate (its
    pairs' share included), when both are known; else every visit at ``rates.visit``,
    every candidate band row at ``rates.bucket_row`` and every pair at ``rates.pair``."""
    if rates.class_visit and len(w.class_visits) == len(rates.class_visit):
        return float(np.dot(w.class_visits, rates.class_visit))
    return w.visits * rates.visit + w.candidate_rows * rates.bucket_row + max(w.pairs, 0.0) * rates.pair


def clusters_temp_bytes(total_docs: int, budget: Budget) -> int:
    """The bytes of the temporary file the clusters' self-join of ``total_docs`` rows
    writes within ``budget``: its union-find's, once in its file, else 0 (module doc)."""
    return parent_bytes(total_docs) if in_file(total_docs, budget) else 0
