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

One UDF call per statement keeps a single SQL search close to the search itself: every
further UDF call (a typed getter per column, say) costs DuckDB a fixed overhead.
"""

from __future__ import annotations

import json
import secrets
from types import MappingProxyType
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lance_minhash_sql.runtime.cache import memoized
from lance_minhash_sql.core.records import record_dict, record_schema
from lance_minhash_sql.core.tuning import AWAITING_BYTES, INLINE_MAX_CHARS, SQL_LAYOUTS
from lance_minhash_sql.duck.args import Udf, flag, integer, prefixed, require, scalar_rows, text
from lance_minhash_sql.duck.args import column as column_array
from lance_minhash_sql.duck.args import tokenizer as tokenizer_options
from lance_minhash_sql.duck.args import json_value, verify_exact
from lance_minhash_sql.duck.results import duck_type, lists_of_records, rows_type
from lance_minhash_sql.duck.sqltext import ident, literal
from lance_minhash_sql.duck.storage import options_of
from lance_minhash_sql.duck.storage import storage as storage_token
from lance_minhash_sql.index.results import SEARCH_IDS_EXACT_SCHEMA, BuildResult, IndexSegment
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = ["TABLE_UDFS", "search_sql"]


# --------------------------------------------------------------------------- build

_BUILD_ARROW, BUILD_TYPE = rows_type(record_schema(BuildResult))


def build(dataset, column, num_hashes, num_bands, shingle_size, threshold, tokenizer, replace, storage,
          memory_limit, executor, ray_address) -> pa.Array:
    from lance_minhash_sql.api.entries import build_index

    fn = "minhash_build"
    out = []
    for row in scalar_rows(fn, dataset=dataset, column=column, num_hashes=num_hashes, num_bands=num_bands,
                           shingle_size=shingle_size, threshold=threshold, tokenizer=tokenizer, replace=replace,
                           storage=storage, memory_limit=memory_limit, executor=executor, ray_address=ray_address):
        require(fn, row, "dataset", "column", "num_hashes", "shingle_size", "replace")
        r = prefixed(fn, lambda: build_index(
            row["dataset"], row["column"], num_hashes=integer(fn, "num_hashes", row["num_hashes"]),
            num_bands=integer(fn, "num_bands", row["num_bands"]),
            shingle_size=integer(fn, "shingle_size", row["shingle_size"]),
            threshold=row["threshold"], tokenizer=tokenizer_options(fn, row["tokenizer"]),
            replace=flag(fn, "replace", row["replace"]), memory_limit=row["memory_limit"],
            storage_options=options_of(row["storage"]), executor=row["executor"],
            ray_address=row["ray_address"]))
        out.append([record_dict(r)])
    return lists_of_records(out, _BUILD_ARROW)


# --------------------------------------------------------------------------- indexes

_INDEXES_ARROW, INDEXES_TYPE = rows_type(record_schema(IndexSegment))


def indexes(dataset, storage) -> pa.Array:
    from lance_minhash_sql.index.info import index_segments

    fn = "minhash_indexes"
    out = []
    for row in scalar_rows(fn, dataset=dataset, storage=storage):
        require(fn, row, "dataset")
        out.append(index_segments(row["dataset"], options_of(row["storage"])))
    return lists_of_records(out, _INDEXES_ARROW)


# --------------------------------------------------------------------------- search

_HIT_FIELDS = ("_rowid", "_distance", "_jaccard")  # one search hit as SQL sees it
_IDS_ARROW, IDS_TYPE = rows_type(pa.schema([SEARCH_IDS_EXACT_SCHEMA.field(n) for n in _HIT_FIELDS]))


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


def search_ids(dataset, column, query, k, threshold, exact, fast_search, storage, verify) -> pa.Array:
    """One list of (_rowid, _distance, _jaccard) per input row; rows sharing (dataset,
    column, k, threshold, exact, storage options) are searched as one batch. A NULL query
    gives its row an empty list (no rows in SQL), as NULL input does in SQL; its other
    arguments are still checked."""
    from lance_minhash_sql.query.scores import check_limit
    from lance_minhash_sql.query.topk import search_ids as run

    fn = "minhash_search_ids"
    rows = scalar_rows(fn, dataset=dataset, column=column, query=query, k=k, threshold=threshold, exact=exact,
                       fast_search=fast_search, storage=storage, verify=verify)
    groups: dict[tuple, list[int]] = {}
    for i, row in enumerate(rows):
        require(fn, row, "dataset", "column", "fast_search")
        key = (row["dataset"], row["column"], integer(fn, "k", row["k"]), row["threshold"],
               flag(fn, "fast_search", row["fast_search"]), row["storage"],
               verify_exact(fn, row["verify"], row["exact"]))
        if row["query"] is None:
            prefixed(fn, check_limit, key[2], key[3])
            continue
        text(fn, "query", row["query"])
        groups.setdefault(key, []).append(i)
    owners, rowids, dists, jacs = [], [], [], []
    for (ds, col, kk, t, fast, token, how), idx in groups.items():
        table = prefixed(fn, lambda: run(ds, col, [rows[i]["query"] for i in idx], kk, threshold=t,
                                          fast_search=fast, storage_options=options_of(token), verify=how,
                                          query_rows=[i + 1 for i in idx]))
        exact_ = how == "exact"
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
# and Arrow time on every call.

_TEXT_EXACT = frozenset({
    "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "FLOAT", "DOUBLE", "VARCHAR", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS",
    "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE",
})
_CARRIER_TYPES = MappingProxyType({"s": pa.string(), "x": pa.binary()})
ROWS_TYPE = duck_type(pa.struct([(n, pa.list_(SEARCH_IDS_EXACT_SCHEMA.field(n).type)) for n in _HIT_FIELDS]
                                + [(c, pa.list_(pa.list_(t))) for c, t in _CARRIER_TYPES.items()]))


class _Slot(NamedTuple):
    column: str
    json: bool  # travels as JSON text (nested and other types)


class _Layout(NamedTuple):
    """Where each user column of a schema travels, and the SQL that brings it back."""

    columns: tuple[str, ...]
    slots: dict[str, tuple[_Slot, ...]]  # carrier field -> its columns, in order
    select: str
    # the same columns from a VALUES list ``t(s1, .., x1, .., _rowid, _distance)`` of texts
    inline_select: str
    # each column's expression around its value's text: (VALUES name, before, after)
    cells: tuple[tuple[str, str, str], ...]
    # per cell, what follows a value that needs no cast (a non-NULL VARCHAR: `` AS "name"``), else None
    bare: tuple[str | None, ...]


def _duck_type_of(field: pa.Field) -> str:
    """The DuckDB type a column arrives as: for a flat type :func:`.results.duck_type`
    declares, that (DuckDB's own mapping, checked against it in
    ``tests/test_duck_tables.py``); else DuckDB's own Arrow mapping, asked of a connection
    of its own (the calling one is busy inside a UDF), which costs a new in-memory
    database once per type."""
    if not pa.types.is_nested(field.type):
        try:
            return duck_type(field.type)
        except TypeError:  # not declared there: DuckDB says
            pass
    return _duck_type_named(field.type)


@memoized(1024)
def _duck_type_named(arrow_type: pa.DataType) -> str:
    import duckdb

    con = duckdb.connect()
    try:
        return str(con.from_arrow(pa.schema([pa.field("c", arrow_type)]).empty_table()).types[0])
    finally:
        con.close()


_LAYOUTS = ByteCache.for_objects("SQL result layouts", SQL_LAYOUTS)  # schema text -> _Layout
_INLINE_VALUE = "\x00"  # where a value goes in an expression of layout.cells, while _layout writes it


def _layout(schema: pa.Schema) -> _Layout:
    """The layout of a schema's user columns (memoized per schema)."""
    key = schema.to_string(show_field_metadata=False, show_schema_metadata=False)
    hit = _LAYOUTS.get(key)
    if hit is not None:
        return hit
    slots: dict[str, list[_Slot]] = {"s": [], "x": []}
    columns, exprs, cells, bare = [], [], [], []
    for field in schema:
        if field.name in ("_rowid", "_distance"):
            continue
        t = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        duck = _duck_type_of(pa.field(field.name, t))
        carrier = "x" if duck == "BLOB" else "s"
        as_json = carrier == "s" and duck not in _TEXT_EXACT and not duck.startswith("DECIMAL")
        slots[carrier].append(_Slot(field.name, as_json))
        for source, out in ((f"unnest(r.{carrier}[{len(slots[carrier])}])", exprs), (_INLINE_VALUE, cells)):
            expr = source
            if as_json:
                expr = f"CAST({expr}::JSON AS {duck})"
            elif duck not in ("VARCHAR", "BLOB") or out is cells:  # a VALUES column of NULLs has type NULL
                expr = f"CAST({expr} AS {duck})"
            expr = f"{expr} AS {ident(field.name)}"
            # the value's place is its first occurrence: only the alias after it is the user's text
            out.append((f"{carrier}{len(slots[carrier])}", *expr.split(_INLINE_VALUE, 1)) if out is cells else expr)
        bare.append(f" AS {ident(field.name)}" if duck == "VARCHAR" and not as_json else None)
        columns.append(field.name)
    select = ", ".join(exprs + ["unnest(r._rowid) AS _rowid", "unnest(r._distance) AS _distance"])
    cells += [("_rowid", "CAST(", " AS UBIGINT) AS _rowid"), ("_distance", "CAST(", " AS FLOAT) AS _distance")]
    inline_select = ", ".join(f"{before}t.{name}{after}" for name, before, after in cells)
    bare += [None, None]
    layout = _Layout(tuple(columns), {k: tuple(v) for k, v in slots.items()}, select, inline_select, tuple(cells),
                     tuple(bare))
    _LAYOUTS.put(key, layout)
    return layout


