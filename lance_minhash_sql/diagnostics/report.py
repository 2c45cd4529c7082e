"""Diagnostics of a MinHash LSH index: S-curve, empirical candidate rates, buckets, error.

>>> from lance_minhash_sql import report  # doctest: +SKIP
>>> rep = report("corpus.lance", "text", sample=2000)  # doctest: +SKIP
>>> print(rep.format())  # doctest: +SKIP

:func:`report` returns a :class:`Report` of pyarrow tables (``summary``: metric, value,
detail; ``scurve``: one row per similarity bin; ``pairs``: the sampled pairs;
``bucket_sizes``, ``largest_buckets``, ``candidates``). Everything is computed from the
index as stored (signatures.lance, bands.lance, and the signatures of rows in fragments
no segment covers, signed as a search signs them) and one scan of the text column.

**Theory.** With ``k`` hashes in ``b`` bands of ``r`` rows, a pair of Jaccard ``J``
becomes a candidate (shares at least one band key) with probability
``P(J) = 1 - (1 - J**r)**b`` (:func:`..core.banding.lsh_probability`), steepest near
``(1/b)**(1/r)``; the MinHash estimate ``eq / k`` has standard deviation
``sqrt(J (1 - J) / k)`` (it is ``Binomial(k, J) / k`` for an ideal hash family).

**Sampling (what makes the empirical S-curve unbiased).** Pairs found through shared
buckets are candidates by construction, so they cannot measure how often a pair becomes
a candidate. Instead:

1. ``sample`` *query rows* are drawn uniformly, without replacement, from the live rows
   that have a signature (``seed`` fixes the draw);
2. one scan of the column computes, for every row ``o`` and every query row ``q``
   sharing at least one shingle with it, the exact Jaccard of their shingle sets (same
   tokenizer and shingle size as the index; the kernel intersects each row's sorted
   shingle hashes with an inverted index of the query rows' shingles). This is a census
   of *all* pairs ``(q, o)`` with ``J > 0``; pairs with ``J = 0`` share no shingle, and no
   band key either (up to hash collisions), and are left out;
3. the pairs are stratified by exact Jaccard into ``bins`` equal-width bins of ``(0, 1]``;
   each bin keeps a uniform random sample of at most ``sample`` pairs (reservoir
   sampling, :mod:`kernels.report`). Selection depends only on exact Jaccard and the
   random stream, never on band keys;
4. for each kept pair the band keys of both rows are computed from their *stored*
   signatures; the pair is a candidate when any band key is equal. ``P̂(bin)`` =
   candidates / pairs is an unbiased estimate of the mean of ``P(J)`` over the bin's
   pairs (``theoretical_probability``, averaged over the same kept pairs, not taken at
   the bin centre: ``P`` bends within a bin). The binomial standard error
   ``sqrt(P (1 - P) / n)`` uses the theoretical mean; pairs of one query are not quite
   independent, so allow a few standard errors.

Whole-population figures weight each kept pair by its bin's ``population_pairs / pairs``
(inverse inclusion probability): ``recall_at_threshold`` (fraction of pairs with
``J >= threshold`` that are candidates) and ``candidate_precision_at_threshold``
(fraction of candidate pairs with ``J >= threshold``). Query rows are uniform, so every
pair of rows is equally likely to involve one, and these estimate all-pairs ratios.

**Buckets** are runs of equal band keys in each segment's sorted ``bands.lance`` (and in
the sorted band rows of fragments no segment covers); a key present in two segments is
two runs. Sizes count every band row, including rows deleted after the build.
Percentiles use the nearest rank. **Candidates per query** counts the distinct live rows
(other than itself) sharing at least one band key with a query row, over all segments
and the unindexed rows, exactly as a search gathers them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.checks import check_int, check_threshold
from lance_minhash_sql.core.errors import DatasetError, InvalidParameterError
from lance_minhash_sql.core.lance_format import similarity as lance_similarity
from lance_minhash_sql.core.banding import (CANDIDATE_PROBABILITY, false_negative_area, false_positive_area,
                                            lsh_probability, recall_bands, scurve, scurve_threshold)
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.core.tuning import CANDIDATE_ROWS, MAX_CACHED_REPORTS, REPORT_IO_BUFFER, SCAN_READAHEAD
from lance_minhash_sql.diagnostics.buckets import BucketRuns, bucket_runs, largest_table, sizes_table
from lance_minhash_sql.diagnostics.rows import Rows, index_entries, index_rows, signatures_of, take_texts
from lance_minhash_sql.diagnostics.tables import CANDIDATES_SCHEMA, PAIRS_SCHEMA, SCURVE_SCHEMA, SUMMARY_SCHEMA
from lance_minhash_sql.index.opened import OpenedIndex, open_index
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.scan import row_count, scan_text, version_of
from lance_minhash_sql.kernels.lsh import bucket_pages, merge_candidates
from lance_minhash_sql.kernels.report import census_chunk, new_reservoirs
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = [
    "DEFAULT_SAMPLE",
    "DEFAULT_BINS",
    "DEFAULT_TOP_BUCKETS",
    "Report",
    "report",
    "cached_report",
    "largest_buckets",
    "percentile",
    "format_table",
]

DEFAULT_SAMPLE = 2000
DEFAULT_BINS = 20
DEFAULT_TOP_BUCKETS = 10
MAX_SAMPLE = 100_000  # with MAX_BINS: at most 10M reservoir slots (200 MB)
MAX_BINS = 100
MAX_TOP_BUCKETS = 10_000
SIMULATED_DRAWS = 32  # Binomial(k, J) draws per pair for the theoretical error quantiles
PERCENTILES = (50, 90, 99)

# --------------------------------------------------------------------------- validation


# --------------------------------------------------------------------------- percentiles


def percentile(values: np.ndarray, counts: np.ndarray, p: float):
    """Nearest-rank ``p``-th percentile of a distribution given as sorted distinct
    ``values`` and their ``counts`` (``0`` when empty).

    >>> sizes, buckets = np.array([1, 2, 5]), np.array([90, 9, 1])
    >>> [percentile(sizes, buckets, p) for p in (50, 90, 91, 99, 100)]
    [1, 1, 2, 2, 5]
    """
    total = int(counts.sum())
    if total == 0:
        return 0
    rank = max(1, math.ceil(p / 100.0 * total))
    cum = np.cumsum(counts)
    return values[int(np.searchsorted(cum, rank, side="left"))].item()


def values_percentile(values: np.ndarray, p: float) -> float:
    if values.size == 0:
        return float("nan")
    u, c = np.unique(values, return_counts=True)
    return float(percentile(u, c, p))


# --------------------------------------------------------------------------- S-curve sample


@dataclass
class _Sample:
    query_pos: np.ndarray  # positions in Rows of the query rows (ascending)
    query_size: np.ndarray  # shingles per query row
    seen: np.ndarray  # pairs with J > 0 per bin (population)
    pair_bin: np.ndarray
    pair_query: np.ndarray  # index into query_pos
    pair_other: np.ndarray  # row id
    pair_jaccard: np.ndarray
    scanned_rows: int  # live rows with shingles
    missing: int  # sampled pairs whose other row has no stored signature


def _inverted(offsets: np.ndarray, hashes: np.ndarray):
    """``(distinct hashes, CSR offsets, query per posting)`` of the query rows' shingle sets."""
    owner = np.repeat(np.arange(offsets.size - 1, dtype=np.int32), np.diff(offsets))
    order = np.argsort(hashes, kind="stable")
    h, q = hashes[order], owner[order]
    starts = np.concatenate(([0], np.flatnonzero(h[1:] != h[:-1]) + 1)).astype(np.int64)
    return h[starts], np.concatenate((starts, [h.size])).astype(np.int64), q


