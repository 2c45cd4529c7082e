"""Cross-dataset join kernels: the pairs of a left and a right run of sorted band rows.

Input is one key range of both sides: left rows ``(lkeys u64[n], ldocs u32[n])`` and
right rows ``(rkeys, rdocs)``, each sorted by band key, with docs indexing one signature
pool shared by both sides (left rows first, then right rows; laid out as in
``kernels/bucket_pairs.py``: ``words`` u64[P, w] and ``halves`` u16[P, 4w] over the same memory,
padded with equal lanes), and ``rowids u64[P]`` alongside.

A pair ``(left, right)`` is a **candidate** when the two share a band key; it is reported
once, from the first band it shares, by exactly the rule of the self-join
(:mod:`.bucket_pairs`: skipped in band ``j`` when an earlier band has equal values; a 56-bit key
collision reported from its first colliding band when no band has equal values), and
**verified** when at least ``min_eq`` of the ``k`` values are equal. Unlike the
self-join, a row may pair with a row of the same row id (the same dataset on both sides
gives every pair in both orders and each row with itself).

:func:`join_chunk` writes at most ``len(out_left)`` pairs and visits about ``budget``
pairs per call, then returns with a resumable ``cursor``, so two large buckets of the same
key stream their product in chunks.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core import lance_format
from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.bucket_pairs import collision_pair_first, reported_here, values_equal
from lance_minhash_sql.kernels.lanes import BAND_VALUES, WIDTH, verified_partners

__all__ = ["JOIN_CURSOR_SIZE", "GALLOP_RATIO", "new_join_cursor", "shared_rows", "join_chunk"]

_U56 = np.uint64(lance_format.BAND_SHIFT)

# A join cursor (int64[JOIN_CURSOR_SIZE]) is where join_chunk stops and the next call goes
# on. Its slots, by name: the left and right runs' starts and the offsets within them.
JC_LEFT, JC_RIGHT, JC_LEFT_AT, JC_RIGHT_AT = 0, 1, 2, 3
JOIN_CURSOR_SIZE = 4


def new_join_cursor() -> np.ndarray:
    return np.zeros(JOIN_CURSOR_SIZE, dtype=np.int64)


# A right run this many times longer than the left keys is searched (galloping from each
# left key to the next), not walked row by row: a small batch against a large index then
# reads a few rows per left key instead of the whole run.
GALLOP_RATIO = 16


@njit(**JIT, inline="always")
def _chunk_stop(first_row, c, stop):
    """The end (exclusive) of chunk ``c``'s rows within ``[.., stop)``."""
    return min(first_row[c + 1], stop) if c + 1 < first_row.size else stop


@njit(**JIT, inline="always")
def _chunk_last_key(values, first_row, value_index, c, stop):
    """The key of chunk ``c``'s last row below ``stop``."""
    return values[value_index[c] + _chunk_stop(first_row, c, stop) - 1 - first_row[c]]


@njit(**JIT, inline="always")
def _chunk_at_least(values, first_row, value_index, c, c_last, stop, x):
    """The first chunk from ``c`` to ``c_last`` whose last row below ``stop`` holds a key
    ``>= x`` (``c_last + 1`` if none): steps that double from ``c``, then a binary search
    in the last step; every probe a direct read (no search of the chunk table)."""
    if _chunk_last_key(values, first_row, value_index, c, stop) >= x:
        return c
    below, step = c, 1
    above = c + 1
    while above <= c_last and _chunk_last_key(values, first_row, value_index, above, stop) < x:
        below = above
        step *= 2
        above = below + step
    a, b = below + 1, min(above, c_last + 1)
    while a < b:
        mid = (a + b) // 2
        if _chunk_last_key(values, first_row, value_index, mid, stop) < x:
            a = mid + 1
        else:
            b = mid
    return a


