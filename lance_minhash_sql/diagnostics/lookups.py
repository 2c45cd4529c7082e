"""The dry run's searches: each searched row's candidates, and the verification of all of
them or, for a row with many, of a random subset (``docs/estimate.md``, *What a sampled
row costs*).

A row's *candidates* are the live rows sharing a band key with it, as a threshold search
finds them (:func:`lance_minhash_sql.query.engine.topk`): the same buckets, the same
distance ``1 - eq / k`` over the full signatures, the same rows counted
(:meth:`~lance_minhash_sql.index.opened.SearchView.ok_of`). Two things differ, so that a
searched row costs the same whatever the corpus's size:

* **Buckets** of a local segment are searched in its band file's memory map
  (:meth:`~lance_minhash_sql.index.entries.SegmentEntry.mapped_buckets`): a few dozen key
  reads a bucket, where the page store would read each of a sample's scattered pages whole.
* **Verification**: a row with more than
  :data:`lance_minhash_sql.core.tuning.ESTIMATE_VERIFY_ROWS` candidates has a uniformly
  drawn subset of that many verified first. When the subset already holds
  :data:`ENOUGH` neighbours (a component walk's cap less one) under every rule asked
  (``enough``), the row keeps that subset's hits: what the dry run needs of them holds
  (it has a neighbour; a walk reaching it fills its cap from its hits alone) and its
  neighbour count is estimated as ``n h / s`` (``n`` candidates, ``s`` verified, ``h``
  hits), unbiased, with the variance of a hypergeometric draw. Otherwise its other
  candidates are verified too (its hits complete, its count exact).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from lance_minhash_sql.core.arrays import readonly, sorted_unique
from lance_minhash_sql.core.tuning import ESTIMATE_COMPONENT_ROWS
from lance_minhash_sql.index.opened import SearchView
from lance_minhash_sql.kernels.lsh import bucket_pages, merge_candidates, score_topk
from lance_minhash_sql.query.scores import NO_LIMIT

__all__ = ["ENOUGH", "Found", "candidates", "verify_some"]

ENOUGH = ESTIMATE_COMPONENT_ROWS - 1  # hits under every rule that let a row keep a subset's


@dataclass
class Found:
    """The candidates of a batch of searched rows: per entry ``(offsets, docs)`` (CSR by
    row), and per row ``total`` (candidates over every entry)."""

    parts: list[tuple[np.ndarray, np.ndarray]]
    total: np.ndarray


def candidates(view: SearchView, qkeys: np.ndarray) -> Found:
    """The candidates of the rows whose band keys are ``qkeys`` (``uint64[n, b]``) in
    every entry of ``view`` (module doc, *Buckets*)."""
    parts = []
    for entry in view.entries:
        with entry.lock:
            lo, hi = bucket_pages(entry.bands.page_table, qkeys)
            got = entry.mapped_buckets(qkeys, lo, hi)
            if got is None:
                got = entry.buckets(qkeys, lo, hi)
            start, end, kind, page_slot, store_docs, win_docs = got
            offsets, docs, _ = merge_candidates(readonly(start), readonly(end), readonly(kind), page_slot, store_docs,
                                                entry.bands.page_rows, win_docs)
        parts.append((offsets, docs))
    total = sum((np.diff(o) for o, _ in parts), np.zeros(qkeys.shape[0], np.int64))
    return Found(parts, total)


def _score(view: SearchView, qsigs: np.ndarray, found: Found, pick: Callable[[int, np.ndarray], np.ndarray]):
    """``(row, row id, distance)`` of the counted candidates of each entry that ``pick``
    keeps (``pick(entry index, candidate's row) -> bool[...]``), ordered by row."""
    out = []
    nq = qsigs.shape[0]
    for i, (entry, (offsets, docs)) in enumerate(zip(view.entries, found.parts)):
        row = np.repeat(np.arange(nq, dtype=np.int64), np.diff(offsets))
        keep = pick(i, row)
        if not keep.any():
            continue
        docs = docs[keep]
        offsets = np.concatenate(([0], np.cumsum(np.bincount(row[keep], minlength=nq)))).astype(np.int64)
        with entry.lock:
            doc_slot, rowids, sigs = entry.doc_arrays(sorted_unique(docs))
        slots = docs if doc_slot.size == 0 else doc_slot[docs]
        ok = readonly(view.ok_of(rowids[slots]))
        counts, rid, _, dist = score_topk(qsigs, readonly(offsets), readonly(docs), ok, doc_slot, sigs, rowids,
                                          NO_LIMIT)
        out.append((np.repeat(np.arange(nq, dtype=np.int64), np.diff(counts)), rid, dist))
    if not out:
        return np.empty(0, np.int64), np.empty(0, np.uint64), np.empty(0, np.float32)
    q = np.concatenate([p[0] for p in out])
    order = np.argsort(q, kind="stable")
    return q[order], np.concatenate([p[1] for p in out])[order], np.concatenate([p[2] for p in out])[order]


def verify_some(view: SearchView, qsigs: np.ndarray, found: Found, rng: np.random.Generator, cap: int,
                enough: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]):
    """``(row, row id, distance, verified)``: the verified candidates of each row, ordered
    by row, and how many of its candidates were verified (module doc, *Verification*):
    all, or about ``cap`` drawn at random where ``enough(row, row id, distance) ->
    bool[n]`` says that subset's hits suffice."""
    nq = qsigs.shape[0]
    big = found.total > cap
    if not big.any():
        q, rid, dist = _score(view, qsigs, found, lambda i, row: np.ones(row.size, dtype=np.bool_))
        return q, rid, dist, found.total.copy()
    # a uniform subset of each big row's candidates over every entry: each drawn with
    # probability cap / n (a simple random sample given its size)
    at = np.cumsum([0] + [int(o[-1]) for o, _ in found.parts])
    row_all = np.concatenate([np.repeat(np.arange(nq, dtype=np.int64), np.diff(o)) for o, _ in found.parts])
    first_pass = ~big[row_all] | (rng.random(row_all.size) * found.total[row_all] < cap)
    drawn = np.bincount(row_all[first_pass], minlength=nq)
    q, rid, dist = _score(view, qsigs, found, lambda i, row: first_pass[at[i]:at[i + 1]])
    ok = ~big | enough(q, rid, dist)  # every candidate verified, or a subset that suffices
    verified = np.where(ok, drawn, found.total)
    rest = ~ok
    if rest.any():  # the other candidates of the rows whose subset did not suffice
        q2, rid2, dist2 = _score(view, qsigs, found,
                                 lambda i, row: ~first_pass[at[i]:at[i + 1]] & rest[row])
        q = np.concatenate([q, q2])
        order = np.argsort(q, kind="stable")
        q, rid, dist = q[order], np.concatenate([rid, rid2])[order], np.concatenate([dist, dist2])[order]
    return q, rid, dist, verified
