"""The process's heap: glibc thresholds while a build runs, and handing freed pages back.

A build and a self-join free large batches on several threads that glibc would keep
resident; :func:`bounded_heap` lowers glibc's mmap and trim thresholds for the duration of
every concurrent build or self-join, and :func:`release_memory` returns the heaps' free
pages to the OS.
On another C library both are no-ops. The measurements behind the thresholds follow.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import threading

from lance_minhash_sql.core.usage import usable_cores

__all__ = ["bounded_heap", "is_tight", "release_memory", "trim_heap", "limit_arenas", "arena_limit"]


# What a build's memory is made of (``benchmarks/build.py --trace`` shows it per phase):
# the process (Python, pyarrow, lance, numba and the loaded kernels), Lance's scanner and
# its read-ahead, our buffers within the plan's shares (index/band_sorter.py), and the heap:
# every batch frees its texts, signatures and band keys, which glibc (its mmap threshold
# raised on the fly) keeps in the heaps of several threads' arenas, whose free tops go
# back only above the trim threshold and which malloc_trim() does not reach. So the loops
# hold no batch or chunk they are done with, and bounded_heap() fixes the thresholds when
# the plan is tight, for more page faults; a plan with room to spare skips it.


def _libc_fn(name: str, *argtypes):
    """A glibc function, or None (another C library)."""
    try:
        fn = getattr(ctypes.CDLL(None), name)  # the process's own C library (no search for its file)
    except (OSError, AttributeError, TypeError):
        return None
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return fn


_MALLOC_TRIM = _libc_fn("malloc_trim", ctypes.c_size_t)
_MALLOPT = _libc_fn("mallopt", ctypes.c_int, ctypes.c_int)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
# during a build: blocks of 5 MiB and more (a batch's texts and signatures; the band
# keys too from 40K-row batches) are mapped and unmapped on their own, and a heap's
# free top above 16 MiB is handed back at once, so freed batches do not stay in the
# arenas of the scan and signing threads. Lower thresholds trade a little RSS for a page
# fault per block mapped (``benchmarks/build.py --trace`` shows RSS per build phase).
_HEAP_DURING_BUILD = (5 << 20, 16 << 20)  # (mmap threshold, trim threshold)
# afterwards: glibc's dynamic maxima (DEFAULT_MMAP_THRESHOLD_MAX and twice it), where
# its own adjustment ends up after any build (setting a threshold ends that adjustment)
_HEAP_AFTER_BUILD = (32 << 20, 64 << 20)
_M_ARENA_MAX = -8
ARENAS_ENV = "MALLOC_ARENA_MAX"  # glibc's own setting: where the user set it, it stands
_heap_lock = threading.Lock()
_heap_users = 0


def _set_heap(mmap_threshold: int, trim_threshold: int) -> None:
    _MALLOPT(_M_MMAP_THRESHOLD, mmap_threshold)
    _MALLOPT(_M_TRIM_THRESHOLD, trim_threshold)


def is_tight(working: int, budget: int) -> bool:
    """Whether a plan that holds about ``working`` bytes is *tight* under ``budget`` bytes:
    above half of it. A tight plan runs under :func:`bounded_heap`; one with room to spare
    leaves glibc's thresholds alone, its freed buffers reused without new page faults."""
    return 2 * working > budget


@contextlib.contextmanager
def bounded_heap(bound: bool = True):
    """glibc heap thresholds for the duration of a build or a self-join (of all that run at
    once); ``bound=False``: none (a plan with room to spare, :func:`is_tight`)."""
    global _heap_users
    if _MALLOPT is None or not bound:
        yield
        return
    with _heap_lock:
        _heap_users += 1
        if _heap_users == 1:
            _set_heap(*_HEAP_DURING_BUILD)
    try:
        yield
    finally:
        with _heap_lock:
            _heap_users -= 1
            if _heap_users == 0:
                _set_heap(*_HEAP_AFTER_BUILD)


def release_memory() -> None:
    """Hand the heaps' free pages back to the OS between the build's phases
    (``malloc_trim(0)``, a few milliseconds): the scan's freed batches would otherwise
    stay resident under the sort's buffers."""
    gc.collect()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def trim_heap() -> None:
    """Hand the heaps' free pages back to the OS (``malloc_trim(0)``) without a garbage
    collection: for a self-join's shard on a worker thread, where the arrays it freed are
    plain buffers and a full collection of the process's objects would cost more than the
    trim (``selfjoin/steps.py``)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def limit_arenas() -> None:
    """At most one glibc malloc arena per core this process may run on (glibc's default is
    eight per core), set when the package is imported, before its threads start.

    Why: every thread that allocates while the others hold the arenas gets an arena of its
    own, and an arena keeps what its thread freed. The self-join's and the build's
    threads (the reading, verifying and signing workers, Lance's and DuckDB's) free buffers
    of every size, so each arena grows to its thread's largest working set and stays
    there (``docs/scale.md``, *The C heap*; ``benchmarks/verify_modes.py``). ``MALLOC_ARENA_MAX``
    in the environment keeps glibc's own choice."""
    if _MALLOPT is None or os.environ.get(ARENAS_ENV):
        return
    _MALLOPT(_M_ARENA_MAX, arena_limit())


def arena_limit() -> int:
    """The arenas :func:`limit_arenas` allows: one per core this process may run on, at least two."""
    return max(2, usable_cores())


limit_arenas()
