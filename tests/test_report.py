"""Index diagnostics (diagnostics/report.py, plots.py, SQL and CLI) against brute-force oracles.

The corpus has many near-duplicates (half the rows are edited copies, no exact copies,
small clusters), so every bin of the S-curve's steep part holds hundreds of pairs. The
oracles sign every row with the signer (bit-identical to Lance, test_signatures.py),
compute exact Jaccard of every (query row, row) pair by brute force, and count buckets
straight from bands.lance.
"""

from __future__ import annotations

import os
import sys

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import (DatasetError, IndexNotFoundError, InvalidParameterError,
                                           MissingDependencyError)
from lance_minhash_sql.core.banding import (false_negative_area, false_positive_area, lsh_probability, recall_bands,
                                            scurve_threshold)
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.diagnostics.report import DEFAULT_BINS, largest_buckets, percentile, report
from lance_minhash_sql.faces import cli
from lance_minhash_sql.faces.corpus import CorpusSpec, write_corpus
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.manifest import minhash_segments
from lance_minhash_sql.kernels.similarity import pair_jaccard

ROWS = 4000
SPEC = CorpusSpec(seed=3, duplicate_fraction=0.5, source_skew=1.0, edit_weights=(0.0, 0.9, 0.1),
                  max_replace_fraction=0.25)
SAMPLE = 1000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("report") / "corpus.lance")
    write_corpus(uri, ROWS, SPEC, rows_per_fragment=2000)
    build_index(uri, "text")
    return uri


@pytest.fixture(scope="module")
def rep(corpus):
    return report(corpus, "text", sample=SAMPLE, threshold=0.8)


def metric(r, name):
    return r.metric(name)


def all_rows(uri, params=MinHashParams()):
    """``(rowids, signatures, band keys, texts)`` of every live row with a signature."""
    t = lance.dataset(uri).to_table(columns=["text"], with_row_id=True)
    texts = t.column("text").combine_chunks()
    signer = signer_for(params)
    sigs, has = signer.sign(texts)
    rowids = t.column("_rowid").to_numpy()[has]
    return rowids, sigs[has], signer.band_keys(sigs[has]), texts.filter(pa.array(has))


def segment_files(uri):
    (info,) = minhash_segments(lance.dataset(uri))
    seg = os.path.join(uri, "_indices", info.uuid)
    bands = LanceFileReader(os.path.join(seg, "bands.lance")).read_all().to_table()
    sigs = LanceFileReader(os.path.join(seg, "signatures.lance")).read_all().to_table()
    return bands.column(0).to_numpy(), bands.column(1).to_numpy(), sigs.column(0).to_numpy()


# --------------------------------------------------------------------------- theory


def test_theoretical_values_come_from_params(rep):
    p = rep.params
    b, r = p.num_bands, p.rows_per_band
    assert (metric(rep, "num_hashes"), metric(rep, "num_bands"), metric(rep, "rows_per_band")) == (128, 16, 8)
    assert metric(rep, "scurve_threshold") == scurve_threshold(b, r) == pytest.approx((1 / 16) ** (1 / 8))
    assert metric(rep, "threshold") == 0.8
    assert metric(rep, "candidate_probability_at_threshold") == lsh_probability(0.8, b, r)
    assert metric(rep, "false_positive_area") == false_positive_area(0.8, b, r)
    assert metric(rep, "false_negative_area") == false_negative_area(0.8, b, r)
    assert metric(rep, "suggested_num_bands") == recall_bands(0.8, 128)[0]
    # the per-bin theoretical probability is the mean of params.lsh_probability over the bin's pairs
    pairs = rep.pairs.to_pydict()
    sc = rep.scurve.to_pydict()
    for i in range(DEFAULT_BINS):
        js = [j for j, bn in zip(pairs["jaccard"], pairs["similarity_bin"]) if bn == i]
        assert sc["pairs"][i] == len(js)
        if js:
            assert sc["theoretical_probability"][i] == pytest.approx(
                np.mean([lsh_probability(j, b, r) for j in js]), rel=1e-12, abs=1e-15)
            assert sc["similarity_lo"][i] <= min(js) and max(js) <= sc["similarity_hi"][i]
    assert report(rep.uri, "text", sample=50).metric("threshold") == scurve_threshold(b, r)


