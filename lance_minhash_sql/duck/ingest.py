"""UDFs behind the pipeline macros (``sql/ingest.sql``): the ingest plan, the ingest and
the cleanup of old versions.

Same shape as :mod:`.lifecycle`: each UDF returns ``LIST<STRUCT>`` (the plan's rows, or
one struct), unnested by a TEMP table macro; registered with ``side_effects`` so DuckDB
runs it once, at execution (an ingest writes), and with ``null_handling="special"`` so a
NULL argument is an error. ``older_than`` arrives as seconds (the macro takes an
``INTERVAL`` or a text such as ``'7 days'``).
"""

from __future__ import annotations

import pyarrow as pa

from lance_minhash_sql.core.records import record_dict, record_schema
from lance_minhash_sql.duck.args import Udf, executor as executor_of, prefixed, require, scalar_rows
from lance_minhash_sql.duck.args import verify as verify_of
from lance_minhash_sql.duck.results import lists_of_records, lists_of_tables, rows_type
from lance_minhash_sql.duck.storage import options_of
from lance_minhash_sql.index.results import INGEST_PLAN_SCHEMA, CleanupResult, IngestResult

__all__ = ["INGEST_UDFS"]

_PLAN_ARROW, PLAN_TYPE = rows_type(INGEST_PLAN_SCHEMA)
_INGEST_ARROW, INGEST_TYPE = rows_type(record_schema(IngestResult))
_CLEANUP_ARROW, CLEANUP_TYPE = rows_type(record_schema(CleanupResult))
_ARGS = ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR",
         "VARCHAR", "VARCHAR")


def _runs(fn: str, corpus, batch, column, threshold, verify, order_by, memory_limit, corpus_storage,
          batch_storage, executor, ray_address):
    """Each input row's checked arguments, as keyword arguments of the engine's functions."""
    for row in scalar_rows(fn, corpus=corpus, batch=batch, column=column, threshold=threshold, verify=verify,
                           order_by=order_by, memory_limit=memory_limit, cs=corpus_storage, bs=batch_storage,
                           executor=executor, ray_address=ray_address):
        require(fn, row, "corpus", "batch", "column", "threshold", "verify", "executor")
        yield dict(corpus=row["corpus"], batch=row["batch"], column=row["column"], threshold=row["threshold"],
                   verify=verify_of(fn, row["verify"]), order_by=row["order_by"], memory_limit=row["memory_limit"],
                   corpus_storage_options=options_of(row["cs"]), batch_storage_options=options_of(row["bs"]),
                   executor=executor_of(fn, row["executor"], row["ray_address"]))


def ingest_plan(corpus, batch, column, threshold, verify, order_by, memory_limit, corpus_storage, batch_storage,
                executor, ray_address) -> pa.Array:
    from lance_minhash_sql.selfjoin.ingest import ingest_plan as run

    fn = "minhash_ingest_plan"
    runs = _runs(fn, corpus, batch, column, threshold, verify, order_by, memory_limit, corpus_storage, batch_storage,
                 executor, ray_address)
    return lists_of_tables([prefixed(fn, run, **kw) for kw in runs], _PLAN_ARROW)


def ingest(corpus, batch, column, threshold, verify, order_by, memory_limit, corpus_storage, batch_storage,
           executor, ray_address) -> pa.Array:
    from lance_minhash_sql.lifecycle.ingest import ingest as run

    fn = "minhash_ingest"
    runs = _runs(fn, corpus, batch, column, threshold, verify, order_by, memory_limit, corpus_storage, batch_storage,
                 executor, ray_address)
    return lists_of_records([[record_dict(prefixed(fn, run, **kw))] for kw in runs], _INGEST_ARROW)


def cleanup(dataset, older_than, storage) -> pa.Array:
    from lance_minhash_sql.lifecycle.cleanup import cleanup as run

    fn = "minhash_cleanup"
    out = []
    for row in scalar_rows(fn, dataset=dataset, older_than=older_than, storage=storage):
        require(fn, row, "dataset", "older_than")
        r = prefixed(fn, run, row["dataset"], row["older_than"], storage_options=options_of(row["storage"]))
        out.append([record_dict(r)])
    return lists_of_records(out, _CLEANUP_ARROW)


INGEST_UDFS: tuple[Udf, ...] = (
    Udf("_lms_ingest_plan", ingest_plan, _ARGS, PLAN_TYPE, True),
    Udf("_lms_ingest", ingest, _ARGS, INGEST_TYPE, True),
    Udf("_lms_cleanup", cleanup, ("VARCHAR", "DOUBLE", "VARCHAR"), CLEANUP_TYPE, True),
)
