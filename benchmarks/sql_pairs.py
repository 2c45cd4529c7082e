"""The self-join through SQL, side by side with the Python engine.

    python benchmarks/sql_pairs.py --rows 1000000

Uses the dataset of ``benchmarks/pairs.py`` (``bench-data/pairs-<rows>.lance``, written
and indexed if missing). Each measurement runs in its own child process (its own peak
RSS, ``ru_maxrss``) after the kernels are loaded on a tiny dataset ("baseline" RSS); each
is run twice in the child, cold then warm (segments cached):

* ``python``: ``sum(b.num_rows for b in pairs(uri, 'text', 0.8))`` (worker threads over
  the shards);
* ``sql-count``: ``SELECT count(*) FROM minhash_pairs(uri, 'text')`` (shards as UDF calls
  on DuckDB's threads; nothing is kept but the count, so memory shows the streaming);
* ``sql-parquet``: ``COPY (SELECT * FROM minhash_pairs(...)) TO 'pairs.parquet'``;
* ``sql-dedup``: ``SELECT count(*) FILTER (WHERE NOT keep) FROM minhash_dedup(uri, 'text')``
  against the Python ``keep_flags``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from pairs import THRESHOLD, corpus_dataset, warm_kernels  # noqa: E402

from lance_minhash_sql.core.usage import cpu_seconds, peak_rss_mb  # noqa: E402

MODES = ("python", "sql-count", "sql-parquet", "python-dedup", "sql-dedup")


def child(what: str, uri: str, threads: int) -> dict:
    import lance_minhash_sql as lms
    from lance_minhash_sql.selfjoin.dedup import keep_flags
    from lance_minhash_sql.selfjoin.pairs import pairs

    warm_kernels()
    con = lms.connect(threads=threads)
    out: dict = {"what": what, "baseline_rss_mb": peak_rss_mb()}
    u = "'" + uri.replace("'", "''") + "'"
    with tempfile.TemporaryDirectory() as tmp:
        for run in ("cold", "warm"):
            c0, t0 = cpu_seconds(), time.perf_counter()
            if what == "python":
                n = sum(b.num_rows for b in pairs(uri, "text", THRESHOLD))
            elif what == "sql-count":
                n = con.sql(f"SELECT count(*) FROM minhash_pairs({u}, 'text', {THRESHOLD})").fetchall()[0][0]
            elif what == "sql-parquet":
                path = os.path.join(tmp, f"{run}.parquet")
                con.execute(f"COPY (SELECT * FROM minhash_pairs({u}, 'text', {THRESHOLD})) TO '{path}'")
                n = con.sql(f"SELECT count(*) FROM '{path}'").fetchall()[0][0]
            elif what == "python-dedup":
                t = keep_flags(uri, "text", THRESHOLD)
                n = t.num_rows - int(t.column("keep").to_numpy(zero_copy_only=False).sum())
            else:
                n = con.sql(f"SELECT count(*) FILTER (WHERE NOT keep) FROM minhash_dedup({u}, 'text', "
                            f"{THRESHOLD})").fetchall()[0][0]
            seconds = time.perf_counter() - t0
            out[run] = {"seconds": seconds, "cpu_s": cpu_seconds() - c0, "result": int(n), "per_s": n / seconds,
                        "peak_rss_mb": peak_rss_mb()}
    return out


def run_child(what: str, uri: str, threads: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", what, "--uri", uri, "--threads", str(threads)]
    try:  # the child's stderr goes straight to ours
        return json.loads(subprocess.check_output(cmd, text=True).strip().splitlines()[-1])
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"{what} failed with exit code {exc.returncode} (its errors are above)") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(HERE), "bench-data"))
    ap.add_argument("--uri", default=None, help="an indexed dataset to use instead of the benchmark corpus")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="DuckDB threads")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.uri, args.threads)))
        return
    uri = args.uri or corpus_dataset(args.rows, args.data_dir)
    load = os.getloadavg()
    results = {m: run_child(m, uri, args.threads) for m in args.modes.split(",")}
    print(f"self-join through SQL at threshold {THRESHOLD}: {uri}, {os.cpu_count()} CPUs, "
          f"{args.threads} DuckDB threads, load average {load[0]:.1f} at the start")
    print(f"  {'what':13s} {'run':5s} {'seconds':>8s} {'cpu s':>7s} {'result':>26s} {'peak RSS':>9s} {'baseline':>9s}")
    for key, r in results.items():
        for run in ("cold", "warm"):
            m = r[run]
            res = f"{m['result']:,} = {m['per_s'] / 1e6:.2f}M/s"
            print(f"  {key:13s} {run:5s} {m['seconds']:8.2f} {m['cpu_s']:7.2f} {res:>26s} "
                  f"{m['peak_rss_mb']:7.0f}MB {r['baseline_rss_mb']:7.0f}MB")


if __name__ == "__main__":
    main()
