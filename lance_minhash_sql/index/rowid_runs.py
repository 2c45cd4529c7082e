"""A segment's row ids as runs of consecutive ids: ``(first doc, first row id)`` per run.

A segment numbers its docs in scan order, so its stored row ids (row addresses
``fragment << 32 | offset``, or stable row ids) go up by one from doc to doc within a
fragment, except where rows were deleted before the build. A fresh dataset is one run per
fragment (16 bytes each) instead of 8 bytes a row: the self-join
under a memory budget (:mod:`..selfjoin.steps`) looks its candidates' row ids up here instead of
holding every doc's. Built once per segment with one sequential read of the ``_rowid``
column in blocks, and kept while the segment's entry is; a segment with more than one
run per :data:`MAX_DOCS_PER_RUN` docs gets none (its row ids are read as before).

>>> runs = RowidRuns(np.array([0, 3], np.int64), np.array([10, 1 << 32], np.uint64))
>>> runs.lookup(np.array([0, 2, 3, 5], np.uint32)).tolist()
[10, 12, 4294967296, 4294967298]
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from lance_minhash_sql.core.tuning import MAX_DOCS_PER_RUN, ROWID_BLOCK_ROWS
from lance_minhash_sql.runtime.cache import register_state

__all__ = ["MAX_DOCS_PER_RUN", "ROWID_BLOCK_ROWS", "RowidRuns", "rowid_runs"]


_runs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # entry -> RowidRuns | None
_lock = threading.Lock()
_building = threading.Lock()  # held while runs are built (never while an entry's lock is held)


def _forget_runs() -> None:
    with _lock:
        _runs.clear()


register_state("row id runs of segments", _runs, clear=_forget_runs)


class RowidRuns:
    """Stored row ids of docs as runs: run ``i`` starts at doc ``docs[i]`` with row id
    ``first[i]`` and goes up by one per doc."""

    def __init__(self, docs: np.ndarray, first: np.ndarray):
        self.docs = docs.astype(np.int64)
        self.first = first.astype(np.uint64)

    @property
    def nbytes(self) -> int:
        return self.docs.nbytes + self.first.nbytes

    def lookup(self, docs: np.ndarray) -> np.ndarray:
        """Stored row ids of ``docs``."""
        d = docs.astype(np.int64)
        i = np.searchsorted(self.docs, d, side="right") - 1
        return self.first[i] + (d - self.docs[i]).astype(np.uint64)


def _build(entry) -> RowidRuns | None:
    files = entry.files
    n = files.num_docs
    limit = max(1, n // MAX_DOCS_PER_RUN)
    docs, first = [], []
    prev = None
    count = 0
    for s in range(0, n, ROWID_BLOCK_ROWS):
        with entry.lock:  # a Lance reader: one caller at a time
            ids = files.read_rowids(s, min(ROWID_BLOCK_ROWS, n - s))
        brk = np.flatnonzero(ids[1:] != ids[:-1] + np.uint64(1)) + 1
        if prev is None or ids[0] != prev + np.uint64(1):
            brk = np.concatenate(([0], brk))
        count += brk.size
        if count > limit:
            return None
        docs.append(brk + s)
        first.append(ids[brk])
        prev = ids[-1]
    if not docs:
        return RowidRuns(np.zeros(0, np.int64), np.zeros(0, np.uint64))
    return RowidRuns(np.concatenate(docs), np.concatenate(first))


def rowid_runs(entry) -> RowidRuns | None:
    """The runs of a segment entry with files (built on first use), or None: an in-memory
    entry, or too many runs."""
    if entry.files is None:
        return None
    with _lock:
        if entry in _runs:
            return _runs[entry]
    with _building:  # one build per entry: a second thread asking meanwhile waits for it
        with _lock:
            if entry in _runs:
                return _runs[entry]
        runs = _build(entry)
        with _lock:
            _runs[entry] = runs
    return runs
