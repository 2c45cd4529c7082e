"""Kernels that let the self-join under a memory budget skip buckets that can give
nothing new, before their signatures are read.

Band rows come sorted by ``(key, doc)`` and a band's keys lie in
``[band << 56, (band + 1) << 56)``, so a bucket is a run of equal keys, and shards taken
in key order see the bands one after the other. A near-duplicate pair shares most bands,
so most of its buckets after the first repeat what an earlier band found:

* **clusters**: a bucket whose docs are already one component gives no new link (every
  link it could make joins two docs of that component): :func:`drop_joined`, checked
  against the union-find of the links found so far;
* **pairs**: a pair is reported from the first band in which its values are equal
  (``kernels/bucket_pairs.py``, ``reported_here``). A *label* names one bucket whose docs all
  have equal values in its band (:func:`label_pure`, set while that bucket is verified,
  with its signatures at hand); docs sharing a label therefore share a band with equal
  values, and every pair of a later bucket whose docs all carry one label was reported
  from that band or an earlier one: :func:`drop_labelled`. A bucket whose docs share a
  band key but not its values (a key collision) is never labelled, so the rule holds for
  collisions too. Label 0 means none.

A dropped bucket's docs are not read for it; the answers do not change.

>>> import numpy as np
>>> keys = np.array([5, 5, 9, 9, 9], np.uint64)
>>> gids = np.array([0, 1, 1, 2, 3], np.uint32)
>>> parent = np.array([0, 0, 2, 3], np.int32)  # docs 0 and 1 joined
>>> [a.tolist() for a in drop_joined(keys, gids, parent)]
[[9, 9, 9], [1, 2, 3]]
>>> labels = np.array([7, 7, 0, 0], np.uint32)
>>> [a.tolist() for a in drop_labelled(keys, gids, labels)]
[[9, 9, 9], [1, 2, 3]]
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.components import find, find_within, is_marked
from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["drop_joined", "joined_within", "kept_rows", "drop_labelled", "label_pure", "marked_buckets",
           "CURSOR_BUCKET", "CURSOR_ROW", "CURSOR_ROOT", "new_prune_cursor"]

# the slots of :func:`joined_within`'s cursor (one int64 array the kernel updates in place)
CURSOR_BUCKET = 0  # the first row of the bucket being checked
CURSOR_ROW = 1  # the next row of that bucket to check
CURSOR_ROOT = 2  # the root of the bucket's first doc (valid once CURSOR_ROW > CURSOR_BUCKET)


def new_prune_cursor() -> np.ndarray:
    """A cursor at the first bucket, for :func:`joined_within`."""
    return np.zeros(3, dtype=np.int64)


@njit(**JIT, inline="always")
def _bucket_end(keys, i):
    j = i + 1
    while j < keys.size and keys[j] == keys[i]:
        j += 1
    return j


@njit(**JIT, inline="always")
def _keep(keep, i, j):
    for u in range(i, j):  # (a loop: slice assignment compiles numba's broadcasting)
        keep[u] = True


@njit(**JIT, inline="always")
def _kept_rows(keys, gids, keep):
    n = 0
    for i in range(keys.size):
        if keep[i]:
            n += 1
    out_k = np.empty(n, dtype=keys.dtype)
    out_g = np.empty(n, dtype=gids.dtype)
    w = 0
    for i in range(keys.size):
        if keep[i]:
            out_k[w] = keys[i]
            out_g[w] = gids[i]
            w += 1
    return out_k, out_g


@njit(**JIT)
def joined_within(keys, gids, parent, keep, at, seen, meter):
    """Set ``keep`` on the rows of the buckets whose docs do not all share one root of
    ``parent`` (a union-find over global docs; its paths are halved on the way), from
    cursor ``at`` (:func:`new_prune_cursor`; slots :data:`CURSOR_BUCKET`, :data:`CURSOR_ROW`,
    :data:`CURSOR_ROOT`)
    until the meter of ``parent``'s blocks is full
    (:mod:`lance_minhash_sql.kernels.components`); returns True when done, else False
    with ``at`` where to resume. :func:`drop_joined` is the same over a union-find in
    memory, with no meter."""
    i, t, root = at[CURSOR_BUCKET], at[CURSOR_ROW], at[CURSOR_ROOT]
    while i < keys.size:
        j = _bucket_end(keys, i)
        if t == i:
            root = find_within(parent, gids[i], seen, meter)
            if root < 0:
                return False
            t = i + 1
            at[CURSOR_ROW], at[CURSOR_ROOT] = t, root
        while t < j:
            r = find_within(parent, gids[t], seen, meter)
            if r < 0:
                at[CURSOR_ROW] = t
                return False
            if r != root:
                _keep(keep, i, j)
                break
            t += 1
        i = j
        t = j
        at[CURSOR_BUCKET], at[CURSOR_ROW] = i, t
    return True


@njit(**JIT)
def kept_rows(keys, gids, keep):
    """``(keys, gids)`` of the rows set in ``keep``."""
    return _kept_rows(keys, gids, keep)


@njit(**JIT)
def drop_joined(keys, gids, parent):
    """``(keys, gids)`` without the buckets whose docs already share one root of
    ``parent`` (a union-find over global docs; its paths are halved on the way)."""
    keep = np.zeros(keys.size, dtype=np.bool_)
    i = 0
    while i < keys.size:
        j = _bucket_end(keys, i)
        root = find(parent, gids[i])
        for t in range(i + 1, j):
            if find(parent, gids[t]) != root:
                _keep(keep, i, j)
                break
        i = j
    return _kept_rows(keys, gids, keep)


@njit(**JIT)
def drop_labelled(keys, gids, labels):
    """``(keys, gids)`` without the buckets whose docs all carry one label (not 0)."""
    keep = np.zeros(keys.size, dtype=np.bool_)
    i = 0
    while i < keys.size:
        j = _bucket_end(keys, i)
        label = labels[gids[i]]
        if label == 0:
            _keep(keep, i, j)
        else:
            for t in range(i + 1, j):
                if labels[gids[t]] != label:
                    _keep(keep, i, j)
                    break
        i = j
    return _kept_rows(keys, gids, keep)


@njit(**JIT)
def marked_buckets(keys, gids, marks):
    """``(keys, gids)`` of the buckets whose docs are all set in the bit set ``marks``
    (a shard read again for its group: buckets pruned when it was marked may have a doc
    outside the group's pool)."""
    keep = np.zeros(keys.size, dtype=np.bool_)
    i = 0
    while i < keys.size:
        j = _bucket_end(keys, i)
        inside = True
        for t in range(i, j):
            if not is_marked(marks, gids[t]):
                inside = False
                break
        if inside:
            _keep(keep, i, j)
        i = j
    return _kept_rows(keys, gids, keep)


@njit(**JIT)
def label_pure(keys, docs, starts, ends, halves, gids, r, labels, base):
    """Give the docs of each bucket ``b`` (rows ``starts[b]:ends[b]`` of ``docs``, pool rows
    of ``halves`` (u16 values) and ``gids`` (their global docs)) the label ``base + b``
    when they all have equal values in the bucket's band (``keys >> 56``, ``r`` values a
    band); returns the number of buckets labelled."""
    labelled = 0
    for b in range(starts.size):
        s, e = starts[b], ends[b]
        lo = np.int64(keys[s] >> np.uint64(56)) * r
        first = docs[s]
        pure = True
        for t in range(s + 1, e):
            d = docs[t]
            for v in range(lo, lo + r):
                if halves[d, v] != halves[first, v]:
                    pure = False
                    break
            if not pure:
                break
        if pure:
            label = np.uint32(base + b)
            for t in range(s, e):
                labels[gids[docs[t]]] = label
            labelled += 1
    return labelled
