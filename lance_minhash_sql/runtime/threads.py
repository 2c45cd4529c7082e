"""Running a ``nogil`` numba kernel over disjoint chunks on a few Python threads.

This replaces ``parallel=True`` twins of kernels whose work splits into coarse chunks
(rows to sign, runs to sort): the one serial kernel serves a query on the calling thread
and a build on every core, so a process compiles it once, and numba's parallel
compilation (seconds per kernel on a fresh install) is not paid at all.

The calling thread works too: it and up to ``threads - 1`` helpers of one process-wide
set of worker threads take chunks from a shared counter until none is left. So a call never
waits for workers busy with another caller (it simply gets fewer helpers), a chunk function
may itself call :func:`run_chunks`, and a build that signs a few thousand rows per batch
starts no new threads per batch (each new thread also got a malloc arena of its own,
whose freed batches stayed resident).
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from lance_minhash_sql.core.tuning import PARALLEL_MIN_ROWS
from lance_minhash_sql.kernels.config import load_numba, numba_loaded

__all__ = ["chunk_results", "in_chunks", "num_threads", "run_chunks"]

_workers: ThreadPoolExecutor | None = None
_workers_lock = threading.Lock()


def num_threads() -> int:
    """Threads for parallel work: numba's setting (``NUMBA_NUM_THREADS``, or
    ``numba.set_num_threads``), at least 1. Before numba is imported (a small build signed
    by numpy plans its sort here) it is read as numba reads it, without loading numba:
    ``NUMBA_NUM_THREADS``, else the CPUs this process may run on (``numba/core/config.py``).
    Before numba's threading layer is started, no ``set_num_threads`` can have run (it
    starts the layer), so the setting is numba's configured count, read without starting
    the layer (a multiprocessing lock, a library load and a team of threads that a build
    signing on these worker threads never uses); ``get_num_threads`` once it runs."""
    if numba_loaded() or "numba" in sys.modules:
        numba = load_numba()
        layer = sys.modules.get("numba.np.ufunc.parallel")
        if layer is not None and getattr(layer, "_is_initialized", True) is False:
            return max(1, int(numba.config.NUMBA_NUM_THREADS))
        return max(1, int(numba.get_num_threads()))
    configured = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if configured:
        return max(1, int(configured))
    affinity = getattr(os, "sched_getaffinity", None)
    return max(1, len(affinity(0)) if affinity is not None else os.cpu_count() or 1)


def _helpers() -> ThreadPoolExecutor:
    global _workers
    with _workers_lock:
        if _workers is None:
            _workers = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 1) - 1),
                                       thread_name_prefix="minhash-chunks")
        return _workers


def run_chunks(fn: Callable[[int, int], None], n: int, chunk: int, threads: int | None = None) -> None:
    """``fn(lo, hi)`` for ``[0, n)`` cut into chunks of ``chunk`` items, on the calling
    thread and up to ``threads - 1`` helper threads (default :func:`num_threads` in all);
    the first exception is raised once every started chunk has finished."""
    step = max(1, chunk)
    count = (n + step - 1) // step
    threads = min(threads or num_threads(), count)
    if threads <= 1:
        for lo in range(0, n, step):
            fn(lo, min(n, lo + step))
        return
    lock = threading.Lock()
    state = {"next": 0, "failed": False}

    def work() -> None:
        while True:
            with lock:
                i = state["next"]
                if i >= count or state["failed"]:
                    return
                state["next"] = i + 1
            try:
                fn(i * step, min(n, (i + 1) * step))
            except BaseException:
                state["failed"] = True
                raise

    workers = _helpers()
    futures = [workers.submit(work) for _ in range(threads - 1)]
    error = None
    try:
        work()
    except BaseException as exc:  # noqa: BLE001 - re-raised after the helpers stop
        error = exc
    for f in futures:
        if f.cancel():  # still queued behind another caller's work: not needed any more
            continue
        try:
            f.result()
        except BaseException as exc:  # noqa: BLE001
            error = error or exc
    if error is not None:
        raise error


def in_chunks(fn: Callable[[int, int], None], n: int, chunk: int | None = None) -> None:
    """``fn(lo, hi)`` over ``[0, n)``: at once on the calling thread below
    ``PARALLEL_MIN_ROWS`` (``core/tuning.py``), else by :func:`run_chunks` in chunks of
    ``chunk`` rows (``None``: one chunk per thread)."""
    if n < PARALLEL_MIN_ROWS:
        fn(0, n)
    else:
        run_chunks(fn, n, -(-n // num_threads()) if chunk is None else chunk)


def chunk_results(fn: Callable[[int, int], object], n: int, chunk: int | None = None) -> list:
    """:func:`in_chunks` of ``fn``, its results in row order."""
    parts: dict[int, object] = {}

    def one(lo: int, hi: int) -> None:
        parts[lo] = fn(lo, hi)

    in_chunks(one, n, chunk)
    return [parts[lo] for lo in sorted(parts)]
