"""The order of a search's answer: one rule, applied by both engines.

A query's hits are ordered by distance, then row id: by ``(mismatches, row id)``, where
``mismatches`` is the number of signature positions that differ from the query's (the
distance ``1 - float32(k - mismatches) / float32(k)`` grows with it); on a tie the smaller
row id comes first. A query keeps its first ``limit`` hits. Segments cover distinct rows,
so the top ``limit`` over every segment at once equals the merge of each segment's top
``limit``, whatever order the segments are listed in.

The numpy engine (``query/probe.py``) and the kernels' engine's visiting bound
(``query/kernel_topk.py``) apply the rule through :func:`rank_order` and
:func:`first_of_each`; the compiled kernels apply the same rule in
``kernels/lsh.py`` (``_select``: histogram cut on mismatches, then ``kernels/order.py``'s
stable sort by ``(mismatches, row id)``). ``tests/test_probe.py`` runs both engines on the
same inputs, segments out of row-id order included.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core.lance_format import similarity

__all__ = ["rank_order", "first_of_each", "distances"]


def rank_order(query: np.ndarray, mism: np.ndarray, rowid: np.ndarray) -> np.ndarray:
    """Indices that order hits by query, then ``(mismatches, row id)``."""
    return np.lexsort((rowid, mism, query))


def first_of_each(query: np.ndarray, limit: int) -> np.ndarray:
    """``bool[n]``: of hits ordered by :func:`rank_order` (``query`` in that order), the
    first ``limit`` of each query."""
    rank = np.arange(query.size) - np.searchsorted(query, query, side="left")
    return rank < limit


def distances(mism: np.ndarray, k: int) -> np.ndarray:
    """Lance's ``_distance`` (float32) of hits with ``mism`` of ``k`` positions differing."""
    return (np.float32(1) - similarity(k - mism, k)).astype(np.float32, copy=False)
