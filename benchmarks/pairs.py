"""Self-join: ``clusters`` and ``pairs`` on the synthetic corpus, from a built index, and
from text to pairs against datasketch and Lance's own per-row queries.

    python benchmarks/pairs.py --rows 1000000 --data-dir /tmp/bench
    python benchmarks/pairs.py --rows 100000 --dense-groups 10 --dense-copies 1000
    python benchmarks/pairs.py --giant --data-dir /tmp/bench  # 2M rows, one cluster of 300,000 copies

Datasets (written once, cached under ``--data-dir``):

* ``pairs-<rows>.lance``: a copy of ``corpus-<rows>.lance`` (the synthetic corpus, written
  first if missing) with our index (``build_index``, k=128, b=16, shingle 3). Its own
  dataset: the build benchmark adds and drops indexes on the corpus.
* ``pairs-dense-<groups>x<copies>.lance``: 100,000 corpus rows plus ``groups`` texts
  copied ``copies`` times each, so ``groups * copies * (copies - 1) / 2`` pairs come from
  giant buckets: the pair-dense case, where the figure is the rate pairs are produced.
* ``peers-<peer-rows>.lance``: a copy of ``corpus-<peer-rows>.lance`` without an index,
  for the peers below (each builds its own index).
* ``giant-<rows>x<copies>.lance`` (``--giant``): the corpus with ``copies`` rows
  overwritten by one text (``write_corpus(giant_copies=...)``), with our index.

From text to pairs, on ``--peer-rows`` rows (100,000), side by side:

* *ours*: ``build_index`` (scan, sign, sort, write the index) then every pair of
  ``pairs()``, timed as two parts and their sum;
* *datasketch*: ``MinHash.bulk(num_perm=128)`` over Python word 3-shingles (lower-cased
  ``\\w+`` tokens: not Lance's tokenizer, but the usual datasketch recipe), insert into
  ``MinHashLSH(threshold=0.8)``, query every row and keep the candidates whose estimated
  Jaccard reaches 0.8, each pair once (texts already in a Python list: reading them is not
  timed);
* *Lance per row*: Lance's native index build (timed), then
  ``ds.to_table(nearest=MinHashQuery(text, "text"), limit=10)`` for a random sample of
  ``--query-sample`` rows (5,000), its time extrapolated to all rows (said in the table);
  pairs are the hits with ``_distance <= 0.2`` other than the row itself (a top-10 query
  can miss pairs of rows with more than 9 near-duplicates).

``--giant``: ``clusters`` must find the 300,000 copies as one cluster of size 300,000
(checked in the child), and ``pairs()`` (4.5e10 pairs from the giant buckets, never run
to the end) is streamed for ``--giant-batches`` batches of 2**20 pairs while the resident
set (``VmRSS``) is sampled after every batch: flat memory means the RSS after the last
batch stays near the RSS after the tenth.

Each measurement runs in its own child process, so each peak RSS (``VmHWM``) is its own;
a throwaway child first loads (or, after a change, compiles) the numba kernels, and each
child loads them on a tiny dataset before the clock starts ("baseline" RSS). Peers are
also compared by CPU seconds (both threads of ours counted), which a shared machine's
load disturbs less than wall time.

* *cold*: the child's first call: opens the index, reads band pages and the signatures
  (into the process cache), signs nothing (every fragment is indexed). The OS page cache
  is warm.
* *warm*: the same call again in the same child (segments cached).
* ``pairs`` figures count reported pairs per second of wall time for the whole call.

Targets (issue): clusters of 1M rows from a built index <= 3 s, pairs >= 5e6 reported
pairs/s, peak RSS <= 1 GiB; from text to pairs ours >= 20x faster than datasketch and
>= 100x faster than a Lance query per row. The machine is shared: the load average at
the start is printed; times vary about 50% between runs.
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

from lance_minhash_sql.core.errors import LowRecallWarning  # noqa: E402
from lance_minhash_sql.core.usage import cpu_seconds, peak_rss_mb, rss_mb  # noqa: E402

THRESHOLD = 0.8
DENSE_BASE_ROWS = 100_000
QUERY_K = 10  # top-k of the Lance per-row queries
GIANT_ROWS = 2_000_000
GIANT_COPIES = 300_000


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _has_index(uri: str) -> bool:
    import lance

    return any(d.type_url.endswith("MinHashLshIndexDetails") for d in lance.dataset(uri).describe_indices())


def _corpus_copy(rows: int, data_dir: str, prefix: str) -> str:
    """``<prefix>-<rows>.lance``: a copy of ``corpus-<rows>.lance`` (written first if missing)."""
    import lance

    from lance_minhash_sql.faces.corpus import write_corpus

    src = os.path.join(data_dir, f"corpus-{rows}.lance")
    uri = os.path.join(data_dir, f"{prefix}-{rows}.lance")
    if not os.path.exists(os.path.join(uri, "_versions")):
        if not os.path.exists(os.path.join(src, "_versions")):
            os.makedirs(data_dir, exist_ok=True)
            t0 = time.perf_counter()
            write_corpus(src, rows, progress=True)
            _log(f"corpus: {rows:,} rows in {time.perf_counter() - t0:.1f} s")
        ds = lance.dataset(src)
        lance.write_dataset(ds.scanner(columns=["id", "text"], scan_in_order=True).to_reader(), uri)
    return uri


def corpus_dataset(rows: int, data_dir: str) -> str:
    from lance_minhash_sql.indexer.builder import build_index

    uri = _corpus_copy(rows, data_dir, "pairs")
    if not _has_index(uri):
        t0 = time.perf_counter()
        build_index(uri, "text")
        _log(f"{uri}: index built in {time.perf_counter() - t0:.1f} s")
    return uri


def dense_dataset(groups: int, copies: int, data_dir: str) -> str:
    import lance
    import numpy as np
    import pyarrow as pa

    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.faces.corpus import generate_batches, vocabulary

    uri = os.path.join(data_dir, f"pairs-dense-{groups}x{copies}.lance")
    if not os.path.exists(os.path.join(uri, "_versions")):
        base = pa.Table.from_batches(list(generate_batches(DENSE_BASE_ROWS)))
        rng = np.random.default_rng(11)
        vocab = np.array(vocabulary().to_pylist())
        dups = [" ".join(rng.choice(vocab, 60)) for _ in range(groups)]
        texts = pa.concat_arrays([base.column("text").combine_chunks(),
                                  pa.array([t for t in dups for _ in range(copies)], pa.string())])
        order = rng.permutation(len(texts))
        table = pa.table({"id": pa.array(np.arange(len(texts))), "text": texts.take(pa.array(order))})
        lance.write_dataset(table, uri)
    if not _has_index(uri):
        build_index(uri, "text")
    return uri


def peers_dataset(rows: int, data_dir: str) -> str:
    """A copy of the corpus for the peers (no index: each peer builds its own)."""
    return _corpus_copy(rows, data_dir, "peers")


def giant_dataset(rows: int, copies: int, data_dir: str) -> str:
    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.faces.corpus import write_corpus

    uri = os.path.join(data_dir, f"giant-{rows}x{copies}.lance")
    if not os.path.exists(os.path.join(uri, "_versions")):
        os.makedirs(data_dir, exist_ok=True)
        t0 = time.perf_counter()
        write_corpus(uri, rows, giant_copies=copies, progress=True)
        _log(f"giant corpus: {rows:,} rows in {time.perf_counter() - t0:.1f} s")
    if not _has_index(uri):
        t0 = time.perf_counter()
        build_index(uri, "text")
        _log(f"{uri}: index built in {time.perf_counter() - t0:.1f} s")
    return uri


def warm_kernels() -> None:
    """Load every kernel the self-join uses (pairs, components and star, each with the
    estimate and exact verification), on a tiny dataset."""
    import tempfile

    import lance
    import pyarrow as pa

    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.index.opened import clear_cache
    from lance_minhash_sql.selfjoin.clusters import clusters
    from lance_minhash_sql.selfjoin.pairs import pairs

    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "w.lance")
        texts = ["warm up the self join kernels now", "warm up the self join kernels now", "other text"] * 20
        lance.write_dataset(pa.table({"text": texts}), small, max_rows_per_file=25)
        build_index(small, "text")
        lance.write_dataset(pa.table({"text": texts[:5]}), small, mode="append")  # an unindexed fragment
        list(pairs(small, "text", THRESHOLD))
        list(pairs(small, "text", THRESHOLD, verify="exact"))
        clusters(small, "text", THRESHOLD)
        for verify in ("estimate", "exact"):  # star's walk and exact clusters' links
            clusters(small, "text", THRESHOLD, clustering="star", verify=verify)
        clusters(small, "text", THRESHOLD, verify="exact")
    clear_cache()


def _texts(uri: str) -> list:
    import lance

    return lance.dataset(uri).to_table(columns=["text"]).column("text").to_pylist()


def peer_ours(uri: str, threshold: float) -> dict:
    """build_index then pairs(): from the text column to every pair."""
    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.selfjoin.pairs import pairs

    warm_kernels()
    out: dict = {"baseline_rss_mb": peak_rss_mb()}
    c0, t0 = cpu_seconds(), time.perf_counter()
    build_index(uri, "text", replace=True)
    t1 = time.perf_counter()
    n = sum(b.num_rows for b in pairs(uri, "text", threshold))
    t2 = time.perf_counter()
    out.update(seconds=t2 - t0, cpu_s=cpu_seconds() - c0, parts={"build_index": t1 - t0, "pairs": t2 - t1}, pairs=n,
               peak_rss_mb=peak_rss_mb())
    return out


def peer_datasketch(uri: str, threshold: float) -> dict:
    """MinHash per row, MinHashLSH insert, a query per row, verification by estimate."""
    from datasketch import MinHash, MinHashLSH

    from lance_minhash_sql.faces.bench import python_shingles

    texts = _texts(uri)
    out: dict = {"baseline_rss_mb": peak_rss_mb()}
    c0, t0 = cpu_seconds(), time.perf_counter()
    sets = [[s.encode("utf-8") for s in python_shingles(t)] if t else [] for t in texts]
    keep = [i for i, s in enumerate(sets) if s]
    sigs = MinHash.bulk([sets[i] for i in keep], num_perm=128)
    t1 = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    with lsh.insertion_session() as session:
        for i, m in zip(keep, sigs):
            session.insert(i, m)
    t2 = time.perf_counter()
    by_row = dict(zip(keep, sigs))
    n = 0
    for i, m in zip(keep, sigs):
        for j in lsh.query(m):
            if j > i and m.jaccard(by_row[j]) >= threshold:
                n += 1
    t3 = time.perf_counter()
    out.update(seconds=t3 - t0, cpu_s=cpu_seconds() - c0, parts={"sign": t1 - t0, "insert": t2 - t1, "query+verify": t3 - t2}, pairs=n,
               peak_rss_mb=peak_rss_mb(), note=f"b={lsh.b}, r={lsh.r}")
    return out


def peer_lance_queries(uri: str, threshold: float, sample: int) -> dict:
    """Lance's native index, then one top-k MinHashQuery per row of a random sample."""
    import lance
    import numpy as np
    from lance.indices import IndexConfig
    from lance.query import MinHashQuery

    from lance_minhash_sql.core.params import MinHashParams

    ds = lance.dataset(uri)
    rows = ds.count_rows()
    rng = np.random.default_rng(5)
    picked = np.sort(rng.choice(rows, min(sample, rows), replace=False))
    table = ds.to_table(columns=["text"], with_row_id=True).take(picked)
    texts, self_ids = table.column("text").to_pylist(), table.column("_rowid").to_pylist()
    out: dict = {"baseline_rss_mb": peak_rss_mb()}
    c0, t0 = cpu_seconds(), time.perf_counter()
    ds.create_scalar_index("text", IndexConfig("MINHASHLSH", MinHashParams().to_lance_config()),
                           name="bench_lance_per_row", replace=True)
    t1, c1 = time.perf_counter(), cpu_seconds()
    ds = lance.dataset(uri)
    n = queried = 0
    for text, me in zip(texts, self_ids):
        if not text:
            continue
        hits = ds.to_table(nearest=MinHashQuery(text, "text"), limit=QUERY_K, columns=["_distance"],
                           with_row_id=True)
        dist, ids = hits.column("_distance").to_numpy(), hits.column("_rowid").to_numpy()
        n += int(((dist <= 1.0 - threshold + 1e-6) & (ids != me)).sum())
        queried += 1
    t2, c2 = time.perf_counter(), cpu_seconds()
    ds.drop_index("bench_lance_per_row")
    scale = rows / len(texts)
    queries = (t2 - t1) * scale
    out.update(seconds=(t1 - t0) + queries, cpu_s=(c1 - c0) + (c2 - c1) * scale, parts={"native build": t1 - t0, f"{queried:,} queries": t2 - t1,
                                                   "queries, all rows (extrapolated)": queries},
               pairs=round(n * scale / 2), peak_rss_mb=peak_rss_mb(),
               note=f"{len(texts):,}-row sample extrapolated x{scale:.0f}; {1e3 * (t2 - t1) / max(queried, 1):.2f} "
                    f"ms/query; pairs estimated (each found from both rows)")
    return out


