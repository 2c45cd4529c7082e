"""What the UDFs return: DuckDB types derived from Arrow types, so every UDF's SQL return
type is written once, as the Arrow schema of what it returns (a record's schema:
``records.py``), and the ``LIST<STRUCT>`` values of the table UDFs, one list per input row.

The mapping is DuckDB's own for these Arrow types (``tests/test_duck_tables.py`` checks it
against ``duckdb.from_arrow`` for every registered UDF).

>>> duck_type(pa.list_(pa.struct([("_rowid", pa.uint64()), ("_distance", pa.float32())])))
'STRUCT("_rowid" UBIGINT, "_distance" FLOAT)[]'
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa

from lance_minhash_sql.duck.sqltext import ident

__all__ = ["duck_type", "list_of", "rows_type", "lists_of_records", "lists_of_columns", "lists_of_tables",
           "collect_columns"]

_SCALARS = MappingProxyType({
    pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.binary(): "BLOB", pa.large_binary(): "BLOB",
    pa.bool_(): "BOOLEAN", pa.float32(): "FLOAT", pa.float64(): "DOUBLE",
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER", pa.uint64(): "UBIGINT",
})


def duck_type(t: pa.DataType | pa.Schema) -> str:
    """The DuckDB type of an Arrow type (a schema is the struct of its fields)."""
    if isinstance(t, pa.Schema):
        t = pa.struct(list(t))
    if t in _SCALARS:
        return _SCALARS[t]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return duck_type(t.value_type) + "[]"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f"{ident(f.name)} {duck_type(f.type)}" for f in t) + ")"
    raise TypeError(f"no DuckDB type declared for Arrow type {t}")


def list_of(schema: pa.Schema) -> pa.ListType:
    """``list<struct<schema's fields>>``: what a table UDF returns per input row."""
    return pa.list_(pa.struct(list(schema)))


def rows_type(schema: pa.Schema) -> tuple[pa.ListType, str]:
    """``(Arrow type, DuckDB type)`` of a table UDF returning rows of ``schema``."""
    arrow = list_of(schema)
    return arrow, duck_type(arrow)


def lists_of_records(rows_per_input: list[list[dict]], type_: pa.ListType) -> pa.Array:
    """One list per input row from the rows (dicts by field name) it returned."""
    offsets = np.zeros(len(rows_per_input) + 1, dtype=np.int32)
    np.cumsum([len(r) for r in rows_per_input], out=offsets[1:])
    values = pa.array([row for rows in rows_per_input for row in rows], type=type_.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=type_)


def lists_of_columns(parts: list, type_: pa.ListType) -> pa.Array:
    """One list per input row from its columns (a list of arrays in field order; ``None``:
    an empty list). One part is the usual case (one call, one input row) and costs no copy."""
    fields = list(type_.value_type)
    empty = [pa.array([], f.type) for f in fields]
    if len(parts) == 1:
        cols = [c.cast(f.type) for c, f in zip(parts[0] or empty, fields)]
    else:
        cols = [pa.concat_arrays([(p if p is not None else empty)[i].cast(f.type) for p in parts])
                for i, f in enumerate(fields)]
    counts = [0 if p is None else len(p[0]) for p in parts]
    offsets = np.zeros(len(parts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    values = pa.StructArray.from_arrays(cols, fields=fields)
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=type_)


def lists_of_tables(tables: list[pa.Table], type_: pa.ListType) -> pa.Array:
    """One list per input row from the table it returned (columns taken by field name)."""
    return lists_of_columns([[t.column(f.name).combine_chunks() for f in type_.value_type] for t in tables], type_)


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def collect_columns(batches: Iterable[pa.RecordBatch], max_rows: int, too_many: Callable[[], Exception]
                    ) -> list[pa.Array] | None:
    """One array per column of the streamed ``batches`` (``None`` when they hold no row),
    raising ``too_many()`` as soon as more than ``max_rows`` rows have arrived.

    A numeric column without NULLs is copied batch by batch into its final array, each
    batch dropped once copied: the peak is the result plus one batch, not twice the
    result. A column that is NULL throughout becomes one NULL array (no values copied);
    any other column is concatenated as it is.
    """
    held, total = [], 0
    for b in batches:
        total += b.num_rows
        if total > max_rows:
            raise too_many()
        if b.num_rows:
            held.append(b)
    if not held:
        return None
    schema = held[0].schema
    nulls = [sum(b.column(i).null_count for b in held) for i in range(len(schema))]
    copied = {i: np.empty(total, dtype=f.type.to_pandas_dtype()) for i, f in enumerate(schema)
              if nulls[i] == 0 and _numeric(f.type)}
    kept = {i: [b.column(i) for b in held] for i in range(len(schema)) if i not in copied and nulls[i] < total}
    pos = 0
    for j in range(len(held)):
        batch, held[j] = held[j], None
        for i, values in copied.items():
            values[pos:pos + batch.num_rows] = batch.column(i).to_numpy()
        pos += batch.num_rows
        del batch
    return [pa.array(copied.pop(i), f.type) if i in copied else
            pa.concat_arrays(kept.pop(i)) if i in kept else pa.nulls(total, f.type)
            for i, f in enumerate(schema)]
