"""Buckets of a report: runs of equal band keys in each segment's sorted band rows, their
size histogram and the largest ones."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.lance_format import BAND_SHIFT
from lance_minhash_sql.core.tuning import BAND_CHUNK_ROWS
from lance_minhash_sql.diagnostics.rows import Rows, take_texts
from lance_minhash_sql.diagnostics.tables import BUCKET_SIZES_SCHEMA, LARGEST_BUCKETS_SCHEMA
from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.index.opened import OpenedIndex

__all__ = ["BucketRuns", "bucket_runs", "largest_table", "sizes_table"]

SAMPLE_TEXT_CHARS = 200


class BucketRuns:
    """Runs of equal keys of sorted band rows, fed chunk by chunk: size histogram and the
    largest runs (ties: smallest key first, in run order)."""

    def __init__(self, top: int):
        self.top = top
        self.hist: dict[int, int] = {}
        self.best: list[tuple[int, int, int, int, int]] = []  # (-size, entry, order, key, doc)
        self.carry: tuple[int, int, int] | None = None  # key, size, first doc
        self.order = 0

    def feed(self, entry: int, keys: np.ndarray, docs: np.ndarray) -> None:
        if keys.size == 0:
            return
        starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))
        sizes = np.diff(np.concatenate((starts, [keys.size])))
        run_keys = keys[starts]
        run_docs = docs[starts]
        if self.carry is not None:
            if int(run_keys[0]) == self.carry[0]:
                sizes[0] += self.carry[1]
                run_docs[0] = self.carry[2]
            else:
                self._finish(entry, np.array([self.carry[1]]), np.array([self.carry[0]], np.uint64),
                             np.array([self.carry[2]], np.uint32))
        self.carry = (int(run_keys[-1]), int(sizes[-1]), int(run_docs[-1]))
        self._finish(entry, sizes[:-1], run_keys[:-1], run_docs[:-1])

    def close(self, entry: int) -> None:
        if self.carry is not None:
            self._finish(entry, np.array([self.carry[1]]), np.array([self.carry[0]], np.uint64),
                         np.array([self.carry[2]], np.uint32))
            self.carry = None

    def _finish(self, entry: int, sizes: np.ndarray, keys: np.ndarray, docs: np.ndarray) -> None:
        if sizes.size == 0:
            return
        u, c = np.unique(sizes, return_counts=True)
        for size, count in zip(u.tolist(), c.tolist()):
            self.hist[size] = self.hist.get(size, 0) + count
        t = min(self.top, sizes.size)
        cut = np.partition(sizes, sizes.size - t)[sizes.size - t]
        pick = np.concatenate((np.flatnonzero(sizes > cut), np.flatnonzero(sizes == cut)))[:max(t, 0)]
        for i in pick.tolist():
            self.best.append((-int(sizes[i]), entry, self.order + i, int(keys[i]), int(docs[i])))
        self.order += sizes.size
        self.best.sort()
        del self.best[self.top:]

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        sizes = np.array(sorted(self.hist), dtype=np.int64)
        return sizes, np.array([self.hist[s] for s in sizes.tolist()], dtype=np.int64)


def bucket_runs(entries: list[SegmentEntry], top: int) -> BucketRuns:
    runs = BucketRuns(top)
    for e, entry in enumerate(entries):
        with entry.lock:
            store = entry.bands
            n = store.num_rows
            full = store.full
            keys_all, docs_all = (store.keys, store.docs) if full else (None, None)
        for s in range(0, n, BAND_CHUNK_ROWS):
            c = min(BAND_CHUNK_ROWS, n - s)
            if full:
                keys, docs = keys_all[s:s + c], docs_all[s:s + c]
            else:
                with entry.lock:
                    keys, docs = entry.files.read_bands(s, c)
            runs.feed(e, keys, docs)
        runs.close(e)
    return runs


def largest_table(opened: OpenedIndex, entries, names, rows: Rows, runs: BucketRuns) -> pa.Table:
    cols: dict[str, list] = {f.name: [] for f in LARGEST_BUCKETS_SCHEMA}
    if not runs.best:
        return pa.Table.from_pydict(cols, schema=LARGEST_BUCKETS_SCHEMA)
    ent = np.array([b[1] for b in runs.best], dtype=np.int32)
    doc = np.array([b[4] for b in runs.best], dtype=np.uint32)
    rowids = np.empty(ent.size, dtype=np.uint64)
    for e in np.unique(ent):
        sel = np.flatnonzero(ent == e)
        udocs, inv = np.unique(doc[sel], return_inverse=True)
        with entries[e].lock:
            slot, rid, _ = entries[e].doc_arrays(udocs)
        rowids[sel] = (rid[udocs.astype(np.int64)] if slot.size == 0 else rid[slot[udocs]])[inv]
    pos, found = rows.locate(rowids)
    live = found & rows.alive[pos]
    texts: dict[int, str | None] = {}
    ids = np.unique(rowids[live])
    if ids.size:
        for rid, text in zip(ids.tolist(), take_texts(opened, ids).to_pylist()):
            texts[rid] = None if text is None else text[:SAMPLE_TEXT_CHARS]
    for (neg, e, _, key, _), rid in zip(runs.best, rowids.tolist()):
        cols["segment"].append(names[e])
        cols["band"].append(key >> BAND_SHIFT)
        cols["band_key"].append(key)
        cols["size"].append(-neg)
        cols["sample_rowid"].append(rid)
        cols["sample_text"].append(texts.get(rid))
    return pa.Table.from_pydict(cols, schema=LARGEST_BUCKETS_SCHEMA)


def sizes_table(runs: BucketRuns) -> pa.Table:
    sizes, counts = runs.histogram()
    return pa.Table.from_arrays([pa.array(sizes, pa.int64()), pa.array(counts, pa.int64())],
                                schema=BUCKET_SIZES_SCHEMA)
