"""UDFs behind the index lifecycle macros (``sql/lifecycle.sql``): optimize and prewarm.

Same shape as :mod:`.tables`: each UDF returns ``LIST<STRUCT>`` (one struct per call),
unnested by a TEMP table macro; registered with ``side_effects`` so DuckDB runs it once,
at execution, and with ``null_handling="special"`` so a NULL argument is an error.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

from ..errors import InvalidParameterError
from .storage import options_of
from .tables import TableUdf, list_of_structs, require, scalars

__all__ = ["LIFECYCLE_UDFS", "OPTIMIZE_TYPE", "PREWARM_TYPE"]

OPTIMIZE_TYPE = "STRUCT(index_name VARCHAR, \"column\" VARCHAR, action VARCHAR, segments_before INTEGER, " \
                "segments_after INTEGER, merged_segments INTEGER, new_fragments UINTEGER[], rows_indexed BIGINT, " \
                "rows_added BIGINT, rows_dropped BIGINT, rows_without_tokens BIGINT, segment_uuid VARCHAR, " \
                "seconds DOUBLE, bytes BIGINT, dataset_version BIGINT)[]"
_OPTIMIZE_ARROW = pa.list_(pa.struct([
    ("index_name", pa.string()), ("column", pa.string()), ("action", pa.string()),
    ("segments_before", pa.int32()), ("segments_after", pa.int32()), ("merged_segments", pa.int32()),
    ("new_fragments", pa.list_(pa.uint32())), ("rows_indexed", pa.int64()), ("rows_added", pa.int64()),
    ("rows_dropped", pa.int64()), ("rows_without_tokens", pa.int64()), ("segment_uuid", pa.string()),
    ("seconds", pa.float64()), ("bytes", pa.int64()), ("dataset_version", pa.int64()),
]))

PREWARM_TYPE = "STRUCT(\"column\" VARCHAR, segments INTEGER, bytes_loaded BIGINT, cache_bytes BIGINT, " \
               "cache_capacity BIGINT, signatures_loaded BIGINT, signatures_total BIGINT, " \
               "band_pages_loaded BIGINT, band_pages_total BIGINT, complete BOOLEAN, seconds DOUBLE)[]"
_PREWARM_ARROW = pa.list_(pa.struct([
    ("column", pa.string()), ("segments", pa.int32()), ("bytes_loaded", pa.int64()), ("cache_bytes", pa.int64()),
    ("cache_capacity", pa.int64()), ("signatures_loaded", pa.int64()), ("signatures_total", pa.int64()),
    ("band_pages_loaded", pa.int64()), ("band_pages_total", pa.int64()), ("complete", pa.bool_()),
    ("seconds", pa.float64()),
]))


def _row(result, type_: pa.DataType) -> list[dict]:
    return [{f.name: getattr(result, f.name) for f in type_.value_type}]


def optimize(dataset, column, merge, storage) -> pa.Array:
    from ..index.optimize import optimize as run

    fn = "minhash_optimize"
    out = []
    for row in scalars(fn, dataset=dataset, column=column, merge=merge, storage=storage):
        require(fn, row, "dataset", "column", "merge")
        try:
            how = json.loads(row["merge"])  # to_json() of an integer, 'all' or a list of uuids
        except ValueError:
            how = row["merge"]
        try:
            r = run(row["dataset"], row["column"], merge=how, storage_options=options_of(row["storage"]))
        except InvalidParameterError as exc:
            raise type(exc)(f"{fn}: {exc}") from None
        out.append(_row(r, _OPTIMIZE_ARROW))
    return list_of_structs(out, _OPTIMIZE_ARROW)


_DIGITS = re.compile(r"^\s*\d+\s*$")


def _cache_bytes(value) -> int | None:
    """NULL (keep the capacity), a byte count, or a size such as '512MiB'."""
    if value is None:
        return None
    if _DIGITS.match(value):
        return int(value)
    from ..index.spill import parse_bytes

    return parse_bytes(value, "cache_bytes")


def prewarm(dataset, column, cache_bytes, storage) -> pa.Array:
    from ..index.prewarm import prewarm as run

    fn = "minhash_prewarm"
    out = []
    for row in scalars(fn, dataset=dataset, column=column, cache_bytes=cache_bytes, storage=storage):
        require(fn, row, "dataset", "column")
        try:
            r = run(row["dataset"], row["column"], cache_bytes=_cache_bytes(row["cache_bytes"]),
                    storage_options=options_of(row["storage"]))
        except InvalidParameterError as exc:
            raise type(exc)(f"{fn}: {exc}") from None
        out.append(_row(r, _PREWARM_ARROW))
    return list_of_structs(out, _PREWARM_ARROW)


LIFECYCLE_UDFS: tuple[TableUdf, ...] = (
    TableUdf("_lms_optimize", optimize, ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"), OPTIMIZE_TYPE, True),
    TableUdf("_lms_prewarm", prewarm, ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"), PREWARM_TYPE, True),
)