def _carried_texts(values: pa.ChunkedArray, slot: _Slot, carrier: str) -> list:
    """``_carried(values, slot, carrier).to_pylist()``: strings as they are and integers
    by Python's ``str`` (the same text as Arrow's cast) without an Arrow cast, which costs
    a one-row search more than the rest of its SQL text."""
    values = column_array(values)
    t = values.type
    if carrier == "s" and not slot.json:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return values.to_pylist()
        if pa.types.is_integer(t):
            return [None if v is None else str(v) for v in values.to_pylist()]
    return _carried(values, slot, carrier).to_pylist()


def _carried(values: pa.ChunkedArray, slot: _Slot, carrier: str) -> pa.Array:
    values = column_array(values)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if slot.json:
        return pa.array([None if v is None else json.dumps(v, default=str) for v in values.to_pylist()],
                        pa.string())
    return values.cast(_CARRIER_TYPES[carrier])


# Results that search_plan computed while DuckDB planned, too large to inline, waiting for
# the one _lms_search_rows call of their statement (which takes them out): a search runs
# once. A result that does not fit, or whose statement runs again, is computed again.
_AWAITING = ByteCache("search results awaiting execution", AWAITING_BYTES)


def search_rows(dataset, column, query, k, threshold, exact, fast_search, filter_, version, storage,
                handoff) -> dict:
    """The search results with every user column, for the SQL :func:`search_plan` wrote:
    the result it computed (``handoff`` names it), else computed here on ``version``.

    A native (not Arrow) UDF: it answers one statement's one call, where Python values
    cost less than building and importing Arrow arrays.
    """
    fn = "minhash_search"
    row = {"dataset": dataset, "column": column, "exact": exact, "fast_search": fast_search, "version": version}
    require(fn, row, "dataset", "column", "exact", "fast_search", "version")
    computed = None if handoff is None else _AWAITING.get(handoff)
    if computed is not None:
        _AWAITING.drop(handoff)
        layout, table = computed
    else:
        layout, table = _search_table(dataset, column, query, k, threshold, exact, fast_search, filter_,
                                      int(version), options_of(storage))
    out = {"_rowid": table.column("_rowid").to_pylist(), "_distance": table.column("_distance").to_pylist(),
           "_jaccard": table.column("_jaccard").to_pylist() if "_jaccard" in table.column_names else None}
    for carrier in _CARRIER_TYPES:
        out[carrier] = [_carried(table.column(slot.column), slot, carrier).to_pylist()
                        for slot in layout.slots[carrier]]
    return out


