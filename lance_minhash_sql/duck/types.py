"""DuckDB types derived from Arrow types, so every UDF's SQL return type is written once,
as the Arrow schema of what it returns (a record's schema: ``records.py``).

The mapping is DuckDB's own for these Arrow types (``tests/test_duck_tables.py`` checks it
against ``duckdb.from_arrow`` for every registered UDF).

>>> duck_type(pa.list_(pa.struct([("_rowid", pa.uint64()), ("_distance", pa.float32())])))
'STRUCT("_rowid" UBIGINT, "_distance" FLOAT)[]'
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["duck_type", "list_of", "rows_type"]

_SCALARS = {
    pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.binary(): "BLOB", pa.large_binary(): "BLOB",
    pa.bool_(): "BOOLEAN", pa.float32(): "FLOAT", pa.float64(): "DOUBLE",
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER", pa.uint64(): "UBIGINT",
}


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def duck_type(t: pa.DataType | pa.Schema) -> str:
    """The DuckDB type of an Arrow type (a schema is the struct of its fields)."""
    if isinstance(t, pa.Schema):
        t = pa.struct(list(t))
    if t in _SCALARS:
        return _SCALARS[t]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return duck_type(t.value_type) + "[]"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f"{_ident(f.name)} {duck_type(f.type)}" for f in t) + ")"
    raise TypeError(f"no DuckDB type declared for Arrow type {t}")


def list_of(schema: pa.Schema) -> pa.ListType:
    """``list<struct<schema's fields>>``: what a table UDF returns per input row."""
    return pa.list_(pa.struct(list(schema)))


def rows_type(schema: pa.Schema) -> tuple[pa.ListType, str]:
    """``(Arrow type, DuckDB type)`` of a table UDF returning rows of ``schema``."""
    arrow = list_of(schema)
    return arrow, duck_type(arrow)
