"""Top-k search answers exactly as Lance's MinHashQuery does, on indexes Lance built.

Every comparison checks row ids, float32 distances, order and the user's columns
against ``ds.to_table(nearest=MinHashQuery(...), with_row_id=True)`` on the same dataset.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import build_native_index
from lance.query import MinHashQuery
from torture import TORTURE_TEXTS

from lance_minhash_sql.core.errors import (DatasetError, IndexNotFoundError, InvalidInputError, InvalidParameterError,
                                           UnsupportedIndexError)
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches, vocabulary
from lance_minhash_sql.core import tuning
from lance_minhash_sql.index import band_reads, doc_reads
from lance_minhash_sql.index.opened import (cache_capacity, cache_info, cache_usage, clear_cache, open_index,
                                            set_cache_capacity)
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.segment_writers import BandsWriter, SignaturesWriter
from lance_minhash_sql.kernels.lsh import sort_bands
from lance_minhash_sql.lifecycle.prewarm import warm as prewarm_index
from lance_minhash_sql.query import engine as search_mod
from lance_minhash_sql.query.topk import SEARCH_IDS_SCHEMA, search, search_ids
from lance_minhash_sql.runtime import cache as cache_mod

TIE_TEXT = "an identical sentence repeated fifty times for the tie breaking test"
TIE_IDS = list(range(980, 1030))  # crosses the fragment boundary at 1000
TORTURE_AT = 2100
N = 3000


def corpus_table(n: int = N, seed: int = 0) -> pa.Table:
    t = pa.Table.from_batches(list(generate_batches(n, CorpusSpec(seed=seed))))
    texts = t.column("text").to_pylist()
    for i in TIE_IDS:
        if i < n:
            texts[i] = TIE_TEXT
    for j, s in enumerate(TORTURE_TEXTS):
        if TORTURE_AT + j < n:
            texts[TORTURE_AT + j] = s
    return pa.table({"id": t.column("id"), "text": pa.array(texts, pa.string()),
                     "score": pa.array(np.arange(n) % 97, pa.int32())})


def make_queries(table: pa.Table, count: int, seed: int) -> list[str]:
    """Corpus rows, perturbed rows, unrelated word salads, torture texts and the tie text."""
    rng = np.random.default_rng(seed)
    texts = [t for t in table.column("text").to_pylist() if t]
    out = [texts[i] for i in rng.integers(0, len(texts), count)]
    for i in rng.integers(0, len(texts), count // 2):
        words = texts[i].split()
        if len(words) > 4:
            drop = set(rng.integers(0, len(words), max(1, len(words) // 8)).tolist())
            out.append(" ".join(w for j, w in enumerate(words) if j not in drop))
    vocab = vocabulary().to_pylist()
    out += [" ".join(rng.choice(vocab, 12)) for _ in range(4)]
    out += [t for t in TORTURE_TEXTS if t is not None][:: max(1, 60 // max(count // 4, 1))]
    out.append(TIE_TEXT)
    return out


def lance_ref(ds, q, k, columns=("id",), **kw):
    return ds.to_table(nearest=MinHashQuery(q, "text"), limit=k, columns=[*columns, "_distance"],
                       with_row_id=True, **kw)


def lance_kwargs(fast_search=False, filter=None):
    kw = {}
    if fast_search:
        kw["fast_search"] = True
    if filter is not None:
        kw.update(filter=filter, prefilter=True)
    return kw


def assert_same(got: pa.Table, ref: pa.Table, columns=("id",)):
    assert got.column_names == [*columns, "_rowid", "_distance"]
    assert got.schema.field("_rowid").type == pa.uint64()
    assert got.schema.field("_distance").type == pa.float32()
    assert got.column("_rowid").to_pylist() == ref.column("_rowid").to_pylist()
    assert got.column("_distance").to_pylist() == ref.column("_distance").to_pylist()
    for c in columns:
        assert got.schema.field(c).type == ref.schema.field(c).type
        assert got.column(c).to_pylist() == ref.column(c).to_pylist(), c


def check_against_lance(uri, queries, k=10, columns=("id",), fast_search=False, filter=None, ds=None):
    """search() and search_ids() vs Lance for every query; returns how many rows came back."""
    ds = ds or lance.dataset(uri)
    refs = [lance_ref(ds, q, k, columns, **lance_kwargs(fast_search, filter)) for q in queries]
    rows = 0
    for q, ref in zip(queries, refs):
        got = search(uri, "text", q, k, columns=list(columns), fast_search=fast_search, filter=filter)
        assert_same(got, ref, columns)
        rows += got.num_rows
    ids = search_ids(uri, "text", queries, k, fast_search=fast_search, filter=filter)
    assert ids.schema.equals(SEARCH_IDS_SCHEMA)
    qi = ids.column("query_index").to_numpy()
    assert (np.diff(qi) >= 0).all()
    for i, ref in enumerate(refs):
        part = ids.filter(pa.compute.equal(ids.column("query_index"), i))
        assert part.column("_rowid").to_pylist() == ref.column("_rowid").to_pylist()
        assert part.column("_distance").to_pylist() == ref.column("_distance").to_pylist()
    return rows


@pytest.fixture(autouse=True)
def fresh_cache():
    old = cache_capacity()
    clear_cache()
    yield
    set_cache_capacity(old)
    clear_cache()


@pytest.fixture(scope="module")
def default_ds(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("search") / "default.lance")
    table = corpus_table()
    build_native_index(uri, table, MinHashParams(), max_rows_per_file=1000)
    return uri, table


POLICIES = {
    # (whole-file reads?, cache capacity)
    "auto": None,  # the ski-rental rule
    "partial": (False, 1 << 30),  # the stores fill page by page, doc by doc
    "full": (True, 1 << 30),  # segments load whole on first use
    "transient": (False, 1),  # nothing fits: every query reads into a throwaway store
}


def force_whole_reads(monkeypatch, whole: bool) -> None:
    """The ski rental of both kinds of segment read (bands and docs) answers ``whole``."""
    for reads in (band_reads, doc_reads):
        monkeypatch.setattr(reads, "whole_read_pays", lambda *a: whole)


@pytest.fixture(params=list(POLICIES))
def policy(request, monkeypatch):
    p = POLICIES[request.param]
    if p is not None:
        whole, cap = p
        force_whole_reads(monkeypatch, whole)
        set_cache_capacity(cap)
    return request.param


# --------------------------------------------------------------------------- exactness


def test_defaults_match_lance(default_ds, policy):
    uri, table = default_ds
    queries = make_queries(table, 40, seed=1)
    assert len(queries) >= 60
    rows = check_against_lance(uri, queries, k=10, columns=("id", "text", "score"))
    assert rows > len(queries)  # most queries have hits
    assert cache_usage() <= cache_capacity()
    entry = open_index(uri, "text").segment_entries()[0]
    if policy == "partial":
        assert not entry.bands.full and not entry.docs.full and entry.stats["band_pages_read"] > 0
    if policy == "full":
        assert entry.bands.full and entry.docs.full
    if policy == "transient":
        assert cache_usage() == 0 and not entry.cached


def test_parallel_drivers_match_lance(default_ds, monkeypatch):
    from lance_minhash_sql.kernels import lsh

    monkeypatch.setattr(lsh, "PARALLEL_MIN_QUERIES", 8)  # search_ids batches run in parallel
    uri, table = default_ds
    queries = make_queries(table, 30, seed=16)
    assert check_against_lance(uri, queries, k=10) > len(queries)


def test_all_user_columns_by_default(default_ds):
    uri, table = default_ds
    ds = lance.dataset(uri)
    q = table.column("text")[5].as_py()
    got = search(uri, "text", q, 5)
    ref = lance_ref(ds, q, 5, columns=("id", "text", "score"))
    assert_same(got, ref, ("id", "text", "score"))
    assert got.schema.field("score").type == pa.int32()
    assert got.column("_distance")[0].as_py() == 0.0


def test_search_accepts_a_dataset_object(default_ds):
    uri, table = default_ds
    ds = lance.dataset(uri)
    q = table.column("text")[7].as_py()
    assert_same(search(ds, "text", q, 10, columns=["id"]), lance_ref(ds, q, 10))


def test_non_default_parameters(tmp_path):
    table = corpus_table(2000, seed=3)
    for i, params in enumerate([MinHashParams(64, 8, 5),
                                MinHashParams(64, 8, 2).with_tokenizer(base_tokenizer="whitespace",
                                                                       max_token_length=None)]):
        uri = str(tmp_path / f"p{i}.lance")
        build_native_index(uri, table, params, max_rows_per_file=700)
        assert open_index(uri, "text").params == params
        queries = make_queries(table, 25, seed=10 + i)
        assert check_against_lance(uri, queries, k=7, columns=("id", "text")) > 0


def test_ties_lowest_row_ids_first(default_ds):
    uri, _ = default_ds
    ds = lance.dataset(uri)
    tie_rowids = sorted(ds.to_table(columns=["id"], filter=f"text = '{TIE_TEXT}'", with_row_id=True)
                        .column("_rowid").to_pylist())
    assert len(tie_rowids) == 50
    got = search(uri, "text", TIE_TEXT, 5, columns=["id"])
    assert got.column("_rowid").to_pylist() == tie_rowids[:5]
    assert got.column("id").to_pylist() == TIE_IDS[:5]
    assert set(got.column("_distance").to_pylist()) == {0.0}
    got = search(uri, "text", TIE_TEXT, 30, columns=["id"])  # across fragments 0 and 1
    assert got.column("_rowid").to_pylist() == tie_rowids[:30]
    assert got.column("_rowid")[20].as_py() == 1 << 32
    assert_same(got, lance_ref(ds, TIE_TEXT, 30))


def test_limit_larger_than_candidates(default_ds):
    uri, table = default_ds
    queries = make_queries(table, 8, seed=4)
    ds = lance.dataset(uri)
    for q in queries:
        ref = lance_ref(ds, q, 1000)
        got = search(uri, "text", q, 1000, columns=["id"])
        assert got.num_rows < 1000
        assert_same(got, ref)
    check_against_lance(uri, queries, k=1000)


def test_queries_without_tokens(default_ds):
    uri, table = default_ds
    ds = lance.dataset(uri)
    for q in ["", "!!! ???", "   \t ", "... --- ***"]:
        assert lance_ref(ds, q, 10).num_rows == 0
        got = search(uri, "text", q, 10, columns=["id", "text"])
        assert got.num_rows == 0 and got.column_names == ["id", "text", "_rowid", "_distance"]
        assert got.schema.field("text").type == pa.string()
    ids = search_ids(uri, "text", ["", table.column("text")[3].as_py(), "!!!"], 4)
    assert set(ids.column("query_index").to_pylist()) == {1}
    assert ids.column("_distance")[0].as_py() == 0.0


def test_deletions_after_build_are_masked_before_the_cut(tmp_path, policy):
    uri = str(tmp_path / "del.lance")
    table = corpus_table()
    build_native_index(uri, table, MinHashParams(), max_rows_per_file=1000)
    queries = make_queries(table, 30, seed=5)
    ds = lance.dataset(uri)
    # delete the best hit of some queries, every 5th row, and most of the tie cluster
    best = [r.column("id")[0].as_py() for r in (lance_ref(ds, q, 1) for q in queries[:12]) if r.num_rows]
    ds.delete(f"id % 5 = 0 OR id IN ({', '.join(map(str, best))}) OR (id >= 985 AND id < 1020)")
    ds = lance.dataset(uri)
    assert ds.count_rows() < N
    check_against_lance(uri, queries, k=10)
    # k rows still come back when enough candidates survive
    got = search(uri, "text", TIE_TEXT, 10, columns=["id"])
    assert got.num_rows == 10
    assert all(not (985 <= i < 1020) and i % 5 for i in got.column("id").to_pylist())
    assert_same(got, lance_ref(ds, TIE_TEXT, 10))


def test_fully_deleted_fragment(tmp_path):
    uri = str(tmp_path / "gone.lance")
    table = corpus_table()
    build_native_index(uri, table, MinHashParams(), max_rows_per_file=1000)
    ds = lance.dataset(uri)
    ds.delete("id < 1000")  # fragment 0 disappears from the manifest
    ds = lance.dataset(uri)
    assert 0 not in [f.fragment_id for f in ds.get_fragments()]
    queries = make_queries(table, 10, seed=6)
    check_against_lance(uri, queries, k=10)
    got = search(uri, "text", TIE_TEXT, 50, columns=["id"])
    assert got.column("id").to_pylist() == TIE_IDS[20:]


def test_appended_unindexed_fragments(tmp_path):
    uri = str(tmp_path / "app.lance")
    table = corpus_table()
    build_native_index(uri, table.slice(0, 2000), MinHashParams(), max_rows_per_file=1000)
    lance.write_dataset(table.slice(2000), uri, mode="append", max_rows_per_file=600)
    opened = open_index(uri, "text")
    assert opened.unindexed and opened.covered == frozenset({0, 1})
    queries = make_queries(table.slice(1500), 25, seed=7)
    for fast in (False, True):
        check_against_lance(uri, queries, k=10, columns=("id", "text"), fast_search=fast)
    # an appended row is found at distance 0, unless fast_search
    q = table.column("text")[2500].as_py()
    assert search(uri, "text", q, 3)["id"].to_pylist()[0] == 2500
    assert 2500 not in search(uri, "text", q, 3, fast_search=True)["id"].to_pylist()
    # deletions in unindexed fragments are masked too
    lance.dataset(uri).delete("id = 2500")
    assert 2500 not in search(uri, "text", q, 3)["id"].to_pylist()
    check_against_lance(uri, queries[:10], k=10)


def test_stable_row_ids(tmp_path):
    uri = str(tmp_path / "stable.lance")
    table = corpus_table()
    build_native_index(uri, table, MinHashParams(), max_rows_per_file=1000, enable_stable_row_ids=True)
    ds = lance.dataset(uri)
    assert ds.has_stable_row_ids
    queries = make_queries(table, 20, seed=8)
    check_against_lance(uri, queries, k=10, columns=("id", "text"))
    ds.delete("id % 3 = 0")
    lance.write_dataset(table.slice(0, 300), uri, mode="append")  # unindexed copies of rows 0..299
    ds = lance.dataset(uri)
    assert open_index(uri, "text").stable_row_ids
    check_against_lance(uri, queries, k=10, columns=("id", "text"))
    got = search(uri, "text", TIE_TEXT, 50)
    assert got.column("_rowid").to_pylist() == sorted(got.column("_rowid").to_pylist())


@pytest.mark.parametrize("stable", [False, True])
def test_compaction_after_deletions(tmp_path, stable):
    """Compaction rewrites fragments; with stable row ids the index keeps deleted rows' ids."""
    uri = str(tmp_path / "compact.lance")
    table = corpus_table()
    build_native_index(uri, table, MinHashParams(), max_rows_per_file=500, enable_stable_row_ids=stable)
    lance.dataset(uri).delete("id % 3 = 0")
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=2000)
    ds = lance.dataset(uri)
    assert all(f.metadata.deletion_file is None for f in ds.get_fragments())
    queries = make_queries(table, 15, seed=15)
    if not stable:  # Lance rewrote the index with the new row addresses
        check_against_lance(uri, queries, k=5, columns=("id",))
    else:
        # The index keeps the ids of rows deleted before the compaction; no deletion file
        # names them any more. Lance lets them take top-k slots and drops them after the
        # cut (fewer than k rows); we mask them before the cut, so our answer is Lance's
        # answer to a large limit, cut to k.
        short = 0
        for q in queries:
            got = search(uri, "text", q, 5, columns=["id"])
            full = lance_ref(ds, q, 1000)
            assert_same(got, full.slice(0, 5))
            short += lance_ref(ds, q, 5).num_rows < min(5, full.num_rows)
        assert short > 0  # the Lance behaviour this works around is still there
    tie = search(uri, "text", TIE_TEXT, 30)["id"].to_pylist()
    assert len(tie) == 30 and all(i % 3 for i in tie)


