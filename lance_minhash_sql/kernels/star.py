"""Star clustering's walk: each member joins the first earlier center it is similar to,
or becomes a center itself (``selfjoin/star.py`` has the rule and its guarantees).

>>> import numpy as np
>>> sigs = np.array([[1, 2, 3, 4], [1, 2, 3, 9], [7, 2, 3, 9], [7, 8, 9, 9]], dtype=np.uint16)
>>> comp = np.zeros(4, dtype=np.int64)
>>> twin, eq = star_walk(sigs, comp, np.int64(0), np.int64(3))
>>> twin.tolist(), eq.tolist()
([-1, 0, -1, -1], [0, 3, 0, 0])
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.similarity import sorted_jaccard

__all__ = ["star_walk", "star_walk_exact"]


@njit(**JIT)
def star_walk(sigs, comp, n_carried, min_eq):
    """Walk ``sigs`` (``uint16[n, k]``, members in keep order, components contiguous, ids in
    ``comp``). Rows ``0 .. n_carried - 1`` are centers carried from an earlier chunk (of
    ``comp[0]``'s component). Returns ``(twin, eq)``: ``twin[i]`` is the index of the first
    center (in walk order) sharing at least ``min_eq`` values with row ``i`` and ``eq[i]``
    that count, or ``-1`` and ``0`` for a center. Cost: members x centers of their
    component."""
    n, k = sigs.shape
    twin = np.full(n, -1, dtype=np.int64)
    eq = np.zeros(n, dtype=np.int64)
    centers = np.empty(n, dtype=np.int64)
    nc = 0
    for i in range(n):
        if i > 0 and comp[i] != comp[i - 1]:
            nc = 0
        if i < n_carried:
            centers[nc] = i
            nc += 1
            continue
        for c in range(nc):
            j = centers[c]
            same = 0
            for h in range(k):
                if sigs[i, h] == sigs[j, h]:
                    same += 1
            if same >= min_eq:
                twin[i] = j
                eq[i] = same
                break
        if twin[i] < 0:
            centers[nc] = i
            nc += 1
    return twin, eq


@njit(**JIT)
def star_walk_exact(offsets, hashes, comp, n_carried, threshold):
    """:func:`star_walk` with the exact Jaccard of the rows' shingle sets (CSR ``offsets``,
    sorted distinct ``hashes``; ``Signer.shingle_sets``): a row joins the first center with
    ``jaccard >= threshold``. Returns ``(twin, jaccard)`` (``-1`` and NaN for a center)."""
    n = comp.size
    twin = np.full(n, -1, dtype=np.int64)
    jac = np.full(n, np.nan, dtype=np.float64)
    centers = np.empty(n, dtype=np.int64)
    nc = 0
    for i in range(n):
        if i > 0 and comp[i] != comp[i - 1]:
            nc = 0
        a = hashes[offsets[i]:offsets[i + 1]]
        if i >= n_carried and a.size > 0:
            for c in range(nc):
                j = centers[c]
                b = hashes[offsets[j]:offsets[j + 1]]
                if b.size == 0:
                    continue
                x = sorted_jaccard(a, b)
                if x >= threshold:
                    twin[i] = j
                    jac[i] = x
                    break
        if twin[i] < 0:
            centers[nc] = i
            nc += 1
    return twin, jac
