"""The ingest plan (``docs/pipelines.md``): which rows of a new batch a corpus takes.

>>> import lance_minhash_sql as lms
>>> lms.ingest_plan("corpus.lance", "batch.lance", "text", 0.8)  # doctest: +SKIP
pyarrow.Table
_rowid: uint64 not null
keep: bool not null
twin_rowid: uint64
twin_in: string
similarity: double
jaccard: double

The rule, for every live row of the batch: walked in keep order (lowest row id first, or
the first in ``order_by``, a SQL ``ORDER BY`` list over the batch's columns read as
``minhash_dedup`` reads it, ties by row id), a row is **kept** when it is similar to no
row of the corpus and to no batch row kept before it. Otherwise it is dropped, and its
**twin** is the most similar of those rows (``twin_in``: ``'corpus'`` or ``'batch'``): the
highest similarity (``verify="exact"``: the highest exact Jaccard), ties to the corpus
row, then to the lowest corpus row id or the batch row kept first. ``similarity`` is the
MinHash estimate of the row and its twin (Lance's ``1 - _distance``), ``jaccard`` their
exact shingle Jaccard with ``verify="exact"`` (NULL otherwise).

*Similar* is the cross-dataset join's rule (:mod:`.join_shards`), for corpus rows and
batch rows alike: the two rows share a band key of the corpus index, and their estimate
reaches ``threshold`` (``verify="estimate"``), or reaches the estimate floor of
:func:`lance_minhash_sql.core.banding.exact_candidate_floor` and their exact Jaccard
reaches ``threshold`` (``verify="exact"``). The corpus index's parameters and tokenizer
sign the batch (bit-identical to an index build with them); the batch needs no index.
A batch row without tokens is similar to nothing and is kept.

How: the corpus side is each batch row's best corpus row. Under the estimate on the local
executor it is :func:`.best_rows.best_rows`: the corpus's candidate rows listed by key,
then read once each in doc order. Otherwise (exact verification, Ray, or more candidate
rows than the budget holds) it is :func:`.join.join` of the batch against the corpus
index on the chosen executor, reduced on the fly (memory follows the batch, never the
pairs). Both give the same bests (``tests/test_ingest.py`` runs both). The batch side is
:func:`kernels.ingest.ingest_walk`: the batch's signatures and band buckets in memory, each row compared only with the kept rows
that share one of its buckets, so a batch holding many copies of a text costs one
comparison a copy. With ``verify="exact"`` the shingle sets of the batch rows that share
a bucket with another batch row are computed once, from one read of their texts in row
order, and held in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.checks import check_threshold, check_verify
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.results import INGEST_PLAN_SCHEMA
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.handles import dataset_handle, options_for
from lance_minhash_sql.io.rowids import live_rowids
from lance_minhash_sql.io.scan import fragment_ids, row_count, take_texts, text_field, uri_of
from lance_minhash_sql.kernels.ingest import band_buckets, ingest_walk, keep_best
from lance_minhash_sql.runtime.memory import bounded_heap, is_tight, trim_heap
from lance_minhash_sql.selfjoin.dedup import check_keep, keep_order, order_by_columns
from lance_minhash_sql.selfjoin.executor import LOCAL, Executor
from lance_minhash_sql.selfjoin.best_rows import BestRows, best_rows
from lance_minhash_sql.selfjoin.join_shards import (SignedLeft, forget_signed_left, index_side, signed_bytes,
                                                    signed_left)
from lance_minhash_sql.selfjoin.shards import plan_for
from lance_minhash_sql.selfjoin.verify import candidate_matches

__all__ = ["INGEST_PLAN_SCHEMA", "IngestPlan", "ingest_plan", "plan_ingest"]

CORPUS, BATCH = "corpus", "batch"


@dataclass(frozen=True)
class IngestPlan:
    """An ingest plan and what it was computed on."""

    table: pa.Table  # INGEST_PLAN_SCHEMA, one row per live batch row, by row id
    corpus: object  # the corpus dataset at the version planned on
    batch: object  # the batch dataset at the version planned on
    params: MinHashParams  # the corpus index's
    kept_has: np.ndarray  # bool, per kept row (row id order): whether it has tokens
    kept_sigs: np.ndarray  # uint16[kept_has.sum(), k]: their signatures, in row id order

    @property
    def kept_rowids(self) -> np.ndarray:
        """The batch row ids the plan keeps, ascending."""
        keep = self.table.column("keep").to_numpy(zero_copy_only=False)
        return self.table.column("_rowid").to_numpy()[keep]


class _Batch(NamedTuple):
    """Every live batch row, by row id, as the walk reads it."""

    rowids: np.ndarray  # uint64[n], ascending
    sigs: np.ndarray  # uint16[n, k]: meaningful where has
    has: np.ndarray  # bool[n]: the rows with tokens
    buckets: np.ndarray  # int64[n, b]: each band's bucket (rows with equal band keys share one)
    num_buckets: int
    signed: SignedLeft  # the rows with tokens as the join signs them
    at: np.ndarray | None  # the position in rowids of each signed row (None: the same rows)


def _batch_rows(ds, column: str, params: MinHashParams, options) -> _Batch:
    """The live batch rows signed as the join's left side (:func:`.join_shards.signed_left`,
    so the join that follows finds them signed), and their buckets numbered along its sorted
    band rows (:func:`kernels.ingest.band_buckets`; rows without tokens get bucket 0, never
    looked at)."""
    signed = signed_left(ds, column, params, options)
    rowids = live_rowids(ds, fragment_ids(ds))
    if np.array_equal(rowids, signed.rowids):
        at, has, sigs = None, np.ones(rowids.size, dtype=np.bool_), signed.sigs
    else:
        at = np.searchsorted(rowids, signed.rowids)
        has = np.zeros(rowids.size, dtype=np.bool_)
        has[at] = True
        sigs = np.zeros((rowids.size, params.num_hashes), dtype=np.uint16)
        sigs[at] = signed.sigs
    buckets = np.zeros((rowids.size, params.num_bands), dtype=np.int64)
    if signed.keys.size == 0:
        return _Batch(rowids, sigs, has, buckets, 1, signed, at)
    num = band_buckets(signed.keys, signed.docs, np.arange(rowids.size) if at is None else at, buckets)
    return _Batch(rowids, sigs, has, buckets, int(num), signed, at)


def _batch_bytes(rows: int, params: MinHashParams) -> int:
    """What the plan holds of ``rows`` batch rows: the rows signed as the join's left side
    (:func:`.join_shards.signed_bytes`) and their buckets (8 bytes a band)."""
    return signed_bytes(rows, params) + rows * 8 * params.num_bands


def _spread(best: BestRows, at: np.ndarray | None, n: int, k: int) -> tuple[np.ndarray, ...]:
    """:func:`.best_rows.best_rows`'s bests (by signed row) as :func:`_best_corpus`
    gives them (by position among the ``n`` live rows)."""
    if at is None:
        at = np.arange(n)
    found = np.zeros(n, dtype=np.bool_)
    right = np.zeros(n, dtype=np.uint64)
    sim = np.zeros(n)
    found[at] = best.found
    right[at] = best.rowid
    sim[at] = np.where(best.found, lance_similarity(np.maximum(best.eq, 0), k), 0.0)
    return found, right, sim, np.full(n, np.nan)


def _best_corpus(pairs, verify: str, rowids: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each batch row's best corpus row among the join's pairs: ``(found, right row id,
    similarity, jaccard)`` by position in the ascending ``rowids``; best by the score (the
    Jaccard with exact verification, else the estimate), ties to the lowest corpus row id
    (:func:`kernels.ingest.keep_best`, folding each batch of pairs as it arrives: memory
    follows the batch, never the pairs)."""
    n = rowids.size
    score = np.full(n, -np.inf)
    right = np.zeros(n, dtype=np.uint64)
    sim = np.zeros(n)
    jac = np.full(n, np.nan)
    for batch in pairs:
        if batch.num_rows == 0:
            continue
        b_sim = batch.column("similarity").to_numpy()
        b_jac = batch.column("jaccard")
        b_jac = (b_jac.to_numpy(zero_copy_only=False).astype(np.float64) if b_jac.null_count < len(b_jac)
                 else np.full(len(b_jac), np.nan))
        keep_best(np.searchsorted(rowids, batch.column("left_rowid").to_numpy()),
                  batch.column("right_rowid").to_numpy(), b_jac if verify == "exact" else b_sim, b_sim, b_jac,
                  score, right, sim, jac)
    return score > -np.inf, right, sim, jac


