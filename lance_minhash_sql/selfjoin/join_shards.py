"""The cross-dataset join's shards (``docs/join.md``): every pair of a left row and a right
row whose MinHash similarity reaches a threshold, through the right dataset's index;
:mod:`.join` is its entry.

What is reported, exactly:

* The **right** side is the index on ``right_column`` (default ``column``) of the right
  dataset: all its segments and the rows of fragments no segment covers (signed on the
  fly), as the self-join reads it (:mod:`.pairs`). Its parameters are the join's.
* The **left** side is every live row of the left dataset whose ``column`` has tokens,
  signed with the right index's parameters (held in memory for the statement: at most the
  index cache's capacity, else :class:`ResourceLimitError` advising to index the left
  column); when the left column has an index whose parameters are identical, its
  signatures (and its unindexed rows, signed) are used instead, read shard by shard.
  Signatures are never mixed: any other left index is ignored.
* **Candidates** are the (left, right) pairs sharing at least one band key; each is
  reported once (from the first band it shares) when ``similarity = float32(eq) /
  float32(k) >= threshold`` (Lance's ``1 - _distance``), returned as float64 of that
  float32. Rows deleted on either side never appear.
* When both sides are the same dataset and column, every pair of the self-join appears in
  both orders, and each row pairs with itself (similarity 1).
* ``verify="exact"``: candidates whose estimate reaches
  :func:`lance_minhash_sql.core.banding.exact_candidate_floor` (4 standard deviations under
  the threshold) are kept iff ``jaccard``, the exact Jaccard of the two rows' shingle sets
  (the right index's tokenizer and shingle size), reaches the threshold: the self-join's
  verification step (``selfjoin/verify.py``), over each side's candidate rows fetched once,
  in row order, before any pair is verified (:mod:`.join_sets`); otherwise ``jaccard`` is
  NULL.

How: the band-key space is cut into key-range shards (one per :data:`lance_minhash_sql.core.tuning.SHARD_BAND_ROWS`
band rows of both sides). A shard takes the left rows of its key range (the left rows'
bands, sorted in memory when they were signed, or the left index's pages), walks each
right run's rows of the range beside them with :func:`kernels.cross_pairs.shared_rows` (a local
segment in place, in the memory map of its ``bands.lance``, without the segment's lock:
only the right rows whose key the left rows hold are copied), drops deleted rows, gathers
the remaining docs' signatures of both sides into one pool (straight from the memory map
of a local segment's ``signatures.lance``, their row ids from the segment's row id runs
as the self-join reads them, :func:`.pool.fetch_signatures`: no segment's row ids held
whole) and runs :func:`kernels.cross_pairs.join_chunk` over
the runs of equal keys, in chunks of at most ``chunk_pairs`` pairs. Shards are
independent: :func:`shard_join` can also cut one into parts run on threads (the SQL
function does: DuckDB runs an order-keeping statement's shard calls one at a time);
:func:`join_all` runs them on worker threads and yields their batches in shard order.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, NamedTuple

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import ONE_CHUNK, readonly
from lance_minhash_sql.core.checks import check_int, check_threshold, check_verify
from lance_minhash_sql.core.errors import (CorruptIndexError, IndexNotFoundError, InvalidParameterError,
                                           ResourceLimitError, UnsupportedIndexError)
from lance_minhash_sql.core.lance_format import BAND_ROW_BYTES, BAND_SHIFT
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.params import MinHashParams, warn_if_low_recall
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.sizes import format_bytes
from lance_minhash_sql.core.tuning import DEFAULT_CHUNK_PAIRS, FETCH_ROWS, MAX_SHARDS, MAX_SIGNED_LEFTS, VISIT_BUDGET
from lance_minhash_sql.index.entries import signed_entry, signed_rows
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.results import JOIN_SCHEMA
from lance_minhash_sql.io.handles import dataset_handle, options_for
from lance_minhash_sql.io.scan import row_count, text_field, version_of
from lance_minhash_sql.kernels.cross_pairs import join_chunk, new_join_cursor, shared_rows
from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.kernels.components import marked_ids, new_marks, set_marks
from lance_minhash_sql.kernels.bucket_pairs import padded_hashes
from lance_minhash_sql.runtime.cache import ByteCache, cache_capacity
from lance_minhash_sql.runtime.pipeline import MAX_WORKERS, run_ordered
from lance_minhash_sql.selfjoin.sizing import chunk_pairs as chunk_pairs_of
from lance_minhash_sql.selfjoin.sizing import shard_rows
from lance_minhash_sql.selfjoin.join_sets import JoinSets, SharedJoinSets
from lance_minhash_sql.selfjoin.pool import fetch_signatures, row_ids
from lance_minhash_sql.selfjoin.shards import merge_runs, plan_for, read_run, run_span
from lance_minhash_sql.selfjoin.verify import candidate_matches, exact_kept

__all__ = ["JOIN_SCHEMA", "JoinShard", "Side", "candidate_rows", "count_shards", "index_side", "key_bounds",
           "live_mask", "shared_band_rows", "join_all", "join_shards", "shard_join", "shared_shard_join",
           "forget_signed_left", "signed_bytes", "signed_left", "SignedLeft"]



@dataclass(eq=False)
class Side:
    """One side of the join as runs of sorted band rows with their signatures."""

    uri: str
    ds: Any = field(repr=False)
    version: int
    column: str
    params: MinHashParams
    entries: list = field(repr=False)
    liveness: Any = field(repr=False)  # None: every doc is live
    reused: bool  # an index's signatures (else rows signed for the join)

    def __post_init__(self):
        sizes = [e.docs.num_docs for e in self.entries]
        self.offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.total_docs = int(self.offsets[-1])
        self.band_rows = sum(e.bands.num_rows for e in self.entries)


def index_side(plan) -> Side:
    """The side of an index: its runs (a self-join plan's, :func:`.shards.plan_for`)."""
    o = plan.opened
    return Side(o.uri, o.ds, o.version, o.column, o.params, plan.entries, o.liveness, True)


_signed = ByteCache.for_objects("left rows signed for a join", MAX_SIGNED_LEFTS)  # (uri, version, column, ...) -> Side


def signed_bytes(rows: int, params: MinHashParams) -> int:
    """Memory of ``rows`` left rows signed for the join: row id, signature, band rows."""
    return rows * (8 + 2 * params.num_hashes + BAND_ROW_BYTES * params.num_bands)


def _check_budget(uri: str, column: str, rows: int, params: MinHashParams, budget: Budget | None) -> None:
    """The signed left rows must fit the segment cache's capacity (the memory budget of
    index data) and the ``pool`` part of an explicit ``budget``; beyond it the left
    dataset should be indexed, and is then read in shards."""
    need, cap = signed_bytes(rows, params), cache_capacity()
    what = "the index cache capacity"
    if budget is not None and budget.pool < cap:
        cap, what = budget.pool, f"the share of memory_limit={format_bytes(budget.total)} for signatures"
    if need > cap:
        raise ResourceLimitError(
            f"the left dataset {uri!r} has {rows:,} rows: signing them for the join takes about "
            f"{need / 2**20:,.0f} MiB, more than {what} of {cap / 2**20:,.0f} MiB "
            f"(LANCE_MINHASH_CACHE_BYTES). Build an index on its column {column!r} with the right index's "
            f"parameters (num_hashes := {params.num_hashes}, num_bands := {params.num_bands}, "
            f"shingle_size := {params.shingle_size}, and its tokenizer): the join then reads it shard by shard; "
            "or raise the capacity")


def _signed_key(uri: str, ds, column: str, params: MinHashParams, options) -> tuple:
    return (uri, version_of(ds), column, params, None if not options else tuple(sorted(options.items())))


def _signed_side(uri: str, ds, column: str, params: MinHashParams, options, budget: Budget | None,
                 checked: bool = True) -> Side:
    """The live rows of ``column`` signed with ``params``: one in-memory run (kept for
    the last :data:`MAX_SIGNED_LEFTS` dataset versions, so a statement's shards sign once);
    ``checked``: within the budget of :func:`_check_budget`."""
    key = _signed_key(uri, ds, column, params, options)
    hit = _signed.get(key)
    if hit is not None:
        return hit
    if checked:
        _check_budget(uri, column, row_count(ds), params, budget)
    rowids, sigs = signed_rows(ds, column, params)
    entry = signed_entry(key, f"rows of {column!r} of {uri!r} signed for the join", params, rowids, sigs)
    side = Side(uri, ds, version_of(ds), column, params, [entry], None, False)
    _signed.put(key, side)
    return side


class SignedLeft(NamedTuple):
    """The left rows a join signs (:func:`signed_left`)."""

    rowids: np.ndarray  # uint64[n], scan order
    sigs: np.ndarray  # uint16[n, k]
    keys: np.ndarray  # uint64[n * b]: every band key of every row, ascending
    docs: np.ndarray  # uint32[n * b]: the row (position in rowids) of each key


def signed_left(left, column: str, params: MinHashParams, storage_options=None) -> SignedLeft:
    """The left rows as a join signs them (the live rows of ``column`` with tokens, with
    their band rows sorted by key), from the cache the join reads: a caller that holds them
    whole anyway (the ingest plan's walk) signs them once, and the join that follows finds
    them signed whatever their size (no budget check: the caller's memory follows them)."""
    options = options_for(left, storage_options)
    uri, ds = dataset_handle(left, options)
    entry = _signed_side(uri, ds, column, params, options, None, checked=False).entries[0]
    return SignedLeft(entry.docs.rowids, entry.docs.sigs, entry.bands.keys, entry.bands.docs)


def forget_signed_left(left, column: str, params: MinHashParams, storage_options=None) -> None:
    """Drop the left rows :func:`signed_left` keeps for the joins that follow, once the
    caller knows none will (their memory is handed back with the last reference)."""
    options = options_for(left, storage_options)
    uri, ds = dataset_handle(left, options)
    _signed.drop(_signed_key(uri, ds, column, params, options))


def _left_side(left, column: str, params: MinHashParams, storage_options, budget: Budget | None = None) -> Side:
    """The left rows: the left index's signatures when its parameters are ``params``, else signed."""
    options = options_for(left, storage_options)
    uri, ds = dataset_handle(left, options)
    text_field(ds, column, uri)
    try:
        opened = open_index(ds, column, options)
    except (IndexNotFoundError, UnsupportedIndexError, CorruptIndexError):
        opened = None  # no usable left index: sign the rows
    if opened is not None and opened.params == params:
        return index_side(plan_for(opened))
    return _signed_side(uri, ds, column, params, options, budget)


def count_shards(band_rows: int, budget: Budget) -> int:
    """Key-range shards of ``band_rows`` band rows of both sides: one per ``shard`` part of
    ``budget`` (:func:`.sizing.shard_rows`), at most :data:`MAX_SHARDS`."""
    return min(MAX_SHARDS, max(1, -(-band_rows // shard_rows(budget))))


def key_bounds(params: MinHashParams, num_shards: int) -> list[int]:
    """The ``num_shards + 1`` bounds of equal key ranges over every band's keys."""
    span = params.num_bands << BAND_SHIFT
    return [span * s // num_shards for s in range(num_shards + 1)]


@dataclass(eq=False)
class JoinPlan:
    left: Side
    right: Side
    threshold: float
    num_shards: int
    shared: SharedJoinSets = field(repr=False)  # exact verification's sets of the plan's independent shard calls

    def shards(self) -> list[JoinShard]:
        """The plan's key-range shards, in key order."""
        bounds = key_bounds(self.right.params, self.num_shards)
        return [JoinShard(s, self.num_shards, bounds[s], bounds[s + 1], self) for s in range(self.num_shards)]


@dataclass(frozen=True, eq=False)
class JoinShard:
    """Band keys ``[lo, hi)`` of both sides: an independent unit of the join."""

    index: int
    num_shards: int
    lo: int
    hi: int
    plan: JoinPlan = field(repr=False)

    @property
    def threshold(self) -> float:
        return self.plan.threshold

    @property
    def params(self) -> MinHashParams:
        return self.plan.right.params


def join_shards(left, right, column: str, threshold: float = 0.8, *, right_column: str | None = None,
                num_shards: int | None = None, left_storage_options: dict | None = None,
                right_storage_options: dict | None = None, budget: Budget | None = None) -> list[JoinShard]:
    """Independent key-range shards of the join of ``left``'s ``column`` against the index
    on ``right_column`` (default ``column``) of ``right``; :func:`shard_join` runs one.

    ``left`` and ``right`` are paths/URIs or opened ``LanceDataset`` objects (pass those
    to pin versions); each side's storage options reach only that side. ``num_shards``
    defaults to one per :data:`lance_minhash_sql.core.tuning.SHARD_BAND_ROWS` band rows of both sides (fewer band rows
    under a small ``budget``, :func:`.sizing.shard_rows`; an explicit budget, the entry's
    ``memory_limit`` parsed once (:meth:`lance_minhash_sql.core.budget.Budget.parse`), also
    bounds the left rows signed in memory).

    Raises :class:`InvalidParameterError` for a threshold outside ``(0, 1]``,
    :class:`IndexNotFoundError` when the right column has no index, :class:`DatasetError`
    for a missing or non-text column on either side; warns :class:`LowRecallWarning` when
    the threshold is far below the right index's S-curve.
    """
    t = check_threshold(threshold)
    rcol = column if right_column is None else right_column
    if not isinstance(rcol, str) or not rcol:
        raise InvalidParameterError(f"right_column={right_column!r} must be the name of the right dataset's "
                                    "text column, or NULL for the same name as column")
    opened = open_index(right, rcol, options_for(right, right_storage_options))
    warn_if_low_recall(opened.params, t)
    rside = index_side(plan_for(opened))
    lside = _left_side(left, column, opened.params, left_storage_options, budget)
    if num_shards is None:
        num_shards = count_shards(lside.band_rows + rside.band_rows, Budget.or_default(budget))
    else:
        num_shards = check_int("num_shards", num_shards, "e.g. 8", 1, MAX_SHARDS)
    return JoinPlan(lside, rside, t, num_shards, SharedJoinSets(lside, rside, num_shards)).shards()


# --------------------------------------------------------------------------- one shard




def _side_rows(side: Side, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, global docs)`` of the side's band rows with keys in ``[lo, hi)``, sorted by key."""
    parts = []
    for r, entry in enumerate(side.entries):
        keys, docs = read_run(entry, lo, hi)
        if keys.size:
            parts.append((r, keys, docs))
    return _merged(side, parts)


def _merged(side: Side, parts: list) -> tuple[np.ndarray, np.ndarray]:
    """The ``(run, keys, docs)`` parts of a side's runs as ``(keys, global docs)`` sorted by key."""
    if not parts:
        return np.empty(0, np.uint64), np.empty(0, np.uint32)
    if len(parts) == 1:
        r, keys, docs = parts[0]
        return keys, docs.astype(np.uint32) + np.uint32(side.offsets[r])
    return merge_runs(parts, side.offsets)


def shared_band_rows(side: Side, lo: int, hi: int, lkeys: np.ndarray, lmask: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, global docs)`` of the side's band rows with keys in ``[lo, hi)`` that the
    sorted ``lkeys`` hold, sorted by key; ``lmask`` marks the ``lkeys`` found. A run in
    memory or memory-mapped is walked in place, without its lock
    (:meth:`lance_minhash_sql.index.entries.SegmentEntry.band_chunks`): only the rows found are copied."""
    parts = []
    lo_u, last = np.uint64(lo), np.uint64(hi - 1)
    for r, entry in enumerate(side.entries):
        start, stop = run_span(entry.bands, lo, hi)
        if start == stop:
            continue
        view = entry.band_chunks()
        if view is None:
            keys, docs = read_run(entry, lo, hi)
            rows, keys = shared_rows(lkeys, readonly(keys), ONE_CHUNK, ONE_CHUNK, 0, keys.size, lo_u, last, lmask)
            docs = docs[rows]
        else:
            values, first_row, value_index, docs_of = view
            rows, keys = shared_rows(lkeys, values, first_row, value_index, start, stop, lo_u, last, lmask)
            docs = docs_of(rows)
        if keys.size:
            parts.append((r, keys, docs))
    return _merged(side, parts)


def live_mask(side: Side, rowids: np.ndarray) -> np.ndarray | None:
    """Which of ``rowids`` of ``side`` are live, or None when all are."""
    live = side.liveness
    return None if live is None or live.trivial else live.alive(rowids)


def _candidates(plan: JoinPlan, lo: int, hi: int):
    """``(left keys, left global docs, right keys, right global docs)`` of the band rows
    with keys in ``[lo, hi)`` that share their key with a row of the other side (deleted
    rows not yet dropped); None when there are none."""
    lk, lg = _side_rows(plan.left, lo, hi)
    if lk.size == 0:
        return None
    lk = readonly(lk)
    lm = np.zeros(lk.size, dtype=np.bool_)
    rk, rg = shared_band_rows(plan.right, lo, hi, lk, lm)
    if rk.size == 0:
        return None
    return lk[lm], lg[lm], rk, rg


def _live_rows(side: Side, gids: np.ndarray) -> np.ndarray:
    """Ascending row ids of the live docs among sorted unique ``gids`` of ``side`` (whose
    runs, offsets and parameters :func:`.pool.row_ids` reads as a self-join plan's)."""
    rows = row_ids(side, gids, FETCH_ROWS)
    alive = live_mask(side, rows)
    return sorted_unique(rows if alive is None else rows[alive])


def candidate_rows(shards: list[JoinShard]) -> tuple[np.ndarray, np.ndarray]:
    """``(left, right)``: ascending row ids of the live rows of each side that share a
    band key with a row of the other in ``shards`` (every row of a candidate pair they can
    give). Each shard's band rows read once (the next read while one is marked), marked in
    a bit set of each side's docs."""
    plan = shards[0].plan
    lmarks, rmarks = new_marks(plan.left.total_docs), new_marks(plan.right.total_docs)

    def read(shard: JoinShard):
        got = _candidates(plan, shard.lo, shard.hi)
        if got is not None:
            yield sorted_unique(got[1]), sorted_unique(got[3])

    for lu, ru in run_ordered(shards, read):
        set_marks(lmarks, lu, True)
        set_marks(rmarks, ru, True)
    return _live_rows(plan.left, marked_ids(lmarks)[0]), _live_rows(plan.right, marked_ids(rmarks)[0])


@dataclass
class _ShardData:
    lkeys: np.ndarray
    ldocs: np.ndarray
    rkeys: np.ndarray
    rdocs: np.ndarray
    words: np.ndarray
    halves: np.ndarray
    rowids: np.ndarray
    nl: int  # the pool's left rows (then its right rows)


def _load(shard: JoinShard) -> _ShardData | None:
    """The shard's left rows (their keys in ``[lo, hi)``), the right rows sharing a key
    with them, the left rows sharing one with those, both sides' live rows only, and one
    signature pool: left docs first, then right docs."""
    plan = shard.plan
    got = _candidates(plan, shard.lo, shard.hi)
    if got is None:
        return None
    lk, lg, rk, rg = got
    lu, ru = sorted_unique(lg), sorted_unique(rg)
    k = plan.right.params.num_hashes
    nl = lu.size
    pool = np.zeros((nl + ru.size, padded_hashes(k)), dtype=np.uint16)  # padding lanes stay 0: equal
    rowids = np.concatenate((fetch_signatures(plan.left, lu, pool[:nl, :k], release=False),
                             fetch_signatures(plan.right, ru, pool[nl:, :k], release=False)))
    ldocs = np.searchsorted(lu, lg)
    rdocs = np.searchsorted(ru, rg) + nl
    alive = live_mask(plan.left, rowids[:nl])
    if alive is not None and not alive.all():
        keep = alive[ldocs]
        lk, ldocs = lk[keep], ldocs[keep]
    alive = live_mask(plan.right, rowids[nl:])
    if alive is not None and not alive.all():
        keep = alive[rdocs - nl]
        rk, rdocs = rk[keep], rdocs[keep]
    if lk.size == 0 or rk.size == 0:
        return None
    return _ShardData(readonly(lk), readonly(ldocs.astype(np.uint32)), readonly(rk), readonly(rdocs.astype(np.uint32)),
                      readonly(pool.view(np.uint64)), readonly(pool), readonly(rowids), nl)


def _key_runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of sorted ``keys`` and how many times each occurs."""
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return keys[starts], np.diff(np.append(starts, keys.size))


def _visits(lkeys: np.ndarray, rkeys: np.ndarray) -> int:
    """The (left, right) rows sharing a key of sorted ``lkeys`` and ``rkeys``, ``l r`` over
    the keys both hold: the most pairs a shard can give (the join's twin of
    :func:`.verify.data_visits`)."""
    lu, lc = _key_runs(lkeys)
    ru, rc = _key_runs(rkeys)
    at = np.minimum(np.searchsorted(ru, lu), max(ru.size - 1, 0))
    hit = ru[at] == lu
    return int((lc[hit].astype(np.int64) * rc[at[hit]]).sum())


def shard_join(shard: JoinShard, *, verify: str = "estimate", chunk_pairs: int = DEFAULT_CHUNK_PAIRS,
               threads: int = 1, stop: threading.Event | None = None, sets: JoinSets | None = None
               ) -> Iterator[pa.RecordBatch]:
    """The verified pairs of one shard as record batches of :data:`JOIN_SCHEMA` (at most
    ``chunk_pairs`` rows each); memory stays at one chunk of pairs plus the shard's rows
    and the signatures of its candidates. ``stop`` (set by a consumer that stopped early)
    is checked after every kernel call.

    ``verify="exact"`` checks the candidates over ``sets`` (shared by the shards of one
    join, the rows fetched before: :func:`join_all`, :func:`shared_shard_join`); without
    it over sets of this shard's candidate rows, fetched once when the first batch is
    asked for and closed after the last.

    ``threads > 1`` cuts the shard's key range into that many equal parts (at most
    :data:`MAX_WORKERS`), joined at once on as many threads (the kernels release the GIL), their batches yielded in key order:
    a caller that runs one shard at a time (DuckDB does, for a statement whose result
    keeps its order) still uses every core, for about the same memory."""
    if not isinstance(shard, JoinShard):
        raise InvalidParameterError(f"shard={shard!r} must be a JoinShard from join_shards()")
    verify = check_verify(verify)
    chunk = check_int("chunk_pairs", chunk_pairs, "e.g. 1048576", 1, 1 << 30)
    threads = min(check_int("threads", threads, "e.g. 2", 1, 1 << 16), MAX_WORKERS)
    if verify == "exact" and sets is None:
        return _own_sets(shard, chunk, threads, stop)
    return _parts(shard, verify, chunk, threads, stop, sets)


def _own_sets(shard: JoinShard, chunk: int, threads: int, stop: threading.Event | None
              ) -> Iterator[pa.RecordBatch]:
    sets = JoinSets(shard.plan.left, shard.plan.right)
    try:
        sets.fetch(*candidate_rows([shard]))
        yield from _parts(shard, "exact", chunk, threads, stop, sets)
    finally:
        sets.close()


def _parts(shard: JoinShard, verify: str, chunk: int, threads: int, stop: threading.Event | None,
           sets: JoinSets | None) -> Iterator[pa.RecordBatch]:
    if threads == 1:
        return _shard_join(shard, verify, chunk, stop, sets)
    parts = [JoinShard(shard.index, shard.num_shards, shard.lo + (shard.hi - shard.lo) * i // threads,
                       shard.lo + (shard.hi - shard.lo) * (i + 1) // threads, shard.plan) for i in range(threads)]
    stop = stop or threading.Event()
    return run_ordered(parts, lambda p: _shard_join(p, verify, chunk, stop, sets), workers=threads, stop=stop)


def _shard_join(shard: JoinShard, verify: str, chunk: int, stop: threading.Event | None = None,
                sets: JoinSets | None = None) -> Iterator[pa.RecordBatch]:
    data = _load(shard)
    if data is None:
        return
    params = shard.params
    k = params.num_hashes
    exact = verify == "exact"
    rowids = data.rowids
    if exact:  # the kernel writes positions among each side's sets (their snapshots)
        rowids, lsnap, rsnap = sets.positioned(rowids, data.nl, data.ldocs, data.rdocs)
    cap = max(1, min(chunk, _visits(data.lkeys, data.rkeys)))
    out_l = np.empty(cap, dtype=np.uint64)
    out_r = np.empty(cap, dtype=np.uint64)
    out_e = np.empty(cap, dtype=np.int32)
    min_eq = candidate_matches(shard.threshold, k, verify)
    cursor = new_join_cursor()
    done = False
    while not done:
        n, done = join_chunk(data.lkeys, data.ldocs, data.rkeys, data.rdocs, data.words, data.halves, rowids,
                             k, params.num_bands, min_eq, cursor, out_l, out_r, out_e, VISIT_BUDGET)
        if stop is not None and stop.is_set():
            return
        if not n:
            continue
        left, right = out_l[:n].copy(), out_r[:n].copy()
        sim = lance_similarity(out_e[:n], k).astype(np.float64)
        if exact:
            left, right, sim, jac = exact_kept(shard.threshold, left, right, sim, lsnap, rsnap)
            if left.size == 0:
                continue
            jac = pa.array(jac)
        else:
            jac = pa.nulls(n, pa.float64())
        yield pa.record_batch([pa.array(left), pa.array(right), pa.array(sim), jac], schema=JOIN_SCHEMA)


# --------------------------------------------------------------------------- all shards


def join_all(shards: list[JoinShard], verify: str, budget: Budget) -> Iterator[pa.RecordBatch]:
    """The verified pairs of ``shards`` (of one plan) within ``budget``, on worker
    threads, their batches yielded in shard order. ``verify="exact"``: the candidate rows of
    every shard fetched and shingled once, in row order, before any pair is verified
    (:mod:`.join_sets`); the sets' share taken from ``budget`` before the batches are sized
    (:meth:`lance_minhash_sql.core.budget.Budget.less`)."""
    stop = threading.Event()
    sets = None
    try:
        if verify == "exact":
            sets = JoinSets(shards[0].plan.left, shards[0].plan.right)
            sets.fetch(*candidate_rows(shards))
            budget = budget.less(sets.budget_bytes())
        chunk = chunk_pairs_of(budget, DEFAULT_CHUNK_PAIRS)
        yield from run_ordered(shards, lambda s: shard_join(s, verify=verify, chunk_pairs=chunk, stop=stop, sets=sets),
                               stop=stop)
    finally:
        if sets is not None:
            sets.close()


def shared_shard_join(shard: JoinShard, verify: str, threads: int) -> Iterator[pa.RecordBatch]:
    """:func:`shard_join` of one of the independent calls over a plan's shards (SQL: one
    per ``UNION ALL`` branch): with ``verify="exact"``, over the plan's
    :class:`.join_sets.SharedJoinSets` (every shard's candidate rows fetched at the first
    call, the sets closed once every shard has run)."""
    if verify != "exact":
        return shard_join(shard, verify=verify, threads=threads)
    return _shared(shard, threads)


def _shared(shard: JoinShard, threads: int) -> Iterator[pa.RecordBatch]:
    plan = shard.plan
    sets = plan.shared.enter(lambda: candidate_rows(plan.shards()))
    finished = False
    try:
        yield from shard_join(shard, verify="exact", threads=threads, sets=sets)
        finished = True
    finally:
        plan.shared.leave(shard.index, finished)
