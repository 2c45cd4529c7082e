"""Numba flags in one place.

``nogil`` kernels release the GIL so DuckDB's threads run them concurrently; ``cache``
keeps compiled machine code on disk between processes. Set
``LANCE_MINHASH_NUMBA_CACHE=0`` to disable the on-disk cache.
"""

from __future__ import annotations

import os

CACHE = os.environ.get("LANCE_MINHASH_NUMBA_CACHE", "1") != "0"
JIT = dict(nogil=True, cache=CACHE)
JIT_PARALLEL = dict(nogil=True, cache=CACHE, parallel=True)
