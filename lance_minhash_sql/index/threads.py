"""Running a ``nogil`` numba kernel over disjoint chunks on a few Python threads.

This replaces ``parallel=True`` twins of kernels whose work splits into coarse chunks
(rows to sign, runs to sort): the one serial kernel serves a query on the calling thread
and a build on every core, so a process compiles it once, and numba's parallel
compilation (seconds per kernel on a fresh install) is not paid at all.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numba

__all__ = ["num_threads", "run_chunks"]


def num_threads() -> int:
    """Threads for parallel work: numba's setting (``NUMBA_NUM_THREADS``, or
    ``numba.set_num_threads``), at least 1."""
    return max(1, int(numba.get_num_threads()))


def run_chunks(fn: Callable[[int, int], None], n: int, chunk: int, threads: int | None = None) -> None:
    """``fn(lo, hi)`` for ``[0, n)`` cut into chunks of ``chunk`` items, on up to
    ``threads`` threads (default :func:`num_threads`); the first exception is raised."""
    bounds = [(lo, min(n, lo + chunk)) for lo in range(0, n, max(1, chunk))]
    threads = min(threads or num_threads(), len(bounds))
    if threads <= 1:
        for lo, hi in bounds:
            fn(lo, hi)
        return
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for f in [pool.submit(fn, lo, hi) for lo, hi in bounds]:
            f.result()