def test_empirical_scurve_within_sampling_error(rep):
    sc = rep.scurve.to_pydict()
    z = []
    for n, emp, th in zip(sc["pairs"], sc["empirical_probability"], sc["theoretical_probability"]):
        if n < 50:
            continue
        se = np.sqrt(th * (1 - th) / n)
        assert abs(emp - th) <= 4.5 * se + 1.0 / n, (n, emp, th)
        if 0.02 < th < 0.98:
            z.append((emp - th) / se)
    z = np.array(z)
    assert z.size >= 6  # the S-curve's steep part is actually measured
    # Across the steep bins: no shift, and a spread near 1 standard error. Pairs of one
    # cluster of copies are correlated, so allow some excess; a curve of 12 bands instead
    # of 16 gives mean z -1.3 to -1.9 and mean z**2 of 4 to 7 here.
    assert abs(z.mean()) <= 1.0 and np.mean(z ** 2) <= 3.0, z
    lo = [e for e, th, n in zip(sc["empirical_probability"], sc["theoretical_probability"], sc["pairs"])
          if n and th < 1e-3]
    hi = [e for e, th, n in zip(sc["empirical_probability"], sc["theoretical_probability"], sc["pairs"])
          if n and th > 1 - 1e-4]
    assert lo and max(lo) <= 0.01 and hi and min(hi) == 1.0
    recall = metric(rep, "recall_at_threshold")
    assert 0.9 <= recall <= 1.0


# --------------------------------------------------------------------------- the sample


def test_sample_is_a_stratified_census_of_pairs_sharing_shingles(corpus):
    small = report(corpus, "text", sample=60, seed=5)
    rowids, sigs, keys, texts = all_rows(corpus)
    signer = signer_for(MinHashParams())
    offsets, hashes = signer.shingle_sets(texts)
    pos = {int(r): i for i, r in enumerate(rowids)}
    queries = np.unique(small.candidates.column("query_rowid").to_numpy())
    assert queries.size == 60
    qi = np.array([pos[int(q)] for q in queries])
    ia = np.repeat(qi, rowids.size)
    ib = np.tile(np.arange(rowids.size), qi.size)
    jac = pair_jaccard(offsets, hashes, ia, ib)
    keep = (ia != ib) & (jac > 0)
    bins = np.minimum((jac[keep] * DEFAULT_BINS).astype(int), DEFAULT_BINS - 1)
    population = np.bincount(bins, minlength=DEFAULT_BINS)
    sc = small.scurve.to_pydict()
    assert sc["population_pairs"] == population.tolist()
    assert sc["pairs"] == np.minimum(population, 60).tolist()
    assert metric(small, "population_pairs") == keep.sum()
    truth = {(int(rowids[a]), int(rowids[b])): j for a, b, j in zip(ia[keep], ib[keep], jac[keep])}
    p = small.pairs.to_pydict()
    got = set()
    for q, o, j, est, cand, bn in zip(p["query_rowid"], p["other_rowid"], p["jaccard"], p["estimated"],
                                      p["candidate"], p["similarity_bin"]):
        a, b = pos[q], pos[o]
        assert j == truth[(q, o)]
        assert bn == min(int(j * DEFAULT_BINS), DEFAULT_BINS - 1)
        eq = int((sigs[a] == sigs[b]).sum())
        assert est == np.float32(eq) / np.float32(128)
        assert cand == bool((keys[a] == keys[b]).any())
        got.add((q, o))
    assert len(got) == len(p["query_rowid"])  # no pair twice
    for i in range(DEFAULT_BINS):  # bins within the cap hold every pair of the population
        if population[i] <= 60:
            assert {k for k, j in truth.items() if min(int(j * DEFAULT_BINS), DEFAULT_BINS - 1) == i} <= got
    again = report(corpus, "text", sample=60, seed=5)
    assert again.pairs.equals(small.pairs) and again.summary.equals(small.summary)
    other = report(corpus, "text", sample=60, seed=6)
    assert not other.candidates.equals(small.candidates)


