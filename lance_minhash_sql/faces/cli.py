r"""The ``lance-minhash`` command line.

Examples::

    lance-minhash build corpus.lance text    # Lance's MINHASHLSH index, written by our engine
    lance-minhash search corpus.lance text "some text" -k 5
    lance-minhash pairs corpus.lance text --threshold 0.8 --output pairs.parquet
    lance-minhash join eval.lance corpus.lance text --threshold 0.8 --output contaminated.parquet
    lance-minhash dedup corpus.lance text --keep longest --output deduped.lance   # dry run without --output
    lance-minhash optimize corpus.lance text --merge all   # index appended rows, merge segments
    lance-minhash report corpus.lance text --out report/   # S-curve, buckets, error; PNG plots
    lance-minhash review corpus.lance text --out review.html   # a page to review what dedup drops
    lance-minhash demo                       # synthetic corpus + SQL over it, in ./demo
    lance-minhash bench --rows 1000000       # ours vs Lance native, datasketch, rensa
    lance-minhash warmup                     # compile every numba kernel into the cache, once
    lance-minhash sql "SELECT minhash_similarity(minhash_signature('a b c'), minhash_signature('a b c d'))"
    lance-minhash build s3://bucket/corpus.lance text --storage-option aws_region=us-east-1 \
        --storage-option aws_access_key_id=... --storage-option aws_secret_access_key=...
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

from lance_minhash_sql.core.advice import in_cli as cli_advice
from lance_minhash_sql.core.checks import CLUSTERINGS, VERIFY_MODES
from lance_minhash_sql.core.errors import InvalidParameterError, LanceMinHashError
from lance_minhash_sql.core.params import KEEP_POLICIES
from lance_minhash_sql.duck.sqltext import literal
from lance_minhash_sql.faces.sinks import Ticker, bars, check_output, stream_rows

__all__ = ["main"]

from lance_minhash_sql.faces.demo import DEMO_QUERIES, INDEX_QUERIES, PAIRS_QUERIES  # noqa: E402  (the demo's SQL)


def _compile_seconds() -> float:
    """Seconds this process spent compiling numba kernels so far (0 before numba is loaded)."""
    config = sys.modules.get("lance_minhash_sql.kernels.config")
    return config.COMPILES.seconds if config is not None else 0.0


def _compiled_since(before: float) -> str:
    """`` (including N s compiling ...)`` when kernels compiled since ``before``."""
    from lance_minhash_sql.kernels.config import compiled_note

    return compiled_note(_compile_seconds() - before)


def _quiet_compiles() -> None:
    from lance_minhash_sql.kernels.config import COMPILES

    COMPILES.notice = False


def _print_result(con, title: str, sql: str, out, tick: bool = False) -> None:
    out(f"\n-- {title}")
    before = _compile_seconds()
    with Ticker("running the statement", tick):
        text = con.sql(sql).__str__().rstrip()
    out(text)
    spent = _compile_seconds() - before
    if spent >= 0.05:
        counted = "; the seconds column counts it too" if "seconds" in sql else ""
        out(f"   ({spent:.1f}s of this statement went to compiling numba kernels, once per machine{counted})")


def cmd_demo(args) -> int:
    from lance_minhash_sql import connect
    from lance_minhash_sql.faces.demo import BATCH_ROWS, EVAL_ROWS, PREPARE_SQL, write_demo_corpus, write_demo_neighbours
    from lance_minhash_sql.io.scan import open_dataset, read_rows

    os.makedirs(args.dir, exist_ok=True)
    uri = os.path.join(args.dir, "corpus.lance")
    mode = "overwrite" if os.path.exists(uri) else "create"
    con = connect()
    with Ticker(f"writing the {args.rows:,}-row corpus and preparing the SQL functions", bars(args)):
        written = write_demo_corpus(uri, args.rows, mode, False, lambda: con.sql(PREPARE_SQL).fetchall())
    print(f"wrote {args.rows:,} synthetic rows to {uri}{written.describe()}")
    eval_set, batch = write_demo_neighbours(args.dir, args.rows)
    print(f"wrote {EVAL_ROWS:,} later rows to {eval_set} (an evaluation set) and {BATCH_ROWS:,} to {batch} "
          "(a new batch), for examples/dbt_project")
    con.execute("SET enable_progress_bar = false")  # the tables below are the output
    con.register("corpus", open_dataset(uri))
    for title, sql in DEMO_QUERIES:
        _print_result(con, title, sql, print, bars(args))
    (query,) = con.sql("SELECT text FROM corpus WHERE id = 14").fetchall()[0]
    con.register("corpus_rows", read_rows(uri, ["id", "source_id", "edit"]))
    for title, sql in INDEX_QUERIES + PAIRS_QUERIES:
        _print_result(con, title, sql.replace("{uri}", literal(uri)).replace("{query}", literal(query)), print,
                      bars(args))
    return 0


def cmd_warmup(args) -> int:
    from lance_minhash_sql.faces.warmup import warmup

    print("compiling every numba kernel into numba's cache (a minute or two on a fresh install; nothing "
          "when the cache is already full) ...", file=sys.stderr)
    print(warmup().format())
    return 0


def cmd_bench(args) -> int:
    from lance_minhash_sql.faces.bench import PEERS, run_bench

    peers = tuple(p.strip() for p in args.peers.split(",")) if args.peers else PEERS
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise LanceMinHashError(f"--peers {unknown} unknown; choose from {','.join(PEERS)}")
    run_bench(rows=args.rows, data_dir=args.data, peers=peers, sample_rows=args.sample_rows,
              json_path=args.json, progress=sys.stderr.isatty())
    return 0


def cmd_sql(args) -> int:
    """Run each statement in turn and print its rows; ``--output`` writes the last result."""
    from lance_minhash_sql import connect

    if args.query == "-" or args.query is None:
        text = sys.stdin.read()
    elif os.path.isfile(args.query):
        with open(args.query) as fh:
            text = fh.read()
    elif _looks_like_file(args.query):
        raise InvalidParameterError(f"lance-minhash sql: no such file {args.query!r}; pass an existing .sql file, "
                                    "SQL text, or - to read SQL from stdin")
    else:
        text = args.query
    con = connect()
    statements = [s.query for s in con.extract_statements(text)]
    if not statements:
        raise InvalidParameterError("lance-minhash sql: no SQL statement given; pass SQL, a .sql file or - for stdin")
    last = len(statements) - 1
    for i, sql in enumerate(statements):
        if args.output and i == last:
            _copy_result(con, sql, args.output)
            print(f"wrote {args.output}", file=sys.stderr)
            continue
        result = con.sql(sql)
        if result is not None:
            print(str(result).rstrip())
    return 0


def _looks_like_file(arg: str) -> bool:
    """A single word ending in .sql (or naming a folder) is meant as a file, not as SQL."""
    return not any(c.isspace() for c in arg.strip()) and (arg.lower().endswith(".sql") or os.sep in arg)


_OUTPUT_FORMATS = {".csv": "csv", ".parquet": "parquet", ".json": "json"}


def _copy_result(con, sql: str, path: str) -> None:
    """Write a query's rows to ``path`` (CSV, Parquet or JSON lines, by extension)."""
    fmt = _OUTPUT_FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise InvalidParameterError(f"--output {path!r}: name the file with one of the extensions "
                                    f"{sorted(_OUTPUT_FORMATS)}, e.g. result.parquet")
    con.execute(f"COPY ({sql.strip().rstrip(';')}) TO {literal(path)} (FORMAT {fmt})")


