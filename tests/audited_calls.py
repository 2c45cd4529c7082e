"""The file-system calls the kill tests (``kill_during_write.py``, ``kill_during_ingest.py``)
count as moments to kill at: what Python audits (open, mkdir, rename, remove, rmtree,
listdir, scandir), but on numba's kernel cache (loaded, or written by a first compile: how
many depends on what earlier processes cached, not on the code under test)."""

from __future__ import annotations

import os

AUDITED = {"open", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree", "os.listdir", "os.scandir"}


def _numba_cache(args) -> bool:
    path = args[0] if args else None
    if path is None or isinstance(path, int):
        return False
    try:
        path = os.fsdecode(path)
    except TypeError:
        return False
    cache = os.environ.get("NUMBA_CACHE_DIR")
    return "__pycache__" in path or path.endswith((".nbi", ".nbc")) or bool(cache and path.startswith(cache))


def counts(name: str, args) -> bool:
    """Whether the audited call ``name(args)`` is a moment of the code under test."""
    return name in AUDITED and not _numba_cache(args)
