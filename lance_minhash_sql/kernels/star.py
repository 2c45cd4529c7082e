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

__all__ = ["star_walk"]


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
