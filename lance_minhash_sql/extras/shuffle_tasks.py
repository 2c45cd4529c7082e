"""The tasks of the self-join's shuffle on Ray; :mod:`.shuffle` is the driver that plans
the job, submits these stage by stage and describes the whole run (``docs/distributed.md``,
*The self-join as a shuffle*).

Each task is given a :class:`ShuffleJob` (bounds and offsets, no data), opens the index
again at the driver's version and returns what it made through Ray's object store, its
meter last: :func:`band_task` (stage 1), :func:`request_task` (stage 2),
:func:`signature_task` (stage 4), :func:`verify_task` (stage 5) and :func:`rowid_task`
(stage 6). Ray is imported inside the tasks only: importing this module does not import it.

Each task holds at most its budget beside the process: a band task one shard's slice, a
request task its shard's slices, a signature task one block (and its run's requests, 4
bytes per doc asked: these grow with the segment, not with the budget), a verify task one
pool and one shard's rows. While a task runs, its worker's segment cache
(``LANCE_MINHASH_CACHE_BYTES``, 1 GiB by default) holds at most the budget's ``cache``
part (:class:`lance_minhash_sql.core.budget.Budget`), so on an object store no segment is read whole beside
the budget: a signature task's dense requests are ranged reads in file order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from lance_minhash_sql.core.arrays import readonly, sorted_unique
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import DistributedTaskError
from lance_minhash_sql.core.tuning import DEFAULT_CHUNK_PAIRS, MIN_WINDOW_ROWS, SHUFFLE_BLOCK_SHARE
from lance_minhash_sql.core.usage import PeakSampler, cpu_seconds, peak_rss_mb, reset_peak_rss, rss_mb, status_mb
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.io.scan import open_dataset
from lance_minhash_sql.runtime.cache import capped_cache
from lance_minhash_sql.runtime.memory import release_memory
from lance_minhash_sql.selfjoin.giant import alone_links
from lance_minhash_sql.selfjoin.pool import STATS as POOL_STATS
from lance_minhash_sql.selfjoin.pool import candidate_rows, fetch_signatures, read_multi, row_ids, shard_data
from lance_minhash_sql.selfjoin.links import LinkRule, Links, link_verifier
from lance_minhash_sql.selfjoin.verify import pair_verifier, prepare
from lance_minhash_sql.selfjoin.shards import Plan, Shard, plan_for, read_run
from lance_minhash_sql.selfjoin.sizing import chunk_pairs, pool_size
from lance_minhash_sql.selfjoin.steps import run_shard, shards_for

__all__ = ["ShuffleJob", "shuffle_job", "band_task", "request_task", "signature_task", "verify_task", "rowid_task"]

_EMPTY_DOCS = readonly(np.empty(0, dtype=np.uint32))


@dataclass(frozen=True)
class ShuffleJob:
    """What every task of one shuffle is given (small: bounds and offsets, no data)."""

    uri: str
    version: int
    column: str
    storage_options: dict | None
    threshold: float
    budget: Budget  # what a task holds beside its process
    bounds: tuple  # (lo, hi) band keys of each shard
    offsets: tuple  # first global doc of each run, + total
    k: int
    max_docs: int  # candidates a pool holds
    block_rows: int  # signature rows a signature task reads at a time
    rule: LinkRule | None = None  # how links are verified (clusters); None for pairs

    @property
    def runs(self) -> int:
        return len(self.offsets) - 1

    @property
    def shards(self) -> int:
        return len(self.bounds)

    def plan(self) -> Plan:
        """The driver's plan, opened again in this task (at the driver's version)."""
        ds = open_dataset(self.uri, self.storage_options, self.version)
        plan = plan_for(open_index(ds, self.column, self.storage_options))
        if tuple(int(x) for x in plan.offsets) != self.offsets:
            raise DistributedTaskError(
                f"a task opened the index on {self.column!r} of {self.uri!r} (version {self.version}) with other "
                f"runs than the driver ({plan.offsets.tolist()} vs {list(self.offsets)}); install the same "
                "lance-minhash-sql version on every worker")
        return plan

    def shard(self, plan: Plan, index: int) -> Shard:
        lo, hi = self.bounds[index]
        return Shard(index, self.shards, lo, hi, self.threshold, plan)


def shuffle_job(dataset, column: str, threshold, budget: Budget, storage_options,
                rule: LinkRule | None = None) -> ShuffleJob:
    """The job of one shuffle, made on the driver: the key-range shards of the index on
    ``column`` planned for ``budget`` a task (under the links' ``rule`` for clusters),
    the pool and the signature block that budget holds."""
    shards = shards_for(dataset, column, threshold, budget, storage_options, rule)
    plan = shards[0].plan
    k = plan.params.num_hashes
    max_docs = pool_size(budget, k)
    return ShuffleJob(plan.opened.uri, int(plan.opened.version), column, storage_options, shards[0].threshold, budget,
                      tuple((s.lo, s.hi) for s in shards), tuple(int(x) for x in plan.offsets), k, max_docs,
                      max(MIN_WINDOW_ROWS, int(max_docs * SHUFFLE_BLOCK_SHARE)), rule)


class _Task:
    """A task's meter (``with _Task(job) as meter:``): its seconds, CPU seconds, RSS at its
    start, peak RSS (the high-water mark reset at the start) and the peak of its anonymous
    memory over its start (sampled: what the budget bounds, without the object store's
    shared pages or mapped files). Meanwhile the worker's
    segment cache holds at most the budget's ``cache`` part
    (:func:`lance_minhash_sql.runtime.cache.capped_cache`: no segment read whole beside
    it); at the end the heap's free pages go back to the OS."""

    def __init__(self, job: ShuffleJob):
        self.cap = capped_cache(job.budget.cache)

    def __enter__(self) -> "_Task":
        self.cap.__enter__()
        reset_peak_rss()
        self.start_mb = rss_mb()
        self.anon = PeakSampler("RssAnon").__enter__()
        self.t0, self.cpu0 = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(self, *exc) -> None:
        self.anon.__exit__(*exc)
        self.cap.__exit__(*exc)
        release_memory()  # the heap's freed pages back to the OS: the worker's next task starts low

    def done(self, **counts) -> dict:
        return {"seconds": time.perf_counter() - self.t0, "cpu_seconds": cpu_seconds() - self.cpu0,
                "start_mb": self.start_mb, "peak_mb": peak_rss_mb(), "anon_mb": self.anon.rise("RssAnon"),
                **status_mb("RssShmem"), **counts}


# --------------------------------------------------------------------------- tasks


def band_task(job: ShuffleJob, run: int):
    """Stage 1: the run's band rows of each shard, one object per shard, then the meter."""
    with _Task(job) as meter:
        yield from _bands(meter, job, run)


def _bands(meter: _Task, job: ShuffleJob, run: int):
    entry = job.plan().entries[run]
    rows = 0
    for lo, hi in job.bounds:
        keys, docs = read_run(entry, lo, hi)
        rows += int(keys.size)
        yield keys, docs
        del keys, docs
    yield meter.done(rows=rows)


def request_task(job: ShuffleJob, index: int, slices: list):
    """Stage 2: ``(rows, info, request of run 0, ..., request of run R-1)``."""
    with _Task(job) as meter:
        return _requests(meter, job, index, slices)


def _requests(meter: _Task, job: ShuffleJob, index: int, slices: list):
    import ray

    parts = [(r, keys, docs) for r, (keys, docs) in enumerate(ray.get(slices)) if keys.size]
    requests = [_EMPTY_DOCS] * job.runs
    rows, candidates, over = None, 0, False
    got = candidate_rows(parts, np.asarray(job.offsets, dtype=np.int64))  # (as a shard's own read: pool.read_multi)
    del parts
    if got is not None:
        keys, gids = got
        ugids = sorted_unique(gids)
        candidates = int(ugids.size)
        over = candidates > job.max_docs
        if not over:
            at = np.searchsorted(ugids, np.asarray(job.offsets, dtype=np.int64))
            requests = [(ugids[at[r]:at[r + 1]] - np.uint32(job.offsets[r])).astype(np.uint32)
                        for r in range(job.runs)]
            rows = (keys, gids)
    info = meter.done(band_rows=0 if rows is None else int(rows[0].size), candidates=candidates, over=over)
    return (rows, info, *requests)


def signature_task(job: ShuffleJob, run: int, sizes: list, requests: list):
    """Stage 4: the layout (the group of each object that follows), one object per block
    and group that asked (``(docs, signatures, row ids)``), then the meter. ``requests``:
    every shard's request of this run, group after group (``sizes`` shards each)."""
    with _Task(job) as meter:
        yield from _signatures(meter, job, run, sizes, requests)


def _signatures(meter: _Task, job: ShuffleJob, run: int, sizes: list, requests: list):
    import ray

    plan = job.plan()
    flat = ray.get(requests)
    wanted, at = [], 0
    for n in sizes:  # a group's request: the union of its shards'
        parts = [w for w in flat[at:at + n] if w.size]
        at += n
        wanted.append(parts[0] if len(parts) == 1 else sorted_unique(np.concatenate(parts)) if parts
                      else _EMPTY_DOCS)
    del flat, parts
    asked = [w for w in wanted if w.size]
    union = sorted_unique(np.concatenate(asked)) if asked else _EMPTY_DOCS
    del asked
    cuts = []  # (block start, block end, group, first, end of its request)
    for b0 in range(0, union.size, job.block_rows):
        b1 = min(b0 + job.block_rows, union.size)
        first, last = union[b0], union[b1 - 1]
        for g, w in enumerate(wanted):
            a, b = int(np.searchsorted(w, first, "left")), int(np.searchsorted(w, last, "right"))
            if b > a:
                cuts.append((b0, b1, g, a, b))
    yield np.asarray([c[2] for c in cuts], dtype=np.int64)
    out = np.empty((min(job.block_rows, union.size), job.k), dtype=np.uint16)
    offset = np.uint32(job.offsets[run])
    block, sent = (-1, -1), 0
    rowids = None
    for b0, b1, g, a, b in cuts:
        if (b0, b1) != block:
            block = (b0, b1)
            rowids = fetch_signatures(plan, union[b0:b1] + offset, out[:b1 - b0])
        docs = wanted[g][a:b]
        at = np.searchsorted(union[b0:b1], docs)
        yield docs + offset, out[at], rowids[at]
        sent += b - a
    yield meter.done(read=int(union.size), sent=sent, blocks=-(-union.size // job.block_rows),
                     read_bytes=int(union.size) * 2 * job.k)


def verify_task(job: ShuffleJob, indices: list, rows: list, infos: list, blocks: list, bound: int, what: str,
                 verify: str):
    """Stage 5: the record batches (``what="pairs"``) or ``(a, b)`` links of a group of
    consecutive shards ``indices`` over one pool, shard after shard, then the meter.
    ``rows``: refs of the shards' rows (read one shard at a time); ``infos``: the request
    tasks' counts; ``blocks``: refs of the group's signature objects, runs in order and
    each run's blocks in doc order (so the pool's docs ascend), at most ``bound`` docs."""
    with _Task(job) as meter:
        yield from _verified(meter, job, indices, rows, infos, blocks, bound, what, verify)


def _verified(meter: _Task, job: ShuffleJob, indices: list, rows: list, infos: list, blocks: list, bound: int,
              what: str, verify: str):
    import ray

    POOL_STATS.reset()  # this task's reads alone (a worker runs one task at a time)
    plan = job.plan()
    exact = verify == "exact"
    if what == "pairs":
        pairs_of = pair_verifier(verify, plan.opened)
    else:
        links_of = link_verifier(job.rule, plan.opened)
    over = len(indices) == 1 and infos[0]["over"]
    pool, out = 0, 0
    if over:
        shard = job.shard(plan, indices[0])
        if what == "pairs":
            items = run_shard(shard, job.budget, pairs_of, DEFAULT_CHUNK_PAIRS, exact)
        else:
            items = _over_pool_links(shard, job, links_of)
        for item in items:
            out += item.num_rows if what == "pairs" else int(item.a.size)
            yield item if what == "pairs" else (item.a, item.b)
    elif blocks:
        ugids = np.empty(bound, dtype=np.uint32)
        sigs = np.empty((bound, job.k), dtype=np.uint16)
        rowids = np.empty(bound, dtype=np.uint64)
        for ref in blocks:
            got_gids, got_sigs, got_rowids = ray.get(ref)
            n = got_gids.size
            ugids[pool:pool + n], sigs[pool:pool + n], rowids[pool:pool + n] = got_gids, got_sigs, got_rowids
            pool += n
            del got_gids, got_sigs, got_rowids
        ugids, sigs, rowids = ugids[:pool], sigs[:pool], rowids[:pool]
        prepare(pairs_of if what == "pairs" else links_of, [job.shard(plan, i) for i in indices], ugids, job.budget)
        liveness = plan.opened.liveness
        alive = None if liveness.trivial else liveness.alive(rowids)
        for index, ref in zip(indices, rows):
            got = ray.get(ref)
            if got is None:
                continue
            shard = job.shard(plan, index)
            keys, gids = got
            data = shard_data(keys, np.searchsorted(ugids, gids).astype(np.uint32), ugids, sigs, rowids, alive)
            del got
            if data is None:
                continue
            if what == "pairs":
                for batch in pairs_of(shard, data, chunk_pairs(job.budget, DEFAULT_CHUNK_PAIRS)):
                    out += batch.num_rows
                    yield batch
            else:
                for link in links_of(shard, data):
                    out += int(link.a.size)
                    yield link.a, link.b
            del data
    yield meter.done(pool=max(pool, POOL_STATS["max_pool_rows"]), out=out, over=over)


def _over_pool_links(shard: Shard, job: ShuffleJob, links_of) -> Iterator[Links]:
    """Links of a shard whose candidates exceed a pool, window by window as the single
    process takes such a shard (its candidates read where they lie, a bucket larger than
    a window linked in chunks of rows)."""
    got = read_multi(shard)
    if got is not None:
        prepare(links_of, [shard], got[1], job.budget)
        yield from alone_links(shard, *got, job.max_docs, links_of, job.rule.max_reps)


def rowid_task(job: ShuffleJob, gids: np.ndarray) -> tuple:
    """Stage 6: row ids of sorted global ``gids`` (of one run), and the meter."""
    with _Task(job) as meter:
        return _rowids(meter, job, gids)


def _rowids(meter: _Task, job: ShuffleJob, gids: np.ndarray) -> tuple:
    rowids = row_ids(job.plan(), gids, job.block_rows)
    return rowids, meter.done(rows=int(gids.size))
