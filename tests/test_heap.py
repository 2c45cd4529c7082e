"""runtime/memory.py: the process's malloc arenas are limited once the package is imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# eight threads allocate at once; glibc's malloc_stats() then prints one "Arena N:" block per arena
_ARENAS = r"""
import ctypes, sys, threading
if sys.argv[1] == "import":
    import lance_minhash_sql  # noqa: F401
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    held = [libc.malloc(4096) for _ in range(64)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc.malloc_stats()
"""


def _arenas(mode: str, **env) -> int:
    env = {**{k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}, **env,
           "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", _ARENAS, mode], capture_output=True, text=True, env=env, check=True)
    return sum(line.startswith("Arena ") for line in proc.stderr.splitlines())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas")
def test_importing_the_package_limits_malloc_arenas_to_the_cores():
    from lance_minhash_sql.runtime.memory import arena_limit

    limit = arena_limit()
    assert _arenas("plain") > limit  # glibc alone: an arena per allocating thread, up to eight a core
    assert _arenas("import") <= limit
    assert _arenas("import", MALLOC_ARENA_MAX="16") > limit  # the user's own setting stands
