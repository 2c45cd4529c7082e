"""The self-join's pair verification: the verified pairs of a loaded shard.

A candidate pair (two live rows sharing a band key, each pair once from the first band it
shares) is verified with the full signatures: ``similarity = float32(eq) / float32(k)``
(``eq`` equal positions; Lance's ``1 - _distance``), kept when it reaches the threshold
(``verify="estimate"``). With ``verify="exact"`` candidates whose estimate reaches
:func:`lance_minhash_sql.core.params.exact_candidate_floor` are kept iff the exact Jaccard
of their shingle sets reaches the threshold (``jaccard`` filled). Links of clusters are
verified in :mod:`.links`; both run on every executor (``selfjoin/executor.py``).
"""

from __future__ import annotations

import threading
from typing import Iterator

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.params import exact_candidate_floor
from lance_minhash_sql.core.tuning import EXACT_CHUNK, VISIT_BUDGET
from lance_minhash_sql.index.results import PAIRS_EXACT_SCHEMA, PAIRS_SCHEMA
from lance_minhash_sql.kernels.pairs import jaccard_at_least, min_matches, new_cursor, pair_chunk
from lance_minhash_sql.selfjoin.shards import Plan, Shard, ShardData, shard_windows
from lance_minhash_sql.selfjoin.shingles import ShingleSets

__all__ = ["data_pairs", "pair_verifier", "Verifier", "prepare", "remaining"]


def _similarity(eq: np.ndarray, k: int) -> np.ndarray:
    return lance_similarity(eq, k).astype(np.float64)


def _exact(plan: Plan, threshold: float, left: np.ndarray, right: np.ndarray, sim: np.ndarray,
           shingles: ShingleSets | None):
    """The pairs with ``jaccard >= threshold``, their exact shingle Jaccard computed
    :data:`EXACT_CHUNK` pairs at a time over the rows' sets in ``shingles`` (each row
    fetched and shingled once; a set of its own for this batch when ``None``)."""
    own = shingles is None
    if own:
        shingles = ShingleSets(plan.opened)
    try:
        parts = []
        for s in range(0, left.size, EXACT_CHUNK):
            at = shingles.locate(left[s:s + EXACT_CHUNK], right[s:s + EXACT_CHUNK])
            jac = jaccard_at_least(at.starts, at.ends, at.hashes, at.left, at.right, threshold)
            keep = np.flatnonzero(jac >= threshold)
            parts.append((keep + s, jac[keep]))
    finally:
        if own:
            shingles.close()
    keep = np.concatenate([p[0] for p in parts])
    jac = np.concatenate([p[1] for p in parts])
    return left[keep], right[keep], sim[keep], jac


def _pair_bound(data: ShardData) -> int:
    m = (data.ends - data.starts).astype(np.int64)
    return int((m * (m - 1) // 2).sum())


def data_pairs(shard: Shard, data: ShardData, exact: bool, chunk: int, stop: threading.Event | None = None,
               verify: str = "estimate", shingles: ShingleSets | None = None) -> Iterator[pa.RecordBatch]:
    """The verified pairs of a shard's loaded data (a shard, or a part of one, loaded over
    its group's pool under a memory budget: :mod:`.bounded`, :mod:`.pool`). ``verify="exact"``: candidates
    down to :func:`exact_candidate_floor`, kept by their exact Jaccard (implies ``exact``).
    ``shingles``: the rows' shingle sets, shared by the shards of one self-join
    (:func:`pair_verifier`)."""
    plan = shard.plan
    k = plan.params.num_hashes
    exact = exact or verify == "exact"
    cap = max(1, min(chunk, _pair_bound(data)))
    out_l = np.empty(cap, dtype=np.uint64)
    out_r = np.empty(cap, dtype=np.uint64)
    out_e = np.empty(cap, dtype=np.int32)
    floor = exact_candidate_floor(shard.threshold, k) if verify == "exact" else shard.threshold
    min_eq = min_matches(floor, k)
    schema = PAIRS_EXACT_SCHEMA if exact else PAIRS_SCHEMA
    fill = 0
    for w in shard_windows(data):
        cursor = new_cursor()
        done = False
        while not done:
            n, done = pair_chunk(w.keys, w.docs, w.starts, w.ends, w.words, w.halves, w.slot, w.rowids, k,
                                 plan.params.num_bands, min_eq, cursor, out_l[fill:], out_r[fill:], out_e[fill:],
                                 VISIT_BUDGET)
            fill += n
            if stop is not None and stop.is_set():
                return
            if fill == cap:
                yield from _emit(plan, shard.threshold, exact, schema, out_l, out_r, out_e, fill, k, shingles)
                fill = 0
    if fill:
        yield from _emit(plan, shard.threshold, exact, schema, out_l, out_r, out_e, fill, k, shingles)


def _emit(plan: Plan, threshold: float, exact: bool, schema: pa.Schema, out_l, out_r, out_e, n: int, k: int,
          shingles: ShingleSets | None):
    left, right, sim = out_l[:n].copy(), out_r[:n].copy(), _similarity(out_e[:n], k)
    if exact:
        left, right, sim, jac = _exact(plan, threshold, left, right, sim, shingles)
        if left.size == 0:
            return
        cols = [left, right, sim, jac]
    else:
        cols = [left, right, sim]
    yield pa.record_batch([pa.array(c) for c in cols], schema=schema)


class Verifier:
    """What verifies one loaded shard: ``verify_shard(shard, data, ...)`` (:func:`data_pairs`,
    :func:`.links.data_links`, :func:`.links.exact_links`), over ``shingles`` when
    given (exact verification: passed as its ``shingles=``). The self-join calls
    :meth:`prepare` with its shards before it verifies any (the candidate rows' shingle
    sets fetched in row order, :meth:`.shingles.ShingleSets.prefetch`)."""

    def __init__(self, verify_shard, shingles: ShingleSets | None = None, **options):
        self.verify_shard = verify_shard
        self.shingles = shingles
        self.options = options if shingles is None else {**options, "shingles": shingles}

    def __call__(self, *args, **kwargs):
        return self.verify_shard(*args, **self.options, **kwargs)

    def prepare(self, shards: list[Shard]) -> None:
        if self.shingles is not None:
            self.shingles.prefetch(shards)


def prepare(verifier, shards: list[Shard]) -> None:
    """:meth:`Verifier.prepare` of ``verifier``; nothing for a plain function (a caller's
    own verifier, as tests pass)."""
    if isinstance(verifier, Verifier):
        verifier.prepare(shards)


def remaining(verifier, limit: int) -> int:
    """What is left of a budget of ``limit`` bytes to verify in once ``verifier`` is
    prepared (its shingle sets' share, :meth:`.shingles.ShingleSets.budget_bytes`), at
    least half of it."""
    if isinstance(verifier, Verifier) and verifier.shingles is not None:
        return max(limit // 2, limit - verifier.shingles.budget_bytes())
    return limit


def pair_verifier(verify: str, opened=None) -> Verifier:
    """:func:`data_pairs` for a checked ``verify`` mode, as :mod:`.bounded` calls it (the
    twin of :func:`.links.link_verifier`). ``verify="exact"``: over the rows' shingle sets
    of ``opened`` (an opened index), shared by all the shards of one self-join, each row
    fetched and shingled once (:class:`lance_minhash_sql.selfjoin.shingles.ShingleSets`)."""
    if verify == "exact":
        return Verifier(data_pairs, ShingleSets(opened), verify=verify)
    return Verifier(data_pairs)
