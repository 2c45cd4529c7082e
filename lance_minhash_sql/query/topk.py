"""Top-k MinHash search that answers exactly as Lance's ``MinHashQuery`` does (``docs/search.md``).

>>> import lance_minhash_sql.query.topk as s  # doctest: +SKIP
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

import time
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.checks import check_bool
from lance_minhash_sql.core.errors import DatasetError, InvalidInputError, InvalidParameterError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.core.tuning import KERNEL_LOAD_SECONDS, whole_read_pays
from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.index.opened import OpenedIndex, open_index
from lance_minhash_sql.index.results import SEARCH_IDS_EXACT_SCHEMA, SEARCH_IDS_SCHEMA
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.arrow import as_string_array
from lance_minhash_sql.kernels import lsh as _lsh
from lance_minhash_sql.kernels.lsh import (bucket_pages, merge_candidates, merge_topk, score_topk,
                                           search_kernels_loaded, sorted_unique)
from lance_minhash_sql.kernels.minhash import sign_rows_serial
from lance_minhash_sql.kernels.similarity import band_keys_serial
from lance_minhash_sql.query.empty_query import warn_empty_queries
from lance_minhash_sql.query.probe import MAX_CANDIDATES, distinct, probe_topk
from lance_minhash_sql.query.query_sign import MAX_QUERIES, fits, sign_queries
from lance_minhash_sql.query.scores import apply_scores, check_limit, check_search_verify

__all__ = ["search", "search_ids", "SEARCH_IDS_SCHEMA", "SEARCH_IDS_EXACT_SCHEMA", "topk", "kernel_topk",
           "numpy_texts", "ENGINES"]

_SPECIAL = ("_rowid", "_distance")


# --------------------------------------------------------------------------- validation




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


# --------------------------------------------------------------------------- engine


def _sign(params: MinHashParams, texts: pa.Array, few: list[str] | None):
    """``(signatures, has, band keys)`` of the query texts: numpy for a few short ones
    (``few``, :mod:`.query_sign`), else serial kernels, or parallel ones for many."""
    if few is not None:
        return sign_queries(params, few)
    signer = signer_for(params)
    if len(texts) >= _lsh.PARALLEL_MIN_QUERIES:
        sigs, has = signer.sign(texts)
        return sigs, has, signer.band_keys(sigs)
    buf, cfg = signer.inputs(texts)
    sigs, has = sign_rows_serial(buf.offsets, buf.data, buf.valid, buf.valid_offset, cfg, signer.tables,
                                 params.shingle_size, signer.a, signer.b, signer.c)
    keys = band_keys_serial(sigs.view(np.uint8).reshape(sigs.shape[0], -1), params.num_bands)
    return sigs, has, keys


# --------------------------------------------------------------------------- engine policy
#
# Two engines answer a search: the kernels (kernels/lsh.py, kernels/minhash.py) and, for a
# few short queries, numpy (query/query_sign.py, query/probe.py), which needs no numba.
# Both apply the same rules: the candidates of a query are the docs sharing a band key
# with it, live and passing the filter; its top ``limit`` is ordered by (mismatches,
# row id) over every segment at once. tests/test_probe.py runs both on the same inputs.
#
# The policy (``engine="auto"``) is a ski rental: loading numba costs a process about half a
# second (its import and compiler set-up, the search kernels' cache loads; a fresh install
# compiles them for seconds more); once loaded, the kernels are faster per query (by
# 0.1-0.3 ms on a 1M-row index). So a few short queries take numpy until the time this
# process has spent on numpy answers reaches that cost, or until the kernels are loaded
# anyway (a batch of queries, a join, a prewarmed search); then the kernels.

ENGINES = ("auto", "numpy", "kernels")
_numpy_seconds = [0.0]  # process state of the policy: time spent answering queries with numpy


def numpy_texts(texts: pa.Array, engine: str = "auto") -> list[str] | None:
    """The query texts when the numpy engine is to answer them, else None (the kernels).

    ``engine="kernels"`` never takes numpy; ``"numpy"`` takes it whenever the queries fit
    it (:func:`.query_sign.fits`: a few short ones); ``"auto"`` applies the ski rental
    above. The numpy engine may still decline at the index (:func:`.probe.probe_topk`: an
    object store, too many candidates); the kernels then answer."""
    if engine == "kernels" or len(texts) > MAX_QUERIES:
        return None
    if engine == "auto" and (search_kernels_loaded()
                             or whole_read_pays(_numpy_seconds[0], 0.0, KERNEL_LOAD_SECONDS)):
        return None
    few = texts.to_pylist()
    return few if fits(few) else None


class _Candidates:
    """One segment's candidates for a batch, with everything the scorer needs.

    On an object store, when the segment's signatures are not all in memory, candidates
    are visited as Lance visits them: by the number of bands they share with the query,
    most first, each step one concurrent read; a query stops once no candidate left can
    beat its ``limit``-th best (a candidate sharing ``m`` of ``b`` bands differs in at
    least ``b - m`` hashes; see ``_visit_by_level``). The candidates never visited could
    not have entered the top ``limit``, so the answer is the same, with a fraction of the
    signature reads.
    """

    __slots__ = ("offsets", "docs", "doc_slot", "rowids", "sigs", "cand_rowids")

    def __init__(self, entry: SegmentEntry, qkeys: np.ndarray, qsigs: np.ndarray, limit: int, ok_of):
        with entry.lock:
            bands = entry.bands
            lo, hi = bucket_pages(bands.page_table, qkeys)
            start, end, kind, page_slot, pool_docs, win_docs = entry.buckets(qkeys, lo, hi)
            self.offsets, self.docs, matches = merge_candidates(readonly(start), readonly(end), readonly(kind), page_slot,
                                                                pool_docs, bands.page_rows, win_docs)
            if entry.remote and not entry.docs.full and self.docs.size:
                self._visit_by_level(entry, qsigs, matches, limit, ok_of)
            udocs = sorted_unique(self.docs)
            self.doc_slot, self.rowids, self.sigs = entry.doc_arrays(udocs)
        slots = self.docs if self.doc_slot.size == 0 else self.doc_slot[self.docs]
        self.cand_rowids = self.rowids[slots]

    def _visit_by_level(self, entry: SegmentEntry, qsigs: np.ndarray, matches: np.ndarray, limit: int,
                        ok_of) -> None:
        """Keep only the candidates that must be scored (see the class doc).

        Within a level a query reads candidates in row id order, first as many as it lacks
        to fill ``limit``, then more only while one could still enter its top ``limit``:
        a candidate of the level has at least ``bound`` mismatches, so none can once the
        ``limit``-th best has fewer, or exactly ``bound`` and a smaller row id than every
        candidate left (ties go to the smaller row id).
        """
        offsets, docs = self.offsets, self.docs
        nq = offsets.size - 1
        query = np.repeat(np.arange(nq), np.diff(offsets))
        rowid = entry.stored_rowids(docs)  # None when they are not resident: doc order, no tie rule
        num_bands = entry.params.num_bands
        visited = np.zeros(docs.size, dtype=np.bool_)
        good = np.zeros(docs.size, dtype=np.bool_)  # visited, live and passing the filter
        mism = np.zeros(docs.size, dtype=np.int64)
        active = np.ones(nq, dtype=np.bool_)
        for m in sorted_unique(matches)[::-1].tolist():
            bound = num_bands - int(m)  # fewest mismatches a candidate sharing m bands can have
            pending = np.flatnonzero(matches == m)
            if rowid is not None:
                pending = pending[np.lexsort((rowid[pending], query[pending]))]
            while pending.size:
                active &= ~_settled(query, mism, rowid, good, pending, nq, limit, bound)
                pending = pending[active[query[pending]]]
                if pending.size == 0:
                    break
                have = np.bincount(query[good], minlength=nq)
                need = np.where(have < limit, limit - have, pending.size)
                q = query[pending]
                rank = np.arange(pending.size) - np.searchsorted(q, q, side="left")
                take = rank < need[q]
                sel, pending = pending[take], pending[~take]
                slot, rowids, sigs = entry.doc_arrays(sorted_unique(docs[sel]))
                s = docs[sel] if slot.size == 0 else slot[docs[sel]]
                mism[sel] = (sigs[s] != qsigs[query[sel]]).sum(axis=1)
                good[sel] = ok_of(rowids[s])
                visited[sel] = True
            if not active.any():
                break
        keep = np.flatnonzero(visited)
        self.docs = docs[keep]
        self.offsets = np.concatenate(([0], np.cumsum(np.bincount(query[keep], minlength=nq)))).astype(np.int64)


def _settled(query, mism, rowid, good, pending, nq: int, limit: int, bound: int) -> np.ndarray:
    """``bool[nq]``: queries none of whose ``pending`` candidates (sorted by query, then row
    id) can enter the top ``limit`` of their ``good`` ones (see ``_visit_by_level``)."""
    out = np.zeros(nq, dtype=np.bool_)
    g = np.flatnonzero(good)
    if g.size < limit:
        return out
    rid = rowid[g] if rowid is not None else np.zeros(g.size, dtype=np.uint64)
    order = g[np.lexsort((rid, mism[g], query[g]))]
    q = query[order]
    counts = np.bincount(q, minlength=nq)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    full = np.flatnonzero(counts >= limit)
    kth = order[first[full] + limit - 1]
    below = mism[kth] < bound
    if rowid is not None:
        qp = query[pending]
        at = np.searchsorted(qp, full)  # each full query's first pending candidate (smallest row id)
        has = at < qp.size
        has[has] = qp[at[has]] == full[has]
        later = np.ones(full.size, dtype=np.bool_)
        later[has] = rowid[pending[at[has]]] > rowid[kth[has]]
        below |= (mism[kth] == bound) & later
    out[full] = below
    return out


def topk(opened: OpenedIndex, texts: pa.Array, limit: int, *, fast_search: bool = False,
         filter: str | None = None, engine: str = "auto") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(query_index int64, _rowid uint64, _distance float32)`` of every query's top ``limit``,
    ordered by query, then ``(distance, row id)``; ``engine`` as :func:`numpy_texts`."""
    params = opened.params
    if filter is not None:
        opened.liveness.check_filter(filter)  # a bad filter is an error even when nothing matches
    t0 = time.perf_counter()
    few = numpy_texts(texts, engine)
    sigs, has, keys = _sign(params, texts, few)
    active = np.flatnonzero(has)
    if active.size == 0:
        warn_empty_queries(texts, has, None)
        return np.empty(0, np.int64), np.empty(0, np.uint64), np.empty(0, np.float32)
    qsigs = readonly(sigs[active])
    qkeys = readonly(keys[active])
    entries = opened.segment_entries()
    if not fast_search:
        flat = opened.unindexed_entry()
        if flat is not None:
            entries.append(flat)
    liveness = opened.liveness
    checked = filter is not None or not liveness.trivial

    def ok_of(ids: np.ndarray) -> np.ndarray:
        """Live (and matching) flags of candidate row ids."""
        if not checked:
            return np.ones(ids.size, dtype=np.bool_)
        uniq = distinct(ids) if ids.size < MAX_CANDIDATES else sorted_unique(ids)
        flags = liveness.filter_mask(uniq, filter) if filter is not None else liveness.alive(uniq)
        return flags[np.searchsorted(uniq, ids)]

    answer = None
    if few is not None:
        answer = probe_topk(entries, qsigs, qkeys, limit, ok_of)
        _numpy_seconds[0] += time.perf_counter() - t0
    if answer is None:
        answer = kernel_topk(entries, qsigs, qkeys, limit, ok_of, checked)
    q, rid, dist, counts = answer
    warn_empty_queries(texts, has, counts)
    return active[q].astype(np.int64), rid, dist