@njit(**JIT)
def shared_rows(lkeys, values, first_row, value_index, start, stop, lo, last, lmask):
    """Rows ``r`` in ``[start, stop)`` of a key column sorted by key and stored in chunks
    (row ``r`` of chunk ``c`` at ``values[value_index[c] + r - first_row[c]]``; chunks in
    row order) whose key lies in ``[lo, last]`` and is one of the sorted ``lkeys``:
    ``(rows int64[m], keys u64[m])``. Sets ``lmask[i]`` for every ``lkeys[i]`` found.
    One merge pass, or, when the rows outnumber the left keys :data:`GALLOP_RATIO` times,
    a search from each left key to the next (the same rows); nothing of the column is
    copied but the rows found (the outputs are allocated for every row, and only the
    pages written are touched)."""
    nl = lkeys.size
    rows = np.empty(max(stop - start, 0), dtype=np.int64)
    keys = np.empty(max(stop - start, 0), dtype=np.uint64)
    if nl == 0 or start >= stop:
        return rows[:0], keys[:0]
    if stop - start > GALLOP_RATIO * nl:
        m = _searched_rows(lkeys, values, first_row, value_index, start, stop, lo, last, lmask, rows, keys)
    else:
        m = _walked_rows(lkeys, values, first_row, value_index, start, stop, lo, last, lmask, rows, keys)
    return rows[:m], keys[:m]


@njit(**JIT, inline="always")
def _searched_rows(lkeys, values, first_row, value_index, start, stop, lo, last, lmask, rows, keys):
    """:func:`shared_rows` by a search from each left key to the next; the count written."""
    nl = lkeys.size
    m = 0
    c = np.searchsorted(first_row, start, side="right") - 1
    c_last = np.searchsorted(first_row, stop - 1, side="right") - 1
    r = start
    i = 0
    while i < nl and r < stop:
        x = lkeys[i]
        if x > last:
            break
        if x >= lo:
            c = _chunk_at_least(values, first_row, value_index, c, c_last, stop, x)
            if c > c_last:
                break
            # the first row >= x: a binary search inside chunk c (from r when r is in it)
            a = max(r, first_row[c])
            b = _chunk_stop(first_row, c, stop)
            base = value_index[c] - first_row[c]
            while a < b:
                mid = (a + b) // 2
                if values[base + mid] < x:
                    a = mid + 1
                else:
                    b = mid
            r = a
            found = False
            while r < stop:
                if r == _chunk_stop(first_row, c, stop):
                    c += 1
                    base = value_index[c] - first_row[c]
                if values[base + r] != x:
                    break
                rows[m] = r
                keys[m] = x
                m += 1
                r += 1
                found = True
            if found:
                j = i
                while j < nl and lkeys[j] == x:
                    lmask[j] = True
                    j += 1
        while i < nl and lkeys[i] == x:
            i += 1
    return m


@njit(**JIT, inline="always")
def _walked_rows(lkeys, values, first_row, value_index, start, stop, lo, last, lmask, rows, keys):
    """:func:`shared_rows` by one merge pass; the count written."""
    nl = lkeys.size
    nc = first_row.size
    m = 0
    c = np.searchsorted(first_row, start, side="right") - 1
    i = 0
    r = start
    done = False
    while r < stop and not done:
        end = min(first_row[c + 1], stop) if c + 1 < nc else stop
        base = value_index[c] - first_row[c]
        for q in range(r, end):
            key = values[base + q]
            if key < lo:
                continue
            if key > last:
                done = True
                break
            while i < nl and lkeys[i] < key:
                i += 1
            if i == nl:
                done = True
                break
            if lkeys[i] == key:
                if not lmask[i]:
                    j = i
                    while j < nl and lkeys[j] == key:
                        lmask[j] = True
                        j += 1
                rows[m] = q
                keys[m] = key
                m += 1
        r = end
        c += 1
    return m


@njit(**JIT, inline="always")
def _widest_run(keys, start, cap):
    """The most rows of one key among the sorted ``keys`` from ``start`` on, capped by
    ``cap`` (at least 1): the partners of one left row within a call."""
    widest = 1
    n = keys.size
    i = start
    while i < n:
        j = i + 1
        while j < n and keys[j] == keys[i]:
            j += 1
        widest = max(widest, j - i)
        i = j
    return min(widest, max(cap, 1))


