"""UDFs behind the table macros: build, index listing, search.

DuckDB's Python API registers scalar functions only, so every table-shaped function is a
TEMP ``CREATE MACRO ... AS TABLE`` (``sql/index.sql``) over a UDF that returns
``LIST<STRUCT>``, unnested. Each UDF is registered once per database with a fixed return
type; the dataset's own columns, whose types differ per dataset, reach SQL this way:

1. ``_lms_search_plan(...)`` is cheap and constant-folded at plan time: it reads only the
   dataset's schema and version and returns a SQL text for ``query()``;
2. that text makes one call of ``_lms_search_rows(..., version)`` (``side_effects``: it
   runs once, at execution, on exactly the planned version), which returns the hits with
   every user column packed into typed "carrier" lists (one list per column);
3. the text unnests the carriers in lockstep and casts each column back to its own type.

One UDF call per statement keeps a single SQL search within a few tenths of a
millisecond of the search itself (measured: a typed getter UDF per column cost about
0.9 ms each).
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from typing import Any, Callable, NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import InvalidInputError, InvalidParameterError
from .storage import options_of
from .udfs import _array, _prefixed

__all__ = ["TABLE_UDFS", "search_sql"]


def _scalars(fn: str, **columns) -> list[dict[str, Any]]:
    """Rows of the UDF's argument columns as Python values."""
    arrays = {k: _array(v).to_pylist() for k, v in columns.items()}
    n = len(next(iter(arrays.values())))
    return [{k: arrays[k][i] for k in arrays} for i in range(n)]


def _require(fn: str, row: dict, *names: str) -> None:
    for name in names:
        if row[name] is None:
            raise InvalidInputError(f"{fn}: {name} is NULL; pass a value")


def _int(fn: str, name: str, value) -> int | None:
    if value is None:
        return None
    if not math.isfinite(float(value)) or float(value) != int(value):
        raise InvalidParameterError(f"{fn}: {name}={value!r} must be an integer")
    return int(value)


def _list_of_structs(rows_per_input: list[list[dict]], type_: pa.DataType) -> pa.Array:
    offsets = np.zeros(len(rows_per_input) + 1, dtype=np.int32)
    np.cumsum([len(r) for r in rows_per_input], out=offsets[1:])
    values = pa.array([row for rows in rows_per_input for row in rows], type=type_.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=type_)


# --------------------------------------------------------------------------- build

BUILD_TYPE = "STRUCT(index_name VARCHAR, \"column\" VARCHAR, num_hashes INTEGER, num_bands INTEGER, " \
             "rows_per_band INTEGER, shingle_size INTEGER, tokenizer VARCHAR, segments INTEGER, " \
             "rows_indexed BIGINT, rows_without_tokens BIGINT, seconds DOUBLE, bytes BIGINT, " \
             "dataset_version BIGINT)[]"
_BUILD_ARROW = pa.list_(pa.struct([
    ("index_name", pa.string()), ("column", pa.string()), ("num_hashes", pa.int32()),
    ("num_bands", pa.int32()), ("rows_per_band", pa.int32()), ("shingle_size", pa.int32()),
    ("tokenizer", pa.string()), ("segments", pa.int32()), ("rows_indexed", pa.int64()),
    ("rows_without_tokens", pa.int64()), ("seconds", pa.float64()), ("bytes", pa.int64()),
    ("dataset_version", pa.int64()),
]))


def build(dataset, column, num_hashes, num_bands, shingle_size, threshold, tokenizer, replace, storage) -> pa.Array:
    from ..index.build import build_index

    fn = "minhash_build"
    out = []
    for row in _scalars(fn, dataset=dataset, column=column, num_hashes=num_hashes, num_bands=num_bands,
                        shingle_size=shingle_size, threshold=threshold, tokenizer=tokenizer, replace=replace,
                        storage=storage):
        _require(fn, row, "dataset", "column", "num_hashes", "shingle_size", "replace")
        tok = row["tokenizer"]
        tok = None if tok in (None, "null") else json.loads(tok)
        if isinstance(tok, str):  # a JSON string given as text: parse it once more
            tok = json.loads(tok)
        r = build_index(row["dataset"], row["column"], num_hashes=_int(fn, "num_hashes", row["num_hashes"]),
                        num_bands=_int(fn, "num_bands", row["num_bands"]),
                        shingle_size=_int(fn, "shingle_size", row["shingle_size"]),
                        threshold=row["threshold"], tokenizer=tok, replace=bool(row["replace"]),
                        storage_options=options_of(row["storage"]))
        out.append([{f.name: getattr(r, f.name) for f in _BUILD_ARROW.value_type}])
    return _list_of_structs(out, _BUILD_ARROW)


