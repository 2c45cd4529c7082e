"""The Ray executor: the self-join's plan and the build run as Ray tasks (the ``ray`` extra).

It runs what ``selfjoin/executor.py`` says an executor runs, the same plan as the local
executor, so every mode (``verify``, ``clustering``, ``keep``, ``order_by``) gives the same
answer on both:

* **pairs** and **components**: the shuffle of :mod:`.shuffle` (band rows partitioned by
  key range, candidates' signatures read once in doc order by the task of the segment that
  holds them, verified group by group within ``memory_limit`` per task); the links of a
  :class:`~lance_minhash_sql.selfjoin.links.LinkRule` (estimate or exact) are verified in
  the tasks, and the driver unions them;
* **one shard's pairs** (:meth:`RayExecutor.shard_pairs`, for SQL, where DuckDB calls one
  shard per branch): one task that plans the same shards at the driver's version and
  verifies that shard within the budget, as the local executor verifies it;
* **join**: the join's key-range shards, a contiguous range of them per task, yielded in
  shard order;
* **build**: one task per fragment group, one commit (:mod:`.distributed`).

Star clustering and the keep policies run on the driver over the components, the same
code as for the local executor. The executor connects to Ray when it first runs
something (:func:`.distributed.connect_ray`: this process's Ray, else ``address``, else
``RAY_ADDRESS``, else the cluster running here); importing this module does not import Ray.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from lance_minhash_sql.core.errors import DistributedTaskError
from lance_minhash_sql.io.scan import open_dataset
from lance_minhash_sql.selfjoin.bounded import memory_limit_bytes
from lance_minhash_sql.selfjoin.join_shards import JoinShard, join_all, join_shards
from lance_minhash_sql.selfjoin.executor import LOCAL
from lance_minhash_sql.selfjoin.links import LinkRule
from lance_minhash_sql.selfjoin.shards import Shard, pair_shards
from lance_minhash_sql.extras.distributed import build_distributed, connect_ray, remote_function, task_cause
from lance_minhash_sql.extras.shuffle import shuffle_components, shuffle_pairs

__all__ = ["RayExecutor"]


class RayExecutor:
    """The plan as Ray tasks on the cluster at ``address`` (module doc). ``max_in_flight``:
    verify tasks submitted ahead of the consumer of pairs (default twice the cluster's
    CPUs); ``stats``: a dict the shuffle fills with what each run moved and held."""

    name = "ray"

    def __init__(self, address: str | None = None, max_in_flight: int | None = None, stats: dict | None = None):
        self.address, self.max_in_flight, self.stats = address, max_in_flight, stats

    def ray(self):
        return connect_ray(self.address)

    def pairs(self, dataset, column: str, threshold: float, verify: str, limit: int, storage_options
              ) -> Iterator[pa.RecordBatch]:
        return shuffle_pairs(self.ray(), dataset, column, threshold, verify, limit, storage_options,
                             self.max_in_flight, self.stats)

    def components(self, dataset, column: str, rule: LinkRule, limit: int, storage_options,
                   progress: bool = False) -> pa.Table:
        return shuffle_components(self.ray(), dataset, column, rule, limit, storage_options, self.stats, progress)

    def shard_pairs(self, shards: list[Shard], index: int, verify: str, limit: int, storage_options
                    ) -> Iterator[pa.RecordBatch]:
        """Shard ``shards[index]``'s pairs computed by one task (module doc)."""
        shard = shards[index]
        ray = self.ray()
        task = remote_function(ray, _shard_pairs_task)
        ref = task.remote(shard.uri, int(shard.version), shard.column, shard.threshold, shard.num_shards,
                          shard.index, verify, limit, storage_options)
        try:
            batches = ray.get(ref)
        except Exception as exc:
            raise DistributedTaskError(
                f"the task of shard {shard.index} of {shard.num_shards} of the self-join on {shard.column!r} of "
                f"{shard.uri!r} (version {shard.version}) failed ({task_cause(exc)}); fix the cause and run again",
                {(shard.index,): task_cause(exc)}) from None
        yield from batches

    def join(self, left, right, column: str, threshold: float, verify: str, *, right_column, memory_limit,
             left_storage_options, right_storage_options) -> Iterator[pa.RecordBatch]:
        shards = join_shards(left, right, column, threshold, right_column=right_column, memory_limit=memory_limit,
                             left_storage_options=left_storage_options, right_storage_options=right_storage_options)
        plan = shards[0].plan
        ray = self.ray()
        tasks = min(len(shards), max(1, 2 * int(ray.cluster_resources().get("CPU", 1))))
        ranges = [list(range(len(shards) * t // tasks, len(shards) * (t + 1) // tasks)) for t in range(tasks)]
        spec = (plan.left.uri, int(plan.left.version), plan.right.uri, int(plan.right.version), column,
                plan.right.column, plan.threshold, verify, memory_limit, left_storage_options,
                right_storage_options, len(shards))
        return _joined(ray, spec, ranges, self.max_in_flight or tasks)

    def join_shard(self, shard: JoinShard, verify: str, left_storage_options, right_storage_options
                   ) -> Iterator[pa.RecordBatch]:
        """One shard of the join computed by one task, planned again at the same versions."""
        plan = shard.plan
        spec = (plan.left.uri, int(plan.left.version), plan.right.uri, int(plan.right.version), plan.left.column,
                plan.right.column, plan.threshold, verify, None, left_storage_options, right_storage_options,
                shard.num_shards)
        return _joined(self.ray(), spec, [[shard.index]], 1)

    def build(self, dataset, column: str, **kwargs):
        """The index built by one task per fragment group (:func:`.distributed.build_distributed`)."""
        return build_distributed(dataset, column, ray_address=self.address, **kwargs)


def _shard_pairs_task(uri: str, version: int, column: str, threshold: float, num_shards: int, index: int,
                      verify: str, limit: int, storage_options) -> list:
    """Shard ``index`` of the ``num_shards`` of the self-join at ``version``: its record
    batches within ``limit`` bytes, verified by the local executor in this task."""
    ds = open_dataset(uri, storage_options, version)
    shard = pair_shards(ds, column, threshold, num_shards=num_shards, storage_options=storage_options)[index]
    return list(LOCAL.shard_pairs([shard], 0, verify, limit, storage_options))


def _join_task(spec: tuple, indices: list[int]) -> list:
    """The record batches of the join's shards ``indices`` (in order), planned again at the
    driver's versions, joined as the local executor joins a list of shards (with
    ``verify="exact"``, each candidate row's text fetched once for the task)."""
    (luri, lver, ruri, rver, column, right_column, threshold, verify, memory_limit, lopt, ropt, n) = spec
    left, right = open_dataset(luri, lopt, lver), open_dataset(ruri, ropt, rver)
    shards = join_shards(left, right, column, threshold, right_column=right_column, num_shards=n,
                         memory_limit=memory_limit, left_storage_options=lopt, right_storage_options=ropt)
    return list(join_all([shards[i] for i in indices], verify, memory_limit_bytes(memory_limit)))


def _joined(ray, spec: tuple, ranges: list[list[int]], in_flight: int) -> Iterator[pa.RecordBatch]:
    task = remote_function(ray, _join_task)
    refs: list = []
    try:
        for i, indices in enumerate(ranges):
            while len(refs) < min(len(ranges), i + in_flight):
                refs.append(task.remote(spec, ranges[len(refs)]))
            try:
                batches = ray.get(refs[i])
            except Exception as exc:
                raise DistributedTaskError(
                    f"the join task of shards {indices[0]}..{indices[-1]} of {spec[0]!r} against {spec[2]!r} failed "
                    f"({task_cause(exc)}); no further results are given. Fix the cause and run again",
                    {tuple(indices): task_cause(exc)}) from None
            refs[i] = None  # the driver keeps no consumed result
            yield from batches
            del batches
    finally:
        for ref in refs:
            if ref is not None:
                ray.cancel(ref)
