"""The components table: the one builder of every components clustering's table, from
each member's component and row id (:func:`clusters_table`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_minhash_sql.index.results import CLUSTERS_SCHEMA

__all__ = ["clusters_table"]


def clusters_table(roots: np.ndarray, rowid: np.ndarray) -> pa.Table:
    """The components table of the members of clusters of two or more: ``roots`` names
    each member's cluster (any integer, e.g. the flattened union-find's root), ``rowid``
    its row id, in any order; the ``cluster_id`` is the cluster's smallest row id. (Star
    clusters: :func:`lance_minhash_sql.selfjoin.star.star_members`.)"""
    # components are contiguous once sorted by root (a stable sort keeps the members
    # ascending within)
    order = np.argsort(roots, kind="stable")
    roots, rowid = roots[order], rowid[order]
    first = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1]))) if roots.size else np.empty(0, np.int64)
    sizes = np.diff(np.append(first, roots.size))
    cid = np.repeat(np.minimum.reduceat(rowid, first), sizes) if roots.size else np.empty(0, np.uint64)
    size = np.repeat(sizes, sizes).astype(np.int64)
    out = np.lexsort((rowid, cid))
    return pa.Table.from_arrays([pa.array(rowid[out], pa.uint64()), pa.array(cid[out], pa.uint64()),
                                 pa.array(size[out], pa.int64())], schema=CLUSTERS_SCHEMA)
