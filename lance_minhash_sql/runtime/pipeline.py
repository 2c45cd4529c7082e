"""An ordered pipeline on threads: items produced concurrently, consumed in order.

The self-join runs one shard per item: a few shards in flight (each holds its rows and
buffers), their batches handed to the consumer shard by shard, in the shards' order, so
the answer does not depend on thread timing. A consumer that stops early stops the
producers too.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator

from lance_minhash_sql.core.tuning import MAX_WORKERS, PIPELINE_QUEUE_DEPTH

__all__ = ["MAX_WORKERS", "run_ordered"]


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


_DONE = object()


def run_ordered(items: list, produce: Callable[[Any], Iterable], workers: int | None = None,
                stop: threading.Event | None = None) -> Iterator:
    """Yield everything ``produce(item)`` yields, item by item in order, with ``workers``
    items in flight on threads (each holding at most :data:`PIPELINE_QUEUE_DEPTH` results ahead).
    ``stop`` (else a new event) is set when the consumer stops; ``produce`` may watch it
    too, to return without yielding again."""
    workers = min(len(items), workers or min(os.cpu_count() or 1, MAX_WORKERS))
    if workers <= 1:
        for item in items:
            yield from produce(item)
        return
    stop = threading.Event() if stop is None else stop
    queues = [queue.Queue(maxsize=PIPELINE_QUEUE_DEPTH) for _ in items]

    def put(q: queue.Queue, value) -> bool:
        while not stop.is_set():
            try:
                q.put(value, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work(i: int) -> None:
        q = queues[i]
        try:
            for value in produce(items[i]):
                if not put(q, value):
                    return
            put(q, _DONE)
        except BaseException as exc:  # handed to the consumer
            put(q, _Failure(exc))

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="minhash-pairs")
    try:
        submitted = 0
        for i in range(len(items)):
            while submitted < min(len(items), i + workers):
                pool.submit(work, submitted)
                submitted += 1
            while True:
                value = queues[i].get()
                if value is _DONE:
                    break
                if isinstance(value, _Failure):
                    raise value.exc
                yield value
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
