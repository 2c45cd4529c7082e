"""Star clustering's walk: each member joins the most similar earlier center that shares a
band with it and passes, or becomes a center itself (``selfjoin/star.py`` has the rule and
its guarantees).

Each bucket of a component (a band key: ``keys`` ``uint64[n, b]``, keys of band ``j`` all
start with byte ``j``, so two bands never share one) lists its first ``most`` centers in
walk order. A member's *candidates* are the centers listed in its buckets with at least
``min_eq`` equal values. They are tried most equal values first, ties to the center first
in walk order, and the first that passes is the twin: every candidate passes under the
estimate; with ``exact`` a candidate passes when the exact Jaccard of the two shingle sets
reaches ``threshold`` (an empty set passes nothing). So a member costs one look-up of each
band key and at most ``b * most`` comparisons of ``k`` values, whatever the size of its
component.

A chunk of members is walked in two steps: :func:`star_match` looks for each member's twin
among the centers of earlier chunks, block by block in walk order (a block's ``(key,
center)`` pairs sorted by key, :func:`block_keys`); then :func:`star_walk` walks the chunk
itself over a hash table of its centers' keys, a member matched in the first step taking
a center of the chunk only when it has more equal values (ties go to the earlier center).
Both choose through one helper, :func:`_twin_of`: the answer of one walk over the whole
component, whatever the chunks and blocks.

>>> import numpy as np
>>> sigs = np.array([[1, 2, 3, 4], [1, 2, 3, 9], [7, 2, 3, 9], [7, 8, 9, 9]], dtype=np.uint16)
>>> keys = np.array([[1, 5], [1, 6], [2, 6], [3, 7]], dtype=np.uint64)
>>> comp = np.zeros(4, dtype=np.int64)
>>> no = np.zeros(5, np.int64), np.empty(0, np.uint64)
>>> none = np.zeros((4, 2), np.uint8)
>>> twin, eq, jac, listed = star_walk(sigs, keys, *no, comp, np.full(4, -1), none, 16, np.int64(3), 0.0, False)
>>> twin.tolist(), eq.tolist()
([-1, 0, -1, -1], [0, 3, 0, 0])
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.lsh import lower_bound
from lance_minhash_sql.kernels.similarity import jaccard_if_at_least

__all__ = ["block_keys", "star_match", "star_walk", "TABLE_BYTES"]

TABLE_BYTES = 48  # the walk's hash table per (member, band): two slots of key, stamp, head, count; an entry
_MIX = np.uint64(0x9E3779B97F4A7C15)
_ORDER_BITS = 40  # a candidate's rank: (k - eq) << _ORDER_BITS | its index in walk order


@njit(**JIT)
def _equal(a, b, i, j):
    same = 0
    for h in range(a.shape[1]):
        if a[i, h] == b[j, h]:
            same += 1
    return same


@njit(**JIT)
def _offer(sigs, c_sigs, i, c, least, seen, ranks, m):
    """Center ``c`` offered to member ``i`` once (``seen[c] == i`` after): ranked into
    ``ranks[m]`` as :func:`_twin_of` reads it (fewer unequal values first, then the center
    first in walk order) when it has at least ``least`` equal values; returns the count of
    candidates ranked."""
    if seen[c] == i:
        return m
    seen[c] = i
    same = _equal(sigs, c_sigs, i, c)
    if same < least:
        return m
    ranks[m] = (np.int64(sigs.shape[1] - same) << _ORDER_BITS) | c
    return m + 1


@njit(**JIT)
def _twin_of(ranks, m, i, offsets, hashes, c_offsets, c_hashes, k, threshold, exact):
    """The star rule's choice among member ``i``'s ``m`` candidates ``ranks[:m]`` (each
    ``(k - eq) << _ORDER_BITS | c``, ``c`` the center's index in walk order, ``eq`` its
    equal values): the first in rank order that passes, i.e. the most equal values first,
    ties to the earlier center. Under the estimate every candidate passes; with ``exact``
    the one whose exact Jaccard (CSR sets ``offsets``/``hashes`` of the members,
    ``c_offsets``/``c_hashes`` of the centers) reaches ``threshold``: the best-ranked
    candidate is checked first, and only if it fails the others, each only while it ranks
    before the best that passed so far (no sort). Returns ``(c, eq, Jaccard)``, or ``(-1,
    0, NaN)``; the Jaccard is NaN without ``exact``."""
    if m == 0:
        return -1, 0, np.nan
    mask = (np.int64(1) << _ORDER_BITS) - 1
    top = 0
    for t in range(1, m):
        if ranks[t] < ranks[top]:
            top = t
    if not exact:
        return ranks[top] & mask, k - (ranks[top] >> _ORDER_BITS), np.nan
    x = _passing(i, ranks[top] & mask, offsets, hashes, c_offsets, c_hashes, threshold)
    if x >= threshold:
        return ranks[top] & mask, k - (ranks[top] >> _ORDER_BITS), x
    best = -1
    best_x = np.nan
    for t in range(m):
        if t != top and (best < 0 or ranks[t] < ranks[best]):
            x = _passing(i, ranks[t] & mask, offsets, hashes, c_offsets, c_hashes, threshold)
            if x >= threshold:
                best = t
                best_x = x
    if best < 0:
        return -1, 0, np.nan
    return ranks[best] & mask, k - (ranks[best] >> _ORDER_BITS), best_x


@njit(**JIT)
def _passing(i, c, offsets, hashes, c_offsets, c_hashes, threshold):
    """The exact Jaccard of member ``i`` and center ``c`` where it reaches ``threshold``,
    else -1 (an empty set passes nothing)."""
    if c_offsets[c + 1] == c_offsets[c] or offsets[i + 1] == offsets[i]:
        return -1.0
    return jaccard_if_at_least(hashes, offsets[i], offsets[i + 1], c_hashes, c_offsets[c], c_offsets[c + 1],
                               threshold)


@njit(**JIT)
def block_keys(keys, listed):
    """``(sorted keys, center)`` of a block of centers' band keys (``uint64[c, b]``): each
    ``(key, center index)`` pair the walk listed (``listed[c, j]``), sorted by key: what
    :func:`star_match` looks keys up in."""
    b = keys.shape[1]
    m = 0
    for c in range(keys.shape[0]):
        for j in range(b):
            m += listed[c, j]
    flat = np.empty(m, dtype=np.uint64)
    who = np.empty(m, dtype=np.int32)
    m = 0
    for c in range(keys.shape[0]):
        for j in range(b):
            if listed[c, j]:
                flat[m] = keys[c, j]
                who[m] = c
                m += 1
    order = np.argsort(flat, kind="mergesort")
    return flat[order], who[order]


@njit(**JIT)
def star_match(sigs, keys, offsets, hashes, n, c_sigs, c_keys, c_center, c_offsets, c_hashes, base, min_eq,
               threshold, exact, twin, eq, jac, listed):
    """Members ``0 .. n - 1`` of a chunk (``sigs`` ``uint16[m, k]``, band ``keys``, CSR sets
    ``offsets``/``hashes``) against a block of earlier centers in walk order (``c_sigs``,
    their ``(key, center)`` pairs ``c_keys``/``c_center`` of :func:`block_keys`, sets
    ``c_offsets``/``c_hashes``): a member whose best candidate in the block (module doc)
    passes and has more equal values than its twin so far (``eq[i]``; ties go to the earlier
    block) takes it: ``twin[i] = base + c``, ``eq[i]``, and ``jac[i]`` with ``exact``. A
    member without a twin yet has ``twin[i] < 0`` and ``eq[i] < min_eq``. ``listed[i, j]``
    counts the centers listed under the member's key ``j`` so far (the walk lists no more
    than its cap). Cost: per member, ``b`` binary searches and a comparison per center of
    the block listed in its buckets."""
    k = sigs.shape[1]
    b = keys.shape[1]
    nc = c_sigs.shape[0]
    seen = np.full(nc, -1, dtype=np.int64)
    ranks = np.empty(max(nc, 1), dtype=np.int64)
    for i in range(n):
        empty = exact and offsets[i + 1] == offsets[i]
        least = max(min_eq, eq[i] + 1)
        m = 0
        for j in range(b):
            key = keys[i, j]
            t = lower_bound(c_keys, 0, c_keys.size, key)
            while t < c_keys.size and c_keys[t] == key:
                c = c_center[t]
                t += 1
                listed[i, j] += 1
                if not empty:
                    m = _offer(sigs, c_sigs, i, c, least, seen, ranks, m)
        c, same, x = _twin_of(ranks, m, i, offsets, hashes, c_offsets, c_hashes, k, threshold, exact)
        if c >= 0:
            twin[i] = base + c
            eq[i] = same
            jac[i] = x


@njit(**JIT)
def _slot(t_keys, t_stamp, key, stamp):
    """The hash table's slot of ``key`` in the component ``stamp`` (linear probing): the
    slot holding it, or the empty one where it goes (a slot of another stamp is empty)."""
    cap = t_keys.size
    s = np.int64(((key * _MIX) >> np.uint64(20)) % np.uint64(cap))
    while t_stamp[s] == stamp and t_keys[s] != key:
        s += 1
        if s == cap:
            s = 0
    return s


@njit(**JIT)
def _chunk_candidates(sigs, keys, i, least, slots, stamp, t_stamp, t_head, e_center, e_next, seen, ranks):
    """Member ``i``'s candidates among the centers its buckets list in the chunk (``slots``:
    its keys' slots in the hash table of the component ``stamp``) with at least ``least``
    equal values, written to ``ranks`` as :func:`_twin_of` reads them; returns their
    number."""
    m = 0
    for j in range(keys.shape[1]):
        if t_stamp[slots[j]] != stamp:
            continue
        e = t_head[slots[j]]
        while e >= 0:
            c = e_center[e]
            e = e_next[e]
            m = _offer(sigs, sigs, i, c, least, seen, ranks, m)
    return m


@njit(**JIT)
def star_walk(sigs, keys, offsets, hashes, comp, twin_before, listed_before, most, min_eq, threshold, exact):
    """Walk a chunk (``sigs`` ``uint16[n, k]``, band ``keys``, CSR sets ``offsets``/``hashes``
    read with ``exact``; members in keep order, components contiguous, ids in ``comp``).
    ``twin_before[i] >= 0``: the member has a twin among earlier chunks' centers
    (:func:`star_match`) with ``twin_before[i]`` equal values; it is not a center, and
    takes a center of the chunk only with more equal values. Returns ``(twin, eq,
    jaccard)``: ``twin[i]`` the chunk index of the member's twin in the chunk, its equal
    values and (``exact``) Jaccard; ``-1``, 0 and NaN for a center, or a member keeping its
    earlier twin; and ``listed`` (``uint8[n, b]``): the keys under which each center is
    listed.

    A bucket lists its first ``most`` centers in walk order, ``listed_before[i, j]`` of them
    in earlier chunks (:func:`star_match`); the member's candidates are found through a hash
    table of the lists of its component's buckets (:data:`TABLE_BYTES` per member and band
    held). Cost: per member, ``b`` look-ups and at most ``b * most`` comparisons."""
    n = sigs.shape[0]
    k = sigs.shape[1]
    b = keys.shape[1]
    cap = max(2 * n * b, 1)
    t_keys = np.empty(cap, dtype=np.uint64)
    t_stamp = np.zeros(cap, dtype=np.int32)
    t_head = np.empty(cap, dtype=np.int32)
    t_count = np.empty(cap, dtype=np.int32)
    e_center = np.empty(max(n * b, 1), dtype=np.int32)
    e_next = np.empty(max(n * b, 1), dtype=np.int32)
    used = 0
    slots = np.empty(b, dtype=np.int64)
    seen = np.full(n, -1, dtype=np.int64)
    ranks = np.empty(max(n, 1), dtype=np.int64)
    twin = np.full(n, -1, dtype=np.int64)
    eq = np.zeros(n, dtype=np.int64)
    jac = np.full(n, np.nan, dtype=np.float64)
    listed = np.zeros((n, b), dtype=np.uint8)
    stamp = np.int32(1)
    for i in range(n):
        if i > 0 and comp[i] != comp[i - 1]:
            stamp += 1
        for j in range(b):
            slots[j] = _slot(t_keys, t_stamp, keys[i, j], stamp)
        empty = exact and offsets[i + 1] == offsets[i]  # an empty set passes nothing: a center
        if not empty:
            m = _chunk_candidates(sigs, keys, i, max(min_eq, twin_before[i] + 1), slots, stamp, t_stamp, t_head,
                                  e_center, e_next, seen, ranks)
            c, same, x = _twin_of(ranks, m, i, offsets, hashes, offsets, hashes, k, threshold, exact)
            if c >= 0:
                twin[i] = c
                eq[i] = same
                jac[i] = x
                continue
        if twin_before[i] >= 0 or empty:
            continue
        for j in range(b):  # a center: listed under each of its keys whose bucket lists fewer than most
            s = _slot(t_keys, t_stamp, keys[i, j], stamp)  # (its own keys may have taken a slot looked up)
            if t_stamp[s] != stamp:
                t_stamp[s] = stamp
                t_keys[s] = keys[i, j]
                t_head[s] = -1
                t_count[s] = 0
            if t_count[s] + listed_before[i, j] >= most:
                continue
            t_count[s] += 1
            listed[i, j] = 1
            e_center[used] = i
            e_next[used] = t_head[s]
            t_head[s] = used
            used += 1
    return twin, eq, jac, listed