# --------------------------------------------------------------------------- indexes

INDEXES_TYPE = "STRUCT(index_name VARCHAR, \"column\" VARCHAR, segment_uuid VARCHAR, num_hashes INTEGER, " \
               "num_bands INTEGER, rows_per_band INTEGER, shingle_size INTEGER, tokenizer VARCHAR, " \
               "fragment_ids UINTEGER[], \"rows\" BIGINT, bytes BIGINT, dataset_version BIGINT)[]"
_INDEXES_ARROW = pa.list_(pa.struct([
    ("index_name", pa.string()), ("column", pa.string()), ("segment_uuid", pa.string()),
    ("num_hashes", pa.int32()), ("num_bands", pa.int32()), ("rows_per_band", pa.int32()),
    ("shingle_size", pa.int32()), ("tokenizer", pa.string()), ("fragment_ids", pa.list_(pa.uint32())),
    ("rows", pa.int64()), ("bytes", pa.int64()), ("dataset_version", pa.int64()),
]))


def indexes(dataset, storage) -> pa.Array:
    from ..index.info import index_segments

    fn = "minhash_indexes"
    out = []
    for row in _scalars(fn, dataset=dataset, storage=storage):
        _require(fn, row, "dataset")
        out.append(index_segments(row["dataset"], options_of(row["storage"])))
    return _list_of_structs(out, _INDEXES_ARROW)


# --------------------------------------------------------------------------- search

IDS_TYPE = "STRUCT(_rowid UBIGINT, _distance FLOAT, _jaccard DOUBLE)[]"
_IDS_ARROW = pa.list_(pa.struct([("_rowid", pa.uint64()), ("_distance", pa.float32()), ("_jaccard", pa.float64())]))


def _check_query(fn: str, value) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{fn}: query is {'NULL' if value is None else type(value).__name__}; pass a text")
    return value


def _lists_by_row(n: int, row_of_hit: np.ndarray, fields: dict[str, pa.Array], type_: pa.DataType) -> pa.Array:
    """``n`` lists of structs: hit ``j`` goes to input row ``row_of_hit[j]`` (hits of a row in order)."""
    order = np.argsort(row_of_hit, kind="stable")
    counts = np.bincount(row_of_hit, minlength=n) if len(row_of_hit) else np.zeros(n, np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    take = pa.array(order)
    values = pa.StructArray.from_arrays([fields[f.name].take(take) for f in type_.value_type],
                                        fields=list(type_.value_type))
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=type_)


def search_ids(dataset, column, query, k, threshold, exact, fast_search, storage) -> pa.Array:
    """One list of (_rowid, _distance, _jaccard) per input row; rows sharing (dataset,
    column, k, threshold, exact, storage options) are searched as one batch."""
    from ..index.search import search_ids as run

    fn = "minhash_search_ids"
    rows = _scalars(fn, dataset=dataset, column=column, query=query, k=k, threshold=threshold, exact=exact,
                    fast_search=fast_search, storage=storage)
    groups: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        _require(fn, row, "dataset", "column", "exact", "fast_search")
        _check_query(fn, row["query"])
        key = (row["dataset"], row["column"], _int(fn, "k", row["k"]), row["threshold"], bool(row["exact"]),
               bool(row["fast_search"]), row["storage"])
        groups.setdefault(key, []).append(i)
    owners, rowids, dists, jacs = [], [], [], []
    for (ds, col, kk, t, exact_, fast, token), idx in groups.items():
        table = _prefixed(fn, lambda: run(ds, col, [rows[i]["query"] for i in idx], kk, threshold=t, exact=exact_,
                                          fast_search=fast, storage_options=options_of(token)))
        owners.append(np.asarray(idx, dtype=np.int64)[table.column("query_index").to_numpy()])
        rowids.append(table.column("_rowid").combine_chunks())
        dists.append(table.column("_distance").combine_chunks())
        jacs.append(table.column("_jaccard").combine_chunks() if exact_ else pa.nulls(table.num_rows, pa.float64()))
    fields = {"_rowid": pa.concat_arrays(rowids) if rowids else pa.array([], pa.uint64()),
              "_distance": pa.concat_arrays(dists) if dists else pa.array([], pa.float32()),
              "_jaccard": pa.concat_arrays(jacs) if jacs else pa.array([], pa.float64())}
    owner = np.concatenate(owners) if owners else np.empty(0, np.int64)
    return _lists_by_row(len(rows), owner, fields, _IDS_ARROW)


