"""The compile-ahead helper process (``kernels/ahead.py`` starts it and explains it).

It works only on an idle core. On a busy machine it would not run beside its parent but
instead of it: the scheduler shares the CPU between sessions, not processes (Linux's
autogroups), so a second process of the same session takes its time from the first, and
every process pays numba's own start-up (importing it, its first compilation: seconds of
CPU) again. So the helper first measures the machine's idle time over a moment
(``/proc/stat``) and leaves when less than :data:`IDLE_CORES` cores were idle.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time

from lance_minhash_sql.kernels.ahead import PLAN, plan_entries
from lance_minhash_sql.kernels.config import dispatchers_by_name

__all__ = ["IDLE_CORES", "idle_cores", "helper_main"]

IDLE_CORES = 0.5  # idle cores, at the least, for the helper to work (its parent busy on one)
_SAMPLE_SECONDS = 0.2  # how long the helper measures the idle time before it starts


def _lock(cache_key: str):
    """An exclusive lock for the helpers of one numba cache folder, or None when another
    holds it (released when this process ends, however it ends)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no helper
        return None
    name = "lance-minhash-ahead-" + hashlib.sha1(cache_key.encode()).hexdigest()[:16] + ".lock"
    f = open(os.path.join(tempfile.gettempdir(), name), "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return None
    return f


def idle_cores(seconds: float = _SAMPLE_SECONDS) -> float | None:
    """Cores idle, on average, over the next ``seconds`` (``/proc/stat``: idle and I/O
    wait time of all CPUs); None where the system does not say."""

    def read() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
        return ticks[3] + ticks[4], sum(ticks)

    try:
        idle0, all0 = read()
        time.sleep(seconds)
        idle1, all1 = read()
    except (OSError, ValueError, IndexError):
        return None
    return (os.cpu_count() or 1) * (idle1 - idle0) / max(1, all1 - all0)


def _types_namespace() -> dict:
    from numba.core import types

    ns = dict(vars(types))
    ns["bool"] = types.boolean
    return ns


def helper_main(parent: str, first: str, plan: str = PLAN, when_idle: bool = True) -> None:
    """The helper process: compile the entries of ``plan`` after ``first``, last to first,
    until one is in the cache already: the parent compiled it (they met), or an earlier
    process did (which compiled the entries before it too). With ``when_idle``, only
    when :data:`IDLE_CORES` cores are idle (module doc)."""
    held = _lock(os.environ.get("NUMBA_CACHE_DIR") or os.path.dirname(os.path.abspath(__file__)))
    if held is None:
        return
    idle = idle_cores() if when_idle else None
    if idle is not None and idle < IDLE_CORES:
        return
    entries = plan_entries(plan)
    names = [name for name, _ in entries]
    if first in names:
        entries = entries[names.index(first) + 1:]
    found = dispatchers_by_name({name.rsplit(".", 1)[0] for name, _ in entries})
    ns = _types_namespace()
    for name, args in reversed(entries):
        if os.getppid() != int(parent):
            return
        dispatcher = found.get(name)
        if dispatcher is None:
            continue
        try:
            sig = tuple(eval(args, ns))  # noqa: S307 - the package's own list of numba types
            if sig in dispatcher.overloads:  # compiled here, inside a caller
                continue
            dispatcher.compile(sig)  # loads it instead when it is in the cache
        except Exception:  # a stale line: the parent compiles that kernel when it needs it
            continue
        if dispatcher.stats.cache_hits.get(sig):
            return