def kernel_topk(entries: list[SegmentEntry], qsigs: np.ndarray, qkeys: np.ndarray, limit: int, ok_of,
                checked: bool = True):
    """The kernels' engine: ``(query int64, row id uint64, distance float32, candidates per
    query int64)`` of each query's top ``limit`` over ``entries``, ordered by query then
    ``(distance, row id)``; the same answer as :func:`.probe.probe_topk` (numpy).
    ``checked=False`` skips ``ok_of`` (no deletion, no filter)."""
    nq, num_hashes = qsigs.shape
    cands = [_Candidates(e, qkeys, qsigs, limit, ok_of) for e in entries]
    counts_all = sum((np.diff(c.offsets) for c in cands), np.zeros(nq, np.int64))
    # deletions and the filter: one Lance take over the distinct candidate row ids
    if checked:
        ok_all = ok_of(np.concatenate([c.cand_rowids for c in cands]))
        oks, pos = [], 0
        for c in cands:
            oks.append(readonly(ok_all[pos:pos + c.docs.size]))
            pos += c.docs.size
    else:
        oks = [readonly(np.ones(c.docs.size, dtype=np.bool_)) for c in cands]
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
        q, rid, dist = merge_topk(nq, qidx, rids, mism, limit, num_hashes)
    return q, rid, dist, counts_all


