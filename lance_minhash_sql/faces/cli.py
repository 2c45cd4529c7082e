"""The ``lance-minhash`` command line: each command (``cmd_*``), ``COMMANDS`` and ``main``.

Its arguments, their help and the examples of ``lance-minhash --help`` are in
``faces/cli_parser.py``.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from types import MappingProxyType

from lance_minhash_sql.core.advice import in_cli as cli_advice
from lance_minhash_sql.core.errors import InvalidParameterError, LanceMinHashError
from lance_minhash_sql.duck.sqltext import literal
from lance_minhash_sql.faces.cli_parser import build_parser
from lance_minhash_sql.faces.sinks import Ticker, bars, check_output, stream_rows
from lance_minhash_sql.io.outputs import prepare_output, written_beside

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
    from lance_minhash_sql.duck.install import connect
    from lance_minhash_sql.faces.demo import BATCH_ROWS, EVAL_ROWS, PREPARE_SQL, write_demo_corpus, write_demo_neighbours
    from lance_minhash_sql.io.scan import open_dataset, read_rows

    from lance_minhash_sql.io.outputs import replacing_dir
    from lance_minhash_sql.runtime.cache import clear_cache

    prepare_output(args.dir, "--dir", "folder")
    uri = os.path.join(args.dir, "corpus.lance")
    con = connect()
    # a fresh corpus each run, replacing the last one: the same rows and row ids, no old versions or indexes
    with Ticker(f"writing the {args.rows:,}-row corpus and preparing the SQL functions", bars(args)), \
            replacing_dir(uri) as tmp:
        written = write_demo_corpus(tmp, args.rows, "create", False, lambda: con.sql(PREPARE_SQL).fetchall())
    clear_cache()  # handles opened on an earlier corpus at this path (same versions, other files) are stale
    print(f"wrote {args.rows:,} synthetic rows to {uri}{written.describe()}")
    eval_set, batch, batch2 = write_demo_neighbours(args.dir, args.rows)
    print(f"wrote {EVAL_ROWS:,} later rows to {eval_set} (an evaluation set), {BATCH_ROWS:,} to {batch} and "
          f"{BATCH_ROWS:,} to {batch2} (the new batches of two days), for examples/dbt_project")
    con.execute("SET enable_progress_bar = false")  # the tables below are the output
    con.register("corpus", open_dataset(uri))
    for title, sql in DEMO_QUERIES:
        _print_result(con, title, sql, print, bars(args))
    (query,) = con.sql("SELECT text FROM corpus WHERE id = 14").fetchall()[0]
    con.register("corpus_rows", read_rows(uri, ["id", "source_id", "edit"]))
    for title, sql in INDEX_QUERIES + PAIRS_QUERIES:
        sql = sql.replace("{uri}", literal(uri)).replace("{query}", literal(query)).replace("{batch}", literal(batch))
        _print_result(con, title, sql, print, bars(args))
    return 0


def cmd_warmup(args) -> int:
    from lance_minhash_sql.faces.warmup import warmup

    print("compiling every numba kernel into numba's cache (a minute or two on a fresh install; nothing "
          "when the cache is already full) ...", file=sys.stderr)
    print(warmup(progress=bars(args)).format())
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
    from lance_minhash_sql.duck.install import connect

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
    if bars(args):
        con.execute("SET enable_progress_bar = false")  # the status line shows each statement's wait
    statements = [s.query for s in con.extract_statements(text)]
    if not statements:
        raise InvalidParameterError("lance-minhash sql: no SQL statement given; pass SQL, a .sql file or - for stdin")
    last = len(statements) - 1
    for i, sql in enumerate(statements):
        if args.output and i == last:
            with Ticker(f"writing {args.output}", bars(args)):
                _copy_result(con, sql, args.output)
            print(f"wrote {args.output}", file=sys.stderr)
            continue
        with Ticker(f"running statement {i + 1} of {last + 1}" if last else "running the statement", bars(args)):
            result = con.sql(sql)
            text = None if result is None else str(result).rstrip()  # the rows are computed here
        if text is not None:
            print(text)
    return 0


def _looks_like_file(arg: str) -> bool:
    """A single word ending in .sql (or naming a folder) is meant as a file, not as SQL."""
    return not any(c.isspace() for c in arg.strip()) and (arg.lower().endswith(".sql") or os.sep in arg)


_OUTPUT_FORMATS = MappingProxyType({".csv": "csv", ".parquet": "parquet", ".json": "json"})


def _sql_format(path: str) -> str:
    """``sql --output``'s format, from its extension."""
    fmt = _OUTPUT_FORMATS.get(os.path.splitext(path)[1].lower())
    if fmt is None:
        raise InvalidParameterError(f"--output {path!r}: name the file with one of the extensions "
                                    f"{sorted(_OUTPUT_FORMATS)}, e.g. result.parquet")
    return fmt