def giant_clusters(uri: str, threshold: float, rows: int, copies: int) -> dict:
    """clusters() of the giant corpus; checks the copies form one cluster of their number."""
    import lance
    import numpy as np

    from lance_minhash_sql.faces.corpus import giant_cluster
    from lance_minhash_sql.selfjoin.clusters import clusters

    t = lance.dataset(uri).to_table(columns=["id"], with_row_id=True)
    ids, _ = giant_cluster(0, rows, copies)
    mine = np.sort(t.column("_rowid").to_numpy()[np.isin(t.column("id").to_numpy(), ids)])
    del t
    warm_kernels()
    out: dict = {"baseline_rss_mb": peak_rss_mb()}
    t0 = time.perf_counter()
    table = clusters(uri, "text", threshold)
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_mb"] = peak_rss_mb()
    rid, cid = table.column("_rowid").to_numpy(), table.column("cluster_id").to_numpy()
    size = table.column("cluster_size").to_numpy()
    inside = np.isin(rid, mine)
    whole = bool(inside.sum() == copies and (cid[inside] == mine[0]).all() and (size[inside] == copies).all()
                 and (cid[~inside] != mine[0]).all())
    out.update(rows=table.num_rows, clusters=int(np.unique(cid).size), largest=int(size.max(initial=0)),
               giant_intact=whole)
    return out


