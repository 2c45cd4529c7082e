"""LSH bucket lookup, candidate merge and exact top-k scoring, for batches of queries.

A segment's ``bands.lance`` holds ``num_docs * num_bands`` rows ``(band_key, doc_id)``
sorted by ``(band_key, doc_id)``, cut into pages of ``page_rows`` rows; the page table
holds the band key of the last row of each page (``docs/index-format.md``). For a query
band key ``K`` (``docs/search.md``):

* the bucket starts in the first page whose last key is ``>= K`` (``lo``) and ends in the
  first page whose last key is ``> K`` (``hi``; the last page if there is none): pages
  strictly between hold only ``K``;
* inside pages ``lo`` and ``hi`` a binary search finds the first row ``>= K`` and the
  first row ``> K``;
* the candidates of a query are the doc ids of all its buckets, merged, each with the
  number of bands it shares with the query (``matches``);
* a candidate's distance is ``1 - eq / k`` over the full signature (``eq`` equal
  positions of ``k``), in float32 exactly as Lance computes it
  (:func:`..core.lance_format.similarity`, ``docs/signatures.md``);
* the result is the first ``limit`` candidates by ``(distance, row id)``.

Pages live in a *page store*: page ``p`` is at store rows ``[slot[p] * page_rows, ...)``, so a
segment whose bands are fully in memory is the store with ``slot = arange(num_pages)``,
and a cold segment loads only the pages a batch needs. Signatures and row ids live in a
doc store: doc ``d`` at row ``doc_slot[d]``, or ``d`` itself when ``doc_slot`` is empty.

Every kernel takes a whole batch of queries (rows of ``qkeys`` / ``qsigs``), so a table
of 1,000 queries costs one call per segment. Each has a serial and a parallel driver
around one per-query body; the wrappers run the serial one unless the batch is large
(:data:`PARALLEL_MIN_QUERIES`): a parallel launch costs more than small work, and on a
busy 2-core machine an OpenMP barrier waiting for a descheduled thread costs
milliseconds. Distances are monotone
in the number of mismatching positions, so ordering works on integer mismatch counts
and converts to float32 once.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core import lance_format
from lance_minhash_sql.core.tuning import PARALLEL_MIN_QUERIES
from lance_minhash_sql.kernels.config import JIT, jit_twins, njit, numba_loaded, prange
from lance_minhash_sql.kernels.order import order_by_pair, sort_values
from lance_minhash_sql.kernels.similarity import lance_similarity_jit
from lance_minhash_sql.kernels.sort import DIGIT_BITS, radix_sort_run

__all__ = [
    "PARALLEL_MIN_QUERIES",
    "bucket_pages",
    "pages_needed",
    "bucket_rows",
    "window_plan",
    "window_rows",
    "window_indices",
    "merge_candidates",
    "score_topk",
    "merge_topk",
    "sort_bands",
    "band_rows",
    "page_table_of",
    "distance_of",
    "search_kernels_loaded",
]

_U56 = np.uint64(lance_format.BAND_SHIFT)


@njit(**JIT, inline="always")
def distance_of(eq, k):
    """Lance's float32 distance for ``eq`` equal positions of ``k``."""
    return np.float32(1) - lance_similarity_jit(eq, k)


