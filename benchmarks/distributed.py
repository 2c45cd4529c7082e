"""Distributed build on Ray against the single-process build, on the same corpus.

    python benchmarks/distributed.py                       # 1M rows, 4 fragments, 4 groups, local Ray
    python benchmarks/distributed.py --rows 200000 --ray-address auto
    python benchmarks/distributed.py --nodes 4 --pairs      # head + 3 worker nodes, also pairs/clusters
    python benchmarks/distributed.py --nodes 4 --shuffle    # also the self-join as a shuffle
    python benchmarks/distributed.py --nodes 4 --shuffle --s3   # the datasets on a local S3 server
    python benchmarks/distributed.py --nodes 4 --shuffle --dedup   # + star + exact dedup from SQL
    python benchmarks/distributed.py --rows 10000000 --nodes 4 --shuffle --s3 --shuffle-pairs-only

The synthetic corpus (``lance_minhash_sql.faces.corpus``, 250k rows per fragment) is written
once under ``--data`` and copied, so both builds index identical datasets. Before timing,
a small warm-up build loads the compiled kernels in the driver and in the Ray workers.
Timed: ``build_index`` (one process), ``build_index(executor="ray")`` with one task per
fragment group (one commit of four segments), and the merge of those segments into one
(``optimize(merge="all")``, what ``merge=True`` runs). Checked: the same top-10 answers
for ``--queries`` texts of the corpus through our ``search`` and through Lance's
``MinHashQuery`` on the four-segment index, and after the merge the same signatures and
bands tables as the single-process build. On a machine with few cores Ray adds its task
and object-store overhead and the tasks compete for the same cores: the figures show
that cost honestly, they do not show a speed-up.

``--nodes N`` starts a Ray cluster of separate nodes on this machine
(``ray.cluster_utils.Cluster``: a head without CPUs for tasks and ``N - 1`` worker nodes
of ``--cpus-per-node`` CPUs, each its own raylet and object store), so tasks, their
arguments and their results cross node boundaries as on a real cluster. ``--pairs``
also times ``pairs`` / ``clusters`` with ``executor="ray"`` against the local executor
(threshold 0.8) and checks they give the same rows. Where the overhead
shows in the fixed costs printed beside the table: the cluster's start, the first tasks
on each worker (process start, imports, the kernels' load: the warm-up) and a no-op
task's round trip.

``--shuffle`` times ``pairs`` / ``clusters`` on the Ray executor (``extras/ray_executor.py``:
the shuffle of ``extras/shuffle.py``, ``--memory-limit`` per task) against the local
executor on the same 4-segment index
and checks they give the same rows; it prints what the shuffle moved (band rows and
signatures, objects), each stage's wall time on the driver and its tasks' summed seconds,
and per stage the largest peak RSS of a task against its RSS at start (each task resets
its process's high-water mark). ``--dedup`` also runs ``minhash_dedup(..., clustering := 'star', verify := 'exact')``
from SQL with ``executor := 'local'`` and ``'ray'`` (same table?), and the same keep flags
on the Ray executor from Python for the CPU seconds of the driver and all tasks against
the one process's, with each stage's task peak RSS. ``--s3`` puts both datasets on a local S3 server
(``tests/s3server.py``, objects in memory) and counts the requests: GETs of
``signatures.lance`` per GB read by the shuffle.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)


def build_on_ray(dataset, column: str, **kw):
    """The build as one Ray task per fragment group (``executor="ray"``)."""
    import lance_minhash_sql as lms

    return lms.build_index(dataset, column, executor="ray", **kw)


def pairs_on_ray(dataset, column: str, threshold: float, *, stats: dict | None = None, **kw):
    """The pairs on the Ray executor, what the shuffle moved in ``stats``."""
    from lance_minhash_sql.extras.ray_executor import RayExecutor
    from lance_minhash_sql.selfjoin.pairs import pairs

    return pairs(dataset, column, threshold, executor=RayExecutor(stats=stats), **kw)


def clusters_on_ray(dataset, column: str, threshold: float, *, stats: dict | None = None, **kw):
    from lance_minhash_sql.extras.ray_executor import RayExecutor
    from lance_minhash_sql.selfjoin.clusters import clusters

    return clusters(dataset, column, threshold, executor=RayExecutor(stats=stats), **kw)


def _segment_tables(uri: str):
    import lance
    from lance.file import LanceFileReader

    from lance_minhash_sql.io import manifest

    ds = lance.dataset(uri)
    (seg,) = manifest.minhash_segments(ds, "text")
    path = manifest.segment_dir(ds, seg.uuid)
    return tuple(LanceFileReader(os.path.join(path, f)).read_all().to_table()
                 for f in ("signatures.lance", "bands.lance"))


def _stage_lines(stats: dict) -> list[str]:
    mb = 1 << 20
    out = [f"  moved: {stats['band_rows']:,} band rows ({stats['band_bytes'] / mb:,.1f} MiB) to {stats['shards']} "
           f"shards; {stats['signature_rows_read']:,} signatures read ({stats['signature_bytes_read'] / mb:,.1f} MiB), "
           f"{stats['signature_rows_sent']:,} sent ({stats['signature_bytes_sent'] / mb:,.1f} MiB); "
           f"{stats['objects']:,} objects; largest pool {stats['max_pool_rows']:,} of {stats['max_docs']:,} "
           f"(shards over the pool: {stats['over_pool_shards']})",
           f"  | {'stage':<9} | {'driver s':>8} | {'tasks':>5} | {'task s':>7} | {'task CPU s':>10} | "
           f"{'start RSS':>9} | {'peak RSS':>8} | peak - start | shared (end) | anon rise |"]
    for stage, t in stats["tasks"].items():
        out.append(f"  | {stage:<9} | {stats['stage_seconds'].get(stage, 0):8.2f} | {t['tasks']:5d} | "
                   f"{t['seconds']:7.2f} | {t['cpu_seconds']:10.2f} | {t['start_mb']:6.0f} MB | "
                   f"{t['peak_mb']:5.0f} MB | {t['peak_mb'] - t['start_mb']:8.0f} MB | "
                   f"{t.get('shmem_mb', 0):9.0f} MB | {t.get('anon_mb', 0):6.0f} MB |")
    return out


def _s3_copy(server, name: str, base: str, rows_per_fragment: int, groups: int) -> str:
    """A copy of ``base`` on the S3 server, indexed by the Ray build; its URI."""
    import lance

    opts = server.storage_options()
    uri = f"s3://{server.make_bucket(name)}/corpus.lance"
    src = lance.dataset(base)
    lance.write_dataset(src.scanner(batch_size=65536).to_reader(), uri, max_rows_per_file=rows_per_fragment,
                        max_rows_per_group=rows_per_fragment, storage_options=opts)
    build_on_ray(uri, "text", fragment_groups=groups, storage_options=opts)
    return uri


def _signature_gets(server) -> tuple[int, int, int]:
    """``(GETs of signatures.lance, bytes they asked, all requests)`` since the last reset."""
    import re

    counts = server.counts()
    n = size = 0
    for method, path, rng in counts["log"]:
        if method == "GET" and path.endswith("signatures.lance"):
            n += 1
            m = re.match(r"bytes=(\d+)-(\d+)", rng or "")
            size += int(m.group(2)) - int(m.group(1)) + 1 if m else 0
    return n, size, counts["requests"]


def _start_ray(args):
    """Connect to Ray as ``args`` say; the ``ray.cluster_utils.Cluster`` started (or None)."""
    import ray

    cluster = None
    if args.nodes:
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        for _ in range(args.nodes - 1):
            cluster.add_node(num_cpus=args.cpus_per_node)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                     p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}})
    elif args.ray_address is None:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.ray_address)
    return cluster


def _restart_ray(args, state: dict) -> float:
    """A new cluster of the same shape (fresh worker processes, empty object stores);
    the seconds it took. Only for ``--nodes`` (else nothing)."""
    import ray

    if state["cluster"] is None:
        return 0.0
    t = time.perf_counter()
    ray.shutdown()
    state["cluster"].shutdown()
    state["cluster"] = _start_ray(args)
    return time.perf_counter() - t


def say(*lines: str) -> None:
    """Print now: a long run's figures are not lost with a run stopped before its end."""
    print(*lines, sep="\n", flush=True)