@njit(**JIT, inline="always")
def _row_pairs(words, halves, rdocs, s, lo, hi, ra, rowids, band, num_bands, r, k, min_eq, one_compare, no_slot,
               passed, passed_miss, out_left, out_right, out_eq, n_out):
    """Writes the pairs of left row ``ra`` with its partners ``t`` in ``[lo, hi)``, the
    right rows ``rdocs[s + t]`` of a bucket of band ``band``, that
    :func:`.bucket_pairs.reported_here` reports, in partner order; returns the pairs
    written so far.

    ``one_compare`` (k = 128 with 16 bands): :func:`.lanes.verified_partners` lists the
    partners that pass verification and share no earlier band (the rule's first two
    conditions), then the listed ones alone are tested for the last: equal values in
    this band, or a key collision that no other band reports first. Otherwise a visit
    per partner applies the whole rule."""
    ida = rowids[ra]
    if one_compare:
        # the bits of the bands before this one (verified_partners' mask of equal bands)
        earlier = (np.int64(1) << band) - 1
        n_passed = verified_partners(halves, rdocs, no_slot, s, ra, lo, hi, min_eq, earlier, passed, passed_miss)
        for p in range(n_passed):
            rb = np.int64(rdocs[s + passed[p]])
            if not values_equal(halves, ra, rb, band * r, r) and not collision_pair_first(
                    words, halves, ra, rb, band, num_bands, r):
                continue
            out_left[n_out] = ida
            out_right[n_out] = rowids[rb]
            out_eq[n_out] = k - passed_miss[p]
            n_out += 1
        return n_out
    for t in range(s + lo, s + hi):
        rb = np.int64(rdocs[t])
        eq = reported_here(words, halves, ra, rb, band, num_bands, r, k, k - min_eq)
        if eq < 0:
            continue
        out_left[n_out] = ida
        out_right[n_out] = rowids[rb]
        out_eq[n_out] = eq
        n_out += 1
    return n_out


@njit(**JIT)
def join_chunk(lkeys, ldocs, rkeys, rdocs, words, halves, rowids, k, num_bands, min_eq, cursor,
               out_left, out_right, out_eq, budget):
    """Verified ``(left, right)`` pairs of the keys both sides hold, each from its first
    shared band, from ``cursor`` on (:func:`new_join_cursor`).

    Writes row ids ``out_left`` / ``out_right`` and ``out_eq`` (equal positions); returns
    ``(count, done)``. A call stops when the output is full or about ``budget`` pairs
    were visited.

    At k = 128 with 16 bands (the default) a left row's partners go in two passes, as in
    :func:`.bucket_pairs.pair_chunk` (:func:`_row_pairs`): a branch-free 128-value compare
    each, then the few that pass the first two conditions; other shapes visit each
    partner with :func:`.bucket_pairs.reported_here`. Both give the same pairs, in order.
    """
    r = k // num_bands
    one_compare = halves.shape[1] == WIDTH and r == BAND_VALUES
    cap = out_left.size
    nl = lkeys.size
    nr = rkeys.size
    li = cursor[JC_LEFT]
    ri = cursor[JC_RIGHT]
    a = cursor[JC_LEFT_AT]
    b = cursor[JC_RIGHT_AT]
    # a left row's partners that pass the first pass: no more than a right run holds, nor
    # than the output does (its partners stop there)
    widest = _widest_run(rkeys, ri, cap) if one_compare else 0
    passed = np.empty(widest, dtype=np.int64)
    passed_miss = np.empty(widest, dtype=np.int64)
    no_slot = np.empty(0, dtype=np.int32)  # rdocs are pool rows
    n_out = 0
    work = 0
    while li < nl and ri < nr:
        key = lkeys[li]
        if key < rkeys[ri]:
            li += 1
            continue
        if rkeys[ri] < key:
            ri += 1
            continue
        le = li
        while le < nl and lkeys[le] == key:
            le += 1
        re = ri
        while re < nr and rkeys[re] == key:
            re += 1
        band = np.int64(key >> _U56)
        rm = re - ri
        while li + a < le:
            if work >= budget or n_out == cap:
                cursor[JC_LEFT] = li
                cursor[JC_RIGHT] = ri
                cursor[JC_LEFT_AT] = a
                cursor[JC_RIGHT_AT] = b
                return n_out, False
            ra = np.int64(ldocs[li + a])
            stop = min(rm, b + (cap - n_out))
            n_out = _row_pairs(words, halves, rdocs, ri, b, stop, ra, rowids, band, num_bands, r, k, min_eq,
                               one_compare, no_slot, passed, passed_miss, out_left, out_right, out_eq, n_out)
            work += stop - b
            b = stop
            if b == rm:
                a += 1
                b = 0
        li = le
        ri = re
        a = 0
        b = 0
    cursor[JC_LEFT] = nl
    cursor[JC_RIGHT] = nr
    cursor[JC_LEFT_AT] = 0
    cursor[JC_RIGHT_AT] = 0
    return n_out, True
