"""What the independent calls of one list of shards share: one SQL statement's branches.

A SQL ``minhash_pairs`` runs each shard of its plan as a call of its own (one per
``UNION ALL`` branch, on DuckDB's threads, in an order DuckDB chooses: ``duck/self_join.py``).
The self-join of one call (:mod:`.steps`) verifies consecutive shards in groups over one
pool of their candidates' signatures and fetches exact verification's shingle sets once;
calls that know nothing of each other would fetch a row's signature once for every shard
it is a candidate in, and its shingle set likewise. :class:`SharedShards` gives the calls
of one list of shards the same economy:

* **groups**: at the first call, every shard's band rows are read once and the shards
  grouped while their distinct candidates fit the budget's pool
  (:func:`.sizing.pool_rows`), by the self-join's own rule
  (:func:`.groups.shard_groups`);
* **one pool at a time**: a group's pool (its candidates' signatures, row ids and
  liveness, fetched in doc order: :func:`.pool.marked_pool`) is fetched by the first of its
  shards to run and kept until all of them ran. A call of another group waits until no
  shard of the held group runs, then drops that pool and fetches its own; a shard whose
  group's pool was dropped before it ran fetches it again. DuckDB runs the branches
  nearly in order (the first, then the others from the last back), so calls running at
  once are mostly of one group, and a pool is fetched about once. A shard whose
  candidates alone outgrow a pool is verified window by window as a lone call is
  (:func:`.steps.run_shard`);
* **exact verification's shingle sets** (:class:`.shingles.ShingleSets`) are fetched for
  every shard at the first call, and closed when every shard has been called and none
  runs.

A call waits while another fetches what it needs. The states of the last
:data:`SHARED_SHARD_STATES` lists of shards are kept (a registered cache of
``runtime/cache.py``, keyed by dataset, version, column, threshold, key ranges, mode and
budget); one evicted, or emptied by ``clear_cache()``, lets go of its pool and sets as
soon as none of its calls runs. So a statement stopped before its last branch (a
``LIMIT``) holds its group's pool until a few other statements have run, not for the
life of the process; a statement run again fetches again what was let go.
"""

from __future__ import annotations

import threading
from typing import Iterator

import pyarrow as pa

from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.tuning import DEFAULT_CHUNK_PAIRS, SHARED_SHARD_STATES
from lance_minhash_sql.kernels.components import new_marks, set_marks
from lance_minhash_sql.runtime.cache import ByteCache
from lance_minhash_sql.runtime.memory import bounded_heap, trim_heap
from lance_minhash_sql.selfjoin.groups import shard_groups
from lance_minhash_sql.selfjoin.pool import MarkedPool, count, held, marked_pool, read_multi
from lance_minhash_sql.selfjoin.shards import Shard
from lance_minhash_sql.selfjoin.sizing import chunk_pairs, pool_rows
from lance_minhash_sql.selfjoin.steps import run_shard
from lance_minhash_sql.selfjoin.verify import Verifier, pair_verifier, prepare, remaining

__all__ = ["SharedShards", "calls_key"]

_STATES = ByteCache.for_objects("what the calls of one list of shards share (SQL branches)", SHARED_SHARD_STATES)
_STATES_LOCK = threading.Lock()  # a state made and put once per key


def calls_key(shards: list[Shard], verify: str, budget: Budget) -> tuple:
    """What names the independent calls of one list of shards (a statement's branches) for
    a ``verify`` mode and budget: the dataset, version, column, threshold and key ranges."""
    s = shards[0]
    return (s.uri, s.version, s.column, s.threshold, tuple((x.lo, x.hi) for x in shards), verify, budget)


class _Group:
    """Shards (their places in the list, ``members``) verified over one pool
    (:class:`SharedShards` keeps it)."""

    def __init__(self, members: list[int]):
        self.members = members
        self.lock = threading.Lock()  # held while the pool is fetched
        self.running = self.called = 0
        self.pool: MarkedPool | None = None

    def fill(self, shards: list[Shard]) -> MarkedPool:
        """The group's pool, fetched if not held: its docs as a bit set (a doc's pool row
        is its rank, :func:`lance_minhash_sql.kernels.components.ranks`) and the docs'
        signatures, row ids and liveness."""
        with self.lock:
            if self.pool is None:
                plan = shards[0].plan
                marks = new_marks(plan.total_docs)
                for got in (read_multi(shards[i]) for i in self.members):
                    if got is not None:
                        set_marks(marks, sorted_unique(got[1]), True)
                self.pool = marked_pool(plan, marks)
                held(self.pool.ugids.size)
                count("fetched_rows", self.pool.ugids.size)
            return self.pool