def test_multi_segment_index(tmp_path):
    uri = str(tmp_path / "multi.lance")
    table = corpus_table()
    build_native_index(uri, table.slice(0, 1500), MinHashParams(), max_rows_per_file=1000)
    lance.write_dataset(table.slice(1500, 1000), uri, mode="append", max_rows_per_file=1000)
    lance.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    lance.write_dataset(table.slice(2500), uri, mode="append")
    ds = lance.dataset(uri)
    assert len(ds.describe_indices()[0].segments) == 2
    opened = open_index(uri, "text")
    assert len(opened.segments) == 2 and len(opened.unindexed) == 1
    queries = make_queries(table, 30, seed=9)
    check_against_lance(uri, queries, k=10, columns=("id",))
    check_against_lance(uri, queries[:15], k=10, fast_search=True)
    ds.delete("id % 4 = 1")
    check_against_lance(uri, queries[:15], k=10)


def test_prefilter_matches_lance(default_ds):
    uri, table = default_ds
    queries = make_queries(table, 12, seed=11)
    for expr in ["id >= 1200", "score < 40 AND id != 3", "text LIKE '%e%'", "id IN (980, 990, 1001, 1029)"]:
        check_against_lance(uri, queries, k=5, filter=expr)
    got = search(uri, "text", TIE_TEXT, 10, filter="id >= 1010", columns=["id"])
    assert got.column("id").to_pylist() == list(range(1010, 1020))  # k rows among the matches


