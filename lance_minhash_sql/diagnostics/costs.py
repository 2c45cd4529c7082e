"""What a full ``minhash_pairs`` would cost on this machine: seconds, peak memory and
temporary disk, projected from the sample's estimate of the pairs and the engine's unit
costs (``docs/estimate.md``, *What the full run would cost*).

**Model.** The self-join reads every band row of the index once (key-range shards, its
``bands.lance`` files in order), verifies the candidates of the buckets (the pool of
their signatures read in doc order) and emits the pairs, so its time is

    seconds = band_rows * SELF_JOIN_BAND_ROW_SECONDS + pairs * SELF_JOIN_PAIR_SECONDS

(``band_rows`` = live rows x ``num_bands``; ``pairs`` the sample's estimate; times
``SELF_JOIN_EXACT_FACTOR`` with ``verify="exact"``), and its peak
resident memory, a process that loaded the engine included,

    peak_memory = SELF_JOIN_BASE_BYTES + POOL_SHARE * memory_limit + rows * SELF_JOIN_ROW_BYTES

(the budget's pool share filled with candidates' signatures; per row, the pairs' labels,
the candidates' bit set and the index pages the shards map while they read them, which
count in the resident set and which a budget does not bound). The pairs' self-join holds
everything within its budget and writes no temporary file: ``temp_disk`` is 0.

**Calibration.** The unit costs are ``core/tuning.py``'s, fitted on the 2-core development
machine to the self-join's first call at 1M and 10M rows of the synthetic corpus
(``benchmarks/estimate.py``), each measured time divided by the busy factor below measured
beside it: the costs of an idle machine. What this machine gives the process *now* is
measured by :func:`busy_factor`: a loop of pure computation on the calling thread, run
until it has had :data:`PROBE_CPU_SECONDS` of CPU, and its wall time over that CPU time.
On an idle machine the ratio is about 1; when other processes hold the cores, the thread
waits for its share and the ratio grows with the wait (about the load average over the
cores), and the self-join's time is projected times that ratio. (The sample's own search
is not the probe: its first call waits for the index's pages to be read, which is not the
machine being busy.) ``benchmarks/estimate.py`` measures projected against measured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from lance_minhash_sql.core.tuning import (POOL_SHARE, SELF_JOIN_BAND_ROW_SECONDS, SELF_JOIN_BASE_BYTES,
                                           SELF_JOIN_EXACT_FACTOR, SELF_JOIN_PAIR_SECONDS, SELF_JOIN_ROW_BYTES)

__all__ = ["Projection", "project", "busy_factor", "PROBE_CPU_SECONDS"]


PROBE_CPU_SECONDS = 0.1  # the busy factor's probe: CPU time of the calling thread (about 0.1 s idle)


@dataclass(frozen=True)
class Projection:
    seconds: float
    peak_memory: int
    temp_disk: int


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


def project(rows: int, num_bands: int, pairs: float, memory_limit: int, verify: str = "estimate",
            busy: float = 1.0) -> Projection:
    """What the full self-join of an index of ``rows`` live rows reporting ``pairs`` pairs
    would take under a budget of ``memory_limit`` bytes, ``busy`` times the idle machine's
    time (see the module doc)."""
    seconds = busy * (rows * num_bands * SELF_JOIN_BAND_ROW_SECONDS + max(pairs, 0.0) * SELF_JOIN_PAIR_SECONDS)
    if verify == "exact":
        seconds *= SELF_JOIN_EXACT_FACTOR
    peak = SELF_JOIN_BASE_BYTES + POOL_SHARE * memory_limit + rows * SELF_JOIN_ROW_BYTES
    return Projection(float(seconds), int(peak), 0)