def _search_table(dataset, column, query, k, threshold, exact, fast_search, filter_, version: int,
                  options) -> tuple[_Layout, pa.Table]:
    """The search's result table on dataset ``version``, with the layout of its columns."""
    from lance_minhash_sql.io.handles import dataset_at
    from lance_minhash_sql.io.scan import schema_of
    from lance_minhash_sql.query.topk import search as run

    fn = "minhash_search"
    ds = dataset_at(dataset, version, options)
    schema = schema_of(ds)
    layout = _layout(schema)
    if query is None:  # NULL in, no rows out (the arguments are checked by the caller)
        fields = [schema.field(c) for c in layout.columns] + list(SEARCH_IDS_EXACT_SCHEMA)[1:]
        return layout, pa.schema(fields if flag(fn, "exact", exact) else fields[:-1]).empty_table()
    table = prefixed(fn, lambda: run(ds, column, text(fn, "query", query), integer(fn, "k", k), threshold=threshold,
                                     verify="exact" if flag(fn, "exact", exact) else "estimate",
                                     fast_search=flag(fn, "fast_search", fast_search),
                                     filter=filter_, columns=list(layout.columns), storage_options=options))
    return layout, table




def _blob_literal(value) -> str:
    return "NULL" if value is None else "'" + "".join(f"\\x{b:02X}" for b in value) + "'::BLOB"


