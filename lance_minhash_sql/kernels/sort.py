"""Stable radix sort of ``(u64 key, u32 doc)`` pairs, run by run, runs in parallel.

The build sorts ``rows x bands`` band rows into ``(band_key, doc_id)`` order. Keys of
band ``j`` all start with byte ``j`` and doc ids arrive ascending, so each band (a *run*)
is sorted on its own with a **stable** sort on the key alone (``docs/signatures.md``,
*Band keys*). The same holds
for a spill partition: a contiguous key range whose doc ids were appended in ascending
order.

:func:`radix_sort_run` sorts one run (and its ``docs`` alongside) in place, with
``nogil``; the build runs several runs at once on Python threads
(``lance_minhash_sql/index/band_sorter.py``, ``sort_runs``). A run's first pass scatters it
by its highest varying bits (the band byte and the spill prefix bits are the same for the
whole run and skipped) into buckets of about :data:`BUCKET_ROWS` rows; each bucket, in
the CPU's cache, is then sorted by LSD passes of :data:`DIGIT_BITS`-bit digits on the
bits below (a counting pass on the next digit, then an insertion sort that only moves
rows within a digit's group). Scratch is two arrays of the run's length per thread: ``12 * rows`` bytes.

One pass over memory instead of one per digit: on 1,000,000 synthetic band keys about
twice as fast as LSD passes over the whole run. Within the whole-run LSD sort, 8-bit digits beat wider ones,
whose scatter passes miss the cache and the TLB, and numpy's stable argsort and DuckDB's
``ORDER BY`` (``benchmarks/sort.py`` prints them side by side).
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core.tuning import BUCKET_ROWS, INSERTION_GROUP_ROWS
from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["DIGIT_BITS", "BUCKET_ROWS", "radix_sort_run", "is_sorted_pairs",
           "partition_band_rows", "partition_band_rows_into", "split_pairs", "scatter_bands",
           "empty_u64", "empty_u32"]

DIGIT_BITS = 8


@njit(**JIT, inline="always")
def _scatter(src_k, src_d, dst_k, dst_d, lo, hi, shift, mask, counts, radix):
    """The counting scatter of ``src[lo:hi]`` into ``dst[lo:hi]`` by digit ``(key >> shift)
    & mask``, stable; ``counts`` holds each of the ``radix`` digits' rows on entry (its
    write positions after)."""
    total = lo
    for v in range(radix):
        t = counts[v]
        counts[v] = total
        total += t
    for i in range(lo, hi):
        k = src_k[i]
        v = (k >> shift) & mask
        p = counts[v]
        counts[v] = p + 1
        dst_k[p] = k
        dst_d[p] = src_d[i]


@njit(**JIT, inline="always")
def _lsd_range(src_k, src_d, dst_k, dst_d, lo, hi, nbits, bits, counts):
    """Stable LSD radix sort of ``src[lo:hi]`` on its low ``nbits`` bits, ``bits``-bit
    digits (``counts``: scratch of ``1 << bits``), passing between ``src`` and ``dst``;
    True when the result ends in ``dst``. A digit with one value over the range is skipped."""
    n = hi - lo
    radix = 1 << bits
    mask = np.uint64(radix - 1)
    in_dst = False
    a_k, a_d, b_k, b_d = src_k, src_d, dst_k, dst_d
    for d in range((nbits + bits - 1) // bits):
        shift = np.uint64(d * bits)
        for v in range(radix):
            counts[v] = 0
        for i in range(lo, hi):
            counts[(a_k[i] >> shift) & mask] += 1
        if counts[(a_k[lo] >> shift) & mask] == n:
            continue
        _scatter(a_k, a_d, b_k, b_d, lo, hi, shift, mask, counts, radix)
        a_k, b_k = b_k, a_k
        a_d, b_d = b_d, a_d
        in_dst = not in_dst
    return in_dst


@njit(**JIT, inline="always")
def _split_insert_range(src_k, src_d, dst_k, dst_d, lo, hi, nbits, bits, counts):
    """Stable sort of ``src[lo:hi]`` on its low ``nbits`` bits into ``dst[lo:hi]``: one
    counting scatter on the top ``bits`` of them, then an insertion sort on the whole key,
    which only moves rows within a digit's group. False (nothing written) when a group has
    more than :data:`..core.tuning.INSERTION_GROUP_ROWS` rows: the caller then takes
    :func:`_lsd_range`. On hash keys a bucket's groups hold one or two rows, so this is
    two passes over the bucket where :func:`_lsd_range` makes one per digit."""
    b = min(bits, nbits)
    shift = np.uint64(nbits - b)
    mask = np.uint64((1 << b) - 1)
    for v in range(1 << b):
        counts[v] = 0
    big = 0
    for i in range(lo, hi):
        v = (src_k[i] >> shift) & mask
        c = counts[v] + 1
        counts[v] = c
        big = max(big, c)
    if big > INSERTION_GROUP_ROWS:
        return False
    _scatter(src_k, src_d, dst_k, dst_d, lo, hi, shift, mask, counts, 1 << b)
    if shift == 0:
        return True
    for i in range(lo + 1, hi):
        k = dst_k[i]
        if k >= dst_k[i - 1]:
            continue
        d = dst_d[i]
        j = i
        while j > lo and dst_k[j - 1] > k:  # strictly greater: equal keys keep their order
            dst_k[j] = dst_k[j - 1]
            dst_d[j] = dst_d[j - 1]
            j -= 1
        dst_k[j] = k
        dst_d[j] = d
    return True


@njit(**JIT)
def radix_sort_run(keys, docs, tmp_keys, tmp_docs, bits):
    """Sort ``keys`` (u64) stably, permuting ``docs`` (u32) alongside, in place.

    ``tmp_keys`` / ``tmp_docs`` are scratch of at least ``len(keys)`` elements; ``bits``
    is the digit width (1..16). One scatter pass on the highest bits that vary over the
    run (as many as leave about :data:`BUCKET_ROWS` rows a bucket) into the scratch, then
    each bucket, now in the CPU's cache, sorted on its remaining bits back into ``keys``
    (:func:`_split_insert_range`, or LSD passes when a bucket's keys crowd one digit):
    one pass over memory instead of one per digit.
    """
    n = keys.size
    if n < 2:
        return
    k0 = keys[0]
    diff = np.uint64(0)
    for i in range(n):
        diff |= keys[i] ^ k0
    if diff == 0:
        return
    top = 63
    while (diff >> np.uint64(top)) == np.uint64(0):
        top -= 1
    width = 1
    while width < 16 and (n >> width) > BUCKET_ROWS:
        width += 1
    width = min(width, top + 1)
    low = top + 1 - width  # bits below the first digit
    shift = np.uint64(low)
    mask = np.uint64((1 << width) - 1)
    bounds = np.zeros((1 << width) + 1, dtype=np.int64)
    for i in range(n):
        bounds[((keys[i] >> shift) & mask) + np.uint64(1)] += 1
    for v in range(1 << width):
        bounds[v + 1] += bounds[v]
    nxt = bounds[:-1].copy()
    for i in range(n):
        k = keys[i]
        v = (k >> shift) & mask
        p = nxt[v]
        nxt[v] = p + 1
        tmp_keys[p] = k
        tmp_docs[p] = docs[i]
    counts = np.empty(1 << bits, dtype=np.int64)
    for v in range(1 << width):
        lo = bounds[v]
        hi = bounds[v + 1]
        if hi - lo > 1 and low > 0 and (_split_insert_range(tmp_keys, tmp_docs, keys, docs, lo, hi, low, bits, counts)
                                         or _lsd_range(tmp_keys, tmp_docs, keys, docs, lo, hi, low, bits, counts)):
            continue  # sorted into keys / docs
        for i in range(lo, hi):  # a loop: slice assignment compiles numba's broadcasting code (seconds)
            keys[i] = tmp_keys[i]
            docs[i] = tmp_docs[i]


@njit(**JIT)
def is_sorted_pairs(keys, docs):
    """True if ``(keys[i], docs[i])`` is strictly ascending."""
    for i in range(1, keys.size):
        if keys[i] < keys[i - 1] or (keys[i] == keys[i - 1] and docs[i] <= docs[i - 1]):
            return False
    return True


@njit(**JIT)
def partition_band_rows_into(keys, first_doc, shift, nparts, out_k, out_d):
    """Scatter a batch's band rows into key-prefix partitions, into ``out_k`` / ``out_d``
    (at least ``n * b`` elements: a buffer reused from batch to batch).

    ``keys`` is ``uint64[n, b]`` (row ``i`` is doc ``first_doc + i``); the partition of a
    key is ``key >> shift``, below ``nparts``. Returns ``(bounds int64[nparts + 1], kmin,
    kmax)`` with partition ``p`` at ``out[bounds[p]:bounds[p + 1]]``, its doc ids ascending
    (rows are visited in order), and each partition's min and max key.
    """
    n, b = keys.shape
    sh = np.uint64(shift)
    counts = np.zeros(nparts + 1, dtype=np.int64)
    kmin = np.full(nparts, np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    kmax = np.zeros(nparts, dtype=np.uint64)
    for i in range(n):
        for j in range(b):
            k = keys[i, j]
            p = k >> sh
            counts[p + 1] += 1
            if k < kmin[p]:
                kmin[p] = k
            if k > kmax[p]:
                kmax[p] = k
    for p in range(nparts):
        counts[p + 1] += counts[p]
    pos = counts[:nparts].copy()
    # row by row (the keys' memory order): each partition still gets its rows in doc
    # order, whichever bands share it
    for i in range(n):
        d = np.uint32(first_doc + i)
        for j in range(b):
            k = keys[i, j]
            p = k >> sh
            q = pos[p]
            pos[p] = q + 1
            out_k[q] = k
            out_d[q] = d
    return counts, kmin, kmax


@njit(**JIT)
def partition_band_rows(keys, first_doc, shift, nparts):
    """:func:`partition_band_rows_into` into fresh buffers: ``(bounds, keys u64, docs u32,
    kmin, kmax)``."""
    n, b = keys.shape
    out_k = np.empty(n * b, dtype=np.uint64)
    out_d = np.empty(n * b, dtype=np.uint32)
    counts, kmin, kmax = partition_band_rows_into(keys, first_doc, shift, nparts, out_k, out_d)
    return counts, out_k, out_d, kmin, kmax


@njit(**JIT)
def split_pairs(keys, docs, shift, mask, nparts):
    """Stable counting split of pairs on ``(key >> shift) & mask``: ``(bounds, keys, docs,
    kmin, kmax)`` as :func:`partition_band_rows`."""
    n = keys.size
    sh = np.uint64(shift)
    mk = np.uint64(mask)
    counts = np.zeros(nparts + 1, dtype=np.int64)
    kmin = np.full(nparts, np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    kmax = np.zeros(nparts, dtype=np.uint64)
    for i in range(n):
        k = keys[i]
        p = (k >> sh) & mk
        counts[p + 1] += 1
        if k < kmin[p]:
            kmin[p] = k
        if k > kmax[p]:
            kmax[p] = k
    for p in range(nparts):
        counts[p + 1] += counts[p]
    pos = counts[:nparts].copy()
    out_k = np.empty(n, dtype=np.uint64)
    out_d = np.empty(n, dtype=np.uint32)
    for i in range(n):
        k = keys[i]
        p = (k >> sh) & mk
        q = pos[p]
        pos[p] = q + 1
        out_k[q] = k
        out_d[q] = docs[i]
    return counts, out_k, out_d, kmin, kmax


@njit(**JIT)
def scatter_bands(keys, out, cap, offset):
    """``out[j * cap + offset + i] = keys[i, j]``: a batch's ``uint64[n, b]`` band keys into
    band-major runs of capacity ``cap``. Serial: the build runs it on chunks of rows on
    several threads (``index/band_sorter.py``) rather than as a ``parallel=True`` kernel,
    which compiles several times longer on a fresh install."""
    n, b = keys.shape
    for i in range(n):
        for j in range(b):
            out[j * cap + offset + i] = keys[i, j]


@njit(**JIT)
def empty_u64(n):
    """``np.empty(n, uint64)`` from numba's allocator.

    NumPy asks for transparent huge pages (``madvise``) on allocations of 4 MiB and
    more; on the development VMs (THP ``defrag=madvise``) first-touch page faults of such
    buffers then cost several times more. The sort's big buffers
    come from here instead.
    """
    return np.empty(n, dtype=np.uint64)


@njit(**JIT)
def empty_u32(n):
    """``np.empty(n, uint32)`` from numba's allocator (see :func:`empty_u64`)."""
    return np.empty(n, dtype=np.uint32)
