"""The process caches: one bounded, byte-accounted LRU type, memoized functions, and the
registry that :func:`clear_cache` empties.

Two kinds of cache hold data for a process, and both register here when created:

* :class:`ByteCache`, an LRU bounded in bytes: segment data (the *segment cache*,
  capacity :data:`DEFAULT_CACHE_BYTES`, ``LANCE_MINHASH_CACHE_BYTES`` overrides,
  :func:`set_cache_capacity` changes it at run time), opened dataset versions and indexes,
  self-join plans, report results, SQL result layouts. A cache of small objects whose size
  is not worth measuring (:meth:`ByteCache.for_objects`) charges each entry
  :data:`OBJECT_BYTES`, so its byte capacity is a bound on its entries;
* :func:`memoized` functions, bounded in entries: parsed parameters, signers, tokenizer
  tables, the macro files.

:func:`clear_cache` empties all of them; :func:`process_caches` lists them. The one cache
outside this registry is ``kernels/minhash.py:coefficients`` (the kernels' layer is below
this one): up to 64 arrays of constants, a pure function of ``num_hashes``.

Every other dict, list or set a module keeps for the life of the process is *state*, and
registers here too (:func:`register_state`): :func:`process_caches` lists it, and
:func:`clear_cache` empties what can be emptied safely (storage-option tokens, the row id
runs of segments, the search policy's account), never what must outlive it (the
connections ``install()`` registered, the callables DuckDB holds). ``tests/test_state.py``
fails on a module-level dict, list or set that is not registered. Per-run figures are not
state: a run returns or attaches them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from lance_minhash_sql.core import errors, sql_order, status
from lance_minhash_sql.core.sizes import parse_bytes
from lance_minhash_sql.runtime import compile_ahead
from lance_minhash_sql.kernels import config as kernel_config

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "CACHE_ENV",
    "OBJECT_BYTES",
    "CacheInfo",
    "ByteCache",
    "segment_cache",
    "cache_capacity",
    "set_cache_capacity",
    "capped_cache",
    "cache_usage",
    "cache_info",
    "clear_cache",
    "memoized",
    "process_caches",
    "register_state",
    "is_registered_state",
    "StateAccount",
    "Counters",
]

DEFAULT_CACHE_BYTES = 1 << 30
CACHE_ENV = "LANCE_MINHASH_CACHE_BYTES"
OBJECT_BYTES = 4096  # what an entry of a cache of small objects is charged


@dataclass(frozen=True)
class CacheInfo:
    capacity: int
    usage: int
    entries: int
    hits: int
    misses: int
    evictions: int


_REGISTRY: "weakref.WeakSet[ByteCache]" = weakref.WeakSet()
_REGISTRY_LOCK = threading.Lock()


class _GrowthBound:
    """What a block added to a cache, by key, within ``limit`` bytes in all."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held: dict[Any, int] = {}
        self.total = 0

    def fits(self, key, extra: int) -> bool:
        return extra <= 0 or self.total + extra <= self.limit

    def charge(self, key, extra: int) -> None:
        now = max(0, self.held.get(key, 0) + extra)
        self.total += now - self.held.get(key, 0)
        self.held[key] = now

    def release(self, key) -> None:
        self.total -= self.held.pop(key, 0)