def inline_sql(layout: _Layout, table: pa.Table) -> str | None:
    """The result as SQL text: a VALUES list of the carried texts (the same texts the
    carriers hold), cast back by ``layout.inline_select``; None when it would be longer
    than :data:`INLINE_MAX_CHARS` or a text holds a NUL (which SQL text cannot carry).

    No row or one row is one ``SELECT`` of the texts cast in place (``layout.cells``;
    no row: of NULLs, ``WHERE false``): DuckDB binds it in about half the time of a
    VALUES list of one row, where a cast per value would cost more than one per column
    from a few rows on (docs/performance.md, "SQL search")."""
    names, columns = [], []
    for carrier, lit in (("s", literal), ("x", _blob_literal)):
        for i, slot in enumerate(layout.slots[carrier], 1):
            values = _carried_texts(table.column(slot.column), slot, carrier)
            if carrier == "s" and any(v is not None and "\x00" in v for v in values):
                return None
            names.append(f"{carrier}{i}")
            columns.append([lit(v) for v in values])
    names += ["_rowid", "_distance"]
    columns.append([str(v) for v in table.column("_rowid").to_pylist()])
    columns.append([repr(v) for v in table.column("_distance").to_pylist()])
    select = layout.inline_select
    cells, bare = layout.cells, layout.bare
    if "_jaccard" in table.column_names:  # exact: the exact Jaccard (NaN when a side has no shingles)
        names.append("_jaccard")
        columns.append([repr(v) if v == v else "'NaN'::DOUBLE" for v in table.column("_jaccard").to_pylist()])
        select += ", CAST(t._jaccard AS DOUBLE) AS _jaccard"
        cells += (("_jaccard", "CAST(", " AS DOUBLE) AS _jaccard"),)
        bare += (None,)
    if table.num_rows <= 1:
        # a non-NULL VARCHAR literal is already typed: its cast would only cost DuckDB time
        value = {name: values[0] if values else "NULL" for name, values in zip(names, columns)}
        one = ", ".join(f"{value[name]}{plain}" if plain is not None and value[name] != "NULL"
                        else f"{before}{value[name]}{after}" for (name, before, after), plain in zip(cells, bare))
        return None if len(one) > INLINE_MAX_CHARS else f"SELECT {one}" + ("" if table.num_rows else " WHERE false")
    rows = ", ".join("(" + ", ".join(vals) + ")" for vals in zip(*columns))
    if len(rows) > INLINE_MAX_CHARS:
        return None
    return f"SELECT {select} FROM (VALUES {rows}) AS t({', '.join(names)})"


