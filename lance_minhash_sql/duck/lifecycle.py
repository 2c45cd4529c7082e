"""UDFs behind the index lifecycle macros (``sql/lifecycle.sql``): optimize and prewarm.

Same shape as :mod:`.tables`: each UDF returns ``LIST<STRUCT>`` (one struct per call),
unnested by a TEMP table macro; registered with ``side_effects`` so DuckDB runs it once,
at execution, and with ``null_handling="special"`` so a NULL argument is an error.
"""

from __future__ import annotations

import pyarrow as pa

from lance_minhash_sql.core.records import record_dict, record_schema
from lance_minhash_sql.core.sizes import parse_bytes
from lance_minhash_sql.duck.args import Udf, json_value, prefixed, require, scalar_rows
from lance_minhash_sql.duck.results import lists_of_records, rows_type
from lance_minhash_sql.duck.storage import options_of
from lance_minhash_sql.index.results import OptimizeResult, PrewarmResult

__all__ = ["LIFECYCLE_UDFS", "OPTIMIZE_TYPE", "PREWARM_TYPE"]

_OPTIMIZE_ARROW, OPTIMIZE_TYPE = rows_type(record_schema(OptimizeResult))

_PREWARM_ARROW, PREWARM_TYPE = rows_type(record_schema(PrewarmResult))


def optimize(dataset, column, merge, storage) -> pa.Array:
    from lance_minhash_sql.lifecycle.optimize import optimize as run

    fn = "minhash_optimize"
    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, merge=merge, storage=storage):
        require(fn, row, "dataset", "column", "merge")
        how = json_value(row["merge"])  # to_json() of an integer, 'all' or a list of uuids
        r = prefixed(fn, run, row["dataset"], row["column"], merge=how, storage_options=options_of(row["storage"]))
        out.append([record_dict(r)])
    return lists_of_records(out, _OPTIMIZE_ARROW)


def _cache_bytes(value) -> int | None:
    """NULL (keep the capacity), a byte count, or a size such as '512MiB' (:mod:`..core.sizes`)."""
    return None if value is None else parse_bytes(value, "cache_bytes", minimum=0)


def prewarm(dataset, column, cache_bytes, storage) -> pa.Array:
    from lance_minhash_sql.lifecycle.prewarm import prewarm as run

    fn = "minhash_prewarm"
    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, cache_bytes=cache_bytes, storage=storage):
        require(fn, row, "dataset", "column")
        r = prefixed(fn, lambda: run(row["dataset"], row["column"], cache_bytes=_cache_bytes(row["cache_bytes"]),
                                     storage_options=options_of(row["storage"])))
        out.append([record_dict(r)])
    return lists_of_records(out, _PREWARM_ARROW)


LIFECYCLE_UDFS: tuple[Udf, ...] = (
    Udf("_lms_optimize", optimize, ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"), OPTIMIZE_TYPE, True),
    Udf("_lms_prewarm", prewarm, ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"), PREWARM_TYPE, True),
)
