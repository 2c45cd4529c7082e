"""Similarity of signatures and of shingle sets, and LSH band keys.

The exact Jaccard of shingle sets: of two sorted sets (:func:`sorted_jaccard`), of pairs of
sets of a CSR collection (:func:`pair_jaccard`), and exact verification's check of
candidate pairs against a threshold (:func:`jaccard_at_least_between`, one collection:
:func:`jaccard_at_least`), settled by the sets' sizes and bucket counts before any merge.

Band key of band ``j`` (``r`` rows per band)::

    key[j] = (j << 56) | (XXH64(le_u16_bytes(sig[j*r:(j+1)*r]), seed=42) & 0x00FFFFFFFFFFFFFF)

``sig_bytes`` is the signature matrix viewed as bytes (``uint8[n, 2k]``, little-endian
u16 on the host), so each band is a contiguous byte range of its row.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core import lance_format
from lance_minhash_sql.kernels.config import JIT, jit_twins, njit, prange
from lance_minhash_sql.kernels.cpu import has_vectors_256, has_wide_multiply
from lance_minhash_sql.kernels.xxh64 import xxh64, xxh64_16x8

SEED = np.uint64(lance_format.SEED)
_KEY_MASK = np.uint64(lance_format.BAND_HASH_MASK)
_U56 = np.uint64(lance_format.BAND_SHIFT)


# Lance's similarity formula, compiled for the kernels (one body: lance_format.similarity)
lance_similarity_jit = njit(**JIT, inline="always")(lance_format.similarity)


@njit(**JIT, inline="always")
def _band_keys_row(row, num_bands, width, out):
    for j in range(num_bands):
        h = xxh64(row, j * width, width, SEED)
        out[j] = (np.uint64(j) << _U56) | (h & _KEY_MASK)


def _band_keys(sig_bytes, num_bands):
    """``uint64[n, num_bands]`` band keys of each signature row: bands of 16 bytes (8
    hashes) eight at a time (:func:`..kernels.xxh64.xxh64_16x8`) where the CPU has
    vectors of 64-bit lanes (``kernels/cpu.py``: ``has_wide_multiply`` or
    ``has_vectors_256``), on C-contiguous rows."""
    n = sig_bytes.shape[0]
    width = sig_bytes.shape[1] // num_bands  # bytes per band = 2 * rows per band
    keys = np.empty((n, num_bands), dtype=np.uint64)
    if width == 16 and (has_wide_multiply() or has_vectors_256()) and sig_bytes.flags.c_contiguous:
        for i in prange(n):
            for j in range(0, num_bands, 8):
                xxh64_16x8(sig_bytes, i, j * 16, min(8, num_bands - j), SEED, keys, j)
            for j in range(num_bands):
                keys[i, j] = (np.uint64(j) << _U56) | (keys[i, j] & _KEY_MASK)
        return keys
    for i in prange(n):
        _band_keys_row(sig_bytes[i], num_bands, width, keys[i])
    return keys


# band_keys_serial: on the calling thread, for a few query signatures
band_keys, band_keys_serial = jit_twins(_band_keys)


@njit(**JIT)
def sorted_jaccard(a, b):
    """Jaccard of two sorted arrays of distinct values."""
    i = 0
    j = 0
    inter = 0
    while i < a.size and j < b.size:
        if a[i] == b[j]:
            inter += 1
            i += 1
            j += 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    union = a.size + b.size - inter
    return inter / union if union else 0.0


@njit(**JIT)
def least_common(na, nb, threshold):
    """The fewest common values two sets of ``na`` and ``nb`` distinct values need for
    ``inter / (na + nb - inter) >= threshold`` (that float comparison itself); ``min(na,
    nb) + 1`` when none is enough."""
    lo = min(na, nb)
    need = int(threshold * (na + nb) / (1.0 + threshold))
    need = min(max(need - 1, 0), lo)
    while need <= lo and need / (na + nb - need) < threshold:
        need += 1
    return need


COUNT_BITS = 6  # a hash's bucket: its top COUNT_BITS bits
COUNT_BUCKETS = 1 << COUNT_BITS  # buckets of a set's bucket counts (bucket_counts): a byte each
_COUNT_SHIFT = 64 - COUNT_BITS


@njit(**JIT)
def bucket_counts(offsets, hashes):
    """``uint8[n, COUNT_BUCKETS]``: how many of each set's distinct hashes (the CSR
    ``hashes[offsets[r]:offsets[r + 1]]``) fall in each of :data:`COUNT_BUCKETS` buckets
    (a hash's top bits), saturating at 255.

    Two sets share a value only within one bucket, so ``sum_q min(a_q, b_q)`` bounds their
    common values from above (:func:`jaccard_at_least`
    settles most pairs under a threshold with it, a byte a bucket, without reading the
    sets); a saturated bucket bounds nothing and makes the bound void
    (:func:`common_bound`)."""
    n = offsets.size - 1
    out = np.zeros((n, COUNT_BUCKETS), dtype=np.uint8)
    for r in range(n):
        for i in range(offsets[r], offsets[r + 1]):
            q = hashes[i] >> np.uint64(_COUNT_SHIFT)
            if out[r, q] < 255:
                out[r, q] += 1
    return out


@njit(**JIT)
def gather_sets(positions, starts, ends, counts, out_sizes, out_counts):
    """The sizes (``ends - starts``) and :func:`bucket_counts` of the sets at
    ``positions``, in that order, into ``out_sizes`` / ``out_counts``: a pool's rows'
    sets beside it (``kernels/bucket_pairs.py: pair_chunk``), each row's loads
    independent of the others'."""
    for i in range(positions.size):
        p = positions[i]
        out_sizes[i] = ends[p] - starts[p]
        for q in range(COUNT_BUCKETS):
            out_counts[i, q] = counts[p, q]


@njit(**JIT, inline="always")
def common_bound(counts_a, a, counts_b, b):
    """An upper bound of the common values of set ``a`` (row ``a`` of ``counts_a``) and set
    ``b`` (row ``b`` of ``counts_b``) from their :func:`bucket_counts`; a large number when
    a bucket saturated in both. One pass without branches over the 16 bytes (vector code)."""
    bound = 0
    saturated = 0
    for q in range(COUNT_BUCKETS):
        ca = counts_a[a, q]
        cb = counts_b[b, q]
        bound += min(ca, cb)
        saturated |= (ca & cb) == 255
    return bound if saturated == 0 else 1 << 40


@njit(**JIT, inline="always")
def needed_common(na, nb, bound, threshold):
    """The fewest common values (:func:`least_common`) two non-empty sets of ``na`` and
    ``nb`` values with at most ``bound`` common values (:func:`common_bound`) need to
    reach ``threshold``; ``-1`` when their sizes (``min / max``) or the bound leave them
    fewer, so the exact Jaccard is under ``threshold`` and the sets need not be read.
    The one pre-merge rule of exact verification: :func:`jaccard_at_least_between` and,
    before a pair is even written, ``kernels/bucket_pairs.py: pair_chunk``
    (:func:`may_reach`)."""
    need = least_common(na, nb, threshold)
    if need > min(na, nb) or bound < need:
        return -1
    return need


@njit(**JIT, inline="always")
def may_reach(na, nb, bound, threshold):
    """``needed_common(...) >= 0`` for sets of ``na`` and ``nb`` values whose
    :func:`common_bound` is ``bound``, without a branch (a pair kernel's filter, where
    which pairs fail follows no pattern): the most common values their sizes and counts
    allow, ``c = min(bound, na, nb)``, reach ``threshold`` under :func:`least_common`'s
    comparison (``c / (na + nb - c)``, which grows with ``c``); False when a set is empty."""
    c = min(bound, na, nb)
    return (na > 0) & (nb > 0) & (c / max(na + nb - c, 1) >= threshold)


@njit(**JIT, inline="always")
def merged_jaccard(a, a0, a1, b, b0, b1, need):
    """``inter / union`` of the sorted distinct ``a[a0:a1]`` and ``b[b0:b1]`` when they share
    at least ``need`` values (``need <= min`` of their sizes), else ``-1.0``. The merge is
    branch-free (both cursors advance on equal values) and stops once either side has more
    unmatched values than it may lose, a value passed over in a sorted merge being in
    neither the intersection nor ever matched later. Inlined into its callers
    (:func:`jaccard_if_at_least`, :func:`jaccard_at_least`):
    a call per pair would cost a third more."""
    na = a1 - a0
    nb = b1 - b0
    lose_a = a0 + na - need  # i - inter may reach this: the unmatched values a may lose
    lose_b = b0 + nb - need
    i = a0
    j = b0
    inter = 0
    while i < a1 and j < b1:
        x = a[i]
        y = b[j]
        inter += x == y
        i += x <= y
        j += y <= x
        if i - inter > lose_a or j - inter > lose_b:
            break
    if i - inter > lose_a or j - inter > lose_b:
        return -1.0
    return inter / (na + nb - inter)


@njit(**JIT)
def jaccard_if_at_least(a, a0, a1, b, b0, b1, threshold):
    """:func:`sorted_jaccard` of the non-empty sorted distinct ``a[a0:a1]`` and
    ``b[b0:b1]`` where it reaches ``threshold``, else ``-1.0``, settled early: sizes alone
    (``min / max``) can put it under, else :func:`merged_jaccard`'s merge."""
    need = least_common(a1 - a0, b1 - b0, threshold)
    if need > min(a1 - a0, b1 - b0):
        return -1.0
    return merged_jaccard(a, a0, a1, b, b0, b1, need)


def _set_jaccard(left_offsets, left_hashes, right_offsets, right_hashes):
    """Jaccard of row i of two CSR set arrays (``nan`` where either set is empty)."""
    n = left_offsets.size - 1
    out = np.empty(n, dtype=np.float64)
    for i in prange(n):
        a = left_hashes[left_offsets[i]:left_offsets[i + 1]]
        b = right_hashes[right_offsets[i]:right_offsets[i + 1]]
        out[i] = np.nan if a.size == 0 or b.size == 0 else sorted_jaccard(a, b)
    return out


# set_jaccard_serial: on the calling thread, for a DuckDB chunk (at most 2,048 rows)
set_jaccard, set_jaccard_serial = jit_twins(_set_jaccard)


@njit(**JIT)
def pair_jaccard(offsets, hashes, ia, ib):
    """Exact Jaccard of CSR sets ``ia[i]`` and ``ib[i]`` (``nan`` if either is empty)."""
    n = ia.size
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        a = hashes[offsets[ia[i]]:offsets[ia[i] + 1]]
        b = hashes[offsets[ib[i]]:offsets[ib[i] + 1]]
        out[i] = np.nan if a.size == 0 or b.size == 0 else sorted_jaccard(a, b)
    return out



@njit(**JIT)
def jaccard_at_least(starts, ends, hashes, counts, ia, ib, threshold):
    """:func:`jaccard_at_least_between` of sets ``ia[i]`` and ``ib[i]`` of one collection."""
    return jaccard_at_least_between(starts, ends, hashes, counts, starts, ends, hashes, counts, ia, ib, threshold)


@njit(**JIT)
def jaccard_at_least_between(a_starts, a_ends, a_hashes, a_counts, b_starts, b_ends, b_hashes, b_counts, ia, ib,
                             threshold):
    """Exact Jaccard of set ``ia[i]`` of one collection (set ``r``: the sorted distinct
    ``a_hashes[a_starts[r]:a_ends[r]]``, ``a_counts[r]`` its ``similarity.bucket_counts``)
    and set ``ib[i]`` of another (``b_...``) where it reaches ``threshold``; ``-1.0`` where
    not, ``nan`` where a set is empty. The value kept is ``inter / union`` as
    :func:`pair_jaccard` computes it. A pair is settled by the sizes, then the bucket
    counts' bound on its common values (most candidates under a threshold end there,
    their sets unread), then in the merge of ``similarity.merged_jaccard``. Counts
    without rows (``a_counts.shape[0] == 0``): the pairs passed the bound already
    (``kernels/bucket_pairs.py: pair_chunk`` given the sets), which is not read again."""
    n = ia.size
    out = np.empty(n, dtype=np.float64)
    counted = a_counts.shape[0] > 0
    for p in range(n):
        a0 = a_starts[ia[p]]
        a1 = a_ends[ia[p]]
        b0 = b_starts[ib[p]]
        b1 = b_ends[ib[p]]
        na = a1 - a0
        nb = b1 - b0
        if na == 0 or nb == 0:
            out[p] = np.nan
            continue
        bound = common_bound(a_counts, ia[p], b_counts, ib[p]) if counted else min(na, nb)
        need = needed_common(na, nb, bound, threshold)
        if need < 0:
            out[p] = -1.0
            continue
        out[p] = merged_jaccard(a_hashes, a0, a1, b_hashes, b0, b1, need)
    return out