# --------------------------------------------------------------------------- errors


def test_no_index(tmp_path):
    uri = str(tmp_path / "plain.lance")
    lance.write_dataset(corpus_table(100), uri)
    with pytest.raises(IndexNotFoundError, match="minhash_build") as err:
        search(uri, "text", "hello", 10)
    assert "'text'" in str(err.value)
    with pytest.raises(IndexNotFoundError, match="minhash_build"):
        search_ids(uri, "text", ["hello"], 10)


@pytest.mark.parametrize("k", [0, -1, True, 1.5, "10", None])
def test_bad_k(default_ds, k):
    uri, _ = default_ds
    # k=None means no limit, which needs a threshold (tests/test_search_threshold.py)
    named = "k is NULL (no limit), which needs a threshold" if k is None else f"k={k!r}"
    with pytest.raises(InvalidParameterError, match=re.escape(named)):
        search(uri, "text", "hello", k)
    with pytest.raises(InvalidParameterError, match=re.escape(named)):
        search_ids(uri, "text", ["hello"], k)


def test_bad_queries(default_ds):
    uri, _ = default_ds
    with pytest.raises(InvalidInputError, match="NULL"):
        search(uri, "text", None, 10)
    with pytest.raises(InvalidInputError, match="string"):
        search(uri, "text", 42, 10)
    with pytest.raises(InvalidInputError, match="query 1 of 3 is NULL"):
        search_ids(uri, "text", ["a b c", None, "d e f"], 10)
    with pytest.raises(InvalidInputError):
        search_ids(uri, "text", pa.array([1, 2]), 10)
    with pytest.raises(InvalidInputError):
        search_ids(uri, "text", None, 10)


