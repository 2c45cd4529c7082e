"""Self-join and search as the rows grow: clusters, pairs and top-10 search at 1M and 10M
rows in one run, each in its own child process (its own peak RSS), with the 10M / 1M ratio.

    python benchmarks/scale.py --data-dir /work/bench-data
    python benchmarks/scale.py --rows 1000000 10000000 --json scale.json
    python benchmarks/scale.py --rows 10000000 --memory-limit 512MiB --no-search
    python benchmarks/scale.py --out-of-core --rows 50000000 --data-dir /work/tmp/ooc

The datasets are ``benchmarks/pairs.py``'s ``pairs-<rows>.lance`` (the synthetic corpus
with our index, k=128, b=16; written once under ``--data-dir`` and reused). Each child
loads the kernels on a tiny dataset first (not timed), then:

* ``clusters`` / ``pairs`` (threshold 0.8): the first call (*cold*: the index is opened,
  band rows and signatures read; the OS page cache may be warm) and the same call again
  (*warm*), under ``--memory-limit`` (default: the package's, 256 MiB;
  ``selfjoin/steps.py``);
* ``search``: ``--queries`` distinct texts of the corpus, one ``search(uri, ...)`` each
  (top 10, the dataset passed as a URI, no prewarm): p50 and p95 latency.

``--out-of-core``: for each ``--rows``, the corpus is written straight to
``ooc-<rows>.lance`` (no copy), then three children run one after the other: the build
(``build_index``, ``memory_limit=--build-memory``, 512 MiB; ``--reuse-index`` keeps an index
already there), ``clusters`` and the dedup plan (``dedup`` as a dry run: the clusters, the
kept row of each, the rows to remove) under ``memory_limit=--memory-limit`` (1 GiB). Before
each self-join child the dataset's files are dropped from the OS page cache
(``posix_fadvise(DONTNEED)``), so every size starts *cold*, reading its index from disk: a
10M-row index fits this machine's page cache and a 50M-row one does not, and a warm 10M
against a cold 50M would compare the caches, not the engine. ``clusters`` also runs a
second call (*warm*: whatever the page cache kept). Each prints wall time, CPU seconds (all
threads), the bytes it read from disk (``/proc/self/io``), peak RSS (``VmHWM``) and the most
temporary disk it held (the size of its own temporary directory, sampled every 0.2 s from
the parent); with two ``--rows``, the larger's time per row over the smaller's. ``--keep``
keeps the dataset.

CPU seconds (all threads) are printed beside wall time: the machine may be shared, and
CPU time is what a core-count plan scales.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lance_minhash_sql.core.errors import LowRecallWarning  # noqa: E402
from lance_minhash_sql.core.usage import cpu_seconds, peak_rss_mb  # noqa: E402

THRESHOLD = 0.8


def child(what: str, uri: str, queries: int, memory_limit: str | None = None) -> dict:
    import warnings

    import pairs as bench_pairs

    from lance_minhash_sql.query.topk import search
    from lance_minhash_sql.selfjoin.clusters import clusters
    from lance_minhash_sql.selfjoin.pairs import pairs

    warnings.simplefilter("ignore", LowRecallWarning)
    if what == "build":
        return build_child(uri, memory_limit)
    bench_pairs.warm_kernels()
    out: dict = {"what": what, "baseline_mb": peak_rss_mb()}
    if what == "search":
        import lance
        import numpy as np

        n = lance.dataset(uri).count_rows()
        picks = np.random.default_rng(3).choice(n, size=queries, replace=False)
        texts = lance.dataset(uri).take(np.sort(picks), columns=["text"]).column("text").to_pylist()
        lat = []
        c0 = cpu_seconds()
        for q in texts:
            t0 = time.perf_counter()
            search(uri, "text", q, 10)
            lat.append(time.perf_counter() - t0)
        lat_ms = sorted(x * 1000 for x in lat)
        out.update(queries=len(lat), p50_ms=lat_ms[len(lat) // 2], p95_ms=lat_ms[int(len(lat) * 0.95)],
                   first_ms=lat[0] * 1000, cpu_s=cpu_seconds() - c0, seconds=sum(lat), peak_mb=peak_rss_mb())
        return out
    from lance_minhash_sql.selfjoin import pool

    runs = ("cold",) if what == "dedup" else ("cold", "warm")
    for run in runs:
        pool.STATS.update(groups=0, pruned_rows=0)
        read0 = _disk_read()
        c0, t0 = cpu_seconds(), time.perf_counter()
        if what == "clusters":
            result = clusters(uri, "text", THRESHOLD, memory_limit=memory_limit).num_rows
        elif what == "pairs":
            result = sum(b.num_rows for b in pairs(uri, "text", THRESHOLD, memory_limit=memory_limit))
        else:  # the dedup plan: clusters, the row kept in each, the rows to remove (a dry run)
            from lance_minhash_sql.selfjoin.dedup import dedup

            r = dedup(uri, "text", THRESHOLD, memory_limit=memory_limit)
            result = r.removed
            out.update(clusters=r.clusters, clustered_rows=r.clustered_rows)
        out[run] = {"seconds": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0, "result": result,
                    "peak_mb": peak_rss_mb(), "groups": pool.STATS["groups"],
                    "pruned_rows": pool.STATS["pruned_rows"], "read_gb": (_disk_read() - read0) / 1e9}
    return out


def _disk_read() -> int:
    """Bytes this process has read from disk (``/proc/self/io``; 0 where there is none)."""
    try:
        with open("/proc/self/io") as fh:
            return next(int(line.split(":")[1]) for line in fh if line.startswith("read_bytes:"))
    except (OSError, StopIteration):
        return 0


def drop_cached(path: str) -> None:
    """Drop the files under ``path`` from the OS page cache (written back first), so the
    next reader reads them from disk."""
    if not hasattr(os, "posix_fadvise"):
        return
    for root, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def build_child(uri: str, memory_limit: str | None) -> dict:
    from lance_minhash_sql.indexer.builder import build_index

    c0, t0 = cpu_seconds(), time.perf_counter()
    build_index(uri, "text", memory_limit=memory_limit)
    return {"what": "build", "cold": {"seconds": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0,
                                      "result": 0, "peak_mb": peak_rss_mb()}}


def _tree_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def run_child(what: str, uri: str, queries: int, memory_limit: str | None = None, temp_dir: str | None = None) -> dict:
    """One child; with ``temp_dir`` its temporary files go there (``TMPDIR``) and the most
    they held is sampled every 0.2 s."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", what, "--uri", uri, "--queries", str(queries)]
    if memory_limit is not None:
        cmd += ["--memory-limit", memory_limit]
    env = dict(os.environ)
    if temp_dir is not None:
        os.makedirs(temp_dir, exist_ok=True)
        env["TMPDIR"] = temp_dir
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak_temp = 0
    if temp_dir is not None:
        while proc.poll() is None:
            peak_temp = max(peak_temp, _tree_bytes(temp_dir))
            time.sleep(0.2)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{what} on {uri} failed:\n{stderr[-4000:]}")
    out = json.loads(stdout.strip().splitlines()[-1])
    out["temp_mb"] = peak_temp / 2**20
    return out


