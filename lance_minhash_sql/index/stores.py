"""Per-segment stores of band pages and docs (row ids and signatures), as the search
kernels read them; grown as queries need pages and docs, or filled whole."""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.lance_format import BAND_ROW_BYTES
from lance_minhash_sql.core.tuning import FIRST_STORE_DOCS, FIRST_STORE_PAGES

__all__ = ["BandStore", "DocStore", "runs"]


def runs(idx: np.ndarray, gap: int = 1) -> list[tuple[int, int]]:
    """Sorted indices → runs ``(first, count)``, bridging holes of fewer than ``gap`` indices."""
    if idx.size == 0:
        return []
    cut = np.flatnonzero(np.diff(idx) > gap) + 1
    firsts = np.concatenate(([0], cut))
    lasts = np.concatenate((cut, [idx.size]))
    return [(int(idx[a]), int(idx[b - 1] - idx[a] + 1)) for a, b in zip(firsts, lasts)]


class BandStore:
    """Band pages of one segment in a store: page ``p`` at rows ``[slot[p] * page_rows, ...)``."""

    def __init__(self, page_table: np.ndarray, page_rows: int, num_rows: int):
        self.page_table = readonly(np.ascontiguousarray(page_table, dtype=np.uint64))
        self.page_rows = int(page_rows)
        self.num_rows = int(num_rows)
        self.num_pages = int(page_table.size)
        self.page_slot = np.full(self.num_pages, -1, dtype=np.int32)
        self.keys = np.empty(0, dtype=np.uint64)
        self.docs = np.empty(0, dtype=np.uint32)
        self.used = 0  # store slots filled
        self.full = False

    @property
    def nbytes(self) -> int:
        return self.page_table.nbytes + self.page_slot.nbytes + self.keys.nbytes + self.docs.nbytes

    def file_bytes(self) -> int:
        return self.num_rows * BAND_ROW_BYTES

    def missing(self, need: np.ndarray) -> np.ndarray:
        return np.flatnonzero(need & (self.page_slot < 0))

    def grow_bytes(self, new_pages: int) -> int:
        """Extra bytes the store needs to hold ``new_pages`` more pages."""
        cap = self.keys.size // max(self.page_rows, 1)
        want = self.used + new_pages
        if want <= cap:
            return 0
        new_cap = max(FIRST_STORE_PAGES, cap * 2, want)
        new_cap = min(new_cap, self.num_pages)
        return (new_cap - cap) * self.page_rows * BAND_ROW_BYTES

    def ensure_capacity(self, new_pages: int) -> None:
        """Grow the store's arrays to hold ``new_pages`` more pages; the caller has reserved
        :meth:`grow_bytes` of them in the segment cache first."""
        extra = self.grow_bytes(new_pages)
        if extra:
            cap = self.keys.size // self.page_rows + extra // (self.page_rows * BAND_ROW_BYTES)
            keys = np.empty(cap * self.page_rows, dtype=np.uint64)
            docs = np.empty(cap * self.page_rows, dtype=np.uint32)
            n = self.used * self.page_rows
            keys[:n] = self.keys[:n]
            docs[:n] = self.docs[:n]
            self.keys, self.docs = keys, docs

    def add_pages(self, first: int, count: int, keys: np.ndarray, docs: np.ndarray) -> None:
        """Store pages ``first .. first + count - 1`` (their rows, in order) not yet stored."""
        new = int((self.page_slot[first:first + count] < 0).sum())
        self.ensure_capacity(new)
        pr = self.page_rows
        for i in range(count):
            p = first + i
            if self.page_slot[p] >= 0:
                continue
            rows = min(pr, self.num_rows - p * pr)
            src = slice(i * pr, i * pr + rows)
            dst = self.used * pr
            self.keys[dst:dst + rows] = keys[src]
            self.docs[dst:dst + rows] = docs[src]
            self.page_slot[p] = self.used
            self.used += 1

    def set_full(self, keys: np.ndarray, docs: np.ndarray) -> None:
        self.keys, self.docs = keys, docs
        self.page_slot = np.arange(self.num_pages, dtype=np.int32)
        self.used = self.num_pages
        self.full = True

    def arrays(self):
        return (readonly(self.page_slot), readonly(self.keys), readonly(self.docs))

    def copy_pages(self, need: np.ndarray) -> "BandStore":
        """A new store holding the already-loaded pages among ``need``."""
        out = BandStore(self.page_table, self.page_rows, self.num_rows)
        have = np.flatnonzero(need & (self.page_slot >= 0))
        for first, count in runs(have):
            for p in range(first, first + count):
                s = int(self.page_slot[p]) * self.page_rows
                rows = min(self.page_rows, self.num_rows - p * self.page_rows)
                out.add_pages(p, 1, self.keys[s:s + rows], self.docs[s:s + rows])
        return out


