"""Star clustering: inside each near-duplicate component, every dropped row names a kept
row (its *twin*) that it is similar to.

Connected components (:mod:`.clusters`) chain: ``A ~ B`` and ``B ~ C`` put ``A`` and ``C``
together although ``A`` and ``C`` may be far apart, and dedup then keeps one row for all
three. The star rule keeps that bound (a twin is only looked for inside a component) and
decides, per component:

1. its members are walked in the keep order (``keep``/``order_by`` of :mod:`.dedup`;
   lowest row id first for :func:`.clusters.clusters`);
2. a member becomes a *center* (a kept row) unless it is similar to a center already
   chosen; then it is dropped, and its twin is the first such center in the walk;
3. "similar" is the verification of :func:`.pairs.pairs`: ``float32(eq) / float32(k) >=
   threshold`` over the full signatures (``eq`` equal values, :func:`kernels.pairs.min_matches`).

Guarantees: every dropped row's twin is kept and similar to it; no center is similar to
an earlier center of its component; the first row of a component in keep order is always
kept (so ``keep`` still chooses it); the answer depends only on the components and the
keep order, not on the memory budget or threads. Cost: one comparison of ``k`` values per
member and center of its component tried (members x centers at worst); a component of a
million identical rows has one center and costs one comparison a member.

Signatures are those of the index: the members' texts are fetched by row id and signed
again (:class:`lance_minhash_sql.index.sign.Signer`, bit-identical to the stored ones),
:data:`STAR_ROWS` at a time in walk order; only the centers of the component being walked
are carried from one chunk to the next (their texts, signed again with the next chunk).

``verify="exact"``: *similar* is the exact Jaccard of the two rows' shingle sets (same
tokenizer and shingle size as the index) reaching the threshold, and the components are
those of links verified down to :func:`lance_minhash_sql.core.params.exact_candidate_floor`
(:func:`.clusters.linked_components`), so pairs whose estimate fell just under the
threshold can still be twins. Every dropped row's exact Jaccard to its twin then reaches
the threshold.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index.results import CLUSTERS_SCHEMA
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.takes import take_rows
from lance_minhash_sql.kernels.pairs import min_matches
from lance_minhash_sql.kernels.star import star_walk, star_walk_exact

__all__ = ["STAR_ROWS", "star_twins", "star_clusters"]

STAR_ROWS = 1 << 16  # members fetched, signed and walked at a time


def star_twins(ds, column: str, params: MinHashParams, threshold: float, rowid: np.ndarray, cluster: np.ndarray,
               order: np.ndarray, verify: str = "estimate") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Twins of the rows of a components table (``rowid``, ``cluster`` ids) walked in
    ``order`` (a permutation with each component contiguous, its members in keep order):
    ``(twin, similarity, jaccard)`` per row, ``twin`` the position of its twin in the table
    (``-1`` for a center), ``similarity`` the pair's MinHash similarity and ``jaccard``
    their exact shingle Jaccard when ``verify="exact"`` (then *similar* means ``jaccard >=
    threshold``); NaN where there is none."""
    k = params.num_hashes
    min_eq = min_matches(threshold, k)
    signer = signer_for(params)
    twin = np.full(rowid.size, -1, dtype=np.int64)
    sim = np.full(rowid.size, np.nan, dtype=np.float64)
    jac = np.full(rowid.size, np.nan, dtype=np.float64)
    carried_texts = pa.array([], pa.string())
    carried_pos = np.empty(0, dtype=np.int64)
    carried_comp = None
    for s in range(0, order.size, STAR_ROWS):
        pos = order[s:s + STAR_ROWS]
        comp = cluster[pos].astype(np.int64)
        if carried_comp is None or carried_comp != comp[0]:
            carried_texts, carried_pos = carried_texts.slice(0, 0), carried_pos[:0]
        n0 = carried_pos.size
        chunk = take_rows(ds, rowid[pos], [column], "the star clustering").column(column).combine_chunks()
        texts = pa.concat_arrays([carried_texts, chunk.cast(pa.string())])
        all_pos = np.concatenate((carried_pos, pos))
        all_comp = np.concatenate((np.full(n0, comp[0], dtype=np.int64), comp))
        sigs, _ = signer.sign(texts)
        if verify == "exact":
            offsets, hashes = signer.shingle_sets(texts)
            t, exact = star_walk_exact(readonly(offsets), readonly(hashes), all_comp, np.int64(n0), float(threshold))
        else:
            t, _ = star_walk(sigs, all_comp, np.int64(n0), np.int64(min_eq))
            exact = None
        dropped = np.flatnonzero(t[n0:] >= 0) + n0
        twin[all_pos[dropped]] = all_pos[t[dropped]]
        eq = (sigs[dropped] == sigs[t[dropped]]).sum(axis=1)
        sim[all_pos[dropped]] = lance_similarity(eq, k).astype(np.float64)
        if exact is not None:
            jac[all_pos[dropped]] = exact[dropped]
        last = np.flatnonzero((t < 0) & (all_comp == comp[-1]))
        carried_texts, carried_pos, carried_comp = texts.take(pa.array(last)), all_pos[last], comp[-1]
    return twin, sim, jac


def star_clusters(ds, column: str, params: MinHashParams, threshold: float, components: pa.Table,
                  verify: str = "estimate") -> pa.Table:
    """The star clusters of a components table (:data:`CLUSTERS_SCHEMA`), members walked by
    lowest row id: each center with the rows it is the twin of, ``cluster_id`` the center's
    row id (the smallest of its cluster), ``cluster_size`` its rows; clusters of two rows or
    more, ordered by ``(cluster_id, _rowid)``."""
    rowid = components.column("_rowid").to_numpy()
    cluster = components.column("cluster_id").to_numpy()
    order = np.lexsort((rowid, cluster))
    twin, _, _ = star_twins(ds, column, params, threshold, rowid, cluster, order, verify)
    center = np.where(twin < 0, np.arange(rowid.size), twin)
    size = np.bincount(center, minlength=rowid.size)
    member = size[center] >= 2
    rid, cid, n = rowid[member], rowid[center[member]], size[center[member]].astype(np.int64)
    out = np.lexsort((rid, cid))
    return pa.Table.from_arrays([pa.array(rid[out], pa.uint64()), pa.array(cid[out], pa.uint64()),
                                 pa.array(n[out], pa.int64())], schema=CLUSTERS_SCHEMA)
