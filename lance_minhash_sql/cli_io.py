"""The command line's inputs and outputs: ``--storage-option`` arguments, and result files.

Results go to ``--output`` as Parquet or CSV (the format from the extension), streamed
into a temporary file next to it that is renamed when complete, so a failed or
interrupted run leaves no half-written file; without ``--output`` the first rows are
printed.
"""

from __future__ import annotations

import os

from .errors import InvalidParameterError

__all__ = ["STORAGE_OPTION_HELP", "storage_options", "sink_kind", "open_sink", "show_head", "stream_pairs"]

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


def sink_kind(path: str) -> str:
    """``.parquet`` or ``.csv``: the output format, from the file extension."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".parquet", ".csv"):
        raise InvalidParameterError(f"--output {path!r} must end in .parquet or .csv (the format is taken from it)")
    return ext


def open_sink(path: str, schema):
    """A streaming Arrow writer chosen by the file extension (.parquet or .csv)."""
    ext = sink_kind(path)
    if ext == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetWriter(path, schema)
    if ext == ".csv":
        import pyarrow.csv as pcsv

        return pcsv.CSVWriter(path, schema)


def show_head(table, limit: int) -> None:
    import duckdb

    print(str(duckdb.from_arrow(table.slice(0, limit))).rstrip())


def stream_pairs(batches, schema, args, unit: str = "pairs") -> int:
    """Write ``batches`` to ``--output`` (streamed into a temporary file renamed at the end,
    so a failed run leaves no half-written file) or print the first ``--limit`` rows;
    a progress bar counts them. Returns the number of rows."""
    import pyarrow as pa

    from .index.progress import progress_bar

    tmp = None
    if args.output:
        tmp = os.path.join(os.path.dirname(os.path.abspath(args.output)),
                           f".{os.path.basename(args.output)}.{os.getpid()}.partial{os.path.splitext(args.output)[1]}")
    sink = open_sink(tmp, schema) if tmp else None
    bar = progress_bar(not args.quiet, None, unit, unit=unit)
    head, total = [], 0
    try:
        for b in batches:
            total += b.num_rows
            if sink is not None:
                sink.write_batch(b)
            elif sum(h.num_rows for h in head) < args.limit:
                head.append(b.slice(0, args.limit))
            if bar is not None:
                bar.update(b.num_rows)
        if sink is not None:
            sink.close()
            sink = None
            os.replace(tmp, args.output)
            tmp = None
    finally:
        if bar is not None:
            bar.close()
        if sink is not None:
            sink.close()
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
    if not args.output:
        show_head(pa.Table.from_batches(head, schema=schema), args.limit)
    return total