def _bucketed_rows(buckets: np.ndarray, has: np.ndarray, num_buckets: int) -> np.ndarray:
    """Positions of the rows with tokens that share a bucket with another row."""
    counts = np.bincount(buckets[has].ravel(), minlength=num_buckets)
    shared = np.zeros(has.size, dtype=np.bool_)
    shared[has] = (counts[buckets[has]] >= 2).any(axis=1)
    return np.flatnonzero(shared)


def _sets_of(ds, column: str, signer, rowids: np.ndarray, rows: np.ndarray, uri: str
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, ends, hashes)``: the shingle set of each position of the ascending
    ``rowids`` (empty but for the ascending positions ``rows``, whose texts are read once,
    in row-id order)."""
    starts = np.zeros(rowids.size, dtype=np.int64)
    ends = np.zeros(rowids.size, dtype=np.int64)
    if rows.size == 0:
        return starts, ends, np.empty(0, np.uint64)
    offsets, hashes = signer.shingle_sets(take_texts(ds, column, rowids[rows], uri))
    starts[rows] = offsets[:-1]
    ends[rows] = offsets[1:]
    return starts, ends, hashes


def plan_ingest(corpus_ds, batch_ds, column: str, threshold: float, verify: str, order_by: str | None, budget: Budget,
                corpus_options, batch_options, executor: Executor) -> IngestPlan:
    """:func:`ingest_plan` of checked arguments on opened datasets (their versions pinned)."""
    batch_uri = uri_of(batch_ds)
    text_field(batch_ds, column, batch_uri)
    cols = order_by_columns(batch_ds, batch_uri, order_by)
    opened = open_index(corpus_ds, column, corpus_options)
    params = opened.params
    signer = signer_for(params)
    # the signing's and the join's freed buffers handed back as they go when the batch
    # comes near the budget, or its shingle sets are held (runtime/memory.py: is_tight)
    tight = verify == "exact" or is_tight(_batch_bytes(row_count(batch_ds), params), budget.total)
    with bounded_heap(tight):
        batch = _batch_rows(batch_ds, column, params, batch_options)
        rowids, sigs, has, buckets, num_buckets = batch[:5]
        trim_heap()
        best = None
        if verify == "estimate" and executor.name == LOCAL.name:
            best = best_rows(batch.signed, index_side(plan_for(opened)), threshold, budget)
        if best is not None:
            blocked, c_right, c_sim, c_jac = _spread(best, batch.at, rowids.size, params.num_hashes)
        else:
            pairs = executor.join(batch_ds, corpus_ds, column, threshold, verify, budget, right_column=None,
                                  left_storage_options=batch_options, right_storage_options=corpus_options)
            blocked, c_right, c_sim, c_jac = _best_corpus(pairs, verify, rowids)
        del batch
    forget_signed_left(batch_ds, column, params, batch_options)  # (the walk holds what it reads)
    trim_heap()

    n = rowids.size
    if order_by is None:
        order = np.arange(n)
    else:
        order = keep_order(batch_ds, batch_uri, column, "first", order_by, cols, rowids, np.zeros(n, np.uint64))
    exact = verify == "exact"
    if exact:
        starts, ends, hashes = _sets_of(batch_ds, column, signer, rowids, _bucketed_rows(buckets, has, num_buckets),
                                        batch_uri)
    else:
        starts = ends = np.zeros(n, dtype=np.int64)
        hashes = np.empty(0, np.uint64)
    k = params.num_hashes
    kept, twin, eq, jac = ingest_walk(order.astype(np.int64), np.ascontiguousarray(sigs), buckets,
                                      np.int64(num_buckets), has, blocked,
                                      np.int64(candidate_matches(threshold, k, verify)), starts, ends, hashes,
                                      float(threshold), exact)

    # each dropped row's twin: the batch's (the walk's) or the corpus's, whichever scores higher
    b_sim = lance_similarity(eq, k).astype(np.float64)
    b_score = jac if exact else b_sim
    c_score = np.where(blocked, c_jac if exact else c_sim, -np.inf)
    from_batch = (twin >= 0) & (b_score > c_score)
    from_corpus = blocked & ~from_batch
    twin_rowid = np.where(from_corpus, c_right, np.uint64(0))
    twin_rowid[from_batch] = rowids[twin[from_batch]]
    sim = np.where(from_corpus, c_sim, np.where(from_batch, b_sim, 0.0))
    jaccard = np.where(from_corpus, c_jac, np.where(from_batch, jac, np.nan))

    dropped = ~kept
    twin_in = np.where(from_batch, BATCH, CORPUS).astype(object)
    no_jac = dropped & np.isnan(jaccard) | kept
    table = pa.Table.from_arrays([
        pa.array(rowids, pa.uint64()),
        pa.array(kept, pa.bool_()),
        pa.array(twin_rowid, pa.uint64(), mask=kept),
        pa.array(twin_in, pa.string(), mask=kept),
        pa.array(sim, pa.float64(), mask=kept),
        pa.array(np.nan_to_num(jaccard), pa.float64(), mask=no_jac | (not exact)),
    ], schema=INGEST_PLAN_SCHEMA)
    return IngestPlan(table, corpus_ds, batch_ds, params, has[kept], sigs[kept & has])


def ingest_plan(corpus, batch, column: str, threshold: float = 0.8, *, verify: str = "estimate",
                order_by: str | None = None, memory_limit=None, corpus_storage_options: dict | None = None,
                batch_storage_options: dict | None = None, executor: Executor = LOCAL) -> pa.Table:
    """One row per live row of ``batch`` (:data:`INGEST_PLAN_SCHEMA`, by row id): whether
    the corpus takes it, and the twin it is dropped for (the module doc has the rule).

    ``corpus`` must have a MinHash index on ``column`` (its parameters and tokenizer are
    used); ``batch`` needs none. ``memory_limit`` sizes the join with the corpus (on
    ``executor``) as in :func:`.join.join`. Raises :class:`IndexNotFoundError` (no corpus
    index), :class:`InvalidParameterError`, :class:`DatasetError` (a missing or non-text
    column)."""
    threshold = check_threshold(threshold)
    verify = check_verify(verify)
    _, order_by = check_keep("first", order_by)
    budget = Budget.parse(memory_limit)
    corpus_options = options_for(corpus, corpus_storage_options)
    batch_options = options_for(batch, batch_storage_options)
    _, corpus_ds = dataset_handle(corpus, corpus_options)
    _, batch_ds = dataset_handle(batch, batch_options)
    return plan_ingest(corpus_ds, batch_ds, column, threshold, verify, order_by, budget, corpus_options,
                       batch_options, executor).table