class ByteCache:
    """An LRU of values with byte sizes; the sum never exceeds ``capacity``.

    An evicted value with a ``detach()`` method is told (a segment drops its data).
    """

    def __init__(self, name: str, capacity: int, object_bytes: int | None = None):
        self.name = name
        self.capacity = int(capacity)
        self.object_bytes = object_bytes
        self.usage = 0
        self.sizes: OrderedDict[Any, int] = OrderedDict()
        self.values: dict[Any, Any] = {}
        self.lock = threading.RLock()
        self.hits = self.misses = self.evictions = 0
        self.bounds: list[_GrowthBound] = []  # the open growth bounds (capped_cache)
        with _REGISTRY_LOCK:
            _REGISTRY.add(self)

    @classmethod
    def for_objects(cls, name: str, max_entries: int) -> "ByteCache":
        """A cache of up to ``max_entries`` small objects, each charged :data:`OBJECT_BYTES`."""
        return cls(name, max_entries * OBJECT_BYTES, OBJECT_BYTES)

    def _nbytes(self, nbytes: int | None) -> int:
        if nbytes is None:
            if self.object_bytes is None:
                raise TypeError(f"cache {self.name!r} needs each entry's size in bytes")
            return self.object_bytes
        return int(nbytes)

    def get(self, key, default=None):
        with self.lock:
            if key in self.values:
                self.sizes.move_to_end(key)
                self.hits += 1
                return self.values[key]
            self.misses += 1
            return default

    def __contains__(self, key) -> bool:
        with self.lock:
            return key in self.values

    def __len__(self) -> int:
        return len(self.values)

    def size_of(self, key) -> int:
        """Bytes charged for ``key`` (0 when absent)."""
        with self.lock:
            return self.sizes.get(key, 0)

    def _evict_for(self, extra: int, keep) -> bool:
        for other in list(self.sizes):
            if self.usage + extra <= self.capacity:
                break
            if other == keep:
                continue
            self.drop(other)
            self.evictions += 1
        return self.usage + extra <= self.capacity

    def drop(self, key) -> None:
        """Remove ``key`` (its value is told, if it listens)."""
        with self.lock:
            if key not in self.values:
                return
            self.usage -= self.sizes.pop(key)
            value = self.values.pop(key)
            for bound in self.bounds:
                bound.release(key)
        detach = getattr(value, "detach", None)
        if detach is not None:
            detach()

    def _fits_bounds(self, key, extra: int) -> bool:
        return all(bound.fits(key, extra) for bound in self.bounds)

    @contextlib.contextmanager
    def growth_bound(self, nbytes: int) -> Iterator[None]:
        """Inside the block, what the block adds to the cache (new entries, and growth of
        any entry) and the cache still holds stays within ``nbytes``: more is refused, as if
        the cache were full. The cache's capacity and what it held before do not change."""
        bound = _GrowthBound(int(nbytes))
        with self.lock:
            self.bounds.append(bound)
        try:
            yield
        finally:
            with self.lock:
                self.bounds.remove(bound)

    def put(self, key, value, nbytes: int | None = None) -> bool:
        """Insert (replacing ``key``); False, and nothing cached, if it cannot fit."""
        nbytes = self._nbytes(nbytes)
        with self.lock:
            if key in self.values:
                self.drop(key)
            if nbytes > self.capacity or not self._fits_bounds(key, nbytes) or not self._evict_for(nbytes, key):
                return False
            for bound in self.bounds:
                bound.charge(key, nbytes)
            self.sizes[key] = nbytes
            self.values[key] = value
            self.usage += nbytes
            return True

    def adopt(self, key, value, nbytes: int | None = None):
        """The value cached under ``key``: one another thread cached first, else ``value``
        (cached if it fits; ``value.cached`` says whether). Concurrent openers thus share
        one entry instead of replacing, and emptying, each other's."""
        with self.lock:
            if key in self.values:
                self.sizes.move_to_end(key)
                return self.values[key]
            value.cached = self.put(key, value, nbytes)
            return value

    def reserve(self, key, extra: int) -> bool:
        """Grow ``key``'s size by ``extra`` bytes, evicting others; False if impossible."""
        with self.lock:
            if key not in self.values:
                return False
            if extra <= 0:
                self.sizes[key] += extra
                self.usage += extra
                for bound in self.bounds:
                    bound.charge(key, extra)
                return True
            if (self.sizes[key] + extra > self.capacity or not self._fits_bounds(key, extra)
                    or not self._evict_for(extra, key)):
                return False  # (an impossible growth evicts nothing)
            for bound in self.bounds:
                bound.charge(key, extra)
            self.sizes[key] += extra
            self.usage += extra
            self.sizes.move_to_end(key)
            return True

    def settle(self, key, nbytes: int) -> None:
        """Make ``key``'s account exactly ``nbytes``; drop it if that cannot fit."""
        with self.lock:
            if key in self.sizes:
                diff = int(nbytes) - self.sizes[key]
                if diff and not self.reserve(key, diff):
                    self.drop(key)

    def room(self, keys) -> int:
        """Bytes that ``keys`` may still grow by together without evicting each other."""
        with self.lock:
            return self.capacity - sum(self.sizes.get(k, 0) for k in keys)

    def set_capacity(self, capacity: int) -> None:
        with self.lock:
            self.capacity = int(capacity)
            self._evict_for(0, None)

    def clear(self) -> None:
        with self.lock:
            for key in list(self.sizes):
                self.drop(key)

    def info(self) -> CacheInfo:
        with self.lock:
            return CacheInfo(self.capacity, self.usage, len(self.sizes), self.hits, self.misses, self.evictions)


