"""Clusters with the union-find in memory against the union-find in its temporary
file (``selfjoin/parent.py``), side by side on one index, each in its own child process
(its own peak RSS):

* ``memory``: the package's rules (at 1M rows the 4 MB union-find is held in memory);
* ``in-file``: every union-find in its file (``PARENT_SHARE = 0``), its share of resident
  pages the package's (a quarter of the pool's share: the whole file fits in it here, so
  only the fill and the final sweeps hand pages back): the cost of the file mapping;
* ``in-file-min``: in its file with the fewest blocks resident (``PARENT_PAGES_SHARE = 0``:
  four of 2 MiB; at 10M rows a fifth of the 40 MB union-find);
* ``in-file-small``: in its file with four blocks of 64 KiB resident (``PARENT_PAGES_SHARE =
  0``, ``BLOCK_BYTES = 64 KiB``, what Linux maps around a touch of the file's
  ``MADV_RANDOM`` mapping): 6 % of a 1M-row union-find, the proportion of 10^9 rows under
  ``memory_limit=1GiB``, so the unions, the pruning and the flattening stop and hand
  pages back over and over.

    python benchmarks/parent_in_file.py --rows 1000000 --data-dir /work/tmp/bench
    python benchmarks/parent_in_file.py --rows 10000000 --modes memory in-file-min in-file-small

The dataset is ``benchmarks/pairs.py``'s ``pairs-<rows>.lance`` (written once under
``--data-dir``). Each child loads the kernels on a tiny dataset first (not timed), then
times the first ``clusters()`` call (threshold 0.8, ``--memory-limit``, default the
package's) and prints wall and CPU seconds, peak RSS, the union-find's hand-backs and a
digest of the table (the same in every mode).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODES = ("memory", "in-file", "in-file-min", "in-file-small")


def child(mode: str, uri: str, memory_limit: str | None) -> dict:
    import pairs as bench_pairs

    from lance_minhash_sql.core.usage import cpu_seconds, peak_rss_mb
    from lance_minhash_sql.core import budget
    from lance_minhash_sql.selfjoin import parent, pool
    from lance_minhash_sql.selfjoin.clusters import clusters

    bench_pairs.warm_kernels()
    if mode != "memory":
        budget.PARENT_SHARE = 0
    if mode in ("in-file-min", "in-file-small"):
        budget.PARENT_PAGES_SHARE = 0
    if mode == "in-file-small":
        parent.BLOCK_BYTES = 64 << 10
    baseline = peak_rss_mb()
    pool.STATS.update(parent_in_file=0, parent_handbacks=0, max_parent_blocks=0)
    c0, t0 = cpu_seconds(), time.perf_counter()
    table = clusters(uri, "text", 0.8, memory_limit=memory_limit)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    digest = hashlib.sha1()
    for col in table.columns:
        digest.update(col.to_numpy().tobytes())
    return {"mode": mode, "seconds": seconds, "cpu_s": cpu, "peak_mb": peak_rss_mb(), "baseline_mb": baseline,
            "rows": table.num_rows, "digest": digest.hexdigest()[:12], "in_file": pool.STATS["parent_in_file"],
            "handbacks": pool.STATS["parent_handbacks"], "max_blocks": pool.STATS["max_parent_blocks"],
            "block_kib": parent.BLOCK_BYTES >> 10}


def run_child(mode: str, uri: str, memory_limit: str | None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--uri", uri]
    if memory_limit is not None:
        cmd += ["--memory-limit", memory_limit]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--memory-limit", default=None)
    ap.add_argument("--modes", nargs="+", choices=MODES, default=["memory", "in-file", "in-file-small"])
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.uri, args.memory_limit)))
        return
    import pairs as bench_pairs

    os.makedirs(args.data_dir, exist_ok=True)
    uri = bench_pairs.corpus_dataset(args.rows, args.data_dir)
    load0 = os.getloadavg()[0]
    results = [run_child(mode, uri, args.memory_limit) for mode in args.modes]
    first = results[0]
    print(f"clusters at {args.rows:,} rows, memory_limit={args.memory_limit or 'default'} "
          f"(load average {load0:.2f} -> {os.getloadavg()[0]:.2f})")
    print(f"{'mode':14} {'seconds':>8} {'cpu s':>7} {'vs first':>8} {'peak MB':>8} {'hand-backs':>10} "
          f"{'blocks':>7} {'rows':>8}  digest")
    for r in results:
        print(f"{r['mode']:14} {r['seconds']:8.2f} {r['cpu_s']:7.2f} {r['seconds'] / first['seconds']:7.2f}x "
              f"{r['peak_mb']:8.0f} {r['handbacks']:10,} {r['max_blocks']:4}x{r['block_kib']}K {r['rows']:8,}  "
              f"{r['digest']}")
    if len({r["digest"] for r in results}) != 1:
        raise SystemExit("the modes gave different clusters")


if __name__ == "__main__":
    main()
