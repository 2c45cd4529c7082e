"""Numba flags in one place.

``nogil`` kernels release the GIL so DuckDB's threads run them concurrently; ``cache``
keeps compiled machine code on disk between processes. Set
``LANCE_MINHASH_NUMBA_CACHE=0`` to disable the on-disk cache.
"""

from __future__ import annotations

import os
import types

from numba import njit

CACHE = os.environ.get("LANCE_MINHASH_NUMBA_CACHE", "1") != "0"
JIT = dict(nogil=True, cache=CACHE)
JIT_PARALLEL = dict(nogil=True, cache=CACHE, parallel=True)


def jit_twins(body):
    """``(parallel, serial)`` kernels from one Python body whose outer loop is a ``prange``:
    compiled with ``parallel=True``, and as plain loops on the calling thread (without
    ``parallel`` numba runs ``prange`` as ``range``), for work too small to pay for a
    parallel launch. Each twin is its own function, ``<body>_parallel`` and
    ``<body>_serial``, so the on-disk cache keeps both (it keys entries by name)."""

    def twin(suffix: str):
        f = types.FunctionType(body.__code__, body.__globals__, body.__name__ + suffix, body.__defaults__,
                               body.__closure__)
        f.__qualname__ = body.__qualname__ + suffix
        f.__module__ = body.__module__
        f.__doc__ = body.__doc__
        return f

    return njit(**JIT_PARALLEL)(twin("_parallel")), njit(**JIT)(twin("_serial"))