class SharedShards:
    """The shared state of the calls of one list of shards, for one ``verify`` mode and
    budget (module doc); :meth:`pairs` is one shard's call."""

    def __init__(self, shards: list[Shard], verify: str, budget: Budget):
        self.shards, self.verify, self.budget = shards, verify, budget
        self.lock = threading.Lock()
        self.verifier: Verifier | None = None
        self.groups: list[_Group | None] | None = None  # per shard: its group, None alone over a pool
        self.turn = threading.Condition()
        self.current: _Group | None = None  # the group whose pool is held
        self.running = self.called = 0
        self.detached = False

    @classmethod
    def of(cls, shards: list[Shard], verify: str, budget: Budget) -> "SharedShards":
        """The shared state of ``shards`` for ``verify`` and ``budget`` (module doc)."""
        key = calls_key(shards, verify, budget)
        with _STATES_LOCK:
            state = _STATES.get(key)
            if state is None:
                state = cls(shards, verify, budget)
                _STATES.put(key, state)
            return state

    def detach(self) -> None:
        """Evicted (or the caches cleared): let go of the pool and the sets now, or when
        the last running call ends."""
        with self.lock:
            self.detached = True
            if self.running == 0:
                self._release()

    def _release(self) -> None:
        """Drop every group's pool and close the shingle sets; the caller holds :attr:`lock`
        and no call runs."""
        self.called = 0
        for group in self.groups or ():
            if group is not None:
                group.called, group.pool = 0, None
        self.current = None
        if self.verifier is not None and self.verifier.shingles is not None:
            self.verifier.shingles.close()
            self.verifier = None

    def pairs(self, index: int) -> Iterator[pa.RecordBatch]:
        """Shard ``index``'s verified pairs, in batches of at most :func:`.sizing.chunk_pairs` rows."""
        verifier, budget = self._enter()
        try:
            with bounded_heap():
                yield from self._shard(index, verifier, budget)
        finally:
            self._leave()

    def _shard(self, index: int, verifier: Verifier, budget: Budget) -> Iterator[pa.RecordBatch]:
        shard, group = self.shards[index], self.groups[index]
        exact = self.verify == "exact"
        if group is None:
            yield from run_shard(shard, budget, verifier, DEFAULT_CHUNK_PAIRS, exact)
            return
        got = read_multi(shard)
        if got is None:
            return
        keys, gids = got
        self._start(group)
        try:
            data = group.fill(self.shards).data(keys, gids)
            del keys, gids
            if data is not None:
                yield from verifier(shard, data, chunk_pairs(budget, DEFAULT_CHUNK_PAIRS))
        finally:
            self._end(group)
        if exact:
            trim_heap()

    def _start(self, group: _Group) -> None:
        """``group`` runs one more shard, once no shard of another group that holds the
        pool runs (one pool at a time); that group's pool is dropped then."""
        with self.turn:
            while self.current is not None and self.current is not group and self.current.running:
                self.turn.wait()
            if self.current is not group:
                if self.current is not None:
                    self.current.pool = None
                self.current = group
            group.running += 1

    def _end(self, group: _Group) -> None:
        with self.turn:
            group.running -= 1
            group.called += 1
            if group.running == 0:
                if group.called >= len(group.members):  # every shard of it ran
                    group.pool = None
                    self.current = None
                self.turn.notify_all()

    def _enter(self) -> tuple[Verifier, int]:
        with self.lock:
            if self.verifier is None:
                self.verifier = pair_verifier(self.verify, self.shards[0].plan.opened)
                prepare(self.verifier, self.shards, budget=self.budget)
            budget = remaining(self.verifier, self.budget)
            if self.groups is None:
                self.groups = _grouped(self.shards, budget)
            self.running += 1
            return self.verifier, budget

    def _leave(self) -> None:
        with self.lock:
            self.running -= 1
            self.called += 1
            if self.running == 0 and (self.detached or self.called >= len(self.shards)):
                self._release()  # every shard ran (a statement run again starts afresh), or evicted


def _grouped(shards: list[Shard], budget: Budget) -> list[_Group | None]:
    """Per shard its group (:func:`.groups.shard_groups`, over the pool of a budget of
    ``budget``); ``None`` for a shard whose own candidates do not fit, or that has
    none (module doc)."""
    plan = shards[0].plan
    place = {id(s): i for i, s in enumerate(shards)}
    out: list[_Group | None] = [None] * len(shards)
    groups = shard_groups(shards, budget, pool_rows(budget, plan.params.num_hashes), new_marks(plan.total_docs))
    try:
        for found in groups:
            if found.alone is None:
                group = _Group([place[id(member.shard)] for member in found.shards])
                for i in group.members:
                    out[i] = group
    finally:
        groups.close()
    return out
