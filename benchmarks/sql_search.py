"""Search through SQL and Python, side by side with Lance's native query.

    python benchmarks/sql_search.py --rows 1000000 --data-dir /path/to/bench-data

Uses the dataset of ``benchmarks/search.py`` (``<data-dir>/search-<rows>.lance``: the
synthetic corpus of ``lance_minhash_sql.faces.corpus`` with a Lance-built ``MINHASHLSH`` index;
run that script first to create it).

Table 1, as a user meets it (DESIGN.md's protocol): one DuckDB connection from
``lms.connect()``; the dataset passed as a URI in every statement; the query bound as a
``?`` parameter; ``--queries`` distinct queries, each the first three quarters of the
words of a random corpus row; ``--warmup`` warm-up queries (other rows); no prewarm.
Per query, in rotating order:

* Lance: ``ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, columns=["id", "text"])``
  on one dataset object;
* Python ``search(uri, "text", q, 10)`` (all user columns: ``id``, ``text``);
* SQL ``SELECT * FROM minhash_search(uri, 'text', ?, 10)``;
* SQL ``SELECT * FROM minhash_search_ids(uri, 'text', ?, 10)``.

Then the cost of each component of the SQL statement, measured in the same run on the same
queries: DuckDB's fixed per-statement cost (``SELECT ?`` with a bound string), its floors for
a statement calling an Arrow UDF (an identity UDF) and for ``query()`` of the SQL text a
native UDF returns (one constant row), the plan function's Python alone, the check of the
dataset's latest version, the query's signing (the numba signer), the index
search alone (``topk``, signing included), the row fetch alone (the search's, and Lance's dataset take of the
same rows beside it), the plan call (``_lms_search_plan``: the
search, the fetch and the result's SQL text), that result SQL run alone (a ``VALUES``
list and casts), and the rest (``query()`` around them).

Table 2, labelled best case: our index prewarmed, each query repeated (``--rounds``),
against Lance with the same warm dataset object.

Batch: ``--batch`` queries in one ``LATERAL minhash_search_ids`` statement against the same
queries through Lance one by one (row ids only).

Ratios are Lance p50 / ours p50 (above 1: ours is faster).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


def pct(ts):
    a = np.array(ts) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def make_queries(ds, n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(ds.count_rows(), size=n, replace=False))
    out = []
    for t in ds.take(ids.tolist(), columns=["text"]).column("text").to_pylist():
        words = (t or "").split()
        out.append(" ".join(words[: max(1, (3 * len(words)) // 4)]))
    rng.shuffle(out)
    return out


def timed(fn, q) -> float:
    t0 = time.perf_counter()
    fn(q)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--data-dir", default="bench-data")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2, help="repeats of each query in the prewarmed table")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()
    from lance_minhash_sql.core.errors import EmptySearchWarning

    warnings.simplefilter("ignore", EmptySearchWarning)  # a few distinct queries share no band: expected

    import lance
    from lance.query import MinHashQuery

    import lance_minhash_sql as lms
    from lance_minhash_sql.kernels.config import numba_loaded
    from lance_minhash_sql.query.topk import search

    uri = os.path.join(args.data_dir, f"search-{args.rows}.lance")
    if not os.path.exists(uri):
        raise SystemExit(f"{uri} is missing: run python benchmarks/search.py --rows {args.rows} first")
    ds = lance.dataset(uri)
    qs = make_queries(ds, args.queries + args.warmup, args.seed)
    warm, queries = qs[: args.warmup], qs[args.warmup:]
    con = lms.connect()
    u = "'" + uri.replace("'", "''") + "'"

    peers = {
        "Lance to_table(nearest=MinHashQuery)": lambda q: ds.to_table(
            nearest=MinHashQuery(q, "text"), limit=10, columns=["id", "text"]),
        "Python search() by URI": lambda q: search(uri, "text", q, 10),
        "SQL minhash_search": lambda q: con.execute(
            f"SELECT * FROM minhash_search({u}, 'text', ?, 10)", [q]).fetchall(),
        "SQL minhash_search_ids": lambda q: con.execute(
            f"SELECT * FROM minhash_search_ids({u}, 'text', ?, 10)", [q]).fetchall(),
    }
    names = list(peers)
    for q in warm:
        for name in names:
            peers[name](q)
    times = {name: [] for name in names}
    numba_from = None  # the first query after which numba is loaded (query/engine.py: the engine policy)
    for i, q in enumerate(queries):  # rotate the order so no peer always runs first on a query
        for j in range(len(names)):
            name = names[(i + j) % len(names)]
            times[name].append(timed(peers[name], q))
        if numba_from is None and numba_loaded():
            numba_from = i

    # the components of one SQL minhash_search statement, on the same queries
    import pyarrow as pa

    from lance_minhash_sql.duck.tables import search_plan
    from lance_minhash_sql.index.info import search_target
    from lance_minhash_sql.query.query_sign import sign_texts
    from lance_minhash_sql.index.opened import open_index
    from lance_minhash_sql.lifecycle.prewarm import warm as prewarm_index
    from lance_minhash_sql.query.engine import topk

    opened = open_index(uri, "text")
    cols = [c for c in ds.schema.names]
    hits = [topk(opened, pa.array([q], pa.large_string()), 10)[1] for q in queries]
    texts = [search_plan(uri, "text", q, 10, None, False, "estimate", False, None, None, None) for q in queries]
    # DuckDB's floors: an Arrow UDF's call, and query() of the SQL text a native UDF returns
    con.create_function("_bench_arrow_identity", lambda s: s, ["VARCHAR"], "VARCHAR", type="arrow",
                        side_effects=True)
    con.create_function("_bench_one_row_sql", lambda s: "SELECT 1::BIGINT AS id", ["VARCHAR"], "VARCHAR")
    parts = {
        "DuckDB statement alone: SELECT ?": lambda i, q: con.execute("SELECT ?", [q]).fetchall(),
        "DuckDB floor: an Arrow UDF, SELECT f(?)": lambda i, q: con.execute(
            "SELECT _bench_arrow_identity(?)", [q]).fetchall(),
        "DuckDB floor: query() of a UDF's SQL": lambda i, q: con.execute(
            "SELECT * FROM query(_bench_one_row_sql(?))", [q]).fetchall(),
        "plan call's Python alone (search_plan)": lambda i, q: search_plan(
            uri, "text", q, 10, None, False, "estimate", False, None, None, None),
        "dataset's latest version (search_target)": lambda i, q: search_target(uri, "text"),
        "query signing alone (sign_texts)": lambda i, q: sign_texts(opened.signer, pa.array([q], pa.large_string()),
                                                                    None),
        "index search alone (topk)": lambda i, q: topk(opened, pa.array([q], pa.large_string()), 10),
        "row fetch alone (the search's take)": lambda i, q: opened.fetcher.take(hits[i], cols, "the benchmark"),
        "row fetch by Lance's dataset take": lambda i, q: opened.ds._take_rows(pa.array(hits[i], pa.uint64()), cols),
        "plan call: SELECT _lms_search_plan(..)": lambda i, q: con.execute(
            f"SELECT _lms_search_plan({u}, 'text', ?, 10, NULL, false, 'estimate', false, NULL, NULL, NULL)",
            [q]).fetchall(),
        "its result SQL run alone (VALUES)": lambda i, q: con.execute(texts[i]).fetchall(),
    }
    part_times = {name: [] for name in parts}
    for i, q in enumerate(queries):
        for name, fn in parts.items():
            t0 = time.perf_counter()
            fn(i, q)
            part_times[name].append(time.perf_counter() - t0)

    # table 2: prewarmed, repeated queries
    prewarm_index(open_index(uri, "text"))
    best = {name: [] for name in names}
    for _ in range(args.rounds):
        for i, q in enumerate(queries):
            for j in range(len(names)):
                name = names[(i + j) % len(names)]
                best[name].append(timed(peers[name], q))

    batch = make_queries(ds, args.batch, args.seed + 1)
    con.execute("CREATE OR REPLACE TEMP TABLE queries AS SELECT unnest(?::VARCHAR[]) AS q", [batch])
    t0 = time.perf_counter()
    for q in batch:
        ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, columns=["_distance"], with_row_id=True)
    lance_batch = time.perf_counter() - t0
    lateral = f"SELECT s.* FROM queries, LATERAL minhash_search_ids({u}, 'text', q, 10) s"
    con.execute(lateral).fetchall()
    t0 = time.perf_counter()
    hits = len(con.execute(lateral).fetchall())
    sql_batch = time.perf_counter() - t0

    load = os.getloadavg()
    lance_name = names[0]
    for title, table in ((f"As a user meets it: {len(queries)} distinct queries, URI per statement, bound ?, "
                          f"{args.warmup} warm-up, no prewarm", times),
                         (f"Best case (labelled): our index prewarmed, each query {args.rounds + 1}x "
                          f"(incl. table 1)", best)):
        print(f"\n{title}  [{args.rows:,} rows, top-10, load {load[0]:.2f}]")
        lp50, lp95 = pct(table[lance_name])
        print(f"  {'what':40s} {'p50':>8s} {'p95':>8s} {'Lance/this p50':>15s}")
        for name in names:
            p50, p95 = pct(table[name])
            print(f"  {name:40s} {p50:6.2f}ms {p95:6.2f}ms {lp50 / p50:14.2f}x")
    print(f"\nTable 1's engines: numpy until numba was loaded after query "
          f"{numba_from if numba_from is not None else len(queries)} of {len(queries)} (the ski rental of "
          "query/engine.py), then the kernels")
    print("\nComponents of one SQL minhash_search (same queries, same run, after table 1)")
    for name in parts:
        p50, p95 = pct(part_times[name])
        print(f"  {name:40s} {p50:6.2f}ms {p95:6.2f}ms")
    sql_p50 = pct(times["SQL minhash_search"])[0]
    plan_p50 = pct(part_times["plan call: SELECT _lms_search_plan(..)"])[0]
    values_p50 = pct(part_times["its result SQL run alone (VALUES)"])[0]
    print(f"  {'rest: query() around them':40s} {sql_p50 - plan_p50 - values_p50:6.2f}ms  "
          f"(SQL p50 {sql_p50:.2f} ms minus the plan call and its result SQL)")
    print(f"\nBatch of {len(batch):,}: Lance one by one {lance_batch / len(batch) * 1000:.3f} ms/query; one LATERAL "
          f"minhash_search_ids statement {sql_batch / len(batch) * 1000:.3f} ms/query ({hits:,} rows): "
          f"{lance_batch / sql_batch:.1f}x")


if __name__ == "__main__":
    main()
