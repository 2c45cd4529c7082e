"""UDFs behind the table macros: build, index listing, search.

DuckDB's Python API registers scalar functions only, so every table-shaped function is a
TEMP ``CREATE MACRO ... AS TABLE`` (``sql/index.sql``) over a UDF that returns
``LIST<STRUCT>``, unnested. Each UDF is registered once per database with a fixed return
type; the dataset's own columns, whose types differ per dataset, reach SQL this way:

1. ``_lms_search_plan(...)`` is cheap and constant-folded at plan time: it reads only the
   dataset schema and returns a SQL text for ``query()``;
2. that text calls ``_lms_search_hits(...)`` (``side_effects``: it runs once, at
   execution), which searches, keeps the result table in a small process-wide cache, and
   returns a handle per hit ``(result id << 32 | row)``;
3. the text selects each user column through a typed getter ``_lms_take_<type>(handle,
   column)``, one per DuckDB type (nested types travel as JSON and are cast back), so
   every column keeps its real type.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Callable, NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import InvalidInputError, InvalidParameterError
from .udfs import _array

__all__ = ["TABLE_UDFS", "search_sql", "RESULT_CACHE_ENTRIES"]

RESULT_CACHE_ENTRIES = 1024


class _Results:
    """Search results waiting for their getters, by result id (bounded, thread-safe)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._tables: OrderedDict[int, pa.Table] = OrderedDict()
        self._next = 1
        self._lock = threading.Lock()

    def put(self, table: pa.Table) -> int:
        with self._lock:
            rid = self._next
            self._next = self._next % 0xFFFFFFFF + 1
            self._tables[rid] = table
            while len(self._tables) > self.capacity:
                self._tables.popitem(last=False)
            return rid

    def get(self, rid: int) -> pa.Table:
        with self._lock:
            try:
                return self._tables[rid]
            except KeyError:
                raise InvalidInputError(
                    f"search result {rid} is no longer cached; run the minhash_search query again"
                ) from None


_RESULTS = _Results(RESULT_CACHE_ENTRIES)


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
    if float(value) != int(value):
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


def build(dataset, column, num_hashes, num_bands, shingle_size, threshold, tokenizer, replace) -> pa.Array:
    from ..index.build import build_index

    fn = "minhash_build"
    out = []
    for row in _scalars(fn, dataset=dataset, column=column, num_hashes=num_hashes, num_bands=num_bands,
                        shingle_size=shingle_size, threshold=threshold, tokenizer=tokenizer, replace=replace):
        _require(fn, row, "dataset", "column", "num_hashes", "shingle_size", "replace")
        tok = row["tokenizer"]
        tok = None if tok in (None, "null") else json.loads(tok)
        if isinstance(tok, str):  # a JSON string given as text: parse it once more
            tok = json.loads(tok)
        r = build_index(row["dataset"], row["column"], num_hashes=_int(fn, "num_hashes", row["num_hashes"]),
                        num_bands=_int(fn, "num_bands", row["num_bands"]),
                        shingle_size=_int(fn, "shingle_size", row["shingle_size"]),
                        threshold=row["threshold"], tokenizer=tok, replace=bool(row["replace"]))
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


def indexes(dataset) -> pa.Array:
    from ..index.info import index_segments

    fn = "minhash_indexes"
    out = []
    for row in _scalars(fn, dataset=dataset):
        _require(fn, row, "dataset")
        out.append(index_segments(row["dataset"]))
    return _list_of_structs(out, _INDEXES_ARROW)


# --------------------------------------------------------------------------- search

IDS_TYPE = "STRUCT(_rowid UBIGINT, _distance FLOAT)[]"
_IDS_ARROW = pa.list_(pa.struct([("_rowid", pa.uint64()), ("_distance", pa.float32())]))
HITS_TYPE = "STRUCT(_h UBIGINT, _rowid UBIGINT, _distance FLOAT)[]"
_HITS_ARROW = pa.list_(pa.struct([("_h", pa.uint64()), ("_rowid", pa.uint64()), ("_distance", pa.float32())]))


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