def test_candidates_per_query_match_brute_force(corpus, rep):
    rowids, _, keys, _ = all_rows(corpus)
    pos = {int(r): i for i, r in enumerate(rowids)}
    got = dict(zip(rep.candidates.column("query_rowid").to_pylist(), rep.candidates.column("candidates").to_pylist()))
    assert len(got) == SAMPLE
    for q, n in list(got.items())[:200]:
        shared = (keys == keys[pos[q]]).any(axis=1)
        assert n == int(shared.sum()) - 1, q
    counts = np.array(list(got.values()))
    assert metric(rep, "candidates_per_query_max") == counts.max()
    assert metric(rep, "candidates_per_query_mean") == pytest.approx(counts.mean())
    assert metric(rep, "queries_without_candidates") == (counts == 0).sum()
    u, c = np.unique(counts, return_counts=True)
    assert metric(rep, "candidates_per_query_p90") == percentile(u, c, 90) == np.sort(counts)[int(np.ceil(0.9 * counts.size)) - 1]


def test_docstring_examples():
    import doctest

    from lance_minhash_sql.diagnostics import report as report_module

    result = doctest.testmod(report_module)
    assert result.attempted > 0 and result.failed == 0


def test_estimator_error_matches_theory(rep):
    j = rep.pairs.column("jaccard").to_numpy()
    est = rep.pairs.column("estimated").to_numpy()
    err = np.abs(est - j)
    assert metric(rep, "estimator_mean_abs_error") == pytest.approx(err.mean())
    theory_rmse = np.sqrt(np.mean(j * (1 - j) / 128))
    assert metric(rep, "estimator_theoretical_rmse") == pytest.approx(theory_rmse)
    assert 0.8 * theory_rmse <= metric(rep, "estimator_rmse") <= 1.25 * theory_rmse
    th = metric(rep, "estimator_theoretical_mean_abs_error")
    assert 0.7 * th <= metric(rep, "estimator_mean_abs_error") <= 1.4 * th
    assert 0.6 * metric(rep, "estimator_theoretical_p95_abs_error") <= metric(rep, "estimator_p95_abs_error") \
        <= 1.6 * metric(rep, "estimator_theoretical_p95_abs_error")


# --------------------------------------------------------------------------- buckets


def test_bucket_sizes_match_a_count_over_bands_lance(corpus, rep):
    band_keys, docs, sig_rowids = segment_files(corpus)
    u, counts = np.unique(band_keys, return_counts=True)
    sizes, n = np.unique(counts, return_counts=True)
    assert rep.bucket_sizes.column("size").to_pylist() == sizes.tolist()
    assert rep.bucket_sizes.column("buckets").to_pylist() == n.tolist()
    assert metric(rep, "buckets") == u.size and metric(rep, "multi_row_buckets") == (counts >= 2).sum()
    assert metric(rep, "bucket_size_max") == counts.max()
    assert metric(rep, "bucket_size_p99") == np.sort(counts)[int(np.ceil(0.99 * counts.size)) - 1]
    assert metric(rep, "multi_row_bucket_size_p50") == np.sort(counts[counts >= 2])[
        int(np.ceil(0.5 * (counts >= 2).sum())) - 1]
    top = rep.largest_buckets.to_pydict()
    order = np.lexsort((u, -counts))[:10]
    assert top["size"] == counts[order].tolist() and top["band_key"] == u[order].tolist()
    assert top["band"] == [int(k) >> 56 for k in top["band_key"]]
    texts = lance.dataset(corpus).to_table(columns=["text"], with_row_id=True)
    text_of = dict(zip(texts.column("_rowid").to_pylist(), texts.column("text").to_pylist()))
    for key, rid, text in zip(top["band_key"], top["sample_rowid"], top["sample_text"]):
        members = sig_rowids[docs[band_keys == key]]
        assert rid in members.tolist() and text == text_of[rid][:200]
    largest, sizes_table = largest_buckets(corpus, "text", top=3)
    assert largest.equals(rep.largest_buckets.slice(0, 3)) and sizes_table.equals(rep.bucket_sizes)


