"""Cross-dataset join: ``minhash_join`` against Lance native (one ``MinHashQuery`` per left
row) and against our own ``LATERAL minhash_search_ids(..., threshold, k := NULL)``.

    python benchmarks/join.py                       # 100k left rows x 1M right rows, /work/bench-data
    python benchmarks/join.py --left-rows 20000 --right-rows 200000 --data-dir /tmp/bench
    python benchmarks/join.py --exact                # verify := 'exact' beside the estimate
    python benchmarks/join.py --exact --ours-only --repeat 3   # ours alone, alternated runs, medians

Datasets (written once, reused, under ``--data-dir``):

* ``join-right-<rows>.lance``: the synthetic corpus (:mod:`lance_minhash_sql.faces.corpus`),
  rows ``0 .. right-1``, with **Lance's own** MinHash LSH index (k=128, b=16, shingle 3),
  so the Lance peer queries an index it built;
* ``join-left-<rows>.lance``: rows ``right .. right + left - 1`` of the same corpus, no
  index: 20% of them are near-duplicates of earlier rows (most of which are on the right),
  the rest new text: an evaluation set against a training corpus, or a new crawl batch.

Peers, each in its own child process (its own peak RSS, ``VmHWM``; a cold process cache:
the right index is read by the statement, as a user's first statement does), the numba
cache and the OS page cache warm (a throwaway child compiles the kernels and runs the join
once first), threshold 0.8:

* *ours*: ``SELECT * FROM minhash_join(left, right, 'text', threshold := 0.8)`` through
  DuckDB, every pair fetched as Arrow; the left rows are signed in the statement. Three
  figures: the first statement of a new process (it also loads the numba kernels from
  the on-disk cache and imports the engine, about a second); the first statement on these
  datasets in a process where an earlier statement on a small dataset loaded the kernels
  (what a session pays for a new join); the same statement again (the right index in the
  process cache).
* *LATERAL*: the left rows read from Lance into a DuckDB table (timed), then
  ``SELECT ... FROM left_rows l, LATERAL minhash_search_ids(right, 'text', l.text,
  threshold := 0.8, k := NULL) s`` (one batch search of all left rows); the same three
  figures.
* *Lance*: ``ds.to_table(nearest=MinHashQuery(text, "text"), limit=L, with_row_id=True)``
  per left row of a random sample of ``--lance-sample`` rows, hits kept when ``1 -
  _distance >= 0.8``; ``L`` is the most matches any left row has in our result, doubled
  (so every match fits), at least 10. Its time is extrapolated to all left rows (said in
  the table). Its pairs on the sample must equal ours on the sample (checked).

With ``--exact``, ``minhash_join(..., verify := 'exact')`` is timed the same way in its
own children (the exact pairs: candidates down to the floor, kept by their exact Jaccard);
``--ours-only`` leaves out LATERAL and Lance and runs the estimate's and the exact mode's
children ``--repeat`` times, alternated, kernels loaded, printing the medians (each run's
figures on stderr).

All three answer the same question: their pair counts must agree (checked). Figures:
seconds, CPU seconds of the process (both threads of ours and of DuckDB counted), pairs per
second, peak RSS, and the ratios by wall time and by CPU time. The machine is shared: the
load average is printed; wall times vary with it (a busy machine gives a two-thread
statement less than two cores, and a one-thread peer its one), CPU times much less.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from lance_minhash_sql.core.usage import cpu_seconds, peak_rss_mb, rss_mb  # noqa: E402

THRESHOLD = 0.8


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def datasets(data_dir: str, left_rows: int, right_rows: int) -> tuple[str, str]:
    import lance
    from lance.indices import IndexConfig

    from lance_minhash_sql.core.params import MinHashParams
    from lance_minhash_sql.faces.corpus import write_corpus

    os.makedirs(data_dir, exist_ok=True)
    right = os.path.join(data_dir, f"join-right-{right_rows}.lance")
    left = os.path.join(data_dir, f"join-left-{left_rows}.lance")
    if not os.path.exists(right):
        write_corpus(right, right_rows)
        t0 = time.perf_counter()
        lance.dataset(right).create_scalar_index("text", IndexConfig("MINHASHLSH", MinHashParams().to_lance_config()))
        _log(f"{right}: Lance index built in {time.perf_counter() - t0:.1f} s")
    if not os.path.exists(left):
        write_corpus(left, left_rows, start=right_rows)
    return left, right


# --------------------------------------------------------------------------- children


def _small_statements(small: str) -> None:
    """Joins (estimate and exact) and a LATERAL threshold search on a small dataset: loads
    every kernel."""
    import lance_minhash_sql as lms

    con = lms.connect()
    con.execute(f"SELECT count(*) FROM minhash_join('{small}', '{small}', 'text')").fetchall()
    con.execute(f"SELECT count(*) FROM minhash_join('{small}', '{small}', 'text', verify := 'exact')").fetchall()
    con.execute(f"SELECT count(*) FROM (SELECT 'a b c d' AS q) l, LATERAL minhash_search_ids('{small}', "
                "'text', l.q, threshold := 0.8, k := NULL) s").fetchall()


def _warm(left: str, right: str, small: str) -> None:
    """Write a small indexed dataset and run the statements on it once (numba cache), then
    the join on the real datasets once (the OS page cache holds their files for every peer)."""
    import lance

    import lance_minhash_sql as lms

    lance.write_dataset(lance.dataset(left).to_table(limit=2000), small)
    lms.build_index(small, "text")
    _small_statements(small)
    lms.connect().execute(f"SELECT count(*) FROM minhash_join('{left}', '{right}', 'text')").fetchall()


def child_ours(left: str, right: str, out_path: str, small: str, verify: str = "estimate") -> dict:
    """``small`` (else "-"): run the statements on it first, so the kernels are loaded."""
    import numpy as np
    import pyarrow.parquet as pq

    import lance_minhash_sql as lms

    if small != "-":
        _small_statements(small)
    con = lms.connect()
    base = rss_mb()
    sql = f"SELECT * FROM minhash_join('{left}', '{right}', 'text', threshold := {THRESHOLD}, verify := '{verify}')"
    runs = {}
    for run in ("first statement", "second statement"):
        c0, t0 = cpu_seconds(), time.perf_counter()
        table = con.sql(sql).to_arrow_table()
        runs[run] = {"seconds": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0, "pairs": table.num_rows,
                     "peak_rss_mb": peak_rss_mb()}
    lid = table.column("left_rowid").to_numpy()
    _, counts = np.unique(lid, return_counts=True)
    pq.write_table(table.select(["left_rowid", "right_rowid"]), out_path)
    return {"runs": runs, "baseline_rss_mb": base, "max_per_left": int(counts.max(initial=0)),
            "left_with_match": int(counts.size)}


def child_lateral(left: str, right: str, small: str) -> dict:
    import lance

    import lance_minhash_sql as lms

    if small != "-":
        _small_statements(small)
    con = lms.connect()
    base = rss_mb()
    runs = {}
    for run in ("first statement", "second statement"):
        c0, t0 = cpu_seconds(), time.perf_counter()
        rows = lance.dataset(left).to_table(columns=["text"], with_row_id=True)
        con.register("left_rows", rows)
        table = con.sql(f"SELECT l._rowid AS left_rowid, s._rowid AS right_rowid, 1 - s._distance AS similarity "
                        f"FROM left_rows l, LATERAL minhash_search_ids('{right}', 'text', l.text, "
                        f"threshold := {THRESHOLD}, k := NULL) s").to_arrow_table()
        runs[run] = {"seconds": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0, "pairs": table.num_rows,
                     "peak_rss_mb": peak_rss_mb()}
        con.unregister("left_rows")
    return {"runs": runs, "baseline_rss_mb": base}


def child_lance(left: str, right: str, sample: int, limit: int, out_path: str) -> dict:
    import lance
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from lance.query import MinHashQuery

    lt = lance.dataset(left).to_table(columns=["text"], with_row_id=True)
    rng = np.random.default_rng(7)
    picked = np.sort(rng.choice(lt.num_rows, min(sample, lt.num_rows), replace=False))
    part = lt.take(pa.array(picked))
    texts, ids = part.column("text").to_pylist(), part.column("_rowid").to_pylist()
    ds = lance.dataset(right)
    base = rss_mb()
    got_l, got_r = [], []
    c0, t0 = cpu_seconds(), time.perf_counter()
    for text, me in zip(texts, ids):
        if text is None:
            continue
        hits = ds.to_table(nearest=MinHashQuery(text, "text"), limit=limit, columns=["_distance"], with_row_id=True)
        dist = hits.column("_distance").to_numpy()
        keep = (np.float32(1) - dist).astype(np.float64) >= THRESHOLD
        r = hits.column("_rowid").to_numpy()[keep]
        got_l.extend([me] * r.size)
        got_r.extend(r.tolist())
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    pq.write_table(pa.table({"left_rowid": pa.array(got_l, pa.uint64()), "right_rowid": pa.array(got_r, pa.uint64()),
                             "sample": pa.array([True] * len(got_l))}), out_path)
    pq.write_table(pa.table({"left_rowid": pa.array(ids, pa.uint64())}), out_path + ".sample")
    return {"seconds": seconds, "cpu_s": cpu, "queries": len(texts), "pairs": len(got_l), "peak_rss_mb": peak_rss_mb(),
            "baseline_rss_mb": base, "limit": limit}


def run_child(*args: str) -> dict:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"child {args[0]} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- main


def ours_alone(left: str, right: str, args, load) -> None:
    """``--ours-only``: the estimate's and (``--exact``) the exact mode's children, kernels
    loaded by a small statement first, ``--repeat`` times alternated; each run's figures
    (the first statement, and the second with the right index cached) and the medians."""
    import statistics

    modes = ["estimate", "exact"] if args.exact else ["estimate"]
    runs: dict = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small.lance")
        run_child("warm", left, right, small)
        for r in range(args.repeat):
            for m in modes:
                got = run_child("ours", left, right, os.path.join(tmp, f"{m}.parquet"), small, m)
                runs[m].append(got)
                first, again = got["runs"]["first statement"], got["runs"]["second statement"]
                _log(f"run {r + 1} {m}: {first['seconds']:.2f} s / {first['cpu_s']:.2f} CPU s first, "
                     f"{again['seconds']:.2f} s / {again['cpu_s']:.2f} CPU s again, {again['pairs']:,} pairs, "
                     f"peak RSS {again['peak_rss_mb']:.0f} MB; load {os.getloadavg()[0]:.2f}")
    print(f"\n{args.left_rows:,} left rows x {args.right_rows:,} indexed right rows, threshold {THRESHOLD}, "
          f"kernels loaded; medians of {args.repeat}; load average {load[0]:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at the end on {os.cpu_count()} cores\n")
    print(f"  {'minhash_join':36s} {'seconds':>8s} {'CPU s':>7s} {'again s':>8s} {'again CPU':>9s} {'pairs':>9s} "
          f"{'peak RSS':>9s}")
    med = {}
    for m in modes:
        firsts = [g["runs"]["first statement"] for g in runs[m]]
        agains = [g["runs"]["second statement"] for g in runs[m]]
        med[m] = {
            "seconds": statistics.median(r["seconds"] for r in firsts),
            "cpu_s": statistics.median(r["cpu_s"] for r in firsts),
            "again_s": statistics.median(r["seconds"] for r in agains),
            "again_cpu": statistics.median(r["cpu_s"] for r in agains),
            "peak": statistics.median(r["peak_rss_mb"] for r in agains)}
        x = med[m]
        print(f"  {'verify := ' + repr(m):36s} {x['seconds']:8.2f} {x['cpu_s']:7.2f} {x['again_s']:8.2f} "
              f"{x['again_cpu']:9.2f} {agains[0]['pairs']:9,d} {x['peak']:7.0f}MB")
    if args.exact:
        e, o = med["exact"], med["estimate"]
        print(f"\n  exact / estimate: {e['seconds'] / o['seconds']:.2f}x wall, {e['cpu_s'] / o['cpu_s']:.2f}x CPU "
              f"(first statement); {e['again_s'] / o['again_s']:.2f}x wall, {e['again_cpu'] / o['again_cpu']:.2f}x "
              "CPU (again)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--left-rows", type=int, default=100_000)
    ap.add_argument("--right-rows", type=int, default=1_000_000)
    ap.add_argument("--lance-sample", type=int, default=3_000, help="left rows queried one by one in Lance")
    ap.add_argument("--data-dir", default="/work/bench-data")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--exact", action="store_true",
                    help="also time minhash_join(..., verify := 'exact') beside the estimate, in its own processes")
    ap.add_argument("--ours-only", action="store_true", help="only minhash_join: no LATERAL or Lance peer")
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --ours-only: run the estimate and exact children this many times, alternated, "
                         "and print each run and the medians")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        what, rest = args.child[0], args.child[1:]
        fn = {"warm": _warm, "ours": child_ours, "lateral": child_lateral, "lance": child_lance}[what]
        conv = [int(x) if x.isdigit() else x for x in rest]
        out = fn(*conv)
        print(json.dumps(out if out is not None else {}))
        return

    import numpy as np
    import pyarrow.parquet as pq

    left, right = datasets(args.data_dir, args.left_rows, args.right_rows)
    load = os.getloadavg()
    _log(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")
    if args.ours_only:
        ours_alone(left, right, args, load)
        return
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small.lance")
        run_child("warm", left, right, small)
        ours_pairs, lance_pairs = os.path.join(tmp, "ours.parquet"), os.path.join(tmp, "lance.parquet")
        _log("ours ...")
        ours = run_child("ours", left, right, ours_pairs, "-")
        ours_k = run_child("ours", left, right, os.path.join(tmp, "ours2.parquet"), small)
        exact = exact_k = None
        if args.exact:
            _log("ours, verify := 'exact' ...")
            exact = run_child("ours", left, right, os.path.join(tmp, "exact.parquet"), "-", "exact")
            exact_k = run_child("ours", left, right, os.path.join(tmp, "exact2.parquet"), small, "exact")
        limit = max(10, 2 * ours["max_per_left"])
        _log("LATERAL ...")
        lateral = run_child("lateral", left, right, "-")
        lateral_k = run_child("lateral", left, right, small)
        _log(f"Lance, {args.lance_sample:,} queries with limit {limit} ...")
        lance_r = run_child("lance", left, right, str(args.lance_sample), str(limit), lance_pairs)
        # the same answer: counts, and Lance's pairs on its sample equal ours on it
        o = pq.read_table(ours_pairs)
        sample = pq.read_table(lance_pairs + ".sample").column("left_rowid").to_numpy()
        mine = o.filter(np.isin(o.column("left_rowid").to_numpy(), sample))
        theirs = pq.read_table(lance_pairs)
        same_sample = sorted(zip(*(mine.column(c).to_pylist() for c in ("left_rowid", "right_rowid")))) == \
            sorted(zip(*(theirs.column(c).to_pylist() for c in ("left_rowid", "right_rowid"))))
    n_left = args.left_rows
    scale = n_left / lance_r["queries"]
    lance_s = lance_r["seconds"] * scale
    o1, o2 = ours["runs"]["first statement"], ours["runs"]["second statement"]
    ok = ours_k["runs"]["first statement"]
    l1, l2 = lateral["runs"]["first statement"], lateral["runs"]["second statement"]
    lk = lateral_k["runs"]["first statement"]
    counts = {o1["pairs"], o2["pairs"], ok["pairs"], l1["pairs"], l2["pairs"], lk["pairs"]}
    same_count = len(counts) == 1
    print(f"\n{n_left:,} left rows x {args.right_rows:,} indexed right rows, threshold {THRESHOLD}; "
          f"load average {load[0]:.2f} at start on {os.cpu_count()} cores\n")
    print(f"  {'peer':60s} {'seconds':>8s} {'CPU s':>7s} {'pairs':>9s} {'pairs/s':>9s} {'peak RSS':>9s} "
          f"{'baseline':>9s}")

    def row(name, r, base, seconds=None, cpu=None, pairs=None):
        seconds = r["seconds"] if seconds is None else seconds
        cpu = r["cpu_s"] if cpu is None else cpu
        pairs = r["pairs"] if pairs is None else pairs
        print(f"  {name:60s} {seconds:8.2f} {cpu:7.2f} {pairs:9,d} {pairs / seconds:9,.0f} "
              f"{r['peak_rss_mb']:7.0f}MB {base:7.0f}MB")

    row("ours: minhash_join, new process (loads kernels)", o1, ours["baseline_rss_mb"])
    row("ours: minhash_join, kernels loaded, datasets not cached", ok, ours_k["baseline_rss_mb"])
    row("ours: minhash_join, again (right index cached)", o2, ours["baseline_rss_mb"])
    if exact is not None:
        row("ours: verify := 'exact', new process (loads kernels)", exact["runs"]["first statement"],
            exact["baseline_rss_mb"])
        row("ours: verify := 'exact', kernels loaded, datasets not cached", exact_k["runs"]["first statement"],
            exact_k["baseline_rss_mb"])
        row("ours: verify := 'exact', again (right index cached)", exact["runs"]["second statement"],
            exact["baseline_rss_mb"])
    row("LATERAL minhash_search_ids, new process", l1, lateral["baseline_rss_mb"])
    row("LATERAL minhash_search_ids, kernels loaded, not cached", lk, lateral_k["baseline_rss_mb"])
    row("LATERAL minhash_search_ids, again (index cached)", l2, lateral["baseline_rss_mb"])
    est_pairs = round(lance_r["pairs"] * scale)
    lance_cpu = lance_r["cpu_s"] * scale
    row(f"Lance MinHashQuery per row (limit {limit}), extrapolated", lance_r, lance_r["baseline_rss_mb"],
        seconds=lance_s, cpu=lance_cpu, pairs=est_pairs)
    print(f"\n  Lance: {lance_r['queries']:,}-row sample, {1e3 * lance_r['seconds'] / lance_r['queries']:.2f} ms/query, "
          f"time and pairs extrapolated x{scale:.1f} to {n_left:,} rows")
    print(f"  same pairs: all statements {'agree' if same_count else 'DISAGREE'} on the count; Lance's pairs on its "
          f"sample {'equal' if same_sample else 'DIFFER FROM'} ours on it")
    for what, key, lance_v in (("wall time", "seconds", lance_s), ("CPU time", "cpu_s", lance_cpu)):
        print(f"  by {what}: ours vs Lance per row {lance_v / o1[key]:.1f}x (new process), "
              f"{lance_v / ok[key]:.1f}x (kernels loaded), {lance_v / o2[key]:.1f}x (index cached) [target >= 50x]; "
              f"ours vs LATERAL {l1[key] / o1[key]:.2f}x, {lk[key] / ok[key]:.2f}x, {l2[key] / o2[key]:.2f}x "
              "[target >= 2x]")
    if exact is not None:
        e2 = exact["runs"]["second statement"]
        print(f"  verify := 'exact' / estimate, index cached: {e2['seconds'] / o2['seconds']:.2f}x wall, "
              f"{e2['cpu_s'] / o2['cpu_s']:.2f}x CPU; {e2['pairs']:,} exact pairs of {o2['pairs']:,}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ours": ours, "ours_kernels_loaded": ours_k, "lateral": lateral,
                       "lateral_kernels_loaded": lateral_k, "lance": lance_r, "exact": exact,
                       "exact_kernels_loaded": exact_k, "load": load, "scale": scale}, f, indent=1)
    if not (same_count and same_sample):
        raise SystemExit("the peers disagree")


if __name__ == "__main__":
    main()