SELF_JOIN_MEMORY_HELP = "what the self-join may hold, bytes or e.g. 1GiB (default 512 MiB); answers do not depend on it"
STORAGE_OPTION_HELP = ("Lance object-store option KEY=VALUE for an s3://, gs://, az://... dataset, e.g. "
                       "aws_region=us-east-1, aws_endpoint=http://127.0.0.1:9000, allow_http=true; repeat for "
                       "each option (values are never printed)")


def storage_options(pairs: list[str] | None) -> dict[str, str] | None:
    """``--storage-option KEY=VALUE`` arguments as a dict (``None`` without any). A
    malformed one is named by its position, never by its text: without an ``=`` it may
    be a bare secret."""
    if not pairs:
        return None
    out = {}
    for i, item in enumerate(pairs, 1):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidParameterError(
                f"--storage-option #{i} (of {len(pairs)}) {'has no' if not sep else 'has an empty key before the'} "
                "'=': each option is KEY=VALUE, e.g. --storage-option aws_region=us-east-1")
        out[key] = value
    return out


def cmd_build(args) -> int:
    from lance_minhash_sql.build.builder import build_index

    tokenizer = args.tokenizer
    before = _compile_seconds()
    r = build_index(args.dataset, args.column, num_hashes=args.num_hashes, num_bands=args.num_bands,
                    shingle_size=args.shingle_size, threshold=args.threshold, tokenizer=tokenizer,
                    replace=not args.no_replace, memory_limit=args.memory_limit, progress=bars(args),
                    storage_options=storage_options(args.storage_option))
    print(f"built {r.index_name} on {r.column}: {r.rows_indexed:,} rows indexed "
          f"({r.rows_without_tokens:,} without tokens), k={r.num_hashes}, b={r.num_bands}, r={r.rows_per_band}, "
          f"shingle_size={r.shingle_size}; {r.segments} segment(s), {r.bytes / 2**20:.1f} MiB, "
          f"{r.seconds:.2f}s{_compiled_since(before)}, dataset version {r.dataset_version}")
    return 0