def _shuffle(args, dist: str, warm: str, state: dict) -> None:
    """The self-join as a shuffle against one process on the same index, each line printed
    as it is known."""
    import pyarrow as pa

    from lance_minhash_sql.selfjoin.clusters import clusters
    from lance_minhash_sql.selfjoin.pairs import pairs

    import ray

    key = [("left_rowid", "ascending"), ("right_rowid", "ascending")]
    limit = args.memory_limit

    @ray.remote(max_calls=1)  # a fresh worker process, ended after the call
    def baseline(uri: str) -> float:
        from lance_minhash_sql.core.usage import rss_mb

        list(pairs(uri, "text", 0.8))  # the package imported, the self-join's kernels loaded
        clusters(uri, "text", 0.8)
        return rss_mb()

    server = None
    uri, opts = dist, None
    if args.s3:
        t = time.perf_counter()
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from s3server import S3Server

        server = S3Server().start()
        opts = server.storage_options()
        uri = _s3_copy(server, "shuffle", dist, args.rows_per_fragment, args.groups)
        print(f"S3 copy written and indexed in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    restarted = _restart_ray(args, state)  # the builds' workers gone: each task's RSS is the shuffle's
    base_mb = ray.get(baseline.remote(warm))
    list(pairs_on_ray(warm, "text", 0.8))  # the kernels in the workers
    if not args.shuffle_pairs_only:
        clusters_on_ray(warm, "text", 0.8)
    from lance_minhash_sql.core.sizes import format_bytes
    from lance_minhash_sql.core.budget import memory_limit_bytes

    say(f"\nThe self-join as a shuffle ({'S3 test server' if args.s3 else 'local disk'}, "
        f"memory_limit={format_bytes(memory_limit_bytes(limit))} per task, and for one process), against one "
        f"process on the same {args.groups}-segment index ({'local disk' if args.s3 else 'same files'}); "
        "each line is printed as its self-join ends:\n",
        f"process baseline: a fresh worker with the package imported and the self-join's kernels loaded "
        f"holds {base_mb:.0f} MB; the shuffle ran on a new cluster ({restarted:.1f} s to restart it: no "
        "worker had built anything), so a task's start RSS holds only the shuffle's earlier tasks' leftovers\n",
        f"| {'what':<40} | {'seconds':>8} | {'vs single':>9} | notes",
        f"|{'-' * 42}|{'-' * 10}|{'-' * 11}|------")
    t = time.perf_counter()
    p1 = pa.Table.from_batches(list(pairs(dist, "text", 0.8, memory_limit=limit)))
    t1 = time.perf_counter() - t
    say(f"| {'pairs, one process':<40} | {t1:8.2f} | {1:8.2f}x | {p1.num_rows:,} pairs")
    ps: dict = {}
    if server:
        server.reset()
    t = time.perf_counter()
    p2 = pa.Table.from_batches(list(pairs_on_ray(uri, "text", 0.8, memory_limit=limit, storage_options=opts,
                                                 stats=ps)))
    t2 = time.perf_counter() - t
    gets = _signature_gets(server) if server else None
    same_pairs = p1.sort_by(key).equals(p2.sort_by(key))
    say(f"| {'pairs, executor=ray':<40} | {t2:8.2f} | {t2 / t1:8.2f}x | same pairs: {same_pairs}",
        "pairs, executor=ray:", *_stage_lines(ps))
    if gets:
        n, size, total = gets
        gb = ps["signature_bytes_read"] / 1e9
        say(f"S3 requests of pairs on Ray: {total:,} in all; {n:,} GETs of signatures.lance "
            f"asking {size / 1e6:,.1f} MB, for {ps['signature_bytes_read'] / 1e6:,.1f} MB of candidates' "
            f"signatures read: {n / (size / 1e9):,.0f} GETs per GB fetched, {n / gb:,.0f} per GB of "
            f"candidates' signatures, {ps['signature_rows_sent'] / max(n, 1):,.0f} signatures sent per GET")
    same_clusters = True
    if not args.shuffle_pairs_only:
        t = time.perf_counter()
        c1 = clusters(dist, "text", 0.8, memory_limit=limit)
        t3 = time.perf_counter() - t
        say(f"| {'clusters, one process':<40} | {t3:8.2f} | {1:8.2f}x | {c1.num_rows:,} rows in clusters")
        cs: dict = {}
        t = time.perf_counter()
        c2 = clusters_on_ray(uri, "text", 0.8, memory_limit=limit, storage_options=opts, stats=cs)
        t4 = time.perf_counter() - t
        same_clusters = c1.equals(c2)
        say(f"| {'clusters, executor=ray':<40} | {t4:8.2f} | {t4 / t3:8.2f}x | same table: {same_clusters}",
            "clusters, executor=ray:", *_stage_lines(cs))
    same_dedup = _dedup(args, dist, limit) if args.dedup else True
    if server:
        server.stop()
    if not same_pairs or not same_clusters or not same_dedup:
        sys.exit("MISMATCH (shuffle)")


def _dedup(args, dist: str, limit) -> bool:
    """Star + exact ``minhash_dedup`` from SQL on both executors (the same table?), then the
    same keep flags from Python on the Ray executor for its tasks' figures: CPU seconds of
    the driver and of all tasks against the local executor's process."""
    import lance_minhash_sql as lms
    from lance_minhash_sql.extras.ray_executor import RayExecutor
    from lance_minhash_sql.selfjoin.dedup import keep_flags

    budget = limit or "512MiB"
    con = lms.connect()
    sql = ("SELECT * FROM minhash_dedup(?, 'text', 0.8, clustering := 'star', verify := 'exact', "
           "memory_limit := ?, executor := ?) ORDER BY _rowid")
    figures = {}
    for executor in ("local", "ray"):
        c, t = time.process_time(), time.perf_counter()
        figures[executor] = (con.sql(sql, params=[dist, budget, executor]).to_arrow_table(), time.perf_counter() - t,
                             time.process_time() - c)
    (d1, t1, cpu1), (d2, t2, cpu2) = figures["local"], figures["ray"]
    same = d1.equals(d2)
    stats: dict = {}
    c, t = time.process_time(), time.perf_counter()
    keep_flags(dist, "text", 0.8, clustering="star", verify="exact", memory_limit=budget,
               executor=RayExecutor(stats=stats))
    t3, cpu3 = time.perf_counter() - t, time.process_time() - c
    tasks_cpu = sum(s["cpu_seconds"] for s in stats["tasks"].values())
    say(f"| {'SQL star + exact dedup, one process':<40} | {t1:8.2f} | {1:8.2f}x | {d1.num_rows:,} rows, "
        f"{cpu1:.2f} CPU s",
        f"| {'SQL star + exact dedup, executor := ray':<40} | {t2:8.2f} | {t2 / t1:8.2f}x | same table: {same}, "
        f"driver {cpu2:.2f} CPU s",
        f"star + exact keep flags, executor=ray (Python, {t3:.2f} s): driver {cpu3:.2f} CPU s + tasks "
        f"{tasks_cpu:.2f} CPU s = {(cpu3 + tasks_cpu) / cpu1:.2f}x the one process's CPU; per stage:",
        *_stage_lines(stats))
    return same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rows-per-fragment", type=int, default=250_000)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--data", default="/tmp/ray-data")
    ap.add_argument("--ray-address", default=None)
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local Ray (default: all)")
    ap.add_argument("--nodes", type=int, default=0, help="a Ray cluster of this many nodes on this machine")
    ap.add_argument("--cpus-per-node", type=int, default=1)
    ap.add_argument("--pairs", action="store_true", help="also time pairs and clusters")
    ap.add_argument("--shuffle", action="store_true", help="also time the self-join as a shuffle")
    ap.add_argument("--memory-limit", default=None, help="the shuffle's budget per task (default 512MiB)")
    ap.add_argument("--dedup", action="store_true",
                    help="with --shuffle: star + exact minhash_dedup from SQL on both executors")
    ap.add_argument("--s3", action="store_true", help="the datasets on a local S3 server (tests/s3server.py)")
    ap.add_argument("--shuffle-pairs-only", action="store_true",
                    help="--shuffle: time pairs only (the clusters' signature stage is long on the S3 test server "
                         "past a few million rows)")
    args = ap.parse_args()

    import lance
    import pyarrow as pa
    import ray
    from lance.query import MinHashQuery

    from lance_minhash_sql.indexer.builder import build_index
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.lifecycle.optimize import optimize
    from lance_minhash_sql.query.topk import search

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
    state = {"cluster": _start_ray(args)}
    ray_start = time.perf_counter() - t
    t = time.perf_counter()
    build_index(warm, "text")
    build_on_ray(warm, "text", fragment_groups=4)
    warm_s = time.perf_counter() - t

    @ray.remote
    def noop():
        return 0

    ray.get(noop.remote())
    t = time.perf_counter()
    for _ in range(20):
        ray.get(noop.remote())
    noop_ms = (time.perf_counter() - t) / 20 * 1000

    t = time.perf_counter()
    rs = build_index(single, "text")
    t_single = time.perf_counter() - t
    t = time.perf_counter()
    rd = build_on_ray(dist, "text", fragment_groups=args.groups)
    t_dist = time.perf_counter() - t

    texts = lance.dataset(single).to_table(columns=["text"], limit=args.queries * 50).column("text").to_pylist()
    queries = [q for q in texts[::50] if q][: args.queries]
    same_ours = same_lance = 0
    for q in queries:
        same_ours += search(single, "text", q, 10).equals(search(dist, "text", q, 10))
        lq = dict(nearest=MinHashQuery(q, "text"), limit=10, with_row_id=True, columns=["_distance"])
        same_lance += lance.dataset(single).to_table(**lq).equals(lance.dataset(dist).to_table(**lq))

    # first: its tasks' peak RSS is then not that of workers whose caches hold segments
    if args.shuffle:
        _shuffle(args, dist, warm, state)
    selfjoin = []
    if args.pairs:
        from lance_minhash_sql.selfjoin.clusters import clusters
        from lance_minhash_sql.selfjoin.pairs import pairs

        list(pairs_on_ray(warm, "text", 0.8))  # the pairs kernels in the workers
        clusters_on_ray(warm, "text", 0.8)
        t = time.perf_counter()
        p1 = pa.Table.from_batches(list(pairs(single, "text", 0.8)))
        t1 = time.perf_counter() - t
        t = time.perf_counter()
        p2 = pa.Table.from_batches(list(pairs_on_ray(dist, "text", 0.8)))
        t2 = time.perf_counter() - t
        t = time.perf_counter()
        c1 = clusters(single, "text", 0.8)
        t3 = time.perf_counter() - t
        t = time.perf_counter()
        c2 = clusters_on_ray(dist, "text", 0.8)
        t4 = time.perf_counter() - t
        key = [("left_rowid", "ascending"), ("right_rowid", "ascending")]
        same_pairs = p1.sort_by(key).equals(p2.sort_by(key))
        selfjoin = [("pairs, one process", t1, f"{p1.num_rows:,} pairs"),
                    ("pairs, executor=ray (4-segment index)", t2, f"same pairs: {same_pairs}"),
                    ("clusters, one process", t3, f"{c1.num_rows:,} rows in clusters"),
                    ("clusters, executor=ray", t4, f"same table: {c1.equals(c2)}")]
        if not same_pairs or not c1.equals(c2):
            sys.exit("MISMATCH (pairs or clusters)")

    t = time.perf_counter()
    m = optimize(dist, "text", merge="all")
    t_merge = time.perf_counter() - t
    a, b = _segment_tables(single), _segment_tables(dist)
    files_equal = a[0].equals(b[0]) and a[1].equals(b[1])

    cpus = int(ray.cluster_resources().get("CPU", 0))
    nodes = len([n for n in ray.nodes() if n["Alive"]])
    ray.shutdown()
    if state["cluster"] is not None:
        state["cluster"].shutdown()
    for path in (single, dist, warm):
        shutil.rmtree(path, ignore_errors=True)

    print(f"\n{args.rows:,} rows, {args.rows // args.rows_per_fragment} fragments, {args.groups} groups, "
          f"Ray: {nodes} node(s), {cpus} CPUs for tasks (started in {ray_start:.1f} s, not counted), "
          f"os.cpu_count()={os.cpu_count()}, load {os.getloadavg()[0]:.1f}\n")
    print(f"not counted either: the warm-up builds (workers start, load the kernels) {warm_s:.1f} s; "
          f"a no-op task's round trip {noop_ms:.1f} ms\n")
    rows = [
        ("single-process build_index", t_single, f"{rs.segments} segment, {rs.rows_indexed:,} rows"),
        (f"Ray build, {args.groups} tasks, one commit", t_dist, f"{rd.segments} segments, {rd.rows_indexed:,} rows"),
        ("merge of the Ray segments (merge=True)", t_merge, f"{m.merged_segments} -> 1 segment"),
        ("Ray build + merge", t_dist + t_merge, ""),
    ]
    single_of = {"pairs, executor=ray (4-segment index)": selfjoin[0][1] if selfjoin else 1,
                 "clusters, executor=ray": selfjoin[2][1] if selfjoin else 1}
    rows += selfjoin
    print(f"| {'what':<40} | {'seconds':>8} | {'vs single':>9} | notes")
    print(f"|{'-' * 42}|{'-' * 10}|{'-' * 11}|------")
    for what, secs, note in rows:
        base = single_of.get(what, selfjoin[0][1] if what.startswith("pairs") else
                             selfjoin[2][1] if what.startswith("clusters") else t_single)
        print(f"| {what:<40} | {secs:8.2f} | {secs / base:8.2f}x | {note}")
    print(f"\nsame top-10 answers (our search) on the {args.groups}-segment index: {same_ours}/{len(queries)}")
    print(f"same top-10 answers (Lance MinHashQuery):             {same_lance}/{len(queries)}")
    print(f"merged segment's signatures and bands equal the single-process build's: {files_equal}")
    if same_ours != len(queries) or same_lance != len(queries) or not files_equal:
        sys.exit("MISMATCH")


if __name__ == "__main__":
    main()