def _copy_result(con, sql: str, path: str) -> None:
    """Write a query's rows to ``path`` (CSV, Parquet or JSON lines, by extension)."""
    fmt = _sql_format(path)
    with written_beside(path) as tmp:
        con.execute(f"COPY ({sql.strip().rstrip(';')}) TO {literal(tmp)} (FORMAT {fmt})")


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
    from lance_minhash_sql.api.entries import build_index

    tokenizer = args.tokenizer
    before = _compile_seconds()
    r = build_index(args.dataset, args.column, num_hashes=args.num_hashes, num_bands=args.num_bands,
                    shingle_size=args.shingle_size, threshold=args.threshold, tokenizer=tokenizer,
                    replace=not args.no_replace, memory_limit=args.memory_limit, progress=bars(args),
                    storage_options=storage_options(args.storage_option), executor=args.executor,
                    ray_address=args.ray_address)
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


def cmd_ingest(args) -> int:
    from lance_minhash_sql.api.entries import ingest, ingest_plan

    if args.output:
        check_output(args.output)
    common = dict(verify=args.verify, order_by=args.order_by, memory_limit=args.memory_limit,
                  corpus_storage_options=storage_options(args.corpus_storage_option),
                  batch_storage_options=storage_options(args.batch_storage_option), executor=args.executor,
                  ray_address=args.ray_address)
    before = _compile_seconds()
    if args.dry_run or args.output:
        with Ticker("planning the ingest", bars(args)):
            plan = ingest_plan(args.corpus, args.batch, args.column, args.threshold, **common)
        if args.output:
            stream_rows(plan.to_batches(), plan.schema, args, unit="rows")
        keep = plan.column("keep").to_numpy(zero_copy_only=False)
        twin_in = plan.column("twin_in").to_pylist()
        print(f"plan for {args.batch} into {args.corpus}: {plan.num_rows:,} rows offered, {int(keep.sum()):,} to "
              f"append, {twin_in.count('corpus'):,} dropped for a corpus row, {twin_in.count('batch'):,} for an "
              f"earlier batch row{_compiled_since(before)}" + (f"; plan written to {args.output}" if args.output else "")
              + ("" if args.dry_run or not args.output else "; nothing appended (the plan only)"))
        return 0
    with Ticker("ingesting", bars(args)):
        r = ingest(args.corpus, args.batch, args.column, args.threshold, progress=bars(args), **common)
    print(f"ingested {args.batch} into {args.corpus}: {r.rows_appended:,} of {r.rows_offered:,} rows appended "
          f"({r.rows_dropped:,} near-duplicates dropped); index: {r.index_action}; dataset version "
          f"{r.dataset_version}; {r.seconds:.2f}s{_compiled_since(before)}")
    return 0


def cmd_cleanup(args) -> int:
    from lance_minhash_sql.lifecycle.cleanup import cleanup

    r = cleanup(args.dataset, args.older_than, storage_options=storage_options(args.storage_option))
    print(f"{args.dataset}: {r.versions_removed:,} old version(s) removed, {r.bytes_removed / 2**20:,.1f} MiB "
          f"({r.bytes_removed:,} bytes) freed")
    return 0


def cmd_search(args) -> int:
    from lance_minhash_sql.query.topk import search

    table = search(args.dataset, args.column, args.query, args.k, threshold=args.threshold, verify=args.verify, exact=args.exact,
                   fast_search=args.fast_search, filter=args.filter, columns=args.columns.split(",") if args.columns else None,
                   storage_options=storage_options(args.storage_option))
    import duckdb

    print(str(duckdb.from_arrow(table)).rstrip())
    return 0