def cmd_optimize(args) -> int:
    from lance_minhash_sql.lifecycle.optimize import optimize

    merge = args.merge.strip()
    if not merge.isdigit() and merge.lower() != "all":
        merge = [u.strip() for u in merge.split(",") if u.strip()]
    before = _compile_seconds()
    r = optimize(args.dataset, args.column, merge=merge, memory_limit=args.memory_limit, progress=bars(args),
                 storage_options=storage_options(args.storage_option))
    if r.action == "none":
        print(f"{r.index_name} on {r.column}: up to date ({r.segments_after} segment(s)); nothing committed")
    else:
        print(f"{r.index_name} on {r.column}: {r.action}: {r.merged_segments} segment(s) rewritten, new fragments "
              f"{list(r.new_fragments)}; {r.rows_indexed:,} rows in segment {r.segment_uuid} ({r.rows_added:,} new, "
              f"{r.rows_dropped:,} deleted rows dropped); {r.segments_before} -> {r.segments_after} segment(s), "
              f"{r.bytes / 2**20:.1f} MiB, {r.seconds:.2f}s{_compiled_since(before)}, dataset version "
              f"{r.dataset_version}")
    return 0


def _rows(value: str) -> int | None:
    """``-k``: a number of rows, or ``all`` (no limit, with --threshold)."""
    if value == "all":
        return None
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of rows; pass e.g. 10, or all") from None


def cmd_search(args) -> int:
    from lance_minhash_sql.query.topk import search

    table = search(args.dataset, args.column, args.query, args.k, threshold=args.threshold, exact=args.exact,
                   fast_search=args.fast_search, filter=args.filter, columns=args.columns.split(",") if args.columns else None,
                   storage_options=storage_options(args.storage_option))
    import duckdb

    print(str(duckdb.from_arrow(table)).rstrip())
    return 0


def cmd_pairs(args) -> int:
    from lance_minhash_sql.selfjoin.pairs import PAIRS_EXACT_SCHEMA, PAIRS_SCHEMA, pairs

    if args.output:
        check_output(args.output)
    batches = pairs(args.dataset, args.column, args.threshold, exact=args.exact, verify=args.verify,
                    memory_limit=args.memory_limit, storage_options=storage_options(args.storage_option))
    exact = args.exact or args.verify == "exact"
    total = stream_rows(batches, PAIRS_EXACT_SCHEMA if exact else PAIRS_SCHEMA, args)
    where = f" written to {args.output}" if args.output else ""
    print(f"{total:,} pairs at threshold {args.threshold:g}{where}")
    return 0


