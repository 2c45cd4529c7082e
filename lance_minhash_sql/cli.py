"""The ``lance-minhash`` command line.

Examples::

    lance-minhash build corpus.lance text    # Lance's MINHASHLSH index, written by our engine
    lance-minhash search corpus.lance text "some text" -k 5
    lance-minhash report corpus.lance text --out report/   # S-curve, buckets, error; PNG plots
    lance-minhash demo                       # synthetic corpus + SQL over it, in ./demo
    lance-minhash bench --rows 1000000       # ours vs Lance native, datasketch, rensa
    lance-minhash sql "SELECT minhash_similarity(minhash_signature('a b c'), minhash_signature('a b c d'))"
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from .errors import LanceMinHashError

__all__ = ["main"]

DEMO_QUERIES = [
    ("The corpus: rows, near-duplicates by edit kind",
     """SELECT edit, count(*) AS rows, round(avg(replaced_fraction), 3) AS avg_replaced
        FROM corpus GROUP BY edit ORDER BY rows DESC"""),
    ("A MinHash signature is a USMALLINT[] of num_hashes values (first 6 shown)",
     """SELECT id, left(text, 48) AS text, minhash_signature(text)[1:6] AS signature_head
        FROM corpus ORDER BY id LIMIT 3"""),
    ("Near-duplicates against their sources: estimated vs exact shingle Jaccard",
     """SELECT d.id, d.source_id, d.edit,
               round(minhash_similarity(minhash_signature(d.text), minhash_signature(s.text)), 3) AS estimated,
               round(shingle_jaccard(d.text, s.text), 3) AS exact
        FROM corpus d JOIN corpus s ON s.id = d.source_id
        WHERE d.edit <> 'original' ORDER BY d.id LIMIT 8"""),
    ("Estimator error over all near-duplicate pairs (k = 128)",
     """WITH p AS (
          SELECT minhash_similarity(minhash_signature(d.text), minhash_signature(s.text)) AS est,
                 shingle_jaccard(d.text, s.text) AS exact
          FROM corpus d JOIN corpus s ON s.id = d.source_id WHERE d.edit <> 'original')
        SELECT count(*) AS pairs, round(avg(abs(est - exact)), 4) AS mean_abs_error,
               round(quantile_cont(abs(est - exact), 0.95), 4) AS p95_abs_error FROM p"""),
    ("The LSH S-curve for 16 bands of 8 rows: probability a pair becomes a candidate",
     """SELECT s AS similarity, round(lsh_probability(s, 16, 8), 4) AS candidate_probability
        FROM (SELECT unnest([0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]::DOUBLE[]) AS s)"""),
]


INDEX_QUERIES = [
    ("Build Lance's MinHash LSH index on the text column (our engine, Lance's format)",
     """SELECT index_name, num_hashes, num_bands, rows_per_band, rows_indexed, round(seconds, 2) AS seconds,
               bytes FROM minhash_build({uri}, 'text')"""),
    ("The index as the dataset manifest records it",
     "SELECT segment_uuid, fragment_ids, \"rows\", bytes FROM minhash_indexes({uri})"),
    ("Top-5 near-duplicates of document 14 (an edited copy of document 0), with the dataset's own columns",
     """SELECT id, source_id, edit, left(text, 40) AS text, _distance
        FROM minhash_search({uri}, 'text', {query}, 5)"""),
    ("Batch search: the best match of 5 documents, one LATERAL statement",
     """SELECT q.id AS query_id, s._rowid, round(1 - s._distance, 3) AS similarity
        FROM (SELECT id, text FROM corpus WHERE id IN (7, 14, 20, 23, 32)) q,
             LATERAL minhash_search_ids({uri}, 'text', q.text, 2) s
        WHERE s._rowid <> q.id ORDER BY q.id, s._distance"""),
]


def _print_result(con, title: str, sql: str, out) -> None:
    out(f"\n-- {title}")
    out(con.sql(sql).__str__().rstrip())


def cmd_demo(args) -> int:
    from . import connect
    from .corpus import write_corpus
    from .io.scan import open_dataset

    os.makedirs(args.dir, exist_ok=True)
    uri = os.path.join(args.dir, "corpus.lance")
    t0 = time.perf_counter()
    mode = "overwrite" if os.path.exists(uri) else "create"
    write_corpus(uri, args.rows, mode=mode, with_truth=True, progress=not args.quiet)
    print(f"wrote {args.rows:,} synthetic rows to {uri} in {time.perf_counter() - t0:.1f}s")
    con = connect()
    con.register("corpus", open_dataset(uri))
    for title, sql in DEMO_QUERIES:
        _print_result(con, title, sql, print)
    def literal(s: str) -> str:
        return "'" + s.replace("'", "''") + "'"

    (query,) = con.sql("SELECT text FROM corpus WHERE id = 14").fetchall()[0]
    for title, sql in INDEX_QUERIES:
        _print_result(con, title, sql.replace("{uri}", literal(uri)).replace("{query}", literal(query)), print)
    return 0


def cmd_bench(args) -> int:
    from .bench import PEERS, run_bench

    peers = tuple(p.strip() for p in args.peers.split(",")) if args.peers else PEERS
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise LanceMinHashError(f"--peers {unknown} unknown; choose from {','.join(PEERS)}")
    run_bench(rows=args.rows, data_dir=args.data, peers=peers, sample_rows=args.sample_rows,
              json_path=args.json)
    return 0


def cmd_sql(args) -> int:
    from . import connect

    if args.query == "-" or args.query is None:
        text = sys.stdin.read()
    elif os.path.isfile(args.query):
        with open(args.query) as fh:
            text = fh.read()
    else:
        text = args.query
    con = connect()
    result = con.sql(text)
    if result is not None:
        print(str(result).rstrip())
    return 0


def cmd_build(args) -> int:
    from .index.build import build_index

    tokenizer = args.tokenizer
    r = build_index(args.dataset, args.column, num_hashes=args.num_hashes, num_bands=args.num_bands,
                    shingle_size=args.shingle_size, threshold=args.threshold, tokenizer=tokenizer,
                    replace=not args.no_replace, memory_limit=args.memory_limit, progress=not args.quiet)
    print(f"built {r.index_name} on {r.column}: {r.rows_indexed:,} rows indexed "
          f"({r.rows_without_tokens:,} without tokens), k={r.num_hashes}, b={r.num_bands}, r={r.rows_per_band}, "
          f"shingle_size={r.shingle_size}; {r.segments} segment(s), {r.bytes / 2**20:.1f} MiB, "
          f"{r.seconds:.2f}s, dataset version {r.dataset_version}")
    return 0


def cmd_search(args) -> int:
    from .index.search import search

    table = search(args.dataset, args.column, args.query, args.k, fast_search=args.fast_search,
                   filter=args.filter, columns=args.columns.split(",") if args.columns else None)
    import duckdb

    print(str(duckdb.from_arrow(table)).rstrip())
    return 0


def cmd_report(args) -> int:
    from .index.report import report

    rep = report(args.dataset, args.column, sample=args.sample, threshold=args.threshold, seed=args.seed,
                 top_buckets=args.top, progress=not args.quiet)
    print(rep.format())
    if args.out is not None:
        from .plots import save_plots

        for name, path in save_plots(rep, args.out).items():
            print(f"wrote {name} plot to {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lance-minhash",
        description="Near-duplicate detection for text in Lance datasets, in SQL.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("Examples::", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="generate a synthetic corpus and run SQL over it")
    p.add_argument("--rows", type=int, default=20_000, help="rows of the synthetic corpus (default 20000)")
    p.add_argument("--dir", default="demo", help="folder for the demo dataset (default ./demo)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("bench", help="benchmark against Lance native and other peers, side by side")
    p.add_argument("--rows", type=int, default=1_000_000, help="corpus rows (default 1000000)")
    p.add_argument("--data", default="bench-data", help="folder for benchmark corpora (reused)")
    p.add_argument("--peers", default=None, help="comma-separated subset of ours,lance,datasketch,rensa")
    p.add_argument("--sample-rows", type=int, default=20_000, help="rows for the slow Python peers")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("build", help="build Lance's MinHash LSH index on a text column")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the text column")
    p.add_argument("--num-hashes", type=int, default=128)
    p.add_argument("--num-bands", type=int, default=None, help="default 16, or chosen by --threshold")
    p.add_argument("--shingle-size", type=int, default=3)
    p.add_argument("--threshold", type=float, default=None, help="choose num_bands for this similarity")
    p.add_argument("--tokenizer", default=None, help='JSON tokenizer options, e.g. \'{"base_tokenizer": "whitespace"}\'')
    p.add_argument("--memory-limit", type=int, default=None, help="sort budget in bytes (default 2 GiB)")
    p.add_argument("--no-replace", action="store_true", help="fail if the column already has an index")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("search", help="top-k most similar rows of a text")
    p.add_argument("dataset")
    p.add_argument("column")
    p.add_argument("query", help="the text to look up")
    p.add_argument("-k", type=int, default=10, help="rows to return (default 10)")
    p.add_argument("--columns", default=None, help="comma-separated columns to show (default all)")
    p.add_argument("--filter", default=None, help="Lance filter applied before the top-k, e.g. \"lang = 'en'\"")
    p.add_argument("--fast-search", action="store_true", help="indexed rows only (skip unindexed fragments)")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("report", help="diagnostics of an index: S-curve vs sampled pairs, buckets, error")
    p.add_argument("dataset")
    p.add_argument("column")
    p.add_argument("--out", default=None, help="folder for scurve.png, buckets.png, estimator.png (needs matplotlib)")
    p.add_argument("--sample", type=int, default=2000, help="query rows, and most pairs kept per bin (default 2000)")
    p.add_argument("--threshold", type=float, default=None, help="similarity for fp/fn areas and recall "
                   "(default: the S-curve threshold)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sample (default 0)")
    p.add_argument("--top", type=int, default=10, help="largest buckets to list (default 10)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("sql", help="run SQL with every function installed (argument, file or - for stdin)")
    p.add_argument("query", nargs="?", default="-")
    p.set_defaults(func=cmd_sql)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except LanceMinHashError as exc:
        print(f"lance-minhash: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        import duckdb

        if isinstance(exc, duckdb.Error):  # SQL errors, including ours raised inside UDFs
            print(f"lance-minhash: error: {exc}", file=sys.stderr)
            return 2
        raise
    except KeyboardInterrupt:
        print("lance-minhash: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