@njit(**JIT, inline="always")
def lower_bound(a, lo, hi, x):
    """First index ``i`` in ``[lo, hi)`` with ``a[i] >= x`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(**JIT, inline="always")
def _upper_bound(a, lo, hi, x):
    """First index ``i`` in ``[lo, hi)`` with ``a[i] > x`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


# --------------------------------------------------------------------------- page lookup


@njit(**JIT, inline="always")
def _pages_one(page_table, keys, lo, hi):
    npages = page_table.size
    for j in range(keys.size):
        key = keys[j]
        a = lower_bound(page_table, np.int64(0), npages, key)
        lo[j] = a
        if a == npages:
            hi[j] = npages - 1
        else:
            b = _upper_bound(page_table, a, npages, key)
            hi[j] = b if b < npages else npages - 1


def _bucket_pages(page_table, qkeys):
    nq, nb = qkeys.shape
    lo = np.empty((nq, nb), dtype=np.int64)
    hi = np.empty((nq, nb), dtype=np.int64)
    for q in prange(nq):
        _pages_one(page_table, qkeys[q], lo[q], hi[q])
    return lo, hi


_bucket_pages_parallel, _bucket_pages_serial = jit_twins(_bucket_pages)


def bucket_pages(page_table, qkeys):
    """``(lo, hi)`` int64[nq, b]: the pages that may hold each query band key's bucket.

    ``lo == num_pages`` means the key is larger than every key of the segment (no bucket).
    """
    if qkeys.shape[0] >= PARALLEL_MIN_QUERIES:
        return _bucket_pages_parallel(page_table, qkeys)
    return _bucket_pages_serial(page_table, qkeys)


@njit(**JIT)
def pages_needed(lo, hi, num_pages):
    """``bool[num_pages]``: pages holding any part of any bucket."""
    need = np.zeros(num_pages, dtype=np.bool_)
    nq, nb = lo.shape
    for q in range(nq):
        for j in range(nb):
            for p in range(lo[q, j], hi[q, j] + 1):
                need[p] = True
    return need


# --------------------------------------------------------------------------- bucket rows


@njit(**JIT, inline="always")
def _rows_one(keys, lo, hi, page_slot, store_keys, page_rows, num_rows, start, end):
    npages = page_slot.size
    for j in range(keys.size):
        start[j] = 0
        end[j] = 0
        a = lo[j]
        if a >= npages:
            continue
        key = keys[j]
        # first row >= key: inside page a
        base = np.int64(page_slot[a]) * page_rows
        rows = min(page_rows, num_rows - a * page_rows)
        i = lower_bound(store_keys, base, base + rows, key)
        if i == base + rows or store_keys[i] != key:
            continue
        s = a * page_rows + (i - base)
        # first row > key: inside page hi (pages between hold only key)
        b = hi[j]
        base_b = np.int64(page_slot[b]) * page_rows
        rows_b = min(page_rows, num_rows - b * page_rows)
        first = i if b == a else base_b
        e = _upper_bound(store_keys, first, base_b + rows_b, key)
        start[j] = s
        end[j] = b * page_rows + (e - base_b)


def _bucket_rows(qkeys, lo, hi, page_slot, store_keys, page_rows, num_rows):
    nq, nb = qkeys.shape
    start = np.empty((nq, nb), dtype=np.int64)
    end = np.empty((nq, nb), dtype=np.int64)
    for q in prange(nq):
        _rows_one(qkeys[q], lo[q], hi[q], page_slot, store_keys, page_rows, num_rows, start[q], end[q])
    return start, end


_bucket_rows_parallel, _bucket_rows_serial = jit_twins(_bucket_rows)


def bucket_rows(qkeys, lo, hi, page_slot, store_keys, page_rows, num_rows):
    """``(start, end)`` int64[nq, b]: global band rows ``[start, end)`` equal to each key.

    Needs pages ``lo .. hi`` of every bucket in the page store.
    """
    if qkeys.shape[0] >= PARALLEL_MIN_QUERIES:
        return _bucket_rows_parallel(qkeys, lo, hi, page_slot, store_keys, page_rows, num_rows)
    return _bucket_rows_serial(qkeys, lo, hi, page_slot, store_keys, page_rows, num_rows)


# --------------------------------------------------------------------------- window probes
#
# A cold bucket need not cost a page read. Band keys are hashes, so inside a page they are
# close to uniform between the previous page's last key and this page's last key: the
# bucket's row is predicted by interpolation (error about sqrt(page_rows) / 2 rows) and a
# window of rows around it is fetched, all windows of a batch in one take. A window is
# trusted only if it proves the bucket's bounds: a row < K before the bucket (or the
# window starts the page, whose predecessor ends < K) and a row > K after it. Anything
# else (a bucket running into the window's edge, keys of two bands sharing the page, a
# bucket spanning pages) falls back to reading the pages.


@njit(**JIT)
def window_plan(qkeys, lo, hi, page_table, page_slot, page_rows, num_rows, width):
    """``(ws, we)`` int64[nq, b]: the window of global band rows to fetch for each bucket
    held by one page not in the page store (``-1``: no window)."""
    nq, nb = qkeys.shape
    npages = page_table.size
    ws = np.empty((nq, nb), dtype=np.int64)
    we = np.empty((nq, nb), dtype=np.int64)
    for q in range(nq):
        for j in range(nb):
            ws[q, j] = -1
            we[q, j] = -1
            a = lo[q, j]
            if a >= npages or hi[q, j] != a or page_slot[a] >= 0:
                continue
            r0 = a * page_rows
            r1 = min(r0 + page_rows, num_rows)
            key = qkeys[q, j]
            kmax = page_table[a]
            kmin = page_table[a - 1] if a > 0 else np.uint64(0)
            band0 = np.uint64(j) << _U56
            if kmin < band0:
                kmin = band0
            frac = 0.0
            if key > kmin and kmax > kmin:
                frac = np.float64(key - kmin) / np.float64(kmax - kmin)
            est = r0 + np.int64(frac * (r1 - r0))
            e = min(r1, max(r0, est - width // 2) + width)
            ws[q, j] = max(r0, e - width)
            we[q, j] = e
    return ws, we


@njit(**JIT)
def window_rows(qkeys, ws, we, rows, win_keys, page_rows, num_rows):
    """Resolve buckets inside fetched windows.

    ``rows`` are the sorted global band rows fetched (every window's rows among them),
    ``win_keys`` their keys. Returns ``(start, end, exact)``: rows ``[start, end)`` of the
    fetched arrays hold the bucket where ``exact``.
    """
    nq, nb = qkeys.shape
    start = np.empty((nq, nb), dtype=np.int64)
    end = np.empty((nq, nb), dtype=np.int64)
    exact = np.empty((nq, nb), dtype=np.bool_)
    for q in range(nq):
        for j in range(nb):
            start[q, j] = 0
            end[q, j] = 0
            exact[q, j] = False
            s = ws[q, j]
            if s < 0:
                continue
            off = lower_bound(rows, np.int64(0), rows.size, s)
            stop = off + (we[q, j] - s)
            key = qkeys[q, j]
            i = lower_bound(win_keys, off, stop, key)
            e = _upper_bound(win_keys, i, stop, key)
            page_start = (s // page_rows) * page_rows
            page_end = min(page_start + page_rows, num_rows)
            start_ok = i > off or s == page_start
            end_ok = e < stop or we[q, j] == page_end
            if start_ok and end_ok:
                start[q, j] = i
                end[q, j] = e
                exact[q, j] = True
    return start, end, exact


@njit(**JIT)
def window_indices(ws, we):
    """Sorted distinct global rows of all windows (``ws >= 0``)."""
    s = ws.ravel()
    e = we.ravel()
    used = 0
    for i in range(s.size):
        if s[i] >= 0:
            used += 1
    sel = np.empty(used, dtype=np.int64)
    used = 0
    for i in range(s.size):
        if s[i] >= 0:
            sel[used] = i
            used += 1
    order = order_by_pair(sel, s, s)  # not np.argsort: see kernels/order.py
    total = 0
    for i in order:
        total += e[i] - s[i]
    out = np.empty(total, dtype=np.int64)
    n = 0
    last = np.int64(-1)  # one past the last row written
    for i in order:
        r = max(s[i], last)
        while r < e[i]:
            out[n] = r
            n += 1
            r += 1
        last = max(last, e[i])
    return out[:n]


# --------------------------------------------------------------------------- candidates


@njit(**JIT, inline="always")
def _raw_offsets(start, end):
    nq, nb = start.shape
    raw = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        t = 0
        for j in range(nb):
            t += end[q, j] - start[q, j]
        raw[q + 1] = raw[q] + t
    return raw


@njit(**JIT, inline="always")
def _gather_one(start, end, kind, page_slot, store_docs, page_rows, win_docs, seg):
    """Doc ids of one query's buckets into ``seg``, sorted; returns the distinct count.

    ``kind[j] == 1``: bucket ``j`` is rows ``[start, end)`` of ``win_docs``; otherwise
    global band rows in the page store.
    """
    w = 0
    for j in range(start.size):
        if kind[j] == 1:
            for r in range(start[j], end[j]):
                seg[w] = win_docs[r]
                w += 1
            continue
        for r in range(start[j], end[j]):
            p = r // page_rows
            seg[w] = store_docs[np.int64(page_slot[p]) * page_rows + (r - p * page_rows)]
            w += 1
    sort_values(seg)
    u = 0
    for i in range(seg.size):
        if i == 0 or seg[i] != seg[i - 1]:
            u += 1
    return u


@njit(**JIT, inline="always")
def _write_one(seg, docs, matches):
    w = -1
    for i in range(seg.size):
        if i == 0 or seg[i] != seg[i - 1]:
            w += 1
            docs[w] = seg[i]
            matches[w] = 0
        matches[w] += 1


@njit(**JIT, inline="always")
def _csr(uniq):
    nq = uniq.size
    offsets = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        offsets[q + 1] = offsets[q] + uniq[q]
    return offsets


def _merge_candidates(start, end, kind, page_slot, store_docs, page_rows, win_docs):
    nq = start.shape[0]
    raw = _raw_offsets(start, end)
    tmp = np.empty(raw[nq], dtype=np.uint32)
    uniq = np.zeros(nq, dtype=np.int64)
    for q in prange(nq):
        uniq[q] = _gather_one(start[q], end[q], kind[q], page_slot, store_docs, page_rows, win_docs,
                              tmp[raw[q]:raw[q + 1]])
    offsets = _csr(uniq)
    docs = np.empty(offsets[nq], dtype=np.uint32)
    matches = np.empty(offsets[nq], dtype=np.int32)
    for q in prange(nq):
        _write_one(tmp[raw[q]:raw[q + 1]], docs[offsets[q]:offsets[q + 1]], matches[offsets[q]:offsets[q + 1]])
    return offsets, docs, matches


_merge_candidates_parallel, _merge_candidates_serial = jit_twins(_merge_candidates)


def merge_candidates(start, end, kind, page_slot, store_docs, page_rows, win_docs):
    """Candidates per query as CSR ``(offsets int64[nq+1], docs uint32, matches int32)``.

    Bucket ``(q, j)`` is global band rows ``[start, end)`` in the page store, or, where
    ``kind[q, j] == 1``, rows ``[start, end)`` of ``win_docs`` (see :func:`window_rows`).
    ``docs`` ascend within a query; ``matches`` counts the bands the doc shares with it.
    """
    if start.shape[0] >= PARALLEL_MIN_QUERIES:
        return _merge_candidates_parallel(start, end, kind, page_slot, store_docs, page_rows, win_docs)
    return _merge_candidates_serial(start, end, kind, page_slot, store_docs, page_rows, win_docs)


# --------------------------------------------------------------------------- top-k


@njit(**JIT, inline="always")
def _select(mism, rid, limit, k):
    """Indices of the first ``limit`` ``(mism, rid)`` pairs, in that order (rids distinct)."""
    n = mism.size
    if n <= limit:
        every = np.empty(n, dtype=np.int64)
        for i in range(n):
            every[i] = i
        return order_by_pair(every, mism, rid)
    # histogram of mismatch counts: c is the mismatch count of the limit-th best
    hist = np.zeros(k + 1, dtype=np.int64)
    for i in range(n):
        hist[mism[i]] += 1
    acc = 0
    c = 0
    while acc + hist[c] < limit:
        acc += hist[c]
        c += 1
    # every row below mismatch count c, and those at c (the smallest row ids are kept)
    sel = np.empty(acc + hist[c], dtype=np.int64)
    w = 0
    for i in range(n):
        if mism[i] <= c:
            sel[w] = i
            w += 1
    return order_by_pair(sel, mism, rid)[:limit]


@njit(**JIT, inline="always")
def _ok_counts(offsets, ok, limit):
    nq = offsets.size - 1
    counts = np.zeros(nq + 1, dtype=np.int64)
    for q in range(nq):
        c = 0
        for i in range(offsets[q], offsets[q + 1]):
            if ok[i]:
                c += 1
        counts[q + 1] = counts[q] + min(c, limit)
    return counts


@njit(**JIT, inline="always")
def _score_one(qsig, lo, hi, docs, ok, doc_slot, store_sigs, store_rowids, limit, out_rid, out_mism, out_dist):
    k = qsig.size
    identity = doc_slot.size == 0
    n = 0
    for i in range(lo, hi):
        if ok[i]:
            n += 1
    mism = np.empty(n, dtype=np.int32)
    rid = np.empty(n, dtype=np.uint64)
    w = 0
    for i in range(lo, hi):
        if not ok[i]:
            continue
        slot = np.int64(docs[i]) if identity else np.int64(doc_slot[docs[i]])
        eq = 0
        for h in range(k):
            if store_sigs[slot, h] == qsig[h]:
                eq += 1
        mism[w] = k - eq
        rid[w] = store_rowids[slot]
        w += 1
    sel = _select(mism, rid, limit, k)
    for t in range(sel.size):
        i = sel[t]
        out_rid[t] = rid[i]
        out_mism[t] = mism[i]
        out_dist[t] = distance_of(k - mism[i], k)


def _score_topk(qsigs, offsets, docs, ok, doc_slot, store_sigs, store_rowids, limit):
    nq = qsigs.shape[0]
    counts = _ok_counts(offsets, ok, limit)
    out_rid = np.empty(counts[nq], dtype=np.uint64)
    out_mism = np.empty(counts[nq], dtype=np.int32)
    out_dist = np.empty(counts[nq], dtype=np.float32)
    for q in prange(nq):
        a, b = counts[q], counts[q + 1]
        _score_one(qsigs[q], offsets[q], offsets[q + 1], docs, ok, doc_slot, store_sigs, store_rowids, limit,
                   out_rid[a:b], out_mism[a:b], out_dist[a:b])
    return counts, out_rid, out_mism, out_dist


_score_topk_parallel, _score_topk_serial = jit_twins(_score_topk)


def search_kernels_loaded() -> bool:
    """True once this process has run a search through these kernels (numba loaded, and
    the scorer compiled or loaded from numba's cache): a search then costs no load."""
    return numba_loaded() and bool(_score_topk_serial.signatures or _score_topk_parallel.signatures)


def score_topk(qsigs, offsets, docs, ok, doc_slot, store_sigs, store_rowids, limit):
    """Top ``limit`` candidates of each query by ``(distance, row id)``.

    ``ok[i]`` false drops candidate ``i`` (deleted, filtered out) *before* the cut.
    Returns CSR ``(counts int64[nq+1], rowids uint64, mismatches int32, distances float32)``.
    """
    if qsigs.shape[0] >= PARALLEL_MIN_QUERIES:
        return _score_topk_parallel(qsigs, offsets, docs, ok, doc_slot, store_sigs, store_rowids, limit)
    return _score_topk_serial(qsigs, offsets, docs, ok, doc_slot, store_sigs, store_rowids, limit)


@njit(**JIT)
def merge_topk(nq, qidx, rid, mism, limit, k):
    """Merge per-segment results (rows ``(query, rid, mism)``) into each query's top ``limit``.

    Returns ``(query int64, rowid uint64, distance float32)`` ordered by query, then
    ``(distance, row id)``.
    """
    n = qidx.size
    counts = np.zeros(nq + 1, dtype=np.int64)
    for i in range(n):
        counts[qidx[i] + 1] += 1
    for q in range(nq):
        counts[q + 1] += counts[q]
    pos = counts[:-1].copy()
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        order[pos[qidx[i]]] = i
        pos[qidx[i]] += 1
    total = 0
    for q in range(nq):
        total += min(limit, counts[q + 1] - counts[q])
    out_q = np.empty(total, dtype=np.int64)
    out_rid = np.empty(total, dtype=np.uint64)
    out_dist = np.empty(total, dtype=np.float32)
    w = 0
    for q in range(nq):
        idx = order[counts[q]:counts[q + 1]]
        sel = _select(mism[idx], rid[idx], limit, k)
        for t in range(sel.size):
            i = idx[sel[t]]
            out_q[w] = q
            out_rid[w] = rid[i]
            out_dist[w] = distance_of(k - mism[i], k)
            w += 1
    return out_q, out_rid, out_dist


# --------------------------------------------------------------------------- small-batch signing


# --------------------------------------------------------------------------- in-memory segments


def sort_bands(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Band rows of an in-memory segment: ``keys`` uint64[n, b] → sorted ``(band_key, doc_id)``.

    The band id is the top byte of every key and the doc ids ascend within each band, so a
    stable sort of the band-major keys on the key alone yields ``(band_key, doc_id)`` order:
    the build's radix sort (``kernels/sort.py``), faster than numpy's stable argsort
    (``docs/performance.md``).
    """
    flat, docs = band_rows(keys)
    radix_sort_run(flat, docs, np.empty_like(flat), np.empty_like(docs), DIGIT_BITS)
    return flat, docs


def band_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``keys`` uint64[n, b] as band-major ``(band_key, doc_id)`` rows, not yet sorted:
    band ``j``'s rows are ``[j * n, (j + 1) * n)``, each band a run that a stable sort on
    the key alone puts in ``(band_key, doc_id)`` order (see :func:`sort_bands`)."""
    n, b = keys.shape
    return np.ascontiguousarray(keys.T).reshape(-1), np.tile(np.arange(n, dtype=np.uint32), b)


def page_table_of(sorted_keys: np.ndarray, page_rows: int) -> np.ndarray:
    """The page table of sorted band keys: the key of the last row of each page."""
    n = sorted_keys.size
    ends = lance_format.page_ends(0, n, page_rows)
    if n % page_rows:
        ends = np.append(ends, n - 1)
    return sorted_keys[ends].astype(np.uint64)