def giant_pairs_head(uri: str, threshold: float, batches: int) -> dict:
    """The first ``batches`` batches of pairs(); VmRSS after each."""
    from lance_minhash_sql.selfjoin.pairs import pairs

    warm_kernels()
    out: dict = {"baseline_rss_mb": peak_rss_mb()}
    rss, n = [], 0
    t0 = time.perf_counter()
    stream = pairs(uri, "text", threshold)
    for b in stream:
        n += b.num_rows
        del b
        rss.append(rss_mb())
        if len(rss) == batches:
            break
    seconds = time.perf_counter() - t0
    stream.close()
    out.update(seconds=seconds, pairs=n, pairs_per_s=n / seconds, rss_mb=rss, peak_rss_mb=peak_rss_mb())
    return out


def child(what: str, uri: str, threshold: float) -> dict:
    import warnings

    from lance_minhash_sql.selfjoin.clusters import clusters
    from lance_minhash_sql.selfjoin.pairs import pairs

    warnings.simplefilter("ignore", LowRecallWarning)
    t0 = time.perf_counter()
    warm_kernels()
    out: dict = {"what": what, "threshold": threshold, "kernel_load_s": time.perf_counter() - t0,
                 "baseline_rss_mb": peak_rss_mb()}
    if what == "warm":
        return out
    for run in ("cold", "warm"):
        c0, t0 = cpu_seconds(), time.perf_counter()
        if what == "clusters":
            t = clusters(uri, "text", threshold)
            seconds = time.perf_counter() - t0
            out[run] = {"seconds": seconds, "cpu_s": cpu_seconds() - c0, "rows": t.num_rows,
                        "clusters": len(set(t.column("cluster_id").to_pylist())),
                        "largest": max(t.column("cluster_size").to_pylist(), default=0)}
        else:
            n = 0
            for b in pairs(uri, "text", threshold, verify="exact" if what == "exact" else "estimate"):
                n += b.num_rows
            seconds = time.perf_counter() - t0
            out[run] = {"seconds": seconds, "cpu_s": cpu_seconds() - c0, "pairs": n, "pairs_per_s": n / seconds}
        out[run]["peak_rss_mb"] = peak_rss_mb()
    return out


