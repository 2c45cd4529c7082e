"""The clusters' union-find over every doc of an index, held within its share of the budget
(``docs/scale.md``, *The self-join under a memory budget*, components).

``parent`` is one ``int32`` a doc (``int64`` past 2**31 docs; the kernels of
:mod:`lance_minhash_sql.kernels.components`: a union keeps the smaller root, so a root is
its component's smallest doc). It is an ordinary array while it and the candidates' bit
set take at most the budget's ``parent`` part (:class:`lance_minhash_sql.core.budget.Budget`;
:func:`parent_share`); past that it lives in a temporary file
(:class:`lance_minhash_sql.io.file_arrays.FileArray`) and the pages the process touches are
held within its ``parent_pages`` part: every kernel over it is metered in blocks of :data:`BLOCK_BYTES` (the most
Linux maps around one touch of a file mapping), stops before a block past the share, and
resumes once the pages are handed back to the OS (the data stays in the file and the page
cache). The unions, the clusters' pruning (:func:`lance_minhash_sql.kernels.prune.
joined_within`) and the flattening are metered; the sweeps for the members read the file
in spans of the share, each handed back when read. At least :data:`MIN_BLOCKS` blocks are
held, so every link can be done at once (two finds, each ending at a parent at most one
step from its root after enough halving: four blocks).

Used by :func:`.steps.united` and the Ray shuffle's driver
(``extras/shuffle.py``). ``pool.STATS`` counts ``parent_in_file``,
``parent_handbacks`` and ``max_parent_blocks`` (the most blocks resident at once).
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.tuning import FAULT_AROUND_BYTES, MIN_PARENT_BLOCKS as MIN_BLOCKS
from lance_minhash_sql.io.file_arrays import FileArray
from lance_minhash_sql.kernels.components import (METER_SHIFT, METER_USED, clear_meter, collect_linked, count_linked,
                                                  flatten_roots, flatten_within, linked_members, new_marks, new_meter,
                                                  set_marks, union_min, union_within)
from lance_minhash_sql.kernels.prune import drop_joined, joined_within, kept_rows, new_prune_cursor
from lance_minhash_sql.selfjoin.pool import STATS, count

__all__ = ["BLOCK_BYTES", "MIN_BLOCKS", "parent_bytes", "in_file",
           "parent_share", "UnionFind"]

BLOCK_BYTES = FAULT_AROUND_BYTES


def _dtype(total_docs: int) -> np.dtype:
    return np.dtype(np.int32 if total_docs < 2**31 else np.int64)


def parent_bytes(total_docs: int) -> int:
    """The whole union-find's bytes."""
    return total_docs * _dtype(total_docs).itemsize


def in_file(total_docs: int, budget: Budget) -> bool:
    """Is the union-find held in a temporary file within ``budget``: do it and the bit set (a bit a doc)
    take more than the budget's ``parent`` part?"""
    return parent_bytes(total_docs) + (total_docs + 7) // 8 > budget.parent


def parent_share(total_docs: int, budget: Budget) -> int:
    """Bytes of the union-find held in memory within ``budget``: all of it, or once
    in its file (:func:`in_file`) the resident pages of that file, the budget's ``parent_pages``
    part (at least :data:`MIN_BLOCKS` blocks)."""
    if not in_file(total_docs, budget):
        return parent_bytes(total_docs)
    return max(budget.parent_pages, MIN_BLOCKS * BLOCK_BYTES)