def search_ids(dataset, column, query, k, fast_search) -> pa.Array:
    """One list of (_rowid, _distance) per input row; rows sharing (dataset, column, k)
    are searched as one batch."""
    from ..index.search import search_ids as run

    fn = "minhash_search_ids"
    rows = _scalars(fn, dataset=dataset, column=column, query=query, k=k, fast_search=fast_search)
    groups: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        _require(fn, row, "dataset", "column", "k", "fast_search")
        _check_query(fn, row["query"])
        key = (row["dataset"], row["column"], _int(fn, "k", row["k"]), bool(row["fast_search"]))
        groups.setdefault(key, []).append(i)
    owners, rowids, dists = [], [], []
    for (ds, col, kk, fast), idx in groups.items():
        table = run(ds, col, [rows[i]["query"] for i in idx], kk, fast_search=fast)
        owners.append(np.asarray(idx, dtype=np.int64)[table.column("query_index").to_numpy()])
        rowids.append(table.column("_rowid").combine_chunks())
        dists.append(table.column("_distance").combine_chunks())
    fields = {"_rowid": pa.concat_arrays(rowids) if rowids else pa.array([], pa.uint64()),
              "_distance": pa.concat_arrays(dists) if dists else pa.array([], pa.float32())}
    owner = np.concatenate(owners) if owners else np.empty(0, np.int64)
    return _lists_by_row(len(rows), owner, fields, _IDS_ARROW)


def search_hits(dataset, column, query, k, fast_search, filter_) -> pa.Array:
    from ..index.search import search as run

    fn = "minhash_search"
    owners, handles, rowids, dists = [], [], [], []
    rows = _scalars(fn, dataset=dataset, column=column, query=query, k=k, fast_search=fast_search, filter=filter_)
    for i, row in enumerate(rows):
        _require(fn, row, "dataset", "column", "k", "fast_search")
        table = run(row["dataset"], row["column"], _check_query(fn, row["query"]), _int(fn, "k", row["k"]),
                    fast_search=bool(row["fast_search"]), filter=row["filter"])
        rid = _RESULTS.put(table)
        n = table.num_rows
        owners.append(np.full(n, i, dtype=np.int64))
        handles.append(pa.array((np.uint64(rid) << np.uint64(32)) | np.arange(n, dtype=np.uint64)))
        rowids.append(table.column("_rowid").combine_chunks())
        dists.append(table.column("_distance").combine_chunks())
    fields = {"_h": pa.concat_arrays(handles), "_rowid": pa.concat_arrays(rowids),
              "_distance": pa.concat_arrays(dists)}
    return _lists_by_row(len(rows), np.concatenate(owners), fields, _HITS_ARROW)


# DuckDB type of each getter, and the Arrow types it serves.
_GETTERS = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INTEGER": pa.int32(),
    "BIGINT": pa.int64(), "UTINYINT": pa.uint8(), "USMALLINT": pa.uint16(), "UINTEGER": pa.uint32(),
    "UBIGINT": pa.uint64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(),
    "BLOB": pa.binary(), "DATE": pa.date32(), "TIME": pa.time64("us"), "TIMESTAMP": pa.timestamp("us"),
    "TIMESTAMP_S": pa.timestamp("s"), "TIMESTAMP_MS": pa.timestamp("ms"), "TIMESTAMP_NS": pa.timestamp("ns"),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
}
_JSON = "JSON"


def _column_values(handles, column) -> tuple[pa.Array, pa.DataType]:
    h = _array(handles).to_numpy(zero_copy_only=False)
    name = _array(column)[0].as_py()
    if len(h) == 0:
        return pa.array([], pa.null()), pa.null()
    rids = (h >> np.uint64(32)).astype(np.int64)
    pos = (h & np.uint64(0xFFFFFFFF)).astype(np.int64)
    parts = []
    for rid in np.unique(rids):
        table = _RESULTS.get(int(rid))
        mask = rids == rid
        parts.append((np.flatnonzero(mask), table.column(name).combine_chunks().take(pa.array(pos[mask]))))
    if len(parts) == 1:
        return parts[0][1], parts[0][1].type
    order = np.argsort(np.concatenate([p[0] for p in parts]), kind="stable")
    values = pa.concat_arrays([p[1] for p in parts]).take(pa.array(order))
    return values, values.type


