"""Oracles of the self-join's accuracy: an exact Jaccard similarity join and the
probability that MinHash LSH reports a pair.

* :func:`exact_join` lists every pair of shingle sets with Jaccard ``>= t`` without
  comparing all ``n^2`` pairs: *prefix filtering* (Chaudhuri et al. 2006; Bayardo et al.
  2007). Tokens are ranked by global frequency, rarest first, and each set is sorted by
  rank. Two sets ``x``, ``y`` with ``J(x, y) >= t`` share at least ``ceil(t |x|)`` of
  ``x``'s tokens, so they share a token within the first ``|x| - ceil(t |x|) + 1`` tokens
  (the *prefix*) of each: the candidates are the pairs sharing a prefix token, found in
  an inverted index of prefix tokens, and each candidate is verified exactly (with the
  length filter ``t |x| <= |y|`` first). The sets are the index's own: XXH64 shingle
  hashes from the package's signer (same tokenizer and shingle size), so the Jaccard
  here is exactly what MinHash estimates. ``tests/test_pairs_accuracy.py`` checks the
  join against naive pairwise Jaccard (``naive.exact_jaccard``) on a sample.
* :func:`reported_probability`: a pair of Jaccard ``J`` is *reported* when it is a
  candidate (all ``r`` values of some band equal) **and** verified (at least ``min_eq``
  of the ``k`` values equal). Each position is equal with probability ``p = J + (1 - J) /
  2**16`` (the minimum shingle is shared with probability ``J``; otherwise two different
  minima still agree in the kept 16 bits with probability ``2**-16``), independently; so
  the equal positions of a band are binomial ``(r, p)``, and a dynamic programme over the
  ``b`` bands tracks (equal positions so far, some band complete). The two events are
  positively correlated; treating them as independent would understate the probability.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from lance_minhash_sql.kernels.config import JIT
from lance_minhash_sql.kernels.similarity import sorted_jaccard

__all__ = ["exact_join", "reported_probability", "HASH_BITS"]

HASH_BITS = 16  # signature values are the top 16 bits of a 64-bit minimum


def _prefix_order(offsets: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Global token ranks (rarest first, ties by hash) of every CSR entry, each row's
    entries sorted by rank."""
    row = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    _, inv, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    rank_of = np.empty(counts.size, dtype=np.int64)
    rank_of[np.lexsort((np.arange(counts.size), counts))] = np.arange(counts.size)
    ranks = rank_of[inv]
    return ranks[np.lexsort((ranks, row))]


def _prefix_lengths(sizes: np.ndarray, t: float) -> np.ndarray:
    """``|x| - ceil(t |x|) + 1`` (0 for empty sets); ``ceil`` guarded against rounding down."""
    need = np.ceil(t * sizes - 1e-9).astype(np.int64)
    return np.where(sizes > 0, sizes - need + 1, 0)


@njit(**JIT)
def _join(offsets, hashes, ranked, plen, post_start, post_rows, t):
    n = offsets.size - 1
    mark = np.full(n, -1, dtype=np.int64)
    left = []
    right = []
    jac = []
    for x in range(n):
        sx = offsets[x + 1] - offsets[x]
        for q in range(offsets[x], offsets[x] + plen[x]):
            tok = ranked[q]
            for e in range(post_start[tok], post_start[tok + 1]):
                y = post_rows[e]
                if y <= x or mark[y] == x:
                    continue
                mark[y] = x
                sy = offsets[y + 1] - offsets[y]
                if min(sx, sy) < t * max(sx, sy) - 1e-9:
                    continue
                j = sorted_jaccard(hashes[offsets[x]:offsets[x + 1]], hashes[offsets[y]:offsets[y + 1]])
                if j >= t:
                    left.append(x)
                    right.append(y)
                    jac.append(j)
    return np.array(left, dtype=np.int64), np.array(right, dtype=np.int64), np.array(jac, dtype=np.float64)


def exact_join(offsets: np.ndarray, hashes: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``i < j`` of CSR sets (sorted distinct values per row) with Jaccard
    ``>= t`` (empty sets never pair): ``(i, j, jaccard)`` sorted by ``(i, j)``."""
    if not 0.0 < t <= 1.0:
        raise ValueError(f"t={t} must be in (0, 1]")
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.diff(offsets)
    ranked = _prefix_order(offsets, hashes)
    plen = _prefix_lengths(sizes, t)
    # inverted index of prefix tokens: rows of each token, ascending
    row = np.repeat(np.arange(sizes.size), sizes)
    in_prefix = (np.arange(ranked.size) - offsets[row]) < plen[row]
    tok, rows = ranked[in_prefix], row[in_prefix]
    order = np.lexsort((rows, tok))
    post_rows = rows[order]
    post_start = np.searchsorted(tok[order], np.arange(int(ranked.max(initial=-1)) + 2))
    left, right, jac = _join(offsets, hashes, ranked, plen, post_start, post_rows, float(t))
    o = np.lexsort((right, left))
    return left[o], right[o], jac[o]


def reported_probability(jaccard, num_hashes: int, num_bands: int, min_eq: int) -> np.ndarray:
    """Probability that a pair of Jaccard ``jaccard`` (array) shares a band and has at least
    ``min_eq`` equal signature values, positions independent (see the module doc)."""
    j = np.atleast_1d(np.asarray(jaccard, dtype=np.float64))
    p = j + (1.0 - j) * 2.0**-HASH_BITS
    r = num_hashes // num_bands
    e = np.arange(r + 1)
    comb = np.array([math.comb(r, int(x)) for x in e], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        band = comb * p[:, None] ** e * (1.0 - p[:, None]) ** (r - e)  # [n, r + 1]
    # dist[:, total, full]: after some bands, P(total equal, some band complete = full)
    dist = np.zeros((j.size, num_hashes + 1, 2))
    dist[:, 0, 0] = 1.0
    for _ in range(num_bands):
        nxt = np.zeros_like(dist)
        for x in range(r + 1):
            w = band[:, x, None]
            if x < r:
                nxt[:, x:, :] += w[:, :, None] * dist[:, :num_hashes + 1 - x, :]
            else:
                nxt[:, x:, 1] += w * (dist[:, :num_hashes + 1 - x, 0] + dist[:, :num_hashes + 1 - x, 1])
        dist = nxt
    return dist[:, min_eq:, 1].sum(axis=1)
