"""The self-join's pair verification: the verified pairs of a loaded shard.

A candidate pair (two live rows sharing a band key, each pair once from the first band it
shares) is verified with the full signatures: ``similarity = float32(eq) / float32(k)``
(``eq`` equal positions; Lance's ``1 - _distance``), kept when it reaches the threshold
(``verify="estimate"``). With ``verify="exact"`` candidates whose estimate reaches
:func:`lance_minhash_sql.core.banding.exact_candidate_floor` are kept iff the exact Jaccard
of their shingle sets reaches the threshold (``jaccard`` filled). Links of clusters are
verified in :mod:`.links`; both run on every executor (``selfjoin/executor.py``). The
cross-dataset join verifies its candidates with the same floor and check
(:func:`candidate_matches`, :func:`exact_kept`) over a set collection per side
(``selfjoin/join_sets.py``).
"""

from __future__ import annotations

import threading
from typing import Iterator

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.banding import candidate_floor
from lance_minhash_sql.core.tuning import VISIT_BUDGET
from lance_minhash_sql.index.results import PAIRS_EXACT_SCHEMA, PAIRS_SCHEMA
from lance_minhash_sql.kernels.bucket_pairs import min_matches, new_bucket_cursor, no_sets, pair_chunk
from lance_minhash_sql.kernels.similarity import COUNT_BUCKETS, gather_sets, jaccard_at_least_between
from lance_minhash_sql.selfjoin.shards import Shard, ShardData, shard_windows
from lance_minhash_sql.selfjoin.shingles import ShingleSets, Snapshot

__all__ = ["SET_ROW_BYTES", "candidate_matches", "data_pairs", "data_visits", "exact_kept", "pair_verifier",
           "Verifier", "prepare", "remaining"]


def _similarity(eq: np.ndarray, k: int) -> np.ndarray:
    return lance_similarity(eq, k).astype(np.float64)


def exact_kept(threshold: float, left: np.ndarray, right: np.ndarray, sim: np.ndarray, snap: Snapshot,
               right_snap: Snapshot | None = None, counted: bool = False):
    """The pairs of index positions ``left`` (of ``snap``) and ``right`` (of ``right_snap``,
    else of ``snap`` too) with ``jaccard >= threshold``, as row ids, with their similarity
    and exact shingle Jaccard: the one check of exact verification, the self-join's and
    the cross-dataset join's (``selfjoin/join_sets.py``: a set collection per side).
    ``counted``: the pairs passed the sets' bucket counts already (the self-join's pair
    kernel, :func:`_window_sets`), which the check then does not read again."""
    other = snap if right_snap is None else right_snap
    a, b = snap.index, other.index
    a_counts, b_counts = (_NO_COUNTS, _NO_COUNTS) if counted else (a.counts, b.counts)
    jac = jaccard_at_least_between(a.starts, a.ends, snap.hashes, a_counts, b.starts, b.ends, other.hashes, b_counts,
                                   readonly(left.astype(np.int64)), readonly(right.astype(np.int64)), threshold)
    keep = np.flatnonzero(jac >= threshold)
    return snap.rowids(left[keep]), other.rowids(right[keep]), sim[keep], jac[keep]


_NO_COUNTS = readonly(np.empty((0, COUNT_BUCKETS), dtype=np.uint8))  # the sets' index holds its counts read-only too


def candidate_matches(threshold: float, k: int, verify: str) -> int:
    """The fewest equal positions of ``k`` a candidate pair needs to be verified: those of
    :func:`lance_minhash_sql.core.banding.candidate_floor` (the threshold, or under
    ``verify="exact"`` the exact floor: the rest are never fetched), for the self-join
    and the cross-dataset join alike."""
    return min_matches(candidate_floor(threshold, k, verify), k)


