"""The compile-ahead helper process (``runtime/compile_ahead.py`` starts it and explains it).

It runs at the lowest priority (``nice`` 19), so it takes only time its parent leaves:
an idle core. On a busy machine it would otherwise not run beside its parent but instead
of it, since the scheduler shares the CPU between sessions, not processes (Linux's
autogroups): a second process of the same session takes its time from the first, and
pays numba's own start-up (importing it, its first compilation: seconds of CPU) again.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

from lance_minhash_sql.runtime.compile_ahead import PLAN, plan_entries
from lance_minhash_sql.kernels.config import dispatchers_by_name

__all__ = ["NICE", "LOCK_NAME", "helper_main"]

NICE = 19  # the helper's priority: the lowest
LOCK_NAME = ".lance-minhash-ahead.lock"  # in the numba cache folder the helper fills


def _lock(cache_dir: str):
    """An exclusive lock for the helpers of one numba cache folder, or None when another
    holds it (released when this process ends, however it ends). The lock file lives in
    the folder it guards, so it goes with it; a folder this process cannot write (numba
    then caches elsewhere) gets one in the temporary folder, named after it."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no helper
        return None
    try:
        os.makedirs(cache_dir, exist_ok=True)
        f = open(os.path.join(cache_dir, LOCK_NAME), "a")
    except OSError:
        name = LOCK_NAME + "-" + hashlib.sha1(cache_dir.encode()).hexdigest()[:16]
        f = open(os.path.join(tempfile.gettempdir(), name), "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return None
    return f


def _types_namespace() -> dict:
    from numba.core import types

    ns = dict(vars(types))
    ns["bool"] = types.boolean
    return ns


def helper_main(parent: str, first: str, plan: str = PLAN) -> None:
    """The helper process: at priority :data:`NICE`, compile the entries of ``plan`` after
    ``first``, last to first, until one is in the cache already: the parent compiled it
    (they met), or an earlier process did (which compiled the entries before it too)."""
    held = _lock(os.environ.get("NUMBA_CACHE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__"))
    if held is None:
        return
    if hasattr(os, "nice"):
        os.nice(NICE)
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
