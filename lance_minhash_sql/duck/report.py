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
from .tables import TableUdf, _int, _require, _scalars
from .types import rows_type
from .udfs import _prefixed

__all__ = ["REPORT_UDFS"]

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
    for row in _scalars(fn, dataset=dataset, column=column, sample=sample, threshold=threshold, seed=seed,
                        storage=storage):
        _require(fn, row, "dataset", "column", "sample", "seed")
        options = dict(sample=_int(fn, "sample", row["sample"]), threshold=row["threshold"],
                       seed=_int(fn, "seed", row["seed"]))
        out.append(_prefixed(fn, lambda: cached_report(row["dataset"], row["column"],
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
    for row in _scalars(fn, dataset=dataset, column=column, top=top, storage=storage):
        _require(fn, row, "dataset", "column", "top")
        n = _int(fn, "top", row["top"])
        out.append(_prefixed(fn, lambda: largest_buckets(row["dataset"], row["column"], top=n,
                                                         storage_options=options_of(row["storage"])))[0])
    return _lists(out, LARGEST_BUCKETS_SCHEMA)


_REPORT_ARGS = ("VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR")

REPORT_UDFS: tuple[TableUdf, ...] = (
    TableUdf("_lms_report", report, _REPORT_ARGS, rows_type(SUMMARY_SCHEMA)[1], True),
    TableUdf("_lms_scurve", scurve, _REPORT_ARGS, rows_type(SCURVE_SCHEMA)[1], True),
    TableUdf("_lms_buckets", buckets, ("VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR"), rows_type(LARGEST_BUCKETS_SCHEMA)[1], True),
)
