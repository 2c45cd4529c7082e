"""The components table: the one builder of every components clustering's table, from
each member's component and row id (:func:`clusters_table`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import permute
from lance_minhash_sql.index.results import CLUSTERS_SCHEMA

__all__ = ["clusters_table"]


def clusters_table(roots: np.ndarray, rowid: np.ndarray) -> pa.Table:
    """The components table of the members of clusters of two or more: ``roots`` names
    each member's cluster (any integer, e.g. the flattened union-find's root), ``rowid``
    its row id, in any order; the ``cluster_id`` is the cluster's smallest row id. (Star
    clusters: :func:`lance_minhash_sql.selfjoin.star.star_members`.)

    Both arrays are taken over: reordered in place (a read-only one is copied first), and
    ``rowid``'s buffer is the table's ``_rowid`` column, so what is held beside the table
    is the two arrays and one permutation, not copies of them."""
    roots, rowid = _writable(roots), _writable(rowid)
    # components are contiguous once sorted by root (a stable sort keeps the members
    # ascending within)
    permute(np.argsort(roots, kind="stable"), roots, rowid)
    first = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1]))) if roots.size else np.empty(0, np.int64)
    sizes = np.diff(np.append(first, rowid.size))
    cid = np.minimum.reduceat(rowid, first) if rowid.size else np.empty(0, np.uint64)  # a cluster's smallest row id
    by_cid = np.argsort(cid)  # (the clusters' ids are distinct row ids)
    rank = np.empty(by_cid.size, dtype=np.int32 if by_cid.size < 2**31 else np.int64)
    rank[by_cid] = np.arange(by_cid.size, dtype=rank.dtype)
    permute(np.lexsort((rowid, np.repeat(rank, sizes))), rowid)  # by (cluster_id, _rowid)
    cid, sizes = cid[by_cid], sizes[by_cid]
    return pa.Table.from_arrays([pa.array(rowid, pa.uint64()), pa.array(np.repeat(cid, sizes), pa.uint64()),
                                 pa.array(np.repeat(sizes.astype(np.int64, copy=False), sizes), pa.int64())],
                                schema=CLUSTERS_SCHEMA)


def _writable(a: np.ndarray) -> np.ndarray:
    return a if a.flags.writeable else a.copy()

