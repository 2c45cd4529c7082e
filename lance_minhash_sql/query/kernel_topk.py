"""The kernels' top-k engine: any number of queries, any segment (local, in memory or on
an object store), compiled scoring.

For each segment, the buckets of the query's band keys are found in the page table and
read (``index/band_reads.py``), the distinct candidates of each query merged
(``kernels/lsh.merge_candidates``), their signatures and row ids read
(``index/doc_reads.py``), deleted and filtered-out rows dropped, and each query's top
``limit`` of the segment scored (``kernels/lsh.score_topk``); the per-segment lists are
merged by the same order (``kernels/lsh.merge_topk``; the rule: ``query/ranking.py``).
The numpy engine of a few queries (``query/probe.py``) gives the same answer.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core.arrays import readonly, sorted_unique
from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.kernels.lsh import bucket_pages, merge_candidates, merge_topk, score_topk
from lance_minhash_sql.query.ranking import rank_order

__all__ = ["kernel_topk"]


def kernel_topk(entries: list[SegmentEntry], qsigs: np.ndarray, qkeys: np.ndarray, limit: int, ok_of,
                checked: bool = True):
    """The kernels' engine: ``(query int64, row id uint64, distance float32, candidates per
    query int64)`` of each query's top ``limit`` over ``entries``, ordered by query then
    ``(distance, row id)``; the same answer as :func:`.probe.probe_topk` (numpy).
    ``checked=False`` skips ``ok_of`` (no deletion, no filter)."""
    nq, num_hashes = qsigs.shape
    cands = [_Candidates(e, qkeys, qsigs, limit, ok_of) for e in entries]
    counts_all = sum((np.diff(c.offsets) for c in cands), np.zeros(nq, np.int64))
    # deletions and the filter: one Lance take over the distinct candidate row ids
    if checked:
        ok_all = ok_of(np.concatenate([c.cand_rowids for c in cands]))
        oks, pos = [], 0
        for c in cands:
            oks.append(readonly(ok_all[pos:pos + c.docs.size]))
            pos += c.docs.size
    else:
        oks = [readonly(np.ones(c.docs.size, dtype=np.bool_)) for c in cands]
    parts = []
    for c, ok in zip(cands, oks):
        counts, rid, mism, _dist = score_topk(qsigs, c.offsets, c.docs, ok, c.doc_slot, c.sigs, c.rowids, limit)
        parts.append((counts, rid, mism, _dist))
    if len(parts) == 1:
        counts, rid, _, dist = parts[0]
        q = np.repeat(np.arange(nq, dtype=np.int64), np.diff(counts))
    else:
        qidx = np.concatenate([np.repeat(np.arange(nq, dtype=np.int64), np.diff(p[0])) for p in parts])
        rids = np.concatenate([p[1] for p in parts])
        mism = np.concatenate([p[2] for p in parts])
        q, rid, dist = merge_topk(nq, qidx, rids, mism, limit, num_hashes)
    return q, rid, dist, counts_all


class _Candidates:
    """One segment's candidates for a batch, with everything the scorer needs.

    On an object store, when the segment's signatures are not all in memory, candidates
    are visited as Lance visits them: by the number of bands they share with the query,
    most first, each step one concurrent read; a query stops once no candidate left can
    beat its ``limit``-th best (a candidate sharing ``m`` of ``b`` bands differs in at
    least ``b - m`` hashes; see ``_visit_by_level``). The candidates never visited could
    not have entered the top ``limit``, so the answer is the same, with a fraction of the
    signature reads.
    """

    __slots__ = ("offsets", "docs", "doc_slot", "rowids", "sigs", "cand_rowids")

    def __init__(self, entry: SegmentEntry, qkeys: np.ndarray, qsigs: np.ndarray, limit: int, ok_of):
        with entry.lock:
            bands = entry.bands
            lo, hi = bucket_pages(bands.page_table, qkeys)
            start, end, kind, page_slot, store_docs, win_docs = entry.buckets(qkeys, lo, hi)
            self.offsets, self.docs, matches = merge_candidates(readonly(start), readonly(end), readonly(kind), page_slot,
                                                                store_docs, bands.page_rows, win_docs)
            if entry.remote and not entry.docs.full and self.docs.size:
                self._visit_by_level(entry, qsigs, matches, limit, ok_of)
            udocs = sorted_unique(self.docs)
            self.doc_slot, self.rowids, self.sigs = entry.doc_arrays(udocs)
        slots = self.docs if self.doc_slot.size == 0 else self.doc_slot[self.docs]
        self.cand_rowids = self.rowids[slots]

    def _visit_by_level(self, entry: SegmentEntry, qsigs: np.ndarray, matches: np.ndarray, limit: int,
                        ok_of) -> None:
        """Keep only the candidates that must be scored (see the class doc).

        Within a level a query reads candidates in row id order, first as many as it lacks
        to fill ``limit``, then more only while one could still enter its top ``limit``:
        a candidate of the level has at least ``bound`` mismatches, so none can once the
        ``limit``-th best has fewer, or exactly ``bound`` and a smaller row id than every
        candidate left (ties go to the smaller row id).
        """
        offsets, docs = self.offsets, self.docs
        nq = offsets.size - 1
        query = np.repeat(np.arange(nq), np.diff(offsets))
        rowid = entry.stored_rowids(docs)  # None when they are not resident: doc order, no tie rule
        num_bands = entry.params.num_bands
        visited = np.zeros(docs.size, dtype=np.bool_)
        good = np.zeros(docs.size, dtype=np.bool_)  # visited, live and passing the filter
        mism = np.zeros(docs.size, dtype=np.int64)
        active = np.ones(nq, dtype=np.bool_)
        for m in sorted_unique(matches)[::-1].tolist():
            bound = num_bands - int(m)  # fewest mismatches a candidate sharing m bands can have
            pending = np.flatnonzero(matches == m)
            if rowid is not None:
                pending = pending[np.lexsort((rowid[pending], query[pending]))]
            while pending.size:
                active &= ~_settled(query, mism, rowid, good, pending, nq, limit, bound)
                pending = pending[active[query[pending]]]
                if pending.size == 0:
                    break
                have = np.bincount(query[good], minlength=nq)
                need = np.where(have < limit, limit - have, pending.size)
                q = query[pending]
                rank = np.arange(pending.size) - np.searchsorted(q, q, side="left")
                take = rank < need[q]
                sel, pending = pending[take], pending[~take]
                slot, rowids, sigs = entry.doc_arrays(sorted_unique(docs[sel]))
                s = docs[sel] if slot.size == 0 else slot[docs[sel]]
                mism[sel] = (sigs[s] != qsigs[query[sel]]).sum(axis=1)
                good[sel] = ok_of(rowids[s])
                visited[sel] = True
            if not active.any():
                break
        keep = np.flatnonzero(visited)
        self.docs = docs[keep]
        self.offsets = np.concatenate(([0], np.cumsum(np.bincount(query[keep], minlength=nq)))).astype(np.int64)


def _settled(query, mism, rowid, good, pending, nq: int, limit: int, bound: int) -> np.ndarray:
    """``bool[nq]``: queries none of whose ``pending`` candidates (sorted by query, then row
    id) can enter the top ``limit`` of their ``good`` ones (see ``_visit_by_level``)."""
    out = np.zeros(nq, dtype=np.bool_)
    g = np.flatnonzero(good)
    if g.size < limit:
        return out
    rid = rowid[g] if rowid is not None else np.zeros(g.size, dtype=np.uint64)
    order = g[rank_order(query[g], mism[g], rid)]
    q = query[order]
    counts = np.bincount(q, minlength=nq)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    full = np.flatnonzero(counts >= limit)
    kth = order[first[full] + limit - 1]
    below = mism[kth] < bound
    if rowid is not None:
        qp = query[pending]
        at = np.searchsorted(qp, full)  # each full query's first pending candidate (smallest row id)
        has = at < qp.size
        has[has] = qp[at[has]] == full[has]
        later = np.ones(full.size, dtype=np.bool_)
        later[has] = rowid[pending[at[has]]] > rowid[kth[has]]
        below |= (mism[kth] == bound) & later
    out[full] = below
    return out