# --------------------------------------------------------------------------- the segment cache


def _check_capacity(nbytes: Any) -> int:
    return parse_bytes(nbytes, "cache capacity", minimum=0)


_segments: ByteCache | None = None
_segments_lock = threading.Lock()


def segment_cache() -> ByteCache:
    """The cache of segment data (created on first use, sized from ``LANCE_MINHASH_CACHE_BYTES``)."""
    global _segments
    if _segments is None:
        with _segments_lock:
            if _segments is None:
                env = os.environ.get(CACHE_ENV)
                _segments = ByteCache("segments", DEFAULT_CACHE_BYTES if env is None or not env.strip()
                                      else parse_bytes(env, f"${CACHE_ENV}", 0))
    return _segments


def cache_capacity() -> int:
    """The segment cache's capacity in bytes."""
    return segment_cache().capacity


def set_cache_capacity(nbytes: int) -> int:
    """Set the segment cache's capacity (bytes; evicts at once if needed); returns the old one."""
    cache = segment_cache()
    old = cache.capacity
    cache.set_capacity(_check_capacity(nbytes))
    return old


@contextlib.contextmanager
def capped_cache(nbytes: int) -> Iterator[None]:
    """Inside the block, what the segment cache takes on (and still holds) stays within
    ``nbytes`` (:meth:`ByteCache.growth_bound`): a task that must stay within a budget then
    reads its segments in ranged reads rather than whole into memory beside it. The cache's
    capacity does not change and nothing it held before is let go; a Ray task runs alone in
    its worker, so what the cache takes on in the block is the task's."""
    with segment_cache().growth_bound(nbytes):
        yield


def cache_usage() -> int:
    """Bytes held by the segment cache now (never above :func:`cache_capacity`)."""
    return segment_cache().usage


def cache_info() -> CacheInfo:
    return segment_cache().info()


def clear_cache() -> None:
    """Empty every cache of the process: segment data, opened datasets and indexes, plans,
    reports, layouts, every :func:`memoized` function, and the state registered with a
    ``clear`` (:func:`register_state`)."""
    with _REGISTRY_LOCK:
        caches = list(_REGISTRY)
        memos = list(_MEMOS)
        states = list(_STATES)
    for cache in caches:
        cache.clear()
    for memo in memos:
        memo.cache_clear()
    for state in states:
        if state.clear is not None:
            state.clear()


# --------------------------------------------------------------------------- memoized functions

_MEMOS: list = []


def memoized(maxsize: int) -> Callable[[Callable], Callable]:
    """``functools.lru_cache(maxsize)``, registered so :func:`clear_cache` empties it and
    :func:`process_caches` lists it. For pure functions of hashable arguments."""

    def wrap(func: Callable) -> Callable:
        memo = functools.lru_cache(maxsize=maxsize)(func)
        with _REGISTRY_LOCK:
            _MEMOS.append(memo)
        return memo

    return wrap


