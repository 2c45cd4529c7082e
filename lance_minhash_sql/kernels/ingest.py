"""The ingest walk: which rows of a batch are kept, and each dropped row's twin among the
rows kept before it (``selfjoin/ingest.py`` has the rule and its guarantees).

Rows are walked in keep order. A row is compared only with the rows already kept that
share one of its band buckets (each kept row is listed in its buckets as it is kept), so a
batch of many copies of one text costs one comparison a copy, never all its pairs.

>>> import numpy as np
>>> sigs = np.array([[1, 2, 3, 4], [1, 2, 3, 9], [7, 8, 9, 9]], dtype=np.uint16)
>>> buckets = np.array([[0, 1], [0, 2], [3, 4]], dtype=np.int64)
>>> none = np.zeros(3, dtype=np.bool_)
>>> no_sets = np.zeros(3, np.int64)
>>> kept, twin, eq, jac = ingest_walk(np.arange(3), sigs, buckets, np.int64(5), ~none, none, np.int64(3),
...                                   no_sets, no_sets, np.zeros(0, np.uint64), 0.75, False)
>>> kept.tolist(), twin.tolist(), eq.tolist()
([True, False, True], [-1, 0, -1], [0, 3, 0])
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core import lance_format
from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.similarity import jaccard_if_at_least

__all__ = ["ingest_walk", "keep_best", "best_in_block", "nibble_sketches", "first_positions", "band_buckets",
           "visit_order"]

_U56 = np.uint64(lance_format.BAND_SHIFT)


@njit(**JIT)
def ingest_walk(order, sigs, buckets, num_buckets, has_sig, blocked, min_eq, starts, ends, hashes, threshold, exact):
    """Walk the rows ``order`` (positions, keep order). ``sigs`` (``uint16[n, k]``) and
    ``buckets`` (``int64[n, b]``: the bucket id of each band of a row, ids below
    ``num_buckets``) are read where ``has_sig``; a row without a signature has no twin.
    ``blocked`` rows are never kept (their twin is looked for all the same).

    A row's candidates are the kept rows sharing one of its buckets with at least
    ``min_eq`` equal values; with ``exact``, those whose exact Jaccard (row ``i``'s shingle
    set: the sorted distinct ``hashes[starts[i]:ends[i]]``) also reaches ``threshold``. Its twin is the best
    candidate: the most equal values (``exact``: the highest Jaccard), ties to the row kept
    first. A row is kept unless it is blocked or has a twin.

    Returns ``(kept bool[n], twin int64[n] (-1: none), eq int64[n], jaccard float64[n]
    (NaN without exact or twin))``."""
    n = order.size
    k = sigs.shape[1]
    b = buckets.shape[1]
    head = np.full(num_buckets, -1, dtype=np.int64)
    nxt = np.empty(max(n * b, 1), dtype=np.int64)
    member = np.empty(max(n * b, 1), dtype=np.int64)
    rank = np.zeros(n, dtype=np.int64)
    seen = np.full(n, -1, dtype=np.int64)
    kept = np.zeros(n, dtype=np.bool_)
    twin = np.full(n, -1, dtype=np.int64)
    eq = np.zeros(n, dtype=np.int64)
    jac = np.full(n, np.nan, dtype=np.float64)
    used = 0
    for w in range(n):
        r = order[w]
        if not has_sig[r]:
            kept[r] = not blocked[r]
            continue
        best = -1
        best_eq = -1
        best_jac = -1.0
        for j in range(b):
            e = head[buckets[r, j]]
            while e >= 0:
                c = member[e]
                e = nxt[e]
                if seen[c] == r:
                    continue
                seen[c] = r
                same = 0
                for h in range(k):
                    if sigs[r, h] == sigs[c, h]:
                        same += 1
                if same < min_eq:
                    continue
                x = -1.0
                if exact:
                    if ends[r] == starts[r] or ends[c] == starts[c]:
                        continue
                    x = jaccard_if_at_least(hashes, starts[r], ends[r], hashes, starts[c], ends[c], threshold)
                    if x < threshold:
                        continue
                    better = best < 0 or x > best_jac or (x == best_jac and rank[c] < rank[best])
                else:
                    better = best < 0 or same > best_eq or (same == best_eq and rank[c] < rank[best])
                if better:
                    best = c
                    best_eq = same
                    best_jac = x
        if best >= 0:
            twin[r] = best
            eq[r] = best_eq
            if exact:
                jac[r] = best_jac
        elif not blocked[r]:
            kept[r] = True
            rank[r] = w
            for j in range(b):
                q = buckets[r, j]
                member[used] = r
                nxt[used] = head[q]
                head[q] = used
                used += 1
    return kept, twin, eq, jac


@njit(**JIT, inline="always")
def _beats(score, right, best_score, best_right):
    """A corpus row beats the best held for a batch row: a higher score, or an equal one
    and a lower row id (the twin rule of ``selfjoin/ingest.py``)."""
    return score > best_score or (score == best_score and right < best_right)


@njit(**JIT)
def keep_best(at, right, score, sim, jac, best_score, best_right, best_sim, best_jac):
    """Fold pairs into each left row's best: pair ``i`` (left row at position ``at[i]``,
    right row id ``right[i]``) replaces the best held at its position when its ``score``
    is higher, or equal with a lower right row id (``best_score`` starts at ``-inf``).
    The best of several calls is the best of all their pairs, in any order."""
    for i in range(at.size):
        p = at[i]
        if _beats(score[i], right[i], best_score[p], best_right[p]):
            best_score[p] = score[i]
            best_right[p] = right[i]
            best_sim[p] = sim[i]
            best_jac[p] = jac[i]


@njit(**JIT, inline="always")
def _equal_values(a, ra, b, rb, k):
    """Equal positions of row ``ra`` of ``a`` and row ``rb`` of ``b`` (``k`` values each)."""
    if k == 128:  # the default: a fixed trip count, 16-bit lanes (vector compares, no widening)
        c = np.uint16(0)
        for u in range(128):
            c = np.uint16(c + np.uint16(a[ra, u] == b[rb, u]))
        return np.int64(c)
    same = 0
    for u in range(k):
        same += np.int64(a[ra, u] == b[rb, u])
    return same


@njit(**JIT)
def band_buckets(keys, docs, at, buckets):
    """Number the distinct ``keys`` (ascending band keys of every row: ``docs[i]`` the
    signed row of key ``i``, ``at[docs[i]]`` its position) from 0 and write each row's
    number for each band: ``buckets[at[docs[i]], band of keys[i]]``. Keys of band ``j``
    start with byte ``j``, so no two bands share a number. Returns how many there are."""
    ids = -1
    for i in range(keys.size):
        if i == 0 or keys[i] != keys[i - 1]:
            ids += 1
        buckets[at[docs[i]], np.int64(keys[i] >> _U56)] = ids
    return ids + 1


@njit(**JIT)
def visit_order(mpos, lkeys, ldocs, n):
    """The ``n`` batch rows in the order the matches reach them (``mpos``: the first
    position in ``lkeys`` of each match's key, the matches sorted by corpus doc; the rows
    of key position ``p`` are ``ldocs[p]`` on while the key repeats), then the rows no
    match reaches: ``int64[n]``, a permutation. :func:`best_in_block` walks the batch rows
    numbered in this order, so the rows it meets one after another lie side by side."""
    order = np.empty(n, dtype=np.int64)
    placed = np.zeros(n, dtype=np.bool_)
    seen = np.zeros(lkeys.size, dtype=np.bool_)
    nk = lkeys.size
    m = 0
    for i in range(mpos.size):
        p = np.int64(mpos[i])
        if seen[p]:
            continue
        seen[p] = True
        key = lkeys[p]
        while p < nk and lkeys[p] == key:
            row = np.int64(ldocs[p])
            p += 1
            if not placed[row]:
                placed[row] = True
                order[m] = row
                m += 1
    for r in range(n):
        if not placed[r]:
            order[m] = r
            m += 1
    return order


@njit(**JIT)
def first_positions(lkeys, keys, offset):
    """``u32[m]``: for each of the ascending ``keys`` (each one of the ascending ``lkeys``),
    the position of its first copy in ``lkeys``, plus ``offset``: one merge of the two."""
    out = np.empty(keys.size, dtype=np.uint32)
    p = 0
    for i in range(keys.size):
        while p + 1 < lkeys.size and lkeys[p] < keys[i]:
            p += 1
        out[i] = np.uint32(p + offset)
    return out


@njit(**JIT, inline="always")
def _pack_nibbles(sigs, r, out, o):
    """Row ``r`` of ``sigs`` as its sketch, into row ``o`` of ``out``: the low 4 bits of
    each value, two a byte (value ``2j`` low, ``2j + 1`` high; an odd ``k``'s last high
    half is 0)."""
    k = sigs.shape[1]
    for j in range(k // 2):
        out[o, j] = np.uint8((sigs[r, 2 * j] & 15) | ((sigs[r, 2 * j + 1] & 15) << 4))
    if k % 2:
        out[o, k // 2] = np.uint8(sigs[r, k - 1] & 15)


@njit(**JIT)
def nibble_sketches(sigs):
    """Every row's sketch (``u8[n, (k + 1) // 2]``, :func:`_pack_nibbles`): two rows have at
    least as many equal nibbles in their sketches as equal values in their signatures, in
    half the bytes."""
    out = np.empty((sigs.shape[0], (sigs.shape[1] + 1) // 2), dtype=np.uint8)
    for r in range(sigs.shape[0]):
        _pack_nibbles(sigs, r, out, r)
    return out


@njit(**JIT, inline="always")
def _equal_nibbles(a, ra, b, rb):
    """Equal nibbles of sketch row ``ra`` of ``a`` and row ``rb`` of ``b``: an upper bound
    on the equal values of the signatures they sketch."""
    w = a.shape[1]
    if w == 64:  # k = 128: a fixed trip count, byte lanes (at most 128 fits a byte)
        c = np.uint8(0)
        for j in range(64):
            x = a[ra, j] ^ b[rb, j]
            c = np.uint8(c + np.uint8((x & np.uint8(15)) == 0) + np.uint8((x >> np.uint8(4)) == 0))
        return np.int64(c)
    same = 0
    for j in range(w):
        x = a[ra, j] ^ b[rb, j]
        same += np.int64((x & np.uint8(15)) == 0) + np.int64((x >> np.uint8(4)) == 0)
    return same


@njit(**JIT)
def best_in_block(mdocs, mpos, lo, hi, sigs, rowids, alive, lkeys, ldocs, lsigs, lrows, lsketch, min_eq, stamp,
                  best_eq, best_right):
    """Fold the corpus rows of matches ``[lo, hi)`` into each batch row's best corpus row.

    Matches are sorted by doc: ``mdocs[i]`` a corpus doc, ``mpos[i]`` the first position in
    the sorted batch band keys ``lkeys`` of the key it shares with them (``ldocs[p]``: the
    batch row of key ``p`` as the walk numbers it, its values ``lsigs[lrows[row]]``: the
    walk may number the rows in another order than ``lsigs`` holds them, e.g.
    :func:`visit_order`; ``stamp``, ``best_eq``, ``best_right`` and ``lsketch`` are in the
    walk's numbering). The distinct docs of the block, in
    order, are the rows of ``sigs`` (``u16[m, k]``), ``rowids`` and ``alive``. A batch
    row met again through another key of the same doc is not compared again (``stamp``:
    the last doc compared with each batch row, -1 at first). A comparison counts when at
    least ``min_eq`` values are equal; the best has the most, ties to the lowest row id
    (``best_eq`` starts at -1). Blocks folded in any order give the same bests.

    The batch rows' sketches ``lsketch`` (:func:`nibble_sketches`) are compared first: a
    pair whose sketches have fewer equal nibbles than the row's best (or ``min_eq``) has
    fewer equal values, so cannot count or win, and its signatures are not read."""
    k = lsigs.shape[1]
    nk = lkeys.size
    sketch = np.empty((1, lsketch.shape[1]), dtype=np.uint8)  # the doc's
    u = -1
    prev = np.int64(-1)
    for i in range(lo, hi):
        d = np.int64(mdocs[i])
        if d != prev:
            u += 1
            prev = d
            if alive[u]:
                _pack_nibbles(sigs, u, sketch, 0)
        if not alive[u]:
            continue
        p = np.int64(mpos[i])
        key = lkeys[p]
        rid = rowids[u]
        while p < nk and lkeys[p] == key:
            row = np.int64(ldocs[p])
            p += 1
            if stamp[row] == d:
                continue
            stamp[row] = d
            if _equal_nibbles(lsketch, row, sketch, 0) < max(min_eq, best_eq[row]):
                continue
            eq = _equal_values(lsigs, lrows[row], sigs, u, k)
            if eq >= min_eq and _beats(eq, rid, best_eq[row], best_right[row]):
                best_eq[row] = eq
                best_right[row] = rid
