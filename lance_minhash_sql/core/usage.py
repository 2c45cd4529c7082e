"""Resource readings of this process (memory and CPU time), for the benchmarks and
``lance-minhash bench``.

The peak is the memory map's high-water mark, ``VmHWM`` in ``/proc/self/status``, not
``getrusage().ru_maxrss``: Linux carries ``ru_maxrss`` over ``fork`` and ``exec`` (and
Python's ``subprocess`` starts children with ``vfork``), so a child read that way
reports its parent's peak whenever that is the higher one, as when the parent has just
written the benchmark's dataset. Where ``/proc`` is missing (not Linux), ``ru_maxrss``
is the fallback.
"""

from __future__ import annotations

import os
import sys
import threading

__all__ = ["PeakSampler", "cpu_seconds", "peak_rss_mb", "reset_peak_rss", "rss_mb", "status_mb", "usable_cores"]

_STATUS = "/proc/self/status"


def status_mb(*keys: str) -> dict[str, float]:
    """The ``kB`` fields ``keys`` of ``/proc/self/status`` in MB (MiB), e.g.
    ``status_mb("VmRSS", "RssAnon")``; an empty dict without ``/proc``."""
    out: dict[str, float] = {}
    try:
        with open(_STATUS) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in keys:
                    out[key] = int(value.split()[0]) / 1024.0
    except OSError:
        pass
    return out


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; all of them where that cannot
    be read)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_seconds() -> float:
    """User and system CPU seconds of this process so far (all its threads)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _maxrss_mb() -> float:
    import resource

    scale = 1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0  # bytes on macOS, kB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def peak_rss_mb() -> float:
    """The highest resident set size of this process so far, in MB."""
    return status_mb("VmHWM").get("VmHWM") or _maxrss_mb()


def rss_mb() -> float:
    """The resident set size of this process now, in MB (NaN where it cannot be read)."""
    return status_mb("VmRSS").get("VmRSS", float("nan"))


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (``VmHWM``) to its RSS now, so that
    :func:`peak_rss_mb` measures what follows (a Ray task in a reused worker process);
    False where Linux's ``/proc/self/clear_refs`` cannot be written."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakSampler:
    """The highest values of fields of ``/proc/self/status`` while a ``with`` block runs,
    sampled from a thread every ``every`` seconds, in MB.

    The kernel keeps a high-water mark of the whole RSS only (``VmHWM``), which counts the
    pages of mapped files and of shared memory beside the memory a process allocated; the
    peak of one part (``RssAnon``: what a budget bounds; ``RssFile``; ``RssShmem``) can only
    be sampled. ``start`` holds the values at entry, ``peak`` the highest seen so far
    (readable inside the block: :meth:`sample` takes one more first), ``samples`` how many
    readings were taken. Without ``/proc`` both dicts stay empty.
    """

    def __init__(self, *keys: str, every: float = 0.01):
        self.keys, self.every = keys or ("RssAnon",), every
        self.start: dict[str, float] = {}
        self.peak: dict[str, float] = {}
        self.samples = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-sampler", daemon=True)

    def sample(self) -> dict[str, float]:
        """Read the fields now and fold them into ``peak``; returns ``peak``."""
        for key, mb in status_mb(*self.keys).items():
            if mb > self.peak.get(key, -1.0):
                self.peak[key] = mb
        self.samples += 1
        return self.peak

    def rise(self, key: str = "RssAnon") -> float:
        """The peak of ``key`` over its value at entry, in MB (0 where unknown)."""
        return max(0.0, self.sample().get(key, 0.0) - self.start.get(key, 0.0))

    def _run(self) -> None:
        while not self._done.wait(self.every):
            self.sample()

    def __enter__(self) -> "PeakSampler":
        self.start = status_mb(*self.keys)
        self.peak = dict(self.start)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.sample()