def out_of_core(rows: int, args) -> dict:
    """Corpus, build, clusters and the dedup plan at ``rows`` rows (see the module doc)."""
    import shutil

    from lance_minhash_sql.faces.corpus import write_corpus

    uri = os.path.join(args.data_dir, f"ooc-{rows}.lance")
    temp = os.path.join(args.data_dir, "tmp")
    out: dict = {}
    if not os.path.exists(os.path.join(uri, "_versions")):
        os.makedirs(args.data_dir, exist_ok=True)
        t0 = time.perf_counter()
        write_corpus(uri, rows)
        out["corpus_s"] = time.perf_counter() - t0
    out["corpus_gb"] = _tree_bytes(os.path.join(uri, "data")) / 1e9
    indexed = os.path.isdir(os.path.join(uri, "_indices")) and os.listdir(os.path.join(uri, "_indices"))
    if not (args.reuse_index and indexed):
        out["build"] = run_child("build", uri, 0, args.build_memory, temp)
    out["index_gb"] = _tree_bytes(os.path.join(uri, "_indices")) / 1e9
    for what in ("clusters", "dedup"):
        drop_cached(uri)
        out[what] = run_child(what, uri, 0, args.memory_limit, temp)
    if not args.keep:
        shutil.rmtree(uri)
    shutil.rmtree(temp, ignore_errors=True)
    return out


