"""Top-k MinHash search that answers exactly as Lance's ``MinHashQuery`` does (``docs/search.md``).

>>> import lance_minhash_sql as lms  # doctest: +SKIP
>>> lms.search("corpus.lance", "text", "the quick brown fox", k=5, columns=["id"])  # doctest: +SKIP
pyarrow.Table
id: int64
_rowid: uint64
_distance: float
...

Semantics, per query:

* the signature and band keys use the parameters stored in the index (never the
  caller's); a query without tokens (``""``, ``"!!! ???"``) returns no rows;
* candidates are the rows that share at least one band key with the query; their
  distance is ``1 - eq / k`` over the full signature, in float32;
* rows deleted after the build, and with ``filter`` the rows that do not match it (a
  Lance filter expression, like Lance's ``prefilter=True``), are dropped *before* the
  top-k cut, so ``k`` rows come back whenever ``k`` candidates qualify;
* each segment's top-k is merged exactly by ``(distance, row id)``; rows of fragments no
  segment covers are signed and scored on the fly by the same code and candidate rule,
  unless ``fast_search=True``;
* ``_rowid`` is exactly Lance's ``_rowid``: the row address, or the stable row id when
  the dataset has stable row ids.

A batch of queries (:func:`search_ids`) runs through every kernel once per segment. Which
engine answers, and how, is ``query/engine.py``'s.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.checks import check_bool, verify_or_exact
from lance_minhash_sql.core.errors import DatasetError, InvalidInputError, InvalidParameterError
from lance_minhash_sql.core.params import threshold_cut
from lance_minhash_sql.index.opened import OpenedIndex, open_index
from lance_minhash_sql.index.results import SEARCH_IDS_EXACT_SCHEMA, SEARCH_IDS_SCHEMA
from lance_minhash_sql.io.arrow import as_string_array
from lance_minhash_sql.query.engine import topk
from lance_minhash_sql.query.scores import apply_scores, check_limit

__all__ = ["search", "search_ids", "SEARCH_IDS_SCHEMA", "SEARCH_IDS_EXACT_SCHEMA"]

_SPECIAL = ("_rowid", "_distance")


# --------------------------------------------------------------------------- validation


def _check_filter(expr: Any) -> str | None:
    if expr is None:
        return None
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidParameterError(
            f"filter={expr!r} must be a non-empty Lance filter expression (SQL) or NULL; e.g. \"id > 10\"")
    return expr


def _checked(k: Any, threshold: Any, verify: Any, exact: Any, fast_search: Any, filter: Any) -> tuple:
    """A search's options, checked: ``(rows per query, threshold or None, verify,
    fast_search, filter or None)``."""
    limit, t = check_limit(k, threshold)
    return limit, t, verify_or_exact(verify, exact), check_bool("fast_search", fast_search), _check_filter(filter)


def _query_array(queries: Any) -> pa.Array:
    if isinstance(queries, str):
        queries = [queries]
    elif queries is None:
        raise InvalidInputError("queries is NULL: pass a string or a list / Arrow array of strings")
    elif not isinstance(queries, (pa.Array, pa.ChunkedArray, Sequence, np.ndarray)):
        raise InvalidInputError(
            f"queries={queries!r} must be a string or a list / Arrow array of strings")
    arr = as_string_array(queries, "queries")
    if arr.null_count:
        first = int(np.flatnonzero(~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False)))[0])
        raise InvalidInputError(
            f"query {first} of {len(arr)} is NULL: a search needs text; drop NULL queries "
            "(e.g. WHERE query IS NOT NULL) or replace them with ''")
    return arr


def _one_query(query: Any) -> pa.Array:
    if query is None:
        raise InvalidInputError("query is NULL: a search needs text; pass a string (a query without "
                                "tokens, such as '', returns no rows)")
    if not isinstance(query, str):
        raise InvalidInputError(f"query={query!r} has type {type(query).__name__}, but a string is required")
    return pa.array([query], type=pa.large_string())


def _columns(opened: OpenedIndex, columns: Any) -> list[str]:
    names = opened.schema.names
    if columns is None:
        return [c for c in names if c not in _SPECIAL]
    if isinstance(columns, str) or not isinstance(columns, (list, tuple)):
        raise InvalidParameterError(f"columns={columns!r} must be a list of column names, or NULL for all")
    out = []
    for c in columns:
        if not isinstance(c, str):
            raise InvalidParameterError(f"columns: {c!r} is not a column name")
        if c in _SPECIAL:
            continue  # always returned, last
        if c not in names:
            raise DatasetError(f"column {c!r} is not in dataset {opened.uri!r}; its columns are {names}")
        if c not in out:
            out.append(c)
    return out


# --------------------------------------------------------------------------- public API


def search_ids(dataset, column: str, queries, k: int | None = 10, *, threshold: float | None = None,
               verify: str = "estimate", exact: bool = False, fast_search: bool = False, filter: str | None = None,
               storage_options: dict | None = None, query_rows=None) -> pa.Table:
    """Top-``k`` row ids and distances of each query, in one pass over the index.

    ``queries`` is a string or a list / Arrow array of strings (NULL entries are refused).
    Returns ``query_index`` (int64, position in ``queries``), ``_rowid`` (uint64),
    ``_distance`` (float32), ordered by ``query_index`` then ``(_distance, _rowid)``.
    ``threshold`` keeps only the hits whose similarity (``1 - _distance``) reaches it, and
    ``k=None`` then means no limit. ``verify="exact"`` adds ``_jaccard`` (float64), the
    exact shingle Jaccard of each hit; with a threshold, the hits whose estimate reaches
    :func:`lance_minhash_sql.core.banding.exact_candidate_floor` are kept iff their exact
    Jaccard reaches it (:mod:`.scores`). ``exact=True`` is the older spelling of
    ``verify="exact"``. ``query_rows``: the row each query comes from, counted from 1, by
    which warnings name it (SQL); without it, its position.
    """
    limit, t, verify, fast, expr = _checked(k, threshold, verify, exact, fast_search, filter)
    texts = _query_array(queries)
    opened = open_index(dataset, column, storage_options)
    cut = threshold_cut(opened.params, t, verify)
    q, rid, dist = topk(opened, texts, limit, fast_search=fast, filter=expr, numbers=query_rows,
                        threshold=t is not None)
    q, rid, dist, jac = apply_scores(opened, texts, q, rid, dist, cut)
    arrays = [pa.array(q, pa.int64()), pa.array(rid, pa.uint64()), pa.array(dist, pa.float32())]
    if jac is None:
        return pa.Table.from_arrays(arrays, schema=SEARCH_IDS_SCHEMA)
    return pa.Table.from_arrays(arrays + [pa.array(jac, pa.float64())], schema=SEARCH_IDS_EXACT_SCHEMA)


def search(dataset, column: str, query: str, k: int | None = 10, *, threshold: float | None = None,
           verify: str = "estimate", exact: bool = False, fast_search: bool = False, filter: str | None = None,
           columns: list[str] | None = None, storage_options: dict | None = None) -> pa.Table:
    """The ``k`` rows nearest to ``query``: the dataset's columns (all, or ``columns``) with
    their own types, then ``_rowid`` (uint64) and ``_distance`` (float32), ordered by
    ``(_distance, _rowid)``.

    ``filter`` is a Lance filter expression applied before the top-k (Lance's
    ``prefilter=True``); ``fast_search=True`` skips fragments no index segment covers.
    ``threshold``, ``k=None`` and ``verify`` (``"exact"``: a last ``_jaccard`` column) as in
    :func:`search_ids`.
    """
    limit, t, verify, fast, expr = _checked(k, threshold, verify, exact, fast_search, filter)
    texts = _one_query(query)
    opened = open_index(dataset, column, storage_options)
    cols = _columns(opened, columns)
    cut = threshold_cut(opened.params, t, verify)
    q, rid, dist = topk(opened, texts, limit, fast_search=fast, filter=expr, threshold=t is not None)
    _, rid, dist, jac = apply_scores(opened, texts, q, rid, dist, cut)
    ids = pa.array(rid, pa.uint64())
    if cols:
        fields = [opened.schema.field(c) for c in cols]
        if rid.size:
            user = opened.fetcher.take(rid, cols, "the search", opened.uri)  # a row deleted since the check: error
            arrays = [user.column(c) for c in cols]
        else:  # no hit: nothing to ask Lance for (a call into its reader costs tens of microseconds)
            arrays = list(pa.schema(fields).empty_table().columns)
    else:
        arrays, fields = [], []
    fields += [pa.field("_rowid", pa.uint64()), pa.field("_distance", pa.float32())]
    arrays += [ids, pa.array(dist, pa.float32())]
    if jac is not None:
        fields.append(pa.field("_jaccard", pa.float64()))
        arrays.append(pa.array(jac, pa.float64()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
