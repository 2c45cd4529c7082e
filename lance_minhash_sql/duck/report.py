"""UDFs behind the diagnostics macros of ``sql/report.sql``: minhash_report,
minhash_scurve, minhash_buckets.

Each returns one ``LIST<STRUCT>`` per input row (the macro unnests it). The struct types
are derived from the Arrow schemas of :mod:`lance_minhash_sql.diagnostics.report`, so the SQL
columns are exactly the Python tables' columns. ``minhash_report`` and ``minhash_scurve``
share one computation per dataset version and options (``index.report.cached_report``).
The numba engine is imported on the first call, as in :mod:`.udfs`.
"""

from __future__ import annotations

import pyarrow as pa

from lance_minhash_sql.diagnostics.tables import LARGEST_BUCKETS_SCHEMA, SCURVE_SCHEMA, SUMMARY_SCHEMA
from lance_minhash_sql.duck.args import Udf, integer, prefixed, require, scalar_rows
from lance_minhash_sql.duck.results import list_of, lists_of_tables, rows_type
from lance_minhash_sql.duck.storage import options_of

__all__ = ["REPORT_UDFS"]

def _reports(fn: str, dataset, column, sample, threshold, seed, storage) -> list:
    from lance_minhash_sql.diagnostics.report import cached_report

    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, sample=sample, threshold=threshold, seed=seed,
                           storage=storage):
        require(fn, row, "dataset", "column", "sample", "seed")
        options = dict(sample=integer(fn, "sample", row["sample"]), threshold=row["threshold"],
                       seed=integer(fn, "seed", row["seed"]))
        out.append(prefixed(fn, lambda: cached_report(row["dataset"], row["column"],
                                                      storage_options=options_of(row["storage"]), **options)))
    return out


def report(dataset, column, sample, threshold, seed, storage) -> pa.Array:
    """``_lms_report(dataset, column, sample, threshold, seed, storage)``: the summary metrics."""
    reps = _reports("minhash_report", dataset, column, sample, threshold, seed, storage)
    return lists_of_tables([r.summary for r in reps], list_of(SUMMARY_SCHEMA))


def scurve(dataset, column, sample, threshold, seed, storage) -> pa.Array:
    """``_lms_scurve(dataset, column, sample, threshold, seed, storage)``: one row per similarity bin."""
    reps = _reports("minhash_scurve", dataset, column, sample, threshold, seed, storage)
    return lists_of_tables([r.scurve for r in reps], list_of(SCURVE_SCHEMA))


def buckets(dataset, column, top, storage) -> pa.Array:
    """``_lms_buckets(dataset, column, top, storage)``: the largest buckets."""
    from lance_minhash_sql.diagnostics.report import largest_buckets

    fn = "minhash_buckets"
    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, top=top, storage=storage):
        require(fn, row, "dataset", "column", "top")
        n = integer(fn, "top", row["top"])
        out.append(prefixed(fn, lambda: largest_buckets(row["dataset"], row["column"], top=n,
                                                        storage_options=options_of(row["storage"])))[0])
    return lists_of_tables(out, list_of(LARGEST_BUCKETS_SCHEMA))


_REPORT_ARGS = ("VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR")

REPORT_UDFS: tuple[Udf, ...] = (
    Udf("_lms_report", report, _REPORT_ARGS, rows_type(SUMMARY_SCHEMA)[1], True),
    Udf("_lms_scurve", scurve, _REPORT_ARGS, rows_type(SCURVE_SCHEMA)[1], True),
    Udf("_lms_buckets", buckets, ("VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR"), rows_type(LARGEST_BUCKETS_SCHEMA)[1],
        True),
)
