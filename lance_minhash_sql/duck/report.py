"""UDFs behind the diagnostics macros of ``sql/report.sql``: minhash_report,
minhash_scurve, minhash_buckets.

Each returns one ``LIST<STRUCT>`` per input row (the macro unnests it). The struct types
are derived from the Arrow schemas of :mod:`lance_minhash_sql.index.report`, so the SQL
columns are exactly the Python tables' columns. ``minhash_report`` and ``minhash_scurve``
share one computation per dataset version and options (``index.report.cached_report``).
The numba engine is imported on the first call, as in :mod:`.udfs`.
"""

from __future__ import annotations

import pyarrow as pa

from ..index.report_tables import LARGEST_BUCKETS_SCHEMA, SCURVE_SCHEMA, SUMMARY_SCHEMA
from .storage import options_of
from .tables import TableUdf, int_arg, require, scalars
from .udfs import prefixed

__all__ = ["REPORT_UDFS", "duck_type"]

_DUCK_TYPES = {
    pa.string(): "VARCHAR", pa.float64(): "DOUBLE", pa.int64(): "BIGINT", pa.int32(): "INTEGER",
    pa.uint64(): "UBIGINT", pa.bool_(): "BOOLEAN",
}


def duck_type(schema: pa.Schema) -> str:
    """``STRUCT(...)[]`` of a flat Arrow schema, as a DuckDB type."""
    fields = ", ".join(f'"{f.name}" {_DUCK_TYPES[f.type]}' for f in schema)
    return f"STRUCT({fields})[]"


def _lists(tables: list[pa.Table], schema: pa.Schema) -> pa.Array:
    """One list of structs per table (all of ``schema``)."""
    offsets = [0]
    for t in tables:
        offsets.append(offsets[-1] + t.num_rows)
    struct = pa.struct(list(schema))
    values = (pa.concat_tables(tables).combine_chunks().to_struct_array().combine_chunks() if tables
              else pa.array([], struct))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values.cast(struct), type=pa.list_(struct))


def _reports(fn: str, dataset, column, sample, threshold, seed, storage) -> list:
    from ..index.report import cached_report

    out = []
    for row in scalars(fn, dataset=dataset, column=column, sample=sample, threshold=threshold, seed=seed,
                        storage=storage):
        require(fn, row, "dataset", "column", "sample", "seed")
        options = dict(sample=int_arg(fn, "sample", row["sample"]), threshold=row["threshold"],
                       seed=int_arg(fn, "seed", row["seed"]))
        out.append(prefixed(fn, lambda: cached_report(row["dataset"], row["column"],
                                                       storage_options=options_of(row["storage"]), **options)))
    return out


def report(dataset, column, sample, threshold, seed, storage) -> pa.Array:
    """``_lms_report(dataset, column, sample, threshold, seed, storage)``: the summary metrics."""
    reps = _reports("minhash_report", dataset, column, sample, threshold, seed, storage)
    return _lists([r.summary for r in reps], SUMMARY_SCHEMA)


def scurve(dataset, column, sample, threshold, seed, storage) -> pa.Array:
    """``_lms_scurve(dataset, column, sample, threshold, seed, storage)``: one row per similarity bin."""
    reps = _reports("minhash_scurve", dataset, column, sample, threshold, seed, storage)
    return _lists([r.scurve for r in reps], SCURVE_SCHEMA)


def buckets(dataset, column, top, storage) -> pa.Array:
    """``_lms_buckets(dataset, column, top, storage)``: the largest buckets."""
    from ..index.report import largest_buckets

    fn = "minhash_buckets"
    out = []
    for row in scalars(fn, dataset=dataset, column=column, top=top, storage=storage):
        require(fn, row, "dataset", "column", "top")
        n = int_arg(fn, "top", row["top"])
        out.append(prefixed(fn, lambda: largest_buckets(row["dataset"], row["column"], top=n,
                                                         storage_options=options_of(row["storage"])))[0])
    return _lists(out, LARGEST_BUCKETS_SCHEMA)


_REPORT_ARGS = ("VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR")

REPORT_UDFS: tuple[TableUdf, ...] = (
    TableUdf("_lms_report", report, _REPORT_ARGS, duck_type(SUMMARY_SCHEMA), True),
    TableUdf("_lms_scurve", scurve, _REPORT_ARGS, duck_type(SCURVE_SCHEMA), True),
    TableUdf("_lms_buckets", buckets, ("VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR"), duck_type(LARGEST_BUCKETS_SCHEMA), True),
)