def _census(opened: OpenedIndex, rows: Rows, sample: int, nbins: int, seed: int, progress: bool) -> _Sample:
    live = np.flatnonzero(rows.alive)
    if live.size < 2:
        raise DatasetError(
            f"the index on {opened.column!r} of {opened.uri!r} holds {live.size} live row(s) with tokens; "
            "a report needs at least 2")
    rng = np.random.default_rng(seed)
    query_pos = np.sort(live[rng.choice(live.size, min(sample, live.size), replace=False)])
    q_rowid = rows.rowids[query_pos]
    signer = signer_for(opened.params)
    q_off, q_hash = signer.shingle_sets(take_texts(opened, q_rowid))
    q_size = np.diff(q_off).astype(np.int64)
    qh, qh_off, qh_q = _inverted(q_off, q_hash)
    seen, res_q, res_o, res_j, state = new_reservoirs(nbins, sample, int(rng.integers(0, 2**63)))
    nq = query_pos.size
    counter = np.zeros(nq, dtype=np.int32)
    touched = np.empty(nq, dtype=np.int32)
    args = (readonly(qh), readonly(qh_off), readonly(qh_q), readonly(q_size), readonly(q_rowid), nbins, counter, touched,
            seen, res_q, res_o, res_j, state)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=row_count(opened.ds), unit="rows", desc="report")
    scanned = 0
    try:
        for rowids, texts in scan_text(opened.ds, opened.column, batch_readahead=SCAN_READAHEAD,
                                       fragment_readahead=1, io_buffer_size=REPORT_IO_BUFFER):
            off, hashes = signer.shingle_sets(texts)
            scanned += census_chunk(readonly(off), readonly(hashes), readonly(rowids.astype(np.uint64, copy=False)), *args)
            if bar is not None:
                bar.update(rowids.size)
    finally:
        if bar is not None:
            bar.close()
    fill = np.minimum(seen, sample)
    pair_bin = np.repeat(np.arange(nbins, dtype=np.int32), fill)
    mask = np.arange(sample)[None, :] < fill[:, None]
    other = res_o[mask]
    _, found = rows.locate(other)
    keep = found
    return _Sample(query_pos, q_size, seen, pair_bin[keep], res_q[mask][keep].astype(np.int64), other[keep],
                   res_j[mask][keep], scanned, int((~found).sum()))