class UnionFind:
    """The union-find of ``total_docs`` docs within ``budget``, in :func:`parent_share`
    bytes of it; :meth:`close` removes its file (use it in a ``finally``)."""

    def __init__(self, total_docs: int, budget: Budget):
        dtype = _dtype(total_docs)
        self.total = int(total_docs)
        self.merges = 0
        self.file: FileArray | None = None
        share = parent_share(total_docs, budget)
        if not in_file(total_docs, budget):
            self.parent = np.arange(self.total, dtype=dtype)  # (the plain kernels: no meter)
            return
        block = max(BLOCK_BYTES // dtype.itemsize, 1)
        shift = block.bit_length() - 1
        most = max(MIN_BLOCKS, share // BLOCK_BYTES)
        self.span = most << shift  # ids of a sweep's span: `most` whole blocks
        self.seen = new_marks(-(-self.total >> shift) + 1)
        self.meter = new_meter(shift, most)
        self.file = FileArray(self.total, dtype)
        self.parent = self.file.array
        count("parent_in_file")
        try:
            for lo in range(0, self.total, self.span):
                for at in range(lo, min(lo + self.span, self.total), block):  # (a block of arange at a time)
                    self.parent[at:min(at + block, self.total)] = np.arange(at, min(at + block, self.total),
                                                                             dtype=dtype)
                self._swept()
        except BaseException:
            self.close()
            raise

    @property
    def in_file(self) -> bool:
        return self.file is not None

    def _hand_back(self) -> None:
        """The pages touched back to the OS, the meter cleared."""
        STATS.high("max_parent_blocks", self.meter[METER_USED])
        self.file.hand_back()
        clear_meter(self.seen, self.meter)
        count("parent_handbacks")

    def _swept(self) -> None:
        """After a span of a sweep: its pages handed back."""
        self.meter[METER_USED] = -(-min(self.span, self.total) >> int(self.meter[METER_SHIFT]))  # (the span's blocks, for STATS)
        self._hand_back()

    def union(self, a: np.ndarray, b: np.ndarray) -> int:
        """Merge the components of ``a[i]`` and ``b[i]`` (docs); returns the merges."""
        if self.file is None:
            merges = union_min(self.parent, a, b)
            self.merges += merges
            return merges
        i, merges = 0, 0
        if a.size > 1:
            # links by their larger doc: one side's pages come in order, so fewer hand-backs
            # (any order gives the same components)
            hi = np.maximum(a, b)
            order = np.argsort(hi, kind="stable")
            a, b = hi[order], np.minimum(a, b)[order]
            del hi, order
        while True:
            i, m = union_within(self.parent, a, b, np.int64(i), self.seen, self.meter)
            merges += m
            if i >= a.size:
                break
            self._hand_back()
        self.merges += merges
        return merges

    def prune(self, keys: np.ndarray, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, gids)`` (band rows sorted by key) without the buckets whose docs are
        already one component (:mod:`lance_minhash_sql.kernels.prune`)."""
        if self.merges == 0:
            return keys, gids
        if self.file is None:
            return drop_joined(keys, gids, self.parent)
        keep = np.zeros(keys.size, dtype=np.bool_)
        at = new_prune_cursor()
        while not joined_within(keys, gids, self.parent, keep, at, self.seen, self.meter):
            self._hand_back()
        return kept_rows(keys, gids, keep)

    def members(self, marks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(docs, roots)``: the docs of components of two or more, ascending, and their
        roots (each component's smallest doc), the union-find flattened on the way;
        ``marks`` (a cleared bit set of the docs) is scratch, left cleared."""
        if self.file is None:
            flatten_roots(self.parent)
            docs = linked_members(self.parent, marks)
            return docs, self.parent[docs]
        x = 0
        while True:
            x = flatten_within(self.parent, np.int64(x), self.seen, self.meter)
            if x >= self.total:
                break
            self._hand_back()
        self._hand_back()
        spans = [(lo, min(lo + self.span, self.total)) for lo in range(0, self.total, self.span)]
        n = 0
        for lo, hi in spans:
            n += count_linked(self.parent, marks, np.int64(lo), np.int64(hi))
            self._swept()
        docs = np.empty(n, dtype=np.int64)
        roots = np.empty(n, dtype=self.parent.dtype)
        at = 0
        for lo, hi in spans:
            at = collect_linked(self.parent, marks, np.int64(lo), np.int64(hi), docs, roots, np.int64(at))
            self._swept()
        set_marks(marks, docs, False)
        return docs, roots

    def close(self) -> None:
        """Drop the union-find (and remove its file)."""
        self.parent = None
        if self.file is not None:
            self.file.close()
            self.file = None