def test_missing_dataset_or_column(default_ds, tmp_path):
    uri, _ = default_ds
    with pytest.raises(DatasetError, match="nosuch"):
        search(uri, "nosuch", "hello", 10)
    with pytest.raises(DatasetError, match="string column"):
        search(uri, "id", "hello", 10)
    with pytest.raises(DatasetError):
        search(str(tmp_path / "missing.lance"), "text", "hello", 10)
    with pytest.raises(DatasetError, match="nope"):
        search(uri, "text", "hello", 10, columns=["id", "nope"])


def test_bad_filter_and_flags(default_ds):
    uri, table = default_ds
    q = table.column("text")[1].as_py()
    with pytest.raises(InvalidParameterError, match="filter"):
        search(uri, "text", q, 10, filter="nosuch_column > 3")
    with pytest.raises(InvalidParameterError, match="boolean"):
        search(uri, "text", q, 10, filter="id + 1")
    with pytest.raises(InvalidParameterError, match="filter"):
        search(uri, "text", q, 10, filter="")
    with pytest.raises(InvalidParameterError, match="fast_search"):
        search(uri, "text", q, 10, fast_search="yes")


def _write_segment(seg_dir, params, rowids, texts):
    signer = signer_for(params)
    sigs, has = signer.sign(pa.array(texts, pa.string()))
    rowids, sigs = rowids[has], sigs[has]
    sw = SignaturesWriter(seg_dir, params)
    sw.write(rowids, sigs)
    sw.close()
    keys, docs = sort_bands(signer.band_keys(sigs))
    bw = BandsWriter(seg_dir, params, sw.num_docs)
    bw.write(keys, docs)
    bw.close()


