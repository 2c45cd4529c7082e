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
this one): up to 64 arrays of constants, a pure function of ``num_hashes``. Storage options
are not cached here: ``duck/storage.py`` keeps them only while their connection lives.
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

from lance_minhash_sql.core.sizes import parse_bytes

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
        detach = getattr(value, "detach", None)
        if detach is not None:
            detach()

    def put(self, key, value, nbytes: int | None = None) -> bool:
        """Insert (replacing ``key``); False, and nothing cached, if it cannot fit."""
        nbytes = self._nbytes(nbytes)
        with self.lock:
            if key in self.values:
                self.drop(key)
            if nbytes > self.capacity or not self._evict_for(nbytes, key):
                return False
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
                return True
            if self.sizes[key] + extra > self.capacity or not self._evict_for(extra, key):
                return False  # (an impossible growth evicts nothing)
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
    """Inside the block the segment cache holds at most ``nbytes`` (what it held beyond is
    let go at once); its capacity is given back afterwards. A task that must stay within a
    budget reads its segments in ranged reads rather than whole into memory beside it."""
    old = set_cache_capacity(min(cache_capacity(), int(nbytes)))
    try:
        yield
    finally:
        set_cache_capacity(old)


def cache_usage() -> int:
    """Bytes held by the segment cache now (never above :func:`cache_capacity`)."""
    return segment_cache().usage


def cache_info() -> CacheInfo:
    return segment_cache().info()


def clear_cache() -> None:
    """Empty every cache of the process: segment data, opened datasets and indexes, plans,
    reports, layouts, and every :func:`memoized` function."""
    with _REGISTRY_LOCK:
        caches = list(_REGISTRY)
        memos = list(_MEMOS)
    for cache in caches:
        cache.clear()
    for memo in memos:
        memo.cache_clear()


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
    the byte caches (``"bytes"``) and the memoized functions (``"entries"``)."""
    with _REGISTRY_LOCK:
        caches = list(_REGISTRY)
        memos = list(_MEMOS)
    out = [(c.name, "bytes", c.usage, c.capacity) for c in caches]
    for m in memos:
        info = m.cache_info()
        out.append((f"{m.__module__}.{m.__qualname__}", "entries", info.currsize, info.maxsize))
    return sorted(out)
