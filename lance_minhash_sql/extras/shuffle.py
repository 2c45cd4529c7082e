"""The self-join as a shuffle on Ray: pairs and clusters whose candidate signatures are
read once, in doc order, by the task of the segment that holds them, and sent to the
shards that asked for them (``docs/distributed.md``, *The self-join as a shuffle*).

>>> import lance_minhash_sql as lms
>>> for batch in lms.pairs("s3://bucket/corpus.lance", "text", 0.8, memory_limit="1GiB", executor="ray"): ...  # doctest: +SKIP

Every arrow below is Ray's object store (task returns and the items of streaming
generator tasks): no file is written, no file system is shared, Ray schedules every
task. The plan is the single-process plan under a budget, stepped by the same driver
(:mod:`lance_minhash_sql.selfjoin.steps`): the same key-range shards
(:func:`lance_minhash_sql.selfjoin.steps.shards_for`), the same pool, the
same verifiers (:mod:`lance_minhash_sql.selfjoin.verify`, :mod:`lance_minhash_sql.selfjoin.links`),
so the answers are those of the local executor in every mode. This module is the driver:
it plans the job, submits the stages in turn and gathers what they return; the tasks
themselves, and what each holds, are :mod:`.shuffle_tasks`; ``extras/ray_executor.py`` is
the executor that calls it.

1. **Band tasks** (:func:`.shuffle_tasks.band_task`), one per run (a segment, or the
   rows no segment covers): the run's band rows read key range by key range (``bands.lance`` is sorted by key, so this is one
   pass over the file), one object per shard: ``(keys, docs)``, 12 bytes a row.
2. **Request tasks** (:func:`.shuffle_tasks.request_task`), one per shard: the shard's
   slices of every run merged by ``(key, global doc)``, the buckets of two rows or more kept; returned are those rows,
   the count of the shard's distinct candidates, and per run the sorted docs whose
   signatures the shard needs (one object per run). A shard whose candidates exceed what
   a task's pool holds (:func:`lance_minhash_sql.selfjoin.sizing.pool_size`) asks for nothing: its verify task
   takes it window by window, reading its candidates where they lie, a giant bucket in
   chunks of rows (:func:`lance_minhash_sql.selfjoin.steps.run_shard`, :func:`lance_minhash_sql.selfjoin.giant.alone_links`).
3. **Groups**: the driver cuts the shards into groups of consecutive shards whose
   candidates fit one pool (as the single process's marking pass does, from the counts).
4. **Signature tasks** (:func:`.shuffle_tasks.signature_task`), one per run: each group's
   request (the union of its shards'), and the union of all groups' requests read once, in doc order, a quarter of a pool at
   a time (:func:`lance_minhash_sql.selfjoin.pool.fetch_signatures`: a local file's memory map gathered page by
   page; on an object store ranged reads of nearby rows, in file order, so dense requests
   read the file sequentially, a few MiB a read); each
   block cut into one object per group that asked (its docs, their signatures and row
   ids). The first object streamed is the layout: the group each following object is for.
5. **Verify tasks** (:func:`.shuffle_tasks.verify_task`), one per group: the group's pool
   from its blocks (docs ascending, as in the single process), deleted docs dropped, then each shard's rows in turn over the
   pool, verified by :func:`lance_minhash_sql.selfjoin.verify.data_pairs` (record batches streamed back, in shard
   order) or :func:`lance_minhash_sql.selfjoin.links.data_links` (links as global docs).
6. **Clusters**: the driver unions the links as they arrive (one ``int32`` a doc, held as
   the single process holds it: :class:`lance_minhash_sql.selfjoin.parent.UnionFind`,
   in a temporary file past its share of ``memory_limit``); *row id tasks*
   (:func:`.shuffle_tasks.rowid_task`), one per run, give the members' row ids (:func:`lance_minhash_sql.selfjoin.pool.row_ids`); the table is
   :func:`lance_minhash_sql.selfjoin.clusters_table.clusters_table`, as in one process
   (:func:`lance_minhash_sql.selfjoin.steps.united`).

Stages run one after the other (each needs all of the previous one's output); Ray writes
objects to its workers' local disks when its object store is full.

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
from typing import Iterator

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import DistributedTaskError
from lance_minhash_sql.runtime.progress import progress_bar
from lance_minhash_sql.selfjoin.clusters_table import clusters_table
from lance_minhash_sql.selfjoin.links import LinkRule
from lance_minhash_sql.selfjoin.steps import united
from lance_minhash_sql.extras.distributed import remote_function, task_cause
from lance_minhash_sql.extras.shuffle_tasks import (ShuffleJob, band_task, request_task, rowid_task, shuffle_job,
                                                    signature_task, verify_task)

__all__ = ["shuffle_pairs", "shuffle_components"]


class _Run:
    """One shuffle on the driver: the stages submitted in turn, their meters in ``stats``."""

    def __init__(self, ray, job: ShuffleJob, stats: dict | None):
        self.ray, self.job = ray, job
        self.stats = stats if stats is not None else {}
        self.stats.clear()
        self.stats.update(runs=job.runs, shards=job.shards, memory_limit=job.budget.total, max_docs=job.max_docs,
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
        """Stages 1-4 (bands, requests, groups, signatures); the number of groups of shards
        (verify tasks: :meth:`submit`)."""
        ray, job = self.ray, self.job
        R, S = job.runs, job.shards
        band = remote_function(ray, band_task, num_returns="streaming")
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

        request = remote_function(ray, request_task, num_returns=R + 2)
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
        signature = remote_function(ray, signature_task, num_returns="streaming")
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
        task = remote_function(self.ray, verify_task, num_returns="streaming")
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
        ones) fit one pool; a shard over the pool alone. Not
        :func:`lance_minhash_sql.selfjoin.groups.shard_groups`: the driver holds no shard's
        rows, only the counts its request tasks return, and the groups are verified at once
        in their own tasks, so none prunes by the links or labels of the groups before."""
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