def data_visits(data: ShardData) -> int:
    """The visits of a shard's loaded data, ``m (m - 1) / 2`` over its buckets: the most
    pairs it can give."""
    m = (data.ends - data.starts).astype(np.int64)
    return int((m * (m - 1) // 2).sum())


def data_pairs(shard: Shard, data: ShardData, chunk: int, stop: threading.Event | None = None,
               verify: str = "estimate", shingles: ShingleSets | None = None) -> Iterator[pa.RecordBatch]:
    """The verified pairs of a shard's loaded data (a shard, or a part of one, loaded over
    its group's pool under a memory budget: :mod:`.steps`, :mod:`.pool`). ``verify="exact"``: candidates
    down to :func:`lance_minhash_sql.core.banding.exact_candidate_floor`, kept by their exact Jaccard, the kernel writing the rows' positions among ``shingles``' sets
    (:meth:`.shingles.ShingleSets.positioned`; the rows' shingle sets, shared by the
    shards of one self-join: :func:`pair_verifier`; a set of its own when ``None``)."""
    plan = shard.plan
    k = plan.params.num_hashes
    own = verify == "exact" and shingles is None
    if own:
        shingles = ShingleSets(plan.opened)
    try:
        snap = None
        if verify == "exact":
            data, snap = shingles.positioned(data)
        cap = max(1, min(chunk, data_visits(data)))
        out_l = np.empty(cap, dtype=np.uint64)
        out_r = np.empty(cap, dtype=np.uint64)
        out_e = np.empty(cap, dtype=np.int32)
        min_eq = candidate_matches(shard.threshold, k, verify)
        schema = PAIRS_EXACT_SCHEMA if snap is not None else PAIRS_SCHEMA
        batches = _Batches(schema, chunk)
        fill = 0
        for w in shard_windows(data):
            cursor = new_bucket_cursor()
            sets = _window_sets(snap, w.rowids)
            done = False
            while not done:
                n, done = pair_chunk(w.keys, w.docs, w.starts, w.ends, w.words, w.halves, w.slot, w.rowids, k,
                                     plan.params.num_bands, min_eq, cursor, out_l[fill:], out_r[fill:],
                                     out_e[fill:], VISIT_BUDGET, *sets, shard.threshold)
                fill += n
                if stop is not None and stop.is_set():
                    return
                if fill == cap:
                    yield from batches.add(_verified(shard.threshold, out_l, out_r, out_e, fill, k, snap))
                    fill = 0
        if fill:
            yield from batches.add(_verified(shard.threshold, out_l, out_r, out_e, fill, k, snap))
        yield from batches.flush(last=True)
    finally:
        if own:
            shingles.close()


SET_ROW_BYTES = 8 + COUNT_BUCKETS  # what exact verification holds per pool row beside it (_window_sets)


def _window_sets(snap: Snapshot | None, positions: np.ndarray) -> tuple:
    """``pair_chunk``'s ``set_sizes, set_counts`` of a window's pool rows (``positions``:
    their sets' positions in ``snap``), gathered in pool order: exact verification's
    pairs that their sizes and bucket counts put under the threshold are not written.
    Empty without ``snap`` (``verify="estimate"``: ``no_sets``); of one type either way,
    so the kernel has one specialization. :data:`SET_ROW_BYTES` a row, which the pool
    of an exact self-join counts (``selfjoin/sizing.py: pool_size``)."""
    if snap is None or snap.index.counts.shape[1] != COUNT_BUCKETS:
        return no_sets()
    index = snap.index
    sizes = np.empty(positions.size, dtype=np.int64)
    counts = np.empty((positions.size, COUNT_BUCKETS), dtype=np.uint8)
    gather_sets(positions, index.starts, index.ends, index.counts, sizes, counts)
    return sizes, counts


def _verified(threshold: float, out_l, out_r, out_e, n: int, k: int, snap: Snapshot | None) -> list:
    """The columns of the kernel's first ``n`` pairs that pass: all of them (verified by
    the kernel), or with ``snap`` those whose exact Jaccard reaches ``threshold``."""
    left, right, sim = out_l[:n].copy(), out_r[:n].copy(), _similarity(out_e[:n], k)
    if snap is not None:
        return list(exact_kept(threshold, left, right, sim, snap, counted=True))
    return [left, right, sim]


class _Batches:
    """Columns of verified pairs gathered into record batches of ``chunk`` rows (the exact
    mode's few passing pairs of each kernel call are not a batch each)."""

    def __init__(self, schema: pa.Schema, chunk: int):
        self.schema, self.chunk, self.held, self.rows = schema, chunk, [], 0

    def add(self, cols: list) -> Iterator[pa.RecordBatch]:
        if cols[0].size:
            self.held.append(cols)
            self.rows += cols[0].size
        if self.rows >= self.chunk:
            yield from self.flush(last=False)

    def flush(self, last: bool) -> Iterator[pa.RecordBatch]:
        """Batches of ``chunk`` rows of what is held; the rest too when ``last``."""
        if not self.held:
            return
        cols = [np.concatenate(c) for c in zip(*self.held)] if len(self.held) > 1 else self.held[0]
        n = cols[0].size
        whole = n if last else n - n % self.chunk
        for s in range(0, whole, self.chunk):
            yield pa.record_batch([pa.array(c[s:s + self.chunk]) for c in cols], schema=self.schema)
        self.held = [[c[whole:] for c in cols]] if whole < n else []
        self.rows = n - whole


class Verifier:
    """What verifies one loaded shard: ``verify_shard(shard, data, ...)`` (:func:`data_pairs`,
    :func:`.links.data_links`, :func:`.links.exact_links`), over ``shingles`` when
    given (exact verification: passed as its ``shingles=``). The self-join calls
    :meth:`prepare` with its shards before it verifies any (the candidate rows' shingle
    sets fetched in row order, :meth:`.shingles.ShingleSets.prefetch`, their index held
    in memory within the budget's ``sets`` part)."""

    def __init__(self, verify_shard, shingles: ShingleSets | None = None, **options):
        self.verify_shard = verify_shard
        self.shingles = shingles
        self.options = options if shingles is None else {**options, "shingles": shingles}

    def __call__(self, *args, **kwargs):
        return self.verify_shard(*args, **self.options, **kwargs)

    def prepare(self, shards: list[Shard], docs: np.ndarray | None = None, budget: Budget | None = None) -> None:
        if self.shingles is not None:
            self.shingles.prefetch(shards, docs, None if budget is None else budget.sets)

    def close(self) -> None:
        """Close the shingle sets' files (exact verification), once the self-join is done."""
        if self.shingles is not None:
            self.shingles.close()

    def closing(self, batches: Iterator) -> Iterator:
        """``batches``, then :meth:`close`, however their consumer stops (done, an error,
        or the iterator dropped)."""
        try:
            yield from batches
        finally:
            self.close()


def prepare(verifier, shards: list[Shard], docs: np.ndarray | None = None, budget: Budget | None = None) -> None:
    """:meth:`Verifier.prepare` of ``verifier`` (``docs``: the shards' candidate docs,
    when the caller read them already; ``budget``: the self-join's, whose ``sets`` part
    bounds the shingle sets' index in memory, unbounded without); nothing for a plain
    function (a caller's own verifier, as tests pass)."""
    if isinstance(verifier, Verifier):
        verifier.prepare(shards, docs, budget)


def remaining(verifier, budget: Budget) -> Budget:
    """What is left of ``budget`` to verify in once ``verifier`` is prepared (its shingle
    sets' share, :meth:`.shingles.ShingleSets.budget_bytes`; :meth:`Budget.less`)."""
    if isinstance(verifier, Verifier) and verifier.shingles is not None:
        return budget.less(verifier.shingles.budget_bytes())
    return budget


def pair_verifier(verify: str, opened=None) -> Verifier:
    """:func:`data_pairs` for a checked ``verify`` mode, as :mod:`.steps` calls it (the
    twin of :func:`.links.link_verifier`). ``verify="exact"``: over the rows' shingle sets
    of ``opened`` (an opened index), shared by all the shards of one self-join, each row
    fetched and shingled once (:class:`lance_minhash_sql.selfjoin.shingles.ShingleSets`)."""
    if verify == "exact":
        return Verifier(data_pairs, ShingleSets(opened), verify=verify)
    return Verifier(data_pairs)