@dataclass
class _Pairs:
    bin: np.ndarray
    query_rowid: np.ndarray
    other_rowid: np.ndarray
    jaccard: np.ndarray
    estimated: np.ndarray
    candidate: np.ndarray


def _judge(entries, rows: Rows, s: _Sample, params: MinHashParams, query_keys: np.ndarray,
           query_sigs: np.ndarray) -> _Pairs:
    """Estimated similarity and candidacy of each sampled pair, from stored signatures."""
    k = params.num_hashes
    pos, _ = rows.locate(s.pair_other)
    other_sigs = signatures_of(entries, rows.entry[pos], rows.doc[pos], k)
    other_keys = signer_for(params).band_keys(other_sigs)
    qs = query_sigs[s.pair_query]
    eq = (qs == other_sigs).sum(axis=1)
    est = lance_similarity(eq, k).astype(np.float64)
    cand = (query_keys[s.pair_query] == other_keys).any(axis=1)
    return _Pairs(s.pair_bin, rows.rowids[s.query_pos][s.pair_query], s.pair_other, s.pair_jaccard, est, cand)


def _scurve(p: _Pairs, seen: np.ndarray, nbins: int, params: MinHashParams) -> pa.Table:
    b, r, k = params.num_bands, params.rows_per_band, params.num_hashes
    theory = scurve(p.jaccard, b, r)
    cols: dict[str, list] = {f.name: [] for f in SCURVE_SCHEMA}
    for i in range(nbins):
        sel = p.bin == i
        n = int(sel.sum())
        j, est, cand, th = p.jaccard[sel], p.estimated[sel], p.candidate[sel], theory[sel]
        mean_th = float(th.mean()) if n else None
        row = {
            "similarity_bin": i, "similarity_lo": i / nbins, "similarity_hi": (i + 1) / nbins,
            "population_pairs": int(seen[i]), "pairs": n, "candidates": int(cand.sum()),
            "mean_jaccard": float(j.mean()) if n else None,
            "empirical_probability": float(cand.mean()) if n else None,
            "theoretical_probability": mean_th,
            "standard_error": math.sqrt(mean_th * (1.0 - mean_th) / n) if n else None,
            "mean_estimated": float(est.mean()) if n else None,
            "estimator_rmse": float(np.sqrt(np.mean((est - j) ** 2))) if n else None,
            "theoretical_rmse": float(np.sqrt(np.mean(j * (1.0 - j) / k))) if n else None,
        }
        for name, value in row.items():
            cols[name].append(value)
    return pa.Table.from_pydict(cols, schema=SCURVE_SCHEMA)