def test_segments_with_different_parameters_are_refused(tmp_path):
    uri = str(tmp_path / "mixed.lance")
    table = corpus_table(1200)
    build_native_index(uri, table.slice(0, 600), MinHashParams(), max_rows_per_file=600)
    lance.write_dataset(table.slice(600), uri, mode="append")
    lance.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    ds = lance.dataset(uri)
    segs = ds.describe_indices()[0].segments
    assert len(segs) == 2
    second = next(s for s in segs if 1 in set(s.fragment_ids))
    seg_dir = os.path.join(uri, "_indices", str(second.uuid))
    scan = ds.scanner(columns=["text"], with_row_id=True, fragments=[ds.get_fragment(1)]).to_table()
    for f in os.listdir(seg_dir):
        os.remove(os.path.join(seg_dir, f))
    _write_segment(seg_dir, MinHashParams(64, 8, 3), scan.column("_rowid").to_numpy(), scan.column("text"))
    with pytest.raises(UnsupportedIndexError, match="different parameters") as err:
        search(uri, "text", table.column("text")[3].as_py(), 10)
    msg = str(err.value)
    assert str(second.uuid) in msg and "num_hashes=128 vs 64" in msg and "num_bands=16 vs 8" in msg


# --------------------------------------------------------------------------- cache