def process_caches() -> list[tuple[str, str, int, int]]:
    """``(name, bound unit, entries or bytes held, capacity)`` of every registered cache:
    the byte caches (``"bytes"``), the memoized functions (``"entries"``) and the
    registered state (``"state"``, capacity 0: bounded by what it tracks, not by a size)."""
    with _REGISTRY_LOCK:
        caches = list(_REGISTRY)
        memos = list(_MEMOS)
        states = list(_STATES)
    out = [(c.name, "bytes", c.usage, c.capacity) for c in caches]
    for m in memos:
        info = m.cache_info()
        out.append((f"{m.__module__}.{m.__qualname__}", "entries", info.currsize, info.maxsize))
    out += [(state.name, "state", state.entries(), 0) for state in states]
    return sorted(out)


# --------------------------------------------------------------------------- other process state


@dataclass(frozen=True)
class _State:
    name: str
    holders: tuple
    clear: Callable[[], None] | None

    def entries(self) -> int:
        return sum(len(h) for h in self.holders)


_STATES: list[_State] = []


def register_state(name: str, *holders, clear: Callable[[], None] | None = None) -> None:
    """Register the dicts, lists, sets or weak mappings (``holders``) a module keeps for the
    life of the process under ``name``; ``clear`` (if given) empties them for
    :func:`clear_cache`, under the module's own lock. State that must outlive
    :func:`clear_cache` is registered without one, and is only listed."""
    with _REGISTRY_LOCK:
        _STATES.append(_State(name, holders, clear))


def _forget_no_caller_warnings() -> None:
    errors.NO_CALLER_WARNINGS.clear()
    errors.ONCE_WARNINGS.clear()


# the state of the layers below this one, which cannot import it
register_state("warnings issued without a caller, and once-only warnings", errors.NO_CALLER_WARNINGS,
               errors.ONCE_WARNINGS, clear=_forget_no_caller_warnings)
register_state("kernels declared before numba loads", kernel_config.DECLARED_KERNELS)  # each leaves it with its dispatcher
register_state("the compile-ahead helper this process started", compile_ahead.HELPERS)  # ends with the process
register_state("status lines shown on the terminal", status.SHOWN)  # each removed as it ends or a bar starts
register_state("what the first compilation calls (runtime/compile_ahead.py installs it)", kernel_config.FIRST_COMPILE)
register_state("what sorts rows by a SQL ORDER BY (the package root installs it)", sql_order.SORTER)


def is_registered_state(obj) -> bool:
    """Whether ``obj`` is one of the registry's own holders or a registered one."""
    with _REGISTRY_LOCK:
        own = obj is _REGISTRY or obj is _MEMOS or obj is _STATES
        return own or any(h is obj for state in _STATES for h in state.holders)


class Counters(dict):
    """Named counts a module keeps for the life of the process (what a self-join read,
    held or wrote to disk), as a registered state that :func:`clear_cache` sets back to zero.
    Writes go through :meth:`add` and :meth:`high`, under the counters' own lock (shards
    count on several threads); reading is a plain dict read."""

    def __init__(self, name: str, *keys: str):
        super().__init__((k, 0) for k in keys)
        self._lock = threading.Lock()
        register_state(name, self, clear=self.reset)

    def add(self, key: str, n: int = 1) -> None:
        with self._lock:
            self[key] += int(n)

    def high(self, key: str, value: int) -> None:
        """Keep the largest ``value`` seen under ``key``."""
        with self._lock:
            self[key] = max(self[key], int(value))

    def reset(self) -> None:
        with self._lock:
            for k in self:
                self[k] = 0


class StateAccount:
    """A float a module adds to for the life of the process (seconds spent, say), as a
    registered state that :func:`clear_cache` sets back to zero."""

    def __init__(self, name: str):
        self.value = 0.0
        self._holder = [self]
        register_state(name, self._holder, clear=self.reset)

    def add(self, amount: float) -> None:
        self.value += amount

    def reset(self) -> None:
        self.value = 0.0
