"""Object storage, side by side: requests and bytes per query at the S3 server, for ours and
for Lance's native ``MinHashQuery`` on the same index; build, search and pairs on the S3
server against local disk.

    python benchmarks/s3.py                       # 1M-row index (bench-data/search-1000000.lance)
    python benchmarks/s3.py --rows 100000 --work-rows 20000

The S3 server is moto on localhost in its own process (``tests/s3server.py``), which
counts every request and the bytes of every response. The search benchmark's dataset
(``benchmarks/search.py``: corpus plus a Lance-built ``MINHASHLSH`` index) is uploaded to
it once per run. moto serves each ranged read by slicing the stored object in Python,
so its times say little about a real store; the request counts and bytes are the figures.

Request figures (top-10, columns ``id`` and ``text``):

* *first query*: a fresh process state: ours after ``clear_cache()`` (dataset and
  segments opened by the query), Lance with a new ``lance.dataset`` object;
* *new query, open index*: a query not asked before, with the index already open (ours:
  page tables resident; Lance: the same dataset object);
* *repeated query*: the previous query again;
* *prewarmed*: ours after ``prewarm`` (signatures and band pages in the process cache).

Ours is asked by URI, which checks for a newer dataset version on every query (one LIST
request), and, in the third column, given a ``LanceDataset`` object pinned to its
version, as Lance is.

Timing figures, ``--work-rows`` rows written both to local disk and to the S3 server:
build (ours), one warm search (median), pairs at 0.8 (ours).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

K = 10
COLUMNS = ["id", "text"]


def upload(s3, local: str, bucket: str) -> str:
    """Copy a local dataset folder to ``s3://bucket/<name>``; its URI."""
    name = os.path.basename(local.rstrip("/"))
    client = s3.client()
    for d, _, files in os.walk(local):
        for f in files:
            path = os.path.join(d, f)
            client.upload_file(path, bucket, f"{name}/{os.path.relpath(path, local)}")
    return f"s3://{bucket}/{name}"


def counted(s3, fn):
    s3.reset()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    c = s3.counts()
    return out, {"requests": c["requests"], "bytes": c["bytes"], "seconds": dt, "by_method": c["by_method"]}


def summarize(rows: list[dict]) -> dict:
    req = np.array([r["requests"] for r in rows])
    kb = np.array([r["bytes"] for r in rows]) / 1e3
    return {"requests_median": float(np.median(req)), "requests_max": int(req.max()),
            "kb_median": float(np.median(kb)), "n": len(rows)}


