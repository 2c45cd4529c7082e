"""Distributed build on Ray against the single-process build, on the same corpus.

    python benchmarks/distributed.py                       # 1M rows, 4 fragments, 4 groups, local Ray
    python benchmarks/distributed.py --rows 200000 --ray-address auto

The synthetic corpus (``lance_minhash_sql.corpus``, 250k rows per fragment) is written
once under ``--data`` and copied, so both builds index identical datasets. Before timing,
a small warm-up build loads the compiled kernels in the driver and in the Ray workers.
Timed: ``build_index`` (one process), ``build_index_distributed`` with one task per
fragment group (one commit of four segments), and the merge of those segments into one
(``optimize(merge="all")``, what ``merge=True`` runs). Checked: the same top-10 answers
for ``--queries`` texts of the corpus through our ``search`` and through Lance's
``MinHashQuery`` on the four-segment index, and after the merge the same signatures and
bands tables as the single-process build. On a machine with few cores Ray adds its task
and object-store overhead and the tasks compete for the same cores: the figures show
that cost honestly, they do not show a speed-up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)


def _segment_tables(uri: str):
    import lance
    from lance.file import LanceFileReader

    from lance_minhash_sql.io import manifest

    ds = lance.dataset(uri)
    (seg,) = manifest.minhash_segments(ds, "text")
    path = manifest.segment_dir(ds, seg.uuid)
    return tuple(LanceFileReader(os.path.join(path, f)).read_all().to_table()
                 for f in ("signatures.lance", "bands.lance"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rows-per-fragment", type=int, default=250_000)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", default="/tmp/ray-data")
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local Ray (default: all)")
    args = ap.parse_args()

    import lance
    import ray
    from lance.query import MinHashQuery

    from lance_minhash_sql.corpus import write_corpus
    from lance_minhash_sql.index.build import build_index
    from lance_minhash_sql.index.distributed import build_index_distributed
    from lance_minhash_sql.index.optimize import optimize
    from lance_minhash_sql.index.search import search

    os.makedirs(args.data, exist_ok=True)
    base = os.path.join(args.data, f"corpus-{args.rows}-{args.rows_per_fragment}.lance")
    if not os.path.isdir(os.path.join(base, "_versions")):
        t = time.perf_counter()
        write_corpus(base, args.rows, rows_per_fragment=args.rows_per_fragment)
        print(f"corpus written in {time.perf_counter() - t:.1f} s: {base}", file=sys.stderr)
    single, dist, warm = (os.path.join(args.data, n) for n in ("bench-single.lance", "bench-dist.lance",
                                                               "bench-warm.lance"))
    for path in (single, dist, warm):
        shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(base, single)
    shutil.copytree(base, dist)
    write_corpus(warm, 4000, rows_per_fragment=1000)

    t = time.perf_counter()
    if args.ray_address is None:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.ray_address)
    ray_start = time.perf_counter() - t
    build_index(warm, "text")
    build_index_distributed(warm, "text", fragment_groups=4)

    t = time.perf_counter()
    rs = build_index(single, "text")
    t_single = time.perf_counter() - t
    t = time.perf_counter()
    rd = build_index_distributed(dist, "text", fragment_groups=args.groups)
    t_dist = time.perf_counter() - t

    texts = lance.dataset(single).to_table(columns=["text"], limit=args.queries * 50).column("text").to_pylist()
    queries = [q for q in texts[::50] if q][: args.queries]
    same_ours = same_lance = 0
    for q in queries:
        same_ours += search(single, "text", q, 10).equals(search(dist, "text", q, 10))
        lq = dict(nearest=MinHashQuery(q, "text"), limit=10, with_row_id=True, columns=["_distance"])
        same_lance += lance.dataset(single).to_table(**lq).equals(lance.dataset(dist).to_table(**lq))

    t = time.perf_counter()
    m = optimize(dist, "text", merge="all")
    t_merge = time.perf_counter() - t
    a, b = _segment_tables(single), _segment_tables(dist)
    files_equal = a[0].equals(b[0]) and a[1].equals(b[1])

    cpus = int(ray.cluster_resources().get("CPU", 0))
    ray.shutdown()
    for path in (single, dist, warm):
        shutil.rmtree(path, ignore_errors=True)

    print(f"\n{args.rows:,} rows, {args.rows // args.rows_per_fragment} fragments, {args.groups} groups, "
          f"Ray with {cpus} CPUs (started in {ray_start:.1f} s, not counted), os.cpu_count()={os.cpu_count()}\n")
    rows = [
        ("single-process build_index", t_single, f"{rs.segments} segment, {rs.rows_indexed:,} rows"),
        (f"Ray build, {args.groups} tasks, one commit", t_dist, f"{rd.segments} segments, {rd.rows_indexed:,} rows"),
        ("merge of the Ray segments (merge=True)", t_merge, f"{m.merged_segments} -> 1 segment"),
        ("Ray build + merge", t_dist + t_merge, ""),
    ]
    print(f"| {'what':<40} | {'seconds':>8} | {'vs single':>9} | notes")
    print(f"|{'-' * 42}|{'-' * 10}|{'-' * 11}|------")
    for what, secs, note in rows:
        print(f"| {what:<40} | {secs:8.2f} | {secs / t_single:8.2f}x | {note}")
    print(f"\nsame top-10 answers (our search) on the {args.groups}-segment index: {same_ours}/{len(queries)}")
    print(f"same top-10 answers (Lance MinHashQuery):             {same_lance}/{len(queries)}")
    print(f"merged segment's signatures and bands equal the single-process build's: {files_equal}")
    if same_ours != len(queries) or same_lance != len(queries) or not files_equal:
        sys.exit("MISMATCH")


if __name__ == "__main__":
    main()