def _weights(p: _Pairs, seen: np.ndarray) -> np.ndarray:
    """Inverse inclusion probability of each sampled pair (its bin's population / sample)."""
    kept = np.bincount(p.bin, minlength=seen.size).astype(np.float64)
    per_bin = np.divide(seen, kept, out=np.zeros(seen.size), where=kept > 0)
    return per_bin[p.bin]


def _error_theory(p: _Pairs, k: int, seed: int) -> tuple[float, float]:
    """Mean and p95 of ``|Binomial(k, J) / k - J|`` over the sampled pairs (simulated)."""
    if p.jaccard.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.binomial(k, np.repeat(p.jaccard, SIMULATED_DRAWS)) / k
    err = np.abs(draws - np.repeat(p.jaccard, SIMULATED_DRAWS))
    return float(err.mean()), float(np.quantile(err, 0.95))


# --------------------------------------------------------------------------- candidates per query


def _candidates(entries, rows: Rows, query_pos: np.ndarray, query_keys: np.ndarray) -> np.ndarray:
    """Distinct live rows (other than itself) sharing a band key with each query row."""
    nq = query_pos.size
    counts = np.zeros(nq, dtype=np.int64)
    own_entry = rows.entry[query_pos]
    keys = readonly(query_keys)
    for e, entry in enumerate(entries):
        alive = rows.alive_by_entry[e]
        with entry.lock:
            lo, hi = bucket_pages(entry.bands.page_table, keys)
            start, end, kind, page_slot, store_docs, win_docs = entry.buckets(keys, lo, hi)
            sizes = (end - start).sum(axis=1)
            q0 = 0
            while q0 < nq:  # batches of queries whose buckets hold at most CANDIDATE_ROWS rows
                cum = np.cumsum(sizes[q0:])
                q1 = q0 + max(1, int(np.searchsorted(cum, CANDIDATE_ROWS, side="right")))
                offsets, docs, _ = merge_candidates(readonly(start[q0:q1]), readonly(end[q0:q1]), readonly(kind[q0:q1]),
                                                    page_slot, store_docs, entry.bands.page_rows, win_docs)
                live = np.ones(docs.size) if alive is None else alive[docs].astype(np.float64)
                owner = np.repeat(np.arange(q1 - q0), np.diff(offsets))
                counts[q0:q1] += np.bincount(owner, weights=live, minlength=q1 - q0).astype(np.int64)
                q0 = q1
        counts -= own_entry == e  # each query row is in its own buckets
    return counts