def cmd_join(args) -> int:
    from lance_minhash_sql.selfjoin.join import JOIN_SCHEMA, join

    if args.output:
        check_output(args.output)
    batches = join(args.left, args.right, args.column, args.threshold, exact=args.exact, verify=args.verify,
                   right_column=args.right_column, memory_limit=args.memory_limit,
                   left_storage_options=storage_options(args.left_storage_option),
                   right_storage_options=storage_options(args.right_storage_option))
    total = stream_rows(batches, JOIN_SCHEMA, args)
    where = f" written to {args.output}" if args.output else ""
    print(f"{total:,} (left, right) pairs at threshold {args.threshold:g}{where}")
    return 0


def cmd_clusters(args) -> int:
    import pyarrow.compute as pc

    from lance_minhash_sql.selfjoin.clusters import clusters

    if args.output:
        check_output(args.output)
    table = clusters(args.dataset, args.column, args.threshold, clustering=args.clustering, verify=args.verify,
                     memory_limit=args.memory_limit,
                     storage_options=storage_options(args.storage_option))
    stream_rows(table.to_batches(), table.schema, args, unit="rows")
    n = len(pc.unique(table.column("cluster_id"))) if table.num_rows else 0
    where = f" written to {args.output}" if args.output else ""
    print(f"{n:,} clusters holding {table.num_rows:,} rows at threshold {args.threshold:g}{where}")
    return 0


def cmd_dedup(args) -> int:
    from lance_minhash_sql.selfjoin.dedup import dedup

    t0 = time.perf_counter()
    before = _compile_seconds()
    r = dedup(args.dataset, args.column, args.threshold, keep=args.keep, order_by=args.order_by,
              clustering=args.clustering, verify=args.verify, output=args.output,
              delete_in_place=args.delete_in_place, progress=bars(args), memory_limit=args.memory_limit,
              storage_options=storage_options(args.storage_option))
    print(f"{r.dataset} version {r.version}: {r.rows:,} rows, {r.clusters:,} clusters holding {r.clustered_rows:,} "
          f"rows at threshold {args.threshold:g}; {r.removed:,} duplicates, {r.kept:,} rows kept "
          f"({time.perf_counter() - t0:.1f}s{_compiled_since(before)})")
    if r.dry_run:
        print("dry run: nothing written; pass --output NEW.lance to write the kept rows to a new dataset, or "
              "--delete-in-place to delete the duplicates in a new version of this one")
    elif args.output:
        print(f"wrote {r.output_rows:,} rows to {r.output} (version {r.output_version}); {r.dataset} is unchanged")
    else:
        print(f"deleted {r.removed:,} rows: version {r.version} ({r.rows:,} rows) -> version {r.output_version} "
              f"({r.output_rows:,} rows); the old version stays readable: "
              f"lance.dataset({r.dataset!r}, version={r.version})")
    return 0


def cmd_review(args) -> int:
    from lance_minhash_sql.faces.review import review

    if not args.out.lower().endswith((".html", ".htm")):
        raise InvalidParameterError(f"--out {args.out!r} must name an .html file, e.g. --out review.html")
    r = review(args.dataset, args.column, args.threshold, keep=args.keep, order_by=args.order_by,
               per_kind=args.per_kind, max_members=args.max_members, seed=args.seed, out=args.out,
               storage_options=storage_options(args.storage_option))
    print(f"wrote {args.out}: {r.describe()}")
    return 0