def test_cache_capacity_is_respected(default_ds, monkeypatch):
    uri, table = default_ds
    cap = 300_000  # a few band pages and some signatures, not a whole segment
    set_cache_capacity(cap)
    cache = cache_mod.segment_cache()
    peaks = []
    real_reserve, real_put = cache.reserve, cache.put

    def reserve(key, extra):
        ok = real_reserve(key, extra)
        peaks.append(cache.usage)
        assert cache.usage <= cache.capacity
        return ok

    def put(key, value, nbytes):
        ok = real_put(key, value, nbytes)
        peaks.append(cache.usage)
        assert cache.usage <= cache.capacity
        return ok

    monkeypatch.setattr(cache, "reserve", reserve)
    monkeypatch.setattr(cache, "put", put)
    queries = make_queries(table, 20, seed=12)
    check_against_lance(uri, queries, k=10)
    assert peaks and max(peaks) <= cap and cache_usage() <= cap
    assert max(peaks) > 0  # something was cached
    with cache.lock:  # the account is exact: what each cached entry really holds
        assert all(cache.sizes[key] == cache.values[key].nbytes for key in cache.sizes)
        assert cache.usage == sum(cache.sizes.values())
    info = cache_info()
    assert info.capacity == cap and info.usage == cache_usage()
    set_cache_capacity(1000)  # shrinking evicts at once
    assert cache_usage() <= 1000


def test_cold_query_touches_only_what_it_needs(tmp_path, monkeypatch):
    # Reading a file whole is decided by measured read times (ski rental); a loaded machine
    # can make it pay after one query. This test is about the partial reads, so it fixes
    # the decision (the tests run under the `policy` fixture cover whole reads too). A
    # single query is answered by the probe, numpy or compiled, which reads in place
    # (tests/test_probe.py); this one takes the batch kernels and their stores.
    force_whole_reads(monkeypatch, False)
    monkeypatch.setattr(search_mod, "search_kernels_loaded", lambda: True)
    monkeypatch.setattr(search_mod, "MAX_QUERIES", 0)
    uri = str(tmp_path / "cold.lance")
    table = corpus_table(20_000, seed=2)
    build_native_index(uri, table, MinHashParams())
    q = table.column("text")[123].as_py()
    got = search_ids(uri, "text", q, 10)
    entry = open_index(uri, "text").segment_entries()[0]
    assert not entry.bands.full and not entry.docs.full
    # windows of rows around each bucket's predicted position, in one take; pages only
    # for buckets a window does not prove
    assert 0 < entry.stats["window_rows_read"] <= 16 * tuning.WINDOW_ROWS
    assert entry.stats["band_pages_read"] <= 4 < entry.bands.num_pages
    assert 0 < entry.stats["docs_read"] < 100 < entry.docs.num_docs
    warm = search_ids(uri, "text", q, 10)  # answered from the stores: nothing more read
    assert warm.equals(got) and entry.stats["docs_read"] == entry.docs.used
    assert prewarm_index(open_index(uri, "text")).complete
    assert entry.bands.full and entry.docs.full
    assert search_ids(uri, "text", q, 10).equals(got)
    assert cache_usage() == entry.nbytes


def test_capacity_validation_and_environment():
    with pytest.raises(InvalidParameterError):
        set_cache_capacity(-1)
    with pytest.raises(InvalidParameterError):
        set_cache_capacity("lots")
    env = dict(os.environ, LANCE_MINHASH_CACHE_BYTES="123456")
    out = subprocess.run([sys.executable, "-c", "from lance_minhash_sql.index.opened import cache_capacity; "
                          "print(cache_capacity())"], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "123456"


def test_concurrent_searches(default_ds):
    """Four threads searching a cold cache at once each get Lance's answer."""
    uri, table = default_ds
    queries = make_queries(table, 24, seed=13)
    ds = lance.dataset(uri)
    expected = [lance_ref(ds, q, 10, columns=()) for q in queries]
    assert sum(t.num_rows for t in expected) > 24  # not only empty answers
    clear_cache()
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda q: search_ids(uri, "text", q, 10), queries))
    for q, g, want in zip(queries, got, expected):
        assert g.column("_rowid").to_pylist() == want.column("_rowid").to_pylist(), q
        assert g.column("_distance").to_pylist() == want.column("_distance").to_pylist(), q