def run_child(what: str, uri: str, threshold: float = THRESHOLD, *extra: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", what, "--uri", uri, "--threshold", str(threshold),
           *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _print_selfjoin(results: dict, names: dict) -> None:
    print(f"  {'what':34s} {'run':5s} {'seconds':>8s} {'cpu s':>7s} {'result':>24s} {'peak RSS':>9s} {'baseline':>9s}")
    for key, r in results.items():
        for run in ("cold", "warm"):
            m = r[run]
            if "pairs" in m:
                res = f"{m['pairs']:,} = {m['pairs_per_s'] / 1e6:.2f}M/s"
            else:
                res = f"{m['rows']:,} rows, {m['clusters']:,} cl."
            print(f"  {names[key]:34s} {run:5s} {m['seconds']:8.2f} {m['cpu_s']:7.2f} {res:>24s} "
                  f"{m['peak_rss_mb']:7.0f}MB {r['baseline_rss_mb']:7.0f}MB")


def run_peers(uri: str, query_sample: int, repeat: int) -> dict:
    """Each peer ``repeat`` times, interleaved (ours, datasketch, Lance, ours, ...); per peer
    the run of median seconds, with every run's seconds in ``runs``."""
    import statistics

    extra = {"lance": ("--query-sample", str(query_sample))}
    runs: dict = {"ours": [], "datasketch": [], "lance": []}
    for _ in range(repeat):
        for peer in runs:
            runs[peer].append(run_child(peer, uri, THRESHOLD, *extra.get(peer, ())))
    out = {}
    for peer, rs in runs.items():
        med = statistics.median_low([r["seconds"] for r in rs])
        out[peer] = dict(next(r for r in rs if r["seconds"] == med), runs=[r["seconds"] for r in rs])
    return out


def _print_peers(peers: dict, rows: int) -> None:
    ours = peers["ours"]["seconds"]
    print(f"from text to pairs, {rows:,} rows, threshold {THRESHOLD}: median of {len(peers['ours']['runs'])} "
          "interleaved runs")
    ours_cpu = peers["ours"]["cpu_s"]
    print(f"  {'peer':12s} {'seconds':>9s} {'ours faster':>11s} {'cpu s':>8s} {'by cpu':>7s} {'pairs':>10s} "
          f"{'peak RSS':>9s}  runs; parts; note")
    for name, r in peers.items():
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in r["parts"].items())
        runs = "/".join(f"{x:.2f}" for x in r["runs"])
        print(f"  {name:12s} {r['seconds']:9.2f} {r['seconds'] / ours:10.1f}x {r['cpu_s']:8.2f} "
              f"{r['cpu_s'] / ours_cpu:6.1f}x {r['pairs']:10,} {r['peak_rss_mb']:7.0f}MB  {runs} s; {parts}; "
              f"{r.get('note', '')}")


