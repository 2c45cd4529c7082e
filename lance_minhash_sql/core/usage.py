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

import sys

__all__ = ["cpu_seconds", "peak_rss_mb", "reset_peak_rss", "rss_mb", "status_mb"]

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