def test_new_version_is_seen(tmp_path):
    uri = str(tmp_path / "ver.lance")
    table = corpus_table(1500)
    build_native_index(uri, table, MinHashParams(), max_rows_per_file=1000)
    q = table.column("text")[10].as_py()
    assert search(uri, "text", q, 1)["id"].to_pylist() == [10]
    lance.dataset(uri).delete("id = 10")
    assert 10 not in search(uri, "text", q, 5)["id"].to_pylist()


# --------------------------------------------------------------------------- kernels vs naive


def _naive_topk(qsig, qkeys, sigs, keys, rowids, ok, limit):
    k = sigs.shape[1]
    cand = [i for i in range(len(sigs)) if ok[i] and (keys[i] == qkeys).any()]
    scored = [(np.float32(1) - np.float32((sigs[i] == qsig).sum()) / np.float32(k), int(rowids[i])) for i in cand]
    return sorted(scored)[:limit]


def _candidates(lsh, qkeys, store, skeys, sdocs, width):
    """Candidates through the kernels: every bucket from the page store, or (width > 0) from row
    windows where they prove the bucket, the page store for the rest."""
    n = skeys.size
    lo, hi = lsh.bucket_pages(store.page_table, qkeys)
    slot, pk, pd = store.arrays()
    kind = np.zeros(qkeys.shape, dtype=np.uint8)
    win_docs = np.empty(0, dtype=np.uint32)
    exact = np.zeros(qkeys.shape, dtype=np.bool_)
    if width:
        cold = np.full(store.num_pages, -1, dtype=np.int32)  # as if no page were loaded
        ws, we = lsh.window_plan(qkeys, lo, hi, store.page_table, cold, store.page_rows, n, width)
        rows = lsh.window_indices(ws, we)
        assert (np.diff(rows) > 0).all()
        wstart, wend, exact = lsh.window_rows(qkeys, ws, we, rows, skeys[rows], store.page_rows, n)
        win_docs = sdocs[rows]
        lo = np.where(exact, store.num_pages, lo)
        hi = np.where(exact, store.num_pages - 1, hi)
    start, end = lsh.bucket_rows(qkeys, lo, hi, slot, pk, store.page_rows, n)
    start = np.where(exact, wstart, start) if width else start
    end = np.where(exact, wend, end) if width else end
    kind[exact] = 1
    return lsh.merge_candidates(start, end, kind, slot, pd, store.page_rows, win_docs), int(exact.sum())


