"""An ordered pipeline on threads: items produced concurrently, consumed in order.

The self-join runs one shard per item: a shard per thread in flight (each holds its rows
and buffers), their batches handed to the consumer shard by shard, in the shards' order, so
the answer does not depend on thread timing; the batches of the shards after the
consumer's are held up to a bound, so one long shard does not idle the other threads. A
consumer that stops early stops the producers too.
"""

from __future__ import annotations

import collections
import os
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
                stop: threading.Event | None = None, ahead: int | None = None,
                weight: Callable[[Any], int] | None = None) -> Iterator:
    """Yield everything ``produce(item)`` yields, item by item in order, items produced on
    ``workers`` threads. The item the consumer is on never waits; the items after it hold
    at most ``ahead`` results, all together (default :data:`PIPELINE_QUEUE_DEPTH` a
    worker; with ``weight``, results whose weights, e.g. bytes, add up to at most
    ``ahead``, or one alone), and a worker whose result would pass that waits for the
    consumer. So a long
    item does not hold the other threads back while the results of the shorter ones
    after it fit ``ahead``, and what is held is bounded whatever the items' sizes: the
    results ahead plus one result in each waiting worker. ``stop`` (else a new event) is
    set when the consumer stops; ``produce`` may watch it too, to return without yielding
    again."""
    workers = min(len(items), workers or min(os.cpu_count() or 1, MAX_WORKERS))
    if workers <= 1:
        for item in items:
            yield from produce(item)
        return
    stop = threading.Event() if stop is None else stop
    ahead = workers * PIPELINE_QUEUE_DEPTH if ahead is None else ahead
    results = [collections.deque() for _ in items]  # (value, counted against ahead)
    state = {"current": 0, "held": 0}
    cond = threading.Condition()

    def put(i: int, value) -> bool:
        final = value is _DONE or isinstance(value, _Failure)
        size = 0 if final else 1 if weight is None else weight(value)
        with cond:
            while (i != state["current"] and state["held"] + size > ahead and (state["held"] or weight is None)
                   and not stop.is_set()):
                cond.wait(0.05)
            if stop.is_set():
                return False
            counted = size if i != state["current"] else 0
            state["held"] += counted
            results[i].append((value, counted))
            cond.notify_all()
        return True

    def work(i: int) -> None:
        try:
            for value in produce(items[i]):
                if not put(i, value):
                    return
            put(i, _DONE)
        except BaseException as exc:  # handed to the consumer
            put(i, _Failure(exc))

    def take(i: int):
        with cond:
            while not results[i]:
                cond.wait()
            value, counted = results[i].popleft()
            state["held"] -= counted
            cond.notify_all()
            return value

    threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="minhash-pairs")
    try:
        for i in range(len(items)):  # (queued in order: a thread takes the next as it frees)
            threads.submit(work, i)
        for i in range(len(items)):
            with cond:
                state["current"] = i
                cond.notify_all()
            while True:
                value = take(i)
                if value is _DONE:
                    break
                if isinstance(value, _Failure):
                    raise value.exc
                yield value
    finally:
        stop.set()
        with cond:
            cond.notify_all()
        threads.shutdown(wait=True, cancel_futures=True)
