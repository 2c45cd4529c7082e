"""Every pair of rows of a corpus whose exact shingle Jaccard reaches a threshold: the
reference of ``benchmarks/quality.py``, computed over the whole corpus, not from LSH.

Prefix filtering (Chaudhuri et al. 2006; Bayardo et al. 2007): shingles are ranked by
their number of rows, rarest first, and each row's set sorted by rank. Two sets ``x``,
``y`` with ``J(x, y) >= t`` share at least ``ceil(t / (1 + t) * (|x| + |y|))`` shingles,
so they share one of the first ``|x| - ceil(t |x|) + 1`` shingles of ``x`` (its *prefix*)
and of ``y``: the candidates are the pairs of rows whose prefixes share a shingle, found
through an inverted index of the prefixes (rare shingles: short lists). Each candidate
passes the size filter ``t |x| <= |y| <= |x| / t`` and is then verified by merging the
two sorted sets; a pair is counted once, at the first shingle the two sets share (which
lies in both prefixes). Exact: no pair at or above ``t`` is missed, none below is kept.

The shingle sets are the package's (``Signer.shingle_sets``: the index's tokenizer and
shingle size), the same exact verification ``verify := 'exact'`` uses; rows with an
empty set are in no pair.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _sort_rows(offsets, tokens):
    for i in range(offsets.size - 1):
        tokens[offsets[i]:offsets[i + 1]] = np.sort(tokens[offsets[i]:offsets[i + 1]])


@numba.njit(cache=True, nogil=True)
def _prefix_entries(offsets, tokens, t):
    sizes = offsets[1:] - offsets[:-1]
    total = 0
    plen = np.zeros(sizes.size, dtype=np.int64)
    for i in range(sizes.size):
        s = sizes[i]
        if s > 0:
            plen[i] = s - int(math.ceil(t * s - 1e-9)) + 1
            total += plen[i]
    tok = np.empty(total, dtype=np.int32)
    row = np.empty(total, dtype=np.int32)
    p = 0
    for i in range(sizes.size):
        for j in range(plen[i]):
            tok[p] = tokens[offsets[i] + j]
            row[p] = i
            p += 1
    return tok, row


@numba.njit(cache=True, nogil=True)
def _join(offsets, tokens, ptok, prow, t):
    """Pairs ``(a < b, jaccard)`` over the inverted index (``ptok`` sorted, ``prow`` the rows)."""
    cap = 1 << 16
    out_a = np.empty(cap, dtype=np.int64)
    out_b = np.empty(cap, dtype=np.int64)
    out_j = np.empty(cap, dtype=np.float64)
    n = 0
    s0 = 0
    while s0 < ptok.size:
        s1 = s0
        while s1 < ptok.size and ptok[s1] == ptok[s0]:
            s1 += 1
        c = ptok[s0]
        for x in range(s0, s1):
            for y in range(x + 1, s1):
                a, b = prow[x], prow[y]
                if a > b:
                    a, b = b, a
                sa = offsets[a + 1] - offsets[a]
                sb = offsets[b + 1] - offsets[b]
                if min(sa, sb) < t * max(sa, sb) - 1e-9:
                    continue
                i, j = offsets[a], offsets[b]
                ea, eb = offsets[a + 1], offsets[b + 1]
                inter = 0
                first = -1
                while i < ea and j < eb:
                    if tokens[i] == tokens[j]:
                        if first < 0:
                            first = tokens[i]
                        inter += 1
                        i += 1
                        j += 1
                    elif tokens[i] < tokens[j]:
                        i += 1
                    else:
                        j += 1
                if first != c:
                    continue  # counted at the first shingle they share
                jac = inter / (sa + sb - inter)
                if jac >= t:
                    if n == out_a.size:
                        out_a = np.concatenate((out_a, np.empty(out_a.size, dtype=np.int64)))
                        out_b = np.concatenate((out_b, np.empty(out_b.size, dtype=np.int64)))
                        out_j = np.concatenate((out_j, np.empty(out_j.size, dtype=np.float64)))
                    out_a[n] = a
                    out_b[n] = b
                    out_j[n] = jac
                    n += 1
        s0 = s1
    return out_a[:n], out_b[:n], out_j[:n]


def all_pairs(offsets: np.ndarray, hashes: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, jaccard)``: every pair of rows ``a < b`` of the CSR shingle sets (sorted
    distinct hashes per row) whose exact Jaccard is at least ``t``."""
    uniq, inv, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    del uniq
    rank = np.empty(counts.size, dtype=np.int32)
    rank[np.argsort(counts, kind="stable")] = np.arange(counts.size, dtype=np.int32)
    tokens = rank[inv.ravel()]
    del inv, counts, rank
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    _sort_rows(offsets, tokens)
    ptok, prow = _prefix_entries(offsets, tokens, float(t))
    order = np.argsort(ptok, kind="stable")
    return _join(offsets, tokens, ptok[order], prow[order], float(t))
