"""Star clustering: inside each near-duplicate component, every dropped row names a kept
row (its *twin*) that it is similar to.

Connected components (:mod:`.clusters`) chain: ``A ~ B`` and ``B ~ C`` put ``A`` and ``C``
together although ``A`` and ``C`` may be far apart, and dedup then keeps one row for all
three. The star rule keeps that bound (a twin is only looked for inside a component) and
decides, per component:

1. its members are walked in the keep order (``keep``/``order_by`` of :mod:`.dedup`;
   lowest row id first for :func:`.clusters.clusters`);
2. each bucket (a band key) of the component lists its first :data:`BUCKET_CENTERS` (16)
   centers (kept rows) in the walk; a member's *candidates* are the centers listed in its
   buckets (each an LSH candidate pair, as every pair the self-join verifies) whose
   estimate reaches the threshold: ``float32(eq) / float32(k) >= threshold`` over the full
   signatures (``eq`` equal values; :func:`.verify.candidate_matches`, the verification
   of :func:`.pairs.pairs`);
3. the candidates are tried most equal values first, ties to the center first in the
   walk; the first that passes is the member's *twin* and the member is dropped; a member
   with none becomes a center. Under the estimate every candidate passes, so the twin is
   the most similar candidate.

Guarantees: every dropped row's twin is kept, shares a band with it and is similar to it;
no kept row is similar to an earlier kept row of its component listed in one of its
buckets (a kept row can duplicate an earlier one only when every bucket they share listed
16 other centers first, as a link can be missed past :data:`.links.MAX_REPS`
representatives); the first row of a component in keep order is always kept (so ``keep``
still chooses it); the answer depends only on the components and the keep order, not on
the memory budget or threads. Cost: per member, a look-up of each band key and at most
``num_bands * 16`` comparisons of ``k`` values (:mod:`lance_minhash_sql.kernels.star`):
what a member costs does not grow with its component; a component of a million identical
rows has one center and costs one comparison a member. Two rows that are similar but
share no band are not twins (they are no LSH candidate pair either: they are linked, if
at all, through other rows).

Signatures are those of the index: before the walk, the members' texts are fetched once,
in row-id order in sequential runs, and signed again (bit-identical to the stored ones)
and, with ``verify="exact"``, shingled, into files read through memory maps
(:class:`lance_minhash_sql.selfjoin.shingles.ShingleSets`); each chunk of the walk gathers
its members' from there.

**Memory** (the self-join's budget, :class:`lance_minhash_sql.core.budget.Budget`): beside
the components table's row ids and cluster ids (and the keep order, unless it is the
table's own) and the result (a few integers per clustered row: the caller's, as the
budget's module doc says), the walk holds

* the members' index (:data:`lance_minhash_sql.selfjoin.shingles.INDEX_BYTES` a member,
  less the bucket counts, which the walk does not read) while it fits the budget's
  ``sets`` part, past it in files (:class:`lance_minhash_sql.selfjoin.shingles.ShingleSets`);
* its arrays over all its members (:func:`_walked_types`: twin, equal values, similarity,
  and Jaccard with ``verify="exact"``) while they fit the budget's ``star_walked`` part,
  past it in temporary files, memory-mapped (file pages, which the OS keeps or drops);
* one chunk of members: their signatures, band keys, the hash table of the chunk's
  centers' keys and (``verify="exact"``) shingle sets, as many members as
  the budget's ``star_chunk`` part holds (each member's bytes known from the index
  before it is gathered; one member at least), at most :data:`STAR_ROWS`;
* the centers of the component being walked (their signatures, band keys, and shingle
  sets with ``verify="exact"``), in blocks: held while they fit the budget's
  ``star_centers`` part, the older blocks written to a private temp folder past that and read back
  one block at a time for each chunk (:class:`_Centers`).

A chunk's members are first matched against the earlier chunks' centers block by block
in walk order (a block's twin replaces an earlier block's only with more equal values),
then walked among themselves: the same twins as one walk over the whole component,
whatever the chunks and blocks (``tests/test_star.py`` checks three budgets and blocks forced
to disk).

``verify="exact"``: a candidate's estimate need only reach
:func:`lance_minhash_sql.core.banding.exact_candidate_floor`, and it passes when the exact
Jaccard of the two rows' shingle sets (same tokenizer and shingle size as the index)
reaches the threshold (an empty set passes nothing); the components are those of links
verified down to that floor (:func:`.clusters.linked_components`), so pairs whose estimate
fell just under the threshold can still be twins. Candidates are tried most equal values
first, so most members settle on their first exact check. Every dropped row's exact
Jaccard to its twin reaches the threshold.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import NPY_HEADER_LOCK, permute, readonly, sorted_unique
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.tuning import STAR_BUCKET_CENTERS as BUCKET_CENTERS
from lance_minhash_sql.core.tuning import STAR_ROWS
from lance_minhash_sql.index.results import CLUSTERS_SCHEMA
from lance_minhash_sql.io.file_arrays import FileArray
from lance_minhash_sql.kernels.csr import csr_take
from lance_minhash_sql.kernels.star import TABLE_BYTES, block_keys, star_match, star_walk
from lance_minhash_sql.runtime.cache import Counters
from lance_minhash_sql.runtime.progress import progress_bar
from lance_minhash_sql.selfjoin.shingles import ShingleSets
from lance_minhash_sql.selfjoin.verify import candidate_matches

__all__ = ["STAR_ROWS", "BUCKET_CENTERS", "STATS", "star_twins", "table_ordered", "star_members", "star_clusters"]

CENTERS_PREFIX = "lance-minhash-star-"
STATS = Counters("star clustering's chunks, center blocks written to disk and walks whose arrays are in files",
                 "written_blocks", "chunks", "walked_in_files")


class _Centers:
    """The centers of the component being walked, in walk order, as blocks ``(pos, sigs,
    keys, center, offsets, hashes)`` (``pos``: positions in the components table;
    ``keys``/``center`` their band keys as sorted ``(key, center)`` pairs,
    :func:`kernels.star.block_keys`; ``offsets``/``hashes`` the shingle sets' CSR, empty
    without exact verification). Blocks are held while their
    bytes fit ``held_bytes``; past that the oldest held blocks are written to a temp folder
    (made on the first block written, removed by :meth:`close`) and read back one at a time."""

    def __init__(self, held_bytes: int):
        self.held_bytes = held_bytes
        self.comp = None
        self.blocks: list = []  # a tuple of arrays (held) or the path of a block written to disk
        self.held = 0
        self.written = 0
        self.folder: str | None = None

    def reset(self, comp) -> None:
        for b in self.blocks:
            if isinstance(b, str):
                os.remove(b)
        self.comp, self.blocks, self.held = comp, [], 0

    def add(self, pos, sigs, keys, center, offsets, hashes) -> None:
        if pos.size == 0:
            return
        block = (pos, sigs, keys, center, offsets, hashes)
        self.blocks.append(block)
        self.held += _nbytes(block)
        for i, b in enumerate(self.blocks):
            if self.held <= self.held_bytes:
                break
            if not isinstance(b, str):
                self.blocks[i] = self._write(b)

    def _write(self, block) -> str:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix=CENTERS_PREFIX)
        self.written += 1
        path = os.path.join(self.folder, f"b{self.written:08d}.npz")
        np.savez(path, *block)
        STATS.add("written_blocks")
        self.held -= _nbytes(block)
        return path

    def __iter__(self):
        """``(base, pos, sigs, keys, center, offsets, hashes)`` of each block in walk order, ``base`` the
        index of its first center."""
        base = 0
        for b in self.blocks:
            if isinstance(b, str):
                with NPY_HEADER_LOCK, np.load(b) as f:
                    b = tuple(f[f"arr_{i}"] for i in range(len(f.files)))
            yield base, *b
            base += b[0].size

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _nbytes(arrays) -> int:
    return sum(a.nbytes for a in arrays)


def _walk_bytes(num_bands: int) -> int:
    """What the walk holds per member of a chunk beside its signature and set: its band
    keys, the hash table of the chunk's centers (:data:`kernels.star.TABLE_BYTES` a band),
    the counts and marks of the centers listed in its buckets, and five integers (its
    twin, equal values, Jaccard, and the kernel's rank and mark)."""
    return num_bands * (8 + TABLE_BYTES + 8 + 1) + 5 * 8


def _chunk(members: ShingleSets, rowid: np.ndarray, order: np.ndarray | None, start: int, budget: Budget,
           extra: int) -> np.ndarray:
    """The positions of the next chunk of the walk from ``order[start]`` (``None``: the
    table's order): as many members as the budget's ``star_chunk`` part holds (at least
    one; each member's bytes and ``extra``), at most :data:`STAR_ROWS`."""
    ahead = np.arange(start, min(start + STAR_ROWS, rowid.size)) if order is None else order[start:start + STAR_ROWS]
    nbytes = np.cumsum(members.row_bytes(rowid[ahead]) + extra)
    return ahead[:max(1, int(np.searchsorted(nbytes, budget.star_chunk, side="right")))]


def star_twins(opened, threshold: float, rowid: np.ndarray, cluster: np.ndarray, order: np.ndarray | None,
               verify: str, budget: Budget, progress: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Twins of the rows of a components table (``rowid``, ``cluster`` ids) of the index
    ``opened`` (:class:`lance_minhash_sql.index.opened.OpenedIndex`) walked in ``order``
    (a permutation with each component contiguous, its members in keep order; ``None``:
    the table's order, ``(cluster_id, _rowid)``):
    ``(twin, similarity, jaccard)`` per row, ``twin`` the position of its twin in the table
    (``-1`` for a center; ``int32`` below 2**31 rows), ``similarity`` the pair's MinHash
    similarity (``float32``, as Lance computes it) and ``jaccard`` their exact shingle
    Jaccard when ``verify="exact"`` (then *similar* means ``jaccard >= threshold``; ``None``
    without); NaN where there is none. Within ``budget``, the self-join's (module doc).
    ``progress``: a bar of the rows walked."""
    k = opened.params.num_hashes
    exact = verify == "exact"
    min_eq = np.int64(candidate_matches(threshold, k, verify))
    n = rowid.size
    types = _walked_types(n, k, exact)
    in_files = n * sum(t.itemsize for t in types) > budget.star_walked
    centers = _Centers(budget.star_centers)
    members = ShingleSets(opened, signatures=True, sets=exact, counts=False, held_most=budget.sets)
    extra = _walk_bytes(opened.params.num_bands)
    start = 0
    bar = progress_bar(progress, n, "star", unit="rows")
    try:
        members.fetch_rows(sorted_unique(rowid))  # (before the walk's arrays: the sorted row ids let go first)
        if in_files:
            STATS.add("walked_in_files")
        walked = [_walked(n, t, fill, in_files) for t, fill in zip(types, (-1, 0, np.nan, np.nan))]
        twin, eq, sim = walked[:3]
        jac = walked[3] if exact else None
        del walked
        while start < n:
            pos = _chunk(members, rowid, order, start, budget, extra)
            start += pos.size
            STATS.add("chunks")
            comp = cluster[pos].astype(np.int64)
            sigs, offsets, hashes = members.gather(rowid[pos])
            keys = readonly(members.signer.band_keys(sigs))
            offsets, hashes = readonly(offsets), readonly(hashes)
            if centers.comp != comp[0]:
                centers.reset(comp[0])
            n_first = int(np.searchsorted(comp != comp[0], True))  # members of the carried component
            t_out = np.full(pos.size, -1, dtype=np.int64)  # index among the earlier centers
            e_out = np.zeros(pos.size, dtype=np.int64)
            j_out = np.full(pos.size, np.nan, dtype=np.float64)
            listed = np.zeros(keys.shape, dtype=np.int64)  # centers listed in each member's buckets before
            for base, c_pos, c_sigs, c_keys, c_center, c_off, c_hash in centers:
                star_match(sigs, keys, offsets, hashes, n_first, c_sigs, c_keys, c_center, c_off, c_hash,
                           np.int64(base), min_eq, float(threshold), exact, t_out, e_out, j_out, listed)
                got = (t_out >= base) & (t_out < base + c_pos.size)  # (a later block's twin has more equal values)
                twin[pos[got]] = c_pos[t_out[got] - base]
            matched = t_out >= 0
            t_in, e_in, j_in, listed = star_walk(sigs, keys, offsets, hashes, comp, np.where(matched, e_out, -1),
                                                 listed, np.int64(BUCKET_CENTERS), min_eq, float(threshold), exact)
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
            centers.add(pos[last], sigs[last], *block_keys(keys[last], listed[last]),
                        *_subsets(offsets, hashes, last, exact))
            if bar is not None:
                bar.update(pos.size)
    finally:
        centers.close()
        members.close()
        if bar is not None:
            bar.close()
    for lo in range(0, n, STAR_ROWS):  # (a slice at a time: nothing of the walk's width in memory)
        hi = min(lo + STAR_ROWS, n)
        sim[lo:hi] = np.where(twin[lo:hi] >= 0, lance_similarity(eq[lo:hi], k), np.float32(np.nan))
    return twin, sim, jac


def _walked_types(n: int, k: int, exact: bool) -> tuple[np.dtype, ...]:
    """The dtypes of the walk's arrays over its ``n`` members: twin (a position), equal
    values (at most ``k``), similarity (``float32``, as Lance computes it) and, verifying
    exactly, Jaccard."""
    types = (np.int32 if n < 2**31 else np.int64, np.uint16 if k < 2**16 else np.int32, np.float32)
    return tuple(np.dtype(t) for t in types + ((np.float64,) if exact else ()))


def _walked(n: int, dtype: np.dtype, fill, in_file: bool) -> np.ndarray:
    """``n`` values ``fill`` of ``dtype``, in memory or (``in_file``) in a temporary file,
    memory-mapped; the file's folder is removed at once (the mapping keeps the data for as
    long as the array is referenced)."""
    if not in_file:
        return np.full(n, fill, dtype=dtype)
    f = FileArray(n, dtype)
    out = f.array
    if fill != 0:  # (a new file is zeros)
        for lo in range(0, n, STAR_ROWS):
            out[lo:lo + STAR_ROWS] = fill
    f.close()  # (the array still maps it)
    return out


def _subsets(offsets: np.ndarray, hashes: np.ndarray, rows: np.ndarray, exact: bool):
    """The CSR shingle sets of ``rows`` alone (empty ones without exact verification)."""
    if not exact:
        return np.zeros(rows.size + 1, dtype=np.int64), np.empty(0, dtype=np.uint64)
    return csr_take(offsets, hashes, rows)


def table_ordered(rowid: np.ndarray, cluster: np.ndarray) -> bool:
    """Is a components table ordered by ``(cluster_id, _rowid)`` (as every executor
    returns it)? Then its own order is the walk's for ``keep="first"``, and no permutation
    is held (``order=None`` of :func:`star_twins`)."""
    if cluster.size < 2:
        return True
    return bool(np.all(cluster[1:] >= cluster[:-1])
                and np.all((rowid[1:] > rowid[:-1]) | (cluster[1:] != cluster[:-1])))


def star_members(rowid: np.ndarray, twin: np.ndarray, ordered: bool = False
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The star clusters of a walk (``twin`` of :func:`star_twins` over rows ``rowid``):
    ``(pos, cluster_id, cluster_size)`` of every row of a star of two rows or more, a star
    being one center (a kept row) and the rows dropped for it (their twin). ``pos`` is the
    row's position in the walked table, ``cluster_id`` its center's row id and
    ``cluster_size`` ``1 +`` the rows dropped for that center; ordered by ``(cluster_id,
    row id)``. A center no row is dropped for is in no cluster. ``ordered``: the rows are
    a components table's in its order, ``(cluster_id, _rowid)`` (:func:`table_ordered`).
    This is the one meaning of a star cluster: :func:`star_clusters` and
    :func:`lance_minhash_sql.selfjoin.dedup.keep_flags` both take it from here.

    >>> rowid = np.array([10, 11, 12, 13, 14], dtype=np.uint64)
    >>> pos, cluster_id, size = star_members(rowid, np.array([-1, 0, -1, -1, 2]))  # 13: kept, alone
    >>> pos.tolist(), cluster_id.tolist(), size.tolist()
    ([0, 1, 2, 4], [10, 10, 12, 12], [2, 2, 2, 2])
    """
    center = np.arange(rowid.size, dtype=twin.dtype)
    np.copyto(center, twin, where=twin >= 0)
    # (positions and counts: as narrow as the twins)
    count = np.bincount(center, minlength=rowid.size).astype(twin.dtype)
    pos = np.flatnonzero((count >= 2)[center]).astype(twin.dtype)
    center = center[pos]
    size = count[center]
    del count
    cid = rowid[center]
    del center
    # by (cluster_id, row id); a star lies in one component, so in a table ordered by
    # (cluster_id, _rowid) its positions order its rows as their row ids do
    permute(np.lexsort((pos if ordered else rowid[pos], cid)), pos, size, cid)
    return pos, cid, size.astype(np.int64)


def star_clusters(opened, threshold: float, components: pa.Table, verify: str, budget: Budget,
                  progress: bool = False) -> pa.Table:
    """The star clusters (:func:`star_members`) of a components table
    (:data:`lance_minhash_sql.index.results.CLUSTERS_SCHEMA`), members walked by lowest row
    id (``keep="first"``), as a table of that schema: ``cluster_id`` the center's row id
    (the smallest of its star, a center coming first in its star's walk), ordered by
    ``(cluster_id, _rowid)``; ``progress``: a bar of the rows walked."""
    rowid = components.column("_rowid").to_numpy()
    cluster = components.column("cluster_id").to_numpy()
    ordered = table_ordered(rowid, cluster)
    order = None if ordered else np.lexsort((rowid, cluster))
    twin, _, _ = star_twins(opened, threshold, rowid, cluster, order, verify, budget, progress)
    pos, cid, size = star_members(rowid, twin, ordered)
    return pa.Table.from_arrays([pa.array(rowid[pos], pa.uint64()), pa.array(cid, pa.uint64()),
                                 pa.array(size, pa.int64())], schema=CLUSTERS_SCHEMA)
