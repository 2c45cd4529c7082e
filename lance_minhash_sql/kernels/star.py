"""Star clustering's walk: each member joins the first earlier center it is similar to,
or becomes a center itself (``selfjoin/star.py`` has the rule and its guarantees).

A chunk of members is walked in two steps: :func:`star_match` (or :func:`star_match_exact`)
looks for each member's twin among the centers of earlier chunks, block by block in walk
order; then :func:`star_walk` (or :func:`star_walk_exact`) walks the chunk itself, the
members matched in the first step left out. All four apply the rule "the first similar
center in walk order wins" through one helper, :func:`_first_similar`.

>>> import numpy as np
>>> sigs = np.array([[1, 2, 3, 4], [1, 2, 3, 9], [7, 2, 3, 9], [7, 8, 9, 9]], dtype=np.uint16)
>>> comp = np.zeros(4, dtype=np.int64)
>>> twin, eq = star_walk(sigs, comp, np.zeros(4, dtype=np.bool_), np.int64(3))
>>> twin.tolist(), eq.tolist()
([-1, 0, -1, -1], [0, 3, 0, 0])
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.similarity import jaccard_if_at_least

__all__ = ["star_match", "star_match_exact", "star_walk", "star_walk_exact"]


@njit(**JIT)
def _equal(a, b, i, j):
    same = 0
    for h in range(a.shape[1]):
        if a[i, h] == b[j, h]:
            same += 1
    return same


@njit(**JIT)
def _first_similar(sigs, i, offsets, hashes, c_sigs, c_offsets, c_hashes, pos, nc, min_eq, threshold, exact):
    """The star rule's "first center wins": the first ``c`` of ``0 .. nc - 1`` (centers in
    walk order, center ``c`` at row ``pos[c]`` of ``c_sigs``, and of the CSR sets
    ``c_offsets``/``c_hashes``) similar to member ``i`` of ``sigs`` (and of
    ``offsets``/``hashes``): sharing at least ``min_eq`` values, or with ``exact`` a
    Jaccard of at least ``threshold`` (an empty center set matches nothing). Returns ``(c,
    equal values, Jaccard)``, or ``(-1, 0, NaN)``; the Jaccard is NaN without ``exact``."""
    for c in range(nc):
        j = pos[c]
        if exact:
            if c_offsets[j + 1] == c_offsets[j]:
                continue
            x = jaccard_if_at_least(hashes, offsets[i], offsets[i + 1], c_hashes, c_offsets[j], c_offsets[j + 1],
                                    threshold)
            if x >= threshold:
                return c, _equal(sigs, c_sigs, i, j), x
        else:
            same = _equal(sigs, c_sigs, i, j)
            if same >= min_eq:
                return c, same, np.nan
    return -1, 0, np.nan


@njit(**JIT)
def _no_sets(n):
    """The CSR of ``n`` empty sets: what the estimate's kernels pass for the sets."""
    return np.zeros(n + 1, dtype=np.int64), np.empty(0, dtype=np.uint64)


@njit(**JIT)
def star_match(sigs, n, centers, base, min_eq, twin, eq):
    """Members ``0 .. n - 1`` of ``sigs`` (``uint16[m, k]``) still without a twin (``twin <
    0``) get the first of ``centers`` (``uint16[c, k]``, a block of earlier centers in walk
    order) sharing at least ``min_eq`` values: ``twin[i] = base + c`` and ``eq[i]`` the
    count. Cost: members x centers of the block."""
    offsets, hashes = _no_sets(sigs.shape[0])
    c_offsets, c_hashes = _no_sets(centers.shape[0])
    pos = np.arange(centers.shape[0])
    for i in range(n):
        if twin[i] >= 0:
            continue
        c, same, _ = _first_similar(sigs, i, offsets, hashes, centers, c_offsets, c_hashes, pos, pos.size, min_eq,
                                    0.0, False)
        if c >= 0:
            twin[i] = base + c
            eq[i] = same


@njit(**JIT)
def star_match_exact(sigs, offsets, hashes, n, centers, c_offsets, c_hashes, base, threshold, twin, eq, jac):
    """:func:`star_match` by the exact Jaccard of the shingle sets (CSR ``offsets``, sorted
    distinct ``hashes``; ``c_offsets``/``c_hashes`` the centers'): the first center with
    ``jaccard >= threshold``; ``jac[i]`` that Jaccard, ``eq[i]`` the equal signature values.
    An empty set matches nothing."""
    pos = np.arange(c_offsets.size - 1)
    for i in range(n):
        if twin[i] >= 0 or offsets[i + 1] == offsets[i]:
            continue
        c, same, x = _first_similar(sigs, i, offsets, hashes, centers, c_offsets, c_hashes, pos, pos.size, 0,
                                    threshold, True)
        if c >= 0:
            twin[i] = base + c
            jac[i] = x
            eq[i] = same


@njit(**JIT)
def star_walk(sigs, comp, matched, min_eq):
    """Walk ``sigs`` (``uint16[n, k]``, members in keep order, components contiguous, ids in
    ``comp``); members with ``matched[i]`` have their twin among earlier chunks' centers
    (:func:`star_match`) and are passed over. Returns ``(twin, eq)``: ``twin[i]`` is the
    index of the first center of the chunk (in walk order) sharing at least ``min_eq``
    values with row ``i`` and ``eq[i]`` that count, or ``-1`` and ``0`` (a center, or
    matched). Cost: members x centers of their component."""
    n = sigs.shape[0]
    twin = np.full(n, -1, dtype=np.int64)
    eq = np.zeros(n, dtype=np.int64)
    offsets, hashes = _no_sets(n)
    centers = np.empty(n, dtype=np.int64)
    nc = 0
    for i in range(n):
        if i > 0 and comp[i] != comp[i - 1]:
            nc = 0
        if matched[i]:
            continue
        c, same, _ = _first_similar(sigs, i, offsets, hashes, sigs, offsets, hashes, centers, nc, min_eq, 0.0, False)
        if c >= 0:
            twin[i] = centers[c]
            eq[i] = same
        else:
            centers[nc] = i
            nc += 1
    return twin, eq


@njit(**JIT)
def star_walk_exact(sigs, offsets, hashes, comp, matched, threshold):
    """:func:`star_walk` by the exact Jaccard of the rows' shingle sets (CSR ``offsets``,
    sorted distinct ``hashes``; ``Signer.shingle_sets``): a row joins the first center with
    ``jaccard >= threshold``. Returns ``(twin, eq, jaccard)`` (``-1``, 0 and NaN for a
    center or a matched row)."""
    n = comp.size
    twin = np.full(n, -1, dtype=np.int64)
    eq = np.zeros(n, dtype=np.int64)
    jac = np.full(n, np.nan, dtype=np.float64)
    centers = np.empty(n, dtype=np.int64)
    nc = 0
    for i in range(n):
        if i > 0 and comp[i] != comp[i - 1]:
            nc = 0
        if matched[i]:
            continue
        c, same, x = -1, 0, np.nan
        if offsets[i + 1] > offsets[i]:  # an empty set matches nothing: a center
            c, same, x = _first_similar(sigs, i, offsets, hashes, sigs, offsets, hashes, centers, nc, 0, threshold,
                                        True)
        if c >= 0:
            twin[i] = centers[c]
            jac[i] = x
            eq[i] = same
        else:
            centers[nc] = i
            nc += 1
    return twin, eq, jac
