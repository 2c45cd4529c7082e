"""Cross-dataset join kernels: the pairs of a left and a right run of sorted band rows.

Input is one key range of both sides: left rows ``(lkeys u64[n], ldocs u32[n])`` and
right rows ``(rkeys, rdocs)``, each sorted by band key, with docs indexing one signature
pool shared by both sides (left rows first, then right rows; laid out as in
``kernels/pairs.py``: ``words`` u64[P, w] and ``halves`` u16[P, 4w] over the same memory,
padded with equal lanes), and ``rowids u64[P]`` alongside.

A pair ``(left, right)`` is a **candidate** when the two share a band key; it is reported
once, from the first band it shares, by exactly the rule of the self-join
(:mod:`.pairs`: skipped in band ``j`` when an earlier band has equal values; a 56-bit key
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
from numba import njit

from .config import JIT
from .pairs import band_equal, collision_pair_first, count_matches, values_equal

__all__ = ["JOIN_CURSOR_SIZE", "new_join_cursor", "shared_key_rows", "join_chunk"]

_U56 = np.uint64(56)

# cursor layout (int64): [left run start, right run start, left offset in run, right offset in run]
JOIN_CURSOR_SIZE = 4


def new_join_cursor() -> np.ndarray:
    return np.zeros(JOIN_CURSOR_SIZE, dtype=np.int64)


@njit(**JIT)
def shared_key_rows(lkeys, rkeys):
    """``(left mask, right mask)``: the rows of each sorted side whose key the other side has."""
    nl = lkeys.size
    nr = rkeys.size
    lm = np.zeros(nl, dtype=np.bool_)
    rm = np.zeros(nr, dtype=np.bool_)
    i = 0
    j = 0
    while i < nl and j < nr:
        a = lkeys[i]
        b = rkeys[j]
        if a < b:
            i += 1
        elif b < a:
            j += 1
        else:
            while i < nl and lkeys[i] == a:
                lm[i] = True
                i += 1
            while j < nr and rkeys[j] == a:
                rm[j] = True
                j += 1
    return lm, rm


@njit(**JIT)
def join_chunk(lkeys, ldocs, rkeys, rdocs, words, halves, rowids, k, num_bands, min_eq, cursor,
               out_left, out_right, out_eq, budget):
    """Verified ``(left, right)`` pairs of the keys both sides hold, each from its first
    shared band, from ``cursor`` on (:func:`new_join_cursor`).

    Writes row ids ``out_left`` / ``out_right`` and ``out_eq`` (equal positions); returns
    ``(count, done)``. A call stops when the output is full or about ``budget`` pairs
    were visited.
    """
    r = k // num_bands
    max_miss = k - min_eq
    cap = out_left.size
    nl = lkeys.size
    nr = rkeys.size
    li = cursor[0]
    ri = cursor[1]
    a = cursor[2]
    b = cursor[3]
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
                cursor[0] = li
                cursor[1] = ri
                cursor[2] = a
                cursor[3] = b
                return n_out, False
            ra = np.int64(ldocs[li + a])
            ida = rowids[ra]
            stop = min(rm, b + (cap - n_out))
            for t in range(ri + b, ri + stop):
                rb = np.int64(rdocs[t])
                earlier = False
                for j in range(band):
                    if band_equal(words, halves, ra, rb, j, r):
                        earlier = True
                        break
                if earlier:
                    continue
                eq = count_matches(words, ra, rb, k, max_miss)
                if eq < 0:
                    continue
                if not values_equal(halves, ra, rb, band * r, r):
                    if not collision_pair_first(words, halves, ra, rb, band, num_bands, r):
                        continue
                out_left[n_out] = ida
                out_right[n_out] = rowids[rb]
                out_eq[n_out] = eq
                n_out += 1
            work += stop - b
            b = stop
            if b == rm:
                a += 1
                b = 0
        li = le
        ri = re
        a = 0
        b = 0
    cursor[0] = nl
    cursor[1] = nr
    cursor[2] = 0
    cursor[3] = 0
    return n_out, True