# --------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class Report:
    """Diagnostics of one column's MinHash LSH index in one dataset version (module doc)."""

    uri: str
    version: int
    column: str
    params: MinHashParams
    threshold: float
    sample: int
    seed: int
    summary: pa.Table  # SUMMARY_SCHEMA
    scurve: pa.Table  # SCURVE_SCHEMA
    pairs: pa.Table  # PAIRS_SCHEMA
    bucket_sizes: pa.Table  # BUCKET_SIZES_SCHEMA
    largest_buckets: pa.Table  # LARGEST_BUCKETS_SCHEMA
    candidates: pa.Table  # CANDIDATES_SCHEMA
    seconds: float

    def metric(self, name: str) -> float:
        """The value of one summary metric."""
        names = self.summary.column("metric").to_pylist()
        if name not in names:
            raise InvalidParameterError(f"metric {name!r} is not in the report; the metrics are {names}")
        return self.summary.column("value")[names.index(name)].as_py()

    def format(self, max_text: int = 60) -> str:
        """The report as plain-text tables (sample texts cut to ``max_text`` characters)."""
        p = self.params
        head = (f"MinHash LSH index report: {self.uri} column {self.column!r} (version {self.version}); "
                f"k={p.num_hashes}, b={p.num_bands}, r={p.rows_per_band}, shingle_size={p.shingle_size}; "
                f"sample={self.sample}, seed={self.seed}; {self.seconds:.2f}s")
        scurve = self.scurve.select(["similarity_lo", "similarity_hi", "population_pairs", "pairs", "candidates",
                                     "empirical_probability", "standard_error", "theoretical_probability",
                                     "estimator_rmse", "theoretical_rmse"])
        largest = self.largest_buckets.drop_columns(["band_key"])
        texts = [None if t is None else (t if len(t) <= max_text else t[:max_text - 1] + "…")
                 for t in largest.column("sample_text").to_pylist()]
        largest = largest.set_column(largest.schema.get_field_index("sample_text"), "sample_text",
                                     pa.array(texts, pa.string()))
        parts = [head,
                 "\n-- Summary", format_table(self.summary),
                 "\n-- S-curve: candidate probability per exact-Jaccard bin (stratified sample of "
                 "(query row, row) pairs; theory = mean of 1-(1-J^r)^b over the same pairs)",
                 format_table(scurve),
                 "\n-- Largest buckets (runs of equal band keys)", format_table(largest)]
        return "\n".join(parts)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.4f}"
    return str(value)


def format_table(table: pa.Table) -> str:
    """A pyarrow table as aligned plain-text columns (numbers right-aligned)."""
    names = table.column_names
    cols = [[_cell(v) for v in table.column(n).to_pylist()] for n in names]
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema]
    widths = [max([len(n)] + [len(c) for c in col]) for n, col in zip(names, cols)]

    def line(cells):
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    out = [line(names), line(["-" * w for w in widths])]
    out += [line([col[i] for col in cols]) for i in range(table.num_rows)]
    return "\n".join(out)


