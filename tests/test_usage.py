"""Resource readings (lance_minhash_sql/core/usage.py): a child's peak is its own, not its parent's."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from lance_minhash_sql.core.usage import cpu_seconds, peak_rss_mb, rss_mb, status_mb

_CHILD = "import json; from lance_minhash_sql.core.usage import peak_rss_mb; print(json.dumps(peak_rss_mb()))"


def test_readings_are_consistent():
    now, peak = rss_mb(), peak_rss_mb()
    split = status_mb("RssAnon", "RssFile", "VmRSS")
    assert 0 < now <= peak
    assert set(split) == {"RssAnon", "RssFile", "VmRSS"}
    assert abs(split["RssAnon"] + split["RssFile"] - split["VmRSS"]) < 16  # RssShmem makes up the rest


def test_touched_memory_is_counted_now_and_in_the_peak():
    before = rss_mb()
    block = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB, every page touched
    during = rss_mb()
    assert during >= before + 60
    assert peak_rss_mb() >= during
    del block


def test_a_child_reports_its_own_peak_not_its_parents():
    """ru_maxrss carries the parent's peak over vfork + exec; VmHWM is the child's own."""
    block = np.ones(512 << 20, dtype=np.uint8)  # the parent's peak is at least 512 MiB
    parent = peak_rss_mb()
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True)
    del block
    child = json.loads(out.stdout)
    assert parent >= 512
    assert 0 < child < parent - 256, (child, parent)


def test_cpu_seconds_count_this_process_work():
    before = cpu_seconds()
    x = np.arange(1 << 22, dtype=np.uint64)
    for _ in range(40):  # about 0.1-0.2 CPU s of arithmetic
        x = x * np.uint64(3) + np.uint64(1)
    assert cpu_seconds() - before >= 0.02
