"""Self-join and search as the rows grow: clusters, pairs and top-10 search at 1M and 10M
rows in one run, each in its own child process (its own peak RSS), with the 10M / 1M ratio.

    python benchmarks/scale.py --data-dir /work/bench-data
    python benchmarks/scale.py --rows 1000000 10000000 --json scale.json

The datasets are ``benchmarks/pairs.py``'s ``pairs-<rows>.lance`` (the synthetic corpus
with our index, k=128, b=16; written once under ``--data-dir`` and reused). Each child
loads the kernels on a tiny dataset first (not timed), then:

* ``clusters`` / ``pairs`` (threshold 0.8): the first call (*cold*: the index is opened,
  band rows and signatures read; the OS page cache may be warm) and the same call again
  (*warm*: the process cache holds what fits in its budget, 1 GiB by default);
* ``search``: ``--queries`` distinct texts of the corpus, one ``search(uri, ...)`` each
  (top 10, the dataset passed as a URI, no prewarm): p50 and p95 latency.

CPU seconds (all threads) are printed beside wall time: the machine may be shared, and
CPU time is what a core-count plan scales. Targets (issue): clusters at 10M at most 12x
the 1M time, pairs at 10M at least 3M pairs/s.
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

from lance_minhash_sql.core.usage import cpu_seconds, peak_rss_mb  # noqa: E402

THRESHOLD = 0.8


def child(what: str, uri: str, queries: int) -> dict:
    import warnings

    import pairs as bench_pairs

    from lance_minhash_sql.query.topk import search
    from lance_minhash_sql.selfjoin.clusters import clusters
    from lance_minhash_sql.selfjoin.pairs import LowRecallWarning, pairs

    warnings.simplefilter("ignore", LowRecallWarning)
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
    for run in ("cold", "warm"):
        c0, t0 = cpu_seconds(), time.perf_counter()
        if what == "clusters":
            t = clusters(uri, "text", THRESHOLD)
            result = t.num_rows
        else:
            result = sum(b.num_rows for b in pairs(uri, "text", THRESHOLD))
        out[run] = {"seconds": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0, "result": result,
                    "peak_mb": peak_rss_mb()}
    return out


def run_child(what: str, uri: str, queries: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", what, "--uri", uri, "--queries", str(queries)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{what} on {uri} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", choices=("clusters", "pairs", "search"), help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.uri, args.queries)))
        return
    import pairs as bench_pairs

    load0 = os.getloadavg()[0]
    results: dict = {}
    for rows in args.rows:
        uri = bench_pairs.corpus_dataset(rows, args.data_dir)
        results[rows] = {w: run_child(w, uri, args.queries) for w in ("clusters", "pairs", "search")}
    print(f"self-join and search by rows (threshold {THRESHOLD}, k=128, b=16), {os.cpu_count()} CPUs, "
          f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"  {'rows':>11s} {'what':9s} {'run':5s} {'seconds':>8s} {'cpu s':>7s} {'result':>12s} {'per s':>11s} "
          f"{'peak RSS':>9s}")
    for rows, r in results.items():
        for what in ("clusters", "pairs"):
            for run in ("cold", "warm"):
                x = r[what][run]
                print(f"  {rows:11,d} {what:9s} {run:5s} {x['seconds']:8.2f} {x['cpu_s']:7.1f} {x['result']:12,d} "
                      f"{x['result'] / x['seconds']:11,.0f} {x['peak_mb']:7.0f}MB")
        s = r["search"]
        print(f"  {rows:11,d} {'search':9s} {'':5s} p50 {s['p50_ms']:.1f} ms, p95 {s['p95_ms']:.1f} ms, first "
              f"{s['first_ms']:.0f} ms over {s['queries']} distinct queries, {s['cpu_s'] / s['queries'] * 1000:.1f} "
              f"CPU ms a query, peak {s['peak_mb']:.0f} MB")
    if len(args.rows) == 2:
        a, b = (results[r] for r in args.rows)
        f = args.rows[1] / args.rows[0]
        for what in ("clusters", "pairs"):
            for run in ("cold", "warm"):
                print(f"  {what} {run}: {args.rows[1]:,} / {args.rows[0]:,} rows ({f:.0f}x rows): "
                      f"{b[what][run]['seconds'] / a[what][run]['seconds']:.1f}x time, "
                      f"{b[what][run]['cpu_s'] / a[what][run]['cpu_s']:.1f}x CPU")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_start": load0, "results": results}, fh, indent=2)


if __name__ == "__main__":
    main()