def cmd_pairs(args) -> int:
    from lance_minhash_sql.api.entries import pairs
    from lance_minhash_sql.index.results import PAIRS_EXACT_SCHEMA, PAIRS_SCHEMA

    if args.output:
        check_output(args.output)
    batches = pairs(args.dataset, args.column, args.threshold, exact=args.exact, verify=args.verify,
                    memory_limit=args.memory_limit, storage_options=storage_options(args.storage_option),
                    executor=args.executor, ray_address=args.ray_address)
    exact = args.exact or args.verify == "exact"
    total = stream_rows(batches, PAIRS_EXACT_SCHEMA if exact else PAIRS_SCHEMA, args)
    where = f" written to {args.output}" if args.output else ""
    print(f"{total:,} pairs at threshold {args.threshold:g}{where}")
    return 0


def cmd_join(args) -> int:
    from lance_minhash_sql.api.entries import join
    from lance_minhash_sql.index.results import JOIN_SCHEMA

    if args.output:
        check_output(args.output)
    batches = join(args.left, args.right, args.column, args.threshold, exact=args.exact, verify=args.verify,
                   right_column=args.right_column, memory_limit=args.memory_limit,
                   left_storage_options=storage_options(args.left_storage_option),
                   right_storage_options=storage_options(args.right_storage_option), executor=args.executor,
                   ray_address=args.ray_address)
    total = stream_rows(batches, JOIN_SCHEMA, args)
    where = f" written to {args.output}" if args.output else ""
    print(f"{total:,} (left, right) pairs at threshold {args.threshold:g}{where}")
    return 0


def cmd_clusters(args) -> int:
    import pyarrow.compute as pc

    from lance_minhash_sql.api.entries import clusters

    if args.output:
        check_output(args.output)
    with Ticker("finding the clusters", bars(args)):
        table = clusters(args.dataset, args.column, args.threshold, clustering=args.clustering, verify=args.verify,
                         memory_limit=args.memory_limit, storage_options=storage_options(args.storage_option),
                         progress=bars(args), executor=args.executor, ray_address=args.ray_address)
    stream_rows(table.to_batches(), table.schema, args, unit="rows")
    n = len(pc.unique(table.column("cluster_id"))) if table.num_rows else 0
    where = f" written to {args.output}" if args.output else ""
    print(f"{n:,} clusters holding {table.num_rows:,} rows at threshold {args.threshold:g}{where}")
    return 0


def cmd_dedup(args) -> int:
    from lance_minhash_sql.api.entries import dedup

    t0 = time.perf_counter()
    before = _compile_seconds()
    with Ticker("finding the clusters and the rows to keep", bars(args)):  # the write's bar takes over
        r = dedup(args.dataset, args.column, args.threshold, keep=args.keep, order_by=args.order_by,
                  clustering=args.clustering, verify=args.verify, output=args.output,
                  delete_in_place=args.delete_in_place, progress=bars(args), memory_limit=args.memory_limit,
                  storage_options=storage_options(args.storage_option), executor=args.executor,
                  ray_address=args.ray_address)
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

    if args.batch is not None:
        from lance_minhash_sql.faces.review_ingest import review_ingest

        r = review_ingest(args.dataset, args.batch, args.column, args.threshold, verify=args.verify,
                          order_by=args.order_by, memory_limit=args.memory_limit, id_column=args.id_column,
                          sample=args.per_kind, seed=args.seed, out=args.out, progress=bars(args),
                          corpus_storage_options=storage_options(args.storage_option))
        print(f"wrote {args.out}: {r.describe()}")
        return 0
    r = review(args.dataset, args.column, args.threshold, keep=args.keep, order_by=args.order_by,
               clustering=args.clustering, verify=args.verify, memory_limit=args.memory_limit,
               id_column=args.id_column, per_kind=args.per_kind, max_members=args.max_members, seed=args.seed,
               out=args.out, progress=bars(args), storage_options=storage_options(args.storage_option))
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