def shuffle_pairs(ray, dataset, column: str, threshold: float, verify: str, budget: Budget, storage_options,
                  in_flight: int | None = None, stats: dict | None = None) -> Iterator[pa.RecordBatch]:
    """The pairs of the self-join (same rows, shard by shard, as the local executor)
    computed by the shuffle of the module doc on the connected ``ray``, each task within
    ``budget``. At most ``in_flight`` verify tasks (default twice the cluster's CPUs)
    run ahead of the consumer. Arguments arrive checked; the index is opened when called;
    ``stats`` (a dict) is filled as the run goes. Raises :class:`DistributedTaskError`
    naming the stage and the run or shard of a failed task."""
    job = shuffle_job(dataset, column, threshold, budget, storage_options)
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


def shuffle_components(ray, dataset, column: str, rule: LinkRule, budget: Budget, storage_options,
                       stats: dict | None = None, progress: bool = False) -> pa.Table:
    """The components table of the links of ``rule`` (:mod:`lance_minhash_sql.selfjoin.links`)
    computed by the shuffle of the module doc on the connected ``ray``, each task within
    ``budget``; the driver holds the union-find (one ``int32`` a doc, or its share of
    ``memory_limit`` with the rest in a temporary file) and the table's members (``progress``:
    a bar of the partitions linked). Raises :class:`DistributedTaskError` naming the stage and
    the run or shard of a failed task."""
    job = shuffle_job(dataset, column, rule.threshold, budget, storage_options, rule)
    run = _Run(ray, job, stats)
    n = run.prepare()
    gens = [run.submit(g, "links") for g in range(n)]
    bar = progress_bar(progress, n, "clusters", unit="partitions", scale=False)
    run.stats["links"] = 0

    def group_links(g: int) -> Iterator[tuple]:
        for a, b in run.results(g, gens[g]):
            run.stats["links"] += int(a.size)
            yield a, b

    def linked(components) -> Iterator[Iterator[tuple]]:
        for g in range(n):
            yield group_links(g)
            gens[g] = None
            run.release(g)
            bar is None or bar.update(1)
        run._stage("verify")

    try:
        members, roots = united(job.offsets[-1], job.budget, linked)
    finally:
        bar is None or bar.close()
    rowid = _member_rowids(run, members.astype(np.uint32))
    run._stage("rowids")
    return clusters_table(roots, rowid)


def _member_rowids(run: _Run, members: np.ndarray) -> np.ndarray:
    """Row ids of the sorted global ``members``: one task per run that has any."""
    job, ray = run.job, run.ray
    task = remote_function(ray, rowid_task, num_returns=2)
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
