"""The machine's load now, as the dry run's projections read it (``docs/estimate.md``,
*What the full run would cost*): how much longer a thread's work takes than on an idle
machine (:func:`busy_factor`, the dry run's ``busy_factor`` column), and the cores the
engine's threads get among the others runnable (:func:`cores_now`, the projection's
:attr:`~.costs.Rates.parallel`): from the load, the last minute's or the threads runnable
now when fewer (:func:`runnable_others`), and the cores this process may run on.
"""

from __future__ import annotations

import os
import time

from lance_minhash_sql.core.usage import usable_cores
from lance_minhash_sql.runtime.threads import num_threads

__all__ = ["busy_factor", "cores_now", "runnable_others", "PROBE_CPU_SECONDS"]


LOADAVG = "/proc/loadavg"  # Linux: the load averages, then "running/total" threads
PROBE_CPU_SECONDS = 0.1  # the busy factor's probe: CPU time of the calling thread (about 0.1 s idle)


def busy_factor() -> float:
    """How much longer than on an idle machine work takes now: the wall time of
    :data:`PROBE_CPU_SECONDS` of the calling thread's CPU, over that CPU time, at least 1."""
    wall, cpu = time.perf_counter(), time.thread_time()
    spent, x = 0.0, 0
    while spent < PROBE_CPU_SECONDS:
        for i in range(10_000):  # pure computation: no memory traffic, no I/O
            x = (x * 31 + i) & 0xFFFF
        spent = time.thread_time() - cpu
    return max(1.0, (time.perf_counter() - wall) / spent)


def cores_now() -> float:
    """The cores the engine's threads get: ``T`` threads among ``L`` runnable others on
    ``C`` cores get ``C T / (L + T)`` of them, at most ``T`` (and ``C``, the cores this
    process may run on). ``L`` is the load average of the last minute, or the others
    runnable now when fewer (:func:`runnable_others`): the minute's average still counts
    work that has ended, this process's own calibration and whatever ran just before it."""
    threads, cores = num_threads(), usable_cores()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    now = runnable_others()
    if now is not None:
        load = min(load, now)
    return min(threads, cores, cores * threads / (load + threads))


def runnable_others(readings: int = 5) -> float | None:
    """The threads runnable on the machine now besides the one asking (``/proc/loadavg``'s
    running count less one), the median of ``readings`` a few milliseconds apart; ``None``
    where it cannot be read."""
    seen = []
    for i in range(readings):
        try:
            with open(LOADAVG) as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, IndexError, ValueError):
            return None
        seen.append(max(0, running - 1))
        if i + 1 < readings:
            time.sleep(0.002)
    return float(sorted(seen)[len(seen) // 2])
