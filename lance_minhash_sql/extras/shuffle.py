"""The self-join as a shuffle on Ray: pairs and clusters whose candidate signatures are
read once, in doc order, by the task of the segment that holds them, and sent to the
shards that asked for them (``docs/distributed.md``, *The self-join as a shuffle*).

>>> import lance_minhash_sql as lms
>>> for batch in lms.pairs("s3://bucket/corpus.lance", "text", 0.8, memory_limit="1GiB", executor="ray"): ...  # doctest: +SKIP

Every arrow below is Ray's object store (task returns and the items of streaming
generator tasks): no file is written, no file system is shared, Ray schedules every
task. The plan is the single-process plan under a budget (:mod:`lance_minhash_sql.selfjoin.bounded`): the same
key-range shards (:func:`lance_minhash_sql.selfjoin.bounded.shard_rows` of ``memory_limit``), the same pool, the
same verifiers (:mod:`lance_minhash_sql.selfjoin.verify`, :mod:`lance_minhash_sql.selfjoin.links`),
so the answers are those of the local executor in every mode. This module runs the stages;
``extras/ray_executor.py`` is the executor that calls it.

1. **Band tasks**, one per run (a segment, or the rows no segment covers): the run's band
   rows read key range by key range (``bands.lance`` is sorted by key, so this is one
   pass over the file), one object per shard: ``(keys, docs)``, 12 bytes a row.
2. **Request tasks**, one per shard: the shard's slices of every run merged by
   ``(key, global doc)``, the buckets of two rows or more kept; returned are those rows,
   the count of the shard's distinct candidates, and per run the sorted docs whose
   signatures the shard needs (one object per run). A shard whose candidates exceed what
   a task's pool holds (:func:`lance_minhash_sql.selfjoin.bounded.pool_rows`) asks for nothing: its verify task
   takes it window by window, reading its candidates where they lie, a giant bucket in
   chunks of rows (:func:`lance_minhash_sql.selfjoin.bounded.bounded_shard_pairs`, :func:`lance_minhash_sql.selfjoin.bounded.shard_links`).
3. **Groups**: the driver cuts the shards into groups of consecutive shards whose
   candidates fit one pool (as the single process's marking pass does, from the counts).
4. **Signature tasks**, one per run: each group's request (the union of its shards'),
   and the union of all groups' requests read once, in doc order, a quarter of a pool at
   a time (:func:`lance_minhash_sql.selfjoin.pool.fetch_signatures`: a local file's memory map gathered page by
   page; on an object store ranged reads of nearby rows, in file order, so dense requests
   read the file sequentially, a few MiB a read); each
   block cut into one object per group that asked (its docs, their signatures and row
   ids). The first object streamed is the layout: the group each following object is for.
5. **Verify tasks**, one per group: the group's pool from its blocks (docs ascending, as
   in the single process), deleted docs dropped, then each shard's rows in turn over the
   pool, verified by :func:`lance_minhash_sql.selfjoin.verify.data_pairs` (record batches streamed back, in shard
   order) or :func:`lance_minhash_sql.selfjoin.links.data_links` (links as global docs).
6. **Clusters**: the driver unions the links as they arrive (one ``int32`` a doc, held as
   the single process holds it: :class:`lance_minhash_sql.selfjoin.parent.UnionFind`,
   spilled to a temporary file past its share of ``memory_limit``); *row id tasks*, one per run,
   give the members' row ids (:func:`lance_minhash_sql.selfjoin.pool.row_ids`); the table is
   :func:`lance_minhash_sql.selfjoin.bounded.clusters_table`, as in one process.

Each task holds at most its budget beside the process: a band task one shard's slice, a
request task its shard's slices, a signature task one block (and its run's requests, 4
bytes per doc asked: these grow with the segment, not with the budget), a verify task one
pool and one shard's rows. While a task runs, its worker's segment cache
(``LANCE_MINHASH_CACHE_BYTES``, 1 GiB by default) holds at most an eighth of the budget
(:data:`SHUFFLE_CACHE_SHARE`), so on an object store no segment is read whole beside
the budget: a signature task's dense requests are ranged reads in file order. Stages run
one after the other (each needs all of the previous one's output); Ray spills objects to
its workers' local disks when its object store is full.

``stats`` (a dict, optional) receives what the run moved and held: counts of objects and
rows per stage, bytes shuffled, signature rows read, the largest pool, and per stage the
tasks' seconds, peak RSS (each task resets its process's high-water mark first,
:func:`lance_minhash_sql.core.usage.reset_peak_rss`), RSS at its start, the largest rise
of a task's anonymous memory over its start (``anon_mb``, sampled), and the object
store's shared pages resident in its process at its end (``RssShmem``: objects it wrote
or read count in its RSS too, not in its anonymous memory).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.errors import DistributedTaskError
from lance_minhash_sql.core.tuning import DEFAULT_CHUNK_PAIRS, MIN_WINDOW_ROWS, SHUFFLE_BLOCK_SHARE, SHUFFLE_CACHE_SHARE
from lance_minhash_sql.core.usage import PeakSampler, cpu_seconds, peak_rss_mb, reset_peak_rss, rss_mb, status_mb
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.io.scan import open_dataset
from lance_minhash_sql.kernels.components import new_marks
from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.kernels.pairs import multi_rows
from lance_minhash_sql.runtime.cache import capped_cache
from lance_minhash_sql.runtime.memory import release_memory
from lance_minhash_sql.runtime.progress import progress_bar
from lance_minhash_sql.selfjoin.bounded import (bounded_shard_pairs, chunk_pairs, clusters_table, pool_bytes, pool_rows, shard_links, shard_rows)
from lance_minhash_sql.selfjoin.parent import UnionFind
from lance_minhash_sql.selfjoin.pool import STATS as POOL_STATS
from lance_minhash_sql.selfjoin.pool import fetch_signatures, read_multi, row_ids, shard_data
from lance_minhash_sql.selfjoin.links import LinkRule, link_verifier, planning
from lance_minhash_sql.selfjoin.verify import pair_verifier, prepare
from lance_minhash_sql.selfjoin.shards import Plan, Shard, merge_runs, plan_for, plan_shards, read_run
from lance_minhash_sql.extras.distributed import remote_function, task_cause

__all__ = ["shuffle_pairs", "shuffle_components"]

_EMPTY_DOCS = readonly(np.empty(0, dtype=np.uint32))


@dataclass(frozen=True)
class _Job:
    """What every task of one shuffle is given (small: bounds and offsets, no data)."""

    uri: str
    version: int
    column: str
    storage_options: dict | None
    threshold: float
    limit: int  # bytes a task holds beside its process
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


def _job(dataset, column: str, threshold, limit: int, storage_options, rule: LinkRule | None = None) -> _Job:
    with planning(rule):
        shards = plan_shards(dataset, column, threshold, None, storage_options, shard_rows=shard_rows(limit))
    plan = shards[0].plan
    k = plan.params.num_hashes
    max_docs = max(MIN_WINDOW_ROWS, pool_rows(limit, k))
    return _Job(plan.opened.uri, int(plan.opened.version), column, storage_options, shards[0].threshold, limit,
                tuple((s.lo, s.hi) for s in shards), tuple(int(x) for x in plan.offsets), k, max_docs,
                max(MIN_WINDOW_ROWS, max_docs // SHUFFLE_BLOCK_SHARE), rule)


class _Task:
    """A task's meter (``with _Task(job) as meter:``): its seconds, CPU seconds, RSS at its
    start, peak RSS (the high-water mark reset at the start) and the peak of its anonymous
    memory over its start (sampled: what the budget bounds, without the object store's
    shared pages or mapped files). Meanwhile the worker's
    segment cache holds at most ``1 / SHUFFLE_CACHE_SHARE`` of the budget
    (:func:`lance_minhash_sql.runtime.cache.capped_cache`: no segment read whole beside
    it); at the end the heap's free pages go back to the OS."""

    def __init__(self, job: _Job):
        self.cap = capped_cache(job.limit // SHUFFLE_CACHE_SHARE)

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


def _band_task(job: _Job, run: int):
    """Stage 1: the run's band rows of each shard, one object per shard, then the meter."""
    with _Task(job) as meter:
        yield from _bands(meter, job, run)


def _bands(meter: _Task, job: _Job, run: int):
    entry = job.plan().entries[run]
    rows = 0
    for lo, hi in job.bounds:
        keys, docs = read_run(entry, lo, hi)
        rows += int(keys.size)
        yield keys, docs
        del keys, docs
    yield meter.done(rows=rows)


def _request_task(job: _Job, index: int, slices: list):
    """Stage 2: ``(rows, info, request of run 0, ..., request of run R-1)``."""
    with _Task(job) as meter:
        return _requests(meter, job, index, slices)


def _requests(meter: _Task, job: _Job, index: int, slices: list):
    import ray

    parts = [(r, keys, docs) for r, (keys, docs) in enumerate(ray.get(slices)) if keys.size]
    requests = [_EMPTY_DOCS] * job.runs
    rows, candidates, over = None, 0, False
    if parts:
        if len(parts) == 1:
            r, keys, docs = parts[0]
            keys, docs = multi_rows(readonly(keys), readonly(docs))
            gids = docs.astype(np.uint32) + np.uint32(job.offsets[r])
        else:
            keys, gids = merge_runs(parts, np.asarray(job.offsets, dtype=np.int64))
            keys, gids = multi_rows(readonly(keys), readonly(gids))
        del parts
        ugids = sorted_unique(gids)
        candidates = int(ugids.size)
        over = candidates > job.max_docs
        if keys.size and not over:
            at = np.searchsorted(ugids, np.asarray(job.offsets, dtype=np.int64))
            requests = [(ugids[at[r]:at[r + 1]] - np.uint32(job.offsets[r])).astype(np.uint32)
                        for r in range(job.runs)]
            rows = (keys, gids)
    info = meter.done(band_rows=0 if rows is None else int(rows[0].size), candidates=candidates, over=over)
    return (rows, info, *requests)


def _signature_task(job: _Job, run: int, sizes: list, requests: list):
    """Stage 3: the layout (the group of each object that follows), one object per block
    and group that asked (``(docs, signatures, row ids)``), then the meter. ``requests``:
    every shard's request of this run, group after group (``sizes`` shards each)."""
    with _Task(job) as meter:
        yield from _signatures(meter, job, run, sizes, requests)


def _signatures(meter: _Task, job: _Job, run: int, sizes: list, requests: list):
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


def _verify_task(job: _Job, indices: list, rows: list, infos: list, blocks: list, bound: int, what: str,
                 verify: str):
    """Stage 4: the record batches (``what="pairs"``) or ``(a, b)`` links of a group of
    consecutive shards ``indices`` over one pool, shard after shard, then the meter.
    ``rows``: refs of the shards' rows (read one shard at a time); ``infos``: the request
    tasks' counts; ``blocks``: refs of the group's signature objects, runs in order and
    each run's blocks in doc order (so the pool's docs ascend), at most ``bound`` docs."""
    with _Task(job) as meter:
        yield from _verified(meter, job, indices, rows, infos, blocks, bound, what, verify)


def _verified(meter: _Task, job: _Job, indices: list, rows: list, infos: list, blocks: list, bound: int, what: str,
              verify: str):
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
            items = bounded_shard_pairs(shard, job.limit, pairs_of, DEFAULT_CHUNK_PAIRS, exact)
        else:
            items = _over_pool_links(shard, job, links_of)
        for item in items:
            out += item.num_rows if what == "pairs" else int(item[1].size)
            yield item if what == "pairs" else (item[1], item[2])
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
        prepare(pairs_of if what == "pairs" else links_of, [job.shard(plan, i) for i in indices], ugids)
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
                for batch in pairs_of(shard, data, chunk_pairs(job.limit, DEFAULT_CHUNK_PAIRS)):
                    out += batch.num_rows
                    yield batch
            else:
                for _, a, b in links_of(shard, data):
                    out += int(a.size)
                    yield a, b
            del data
    yield meter.done(pool=max(pool, POOL_STATS["max_pool_rows"]), out=out, over=over)


def _over_pool_links(shard: Shard, job: _Job, links_of) -> Iterator[tuple]:
    """Links of a shard whose candidates exceed a pool, window by window as the single
    process takes such a shard (its candidates read where they lie, a bucket larger than
    a window linked in chunks of rows)."""
    got = read_multi(shard)
    if got is not None:
        prepare(links_of, [shard], got[1])
        yield from shard_links(shard.plan, [(shard, None)], got, None, job.max_docs, links_of, job.rule.max_reps)


def _rowid_task(job: _Job, gids: np.ndarray) -> tuple:
    """Stage 5: row ids of sorted global ``gids`` (of one run), and the meter."""
    with _Task(job) as meter:
        return _rowids(meter, job, gids)


def _rowids(meter: _Task, job: _Job, gids: np.ndarray) -> tuple:
    rowids = row_ids(job.plan(), gids, job.block_rows)
    return rowids, meter.done(rows=int(gids.size))


# --------------------------------------------------------------------------- driver


class _Run:
    """One shuffle on the driver: the stages submitted in turn, their meters in ``stats``."""

    def __init__(self, ray, job: _Job, stats: dict | None):
        self.ray, self.job = ray, job
        self.stats = stats if stats is not None else {}
        self.stats.clear()
        self.stats.update(runs=job.runs, shards=job.shards, memory_limit=job.limit, max_docs=job.max_docs,
                          block_rows=job.block_rows, objects=0, tasks={})
        self.t0 = time.perf_counter()

    def _meter(self, stage: str, info: dict) -> None:
        s = self.stats["tasks"].setdefault(stage, {"tasks": 0, "seconds": 0.0, "cpu_seconds": 0.0, "peak_mb": 0.0,
                                                   "start_mb": 0.0})
        s["tasks"] += 1
        s["seconds"] += info["seconds"]
        s["cpu_seconds"] += info["cpu_seconds"]
        s["peak_mb"] = max(s["peak_mb"], info["peak_mb"])
        s["start_mb"] = max(s["start_mb"], info["start_mb"])
        s["shmem_mb"] = max(s.get("shmem_mb", 0.0), info.get("RssShmem", 0.0))
        s["anon_mb"] = max(s.get("anon_mb", 0.0), info.get("anon_mb", 0.0))

    def _failed(self, stage: str, what: dict, exc: BaseException) -> DistributedTaskError:
        key, value = next(iter(what.items()))
        return DistributedTaskError(
            f"the {stage} task of {key} {value} of the shuffle on {self.job.column!r} of {self.job.uri!r} "
            f"(version {self.job.version}) failed ({task_cause(exc)}); no further results are given. Fix the cause "
            "and run again", {(value,): task_cause(exc)})

    def _stage(self, name: str) -> None:
        now = time.perf_counter()
        self.stats.setdefault("stage_seconds", {})[name] = now - self.t0
        self.t0 = now

    def prepare(self):
        """Stages 1-3; the number of groups of shards (verify tasks: :meth:`submit`)."""
        ray, job = self.ray, self.job
        R, S = job.runs, job.shards
        band = remote_function(ray, _band_task, num_returns="streaming")
        gens = [band.remote(job, r) for r in range(R)]
        slices = []
        band_rows = 0
        for r, gen in enumerate(gens):
            try:
                refs = list(gen)
                info = ray.get(refs[-1])  # the meter, or the task's error
            except Exception as exc:
                raise self._failed("band", {"run": r}, exc) from None
            slices.append(refs[:S])
            band_rows += info["rows"]
            self._meter("band", info)
        self.stats.update(band_rows=band_rows, band_bytes=12 * band_rows)
        self.stats["objects"] += R * S
        self._stage("band")

        request = remote_function(ray, _request_task, num_returns=R + 2)
        outs = [request.remote(job, s, [slices[r][s] for r in range(R)]) for s in range(S)]
        del slices
        infos = []
        for s, out in enumerate(outs):
            try:
                infos.append(ray.get(out[1]))
            except Exception as exc:
                raise self._failed("request", {"shard": s}, exc) from None
        for info in infos:
            self._meter("request", info)
        self.stats.update(candidates=sum(i["candidates"] for i in infos if not i["over"]),
                          over_pool_shards=sum(bool(i["over"]) for i in infos),
                          candidate_rows=sum(i["band_rows"] for i in infos))
        self.stats["objects"] += S * (R + 2)
        self._stage("request")

        groups = self._groups(infos)
        signature = remote_function(ray, _signature_task, num_returns="streaming")
        sizes = [len(g) for g in groups]
        sgens = [signature.remote(job, r, sizes, [outs[s][2 + r] for g in groups for s in g]) for r in range(R)]
        rows_refs = [o[0] for o in outs]
        del outs
        blocks: list[list] = [[] for _ in groups]
        read = sent = read_bytes = nblocks = 0
        for r, gen in enumerate(sgens):
            try:
                refs = list(gen)  # the layout, the blocks, the meter (or the task's error, last)
                layout = ray.get(refs[0])
                info = ray.get(refs[-1])
            except Exception as exc:
                raise self._failed("signature", {"run": r}, exc) from None
            for g, ref in zip(layout.tolist(), refs[1:-1]):
                blocks[g].append(ref)
            self._meter("signature", info)
            read += info["read"]
            sent += info["sent"]
            read_bytes += info["read_bytes"]
            nblocks += info["blocks"]
            self.stats["objects"] += 1 + len(layout)
        self.stats.update(signature_rows_read=read, signature_bytes_read=read_bytes, signature_blocks=nblocks,
                          signature_rows_sent=sent,
                          signature_bytes_sent=sent * (2 * job.k + 12))
        self._stage("signature")
        self.groups, self.infos, self.rows_refs, self.blocks = groups, infos, rows_refs, blocks
        return len(groups)

    def submit(self, g: int, what: str, verify: str = "estimate"):
        """Group ``g``'s verify task (a streaming generator)."""
        task = remote_function(self.ray, _verify_task, num_returns="streaming")
        shards = self.groups[g]
        bound = sum(self.infos[s]["candidates"] for s in shards)
        return task.remote(self.job, shards, [self.rows_refs[s] for s in shards], [self.infos[s] for s in shards],
                           self.blocks[g], bound, what, verify)

    def release(self, g: int) -> None:
        """Group ``g`` consumed: the driver drops its refs (Ray frees the objects)."""
        for s in self.groups[g]:
            self.rows_refs[s] = None
        self.blocks[g] = None

    def _groups(self, infos: list) -> list[list[int]]:
        """Consecutive shards whose candidates (counted per shard: at least the distinct
        ones) fit one pool; a shard over the pool alone."""
        groups: list[list[int]] = []
        group: list[int] = []
        count = 0
        for s, info in enumerate(infos):
            if info["over"] or (group and count + info["candidates"] > self.job.max_docs):
                if group:
                    groups.append(group)
                group, count = [], 0
            if info["over"]:
                groups.append([s])
                continue
            group.append(s)
            count += info["candidates"]
        if group:
            groups.append(group)
        self.stats["groups"] = len(groups)
        return groups

    def results(self, g: int, gen) -> Iterator:
        """The items of group ``g``'s verify task, its meter recorded."""
        try:
            for ref in gen:
                item = self.ray.get(ref)
                if isinstance(item, dict):
                    self._meter("verify", item)
                    self.stats["max_pool_rows"] = max(self.stats.get("max_pool_rows", 0), item["pool"])
                    continue
                yield item
        except Exception as exc:
            raise self._failed("verify", {"group": g}, exc) from None


def shuffle_pairs(ray, dataset, column: str, threshold: float, verify: str, limit: int, storage_options,
                  in_flight: int | None = None, stats: dict | None = None) -> Iterator[pa.RecordBatch]:
    """The pairs of the self-join (same rows, shard by shard, as the local executor)
    computed by the shuffle of the module doc on the connected ``ray``, each task within
    ``limit`` bytes. At most ``in_flight`` verify tasks (default twice the cluster's CPUs)
    run ahead of the consumer. Arguments arrive checked; the index is opened when called;
    ``stats`` (a dict) is filled as the run goes. Raises :class:`DistributedTaskError`
    naming the stage and the run or shard of a failed task."""
    job = _job(dataset, column, threshold, limit, storage_options)
    in_flight = in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
    return _stream_pairs(_Run(ray, job, stats), verify, in_flight)


def _stream_pairs(run: _Run, verify: str, in_flight: int) -> Iterator[pa.RecordBatch]:
    n = run.prepare()
    gens: list = []
    try:
        for g in range(n):
            while len(gens) < min(n, g + in_flight):
                gens.append(run.submit(len(gens), "pairs", verify))
            yield from run.results(g, gens[g])
            gens[g] = None
            run.release(g)  # the driver keeps nothing consumed
        run._stage("verify")
    finally:
        for gen in gens:
            if gen is not None:
                try:
                    run.ray.cancel(gen)
                except Exception:  # (already finished)
                    pass


def shuffle_components(ray, dataset, column: str, rule: LinkRule, limit: int, storage_options,
                       stats: dict | None = None, progress: bool = False) -> pa.Table:
    """The components table of the links of ``rule`` (:mod:`lance_minhash_sql.selfjoin.links`)
    computed by the shuffle of the module doc on the connected ``ray``, each task within
    ``limit`` bytes; the driver holds the union-find (one ``int32`` a doc, or its share of
    ``memory_limit`` with the rest in a temporary file) and the table's members (``progress``:
    a bar of the partitions linked). Raises :class:`DistributedTaskError` naming the stage and
    the run or shard of a failed task."""
    job = _job(dataset, column, rule.threshold, limit, storage_options, rule)
    run = _Run(ray, job, stats)
    n = run.prepare()
    gens = [run.submit(g, "links") for g in range(n)]
    total = job.offsets[-1]
    components = UnionFind(total, pool_bytes(job.limit))
    bar = progress_bar(progress, n, "clusters", unit="partitions", scale=False)
    try:
        links = 0
        for g in range(n):
            for a, b in run.results(g, gens[g]):
                components.union(a, b)
                links += int(a.size)
            gens[g] = None
            run.release(g)
            bar is None or bar.update(1)
        run.stats["links"] = links
        run._stage("verify")
        members, roots = components.members(new_marks(total))
    finally:
        components.close()
        bar is None or bar.close()
    rowid = _member_rowids(run, members.astype(np.uint32))
    run._stage("rowids")
    return clusters_table(roots, rowid)


def _member_rowids(run: _Run, members: np.ndarray) -> np.ndarray:
    """Row ids of the sorted global ``members``: one task per run that has any."""
    job, ray = run.job, run.ray
    task = remote_function(ray, _rowid_task, num_returns=2)
    at = np.searchsorted(members, np.asarray(job.offsets, dtype=np.int64))
    refs = {r: task.remote(job, members[at[r]:at[r + 1]]) for r in range(job.runs) if at[r + 1] > at[r]}
    out = np.empty(members.size, dtype=np.uint64)
    for r, (rowids, info) in refs.items():
        try:
            out[at[r]:at[r + 1]] = ray.get(rowids)
            run._meter("rowids", ray.get(info))
        except Exception as exc:
            raise run._failed("row id", {"run": r}, exc) from None
    return out
