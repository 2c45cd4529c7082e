"""``runtime/pipeline.py:run_ordered``: results in item order whatever the threads do, a
long item not holding the other threads back, and what is held ahead of the consumer
bounded."""

from __future__ import annotations

import threading
import time

import pytest

from lance_minhash_sql.runtime.pipeline import run_ordered


def test_results_come_in_item_order():
    items = list(range(40))

    def produce(i):
        for j in range(i % 5):
            yield (i, j)

    assert list(run_ordered(items, produce, workers=4)) == [(i, j) for i in items for j in range(i % 5)]


def test_a_long_item_does_not_hold_the_other_threads_back():
    """Item 0 yields its last result only once items 1-5 have all been produced: the second
    thread takes them one after the other while the consumer is still on item 0 (a worker
    used to wait after one item ahead)."""
    done = threading.Event()
    finished = []
    lock = threading.Lock()

    def produce(i):
        if i == 0:
            yield "first"
            done.wait(timeout=30)
            yield "last" if done.is_set() else "timed out"
            return
        yield i
        with lock:
            finished.append(i)
            if len(finished) == 5:
                done.set()

    got = list(run_ordered(list(range(6)), produce, workers=2, ahead=5))
    assert got == ["first", "last", 1, 2, 3, 4, 5]


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_results_held_ahead_of_the_consumer_are_bounded(ahead):
    """At any time the results produced for items after the last one the consumer took
    from, not yet taken, number at most ``ahead``, plus one in each waiting worker, plus
    those of the item the consumer has moved on to (4 here): not the 100 a slow
    consumer would let through unbounded."""
    workers = 3
    state = {"current": 0, "made": {}, "taken": {}, "most": 0}
    lock = threading.Lock()

    def produce(i):
        for j in range(4):
            with lock:
                state["made"][i] = state["made"].get(i, 0) + 1
                held = sum(n - state["taken"].get(k, 0) for k, n in state["made"].items() if k > state["current"])
                state["most"] = max(state["most"], held)
            yield (i, j)

    out = []
    for i, j in run_ordered(list(range(30)), produce, workers=workers, ahead=ahead):
        with lock:
            state["current"] = i
            state["taken"][i] = state["taken"].get(i, 0) + 1
        out.append((i, j))
        time.sleep(0.002)  # a slow consumer: the producers run ahead as far as they may
    assert out == [(i, j) for i in range(30) for j in range(4)]
    assert state["most"] <= ahead + workers + 4


def test_a_failure_reaches_the_consumer_and_a_stop_stops_the_producers():
    made = []

    def produce(i):
        if i == 3:
            raise ValueError("item 3")
        for j in range(1000):
            made.append(i)
            yield j

    with pytest.raises(ValueError, match="item 3"):
        for _ in run_ordered(list(range(8)), produce, workers=2, ahead=2):
            pass
    stop = threading.Event()
    gen = run_ordered(list(range(8)), lambda i: iter(range(10**9)), workers=2, stop=stop)
    next(gen)
    gen.close()
    assert stop.is_set()


def test_weighted_results_ahead_are_bounded_by_their_weight():
    """With ``weight``, what is held ahead adds up to at most ``ahead`` (a result heavier
    than that alone), plus one result in each waiting worker."""
    workers, ahead = 2, 100
    state = {"held": 0, "most": 0, "current": -1}
    lock = threading.Lock()
    sizes = {i: (i * 37) % 90 + 1 for i in range(40)}

    def produce(i):
        with lock:
            state["held"] += sizes[i]
        yield i

    out = []
    for i in run_ordered(list(range(40)), produce, workers=workers, ahead=ahead, weight=lambda i: sizes[i]):
        with lock:
            state["held"] -= sizes[i]
            state["most"] = max(state["most"], state["held"])
        out.append(i)
        time.sleep(0.002)
    assert out == list(range(40))
    assert state["most"] <= ahead + workers * max(sizes.values())
