"""Where a command's rows go: streamed into a ``.parquet`` or ``.csv`` file, or the first
rows printed as a table; a progress bar counts them."""

from __future__ import annotations

import os
import sys

from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.status import StatusLine as Ticker  # the commands' status line (core/status.py)

__all__ = ["Ticker", "bars", "check_output", "stream_rows"]


def check_output(path: str) -> str:
    """``.parquet`` or ``.csv``: the output format, from the file extension."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".parquet", ".csv"):
        raise InvalidParameterError(f"--output {path!r} must end in .parquet or .csv (the format is taken from it)")
    return ext


def _writer(path: str, schema):
    """A streaming Arrow writer chosen by the file extension (.parquet or .csv)."""
    ext = check_output(path)
    if ext == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetWriter(path, schema)
    if ext == ".csv":
        import pyarrow.csv as pcsv

        return pcsv.CSVWriter(path, schema)


def _show(table, limit: int) -> None:
    import duckdb

    print(str(duckdb.from_arrow(table.slice(0, limit))).rstrip())


def bars(args) -> bool:
    """The command line's progress bars: unless --quiet, and only on a terminal (never
    into a pipe or a file)."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def stream_rows(batches, schema, args, unit: str = "pairs") -> int:
    """Write ``batches`` to ``--output`` (streamed into a temporary file renamed at the end,
    so a failed run leaves no half-written file) or print the first ``--limit`` rows;
    a progress bar counts them. Returns the number of rows."""
    import pyarrow as pa

    from lance_minhash_sql.runtime.progress import progress_bar

    tmp = None
    if args.output:
        tmp = os.path.join(os.path.dirname(os.path.abspath(args.output)),
                           f".{os.path.basename(args.output)}.{os.getpid()}.partial{os.path.splitext(args.output)[1]}")
    sink = _writer(tmp, schema) if tmp else None
    bar = progress_bar(bars(args), None, unit, unit=unit)
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
        _show(pa.Table.from_batches(head, schema=schema), args.limit)
    return total
