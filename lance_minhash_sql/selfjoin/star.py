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

Signatures are those of the index: before the walk, the members' texts are fetched once,
in row-id order in sequential runs, and signed again (bit-identical to the stored ones)
and, with ``verify="exact"``, shingled, into files read through memory maps
(:class:`lance_minhash_sql.selfjoin.shingles.ShingleSets`); each chunk of the walk gathers
its members' from there.

**Memory** (the self-join's ``memory_limit``, :func:`.bounded.memory_limit_bytes`): beside
the components table and the result (a few integers per clustered row), the walk holds

* the members' index (:data:`lance_minhash_sql.selfjoin.shingles.INDEX_BYTES` a member);
* one chunk of members: their signatures and (``verify="exact"``) shingle sets, as many
  members as :data:`CHUNK_SHARE` of the budget holds (each member's bytes known from the
  index before it is gathered; one member at least), at most :data:`STAR_ROWS`;
* the centers of the component being walked (their signatures, and shingle sets with
  ``verify="exact"``), in blocks: held while they fit :data:`CENTERS_SHARE` of the
  budget, the older blocks written to a private temp folder past that and read back
  one block at a time for each chunk (:class:`_Centers`).

A chunk's members are first matched against the earlier chunks' centers block by block
in walk order (the first similar center wins, so blocks are read in the order they were
written), then walked among themselves: the same twins as one walk over the whole
component, whatever the chunks and blocks (``tests/test_star.py`` checks three budgets
and a forced spill).

``verify="exact"``: *similar* is the exact Jaccard of the two rows' shingle sets (same
tokenizer and shingle size as the index) reaching the threshold, and the components are
those of links verified down to :func:`lance_minhash_sql.core.banding.exact_candidate_floor`
(:func:`.clusters.linked_components`), so pairs whose estimate fell just under the
threshold can still be twins. Every dropped row's exact Jaccard to its twin then reaches
the threshold.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import NPY_HEADER_LOCK, readonly, sorted_unique
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.tuning import STAR_CENTERS_SHARE as CENTERS_SHARE
from lance_minhash_sql.core.tuning import STAR_CHUNK_SHARE as CHUNK_SHARE
from lance_minhash_sql.core.tuning import STAR_ROWS
from lance_minhash_sql.index.results import CLUSTERS_SCHEMA
from lance_minhash_sql.kernels.csr import csr_take
from lance_minhash_sql.kernels.pairs import min_matches
from lance_minhash_sql.kernels.star import star_match, star_match_exact, star_walk, star_walk_exact
from lance_minhash_sql.runtime.cache import Counters
from lance_minhash_sql.runtime.progress import progress_bar
from lance_minhash_sql.selfjoin.shingles import ShingleSets

__all__ = ["STAR_ROWS", "CHUNK_SHARE", "CENTERS_SHARE", "STATS", "star_twins", "star_members", "star_clusters"]

SPILL_PREFIX = "lance-minhash-star-"
STATS = Counters("star clustering's chunks and spilled centers", "spilled_blocks", "chunks")


class _Centers:
    """The centers of the component being walked, in walk order, as blocks ``(pos, sigs,
    offsets, hashes)`` (``pos``: positions in the components table; ``offsets``/``hashes``
    the shingle sets' CSR, empty without exact verification). Blocks are held while their
    bytes fit ``held_bytes``; past that the oldest held blocks are written to a temp folder
    (made on the first spill, removed by :meth:`close`) and read back one at a time."""

    def __init__(self, held_bytes: int):
        self.held_bytes = held_bytes
        self.comp = None
        self.blocks: list = []  # a tuple of arrays (held) or the path of a spilled block
        self.held = 0
        self.spilled = 0
        self.folder: str | None = None

    def reset(self, comp) -> None:
        for b in self.blocks:
            if isinstance(b, str):
                os.remove(b)
        self.comp, self.blocks, self.held = comp, [], 0

    def add(self, pos, sigs, offsets, hashes) -> None:
        if pos.size == 0:
            return
        block = (pos, sigs, offsets, hashes)
        self.blocks.append(block)
        self.held += _nbytes(block)
        for i, b in enumerate(self.blocks):
            if self.held <= self.held_bytes:
                break
            if not isinstance(b, str):
                self.blocks[i] = self._spill(b)

    def _spill(self, block) -> str:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix=SPILL_PREFIX)
        self.spilled += 1
        path = os.path.join(self.folder, f"b{self.spilled:08d}.npz")
        np.savez(path, *block)
        STATS.add("spilled_blocks")
        self.held -= _nbytes(block)
        return path

    def __iter__(self):
        """``(base, pos, sigs, offsets, hashes)`` of each block in walk order, ``base`` the
        index of its first center."""
        base = 0
        for b in self.blocks:
            if isinstance(b, str):
                with NPY_HEADER_LOCK, np.load(b) as f:
                    b = tuple(f[f"arr_{i}"] for i in range(4))
            yield base, *b
            base += b[0].size

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _nbytes(arrays) -> int:
    return sum(a.nbytes for a in arrays)


