"""Sorting ``rows x bands`` (u64 band_key, u32 doc_id) pairs: numba radix vs numpy vs DuckDB.

    python benchmarks/sort.py --rows 1000000 --bands 16

Keys are synthetic band keys: band ``j`` in the top byte, 56 random low bits, and a
fifth of the rows copying an earlier row's key (near-duplicates share buckets). Every
method must give ``(band_key, doc_id)`` order; each is checked against the first.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from lance_minhash_sql.index.band_sorter import sort_runs  # noqa: E402
from lance_minhash_sql.kernels import sort as ks  # noqa: E402


def make_keys(rows: int, bands: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keys = np.empty((bands, rows), dtype=np.uint64)
    low = rng.integers(0, 2**56, size=(bands, rows), dtype=np.uint64)
    dup = rng.random(rows) < 0.2
    src = (rng.random(rows) * np.arange(rows)).astype(np.int64)
    low[:, dup] = low[:, src[dup]]
    for j in range(bands):
        keys[j] = (np.uint64(j) << np.uint64(56)) | low[j]
    return keys


def run_radix(keys: np.ndarray, bits: int):
    b, n = keys.shape
    k = keys.copy().reshape(-1)
    starts = np.arange(b, dtype=np.int64) * n
    lengths = np.full(b, n, dtype=np.int64)
    t0 = time.perf_counter()
    d = np.tile(np.arange(n, dtype=np.uint32), b)  # doc ids in arrival order, run by run
    sort_runs(k, d, starts, lengths, numba.get_num_threads(), bits)
    return time.perf_counter() - t0, k, d


def run_numpy(keys: np.ndarray):
    b, n = keys.shape
    t0 = time.perf_counter()
    outk = np.empty(b * n, np.uint64)
    outd = np.empty(b * n, np.uint32)
    for j in range(b):
        o = np.argsort(keys[j], kind="stable")
        outk[j * n:(j + 1) * n] = keys[j][o]
        outd[j * n:(j + 1) * n] = o
    return time.perf_counter() - t0, outk, outd


def run_duckdb(keys: np.ndarray, memory_limit: str | None):
    import duckdb
    import pyarrow as pa

    b, n = keys.shape
    con = duckdb.connect()
    if memory_limit:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    pairs = pa.table({"band_key": keys.reshape(-1),
                      "doc_id": np.tile(np.arange(n, dtype=np.uint32), b)})
    t0 = time.perf_counter()
    out = con.sql("SELECT band_key, doc_id FROM pairs ORDER BY band_key, doc_id").to_arrow_table()
    seconds = time.perf_counter() - t0
    return seconds, out.column(0).to_numpy(), out.column(1).to_numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--bands", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duckdb-memory-limit", default=None)
    args = ap.parse_args()
    keys = make_keys(args.rows, args.bands)
    total = args.rows * args.bands
    small = make_keys(1000, 2)
    for bits in (8, 11, 14, 16):  # compile outside the timings
        run_radix(small, bits)
    methods = [(f"numba radix {bits}-bit digits", lambda bits=bits: run_radix(keys, bits)) for bits in (8, 11, 14, 16)]
    methods += [("numpy argsort(stable) per band", lambda: run_numpy(keys)),
                ("duckdb ORDER BY", lambda: run_duckdb(keys, args.duckdb_memory_limit))]
    ref = None
    print(f"{total:,} pairs ({args.rows:,} rows x {args.bands} bands), {os.cpu_count()} CPUs, best of {args.repeat}")
    for name, fn in methods:
        best = float("inf")
        for _ in range(args.repeat):
            s, k, d = fn()
            best = min(best, s)
        if ref is None:
            ref = (k, d)
            assert ks.is_sorted_pairs(k, d)
        else:
            assert np.array_equal(ref[0], k) and np.array_equal(ref[1], d), name
        print(f"  {name:36s} {best:7.3f} s  {total / best / 1e6:6.1f} M pairs/s")


if __name__ == "__main__":
    main()