def _summary(params: MinHashParams, t: float, t_given: bool, rows: Rows, opened: OpenedIndex, s: _Sample,
             p: _Pairs, seen: np.ndarray, runs: BucketRuns, cands: np.ndarray, seed: int) -> pa.Table:
    b, r, k = params.num_bands, params.rows_per_band, params.num_hashes
    out: list[tuple[str, float | None, str]] = []

    def add(metric: str, value, detail: str = "") -> None:
        out.append((metric, None if value is None or (isinstance(value, float) and math.isnan(value))
                    else float(value), detail))

    add("num_hashes", k, "k: MinHash values per row")
    add("num_bands", b, "b: bands per signature")
    add("rows_per_band", r, "r = k / b")
    add("shingle_size", params.shingle_size, f"tokenizer {params.tokenizer.base_tokenizer}")
    add("scurve_threshold", scurve_threshold(b, r), "(1/b)^(1/r): where the S-curve rises steepest")
    add("threshold", t, "given" if t_given else "default: the S-curve threshold")
    add("candidate_probability_at_threshold", lsh_probability(t, b, r), "1 - (1 - t^r)^b")
    add("false_positive_area", false_positive_area(t, b, r), "integral of P(s) over s in [0, t]")
    add("false_negative_area", false_negative_area(t, b, r), "integral of 1 - P(s) over s in [t, 1]")
    ob, orr = recall_bands(t, k)
    add("suggested_num_bands", ob, f"fewest bands making a pair at t a candidate with probability >= "
        f"{CANDIDATE_PROBABILITY:g} with k={k}: b={ob}, r={orr}")
    add("segments", len(opened.segments), f"{len(opened.unindexed)} fragment(s) not covered by a segment")
    add("rows", int(rows.alive.sum()), "live rows with a signature")
    add("query_rows", s.query_pos.size, "rows drawn uniformly as queries")
    add("scanned_rows", s.scanned_rows, "live rows with shingles in the column scan")
    add("population_pairs", int(seen.sum()), "(query row, row) pairs with exact Jaccard > 0")
    add("sampled_pairs", p.jaccard.size, "pairs kept by the stratified sample (all bins)")
    if s.missing:
        add("pairs_without_signature", s.missing, "sampled rows with shingles but no stored signature: "
            "the index does not match the column; rebuild it")
    w = _weights(p, seen)
    above = p.jaccard >= t
    theory = scurve(p.jaccard, b, r)
    if above.any():
        add("recall_at_threshold", np.sum(w[above] * p.candidate[above]) / np.sum(w[above]),
            f"candidates among pairs with J >= t; theory {np.sum(w[above] * theory[above]) / np.sum(w[above]):.4f}")
    cw = w * p.candidate
    if cw.sum() > 0:
        add("candidate_precision_at_threshold", np.sum(cw[above]) / np.sum(cw),
            "pairs with J >= t among candidate pairs (J > 0)")
    sizes, counts = runs.histogram()
    add("buckets", counts.sum(), "runs of equal band keys in the sorted band rows")
    multi = sizes >= 2
    add("multi_row_buckets", counts[multi].sum(), "buckets of two rows or more")
    for q in PERCENTILES:
        add(f"bucket_size_p{q}", percentile(sizes, counts, q), "all buckets, nearest rank")
    add("bucket_size_max", sizes[-1] if sizes.size else 0, "the largest bucket")
    for q in PERCENTILES:
        add(f"multi_row_bucket_size_p{q}", percentile(sizes[multi], counts[multi], q), "buckets of >= 2 rows")
    add("candidates_per_query_mean", cands.mean() if cands.size else None, "distinct live rows sharing a band")
    for q in PERCENTILES:
        add(f"candidates_per_query_p{q}", values_percentile(cands, q), "nearest rank")
    add("candidates_per_query_max", cands.max() if cands.size else None, "")
    add("queries_without_candidates", int((cands == 0).sum()) if cands.size else None, "")
    err = np.abs(p.estimated - p.jaccard)
    th_mean, th_p95 = _error_theory(p, k, seed)
    add("estimator_mean_abs_error", err.mean() if err.size else None,
        f"|eq/k - J| over sampled pairs; theory {th_mean:.4f} (Binomial(k, J)/k)")
    add("estimator_p95_abs_error", values_percentile(err, 95) if err.size else None, f"theory {th_p95:.4f}")
    rmse_th = float(np.sqrt(np.mean(p.jaccard * (1 - p.jaccard) / k))) if err.size else float("nan")
    add("estimator_rmse", np.sqrt(np.mean(err ** 2)) if err.size else None,
        f"theory sqrt(mean J(1-J)/k) = {rmse_th:.4f}")
    add("estimator_theoretical_rmse", rmse_th, "sqrt(mean J(1-J)/k) over the sampled pairs")
    add("estimator_theoretical_mean_abs_error", th_mean, f"{SIMULATED_DRAWS} Binomial(k, J) draws per pair")
    add("estimator_theoretical_p95_abs_error", th_p95, f"{SIMULATED_DRAWS} Binomial(k, J) draws per pair")
    return pa.Table.from_pylist([dict(zip(("metric", "value", "detail"), row)) for row in out],
                                schema=SUMMARY_SCHEMA)