def test_unindexed_fragment_and_deleted_rows(tmp_path):
    uri = str(tmp_path / "c.lance")
    write_corpus(uri, 1500, SPEC)
    build_index(uri, "text")
    write_corpus(uri, 500, SPEC, mode="append", start=1500)  # a fragment no segment covers
    lance.dataset(uri).delete("id % 7 = 3")
    r = report(uri, "text", sample=300)
    rowids, _, keys, _ = all_rows(uri)
    assert metric(r, "rows") == rowids.size and metric(r, "scanned_rows") == rowids.size
    assert metric(r, "segments") == 1 and "1 fragment(s) not covered" in r.summary.column("detail")[
        r.summary.column("metric").to_pylist().index("segments")].as_py()
    pos = {int(x): i for i, x in enumerate(rowids)}
    for q, n in zip(r.candidates.column("query_rowid").to_pylist(), r.candidates.column("candidates").to_pylist()):
        assert n == int((keys == keys[pos[q]]).any(axis=1).sum()) - 1
    assert set(r.pairs.column("other_rowid").to_pylist()) <= set(pos)
    # buckets: the segment's runs in bands.lance plus the runs of the unindexed live rows
    band_keys, _, _ = segment_files(uri)
    unindexed = (rowids >> np.uint64(32)) == 1
    flat = np.unique(keys[unindexed].reshape(-1), return_counts=True)[1]
    seg = np.unique(band_keys, return_counts=True)[1]
    assert metric(r, "buckets") == seg.size + flat.size
    assert metric(r, "bucket_size_max") == max(seg.max(), flat.max())


# --------------------------------------------------------------------------- plots


def test_plots_are_written_and_readable(rep, tmp_path):
    import matplotlib.image as mpimg

    from lance_minhash_sql.diagnostics.plots import DPI, FIGSIZE, PLOT_FILES, save_plots

    paths = save_plots(rep, str(tmp_path / "plots"))
    assert set(paths) == set(PLOT_FILES)
    for path in paths.values():
        assert os.path.getsize(path) > 10_000
        img = mpimg.imread(path)
        assert img.shape[:2] == (round(FIGSIZE[1] * DPI), round(FIGSIZE[0] * DPI))
        assert img[..., :3].std() > 0.05  # not a blank canvas


def test_plots_without_matplotlib_raise_a_package_error(rep, tmp_path, monkeypatch):
    from lance_minhash_sql.diagnostics.plots import save_plots

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'matplotlib"):
        save_plots(rep, str(tmp_path / "none"))
    assert not (tmp_path / "none").exists()
    assert rep.format().count("\n") > 40  # the tables need no matplotlib


# --------------------------------------------------------------------------- SQL, CLI, errors


def test_sql_equals_python(corpus):
    con = lms.connect()
    py = report(corpus, "text", sample=200, seed=1)
    got = con.sql(f"SELECT * FROM minhash_report('{corpus}', 'text', sample := 200, seed := 1)").to_arrow_table()
    assert got.column_names == ["metric", "value", "detail"]
    assert got.to_pylist() == py.summary.to_pylist()
    sc = con.sql(f"SELECT * FROM minhash_scurve('{corpus}', 'text', sample := 200, seed := 1)").to_arrow_table()
    assert sc.column_names == py.scurve.column_names and sc.to_pylist() == py.scurve.to_pylist()
    b = con.sql(f"SELECT * FROM minhash_buckets('{corpus}', 'text', top := 4)").to_arrow_table()
    assert b.to_pylist() == py.largest_buckets.slice(0, 4).to_pylist()
    (recall,) = con.sql(f"SELECT value FROM minhash_report('{corpus}', 'text', sample := 200, seed := 1, "
                        "threshold := 0.8) WHERE metric = 'recall_at_threshold'").fetchall()[0]
    assert recall == report(corpus, "text", sample=200, seed=1, threshold=0.8).metric("recall_at_threshold")


