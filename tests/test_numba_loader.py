"""numba's load (``kernels/config.py: load_numba``): kernels read from the on-disk cache
without numba's registry set-up still answer as numpy does, a compilation after such loads
still types and lowers everything it needs, the collector is paused only while the load
runs, and reading the thread count does not start numba's threading layer
(``runtime/threads.py: num_threads``)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading

from lance_minhash_sql.kernels import config as kconfig

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# Sorts and band keys by kernels (loaded from the cache in the second process), then a
# kernel of this script's own, compiled after those loads, that calls one of them and
# numpy's own functions (implementations numba installs only when it refreshes its
# registries); the answers beside numpy's.
_LOADS_THEN_COMPILES = r"""
import json, sys
import numpy as np
from lance_minhash_sql.index.numpy_sign import band_keys_numpy
from lance_minhash_sql.kernels import order, similarity
from lance_minhash_sql.kernels.config import COMPILES, DECLARED_KERNELS, load_numba
rng = np.random.default_rng(7)
values = rng.integers(0, 2**63, 5000, dtype=np.uint64)
sorted_by_kernel = values.copy()
order.sort_values(sorted_by_kernel)
sigs = rng.integers(0, 2**16, (300, 128), dtype=np.uint16)
rows = sigs.view(np.uint8).reshape(300, -1)
parallel_keys = similarity.band_keys(rows, 16)  # a parallel kernel: its threads start on its load
serial_keys = similarity.band_keys_serial(rows, 16)
loaded_compiles = COMPILES.count
without_dispatcher = len(DECLARED_KERNELS)  # declared, never called nor compiled against
numba = load_numba()
if sys.argv[1] == "own":
    @numba.njit(cache=False)
    def own(a):
        b = a.copy()
        order.sort_values(b)
        return np.cumsum(np.sort(a) == b), np.argsort(a)[:3]
    same, first = own(values)
    own_ok = bool(same[-1] == values.size) and first.tolist() == np.argsort(values, kind="stable")[:3].tolist()
else:
    own_ok = None
expected = band_keys_numpy(sigs, 16)
print(json.dumps({"sorted": bool((sorted_by_kernel == np.sort(values)).all()),
                  "parallel": bool((parallel_keys == expected).all()), "serial": bool((serial_keys == expected).all()),
                  "own": own_ok, "loaded_compiles": loaded_compiles, "without_dispatcher": without_dispatcher,
                  "left_without": len(DECLARED_KERNELS),
                  "hits": sum(sum(d.stats.cache_hits.values()) for d in (order.sort_values, similarity.band_keys,
                                                                            similarity.band_keys_serial))}))
"""


def _run(code: str, *args: str, **env: str) -> dict:
    full = dict(os.environ, LANCE_MINHASH_COMPILE_NOTICE="0", **env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kernels_loaded_from_the_cache_answer_and_a_later_compilation_has_every_implementation(tmp_path):
    cache = str(tmp_path / "numba-cache")  # empty: the first process compiles and fills it
    first = _run(_LOADS_THEN_COMPILES, "none", NUMBA_CACHE_DIR=cache)
    assert first["loaded_compiles"] > 0 and first["hits"] == 0
    assert first["sorted"] and first["parallel"] and first["serial"]
    assert first["without_dispatcher"] == 0  # a compilation makes every kernel's dispatcher
    later = _run(_LOADS_THEN_COMPILES, "own", NUMBA_CACHE_DIR=cache)
    assert later["loaded_compiles"] == 0 and later["hits"] == 3  # all three read from the cache
    assert later["sorted"] and later["parallel"] and later["serial"]
    assert later["own"] is True  # compiled after the loads: np.sort, np.argsort, np.cumsum and a cached kernel
    assert later["without_dispatcher"] > 10 and later["left_without"] == 0  # made as needed, all by the compilation


def test_the_collector_is_paused_only_inside_the_blocks_and_as_it_was_after_them():
    was = gc.isenabled()
    try:
        gc.enable()
        inside, go = [], threading.Barrier(4)

        def worker():
            with kconfig.COLLECTOR_PAUSE:
                go.wait()  # all four inside at once
                inside.append(gc.isenabled())
                go.wait()

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert inside == [False] * 4 and gc.isenabled()
        gc.disable()  # off before: stays off
        with kconfig.COLLECTOR_PAUSE:
            with kconfig.COLLECTOR_PAUSE:
                assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


_THREADS = r"""
import json
import numba
from lance_minhash_sql.kernels.config import load_numba
from lance_minhash_sql.runtime.threads import num_threads
from numba.np.ufunc import parallel
load_numba()
before = num_threads()
started = parallel._is_initialized
numba.set_num_threads(1)
print(json.dumps([before, started, numba.get_num_threads(), num_threads()]))
"""


def test_the_thread_count_is_numbas_setting_without_starting_its_threading_layer():
    assert _run(_THREADS, NUMBA_NUM_THREADS="2") == [2, False, 1, 1]