def report(dataset, column: str, *, sample: int = DEFAULT_SAMPLE, threshold: float | None = None,
           seed: int = 0, bins: int = DEFAULT_BINS, top_buckets: int = DEFAULT_TOP_BUCKETS,
           progress: bool = False, storage_options: dict | None = None) -> Report:
    """Diagnostics of ``column``'s MinHash LSH index (see the module doc).

    ``sample``: query rows drawn, and the most pairs kept per similarity bin;
    ``threshold``: where false-positive / false-negative areas, recall and precision are
    taken (default: the index's S-curve threshold); ``seed`` fixes every random draw;
    ``bins``: equal-width similarity bins of ``(0, 1]``; ``top_buckets``: largest buckets
    listed. Raises :class:`IndexNotFoundError` without an index.
    """
    sample = check_int("sample", sample, f"e.g. {DEFAULT_SAMPLE}", 1, MAX_SAMPLE)
    seed = check_int("seed", seed, "e.g. 0", 0, 2**63 - 1)
    nbins = check_int("bins", bins, f"e.g. {DEFAULT_BINS}", 1, MAX_BINS)
    top = check_int("top_buckets", top_buckets, f"e.g. {DEFAULT_TOP_BUCKETS}", 1, MAX_TOP_BUCKETS)
    t_given = None if threshold is None else check_threshold(threshold)
    t0 = time.perf_counter()
    opened = open_index(dataset, column, storage_options)
    params = opened.params
    t = t_given if t_given is not None else params.threshold
    entries, names = index_entries(opened)
    rows = index_rows(opened, entries)
    s = _census(opened, rows, sample, nbins, seed, progress)
    query_sigs = signatures_of(entries, rows.entry[s.query_pos], rows.doc[s.query_pos], params.num_hashes)
    query_keys = signer_for(params).band_keys(query_sigs)
    p = _judge(entries, rows, s, params, query_keys, query_sigs)
    cands = _candidates(entries, rows, s.query_pos, query_keys)
    runs = bucket_runs(entries, top)
    summary = _summary(params, t, t_given is not None, rows, opened, s, p, s.seen, runs, cands, seed)
    pairs_table = pa.Table.from_arrays(
        [pa.array(p.bin, pa.int32()), pa.array(p.query_rowid, pa.uint64()), pa.array(p.other_rowid, pa.uint64()),
         pa.array(p.jaccard, pa.float64()), pa.array(p.estimated, pa.float64()), pa.array(p.candidate, pa.bool_())],
        schema=PAIRS_SCHEMA)
    return Report(
        uri=opened.uri, version=opened.version, column=column, params=params, threshold=t, sample=sample,
        seed=seed, summary=summary, scurve=_scurve(p, s.seen, nbins, params), pairs=pairs_table,
        bucket_sizes=sizes_table(runs),
        largest_buckets=largest_table(opened, entries, names, rows, runs),
        candidates=pa.Table.from_arrays([pa.array(rows.rowids[s.query_pos], pa.uint64()),
                                         pa.array(cands, pa.int64())], schema=CANDIDATES_SCHEMA),
        seconds=time.perf_counter() - t0,
    )


def largest_buckets(dataset, column: str, *, top: int = DEFAULT_TOP_BUCKETS,
                    storage_options: dict | None = None) -> tuple[pa.Table, pa.Table]:
    """``(largest, sizes)``: the ``top`` largest buckets of ``column``'s index
    (:data:`.tables.LARGEST_BUCKETS_SCHEMA`, largest first) and the number of buckets of each size
    (:data:`.tables.BUCKET_SIZES_SCHEMA`); reads the band rows only, no text scan."""
    top = check_int("top", top, f"e.g. {DEFAULT_TOP_BUCKETS}", 1, MAX_TOP_BUCKETS)
    opened = open_index(dataset, column, storage_options)
    entries, names = index_entries(opened)
    rows = index_rows(opened, entries)
    runs = bucket_runs(entries, top)
    return largest_table(opened, entries, names, rows, runs), sizes_table(runs)


_cache = ByteCache.for_objects("reports", MAX_CACHED_REPORTS)  # (uri, version, column, options) -> Report


def cached_report(dataset: str, column: str, *, storage_options: dict | None = None, **options) -> Report:
    """:func:`report` of the dataset's current version, remembered for the last few
    ``(dataset, version, column, options)``: one SQL statement can ask for the summary and
    the S-curve without computing them twice."""
    from lance_minhash_sql.io.handles import dataset_handle

    uri, ds = dataset_handle(dataset, storage_options)
    key = (uri, version_of(ds), column, tuple(sorted(options.items())))
    hit = _cache.get(key)
    if hit is not None:
        return hit
    rep = report(ds, column, storage_options=storage_options, **options)
    _cache.put(key, rep)
    return rep
