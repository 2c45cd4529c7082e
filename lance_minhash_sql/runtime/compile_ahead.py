"""Compiling ahead: a second process compiles the kernels of the next first calls.

numba compiles one kernel at a time in a process (its compiler holds a process-wide
lock), and compilation is CPU work, so on a fresh install the first calls of a session
(a signature, a build, a search, pairs, clusters) wait for one core to compile every
kernel they meet. When this process first compiles a kernel of the package
(``kernels/config.py``: :class:`~lance_minhash_sql.kernels.config.CompileLog`, which calls
what this module installs there, :func:`start_helper`: the kernels start no process), it starts
one helper process (a new interpreter, never a fork: Lance is not fork-safe) that
compiles the kernels those first calls need into numba's on-disk cache, from the far
end of the list (:data:`PLAN`), while this process compiles from the near end. Each
kernel this process then meets in the cache is loaded, not compiled; the two meet in the
middle, and a kernel either finds in the cache is skipped. The machine code is the same
either way: numba's cache keeps a kernel's optimized LLVM bitcode beside its object code,
so a caller compiled here inlines a callee the helper compiled as it would its own.

The list is ``data/first_use_kernels.txt``: one specialization a line, ``module.function``
then its argument types as numba writes them (``repr``), in the order the first calls of a
session (``faces/warmup.py``: ``FIRST_CALLS``, the calls ``benchmarks/cold_start.py`` times)
compile them on an empty cache, callees before their callers. ``faces/warmup.py``:
``write_first_use_plan`` records it again after a kernel's arguments change;
``tests/test_warmup.py`` checks that it holds every specialization those calls use.

The helper is ``runtime/compile_helper.py``. It runs at the lowest priority, on time this process
leaves (its module doc says why), and at most one runs per numba cache folder (a lock it holds while it runs).
It stops at the end of the list, when this process exits (``atexit``), or when it finds
its parent gone. ``LANCE_MINHASH_COMPILE_AHEAD=0`` turns it off; so does a disabled
cache (``LANCE_MINHASH_NUMBA_CACHE=0``), since the helper's only output is the cache.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading

from lance_minhash_sql.kernels.config import on_first_compile

__all__ = ["PLAN", "ENV", "plan_entries", "start_helper", "helper_process"]

PLAN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "first_use_kernels.txt")
ENV = "LANCE_MINHASH_COMPILE_AHEAD"
HELPERS: list[subprocess.Popen] = []  # the helper this process started (at most one; runtime/cache.py lists it)
_START_LOCK = threading.Lock()


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def plan_entries(path: str = PLAN) -> list[tuple[str, str]]:
    """``(module.function, argument types as text)`` of each line of the plan."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
    except OSError:
        return []
    return [tuple(line.split("\t", 1)) for line in lines if line and not line.startswith("#") and "\t" in line]


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_helper(first: str) -> bool:
    """Start the helper (once per process) that compiles the plan's kernels after
    ``first`` (the ``module.function`` this process is compiling now, whose callees come
    before it in the plan) from the far end. False when it is off or already started."""
    if not enabled():
        return False
    with _START_LOCK:
        if HELPERS:
            return False
        env = dict(os.environ, **{ENV: "0", "LANCE_MINHASH_COMPILE_NOTICE": "0"})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH")) if p)
        code = "import sys; from lance_minhash_sql.runtime.compile_helper import helper_main; helper_main(*sys.argv[1:])"
        try:
            proc = subprocess.Popen([sys.executable, "-c", code, str(os.getpid()), first], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, close_fds=True)
        except OSError:  # no interpreter to start: this process compiles alone
            return False
        HELPERS.append(proc)
        atexit.register(_stop, proc)
        return True


def helper_process() -> subprocess.Popen | None:
    """The helper this process started, if it started one."""
    return HELPERS[0] if HELPERS else None


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


on_first_compile(start_helper)  # installed on import (the package root imports this module)
