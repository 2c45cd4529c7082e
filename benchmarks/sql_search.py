"""Search through SQL, side by side with Lance's native Python query.

    python benchmarks/sql_search.py --rows 1000000

Uses the dataset of ``benchmarks/search.py`` (``bench-data/search-<rows>.lance``, a
Lance-built index; run that script first to create it). In one process:

* single query, warm (Lance reusing one dataset object, ours after ``prewarm``): Lance ``ds.to_table(nearest=MinHashQuery(q, "text"), limit=10,
  columns=["id", "text"])`` against SQL ``SELECT * FROM minhash_search(uri, 'text', q, 10)``
  (every column of the dataset: ``id``, ``text``), p50 / p95 over the queries;
* the same for row ids only: Lance ``columns=["_distance"], with_row_id=True`` against
  ``minhash_search_ids``;
* batch: ``--batch`` queries through one ``LATERAL minhash_search_ids`` statement against
  the same queries through Lance one by one.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def pct(ts):
    a = np.array(ts) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--data-dir", default="bench-data")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()

    import lance
    from lance.query import MinHashQuery

    import lance_minhash_sql as lms

    uri = os.path.join(args.data_dir, f"search-{args.rows}.lance")
    if not os.path.exists(uri):
        raise SystemExit(f"{uri} is missing: run python benchmarks/search.py --rows {args.rows} first")
    ds = lance.dataset(uri)
    rng = np.random.default_rng(11)
    ids = rng.choice(ds.count_rows(), size=max(args.queries, args.batch), replace=False)
    texts = ds.take(sorted(int(i) for i in ids), columns=["text"]).column("text").to_pylist()
    queries = texts[: args.queries]
    con = lms.connect()
    u = lit(uri)
    from lance_minhash_sql.index.opened import open_index

    open_index(uri, "text").prewarm()  # warm, as Lance's dataset object is: segments in the process cache

    def run(fn, qs, rounds=2):
        for q in qs[:20]:
            fn(q)
        ts = []
        for _ in range(rounds):
            for q in qs:
                t0 = time.perf_counter()
                fn(q)
                ts.append(time.perf_counter() - t0)
        return pct(ts)

    rows = []
    lance_cols = run(lambda q: ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, columns=["id", "text"]), queries)
    sql_cols = run(lambda q: con.execute(f"SELECT * FROM minhash_search({u}, 'text', {lit(q)}, 10)").fetchall(),
                   queries)
    rows.append(("single query, id + text columns", lance_cols, sql_cols))
    lance_ids = run(lambda q: ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, columns=["_distance"],
                                          with_row_id=True), queries)
    sql_ids = run(lambda q: con.execute(f"SELECT * FROM minhash_search_ids({u}, 'text', {lit(q)}, 10)").fetchall(),
                  queries)
    rows.append(("single query, row ids only", lance_ids, sql_ids))

    batch = texts[: args.batch]
    con.execute("CREATE OR REPLACE TEMP TABLE queries AS SELECT * FROM (SELECT unnest(?::VARCHAR[]) AS q)", [batch])
    t0 = time.perf_counter()
    for q in batch:
        ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, columns=["_distance"], with_row_id=True)
    lance_s = time.perf_counter() - t0
    sql = f"SELECT s.* FROM queries, LATERAL minhash_search_ids({u}, 'text', q, 10) s"
    con.execute(sql).fetchall()
    t0 = time.perf_counter()
    n = len(con.execute(sql).fetchall())
    sql_s = time.perf_counter() - t0

    print(f"SQL search vs Lance native, {args.rows:,} rows, top-10, warm")
    print(f"  {'what':34s} {'Lance p50':>10s} {'p95':>8s} {'SQL p50':>9s} {'p95':>8s} {'Lance/SQL p50':>14s}")
    for name, a, b in rows:
        print(f"  {name:34s} {a[0]:8.2f}ms {a[1]:6.2f}ms {b[0]:7.2f}ms {b[1]:6.2f}ms {a[0] / b[0]:13.2f}x")
    print(f"  batch of {len(batch):,}: Lance one by one {lance_s:.2f} s ({lance_s / len(batch) * 1000:.3f} ms/query); "
          f"one LATERAL statement {sql_s:.3f} s ({sql_s / len(batch) * 1000:.3f} ms/query, {n:,} rows): "
          f"{lance_s / sql_s:.1f}x per query")


if __name__ == "__main__":
    main()