def search_sql(schema: pa.Schema, args: tuple, exact: bool) -> str:
    """The SQL that ``query()`` runs for one ``minhash_search`` call on a dataset version:
    one ``_lms_search_rows(*args)`` call (storage options travel as their token, never as
    values); ``exact`` adds the ``_jaccard`` column."""
    call = f"_lms_search_rows({', '.join(literal(a) for a in args)})"
    # The rows arrive ordered by (_distance, _rowid), and unnesting one row keeps list order
    # (so no ORDER BY).
    jaccard = ", unnest(r._jaccard) AS _jaccard" if exact else ""
    return f"SELECT {_layout(schema).select}{jaccard} FROM (SELECT {call} AS r)"


def search_plan(dataset, column, query, k, threshold, exact, verify, fast_search, filter_, options, cid) -> str:
    """Constant-folded at plan time (native UDF, one call per statement): resolves the
    storage options (NULL on a local dataset costs nothing more), reads the dataset's
    version and schema, runs the search on that version and writes its result into the
    SQL as a VALUES list; a result too large for that is handed to the statement's one
    ``_lms_search_rows`` call at execution (through :data:`_AWAITING`), which reads the
    same version. ``exact`` of the SQL it writes is ``verify := 'exact'`` (``exact := true``
    its older spelling)."""
    from lance_minhash_sql.index.info import search_target
    from lance_minhash_sql.query.scores import check_limit

    fn = "minhash_search"
    row = {"dataset": dataset, "column": column, "exact": exact, "fast_search": fast_search}
    require(fn, row, "dataset", "column", "exact", "fast_search")
    limit = integer(fn, "k", k)
    prefixed(fn, check_limit, limit, threshold)
    exact_ = verify_exact(fn, verify, exact) == "exact"
    fast = flag(fn, "fast_search", fast_search)
    token = storage_token(fn, dataset, options, cid)
    opts = options_of(token)
    _, version, schema = search_target(dataset, column, opts)
    layout, table = _search_table(dataset, column, query, limit, threshold, exact_, fast, filter_, version, opts)
    inline = inline_sql(layout, table)
    if inline is not None:
        return inline
    handoff = "lms-result-" + secrets.token_hex(8)
    if not _AWAITING.put(handoff, (layout, table), table.nbytes):
        handoff = None
    return search_sql(schema, (dataset, column, query, limit, threshold, exact_, fast, filter_, version, token,
                               handoff), exact_)


# ------------------------------------------------------ a dataset's rows, with their _rowid


def _rows_of(fn: str, dataset, columns, version: int, options) -> tuple[_Layout, list[str]]:
    """The layout of ``columns`` (a ``to_json()`` list of names; NULL: every column) of
    the dataset at ``version``, and their names."""
    from lance_minhash_sql.core.errors import DatasetError, InvalidParameterError
    from lance_minhash_sql.io.handles import dataset_at
    from lance_minhash_sql.io.scan import schema_of

    schema = schema_of(dataset_at(dataset, version, options))
    names = json_value(columns)
    if names is None:
        names = [n for n in schema.names if n not in ("_rowid", "_distance")]
    elif not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise InvalidParameterError(f"{fn}: columns := {literal(names) if isinstance(names, str) else columns} must "
                                    "be a list of column names, e.g. "
                                    "columns := ['id', 'text'], or NULL for every column")
    missing = [n for n in names if n not in schema.names]
    if missing:
        raise DatasetError(f"{fn}: column(s) {missing} are not in dataset {dataset!r}; its columns are "
                           f"{schema.names}")
    return _layout(pa.schema([schema.field(n) for n in names])), names