def _getter(duck_type: str) -> Callable:
    target = _GETTERS.get(duck_type)

    def take(handles, column):
        values, _ = _column_values(handles, column)
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        if target is None:  # JSON: nested or exotic types, cast back in SQL
            return pa.array([None if v is None else json.dumps(v, default=str) for v in values.to_pylist()],
                            pa.string())
        return values.cast(target)

    take.__name__ = f"take_{duck_type.lower()}"
    return take


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


def search_sql(schema: pa.Schema, args: tuple) -> str:
    """The SQL that ``query()`` runs for one ``minhash_search`` call."""
    hits = f"_lms_search_hits({', '.join(_literal(a) for a in args)})"
    return (f"SELECT {_select_list(schema)} FROM (SELECT unnest({hits}, recursive := true)) "
            "ORDER BY _distance, _rowid")


_SELECT_LISTS: OrderedDict = OrderedDict()


def _select_list(schema: pa.Schema) -> str:
    """The typed getters of a schema's columns (memoized per schema)."""
    key = schema.to_string(show_field_metadata=False, show_schema_metadata=False)
    with _TYPE_LOCK:
        hit = _SELECT_LISTS.get(key)
    if hit is not None:
        return hit
    cols = []
    for field in schema:
        if field.name in ("_rowid", "_distance", "_h"):
            continue
        t = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        duck = _duck_type_of(pa.field(field.name, t))
        getter = duck if duck in _GETTERS else _JSON
        expr = f"_lms_take_{getter.lower()}(_h, {_literal(field.name)})"
        if getter == _JSON:
            expr = f"CAST({expr}::JSON AS {duck})"
        cols.append(f"{expr} AS {_ident(field.name)}")
    select = ", ".join(cols + ["_rowid", "_distance"])
    with _TYPE_LOCK:
        _SELECT_LISTS[key] = select
        while len(_SELECT_LISTS) > 256:
            _SELECT_LISTS.popitem(last=False)
    return select


def search_plan(dataset, column, query, k, fast_search, filter_) -> pa.Array:
    from ..index.info import result_schema

    fn = "minhash_search"
    out = []
    for row in _scalars(fn, dataset=dataset, column=column, query=query, k=k, fast_search=fast_search,
                        filter=filter_):
        _require(fn, row, "dataset", "column", "k", "fast_search")
        schema = result_schema(row["dataset"], row["column"])
        args = (row["dataset"], row["column"], row["query"], _int(fn, "k", row["k"]), bool(row["fast_search"]),
                row["filter"])
        out.append(search_sql(schema, args))
    return pa.array(out, pa.string())


class TableUdf(NamedTuple):
    name: str
    function: Callable
    parameters: tuple[str, ...]
    return_type: str
    side_effects: bool


TABLE_UDFS: tuple[TableUdf, ...] = (
    TableUdf("_lms_build", build, ("VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR",
                                   "BOOLEAN"), BUILD_TYPE, True),
    TableUdf("_lms_indexes", indexes, ("VARCHAR",), INDEXES_TYPE, True),
    TableUdf("_lms_search_ids", search_ids, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "BOOLEAN"), IDS_TYPE, True),
    TableUdf("_lms_search_hits", search_hits, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "BOOLEAN", "VARCHAR"),
             HITS_TYPE, True),
    TableUdf("_lms_search_plan", search_plan, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "BOOLEAN", "VARCHAR"),
             "VARCHAR", False),
) + tuple(TableUdf(f"_lms_take_{t.lower()}", _getter(t), ("UBIGINT", "VARCHAR"), "VARCHAR" if t == _JSON else t,
                   True) for t in (*_GETTERS, _JSON))
