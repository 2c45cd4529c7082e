"""The shingle sets of exact verification, computed once per row while they fit a budget.

Exact verification (``exact=True``, ``verify="exact"``) needs the shingle sets of the rows
of every candidate pair it checks. A row is a candidate in many pairs, in several bands
(so several shards) and several chunks of pairs: fetching and shingling its text per
chunk did the same work several times over. :class:`ShingleSets` keeps the sets of the
rows already fetched (sorted row ids and one CSR of sorted distinct shingle hashes,
:meth:`lance_minhash_sql.index.sign.Signer.shingle_sets`) for the whole self-join, and
fetches only the rows it does not hold. Past ``max_bytes`` it keeps only the rows of the
chunk at hand (the others are fetched again when asked): the answers never depend on it.

Shards run on threads: a chunk's missing rows are fetched and merged under a lock (the
fetch and the shingling use their own threads); the sets are then read from an immutable
snapshot without it.
"""

from __future__ import annotations

import threading

import numpy as np

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.tuning import MAX_SHINGLE_BLOCKS as MAX_BLOCKS
from lance_minhash_sql.core.tuning import SHINGLE_SHARE
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.takes import take_rows
from lance_minhash_sql.kernels.csr import csr_scatter, csr_take
from lance_minhash_sql.core.arrays import sorted_unique
from lance_minhash_sql.runtime.cache import Counters

__all__ = ["SHINGLE_SHARE", "ShingleSets", "budget_sets", "STATS"]

STATS = Counters("exact verification's shingle sets", "fetched_rows", "asked_rows")


def budget_sets(opened, limit: int) -> "ShingleSets":
    """The :class:`ShingleSets` of one self-join under a budget of ``limit`` bytes
    (:data:`SHINGLE_SHARE` of it)."""
    return ShingleSets(opened, int(SHINGLE_SHARE * limit))


class ShingleSets:
    """Shingle sets of rows of ``opened`` (an :class:`lance_minhash_sql.index.opened.OpenedIndex`)
    by row id, held while their bytes fit ``max_bytes``: blocks of rows fetched together
    (sorted row ids and their CSR), the oldest dropped first past the budget, merged into
    one when there are more than :data:`MAX_BLOCKS`."""

    def __init__(self, opened, max_bytes: int):
        self.opened = opened
        self.signer = signer_for(opened.params)
        self.max_bytes = max_bytes
        self.blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.lock = threading.Lock()

    def sets(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids, offsets, hashes)``: the sorted distinct ``rowids`` and their sets as CSR
        (``np.searchsorted(ids, r)`` locates row ``r``)."""
        want = sorted_unique(np.asarray(rowids, dtype=np.uint64))
        with self.lock:
            parts, missing = _lookup(self.blocks, want)
            STATS.add("asked_rows", want.size)
            if missing.size:
                STATS.add("fetched_rows", missing.size)
                texts = take_rows(self.opened.ds, missing, [self.opened.column], "the exact verification",
                                  self.opened.uri).column(self.opened.column)
                offsets, hashes = self.signer.shingle_sets(texts.combine_chunks())
                block = (missing, offsets, hashes)
                parts.append(block)
                self._hold(block)
        if len(parts) == 1:
            return tuple(readonly(a) for a in parts[0])
        return _joined(parts)

    def _hold(self, block) -> None:
        self.blocks.append(block)
        total = sum(_nbytes(b) for b in self.blocks)
        while len(self.blocks) > 1 and total > self.max_bytes:
            total -= _nbytes(self.blocks.pop(0))
        if total > self.max_bytes:
            self.blocks = []
        elif len(self.blocks) > MAX_BLOCKS:
            self.blocks = [_joined(self.blocks)]


def _nbytes(block) -> int:
    return sum(a.nbytes for a in block)


def _lookup(blocks: list, want: np.ndarray) -> tuple[list, np.ndarray]:
    """The held rows of sorted ``want`` as one part per block (their own CSR), and the rows
    no block holds."""
    parts = []
    todo = want
    for ids, offsets, hashes in blocks:
        if todo.size == 0:
            break
        at = np.searchsorted(ids, todo)
        hit = at < ids.size
        hit[hit] = ids[at[hit]] == todo[hit]
        if hit.any():
            rows = at[hit]
            parts.append((ids[rows], *csr_take(offsets, hashes, rows)))
            todo = todo[~hit]
    return parts, todo


def _joined(parts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSRs of disjoint sorted row ids as one, sorted by row id (each part's values copied
    once, straight to their place)."""
    ids = np.concatenate([p[0] for p in parts])
    order = np.argsort(ids, kind="stable")
    sizes = np.concatenate([np.diff(p[1]) for p in parts])
    offsets = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(sizes[order], out=offsets[1:])
    dest = np.empty(ids.size, dtype=np.int64)
    dest[order] = offsets[:-1]
    values = np.empty(int(offsets[-1]), dtype=parts[0][2].dtype)
    start = 0
    for p_ids, p_offsets, p_values in parts:
        csr_scatter(p_offsets, p_values, dest[start:start + p_ids.size], values)
        start += p_ids.size
    return readonly(ids[order]), readonly(offsets), readonly(values)
