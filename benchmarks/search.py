"""Top-k search, side by side: Lance's native ``MinHashQuery`` against ``search`` / ``search_ids``.

    python benchmarks/search.py --rows 1000000
    python benchmarks/search.py --rows 100000 --queries 100 --batch 500

The synthetic corpus (``lance_minhash_sql.faces.corpus``) with a Lance-built ``MINHASHLSH``
index (k=128, b=16, shingle 3) is written once and reused under
``bench-data/search-<rows>.lance`` (its own dataset: the build benchmark adds and drops
indexes on ``corpus-<rows>.lance``). Queries are corpus rows (each has itself at distance
0) and corpus rows with an eighth of their words dropped, drawn with a fixed seed.

Figures, all top-10 through the Python API in this one process:

* *warm*: Lance with one dataset object (its index and file caches warm); ours after
  ``prewarm`` (segments in the process cache). Peers alternate in blocks of all the
  queries, ``--rounds`` times.
* *cold*: Lance with a fresh ``lance.dataset(uri)`` per query (empty session caches, OS
  page cache warm); ours after ``clear_cache()`` per query (page table, the candidate
  band pages and the candidate signatures are read for that query only).
* *cold data*: ours with the segment's files open (page table in memory) but no band
  pages or signatures cached.
* ``search`` returns two user columns (``id``, ``text``), like Lance's
  ``columns=["id", "text"]``; ``search_ids`` returns row ids and distances, like
  Lance's ``columns=["_distance"], with_row_id=True``.
* *batch*: ``--batch`` queries in one ``search_ids`` call against the same queries
  through Lance one by one.

Every answer of ours is also checked against Lance's (row ids and distances).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

K = 10


def dataset(rows: int, data_dir: str) -> str:
    import lance
    from lance.indices import IndexConfig

    from lance_minhash_sql.core.params import MinHashParams
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = os.path.join(data_dir, f"search-{rows}.lance")
    if not os.path.exists(os.path.join(uri, "_versions")):
        os.makedirs(data_dir, exist_ok=True)
        t0 = time.perf_counter()
        write_corpus(uri, rows, progress=True)
        print(f"corpus: {rows:,} rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    ds = lance.dataset(uri)
    if not any(d.type_url.endswith("MinHashLshIndexDetails") for d in ds.describe_indices()):
        t0 = time.perf_counter()
        ds.create_scalar_index("text", IndexConfig("MINHASHLSH", MinHashParams().to_lance_config()))
        print(f"Lance native index built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return uri


def queries(uri: str, n: int, seed: int = 7) -> list[str]:
    import lance

    ds = lance.dataset(uri)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(ds.count_rows(), n, replace=False))
    texts = [t for t in ds.take(rows.tolist(), ["text"]).column(0).to_pylist() if t]
    out = []
    for i, t in enumerate(texts):
        words = t.split()
        if i % 3 == 2 and len(words) > 8:
            drop = set(rng.integers(0, len(words), len(words) // 8).tolist())
            t = " ".join(w for j, w in enumerate(words) if j not in drop)
        out.append(t)
    return out


def pct(ts: list[float]) -> dict:
    a = np.array(ts) * 1e3
    return {"p50_ms": float(np.median(a)), "p95_ms": float(np.percentile(a, 95)), "n": len(a)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300, help="single queries per warm figure")
    ap.add_argument("--cold", type=int, default=40, help="single queries per cold figure")
    ap.add_argument("--batch", type=int, default=1000, help="queries in the batch figure")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of the warm figures")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()

    import lance
    from lance.query import MinHashQuery

    from lance_minhash_sql.index.opened import cache_info, clear_cache, open_index
    from lance_minhash_sql.lifecycle.prewarm import warm
    from lance_minhash_sql.query.topk import search, search_ids

    uri = dataset(args.rows, args.data_dir)
    qs = queries(uri, max(args.queries, args.batch, args.cold) + 50)
    warmup, single, batch = qs[:20], qs[20:20 + args.queries], qs[:args.batch]
    cold = qs[-args.cold:]

    def lance_cols(ds, q):
        return ds.to_table(nearest=MinHashQuery(q, "text"), limit=K, columns=["id", "text", "_distance"],
                           with_row_id=True)

    def lance_ids(ds, q):
        return ds.to_table(nearest=MinHashQuery(q, "text"), limit=K, columns=["_distance"], with_row_id=True)

    def ours_cols(q):
        return search(uri, "text", q, K, columns=["id", "text"])

    def ours_ids(q):
        return search_ids(uri, "text", q, K)

    mismatches = 0

    def same(a, b) -> bool:
        return (a.column("_rowid").to_pylist() == b.column("_rowid").to_pylist()
                and a.column("_distance").to_pylist() == b.column("_distance").to_pylist())

    fig: dict = {"rows": args.rows, "k": K, "cpus": os.cpu_count()}

    # load the compiled kernels (numba's on-disk cache) outside every figure
    ours_ids(warmup[0])
    clear_cache()

    # ---- cold: fresh sessions / an empty cache per query
    lance_c, ours_c, ours_ci = [], [], []
    for q in cold:
        t0 = time.perf_counter()
        ref = lance_cols(lance.dataset(uri), q)
        lance_c.append(time.perf_counter() - t0)
        clear_cache()
        t0 = time.perf_counter()
        got = ours_cols(q)
        ours_c.append(time.perf_counter() - t0)
        clear_cache()
        t0 = time.perf_counter()
        ours_ids(q)
        ours_ci.append(time.perf_counter() - t0)
        mismatches += not same(got, ref)
    fig["lance_cold"], fig["ours_search_cold"], fig["ours_ids_cold"] = pct(lance_c), pct(ours_c), pct(ours_ci)
    # cold data only: the segment's files open (page table in memory), no pages or signatures
    entry = open_index(uri, "text").segment_entries()[0]
    ours_cd = []
    for q in cold:
        entry.reset()
        t0 = time.perf_counter()
        ours_ids(q)
        ours_cd.append(time.perf_counter() - t0)
    fig["ours_ids_cold_data"] = pct(ours_cd)
    fig["cold_data_reads"] = {"band_pages": entry.stats["band_pages_read"] / len(cold),
                              "signatures": entry.stats["docs_read"] / len(cold)}
    clear_cache()

    # ---- from an empty cache, single queries until the segment is whole in memory (ski rental)
    t0 = time.perf_counter()
    n_until = 0
    entry = None
    for q in qs:
        ours_ids(q)
        n_until += 1
        entry = open_index(uri, "text").segment_entries()[0]
        if entry.bands.full and entry.docs.full:
            break
    fig["ski_rental"] = {"queries": n_until, "seconds": time.perf_counter() - t0,
                         "bands_full": entry.bands.full, "docs_full": entry.docs.full}
    clear_cache()

    # ---- warm
    t0 = time.perf_counter()
    fits = warm(open_index(uri, "text")).complete
    fig["prewarm_s"] = time.perf_counter() - t0
    fig["prewarm_fits"] = fits
    fig["cache_bytes"] = cache_info().usage
    ds = lance.dataset(uri)
    for q in warmup:
        lance_cols(ds, q), lance_ids(ds, q), ours_cols(q), ours_ids(q)
    # blocks of queries, alternating peers, repeated: neither peer's background threads
    # (Lance's I/O runtime keeps working after a query returns) land in the other's figure
    runs = {"lance_warm": (lambda q: lance_cols(ds, q)), "ours_search_warm": ours_cols,
            "lance_ids_warm": (lambda q: lance_ids(ds, q)), "ours_ids_warm": ours_ids}
    times: dict = {name: [] for name in runs}
    answers: dict = {}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            for q in single:
                t0 = time.perf_counter()
                r = fn(q)
                times[name].append(time.perf_counter() - t0)
                answers.setdefault(name, {})[q] = r
    for name in runs:
        fig[name] = pct(times[name])
    for q in single:
        mismatches += not same(answers["ours_search_warm"][q], answers["lance_warm"][q])
        mismatches += not same(answers["ours_ids_warm"][q], answers["lance_ids_warm"][q])

    # ---- batch: one search_ids call vs Lance one by one (warm)
    t0 = time.perf_counter()
    refs = [lance_ids(ds, q) for q in batch]
    lance_batch = time.perf_counter() - t0
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        res = search_ids(uri, "text", batch, K)
        best = min(best, time.perf_counter() - t0)
    qi = res.column("query_index").to_numpy()
    bounds = np.searchsorted(qi, np.arange(len(batch) + 1))
    for i, ref in enumerate(refs):
        part = res.slice(bounds[i], bounds[i + 1] - bounds[i])
        mismatches += not same(part, ref)
    clear_cache()
    t0 = time.perf_counter()
    search_ids(uri, "text", batch, K)
    cold_batch = time.perf_counter() - t0
    fig["batch"] = {"queries": len(batch), "lance_s": lance_batch, "ours_s": best, "ours_cold_s": cold_batch,
                    "lance_ms_per_query": lance_batch / len(batch) * 1e3,
                    "ours_ms_per_query": best / len(batch) * 1e3,
                    "ours_cold_ms_per_query": cold_batch / len(batch) * 1e3}
    fig["mismatches"] = mismatches
    fig["answers_checked"] = len(cold) + 2 * len(single) + len(batch)

    # ---- report
    print(f"top-{K} MinHash search, {args.rows:,} rows (k=128, b=16, shingle 3, Lance-built index), "
          f"{os.cpu_count()} CPUs")
    print(f"  {'what':38s} {'Lance p50':>10s} {'p95':>8s} {'ours p50':>10s} {'p95':>8s} {'Lance/ours p50':>15s}")

    def row(name, a, b):
        print(f"  {name:38s} {a['p50_ms']:8.2f}ms {a['p95_ms']:6.2f}ms {b['p50_ms']:8.2f}ms {b['p95_ms']:6.2f}ms "
              f"{a['p50_ms'] / b['p50_ms']:14.2f}x")

    row("warm, id+text columns (search)", fig["lance_warm"], fig["ours_search_warm"])
    row("warm, row ids only (search_ids)", fig["lance_ids_warm"], fig["ours_ids_warm"])
    row("cold, id+text columns (search)", fig["lance_cold"], fig["ours_search_cold"])
    row("cold, ours row ids only (search_ids)", fig["lance_cold"], fig["ours_ids_cold"])
    row("cold data, files open (search_ids)", fig["lance_cold"], fig["ours_ids_cold_data"])
    cd = fig["cold_data_reads"]
    print(f"    (cold data: {cd['band_pages']:.1f} band pages and {cd['signatures']:.1f} signatures read per query)")
    b = fig["batch"]
    print(f"  batch of {b['queries']:,}: Lance one by one {b['lance_s']:.2f} s ({b['lance_ms_per_query']:.3f} ms/query), "
          f"ours one search_ids call {b['ours_s'] * 1e3:.1f} ms ({b['ours_ms_per_query']:.4f} ms/query) = "
          f"{b['lance_s'] / b['ours_s']:.0f}x; from an empty cache {b['ours_cold_s']:.2f} s")
    print(f"  prewarm (whole segment into the cache): {fig['prewarm_s']:.2f} s, {fig['cache_bytes'] / 2**20:.0f} MiB")
    sr = fig["ski_rental"]
    print(f"  without prewarm, from an empty cache: whole in memory after {sr['queries']} single queries "
          f"({sr['seconds']:.2f} s in all; bands {'whole' if sr['bands_full'] else 'partial'}, "
          f"signatures {'whole' if sr['docs_full'] else 'partial'})")
    print(f"  answers identical to Lance: {fig['answers_checked'] - mismatches}/{fig['answers_checked']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fig, f, indent=2)


if __name__ == "__main__":
    main()