class DocStore:
    """Row ids and signatures of one segment's docs in a store addressed by ``doc_slot``.

    ``doc_slot`` is empty once the store is full (slot = doc id).
    """

    def __init__(self, num_docs: int, num_hashes: int):
        self.num_docs = int(num_docs)
        self.k = int(num_hashes)
        self.doc_slot = np.empty(0, dtype=np.int32)
        self.rowids = np.empty(0, dtype=np.uint64)
        self.sigs = np.empty((0, self.k), dtype=np.uint16)
        self.used = 0
        self.full = False
        # every doc's stored row id, kept for object stores (one read per segment): the
        # signatures of candidates are then plain byte ranges
        self.all_rowids: np.ndarray | None = None

    @property
    def row_bytes(self) -> int:
        return 8 + 2 * self.k

    @property
    def nbytes(self) -> int:
        extra = 0 if self.all_rowids is None else self.all_rowids.nbytes
        return self.doc_slot.nbytes + self.rowids.nbytes + self.sigs.nbytes + extra

    def file_bytes(self) -> int:
        return self.num_docs * self.row_bytes

    def missing(self, docs: np.ndarray) -> np.ndarray:
        """The (sorted, unique) ``docs`` not in the store."""
        if self.full:
            return docs[:0]
        if self.doc_slot.size == 0:
            return docs
        return docs[self.doc_slot[docs] < 0]

    def grow_bytes(self, new_docs: int) -> int:
        extra = 0
        if not self.full and self.doc_slot.size == 0 and self.num_docs:
            extra += self.num_docs * 4
        cap = self.rowids.size
        want = self.used + new_docs
        if want > cap:
            new_cap = min(max(FIRST_STORE_DOCS, cap * 2, want), self.num_docs)
            extra += (new_cap - cap) * self.row_bytes
        return extra

    def ensure_capacity(self, new_docs: int) -> None:
        """Grow the store (and allocate ``doc_slot``) as :meth:`grow_bytes` accounts for."""
        if self.doc_slot.size == 0:
            self.doc_slot = np.full(self.num_docs, -1, dtype=np.int32)
        cap = self.rowids.size
        want = self.used + new_docs
        if want > cap:
            new_cap = min(max(FIRST_STORE_DOCS, cap * 2, want), self.num_docs)
            r = np.empty(new_cap, dtype=np.uint64)
            s = np.empty((new_cap, self.k), dtype=np.uint16)
            r[:self.used] = self.rowids[:self.used]
            s[:self.used] = self.sigs[:self.used]
            self.rowids, self.sigs = r, s

    def add_docs(self, docs: np.ndarray, rowids: np.ndarray, sigs: np.ndarray) -> None:
        self.append(docs, rowids)[...] = sigs
        self.commit(docs)

    def append(self, docs: np.ndarray, rowids: np.ndarray) -> np.ndarray:
        """Add sorted unique ``docs`` (none in the store yet) with their ``rowids``; returns the
        ``[docs.size, k]`` rows of the store their signatures go into. The docs become
        visible (``doc_slot``) only through :meth:`commit`, once those rows are written."""
        self.ensure_capacity(docs.size)
        end = self.used + docs.size
        self.rowids[self.used:end] = rowids
        return self.sigs[self.used:end]

    def commit(self, docs: np.ndarray) -> None:
        """Make the docs of the last :meth:`append` visible."""
        end = self.used + docs.size
        self.doc_slot[docs] = np.arange(self.used, end, dtype=np.int32)
        self.used = end

    def set_full(self, rowids: np.ndarray, sigs: np.ndarray) -> None:
        self.rowids, self.sigs = rowids, sigs
        self.all_rowids = None
        self.doc_slot = np.empty(0, dtype=np.int32)
        self.used = self.num_docs
        self.full = True

    def arrays(self):
        return (readonly(self.doc_slot), readonly(self.rowids), readonly(self.sigs))

    def copy_docs(self, docs: np.ndarray) -> "DocStore":
        out = DocStore(self.num_docs, self.k)
        have = docs if self.full else (docs[self.doc_slot[docs] >= 0] if self.doc_slot.size else docs[:0])
        if have.size:
            slots = have.astype(np.int64) if self.full else self.doc_slot[have]
            out.add_docs(have, self.rowids[slots], self.sigs[slots])
        return out