def print_out_of_core(results: dict, args, load0: float) -> None:
    print(f"out of core (threshold {THRESHOLD}, k=128, b=16), {os.cpu_count()} CPUs, build memory_limit="
          f"{args.build_memory}, self-join memory_limit={args.memory_limit}; load average {load0:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"  {'rows':>11s} {'what':9s} {'run':5s} {'seconds':>8s} {'cpu s':>8s} {'us/row':>7s} {'result':>12s} "
          f"{'read':>8s} {'groups':>6s} {'peak RSS':>9s} {'temp disk':>10s}")
    for rows, r in results.items():
        print(f"  {rows:11,d} corpus: {r['corpus_gb']:.1f} GB of data files, index {r['index_gb']:.1f} GB")
        for what in ("build", "clusters", "dedup"):
            for run in ("cold", "warm"):
                x = r.get(what, {}).get(run)
                if x is None:
                    continue
                print(f"  {rows:11,d} {what:9s} {run:5s} {x['seconds']:8.1f} {x['cpu_s']:8.1f} "
                      f"{x['seconds'] / rows * 1e6:7.2f} {x['result']:12,d} {x.get('read_gb', 0):6.1f}GB "
                      f"{x.get('groups', 0):6d} {x['peak_mb']:7.0f}MB {r[what]['temp_mb']:8.0f}MB")
    if len(results) == 2:
        (n0, a), (n1, b) = results.items()
        for what in ("clusters", "dedup"):
            x, y = a[what]["cold"], b[what]["cold"]
            print(f"  {what}, cold: time per row at {n1:,} rows / at {n0:,}: {y['seconds'] / n1 / (x['seconds'] / n0):.2f}x "
                  f"wall, {y['cpu_s'] / n1 / (x['cpu_s'] / n0):.2f}x CPU")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--memory-limit", default=None, help="the self-join's memory_limit (default: the package's; "
                                                         "1GiB with --out-of-core)")
    ap.add_argument("--no-search", action="store_true")
    ap.add_argument("--out-of-core", action="store_true", help="corpus, build, clusters, dedup plan (module doc)")
    ap.add_argument("--build-memory", default="512MiB")
    ap.add_argument("--keep", action="store_true", help="--out-of-core: keep the dataset")
    ap.add_argument("--reuse-index", action="store_true", help="--out-of-core: keep an index already built")
    ap.add_argument("--child", choices=("clusters", "pairs", "search", "build", "dedup"), help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.uri, args.queries, args.memory_limit)))
        return
    load0 = os.getloadavg()[0]
    if args.out_of_core:
        args.memory_limit = args.memory_limit or "1GiB"
        results = {rows: out_of_core(rows, args) for rows in args.rows}
        print_out_of_core(results, args, load0)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"load_start": load0, "results": results}, fh, indent=2)
        return
    import pairs as bench_pairs

    joins = ["clusters", "pairs"]
    results: dict = {}
    for rows in args.rows:
        uri = bench_pairs.corpus_dataset(rows, args.data_dir)
        results[rows] = {w: run_child(w, uri, args.queries, args.memory_limit if w in joins else None)
                         for w in joins + ([] if args.no_search else ["search"])}
    print(f"self-join and search by rows (threshold {THRESHOLD}, k=128, b=16), {os.cpu_count()} CPUs, "
          f"memory_limit={args.memory_limit or 'default'}; load average {load0:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"  {'rows':>11s} {'what':18s} {'run':5s} {'seconds':>8s} {'cpu s':>7s} {'result':>12s} {'per s':>11s} "
          f"{'peak RSS':>9s}")
    for rows, r in results.items():
        for what in joins:
            for run in ("cold", "warm"):
                x = r[what][run]
                groups = f"  {x['groups']} groups, {x['pruned_rows']:,} band rows pruned" if x.get("groups") else ""
                print(f"  {rows:11,d} {what:18s} {run:5s} {x['seconds']:8.2f} {x['cpu_s']:7.1f} {x['result']:12,d} "
                      f"{x['result'] / x['seconds']:11,.0f} {x['peak_mb']:7.0f}MB{groups}")
        if "search" in r:
            s = r["search"]
            print(f"  {rows:11,d} {'search':18s} {'':5s} p50 {s['p50_ms']:.1f} ms, p95 {s['p95_ms']:.1f} ms, first "
                  f"{s['first_ms']:.0f} ms over {s['queries']} distinct queries, "
                  f"{s['cpu_s'] / s['queries'] * 1000:.1f} CPU ms a query, peak {s['peak_mb']:.0f} MB")
    if len(args.rows) == 2:
        a, b = (results[r] for r in args.rows)
        f = args.rows[1] / args.rows[0]
        for what in joins:
            for run in ("cold", "warm"):
                print(f"  {what} {run}: {args.rows[1]:,} / {args.rows[0]:,} rows ({f:.0f}x rows): "
                      f"{b[what][run]['seconds'] / a[what][run]['seconds']:.1f}x time, "
                      f"{b[what][run]['cpu_s'] / a[what][run]['cpu_s']:.1f}x CPU")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_start": load0, "results": results}, fh, indent=2)


if __name__ == "__main__":
    main()
