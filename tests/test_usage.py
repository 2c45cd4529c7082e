"""Resource readings (lance_minhash_sql/core/usage.py): a child's peak is its own, not its parent's."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

import mmap
import time

from lance_minhash_sql.core.usage import PeakSampler, cpu_seconds, peak_rss_mb, rss_mb, status_mb

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


def _until_sampled(sampler: PeakSampler, more: int = 3) -> None:
    """Wait for the sampler's thread to take ``more`` readings (counted, not timed)."""
    goal = sampler.samples + more
    while sampler.samples < goal:
        time.sleep(0.002)


def test_the_sampler_splits_allocated_memory_from_mapped_file_pages(tmp_path):
    """A budget bounds anonymous memory: 64 MiB allocated raise ``RssAnon``'s peak, 64 MiB of
    a file read through a memory map raise ``RssFile``'s and leave ``RssAnon``'s alone; the
    peaks stay after the memory is gone."""
    path = tmp_path / "pages.bin"
    path.write_bytes(b"\x01" * (64 << 20))
    with PeakSampler("RssAnon", "RssFile", every=0.001) as s:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            assert sum(m[i] for i in range(0, len(m), 4096)) == (64 << 20) // 4096  # every page read
            _until_sampled(s)
        file_rise, anon_after_map = s.peak["RssFile"] - s.start["RssFile"], s.rise("RssAnon")
        block = np.ones(64 << 20, dtype=np.uint8)
        _until_sampled(s)
        del block
        _until_sampled(s)
    assert file_rise >= 60, s.peak
    assert anon_after_map < 16, s.peak
    assert s.rise("RssAnon") >= 60, s.peak
    assert status_mb("RssAnon")["RssAnon"] < s.peak["RssAnon"] - 40  # freed, the peak kept
    assert s.samples >= 6