# ------------------------------------------------------ search with the dataset's own columns
#
# One UDF call carries every user column of a search result: a struct of the hits' row ids
# and distances and two "carriers", ``s VARCHAR[][]`` and ``x BLOB[][]``, each holding one
# list of values per user column. Scalar columns travel as their exact text (Arrow writes
# the shortest round-trip form of floats and full-precision decimals, dates and times;
# DuckDB's casts read them back to the identical value), BLOBs as bytes, nested and other
# types as JSON. The planned SQL unnests the lists in lockstep and casts each column back
# to its own type. Two carriers rather than one per type: each struct field costs DuckDB
# and Arrow time on every call (11 typed carriers measured 0.5 ms slower per query).

_TEXT_EXACT = frozenset({
    "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "FLOAT", "DOUBLE", "VARCHAR", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS",
    "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE",
})
ROWS_TYPE = "STRUCT(_rowid UBIGINT[], _distance FLOAT[], _jaccard DOUBLE[], s VARCHAR[][], x BLOB[][])"
_CARRIER_TYPES = {"s": pa.string(), "x": pa.binary()}


class _Slot(NamedTuple):
    column: str
    json: bool  # travels as JSON text (nested and other types)


class _Layout(NamedTuple):
    """Where each user column of a schema travels, and the SQL that brings it back."""

    columns: tuple[str, ...]
    slots: dict[str, tuple[_Slot, ...]]  # carrier field -> its columns, in order
    select: str


def _duck_type_of(field: pa.Field) -> str:
    """The DuckDB type a column arrives as (DuckDB's own Arrow mapping)."""
    con = _type_connection()
    with _TYPE_LOCK:
        return str(con.from_arrow(pa.schema([field]).empty_table()).types[0])


_TYPE_LOCK = threading.Lock()
_TYPE_CON = []


def _type_connection():
    import duckdb

    if not _TYPE_CON:
        _TYPE_CON.append(duckdb.connect())
    return _TYPE_CON[0]


def _literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_LAYOUTS: OrderedDict = OrderedDict()


def _layout(schema: pa.Schema) -> _Layout:
    """The layout of a schema's user columns (memoized per schema)."""
    key = schema.to_string(show_field_metadata=False, show_schema_metadata=False)
    with _TYPE_LOCK:
        hit = _LAYOUTS.get(key)
    if hit is not None:
        return hit
    slots: dict[str, list[_Slot]] = {"s": [], "x": []}
    columns, exprs = [], []
    for field in schema:
        if field.name in ("_rowid", "_distance"):
            continue
        t = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        duck = _duck_type_of(pa.field(field.name, t))
        carrier = "x" if duck == "BLOB" else "s"
        as_json = carrier == "s" and duck not in _TEXT_EXACT and not duck.startswith("DECIMAL")
        slots[carrier].append(_Slot(field.name, as_json))
        expr = f"unnest(r.{carrier}[{len(slots[carrier])}])"
        if as_json:
            expr = f"CAST({expr}::JSON AS {duck})"
        elif duck not in ("VARCHAR", "BLOB"):
            expr = f"CAST({expr} AS {duck})"
        columns.append(field.name)
        exprs.append(f"{expr} AS {_ident(field.name)}")
    select = ", ".join(exprs + ["unnest(r._rowid) AS _rowid", "unnest(r._distance) AS _distance"])
    layout = _Layout(tuple(columns), {k: tuple(v) for k, v in slots.items()}, select)
    with _TYPE_LOCK:
        _LAYOUTS[key] = layout
        while len(_LAYOUTS) > 256:
            _LAYOUTS.popitem(last=False)
    return layout