def cmd_estimate(args) -> int:
    from lance_minhash_sql.diagnostics.estimate import describe, estimate

    with Ticker(f"estimating from a sample of {args.sample_rows:,} rows", bars(args)):
        table = estimate(args.dataset, args.column, args.thresholds, args.sample_rows, verify=args.verify,
                         seed=args.seed, memory_limit=args.memory_limit,
                         storage_options=storage_options(args.storage_option))
    print("\n".join(describe(table)))
    return 0


LATERAL_HINT = ("minhash_search returns the dataset's own columns, so it needs a constant query and cannot take a "
                "column of another table (LATERAL); per row use minhash_search_ids(dataset, column, q.text, k), "
                "which returns _rowid and _distance, and join the rows by _rowid")


def sql_hint(message: str) -> str:
    """A line of advice for DuckDB errors that our macros cause, or ''."""
    if "does not support lateral join column parameters" in message:
        return LATERAL_HINT
    return ""


# the commands whose warnings come from SQL statements, and so keep SQL's syntax
SQL_COMMANDS = frozenset({"sql", "demo"})


def _warning_printer(fallback, options: frozenset = frozenset(), in_sql: bool = False):
    """A ``warnings.showwarning`` that prints each of the package's warnings once, as one
    ``lance-minhash: warning:`` line (in the terms of the command's ``options``, or as
    SQL when ``in_sql``), and hands the others to ``fallback``."""
    shown: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if category.__module__.split(".")[0] == "lance_minhash_sql":
            text = str(message) if in_sql else cli_advice(str(message), options)
            if text not in shown:  # a statement's UDFs run at its binding and at its execution
                shown.add(text)
                print(f"lance-minhash: warning: {text}", file=sys.stderr)
        else:
            fallback(message, category, filename, lineno, file, line)

    return show


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = frozenset(parser.commands[args.command].options)  # the command's own terms for its messages
    if getattr(args, "quiet", False):
        _quiet_compiles()
    from lance_minhash_sql.core.errors import DeprecatedSpellingWarning, EmptySearchWarning, LowRecallWarning

    with warnings.catch_warnings():  # restores the filters and showwarning on return
        # the package's warnings are shown whatever the filters say, each text once per run (the printer)
        for category in (EmptySearchWarning, LowRecallWarning, DeprecatedSpellingWarning):
            warnings.filterwarnings("always", category=category)
        warnings.showwarning = _warning_printer(warnings.showwarning, options, args.command in SQL_COMMANDS)
        return _run(args, options)


# each command's output option: (attribute, what it names); checked and its folders created before any work
OUTPUTS = MappingProxyType({"pairs": ("output", "file"), "join": ("output", "file"), "clusters": ("output", "file"),
                            "sql": ("output", "file"), "review": ("out", "file"), "dedup": ("output", "dataset"),
                            "report": ("out", "folder")})


def _prepare_output(args) -> None:
    """The command's output path checked (its format by extension) and its missing folders
    created, before any work: a bad path costs nothing but one line."""
    attr, kind = OUTPUTS.get(args.command, (None, None))
    path = getattr(args, attr, None) if attr else None
    if path is None:
        return
    if args.command in ("pairs", "join", "clusters"):
        check_output(path)
    elif args.command == "sql":
        _sql_format(path)
    elif args.command == "review" and not path.lower().endswith((".html", ".htm")):
        raise InvalidParameterError(f"--out {path!r} must name an .html file, e.g. --out review.html")
    prepare_output(path, f"--{attr}", kind)


def _run(args, options: frozenset = frozenset()) -> int:
    try:
        _prepare_output(args)
        return COMMANDS[args.command](args)
    except LanceMinHashError as exc:
        print(f"lance-minhash: error: {type(exc).__name__}: {cli_advice(str(exc), options)}", file=sys.stderr)
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


COMMANDS = MappingProxyType({
    "demo": cmd_demo, "bench": cmd_bench, "warmup": cmd_warmup, "build": cmd_build, "optimize": cmd_optimize,
    "ingest": cmd_ingest, "cleanup": cmd_cleanup,
    "search": cmd_search, "pairs": cmd_pairs, "join": cmd_join, "clusters": cmd_clusters, "dedup": cmd_dedup,
    "review": cmd_review, "report": cmd_report, "sql": cmd_sql, "estimate": cmd_estimate})


if __name__ == "__main__":
    sys.exit(main())
