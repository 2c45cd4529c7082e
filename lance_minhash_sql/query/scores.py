"""Threshold and exact scores of search hits: ``k := NULL`` with ``threshold``, and ``exact``.

* :func:`check_limit` turns ``(k, threshold)`` into the top-k cut: ``k`` rows per query,
  or no limit when ``k`` is ``None`` (then a threshold is required).
* :func:`apply_scores` keeps the hits that reach a search's
  :class:`lance_minhash_sql.core.params.ThresholdCut` (resolved once per search): a hit is
  kept when its MinHash similarity reaches the threshold, by the self-join's rule:
  ``float32(eq) / float32(k) >= threshold`` (``eq`` equal positions, recovered exactly
  from Lance's float32 ``_distance = 1 - eq / k``: :func:`equal_values`), i.e.
  ``eq >= min_matches(threshold, k)``. Cutting at the top ``k`` by distance and then at the
  threshold is the same as the other way round: the order is by distance.
  :func:`at_threshold` and :func:`verified` (its floor from ``core/banding.py:
  candidate_floor``) state the same rule for
  one threshold at a time.
* :func:`exact_scores`: the exact Jaccard of each query's shingle set and its hit's (the
  index's tokenizer and shingle size; the hits' texts fetched by row id), NaN when either
  has no shingles; with a threshold the hits below it are dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.core.checks import check_int, check_threshold
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.lance_format import min_matches
from lance_minhash_sql.core.banding import candidate_floor
from lance_minhash_sql.core.params import ThresholdCut
from lance_minhash_sql.index.opened import OpenedIndex

__all__ = ["NO_LIMIT", "check_limit", "equal_values", "at_threshold", "verified", "exact_scores",
           "apply_scores"]

NO_LIMIT = 1 << 40  # the cut for k = None: more rows than any dataset has


def check_limit(k: Any, threshold: Any) -> tuple[int, float | None]:
    """``(rows per query, threshold or None)``; ``k=None`` means no limit and needs a threshold."""
    t = None if threshold is None else check_threshold(threshold)
    if k is None:
        if t is None:
            raise InvalidParameterError(
                "k is NULL (no limit), which needs a threshold, but threshold is NULL too: pass a threshold, "
                "e.g. threshold := 0.8 for every row at least that similar, or a number of rows, e.g. k := 10")
        return NO_LIMIT, t
    k = check_int("k", k, "e.g. 10 (rows to return per query), or NULL for no limit with a threshold", lo=1)
    return min(int(k), NO_LIMIT), t


def equal_values(distance: np.ndarray, num_hashes: int) -> np.ndarray:
    """``int64[n]``: the equal signature values ``eq`` behind Lance's float32
    ``_distance = 1 - eq / k``, recovered exactly."""
    return np.rint((1.0 - distance.astype(np.float64)) * num_hashes).astype(np.int64)


def at_threshold(distance: np.ndarray, num_hashes: int, threshold: float) -> np.ndarray:
    """Mask of the hits whose similarity ``float32(eq) / float32(k)`` reaches ``threshold``."""
    return equal_values(distance, num_hashes) >= min_matches(threshold, num_hashes)


def verified(distance: np.ndarray, jaccard: np.ndarray | None, num_hashes: int, threshold: float,
             verify: str) -> np.ndarray:
    """Mask of the hits a threshold search (and the self-join) keeps at ``threshold`` under
    ``verify``: the estimate reaches :func:`lance_minhash_sql.core.banding.candidate_floor`, and for ``"exact"`` the exact
    Jaccard (``jaccard``) reaches the threshold."""
    keep = at_threshold(distance, num_hashes, candidate_floor(threshold, num_hashes, verify))
    if verify == "exact":
        keep &= jaccard >= threshold
    return keep


def exact_scores(opened: OpenedIndex, queries: pa.Array, query_index: np.ndarray, rowids: np.ndarray) -> np.ndarray:
    """Exact shingle Jaccard of ``queries[query_index[i]]`` and row ``rowids[i]``: each
    distinct hit row's text fetched once, by the opened index's fetcher of result rows
    (``io/takes.py: RowFetcher``), then every pair shingled and scored by the index's
    signer (``Signer.pair_jaccard``)."""
    if rowids.size == 0:
        return np.empty(0, dtype=np.float64)
    uq = sorted_unique(query_index)
    ur = sorted_unique(rowids)
    rows = opened.fetcher.take(ur, [opened.column], "the exact scores of the search", opened.uri)
    texts = pa.concat_arrays([queries.take(pa.array(uq)).cast(pa.large_string()),
                              rows.column(0).combine_chunks().cast(pa.large_string())])
    return opened.signer.pair_jaccard(texts, np.searchsorted(uq, query_index), np.searchsorted(ur, rowids) + uq.size)


def apply_scores(opened: OpenedIndex, queries: pa.Array, q: np.ndarray, rid: np.ndarray, dist: np.ndarray,
                 cut: ThresholdCut):
    """The hits ``(query index, row id, distance)`` that reach ``cut``'s estimate, and their
    exact Jaccard (``None`` unless ``cut.exact``); with a threshold and exact verification,
    only those whose exact Jaccard reaches it."""
    if cut.min_eq > 0:
        keep = equal_values(dist, cut.num_hashes) >= cut.min_eq
        if not keep.all():
            q, rid, dist = q[keep], rid[keep], dist[keep]
    if not cut.exact:
        return q, rid, dist, None
    jac = exact_scores(opened, queries, q, rid)
    if cut.threshold is not None:
        keep = jac >= cut.threshold
        if not keep.all():
            q, rid, dist, jac = q[keep], rid[keep], dist[keep], jac[keep]
    return q, rid, dist, jac