def cmd_report(args) -> int:
    from lance_minhash_sql.diagnostics.report import report

    if args.out is not None:
        from lance_minhash_sql.diagnostics.plots import require_matplotlib

        require_matplotlib()  # before the report's work, not after it
    rep = report(args.dataset, args.column, sample=args.sample, threshold=args.threshold, seed=args.seed,
                 top_buckets=args.top, progress=bars(args), storage_options=storage_options(args.storage_option))
    print(rep.format())
    if args.out is not None:
        from lance_minhash_sql.diagnostics.plots import save_plots

        for name, path in save_plots(rep, args.out).items():
            print(f"wrote {name} plot to {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lance-minhash",
        description="Near-duplicate detection for text in Lance datasets, in SQL.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("Examples::", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_: str, **kw) -> argparse.ArgumentParser:
        """A subcommand whose --help opens with its one-line help."""
        kw.setdefault("description", help_[0].upper() + help_[1:] + ".")
        return sub.add_parser(name, help=help_, **kw)

    def storage_flag(p):
        p.add_argument("--storage-option", action="append", default=None, metavar="KEY=VALUE",
                       help=STORAGE_OPTION_HELP)

    def verify_flag(p):
        p.add_argument("--verify", default="estimate", choices=VERIFY_MODES,
                       help="estimate (the MinHash estimate reaches the threshold, default) or exact (the exact "
                            "shingle Jaccard does; candidates down to 4 standard deviations of the estimate under it)")

    def clustering_flag(p):
        p.add_argument("--clustering", default="components", choices=CLUSTERINGS,
                       help="components (connected components, default) or star (every dropped row has a kept "
                            "twin it is similar to)")
        verify_flag(p)

    p = command("demo", "generate a synthetic corpus and run SQL over it")
    p.add_argument("--rows", type=int, default=20_000, help="rows of the synthetic corpus (default 20000)")
    p.add_argument("--dir", default="demo", help="folder for the demo dataset (default ./demo)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_demo)

    p = command("bench", "benchmark against Lance native and other peers, side by side")
    p.add_argument("--rows", type=int, default=1_000_000, help="corpus rows (default 1000000)")
    p.add_argument("--data", default="bench-data", help="folder for benchmark corpora, reused between runs "
                   "(default ./bench-data)")
    p.add_argument("--peers", default=None, help="comma-separated subset of ours,lance,datasketch,rensa")
    p.add_argument("--sample-rows", type=int, default=20_000, help="rows for the slow Python peers")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.set_defaults(func=cmd_bench)

    p = command("warmup", "compile every numba kernel into numba's on-disk cache (for container "
                       "images and CI caches): later processes then compile nothing")
    p.set_defaults(func=cmd_warmup)

    p = command("build", "build Lance's MinHash LSH index on a text column")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the text column")
    p.add_argument("--num-hashes", type=int, default=128,
                   help="MinHash values per signature, k (default 128); more: finer similarity estimates")
    p.add_argument("--num-bands", type=int, default=None, help="default 16, or chosen by --threshold")
    p.add_argument("--shingle-size", type=int, default=3,
                   help="tokens per shingle (default 3); the sets whose Jaccard similarity is estimated")
    p.add_argument("--threshold", type=float, default=None, help="choose num_bands for this similarity")
    p.add_argument("--tokenizer", default=None, help='JSON tokenizer options, e.g. \'{"base_tokenizer": "whitespace"}\'')
    p.add_argument("--memory-limit", default=None, help="sort budget, bytes or e.g. 512MiB (default 64 MiB)")
    p.add_argument("--no-replace", action="store_true", help="fail if the column already has an index")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    storage_flag(p)
    p.set_defaults(func=cmd_build)

    p = command("optimize", "bring a MinHash index up to date: index new rows, merge segments")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("--merge", default="1",
                   help="0: a delta segment for new fragments only; N: rewrite the newest N segments with them "
                        "(default 1, as Lance); all; or comma-separated segment uuids")
    p.add_argument("--memory-limit", default=None, help="sort budget, bytes or e.g. 512MiB (default 64 MiB)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    storage_flag(p)
    p.set_defaults(func=cmd_optimize)

    p = command("search", "top-k most similar rows of a text")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("query", help="the text to look up")
    p.add_argument("-k", type=_rows, default=10, help="rows to return (default 10), or all: every row at "
                   "least --threshold similar")
    p.add_argument("--threshold", type=float, default=None,
                   help="only rows at least this similar (estimated Jaccard, 0 < t <= 1)")
    p.add_argument("--exact", action="store_true",
                   help="add _jaccard, the exact shingle Jaccard (with --threshold: cut on it)")
    p.add_argument("--columns", default=None, help="comma-separated columns to show (default all)")
    p.add_argument("--filter", default=None, help="Lance filter applied before the top-k, e.g. \"lang = 'en'\"")
    p.add_argument("--fast-search", action="store_true", help="indexed rows only (skip unindexed fragments)")
    p.add_argument("--quiet", action="store_true", help="no compile notice")
    storage_flag(p)
    p.set_defaults(func=cmd_search)

    def self_join(name: str, help_: str, link: str, output: str):
        p = command(name, help_)
        p.add_argument("dataset", help="path or URI of the Lance dataset")
        p.add_argument("column", help="the indexed text column")
        p.add_argument("--threshold", type=float, default=0.8, help=f"{link} (default 0.8)")
        p.add_argument("--output", default=None, help=output)
        p.add_argument("--memory-limit", default=None, help=SELF_JOIN_MEMORY_HELP)
        return p

    p = self_join("pairs", "every pair of rows whose MinHash similarity reaches a threshold",
                  "similarity a pair must reach", "write all pairs to this .parquet or .csv file (streamed)")
    p.add_argument("--exact", action="store_true", help="add the exact shingle Jaccard; keep pairs reaching it too")
    verify_flag(p)
    p.add_argument("--limit", type=int, default=20, help="pairs to print without --output (default 20)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    storage_flag(p)
    p.set_defaults(func=cmd_pairs)

    p = command("join", "every (left, right) pair of rows of two datasets whose MinHash similarity "
                                    "reaches a threshold, through RIGHT's index (decontamination, ingestion dedup)")
    p.add_argument("left", help="path or URI of the dataset whose rows are looked up (signed with RIGHT's parameters)")
    p.add_argument("right", help="path or URI of the indexed dataset")
    p.add_argument("column", help="the text column of LEFT (and of RIGHT unless --right-column)")
    p.add_argument("--right-column", default=None, help="RIGHT's indexed text column, if named differently")
    p.add_argument("--threshold", type=float, default=0.8, help="similarity a pair must reach (default 0.8)")
    p.add_argument("--exact", action="store_true", help="add the exact shingle Jaccard; keep pairs reaching it too")
    verify_flag(p)
    p.add_argument("--output", default=None, help="write all pairs to this .parquet or .csv file (streamed)")
    p.add_argument("--memory-limit", default=None, help=SELF_JOIN_MEMORY_HELP)
    p.add_argument("--limit", type=int, default=20, help="pairs to print without --output (default 20)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    for side in ("left", "right"):
        p.add_argument(f"--{side}-storage-option", action="append", default=None, metavar="KEY=VALUE",
                       help=f"an object-store option of the {side.upper()} dataset only (repeat for several)")
    p.set_defaults(func=cmd_join)

    p = self_join("clusters", "near-duplicate clusters (rows in clusters of two or more)", "similarity of a link",
                  "write the clusters to this .parquet or .csv file")
    p.add_argument("--limit", type=int, default=20, help="rows to print without --output (default 20)")
    p.add_argument("--quiet", action="store_true", help="no notice of a first-run kernel compilation")
    clustering_flag(p)
    storage_flag(p)
    p.set_defaults(func=cmd_clusters)

    p = self_join("dedup", "keep one row per near-duplicate cluster (dry run unless told where to write)",
                  "similarity of a link", "write the kept rows to this new Lance dataset")
    p.add_argument("--keep", default="first", choices=KEEP_POLICIES,
                   help="first (lowest row id, default) or longest (longest text)")
    p.add_argument("--order-by", default=None,
                   help="keep the first row by this SQL ORDER BY over the dataset's columns, e.g. 'quality DESC'")
    p.add_argument("--delete-in-place", action="store_true",
                   help="delete the duplicates from DATASET in one commit (a new version; the old stays readable)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    clustering_flag(p)
    storage_flag(p)
    p.set_defaults(func=cmd_dedup)

    p = command("review", "write one HTML page to review what dedup drops: parameters, S-curve, cluster sizes, "
                "sample clusters side by side with their exact Jaccard")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("--out", required=True, help="the HTML file to write, e.g. review.html")
    p.add_argument("--threshold", type=float, default=0.8, help="similarity of a link (default 0.8)")
    p.add_argument("--keep", default="first", choices=KEEP_POLICIES,
                   help="the row dedup keeps: first (lowest row id, default) or longest (longest text)")
    p.add_argument("--order-by", default=None, help="keep the first row by this SQL ORDER BY, e.g. 'quality DESC'")
    p.add_argument("--per-kind", type=int, default=3,
                   help="clusters shown of each kind: largest, borderline, random (default 3)")
    p.add_argument("--max-members", type=int, default=8, help="rows shown per cluster (default 8)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sample (default 0)")
    storage_flag(p)
    p.set_defaults(func=cmd_review)

    p = command("report", "diagnostics of an index: S-curve vs sampled pairs, buckets, error")
    p.add_argument("dataset", help="path or URI of the Lance dataset")
    p.add_argument("column", help="the indexed text column")
    p.add_argument("--out", default=None, help="folder for scurve.png, buckets.png, estimator.png (needs matplotlib)")
    p.add_argument("--sample", type=int, default=2000, help="query rows, and most pairs kept per bin (default 2000)")
    p.add_argument("--threshold", type=float, default=None, help="similarity for fp/fn areas and recall "
                   "(default: the S-curve threshold)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sample (default 0)")
    p.add_argument("--top", type=int, default=10, help="largest buckets to list (default 10)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    storage_flag(p)
    p.set_defaults(func=cmd_report)

    p = command("sql", "run SQL with every function installed (argument, file or - for stdin)",
                       description="Run SQL statements with every lance_minhash_sql function installed and print "
                                   "each result.")
    p.add_argument("query", nargs="?", default="-", metavar="SQL|FILE|-",
                   help="SQL text (one or more statements), a .sql FILE, or - to read SQL from stdin (default -)")
    p.add_argument("--output", "-o", default=None,
                   help="write the last statement's rows to this file (.csv, .parquet or .json lines)")
    p.set_defaults(func=cmd_sql)
    return parser


LATERAL_HINT = ("minhash_search returns the dataset's own columns, so it needs a constant query and cannot take a "
                "column of another table (LATERAL); per row use minhash_search_ids(dataset, column, q.text, k), "
                "which returns _rowid and _distance, and join the rows by _rowid")


def sql_hint(message: str) -> str:
    """A line of advice for DuckDB errors that our macros cause, or ''."""
    if "does not support lateral join column parameters" in message:
        return LATERAL_HINT
    return ""


def _warning_printer(fallback):
    """A ``warnings.showwarning`` that prints the package's warnings as one
    ``lance-minhash: warning:`` line and hands the others to ``fallback``."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if category.__module__.split(".")[0] == "lance_minhash_sql":
            print(f"lance-minhash: warning: {cli_advice(str(message))}", file=sys.stderr)
        else:
            fallback(message, category, filename, lineno, file, line)

    return show


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "quiet", False):
        _quiet_compiles()
    from lance_minhash_sql.core.errors import EmptySearchWarning
    from lance_minhash_sql.core.errors import LowRecallWarning

    with warnings.catch_warnings():  # restores the filters and showwarning on return
        # the package's warnings are shown whatever the filters say
        for category in (EmptySearchWarning, LowRecallWarning):
            warnings.filterwarnings("default", category=category)
        warnings.showwarning = _warning_printer(warnings.showwarning)
        return _run(args)


def _run(args) -> int:
    try:
        return args.func(args)
    except LanceMinHashError as exc:
        print(f"lance-minhash: error: {type(exc).__name__}: {cli_advice(str(exc))}", file=sys.stderr)
        return 2
    except Exception as exc:
        import duckdb

        if isinstance(exc, duckdb.Error):  # SQL errors, including ours raised inside UDFs
            hint = sql_hint(str(exc))
            print(f"lance-minhash: error: {exc}" + (f"\nhint: {hint}" if hint else ""), file=sys.stderr)
            return 2
        raise
    except KeyboardInterrupt:
        print("lance-minhash: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