# --------------------------------------------------------------------------- public API


def search_ids(dataset, column: str, queries, k: int | None = 10, *, threshold: float | None = None,
               exact: bool = False, fast_search: bool = False, filter: str | None = None,
               storage_options: dict | None = None, verify: str = "estimate") -> pa.Table:
    """Top-``k`` row ids and distances of each query, in one pass over the index.

    ``queries`` is a string or a list / Arrow array of strings (NULL entries are refused).
    Returns ``query_index`` (int64, position in ``queries``), ``_rowid`` (uint64),
    ``_distance`` (float32), ordered by ``query_index`` then ``(_distance, _rowid)``.
    ``threshold`` keeps only the hits whose similarity (``1 - _distance``) reaches it, and
    ``k=None`` then means no limit; ``exact=True`` adds ``_jaccard`` (float64), the exact
    shingle Jaccard, and with a threshold drops the hits below it (:mod:`.scores`).
    ``verify="exact"`` (with a threshold): the hits whose estimate reaches
    :func:`lance_minhash_sql.core.params.exact_candidate_floor` are kept iff their exact
    Jaccard reaches the threshold (``_jaccard`` filled).
    """
    limit, t = check_limit(k, threshold)
    verify = check_search_verify(verify, t)
    exact = check_bool("exact", exact) or verify == "exact"
    fast = check_bool("fast_search", fast_search)
    expr = _check_filter(filter)
    texts = _query_array(queries)
    opened = open_index(dataset, column, storage_options)
    q, rid, dist = topk(opened, texts, limit, fast_search=fast, filter=expr)
    q, rid, dist, jac = apply_scores(opened, texts, q, rid, dist, t, exact, verify)
    arrays = [pa.array(q, pa.int64()), pa.array(rid, pa.uint64()), pa.array(dist, pa.float32())]
    if jac is None:
        return pa.Table.from_arrays(arrays, schema=SEARCH_IDS_SCHEMA)
    return pa.Table.from_arrays(arrays + [pa.array(jac, pa.float64())], schema=SEARCH_IDS_EXACT_SCHEMA)


