"""What the full self-join would do, counted on the sampled rows' own buckets: the work
that :mod:`.costs` prices (``docs/estimate.md``, *What the full run would cost*).

The self-join reads every band row, keeps the buckets of two rows or more, reads their
rows' signatures and visits every pair of rows of each such bucket (a pair is reported
from the first band it shares, :mod:`lance_minhash_sql.kernels.bucket_pairs`), and so its work
is sums over the rows' buckets. For a row ``x`` with ``m_b`` rows in its bucket of band
``b``:

* the *candidate band rows* are ``sum_x #{b : m_b >= 2}``;
* the *visits* are ``sum_b sum_buckets m (m - 1) / 2 = 1/2 sum_x sum_b (m_b - 1)``: a
  bucket of ``m`` rows is counted ``m`` times, once from each of its rows, each time
  ``(m - 1) / 2``;
* the *rows with a candidate* (``m_b >= 2`` in some band) are what one pool of all the
  candidates holds.

Each is ``N`` times the mean over uniformly sampled rows of that row's term (``1/2 N``
for visits): unbiased, and a bucket of ``m`` rows is found by a sampled row with a
probability that grows with ``m``, as its share of the visits does.

Under a budget too small for one pool of all the candidates, the self-join verifies
shards in groups and drops, before reading it, a bucket whose rows were all in one
bucket of a band verified in an earlier group (the pairs' labels,
:mod:`lance_minhash_sql.kernels.prune`). The *kept* counts leave out a row's bucket of
band ``b`` whose rows all lie in its bucket of band ``b - 1``: the buckets the labels
drop once band ``b - 1`` was verified in a group before band ``b``'s.

**Bucket sizes.** A visit costs more or less by the size of its bucket (a bucket of two
rows is one visit beside its fixed costs; a large one streams its rows past each other):
the visits are also counted per class of bucket size
(:data:`~lance_minhash_sql.core.tuning.BUCKET_CLASSES`): ``1/2 sum_x sum_{b: m_b in c}
(m_b - 1)`` for class ``c``, each unbiased as above. The distinct buckets the sampled rows
found (their keys and rows) are what :func:`.calibration.calibrate` times each class on.

A row's buckets are those its own search reads (the same page-table search, in the band
file's memory map where it has one: :meth:`lance_minhash_sql.index.entries.SegmentEntry.
mapped_buckets`, else :meth:`~lance_minhash_sql.index.entries.SegmentEntry.buckets`), over
every segment and the unindexed rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.tuning import BUCKET_CLASSES
from lance_minhash_sql.index.opened import OpenedIndex
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.kernels.lsh import bucket_pages

__all__ = ["Loads", "sampled_loads", "size_class"]


@dataclass(frozen=True)
class Loads:
    """Per sampled row (float arrays): the bands in which its bucket holds another row
    (``bands``) and those not contained in its bucket of the band before (``kept_bands``);
    ``sum_b (m_b - 1)`` over all its buckets (``visits``) and over the kept ones
    (``kept_visits``); the same two sums per class of bucket size (``class_visits``,
    ``kept_class_visits``: ``[rows, len(BUCKET_CLASSES)]``). And the distinct buckets of
    two rows or more found: their band keys (``bucket_keys``, ascending) and global docs
    (``bucket_docs``, ascending, the self-join's numbering: :class:`~lance_minhash_sql.
    selfjoin.shards.Plan`'s), and whether each is kept (``bucket_kept``: not within its
    rows' bucket of the band before)."""

    bands: np.ndarray
    kept_bands: np.ndarray
    visits: np.ndarray
    kept_visits: np.ndarray
    class_visits: np.ndarray
    kept_class_visits: np.ndarray
    bucket_keys: np.ndarray
    bucket_docs: list
    bucket_kept: np.ndarray


PER_ROW = ("bands", "kept_bands", "visits", "kept_visits", "class_visits", "kept_class_visits")


def size_class(m):
    """The class of buckets of ``m`` rows (``m >= 2``): the index of the last of
    :data:`BUCKET_CLASSES` at most ``m``."""
    return np.searchsorted(np.asarray(BUCKET_CLASSES), m, side="right") - 1


def _empty(n: int) -> Loads:
    c = len(BUCKET_CLASSES)
    return Loads(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros((n, c)), np.zeros((n, c)),
                 np.empty(0, np.uint64), [], np.empty(0, np.bool_))


def _bucket_docs(start, end, kind, page_slot, store_docs, page_rows: int, win_docs, offset: int) -> np.ndarray:
    """The global docs of one bucket (ascending) as :func:`~lance_minhash_sql.kernels.lsh.merge_candidates` reads it."""
    rows = np.arange(start, end, dtype=np.int64)
    if kind == 1:
        docs = win_docs[rows]
    else:
        page = rows // page_rows
        docs = store_docs[page_slot[page].astype(np.int64) * page_rows + (rows - page * page_rows)]
    return docs.astype(np.int64) + offset


def sampled_loads(opened: OpenedIndex, texts: pa.Array, among: np.ndarray | None = None) -> Loads:
    """The :class:`Loads` of the rows whose texts are ``texts`` (rows of the index);
    ``among``: a mask of the rows that may share a bucket (the others' loads are 0, and
    their buckets are not looked up)."""
    n = len(texts)
    if among is not None:
        full = _empty(n)
        pick = np.flatnonzero(among)
        if pick.size == 0:
            return full
        part = sampled_loads(opened, texts.take(pa.array(pick)))
        for name in PER_ROW:
            getattr(full, name)[pick] = getattr(part, name)
        return Loads(*(getattr(full, name) for name in PER_ROW), part.bucket_keys, part.bucket_docs, part.bucket_kept)
    signer = signer_for(opened.params)
    sigs, has = signer.sign(texts)
    keys = np.ascontiguousarray(signer.band_keys(sigs)[has])
    rows = np.flatnonzero(has)
    nb = keys.shape[1]
    found = []  # per entry: its buckets' bounds and the arrays they index
    offset = 0
    for entry in opened.search_view().entries:
        with entry.lock:
            lo, hi = bucket_pages(entry.bands.page_table, keys)
            got = entry.mapped_buckets(keys, lo, hi)
            start, end, kind, page_slot, store_docs, win_docs = entry.buckets(keys, lo, hi) if got is None else got
            found.append((start, end, kind, page_slot, store_docs, entry.bands.page_rows, win_docs, offset))
        offset += entry.docs.num_docs
    sizes = sum((f[1] - f[0] for f in found), np.zeros(keys.shape, dtype=np.int64))
    # each (row, band) bucket of two rows or more: its docs, over every entry
    buckets: list[list[list[np.ndarray]]] = [[[] for _ in range(nb)] for _ in range(rows.size)]
    for start, end, kind, page_slot, store_docs, page_rows, win_docs, offset in found:
        for i, b in zip(*np.nonzero((sizes >= 2) & (end > start))):
            buckets[i][b].append(_bucket_docs(int(start[i, b]), int(end[i, b]), int(kind[i, b]), page_slot,
                                              store_docs, page_rows, win_docs, offset))
    out = _empty(n)
    found_keys: dict[int, tuple[np.ndarray, bool]] = {}
    for i, row in enumerate(rows.tolist()):
        before = None
        for b in range(nb):
            parts = buckets[i][b]
            docs = np.concatenate(parts) if len(parts) > 1 else (parts[0] if parts else None)
            if docs is not None and docs.size >= 2:
                others = docs.size - 1
                c = size_class(docs.size)
                out.bands[row] += 1
                out.visits[row] += others
                out.class_visits[row, c] += others
                kept = before is None or before.size < docs.size or not _within(docs, before)
                if kept:
                    out.kept_bands[row] += 1
                    out.kept_visits[row] += others
                    out.kept_class_visits[row, c] += others
                found_keys[int(keys[i, b])] = (docs, kept)
            before = docs
    order = sorted(found_keys)
    return Loads(*(getattr(out, name) for name in PER_ROW), np.array(order, dtype=np.uint64),
                 [found_keys[k][0].astype(np.uint32) for k in order],
                 np.array([found_keys[k][1] for k in order], dtype=np.bool_))


def _within(docs: np.ndarray, outer: np.ndarray) -> bool:
    """Are the ascending ``docs`` all in the ascending ``outer``?"""
    at = np.searchsorted(outer, docs)
    return bool((at < outer.size).all() and (outer[np.minimum(at, outer.size - 1)] == docs).all())