def rows_plan(dataset, columns, options, cid) -> str:
    """Constant-folded at plan time: the SQL that ``query()`` runs for ``minhash_rows``:
    one ``_lms_rows_part`` call per fragment of the dataset's current version, each
    returning that fragment's rows as :func:`search_rows` returns a search's (the columns
    in their carriers), unnested and cast back to their types."""
    from lance_minhash_sql.io.handles import open_version
    from lance_minhash_sql.io.scan import fragment_ids

    fn = "minhash_rows"
    require(fn, {"dataset": dataset}, "dataset")
    token = storage_token(fn, dataset, options, cid)
    opened = open_version(dataset, options_of(token))
    layout, _ = _rows_of(fn, dataset, columns, opened.version, opened.storage_options)
    parts = fragment_ids(opened.ds)
    if not parts:  # no fragment: the columns, no row
        return f"SELECT * EXCLUDE (_distance) FROM (SELECT {layout.select} FROM (SELECT NULL::{ROWS_TYPE} AS r))"
    calls = ", ".join(f"({p})" for p in parts)
    args = ", ".join(literal(a) for a in (dataset, opened.version))
    return (f"SELECT * EXCLUDE (_distance) FROM (SELECT {layout.select} FROM (SELECT _lms_rows_part({args}, "
            f"f.fragment, {literal(columns)}, {literal(token)}) AS r FROM (VALUES {calls}) f(fragment)))")


def rows_part(dataset, version, fragment, columns, storage) -> dict:
    """One fragment's rows for the SQL :func:`rows_plan` wrote (native UDF: one call per
    fragment)."""
    from lance_minhash_sql.io.handles import dataset_at
    from lance_minhash_sql.io.scan import fragment_table

    fn = "minhash_rows"
    options = options_of(storage)
    layout, names = _rows_of(fn, dataset, columns, int(version), options)
    table = fragment_table(dataset_at(dataset, int(version), options), int(fragment), names)
    out = {"_rowid": table.column("_rowid").to_pylist(), "_distance": None, "_jaccard": None}
    for carrier in _CARRIER_TYPES:
        out[carrier] = [_carried(table.column(slot.column), slot, carrier).to_pylist()
                        for slot in layout.slots[carrier]]
    return out


TABLE_UDFS: tuple[Udf, ...] = (
    Udf("_lms_rows_plan", rows_plan, ("VARCHAR",) * 4, "VARCHAR", False, False),
    Udf("_lms_rows_part", rows_part, ("VARCHAR", "BIGINT", "BIGINT", "VARCHAR", "VARCHAR"), ROWS_TYPE, True, False),
    Udf("_lms_build", build, ("VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR",
                              "BOOLEAN") + ("VARCHAR",) * 4, BUILD_TYPE, True),
    Udf("_lms_indexes", indexes, ("VARCHAR", "VARCHAR"), INDEXES_TYPE, True),
    Udf("_lms_search_ids", search_ids, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "BOOLEAN", "BOOLEAN",
                                        "VARCHAR", "VARCHAR"), IDS_TYPE, True),
    Udf("_lms_search_rows", search_rows, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "BOOLEAN", "BOOLEAN",
                                          "VARCHAR", "BIGINT", "VARCHAR", "VARCHAR"), ROWS_TYPE, True, False),
    Udf("_lms_search_plan", search_plan, ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "BOOLEAN", "VARCHAR",
                                          "BOOLEAN", "VARCHAR", "VARCHAR", "VARCHAR"), "VARCHAR", False, False),
)