def _carried(values: pa.ChunkedArray, slot: _Slot, carrier: str) -> pa.Array:
    values = _array(values)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if slot.json:
        return pa.array([None if v is None else json.dumps(v, default=str) for v in values.to_pylist()],
                        pa.string())
    return values.cast(_CARRIER_TYPES[carrier])


def search_rows(dataset, column, query, k, threshold, exact, fast_search, filter_, version, storage) -> dict:
    """The search results with every user column, for the SQL :func:`search_plan` wrote.

    A native (not Arrow) UDF: it answers one statement's one call, where Python values
    cost less than building and importing Arrow arrays (about 1 ms per query measured).
    """
    from ..index.opened import dataset_at
    from ..index.search import search as run

    fn = "minhash_search"
    row = {"dataset": dataset, "column": column, "exact": exact, "fast_search": fast_search, "version": version}
    _require(fn, row, "dataset", "column", "exact", "fast_search", "version")
    options = options_of(storage)
    ds = dataset_at(dataset, int(version), options)
    layout = _layout(ds.schema)
    table = _prefixed(fn, lambda: run(ds, column, _check_query(fn, query), _int(fn, "k", k), threshold=threshold,
                                      exact=bool(exact), fast_search=bool(fast_search), filter=filter_,
                                      columns=list(layout.columns), storage_options=options))
    out = {"_rowid": table.column("_rowid").to_pylist(), "_distance": table.column("_distance").to_pylist(),
           "_jaccard": table.column("_jaccard").to_pylist() if exact else None}
    for carrier in _CARRIER_TYPES:
        out[carrier] = [_carried(table.column(slot.column), slot, carrier).to_pylist()
                        for slot in layout.slots[carrier]]
    return out


def search_sql(schema: pa.Schema, args: tuple) -> str:
    """The SQL that ``query()`` runs for one ``minhash_search`` call on a dataset version
    (storage options travel as their token, never as values)."""
    call = f"_lms_search_rows({', '.join(_literal(a) for a in args)})"
    # The rows arrive ordered by (_distance, _rowid), and unnesting one row keeps list order
    # (no ORDER BY: it cost 0.3-0.4 ms, a tenth of a query). args[5]: exact (adds _jaccard).
    jaccard = ", unnest(r._jaccard) AS _jaccard" if args[5] else ""
    return f"SELECT {_layout(schema).select}{jaccard} FROM (SELECT {call} AS r)"


def search_plan(dataset, column, query, k, threshold, exact, fast_search, filter_, storage) -> str:
    """Constant-folded at plan time: reads the dataset's schema and version only (native UDF)."""
    from ..index.info import search_target
    from ..index.scores import check_limit

    fn = "minhash_search"
    row = {"dataset": dataset, "column": column, "exact": exact, "fast_search": fast_search}
    _require(fn, row, "dataset", "column", "exact", "fast_search")
    _prefixed(fn, check_limit, _int(fn, "k", k), threshold)
    _, version, schema = search_target(dataset, column, options_of(storage))
    return search_sql(schema, (dataset, column, query, _int(fn, "k", k), threshold, bool(exact), bool(fast_search),
                               filter_, version, storage))


class TableUdf(NamedTuple):
    name: str
    function: Callable
    parameters: tuple[str, ...]
    return_type: str
    side_effects: bool
    arrow: bool = True  # Arrow in and out (batches); False: Python values, one call per row


TABLE_UDFS: tuple[TableUdf, ...] = (
    TableUdf("_lms_build", build, ("VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR",
                                   "BOOLEAN", "VARCHAR"), BUILD_TYPE, True),
    TableUdf("_lms_indexes", indexes, ("VARCHAR", "VARCHAR"), INDEXES_TYPE, True),
    TableUdf("_lms_search_ids", search_ids, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "BOOLEAN",
                                              "BOOLEAN", "VARCHAR"), IDS_TYPE, True),
    TableUdf("_lms_search_rows", search_rows, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "BOOLEAN",
                                                "BOOLEAN", "VARCHAR", "BIGINT", "VARCHAR"), ROWS_TYPE, True, False),
    TableUdf("_lms_search_plan", search_plan, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "BOOLEAN",
                                               "BOOLEAN", "VARCHAR", "VARCHAR"), "VARCHAR", False, False),
)