@pytest.mark.parametrize("page_rows", [1, 2, 3, 7, 64, 4096])
def test_kernels_match_a_naive_scan(page_rows):
    from lance_minhash_sql.index.opened import BandStore, DocStore
    from lance_minhash_sql.kernels import lsh

    rng = np.random.default_rng(page_rows)
    n, k, b = 300, 8, 4
    # few distinct values: big buckets that span many pages, many ties
    sigs = rng.integers(0, 3, (n, k)).astype(np.uint16)
    sigs[:120] = sigs[0]
    keys2d = signer_for(MinHashParams(k, b, 3)).band_keys(sigs)
    rowids = rng.permutation(np.arange(n, dtype=np.uint64) * 7 + (1 << 32))
    skeys, sdocs = sort_bands(keys2d)
    pt = lsh.page_table_of(skeys, page_rows)
    # a partial page store holding the pages in a scrambled order
    store = BandStore(pt, page_rows, skeys.size)
    for p in rng.permutation(pt.size):
        a = p * page_rows
        store.add_pages(int(p), 1, skeys[a:a + page_rows], sdocs[a:a + page_rows])
    docs = DocStore(n, k)
    order = rng.permutation(n)
    docs.add_docs(order, rowids[order], sigs[order])
    qsigs = np.concatenate([sigs[rng.integers(0, n, 20)], rng.integers(0, 3, (10, k)).astype(np.uint16)])
    qkeys = signer_for(MinHashParams(k, b, 3)).band_keys(qsigs)
    ok = rng.random(n) > 0.2
    want = [{i: int((keys2d[i] == qkeys[q]).sum()) for i in range(n) if (keys2d[i] == qkeys[q]).any()}
            for q in range(qsigs.shape[0])]
    by_window = 0
    for batch in (qsigs.shape[0], 1):  # parallel and serial drivers
        old = lsh.PARALLEL_MIN_QUERIES
        lsh.PARALLEL_MIN_QUERIES = batch
        try:
            for width in (0, 1, 3, 16, 256):
                (offsets, cdocs, matches), w = _candidates(lsh, qkeys, store, skeys, sdocs, width)
                by_window += w
                for q in range(qsigs.shape[0]):
                    a, z = offsets[q], offsets[q + 1]
                    assert dict(zip(cdocs[a:z].tolist(), matches[a:z].tolist())) == want[q]
            dslot, drid, dsig = docs.arrays()
            for limit in (1, 5, 500):
                counts, rid, _, dist = lsh.score_topk(qsigs, offsets, cdocs, ok[cdocs], dslot, dsig, drid, limit)
                for q in range(qsigs.shape[0]):
                    got = list(zip(dist[counts[q]:counts[q + 1]].tolist(), rid[counts[q]:counts[q + 1]].tolist()))
                    assert got == [(float(d), r) for d, r in _naive_topk(qsigs[q], qkeys[q], sigs, keys2d, rowids, ok, limit)]
        finally:
            lsh.PARALLEL_MIN_QUERIES = old
    if page_rows >= 64:
        assert by_window > 0  # some buckets were resolved from windows


def test_buckets_spanning_pages_match_lance(tmp_path):
    """9,000 identical rows: every band bucket of that text spans three 4,096-row pages;
    400 identical rows: buckets inside one page but wider than a probe window."""
    uri = str(tmp_path / "big.lance")
    base = corpus_table(3000, seed=4)
    other = "four hundred copies of another sentence make a bucket wider than the window"
    texts = [TIE_TEXT] * 9000 + base.column("text").to_pylist() + [other] * 400
    table = pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())})
    build_native_index(uri, table, MinHashParams(), max_rows_per_file=4000)
    queries = [TIE_TEXT, TIE_TEXT + " plus", "an identical sentence repeated", other,
               other + " and more"] + make_queries(base, 6, seed=14)
    for k in (3, 380, 4100, 9000):
        check_against_lance(uri, queries[:5], k=k)
    check_against_lance(uri, queries, k=10)
    got = search(uri, "text", TIE_TEXT, 9000, columns=["id"])
    assert got.column("id").to_pylist() == list(range(9000))
    clear_cache()
    assert search(uri, "text", other, 400, columns=["id"]).column("id").to_pylist() == list(range(12000, 12400))


def test_exact_threshold_keeps_a_hit_whose_jaccard_equals_it(tmp_path):
    # query: 20 tokens (18 shingles of 3); a row of the same 20 tokens and 6 more: 24
    # shingles, 18 shared, exact Jaccard 0.75. With threshold 0.75 and exact, the hit is kept
    # (>=), as long as its estimate reaches 0.75 too, which the loop below ensures.
    from naive import exact_jaccard

    from lance_minhash_sql.indexer.builder import build_index

    base = [f"w{i}" for i in range(20)]
    query = " ".join(base)
    found = None
    for attempt in range(40):
        row = query + " " + " ".join(f"x{attempt}y{j}" for j in range(6))
        assert exact_jaccard(query, row, MinHashParams()) == 0.75
        uri = str(tmp_path / f"eq{attempt}.lance")
        filler = [" ".join(f"f{attempt}z{i}z{j}" for j in range(12)) for i in range(50)]
        lance.write_dataset(pa.table({"id": pa.array(range(51), pa.int64()), "text": [row] + filler}), uri)
        build_index(uri, "text")
        est = search_ids(uri, "text", query, None, threshold=0.75)
        if est.num_rows == 1:
            found = uri
            break
    assert found is not None, "no row whose estimate reaches 0.75 in 40 tries"
    got = search_ids(found, "text", query, None, threshold=0.75, verify="exact")
    assert got.column("_jaccard").to_pylist() == [0.75]
    assert search_ids(found, "text", query, None, threshold=0.7500001, verify="exact").num_rows == 0
