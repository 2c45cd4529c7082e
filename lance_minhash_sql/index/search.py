"""Top-k MinHash search that answers exactly as Lance's ``MinHashQuery`` does (contract §3).

>>> import lance_minhash_sql.index.search as s  # doctest: +SKIP
>>> s.search("corpus.lance", "text", "the quick brown fox", k=5, columns=["id"])  # doctest: +SKIP
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

A batch of queries (:func:`search_ids`) runs through every kernel once per segment.
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..errors import DatasetError, InvalidInputError, InvalidParameterError
from ..io.arrow import as_string_array, string_buffers
from ..kernels import lsh as _lsh
from ..kernels.lsh import bucket_pages, merge_candidates, merge_topk, score_topk, sorted_unique
from ..kernels.minhash import sign_rows_serial
from ..kernels.similarity import band_keys_serial
from .opened import OpenedIndex, SegmentEntry, open_index
from .sign import signer_for

__all__ = ["search", "search_ids", "SEARCH_IDS_SCHEMA", "topk"]

SEARCH_IDS_SCHEMA = pa.schema([
    pa.field("query_index", pa.int64(), nullable=False),
    pa.field("_rowid", pa.uint64(), nullable=False),
    pa.field("_distance", pa.float32(), nullable=False),
])
_SPECIAL = ("_rowid", "_distance")
_MAX_K = 1 << 40  # more rows than any dataset has: keeps k inside int64 in the kernels


# --------------------------------------------------------------------------- validation


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        if isinstance(k, float) and k.is_integer() and k >= 1:
            return int(k)
        raise InvalidParameterError(f"k={k!r} must be a positive integer (rows to return per query); e.g. 10")
    if k < 1:
        raise InvalidParameterError(f"k={k} must be a positive integer (rows to return per query); e.g. 10")
    return min(int(k), _MAX_K)


def _check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name}={value!r} must be true or false")
    return bool(value)


def _check_filter(expr: Any) -> str | None:
    if expr is None:
        return None
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidParameterError(
            f"filter={expr!r} must be a non-empty Lance filter expression (SQL) or NULL; e.g. \"id > 10\"")
    return expr


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


def _columns(ds, columns: Any) -> list[str]:
    names = ds.schema.names
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
            raise DatasetError(f"column {c!r} is not in dataset {ds.uri!r}; its columns are {names}")
        if c not in out:
            out.append(c)
    return out


# --------------------------------------------------------------------------- engine


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    v = a.view()
    v.setflags(write=False)
    return v


def _sign(signer, texts: pa.Array):
    """``(signatures, has, band keys)`` of the query texts (serial kernels for a few)."""
    if len(texts) >= _lsh.PARALLEL_MIN_QUERIES:
        sigs, has = signer.sign(texts)
        return sigs, has, signer.band_keys(sigs)
    p = signer.params
    buf = string_buffers(texts)
    sigs, has = sign_rows_serial(buf.offsets, buf.data, buf.valid, buf.valid_offset, signer.cfg, signer.tables,
                                 p.shingle_size, signer.a, signer.b, signer.c)
    keys = band_keys_serial(sigs.view(np.uint8).reshape(sigs.shape[0], -1), p.num_bands)
    return sigs, has, keys


class _Candidates:
    """One segment's candidates for a batch, with everything the scorer needs."""

    __slots__ = ("offsets", "docs", "doc_slot", "rowids", "sigs", "cand_rowids")

    def __init__(self, entry: SegmentEntry, qkeys: np.ndarray):
        with entry.lock:
            bands = entry.bands
            lo, hi = bucket_pages(bands.page_table, qkeys)
            start, end, kind, page_slot, pool_docs, win_docs = entry.buckets(qkeys, lo, hi)
            self.offsets, self.docs, _ = merge_candidates(_ro(start), _ro(end), _ro(kind), page_slot, pool_docs,
                                                          bands.page_rows, win_docs)
            udocs = sorted_unique(self.docs)
            self.doc_slot, self.rowids, self.sigs = entry.doc_arrays(udocs)
        slots = self.docs if self.doc_slot.size == 0 else self.doc_slot[self.docs]
        self.cand_rowids = self.rowids[slots]