def _chunk(members: ShingleSets, rowid: np.ndarray, order: np.ndarray, start: int, limit: int) -> np.ndarray:
    """The positions of the next chunk of the walk from ``order[start]``: as many members
    as :data:`CHUNK_SHARE` of ``limit`` holds (at least one), at most :data:`STAR_ROWS`."""
    ahead = order[start:start + STAR_ROWS]
    nbytes = np.cumsum(members.row_bytes(rowid[ahead]))
    return ahead[:max(1, int(np.searchsorted(nbytes, CHUNK_SHARE * limit, side="right")))]


def star_twins(opened, threshold: float, rowid: np.ndarray, cluster: np.ndarray, order: np.ndarray, verify: str,
               limit: int, progress: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Twins of the rows of a components table (``rowid``, ``cluster`` ids) of the index
    ``opened`` (:class:`lance_minhash_sql.index.opened.OpenedIndex`) walked in ``order``
    (a permutation with each component contiguous, its members in keep order):
    ``(twin, similarity, jaccard)`` per row, ``twin`` the position of its twin in the table
    (``-1`` for a center), ``similarity`` the pair's MinHash similarity and ``jaccard``
    their exact shingle Jaccard when ``verify="exact"`` (then *similar* means ``jaccard >=
    threshold``); NaN where there is none. Within ``limit`` bytes, the self-join's budget
    (module doc). ``progress``: a bar of the rows walked."""
    k = opened.params.num_hashes
    exact = verify == "exact"
    min_eq = np.int64(min_matches(threshold, k))
    twin = np.full(rowid.size, -1, dtype=np.int64)
    eq = np.zeros(rowid.size, dtype=np.int64)
    jac = np.full(rowid.size, np.nan, dtype=np.float64)
    centers = _Centers(int(CENTERS_SHARE * limit))
    members = ShingleSets(opened, signatures=True, sets=exact)
    start = 0
    bar = progress_bar(progress, order.size, "star", unit="rows")
    try:
        members.fetch_rows(sorted_unique(rowid))
        while start < order.size:
            pos = _chunk(members, rowid, order, start, limit)
            start += pos.size
            STATS.add("chunks")
            comp = cluster[pos].astype(np.int64)
            sigs, offsets, hashes = members.gather(rowid[pos])
            offsets, hashes = readonly(offsets), readonly(hashes)
            if centers.comp != comp[0]:
                centers.reset(comp[0])
            n_first = int(np.searchsorted(comp != comp[0], True))  # members of the carried component
            t_out = np.full(pos.size, -1, dtype=np.int64)  # index among the earlier centers
            e_out = np.zeros(pos.size, dtype=np.int64)
            j_out = np.full(pos.size, np.nan, dtype=np.float64)
            for base, c_pos, c_sigs, c_off, c_hash in centers:
                before = t_out < 0
                if exact:
                    star_match_exact(sigs, offsets, hashes, n_first, c_sigs, c_off, c_hash, np.int64(base),
                                     float(threshold), t_out, e_out, j_out)
                else:
                    star_match(sigs, n_first, c_sigs, np.int64(base), min_eq, t_out, e_out)
                got = before & (t_out >= 0)
                twin[pos[got]] = c_pos[t_out[got] - base]
                if not (t_out[:n_first] < 0).any():
                    break
            matched = t_out >= 0
            if exact:
                t_in, e_in, j_in = star_walk_exact(sigs, offsets, hashes, comp, matched, float(threshold))
            else:
                t_in, e_in = star_walk(sigs, comp, matched, min_eq)
                j_in = j_out
            inside = t_in >= 0
            twin[pos[inside]] = pos[t_in[inside]]
            eq[pos[matched]] = e_out[matched]
            eq[pos[inside]] = e_in[inside]
            if exact:
                jac[pos[matched]] = j_out[matched]
                jac[pos[inside]] = j_in[inside]
            last = np.flatnonzero(~matched & ~inside & (comp == comp[-1]))
            if centers.comp != comp[-1]:
                centers.reset(comp[-1])
            centers.add(pos[last], sigs[last], *_subsets(offsets, hashes, last, exact))
            if bar is not None:
                bar.update(pos.size)
    finally:
        centers.close()
        members.close()
        if bar is not None:
            bar.close()
    sim = np.where(twin >= 0, lance_similarity(eq, k).astype(np.float64), np.nan)
    return twin, sim, jac


def _subsets(offsets: np.ndarray, hashes: np.ndarray, rows: np.ndarray, exact: bool):
    """The CSR shingle sets of ``rows`` alone (empty ones without exact verification)."""
    if not exact:
        return np.zeros(rows.size + 1, dtype=np.int64), np.empty(0, dtype=np.uint64)
    return csr_take(offsets, hashes, rows)


def star_members(rowid: np.ndarray, twin: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The star clusters of a walk (``twin`` of :func:`star_twins` over rows ``rowid``):
    ``(pos, cluster_id, cluster_size)`` of every row of a star of two rows or more, a star
    being one center (a kept row) and the rows dropped for it (their twin). ``pos`` is the
    row's position in the walked table, ``cluster_id`` its center's row id and
    ``cluster_size`` ``1 +`` the rows dropped for that center; ordered by ``(cluster_id,
    row id)``. A center no row is dropped for is in no cluster. This is the one meaning of a
    star cluster: :func:`star_clusters` and :func:`lance_minhash_sql.selfjoin.dedup.keep_flags`
    both take it from here.

    >>> rowid = np.array([10, 11, 12, 13, 14], dtype=np.uint64)
    >>> pos, cluster_id, size = star_members(rowid, np.array([-1, 0, -1, -1, 2]))  # 13: kept, alone
    >>> pos.tolist(), cluster_id.tolist(), size.tolist()
    ([0, 1, 2, 4], [10, 10, 12, 12], [2, 2, 2, 2])
    """
    center = np.where(twin < 0, np.arange(rowid.size), twin)
    size = np.bincount(center, minlength=rowid.size)[center].astype(np.int64)
    pos = np.flatnonzero(size >= 2)
    cid = rowid[center[pos]]
    pos = pos[np.lexsort((rowid[pos], cid))]
    return pos, rowid[center[pos]], size[pos]


def star_clusters(opened, threshold: float, components: pa.Table, verify: str, limit: int,
                  progress: bool = False) -> pa.Table:
    """The star clusters (:func:`star_members`) of a components table
    (:data:`lance_minhash_sql.index.results.CLUSTERS_SCHEMA`), members walked by lowest row
    id (``keep="first"``), as a table of that schema: ``cluster_id`` the center's row id
    (the smallest of its star, a center coming first in its star's walk), ordered by
    ``(cluster_id, _rowid)``; ``progress``: a bar of the rows walked."""
    rowid = components.column("_rowid").to_numpy()
    cluster = components.column("cluster_id").to_numpy()
    order = np.lexsort((rowid, cluster))
    twin, _, _ = star_twins(opened, threshold, rowid, cluster, order, verify, limit, progress)
    pos, cid, size = star_members(rowid, twin)
    return pa.Table.from_arrays([pa.array(rowid[pos], pa.uint64()), pa.array(cid, pa.uint64()),
                                 pa.array(size, pa.int64())], schema=CLUSTERS_SCHEMA)
