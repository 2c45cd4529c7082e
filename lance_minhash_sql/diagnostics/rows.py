"""The rows a report reads: every run's live rows by row id, their stored signatures, and
texts by row id; percentiles of counted values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.index.opened import OpenedIndex
from lance_minhash_sql.io.takes import take_rows

__all__ = ["index_entries", "entry_rowids", "Rows", "index_rows", "signatures_of",
           "take_texts"]


def index_entries(opened: OpenedIndex) -> tuple[list[SegmentEntry], list[str]]:
    entries = opened.segment_entries()
    names = [info.uuid for info in opened.segments]
    flat = opened.unindexed_entry()
    if flat is not None:
        entries.append(flat)
        names.append("unindexed")
    return entries, names


def entry_rowids(entry: SegmentEntry) -> np.ndarray:
    with entry.lock:
        if entry.docs.full:
            return np.asarray(entry.docs.rowids, dtype=np.uint64)
        return entry.files.read_rowids().astype(np.uint64, copy=False)


@dataclass
class Rows:
    """Every row the index holds: row ids sorted, with their run and doc; live flags per run."""

    rowids: np.ndarray  # uint64, sorted
    entry: np.ndarray  # int32
    doc: np.ndarray  # uint32
    alive: np.ndarray  # bool, per sorted row
    alive_by_entry: list[np.ndarray | None]  # per run, by doc (None: all live)

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(position, found)`` of row ids in the sorted table."""
        pos = np.minimum(np.searchsorted(self.rowids, ids), max(self.rowids.size - 1, 0))
        found = (self.rowids[pos] == ids) if self.rowids.size else np.zeros(ids.size, bool)
        return pos, found


def index_rows(opened: OpenedIndex, entries: list[SegmentEntry]) -> Rows:
    ids, ent, docs, alive_by_entry = [], [], [], []
    for e, entry in enumerate(entries):
        rid = entry_rowids(entry)
        live = None if opened.liveness.trivial else opened.liveness.alive(rid)
        alive_by_entry.append(live)
        ids.append(rid)
        ent.append(np.full(rid.size, e, dtype=np.int32))
        docs.append(np.arange(rid.size, dtype=np.uint32))
    rowids = np.concatenate(ids) if ids else np.empty(0, np.uint64)
    order = np.argsort(rowids, kind="stable")
    entry = np.concatenate(ent)[order]
    doc = np.concatenate(docs)[order]
    alive = np.ones(rowids.size, dtype=bool)
    for e, live in enumerate(alive_by_entry):
        if live is not None:
            sel = entry == e
            alive[sel] = live[doc[sel]]
    return Rows(rowids[order], entry, doc, alive, alive_by_entry)


def signatures_of(entries: list[SegmentEntry], entry: np.ndarray, doc: np.ndarray, k: int) -> np.ndarray:
    """``uint16[n, k]`` stored signatures of ``(run, doc)`` pairs."""
    out = np.empty((entry.size, k), dtype=np.uint16)
    for e in np.unique(entry):
        sel = np.flatnonzero(entry == e)
        udocs, inv = np.unique(doc[sel], return_inverse=True)
        with entries[e].lock:
            slot, _, sigs = entries[e].doc_arrays(udocs.astype(np.uint32))
        rows = udocs.astype(np.int64) if slot.size == 0 else slot[udocs]
        out[sel] = sigs[rows][inv]
    return out


def take_texts(opened: OpenedIndex, ids: np.ndarray) -> pa.Array:
    """Texts of live row ids (ascending), in that order."""
    t = take_rows(opened.ds, ids, [opened.column, "_rowid"], "the report", opened.uri)
    return t.column(opened.column).combine_chunks()