def request_figures(s3, uri: str, opts: dict, qs: list[str]) -> dict:
    import lance
    from lance.query import MinHashQuery

    from lance_minhash_sql.index.opened import clear_cache
    from lance_minhash_sql.lifecycle.prewarm import prewarm
    from lance_minhash_sql.query.topk import search

    def ours(q, where=uri):
        return search(where, "text", q, K, columns=COLUMNS, storage_options=opts)

    def native(ds, q):
        return ds.to_table(nearest=MinHashQuery(q, "text"), limit=K, columns=COLUMNS + ["_distance"],
                           with_row_id=True)

    def same(a, b):
        return (a.column("_rowid").to_pylist() == b.column("_rowid").to_pylist()
                and a.column("_distance").to_pylist() == b.column("_distance").to_pylist())

    fig = {k: {"ours": [], "pinned": [], "lance": []} for k in ("first", "new", "repeat", "prewarmed")}
    mismatches = 0
    first, rest = qs[: len(qs) // 2], qs[len(qs) // 2:]
    for q in first:  # a fresh process state per query
        clear_cache()
        a, ca = counted(s3, lambda: ours(q))
        b, cb = counted(s3, lambda: native(lance.dataset(uri, storage_options=opts), q))
        clear_cache()
        c, cc = counted(s3, lambda: ours(q, lance.dataset(uri, storage_options=opts)))
        fig["first"]["ours"].append(ca)
        fig["first"]["pinned"].append(cc)
        fig["first"]["lance"].append(cb)
        mismatches += (not same(a, b)) + (not same(c, b))
    ds = lance.dataset(uri, storage_options=opts)
    mine = lance.dataset(uri, storage_options=opts)

    def round_of(kind, q):
        nonlocal mismatches
        b, cb = counted(s3, lambda: native(ds, q))
        a, ca = counted(s3, lambda: ours(q))
        fig[kind]["ours"].append(ca)
        fig[kind]["lance"].append(cb)
        mismatches += not same(a, b)

    def pinned_round(kind, q):
        nonlocal mismatches
        b = native(ds, q)
        c, cc = counted(s3, lambda: ours(q, mine))
        fig[kind]["pinned"].append(cc)
        mismatches += not same(c, b)

    for q in rest:  # index open on both sides
        round_of("new", q)
        round_of("repeat", q)
    clear_cache()
    ours(rest[0], mine)
    for q in rest[1:]:  # the same with a pinned dataset object
        pinned_round("new", q)
        pinned_round("repeat", q)
    t0 = time.perf_counter()
    _, cw = counted(s3, lambda: prewarm(uri, "text", storage_options=opts))
    print(f"prewarm: {cw['requests']} requests, {cw['bytes'] / 1e6:.0f} MB, {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    for q in first:  # queries not asked on this open index, answered from the cache
        round_of("prewarmed", q)
        pinned_round("prewarmed", q)
    out = {k: {who: summarize(v) for who, v in d.items()} for k, d in fig.items()}
    out["prewarm"] = {"requests": cw["requests"], "mb": cw["bytes"] / 1e6}
    out["mismatches"] = mismatches
    return out


def timing_figures(s3, bucket: str, rows: int, queries: int) -> dict:
    import lance
    import pyarrow as pa

    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches
    from lance_minhash_sql.index.opened import clear_cache
    from lance_minhash_sql.query.topk import search
    from lance_minhash_sql.selfjoin.pairs import pairs

    table = pa.Table.from_batches(list(generate_batches(rows, CorpusSpec(seed=11))))
    qs = [t for t in table.column("text").to_pylist()[:queries] if t]
    opts = s3.storage_options()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        warm = os.path.join(tmp, "warm.lance")  # compile the build and pairs kernels outside the figures
        lance.write_dataset(table.slice(0, 2000), warm)
        build_index(warm, "text")
        sum(b.num_rows for b in pairs(warm, "text", 0.8))
        for where, uri, so in (("local", os.path.join(tmp, "work.lance"), None),
                               ("s3", f"s3://{bucket}/work-{rows}.lance", opts)):
            lance.write_dataset(table, uri, storage_options=so, max_rows_per_file=max(1, rows // 4))
            clear_cache()
            t0 = time.perf_counter()
            build_index(uri, "text", storage_options=so)
            build_s = time.perf_counter() - t0
            search(uri, "text", qs[0], K, columns=COLUMNS, storage_options=so)
            ts = []
            for q in qs:
                t0 = time.perf_counter()
                search(uri, "text", q, K, columns=COLUMNS, storage_options=so)
                ts.append(time.perf_counter() - t0)
            clear_cache()
            s3.reset()
            t0 = time.perf_counter()
            n = sum(b.num_rows for b in pairs(uri, "text", 0.8, storage_options=so))
            pairs_s = time.perf_counter() - t0
            c = s3.counts()
            out[where] = {"build_s": build_s, "search_p50_ms": float(np.median(ts)) * 1e3, "pairs_s": pairs_s,
                          "pairs": n, "pairs_requests": c["requests"] if where == "s3" else None,
                          "pairs_mb": c["bytes"] / 1e6 if where == "s3" else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the request benchmark's index")
    ap.add_argument("--queries", type=int, default=10, help="queries per request figure (half first-query)")
    ap.add_argument("--work-rows", type=int, default=100_000, help="rows of the build/search/pairs timings")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    args = ap.parse_args()

    from s3server import S3Server
    from search import dataset, queries

    local = dataset(args.rows, args.data_dir)
    qs = queries(local, 2 * args.queries)[: 2 * args.queries]
    with S3Server() as s3:
        bucket = s3.make_bucket("lms-bench")
        t0 = time.perf_counter()
        uri = upload(s3, local, bucket)
        print(f"uploaded {local} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        opts = s3.storage_options()
        # load the compiled kernels outside every figure
        from lance_minhash_sql.query.topk import search_ids
        search_ids(local, "text", qs[0], K)
        req = request_figures(s3, uri, opts, qs[: args.queries * 2])
        tim = timing_figures(s3, bucket, args.work_rows, 20)

    print(f"\nrequests per top-{K} query at the S3 server, {args.rows:,}-row index "
          f"(median [max], KB median); answers differing from Lance: {req['mismatches']}")
    print(f"{'':24}{'ours (URI)':>22}{'ours (LanceDataset)':>22}{'lance':>22}{'lance / ours':>14}")

    def cell(f):
        return f"{f['requests_median']:>8.0f} [{f['requests_max']:>3}] {f['kb_median']:>7.0f} KB"

    for k, label in (("first", "first query"), ("new", "new query, open index"), ("repeat", "repeated query"),
                     ("prewarmed", "prewarmed (ours)")):
        o, p, n = req[k]["ours"], req[k]["pinned"], req[k]["lance"]
        ratios = "/".join(f"{n['requests_median'] / x['requests_median']:.2f}" if x["requests_median"] else "inf"
                          for x in (o, p))
        print(f"{label:24}{cell(o)}{cell(p)}{cell(n)}{ratios:>14}")
    print(f"prewarm: {req['prewarm']['requests']} requests, {req['prewarm']['mb']:.0f} MB")
    print(f"\n{args.work_rows:,} rows, local disk vs the S3 server (moto)")
    print(f"{'':10}{'build s':>10}{'search p50 ms':>15}{'pairs s':>10}{'pairs':>10}{'pairs requests':>16}")
    for where in ("local", "s3"):
        t = tim[where]
        reqs = "" if t["pairs_requests"] is None else f"{t['pairs_requests']} ({t['pairs_mb']:.0f} MB)"
        print(f"{where:10}{t['build_s']:>10.2f}{t['search_p50_ms']:>15.1f}{t['pairs_s']:>10.2f}{t['pairs']:>10}"
              f"{reqs:>16}")


if __name__ == "__main__":
    main()