def search(dataset, column: str, query: str, k: int | None = 10, *, threshold: float | None = None,
           exact: bool = False, fast_search: bool = False, filter: str | None = None,
           columns: list[str] | None = None, storage_options: dict | None = None) -> pa.Table:
    """The ``k`` rows nearest to ``query``: the dataset's columns (all, or ``columns``) with
    their own types, then ``_rowid`` (uint64) and ``_distance`` (float32), ordered by
    ``(_distance, _rowid)``.

    ``filter`` is a Lance filter expression applied before the top-k (Lance's
    ``prefilter=True``); ``fast_search=True`` skips fragments no index segment covers.
    ``threshold``, ``k=None`` and ``exact`` (a last ``_jaccard`` column) as in :func:`search_ids`.
    """
    limit, t = check_limit(k, threshold)
    exact = check_bool("exact", exact)
    fast = check_bool("fast_search", fast_search)
    expr = _check_filter(filter)
    texts = _one_query(query)
    opened = open_index(dataset, column, storage_options)
    cols = _columns(opened, columns)
    q, rid, dist = topk(opened, texts, limit, fast_search=fast, filter=expr)
    _, rid, dist, jac = apply_scores(opened, texts, q, rid, dist, t, exact)
    ids = pa.array(rid, pa.uint64())
    if cols:
        user = opened.fetcher.take(rid, cols, "the search", opened.uri)  # a row deleted since the check: error
        arrays = [user.column(c) for c in cols]
        fields = [opened.schema.field(c) for c in cols]
    else:
        arrays, fields = [], []
    fields += [pa.field("_rowid", pa.uint64()), pa.field("_distance", pa.float32())]
    arrays += [ids, pa.array(dist, pa.float32())]
    if jac is not None:
        fields.append(pa.field("_jaccard", pa.float64()))
        arrays.append(pa.array(jac, pa.float64()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
