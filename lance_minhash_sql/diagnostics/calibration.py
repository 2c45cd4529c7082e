"""This machine's rates of the self-join's steps, measured now on small shards of this
index and on the sampled rows' buckets: the :class:`~.costs.Rates` at which :mod:`.costs`
prices the full run's work (``docs/estimate.md``, *What the full run would cost*).

**Rates.** :func:`calibrate` runs the self-join's own steps on
:data:`CALIBRATION_SHARDS` small key-range shards of this index (spread evenly over the
bands, :func:`~lance_minhash_sql.selfjoin.shards.pair_shards`), on the engine's threads:
each shard's band rows read (:func:`~lance_minhash_sql.selfjoin.pool.read_multi`), its
buckets laid out as the self-join lays out a group's shard (its candidates marked in a bit
set of every doc, a band row's pool row its doc's rank among the marked ones:
:func:`~lance_minhash_sql.kernels.components.ranks`,
:meth:`~lance_minhash_sql.selfjoin.pool.MarkedPool.data`), as many rows' signatures fetched
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
rate is the median of the sets'. A shard whose buckets hold more than
:data:`CALIBRATION_VISITS` pairs is read and fetched but not verified (a giant bucket
would cost the calibration more than the sample).

**Cores.** The cores the engine's threads get (:attr:`~.costs.Rates.parallel`) are
those the machine's load leaves them when the calibration ends
(:func:`~.machine_load.cores_now`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np

from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import LowRecallWarning
from lance_minhash_sql.core.banding import candidate_floor, exact_candidate_floor
from lance_minhash_sql.core.tuning import (BUCKET_CLASSES, CALIBRATION_CLASS_ROWS, CALIBRATION_CLASS_VISITS,
                                           CALIBRATION_REPEATS, CALIBRATION_SERIAL_ROWS, CALIBRATION_SHARD_ROWS,
                                           CALIBRATION_SHARDS, CALIBRATION_VISITS, DEFAULT_CHUNK_PAIRS, MAX_SHARDS)
from lance_minhash_sql.diagnostics.costs import Rates
from lance_minhash_sql.diagnostics.machine_load import cores_now
from lance_minhash_sql.diagnostics.workload import size_class
from lance_minhash_sql.kernels.components import count_unmarked, marked_ids, new_marks, set_marks
from lance_minhash_sql.index.opened import OpenedIndex
from lance_minhash_sql.runtime.pipeline import run_ordered
from lance_minhash_sql.selfjoin.clusters_table import clusters_table
from lance_minhash_sql.selfjoin.links import data_links
from lance_minhash_sql.selfjoin.parent import UnionFind
from lance_minhash_sql.selfjoin.pool import MarkedPool, pool, read_multi, row_ids, span_data
from lance_minhash_sql.selfjoin.shingles import STATS as SHINGLE_STATS
from lance_minhash_sql.selfjoin.shards import pair_shards, plan_for
from lance_minhash_sql.selfjoin.sizing import chunk_pairs
from lance_minhash_sql.selfjoin.verify import data_visits, pair_verifier

__all__ = ["calibrate"]


CALL_TRIES = 3  # calls on one bucket of two rows timed for a verification call's own cost (the least)
WARM_TRIES = 4  # shards tried (from the last) until one has pairs to verify: the kernels' first calls, untimed


def _choose(shards: list, count: int) -> list:
    """``count`` shards spread evenly over ``shards`` (key order: over the bands)."""
    n = len(shards)
    if n <= count:
        return list(shards)
    step = n / count
    return [shards[int(i * step + step / 2)] for i in range(count)]


def calibrate(opened: OpenedIndex, threshold: float, verify: str, budget: Budget, loads=None,
              thresholds: list[float] | None = None) -> Rates:
    """The :class:`Rates` of the self-join of ``opened`` at ``threshold`` under ``verify``
    and ``budget``, measured now (module doc): each rate the median of its measurements on
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
    chunk = chunk_pairs(budget, DEFAULT_CHUNK_PAIRS)
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
        out["links"] = _timed(link.a.size for link in data_links(at[threshold][i], data))
        yield out

    for i in range(-1, -num - 1, -max(1, num // WARM_TRIES)):  # the steps' kernels loaded (numba's cache), untimed
        linked.add(num + i)
        found = "links" in next(measure(num + i))
        linked.discard(num + i)
        if found:
            break
    _serial(plan, budget)  # (its kernels loaded too)
    prefetch = (0.0, 0)
    if exact:  # the shingle sets of the sampled shards' candidate rows, as the self-join prepares them
        was, cpu = SHINGLE_STATS["prefetched_rows"], time.process_time()
        exact_verify.prepare([at[threshold][i] for i in picks])
        prefetch = (time.process_time() - cpu, SHINGLE_STATS["prefetched_rows"] - was)
    try:
        rates = _in_sets(picks, measure, lambda parts, wall, cpu, serial=True: _rates(
            parts, wall, cpu, exact, prefetch, _serial(plan, budget) if serial else {}))
        return _by_classes(opened, rates, loads, [threshold] if thresholds is None else thresholds, exact, chunk)
    finally:
        if exact:
            exact_verify.shingles.close()


def _loaded(plan, keys: np.ndarray, gids: np.ndarray, own: bool, out: dict):
    """A calibration shard's rows ``(keys, gids)`` laid out as the self-join lays out a
    group's shard (selfjoin/groups.py: shard_groups, group_loader: its candidates marked in
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
    data = MarkedPool(marks, prefix, ugids, sigs, rowids, alive).data(keys, gids)  # (as a group's shard: shared.py)
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
    kernel_at = [candidate_floor(t, plan.params.num_hashes, "exact" if exact else "estimate") for t in ts]
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
    kept buckets' classes first, then the others', as :attr:`~.costs.Work.class_visits`) among
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


def _serial(plan, budget: Budget) -> dict[str, float]:
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
    uf = UnionFind(n, budget)
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