def _print_giant(cl: dict, head: dict, rows: int, copies: int) -> None:
    rss = head["rss_mb"]
    print(f"giant cluster: {rows:,} rows, one cluster of {copies:,} identical copies")
    print(f"  clusters: {cl['seconds']:.2f} s, {cl['rows']:,} rows in {cl['clusters']:,} clusters, largest "
          f"{cl['largest']:,}, the copies one cluster of {copies:,}: {cl['giant_intact']}; peak RSS "
          f"{cl['peak_rss_mb']:.0f} MB (baseline {cl['baseline_rss_mb']:.0f} MB)")
    at = [b for b in (1, 10, len(rss) // 2, len(rss)) if 1 <= b <= len(rss)]
    print(f"  pairs, first {len(rss)} batches: {head['pairs']:,} pairs in {head['seconds']:.1f} s "
          f"({head['pairs_per_s'] / 1e6:.2f}M/s); VmRSS after batch " +
          ", ".join(f"{b}: {rss[b - 1]:.0f} MB" for b in at) +
          f"; peak RSS {head['peak_rss_mb']:.0f} MB (all these pairs at once: {head['pairs'] * 24 / 2**30:.1f} GiB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dense-groups", type=int, default=20)
    ap.add_argument("--dense-copies", type=int, default=1500)
    ap.add_argument("--peer-rows", type=int, default=100_000, help="rows of the text-to-pairs comparison")
    ap.add_argument("--query-sample", type=int, default=5_000, help="rows queried one by one in Lance")
    ap.add_argument("--no-peers", action="store_true", help="skip the text-to-pairs comparison")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each peer (interleaved); medians are compared")
    ap.add_argument("--giant", action="store_true", help="only the giant-cluster run (2M rows, 300k copies)")
    ap.add_argument("--giant-rows", type=int, default=GIANT_ROWS)
    ap.add_argument("--giant-copies", type=int, default=GIANT_COPIES)
    ap.add_argument("--giant-batches", type=int, default=100, help="batches of pairs streamed from the giant corpus")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--child", choices=("warm", "clusters", "pairs", "exact", "ours", "datasketch", "lance",
                                        "giant_clusters", "giant_pairs"), help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    ap.add_argument("--threshold", type=float, default=THRESHOLD, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        peers = {"ours": lambda: peer_ours(args.uri, args.threshold),
                 "datasketch": lambda: peer_datasketch(args.uri, args.threshold),
                 "lance": lambda: peer_lance_queries(args.uri, args.threshold, args.query_sample),
                 "giant_clusters": lambda: giant_clusters(args.uri, args.threshold, args.giant_rows,
                                                          args.giant_copies),
                 "giant_pairs": lambda: giant_pairs_head(args.uri, args.threshold, args.giant_batches)}
        run = peers.get(args.child, lambda: child(args.child, args.uri, args.threshold))
        print(json.dumps(run()))
        return
    load = os.getloadavg()
    if args.giant:
        uri = giant_dataset(args.giant_rows, args.giant_copies, args.data_dir)
        run_child("warm", uri)
        extra = ("--giant-rows", str(args.giant_rows), "--giant-copies", str(args.giant_copies),
                 "--giant-batches", str(args.giant_batches))
        cl, head = run_child("giant_clusters", uri, THRESHOLD, *extra), run_child("giant_pairs", uri, THRESHOLD, *extra)
        print(f"self-join at threshold {THRESHOLD}, {os.cpu_count()} CPUs, load average {load[0]:.1f} at the start")
        _print_giant(cl, head, args.giant_rows, args.giant_copies)
        checks = [("the giant cluster found whole", cl["giant_intact"]),
                  ("peak RSS <= 1 GiB", max(cl["peak_rss_mb"], head["peak_rss_mb"]) <= 1024),
                  ("pairs memory flat (RSS after the last batch <= after the 10th + 64 MB)",
                   head["rss_mb"][-1] <= head["rss_mb"][min(9, len(head["rss_mb"]) - 1)] + 64)]
        _print_checks(checks)
        _dump(args.json, {"giant_rows": args.giant_rows, "giant_copies": args.giant_copies, "load_average": load,
                          "clusters": cl, "pairs_head": head})
        return
    uri = corpus_dataset(args.rows, args.data_dir)
    dense = dense_dataset(args.dense_groups, args.dense_copies, args.data_dir)
    peer_uri = None if args.no_peers else peers_dataset(args.peer_rows, args.data_dir)
    run_child("warm", uri)  # numba's on-disk cache is current before anything is measured
    results = {
        "clusters": run_child("clusters", uri),
        "pairs": run_child("pairs", uri),
        "exact": run_child("exact", uri),
        "pairs_dense": run_child("pairs", dense),
    }
    peers = {} if peer_uri is None else run_peers(peer_uri, args.query_sample, args.repeat)
    print(f"self-join at threshold {THRESHOLD}, {os.cpu_count()} CPUs, load average {load[0]:.1f} at the start")
    names = {"clusters": f"clusters, {args.rows:,} rows", "pairs": f"pairs, {args.rows:,} rows",
             "exact": f"pairs verify='exact', {args.rows:,} rows",
             "pairs_dense": f"pairs, {args.dense_groups} x {args.dense_copies} copies + {DENSE_BASE_ROWS:,}"}
    _print_selfjoin(results, names)
    if peers:
        _print_peers(peers, args.peer_rows)
    peak = max([r["warm"]["peak_rss_mb"] for r in results.values()] + [peers["ours"]["peak_rss_mb"]] if peers else
               [r["warm"]["peak_rss_mb"] for r in results.values()])
    checks = [
        ("clusters of 1M rows <= 3 s (cold)", results["clusters"]["cold"]["seconds"] <= 3.0),
        ("pairs >= 5e6 pairs/s (pair-dense, warm)", results["pairs_dense"]["warm"]["pairs_per_s"] >= 5e6),
        ("peak RSS <= 1 GiB (ours)", peak <= 1024),
    ]
    if peers:
        checks += [("text to pairs >= 20x faster than datasketch",
                    peers["datasketch"]["seconds"] >= 20 * peers["ours"]["seconds"]),
                   ("text to pairs >= 100x faster than a Lance query per row",
                    peers["lance"]["seconds"] >= 100 * peers["ours"]["seconds"])]
    _print_checks(checks)
    _dump(args.json, {"rows": args.rows, "load_average": load, **results, "peers": peers})


def _print_checks(checks: list) -> None:
    for name, ok in checks:
        print(f"  target {name}: {'met' if ok else 'NOT met'}")


def _dump(path: str | None, figures: dict) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
