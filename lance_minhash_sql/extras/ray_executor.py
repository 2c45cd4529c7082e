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
  shard per branch): the shards cut into contiguous ranges, one task per range
  (:class:`ShardTasks`) that plans the same shards at the driver's version and verifies
  its range as the local executor verifies a statement's shards (one pool per group of
  them, exact verification's texts fetched once for the range:
  :class:`~lance_minhash_sql.selfjoin.shared.SharedShards`), each shard's batches one
  object that the shard's call takes;
* **join**: the join's key-range shards, a contiguous range of them per task, yielded in
  shard order;
* **build**: one task per fragment group, one commit (:mod:`.distributed`).

Both self-join paths take the steps of :mod:`lance_minhash_sql.selfjoin.steps`; they stay
two because they answer different callers. Each stage of the shuffle needs all of the
stage before (its groups are cut from every shard's request), so it answers a whole
self-join, group after group in shard order. SQL asks for one shard a call, in the order
DuckDB runs its branches, and a call's result is held only until it is taken: run as the
shuffle, the first branch would wait for the band and request stages of every shard, and
each group's results would be held until its last branch is called. A range's task of
:class:`ShardTasks` plans and verifies its own shards, so a branch waits for its range only.

Star clustering and the keep policies run on the driver over the components, the same
code as for the local executor. The executor connects to Ray when it first runs
something (:func:`.distributed.connect_ray`: this process's Ray, else ``address``, else
``RAY_ADDRESS``, else the cluster running here); importing this module does not import Ray.
"""

from __future__ import annotations

import threading
from typing import Iterator

import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import DistributedTaskError
from lance_minhash_sql.core.tuning import SHARED_SHARD_STATES
from lance_minhash_sql.io.scan import open_dataset
from lance_minhash_sql.runtime.cache import ByteCache
from lance_minhash_sql.selfjoin.join_shards import JoinShard, join_all, join_shards
from lance_minhash_sql.selfjoin.executor import LOCAL
from lance_minhash_sql.selfjoin.links import LinkRule
from lance_minhash_sql.selfjoin.shards import Shard, pair_shards
from lance_minhash_sql.selfjoin.shared import calls_key
from lance_minhash_sql.extras.distributed import build_distributed, connect_ray, remote_function, task_cause
from lance_minhash_sql.extras.shuffle import shuffle_components, shuffle_pairs

__all__ = ["RayExecutor", "ShardTasks"]

_TASKS = ByteCache.for_objects("the Ray tasks of a SQL statement's self-join shards", SHARED_SHARD_STATES)
_TASKS_LOCK = threading.Lock()  # a state made and put once per key


class RayExecutor:
    """The plan as Ray tasks on the cluster at ``address`` (module doc). ``max_in_flight``:
    verify tasks submitted ahead of the consumer of pairs (default twice the cluster's
    CPUs); ``stats``: a dict the shuffle fills with what each run moved and held."""

    name = "ray"

    def __init__(self, address: str | None = None, max_in_flight: int | None = None, stats: dict | None = None):
        self.address, self.max_in_flight, self.stats = address, max_in_flight, stats

    def ray(self):
        return connect_ray(self.address)

    def pairs(self, dataset, column: str, threshold: float, verify: str, budget: Budget, storage_options
              ) -> Iterator[pa.RecordBatch]:
        return shuffle_pairs(self.ray(), dataset, column, threshold, verify, budget, storage_options,
                             self.max_in_flight, self.stats)

    def components(self, dataset, column: str, rule: LinkRule, budget: Budget, storage_options,
                   progress: bool = False) -> pa.Table:
        return shuffle_components(self.ray(), dataset, column, rule, budget, storage_options, self.stats, progress)

    def shard_pairs(self, shards: list[Shard], index: int, verify: str, budget: Budget, storage_options
                    ) -> Iterator[pa.RecordBatch]:
        """Shard ``shards[index]``'s pairs, computed by the task of its range of shards
        (:class:`ShardTasks`, module doc)."""
        tasks = ShardTasks.of(self.ray(), shards, verify, budget, storage_options, self.max_in_flight)
        yield from tasks.take(index)

    def join(self, left, right, column: str, threshold: float, verify: str, budget: Budget | None, *, right_column,
             left_storage_options, right_storage_options) -> Iterator[pa.RecordBatch]:
        shards = join_shards(left, right, column, threshold, right_column=right_column, budget=budget,
                             left_storage_options=left_storage_options, right_storage_options=right_storage_options)
        plan = shards[0].plan
        ray = self.ray()
        tasks = min(len(shards), max(1, 2 * int(ray.cluster_resources().get("CPU", 1))))
        ranges = [list(range(len(shards) * t // tasks, len(shards) * (t + 1) // tasks)) for t in range(tasks)]
        spec = (plan.left.uri, int(plan.left.version), plan.right.uri, int(plan.right.version), column,
                plan.right.column, plan.threshold, verify, budget, left_storage_options,
                right_storage_options, len(shards))
        return _join_task_batches(ray, spec, ranges, self.max_in_flight or tasks)

    def join_shard(self, shard: JoinShard, verify: str, left_storage_options, right_storage_options
                   ) -> Iterator[pa.RecordBatch]:
        """One shard of the join computed by one task, planned again at the same versions."""
        plan = shard.plan
        spec = (plan.left.uri, int(plan.left.version), plan.right.uri, int(plan.right.version), plan.left.column,
                plan.right.column, plan.threshold, verify, None, left_storage_options, right_storage_options,
                shard.num_shards)
        return _join_task_batches(self.ray(), spec, [[shard.index]], 1)

    def build(self, dataset, column: str, **kwargs):
        """The index built by one task per fragment group (:func:`.distributed.build_distributed`)."""
        return build_distributed(dataset, column, ray_address=self.address, **kwargs)


class ShardTasks:
    """The Ray tasks behind the independent calls of one list of shards (SQL's branches;
    module doc). The shards are cut into at most twice the cluster's CPUs ranges of
    consecutive shards; a range is one task that returns each shard's record batches as
    an object of its own. A call submits its range's task when no object of its shard is
    held, then the ranges DuckDB calls next (it runs the first branch, then the others
    from the last back) while fewer than ``in_flight`` ranges (default: all) hold objects;
    it waits for its shard's object and lets go of it. A *round* ends when every shard
    was taken, or when a shard is called again (a statement run again after one stopped
    early): the next submits again. The objects of a statement stopped early are held
    until its state is evicted from a registered cache of :data:`SHARED_SHARD_STATES`
    entries (``runtime/cache.py``)."""

    def __init__(self, ray, shards: list[Shard], verify: str, budget: Budget, storage_options, in_flight: int | None):
        self.ray, self.shards, self.verify, self.budget = ray, shards, verify, budget
        self.storage_options = storage_options
        n = len(shards)
        count = min(n, max(1, 2 * int(ray.cluster_resources().get("CPU", 1))))
        self.ranges = [range(n * t // count, n * (t + 1) // count) for t in range(count)]
        self.range_of = [t for t, r in enumerate(self.ranges) for _ in r]
        self.in_flight = max(1, in_flight or count)
        self.refs: list = [None] * n  # per shard: the object of its batches, while submitted and not taken
        self.done: set[int] = set()  # shards taken this round
        self.submitted = 0  # tasks submitted (for tests and stats)
        self.lock = threading.Lock()

    @classmethod
    def of(cls, ray, shards: list[Shard], verify: str, budget: Budget, storage_options, in_flight: int | None
           ) -> "ShardTasks":
        """The state of the calls of ``shards`` for ``verify`` and ``budget`` on ``ray``."""
        key = calls_key(shards, verify, budget)
        with _TASKS_LOCK:
            state = _TASKS.get(key)
            if state is None:
                state = cls(ray, shards, verify, budget, storage_options, in_flight)
                _TASKS.put(key, state)
            return state

    def take(self, index: int) -> Iterator[pa.RecordBatch]:
        """Shard ``index``'s record batches (the class doc)."""
        with self.lock:
            if index in self.done:  # called again: a new round
                self.done.clear()
            t = self.range_of[index]
            if self.refs[index] is None:
                self._submit(t)
            self._submit_ahead(t)
            ref = self.refs[index]
        shard = self.shards[index]
        try:
            batches = self.ray.get(ref)
        except Exception as exc:
            with self.lock:
                if self.refs[index] is ref:
                    self.refs[index] = None  # (a call again submits again)
            r = self.ranges[t]
            raise DistributedTaskError(
                f"the task of shards {r.start}-{r.stop - 1} of {shard.num_shards} of the self-join on "
                f"{shard.column!r} of {shard.uri!r} (version {shard.version}) failed ({task_cause(exc)}); fix the "
                "cause and run again", {(shard.index,): task_cause(exc)}) from None
        with self.lock:
            if self.refs[index] is ref:
                self.refs[index] = None
            self.done.add(index)
            if len(self.done) == len(self.shards):
                self.done.clear()
        del ref
        yield from batches

    def _submit(self, t: int) -> None:
        """Submit range ``t``'s task: objects for its shards not taken this round."""
        r = self.ranges[t]
        s = self.shards[r.start]
        task = remote_function(self.ray, _shard_range_task, num_returns=len(r))
        refs = task.remote(s.uri, int(s.version), s.column, s.threshold, s.num_shards, list(r), self.verify,
                           self.budget, self.storage_options)
        for i, ref in zip(r, [refs] if len(r) == 1 else refs):
            if i not in self.done:
                self.refs[i] = ref
        self.submitted += 1

    def _submit_ahead(self, t: int) -> None:
        """Submit the ranges after ``t`` in DuckDB's order (``t - 1`` down to 0, then from
        the last) that hold no object and gave none this round, while fewer than
        ``in_flight`` ranges hold objects."""
        count = len(self.ranges)
        holding = sum(1 for r in self.ranges if any(self.refs[i] is not None for i in r))
        for step in range(1, count):
            if holding >= self.in_flight:
                return
            u = (t - step) % count
            if all(self.refs[i] is None and i not in self.done for i in self.ranges[u]):
                self._submit(u)
                holding += 1

    def detach(self) -> None:
        """Evicted (or the caches cleared): let go of the objects not taken."""
        with self.lock:
            self.refs = [None] * len(self.shards)
            self.done.clear()


def _shard_range_task(uri: str, version: int, column: str, threshold: float, num_shards: int,
                      indices: list[int], verify: str, budget: Budget, storage_options):
    """Shards ``indices`` (consecutive) of the ``num_shards`` of the self-join at
    ``version``: each one's record batches within ``budget``, verified as the local
    executor verifies a statement's shards (one object per shard)."""
    ds = open_dataset(uri, storage_options, version)
    shards = pair_shards(ds, column, threshold, num_shards=num_shards, storage_options=storage_options)
    part = [shards[i] for i in indices]
    out = [list(LOCAL.shard_pairs(part, j, verify, budget, storage_options)) for j in range(len(part))]
    return out[0] if len(out) == 1 else tuple(out)


def _join_task(spec: tuple, indices: list[int]) -> list:
    """The record batches of the join's shards ``indices`` (in order), planned again at the
    driver's versions, joined as the local executor joins a list of shards (with
    ``verify="exact"``, each candidate row's text fetched once for the task)."""
    (luri, lver, ruri, rver, column, right_column, threshold, verify, budget, lopt, ropt, n) = spec
    left, right = open_dataset(luri, lopt, lver), open_dataset(ruri, ropt, rver)
    shards = join_shards(left, right, column, threshold, right_column=right_column, num_shards=n,
                         budget=budget, left_storage_options=lopt, right_storage_options=ropt)
    return list(join_all([shards[i] for i in indices], verify, Budget.or_default(budget)))


def _join_task_batches(ray, spec: tuple, ranges: list[list[int]], in_flight: int) -> Iterator[pa.RecordBatch]:
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