def topk(opened: OpenedIndex, texts: pa.Array, limit: int, *, fast_search: bool = False,
         filter: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(query_index int64, _rowid uint64, _distance float32)`` of every query's top ``limit``,
    ordered by query, then ``(distance, row id)``."""
    params = opened.params
    if filter is not None:
        opened.liveness.check_filter(filter)  # a bad filter is an error even when nothing matches
    sigs, has, keys = _sign(signer_for(params), texts)
    active = np.flatnonzero(has)
    if active.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.uint64), np.empty(0, np.float32)
    qsigs = _ro(sigs[active])
    qkeys = _ro(keys[active])
    entries = opened.segment_entries()
    if not fast_search:
        flat = opened.unindexed_entry()
        if flat is not None:
            entries.append(flat)
    cands = [_Candidates(e, qkeys) for e in entries]
    # deletions and the filter: one Lance take over the distinct candidate row ids
    if filter is not None or not opened.liveness.trivial:
        all_ids = np.concatenate([c.cand_rowids for c in cands])
        uniq = sorted_unique(all_ids)
        inv = np.searchsorted(uniq, all_ids)
        flags = (opened.liveness.filter_mask(uniq, filter) if filter is not None
                 else opened.liveness.alive(uniq))
        ok_all = flags[inv]
        oks, pos = [], 0
        for c in cands:
            oks.append(_ro(ok_all[pos:pos + c.docs.size]))
            pos += c.docs.size
    else:
        oks = [_ro(np.ones(c.docs.size, dtype=np.bool_)) for c in cands]
    nq = active.size
    parts = []
    for c, ok in zip(cands, oks):
        counts, rid, mism, _dist = score_topk(qsigs, c.offsets, c.docs, ok, c.doc_slot, c.sigs, c.rowids, limit)
        parts.append((counts, rid, mism, _dist))
    if len(parts) == 1:
        counts, rid, _, dist = parts[0]
        q = np.repeat(np.arange(nq, dtype=np.int64), np.diff(counts))
    else:
        qidx = np.concatenate([np.repeat(np.arange(nq, dtype=np.int64), np.diff(p[0])) for p in parts])
        rids = np.concatenate([p[1] for p in parts])
        mism = np.concatenate([p[2] for p in parts])
        q, rid, dist = merge_topk(nq, qidx, rids, mism, limit, params.num_hashes)
    return active[q].astype(np.int64), rid, dist


# --------------------------------------------------------------------------- public API


def search_ids(dataset, column: str, queries, k: int = 10, *, fast_search: bool = False,
               filter: str | None = None, storage_options: dict | None = None) -> pa.Table:
    """Top-``k`` row ids and distances of each query, in one pass over the index.

    ``queries`` is a string or a list / Arrow array of strings (NULL entries are refused).
    Returns ``query_index`` (int64, position in ``queries``), ``_rowid`` (uint64),
    ``_distance`` (float32), ordered by ``query_index`` then ``(_distance, _rowid)``.
    """
    limit = _check_k(k)
    fast = _check_flag("fast_search", fast_search)
    expr = _check_filter(filter)
    texts = _query_array(queries)
    opened = open_index(dataset, column, storage_options)
    q, rid, dist = topk(opened, texts, limit, fast_search=fast, filter=expr)
    return pa.Table.from_arrays([pa.array(q, pa.int64()), pa.array(rid, pa.uint64()),
                                 pa.array(dist, pa.float32())], schema=SEARCH_IDS_SCHEMA)


def search(dataset, column: str, query: str, k: int = 10, *, fast_search: bool = False,
           filter: str | None = None, columns: list[str] | None = None,
           storage_options: dict | None = None) -> pa.Table:
    """The ``k`` rows nearest to ``query``: the dataset's columns (all, or ``columns``) with
    their own types, then ``_rowid`` (uint64) and ``_distance`` (float32), ordered by
    ``(_distance, _rowid)``.

    ``filter`` is a Lance filter expression applied before the top-k (Lance's
    ``prefilter=True``); ``fast_search=True`` skips fragments no index segment covers.
    """
    limit = _check_k(k)
    fast = _check_flag("fast_search", fast_search)
    expr = _check_filter(filter)
    texts = _one_query(query)
    opened = open_index(dataset, column, storage_options)
    cols = _columns(opened.ds, columns)
    _, rid, dist = topk(opened, texts, limit, fast_search=fast, filter=expr)
    ids = pa.array(rid, pa.uint64())
    if cols:
        user = opened.ds._take_rows(ids, cols)
        if user.num_rows != len(ids):  # a row deleted between the check and the take
            raise DatasetError(
                f"dataset {opened.uri!r} changed during the search ({len(ids)} hits, {user.num_rows} "
                "rows fetched); run the search again")
        arrays = [user.column(c) for c in cols]
        fields = [opened.ds.schema.field(c) for c in cols]
    else:
        arrays, fields = [], []
    fields += [pa.field("_rowid", pa.uint64()), pa.field("_distance", pa.float32())]
    arrays += [ids, pa.array(dist, pa.float32())]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