def test_threshold_one_is_measured_like_any_other(corpus):
    """1 is a threshold like the others (identical signatures): nothing lies above it to
    miss, and one band of all 128 rows is the suggestion."""
    rep1 = report(corpus, "text", sample=200, threshold=1)
    assert metric(rep1, "threshold") == 1.0
    assert metric(rep1, "false_negative_area") == 0.0
    assert metric(rep1, "false_positive_area") == false_positive_area(1.0, 16, 8)
    assert metric(rep1, "candidate_probability_at_threshold") == 1.0
    assert metric(rep1, "suggested_num_bands") == 1


def test_bad_input_gives_package_errors(corpus, tmp_path):
    import duckdb

    bare = str(tmp_path / "bare.lance")
    write_corpus(bare, 100)
    with pytest.raises(IndexNotFoundError, match="minhash_build"):
        report(bare, "text")
    with pytest.raises(InvalidParameterError, match=r"sample=0 must be an integer in 1\.\."):
        report(corpus, "text", sample=0)
    with pytest.raises(InvalidParameterError, match="sample=-5"):
        report(corpus, "text", sample=-5)
    with pytest.raises(InvalidParameterError, match=r"threshold=1.5 is out of range: requires 0 < threshold <= 1"):
        report(corpus, "text", threshold=1.5)
    with pytest.raises(InvalidParameterError, match="sample is NULL"):
        report(corpus, "text", sample=None)
    with pytest.raises(DatasetError, match="'nope'"):
        report(corpus, "nope")
    con = lms.connect()
    cases = [
        (f"SELECT * FROM minhash_report('{bare}', 'text')", "IndexNotFoundError", "minhash_build"),
        (f"SELECT * FROM minhash_report('{corpus}', 'text', sample := 0)", "InvalidParameterError", "sample := 0"),
        (f"SELECT * FROM minhash_scurve('{corpus}', 'text', sample := -1)", "InvalidParameterError", "sample := -1"),
        (f"SELECT * FROM minhash_report('{corpus}', 'text', sample := 2.5)", "InvalidParameterError", "sample := 2.5"),
        (f"SELECT * FROM minhash_report('{corpus}', 'text', sample := NULL)", "InvalidInputError", "sample is NULL"),
        ("SELECT * FROM minhash_report(NULL, 'text')", "InvalidInputError", "dataset is NULL"),
        (f"SELECT * FROM minhash_scurve('{corpus}', NULL)", "InvalidInputError", "column is NULL"),
        (f"SELECT * FROM minhash_buckets('{corpus}', 'text', top := NULL)", "InvalidInputError", "top is NULL"),
        (f"SELECT * FROM minhash_buckets('{bare}', 'text')", "IndexNotFoundError", "minhash_build"),
        (f"SELECT * FROM minhash_report('{corpus}', 'text', threshold := 0)", "InvalidParameterError", "threshold := 0"),
    ]
    for sql, cls, fragment in cases:
        with pytest.raises(duckdb.Error) as info:
            con.sql(sql).fetchall()
        assert cls in str(info.value) and fragment in str(info.value), sql


def test_cli_report_prints_tables_and_writes_plots(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["report", corpus, "text", "--sample", "200", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    for fragment in ("-- Summary", "scurve_threshold", "-- S-curve", "empirical_probability",
                     "-- Largest buckets", "wrote scurve plot"):
        assert fragment in text
    assert sorted(os.listdir(out)) == ["buckets.png", "estimator.png", "scurve.png"]
    assert cli.main(["report", corpus, "text", "--sample", "0"]) == 2
    assert "--sample 0" in capsys.readouterr().err
