"""build_index writes Lance's own MINHASHLSH index: files equal Lance's, Lance answers the
same queries with it, replaces are atomic, failures leave the dataset as it was."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader
from lance.indices import IndexConfig
from lance.query import MinHashQuery
from conftest import interrupted_after_first
from torture import TORTURE_TEXTS

from lance_minhash_sql.indexer import builder as build_mod
from lance_minhash_sql.indexer.builder import BuildResult, build_index, marker_dir
from lance_minhash_sql.core.errors import (DatasetError, InvalidInputError, InvalidParameterError, LanceMinHashError,
                                           ResourceLimitError)
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches, generate_texts, vocabulary
from lance_minhash_sql.index import band_sorter
from lance_minhash_sql.io import manifest
from lance_minhash_sql.io.details import TYPE_URL
from lance_minhash_sql.io.segment_writers import BandsWriter
from lance_minhash_sql.kernels import sort as ks
from lance_minhash_sql.runtime import memory as memory_mod

ROWS = 3000
SPEC = CorpusSpec(seed=11)


# --------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    """Markers and spill folders of these tests live under the test's own tmp dir."""
    t = tmp_path / "tmp"
    t.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    monkeypatch.delenv(band_sorter.ENV_MEMORY, raising=False)
    monkeypatch.delenv(band_sorter.ENV_MAX_TEMP, raising=False)
    return t


def corpus_table(rows=ROWS, spec=SPEC) -> pa.Table:
    return pa.Table.from_batches(list(generate_batches(rows, spec, batch_rows=1000)))


def torture_table(repeat=5) -> pa.Table:
    texts = TORTURE_TEXTS * repeat
    return pa.table({"id": np.arange(len(texts), dtype=np.int64), "text": pa.array(texts, pa.string())})


def write(uri, table, deletions=None, **kw):
    ds = lance.write_dataset(table, uri, **kw)
    if deletions:
        ds.delete(deletions)
    return lance.dataset(uri)


def native_build(uri, params: MinHashParams):
    lance.dataset(uri).create_scalar_index("text", IndexConfig("MINHASHLSH", params.to_lance_config()))
    return lance.dataset(uri)


def pair(tmp_path, table, params=MinHashParams(), deletions=None, build_kw=None, **write_kw):
    """Identical datasets: one indexed by Lance, one by build_index."""
    native = write(str(tmp_path / "native.lance"), table, deletions, **write_kw)
    ours = write(str(tmp_path / "ours.lance"), table, deletions, **write_kw)
    native = native_build(native.uri, params)
    p = params
    result = build_index(ours.uri, "text", num_hashes=p.num_hashes, num_bands=p.num_bands,
                         shingle_size=p.shingle_size, tokenizer=p.tokenizer.to_dict(), **(build_kw or {}))
    return native, lance.dataset(ours.uri), result


def seg_files(ds):
    """(signatures table, bands table, page table bytes, bands metadata, signatures metadata)."""
    segs = manifest.minhash_segments(ds, "text")
    assert len(segs) == 1
    seg = manifest.segment_dir(ds, segs[0].uuid)
    assert sorted(os.listdir(seg)) == ["bands.lance", "signatures.lance"]
    sr = LanceFileReader(os.path.join(seg, "signatures.lance"))
    br = LanceFileReader(os.path.join(seg, "bands.lance"))
    sigs, bands = sr.read_all().to_table(), br.read_all().to_table()
    bmeta = {k.decode(): v.decode() for k, v in bands.schema.metadata.items()}
    smeta = {k.decode(): v.decode() for k, v in sigs.schema.metadata.items()}
    pages = br.read_global_buffer(int(bmeta["minhash_lsh_page_table_buffer"]))
    return sigs, bands, pages, bmeta, smeta


def assert_same_files(native, ours):
    n, o = seg_files(native), seg_files(ours)
    assert o[0].num_rows > 0
    assert o[0].equals(n[0]), "signatures differ"
    assert o[1].equals(n[1]), "bands differ"
    assert o[2] == n[2], "page tables differ"
    assert o[3] == n[3], "bands metadata differs"
    assert o[4] == n[4], "signatures metadata differs"
    assert o[0].schema.equals(n[0].schema, check_metadata=True)
    assert o[1].schema.equals(n[1].schema, check_metadata=True)


def query(ds, q, k=10):
    return ds.to_table(nearest=MinHashQuery(q, "text"), limit=k, with_row_id=True, columns=["id", "_distance"])


def state(ds):
    """What a failed build must not change."""
    ds = lance.dataset(ds.uri)
    return ds.version, sorted(os.listdir(os.path.join(ds.uri, "_indices"))) if os.path.isdir(
        os.path.join(ds.uri, "_indices")) else []


# --------------------------------------------------------------------------- files equal Lance's


def test_defaults_files_equal_native(tmp_path):
    native, ours, r = pair(tmp_path, corpus_table())
    assert_same_files(native, ours)
    assert isinstance(r, BuildResult)
    assert (r.index_name, r.column, r.num_hashes, r.num_bands, r.rows_per_band, r.shingle_size) == \
        ("text_idx", "text", 128, 16, 8, 3)
    assert r.rows_indexed == ROWS and r.rows_without_tokens == 0 and r.segments == 1
    assert r.dataset_version == ours.version == 2
    assert r.segment_uuids == tuple(s.uuid for s in manifest.minhash_segments(ours, "text"))
    seg = manifest.segment_dir(ours, r.segment_uuids[0])
    assert r.bytes == sum(os.path.getsize(os.path.join(seg, f)) for f in os.listdir(seg))
    assert json.loads(r.tokenizer) == MinHashParams().tokenizer.to_dict()
    assert r.spilled_bytes == 0 and r.seconds > 0


@pytest.mark.parametrize("params", [
    MinHashParams(64, 8, 5),
    MinHashParams(32, 4, 2).with_tokenizer(base_tokenizer="whitespace", max_token_length=None),
    MinHashParams(48, 12, 2).with_tokenizer(base_tokenizer="ngram", min_ngram_length=2, max_ngram_length=3),
], ids=["64-8-5", "whitespace", "ngram"])
def test_non_default_params_files_equal_native(tmp_path, params):
    native, ours, r = pair(tmp_path, corpus_table(800), params)
    assert_same_files(native, ours)
    assert (r.num_hashes, r.num_bands, r.shingle_size) == (params.num_hashes, params.num_bands, params.shingle_size)
    assert json.loads(r.tokenizer)["base_tokenizer"] == params.tokenizer.base_tokenizer


def test_multi_fragment_with_deletions_equal_native(tmp_path):
    native, ours, r = pair(tmp_path, corpus_table(), deletions="id % 7 == 0 OR id BETWEEN 1000 AND 1499",
                           max_rows_per_file=700, max_rows_per_group=700)
    assert len(ours.get_fragments()) == 5
    assert_same_files(native, ours)
    expected = ROWS - len([i for i in range(ROWS) if i % 7 == 0 or 1000 <= i <= 1499])
    assert r.rows_indexed == expected
    rowids = seg_files(ours)[0].column("_rowid").to_numpy()
    assert (rowids >> 32).max() == 4  # row addresses of the last fragment
    seg = manifest.minhash_segments(ours, "text")[0]
    assert seg.fragment_ids == frozenset(f.fragment_id for f in ours.get_fragments())


def test_stable_row_ids_equal_native(tmp_path):
    native, ours, r = pair(tmp_path, corpus_table(2000), MinHashParams(96, 16, 2), deletions="id % 5 = 1",
                           max_rows_per_file=600, max_rows_per_group=600, enable_stable_row_ids=True)
    assert_same_files(native, ours)
    rowids = seg_files(ours)[0].column("_rowid").to_numpy()
    assert rowids.max() < 2000  # stable ids, not addresses
    assert r.rows_indexed == 1600


def test_torture_corpus_equal_native(tmp_path):
    table = torture_table()
    native, ours, r = pair(tmp_path, table)
    assert_same_files(native, ours)
    texts = table.column("text").to_pylist()
    nulls = sum(t is None for t in texts)
    assert r.rows_without_tokens > nulls > 0  # NULLs and texts without tokens
    assert r.rows_indexed + r.rows_without_tokens == len(texts)
    assert r.rows_indexed == seg_files(native)[0].num_rows


# --------------------------------------------------------------------------- Lance answers alike


def _queries(n_corpus=110, n_edit=60, n_random=40, seed=3):
    rng = random.Random(seed)
    texts = generate_texts(0, ROWS, SPEC).to_pylist()
    words = vocabulary(SPEC).to_pylist()[:3000]
    out = rng.sample(texts, n_corpus)
    for t in rng.sample(texts, n_edit):
        w = t.split()
        for _ in range(max(1, len(w) // 8)):
            w[rng.randrange(len(w))] = rng.choice(words)
        if len(w) > 6 and rng.random() < 0.5:
            w = w[rng.randrange(3):]
        out.append(" ".join(w))
    for _ in range(n_random):
        out.append(" ".join(rng.choice(words[:300]) for _ in range(rng.randint(1, 30))))
    return out + [t for t in TORTURE_TEXTS if t]


def test_lance_queries_identical_on_our_index(tmp_path):
    native, ours, _ = pair(tmp_path, corpus_table(), deletions="id % 13 == 0",
                           max_rows_per_file=1100, max_rows_per_group=1100)
    queries = _queries()
    assert len(queries) >= 200
    counts = []
    for q in queries:
        a, b = query(native, q), query(ours, q)
        assert b.equals(a), q
        counts.append(b.num_rows)
    # the queries do find rows, several of them more than one (near-duplicate clusters)
    assert sum(counts) > 120 and sum(c >= 2 for c in counts) >= 10, counts


# --------------------------------------------------------------------------- manifest, replace


def test_describe_indices_and_replace_in_one_version(tmp_path):
    native, ours, r = pair(tmp_path, corpus_table(1500))
    (d,) = ours.describe_indices()
    (nd,) = native.describe_indices()
    assert d.type_url == TYPE_URL == nd.type_url
    assert d.name == "text_idx" and d.field_names == ["text"]
    assert d.num_rows_indexed == nd.num_rows_indexed == 1500
    assert len(d.segments) == 1
    old_uuid = str(d.segments[0].uuid)
    v = ours.version
    r2 = build_index(ours, "text", num_hashes=64, num_bands=8, replace=True)
    after = lance.dataset(ours.uri)
    assert after.version == r2.dataset_version == v + 1
    (d2,) = after.describe_indices()
    assert [str(s.uuid) for s in d2.segments] == list(r2.segment_uuids) != [old_uuid]
    assert d2.details["num_hashes"] == 64 and d2.name == "text_idx"
    # Lance answers from the replacing index as from its own index of the same parameters
    native.create_scalar_index("text", IndexConfig("MINHASHLSH", MinHashParams(64, 8).to_lance_config()),
                               replace=True)
    native = lance.dataset(native.uri)
    texts = after.to_table(columns=["text"]).column("text").to_pylist()[::75]
    for q in texts + ["anything at all here"]:
        assert query(after, q).equals(query(native, q)), q
    assert all(query(after, q).column("_distance")[0].as_py() == 0.0 for q in texts)  # each finds itself
    # the version before still has the old index, intact
    before = lance.dataset(ours.uri, version=v)
    assert [str(s.uuid) for s in before.describe_indices()[0].segments] == [old_uuid]
    assert os.path.isdir(manifest.segment_dir(before, old_uuid))


def test_replace_keeps_existing_index_name_and_replaces_native_index(tmp_path):
    uri = str(tmp_path / "ds.lance")
    ds = write(uri, corpus_table(800))
    ds.create_scalar_index("text", IndexConfig("MINHASHLSH", {}), name="my_minhash")
    r = build_index(uri, "text", num_hashes=64, num_bands=8)
    (d,) = lance.dataset(uri).describe_indices()
    assert r.index_name == d.name == "my_minhash"
    assert d.details["num_hashes"] == 64 and len(d.segments) == 1


def test_replace_false_with_index_raises(tmp_path):
    uri = str(tmp_path / "ds.lance")
    write(uri, corpus_table(500))
    build_index(uri, "text")
    before = state(lance.dataset(uri))
    with pytest.raises(DatasetError, match="replace=False"):
        build_index(uri, "text", replace=False)
    assert state(lance.dataset(uri)) == before


def test_other_index_type_with_same_name_raises(tmp_path):
    uri = str(tmp_path / "ds.lance")
    ds = write(uri, corpus_table(500))
    ds.create_scalar_index("id", "BTREE", name="text_idx")
    before = state(lance.dataset(uri))
    with pytest.raises(DatasetError, match="BTree"):
        build_index(uri, "text")
    assert state(lance.dataset(uri)) == before
    r = build_index(uri, "text", name="text_minhash")  # another name works, the BTREE stays
    names = {d.name: d.type_url for d in lance.dataset(uri).describe_indices()}
    assert names["text_minhash"] == TYPE_URL and "text_idx" in names and r.index_name == "text_minhash"


def test_stale_dataset_object_conflict_is_a_clear_error(tmp_path):
    uri = str(tmp_path / "ds.lance")
    ds = write(uri, corpus_table(300))
    build_index(ds, "text")
    before = state(lance.dataset(uri))
    with pytest.raises(DatasetError, match="conflicts"):
        build_index(ds, "text")  # still at version 1; version 2 replaced the index already
    assert state(lance.dataset(uri)) == before


# --------------------------------------------------------------------------- sort and spill


def test_spill_bands_equal_in_memory(tmp_path, private_tmp):
    table = corpus_table()
    a = write(str(tmp_path / "mem.lance"), table)
    b = write(str(tmp_path / "spill.lance"), table)
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    ra = build_index(a.uri, "text")
    rb = build_index(b.uri, "text", memory_limit="64KiB", temp_dir=str(spill_dir))
    assert ra.spilled_bytes == 0
    assert rb.spilled_bytes >= ROWS * 16 * 12
    fa, fb = seg_files(lance.dataset(a.uri)), seg_files(lance.dataset(b.uri))
    assert fb[1].equals(fa[1]) and fb[2] == fa[2] and fb[3] == fa[3] and fb[0].equals(fa[0])
    keys = fb[1].column(0).to_numpy()
    docs = fb[1].column(1).to_numpy()
    assert ks.is_sorted_pairs(keys, docs)
    assert os.listdir(spill_dir) == []  # temp folder gone after success
    assert os.listdir(marker_dir()) == []


def test_spill_with_giant_buckets_equals_native(tmp_path):
    # 4000 exact copies: one key per band holds 4000 rows (96 KB to sort), above a 64 KiB budget
    texts = generate_texts(0, 1000, SPEC).to_pylist() + ["the very same text over and over again"] * 4000
    random.Random(1).shuffle(texts)
    table = pa.table({"id": np.arange(len(texts)), "text": texts})
    native, ours, r = pair(tmp_path, table, build_kw=dict(memory_limit="64KiB"))
    assert r.spilled_bytes > len(texts) * 16 * 12  # re-split partitions count again
    assert_same_files(native, ours)


def test_memory_limit_from_environment(tmp_path, monkeypatch):
    uri = str(tmp_path / "ds.lance")
    write(uri, corpus_table(1000))
    monkeypatch.setenv(band_sorter.ENV_MEMORY, "100KiB")
    assert build_index(uri, "text").spilled_bytes > 0
    monkeypatch.setenv(band_sorter.ENV_MEMORY, "1GiB")
    assert build_index(uri, "text").spilled_bytes == 0


@pytest.mark.parametrize("budget", [64 << 10, 100 << 10, 200 << 10, 1 << 30])
def test_band_sorter_orders_like_lexsort(budget, tmp_path, monkeypatch):
    tmp_path = tmp_path / "spill"
    tmp_path.mkdir()
    streamed = []
    real_chunks = band_sorter.BandSorter._chunks
    monkeypatch.setattr(band_sorter.BandSorter, "_chunks",
                        lambda self, part, rows: streamed.append(part.kmin == part.kmax) or real_chunks(self, part, rows))
    rng = np.random.default_rng(budget)
    n, b = 5000, 4
    low = rng.integers(0, 2**56, size=(n, b), dtype=np.uint64)
    low[rng.random(n) < 0.6] = low[0]  # a giant bucket in every band
    low[:, 1] &= np.uint64(0xFFFF)  # keys sharing long prefixes
    keys = low | (np.arange(b, dtype=np.uint64) << np.uint64(56))
    plan = band_sorter.plan_sort(n, b, memory_limit=budget, temp_dir=str(tmp_path))
    assert plan.in_memory == (budget == 1 << 30)
    sorter = band_sorter.BandSorter(plan)
    try:
        for s in range(0, n, 777):
            sorter.add(keys[s:s + 777])
        chunks = list(sorter.sorted_chunks())
    finally:
        sorter.close()
    got_k = np.concatenate([c[0] for c in chunks])
    got_d = np.concatenate([c[1] for c in chunks])
    flat_k = keys.T.reshape(-1)
    flat_d = np.tile(np.arange(n, dtype=np.uint32), b)
    o = np.lexsort((flat_d, flat_k))
    assert np.array_equal(got_k, flat_k[o]) and np.array_equal(got_d, flat_d[o])
    assert not os.listdir(tmp_path)
    if budget == 64 << 10:  # the giant buckets were split off and streamed
        assert True in streamed and False in streamed
    if plan.in_memory:
        assert streamed == []


@pytest.mark.parametrize("budget", ["64MiB", "512MiB", "2GiB", "8GiB"])
@pytest.mark.parametrize("rows", [100_000, 1_000_000, 10_000_000, 100_000_000])
@pytest.mark.parametrize("bands", [16, 64])
def test_plan_shares_fit_the_budget(budget, rows, bands, tmp_path, monkeypatch):
    monkeypatch.setattr(band_sorter.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**15, 0, 10**15))
    monkeypatch.setenv(band_sorter.ENV_MAX_TEMP, str(10**15))
    plan = band_sorter.plan_sort(rows, bands, memory_limit=budget, temp_dir=str(tmp_path), threads=2, num_hashes=128)
    b = plan.budget
    pipeline = band_sorter.pipeline_bytes(b, 128, bands)
    assert plan.sort_bytes + band_sorter.writer_bytes(b) <= b
    assert plan.io_buffer + band_sorter.LANCE_WRITER_CACHE <= pipeline
    assert 8 << 20 <= plan.io_buffer <= 64 << 20 and 4096 <= plan.scan_rows <= 65536
    if plan.in_memory:
        assert rows * bands * 8 + pipeline <= b
        assert band_sorter.in_memory_bytes(rows, bands, 2) + band_sorter.writer_bytes(b) <= b
    else:
        assert pipeline + band_sorter.spill_buffer_bytes(b, 128, bands) <= b
        assert plan.spill_rows * bands * (8 + band_sorter.ROW_BYTES) <= band_sorter.spill_buffer_bytes(b, 128, bands)
        # no more buffered docs than appends of SPILL_APPEND_BYTES per partition need
        assert (plan.spill_rows - 1) * bands * band_sorter.ROW_BYTES < (bands << plan.prefix_bits) * band_sorter.SPILL_APPEND_BYTES
        nparts = bands << plan.prefix_bits
        expected = rows * bands / nparts
        if nparts < band_sorter.MAX_PARTITIONS // 2:  # not clamped: a partition is 1/8 of the sort share
            assert expected * band_sorter.ROW_BYTES <= plan.sort_bytes / 8
            # groups of 3 partitions of the expected size fit with the scratch of two runs
            # of twice that size, beside the previous group
            assert (2 * 3 * expected + 2 * 2 * expected) * band_sorter.ROW_BYTES <= plan.sort_bytes * 1.25


@pytest.mark.parametrize("budget, in_memory", [("24MiB", False), ("64MiB", True)])
def test_a_build_holds_no_more_arrays_than_its_budget(tmp_path, budget, in_memory):
    """The outcome the plan's shares promise: the arrays a real build allocates (band keys,
    sort runs and scratch, spill buffers, signature batches: numpy's allocations, which
    tracemalloc traces) peak below the budget, spilling or not. Lance's own decoder and
    writer buffers (Rust) are outside it, as the budget's documentation says."""
    import tracemalloc

    rows = 200_000
    uri = write(str(tmp_path / "ds.lance"), corpus_table(rows)).uri
    build_index(uri, "text", num_hashes=64, num_bands=8)  # compile outside the trace
    plan = band_sorter.plan_sort(rows, 16, memory_limit=budget, temp_dir=str(tmp_path))
    assert plan.in_memory == in_memory
    tracemalloc.start()
    try:
        build_index(uri, "text", memory_limit=budget, temp_dir=str(tmp_path), replace=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"\nbudget {budget}: traced peak {peak / 2**20:.1f} MiB")
    assert peak <= plan.budget
    assert rows * 16 * 8 <= peak or not in_memory  # all band keys were held at once: the trace sees them


def test_spill_sort_groups_fit_the_sort_share(tmp_path, monkeypatch):
    """Every group sorted, with its scratch and the previous group, stays in the sort share;
    streamed and split chunks too."""
    rng = np.random.default_rng(5)
    n, b = 40_000, 4
    keys = rng.integers(0, 2**56, size=(n, b), dtype=np.uint64)
    keys[rng.random(n) < 0.7] = keys[0]  # giant buckets: oversized partitions
    keys |= np.arange(b, dtype=np.uint64) << np.uint64(56)
    plan = band_sorter.plan_sort(n, b, memory_limit="1MiB", temp_dir=str(tmp_path))
    assert not plan.in_memory and plan.sort_bytes < plan.budget
    groups, chunks = [], []
    real_sort, real_chunks = band_sorter.sort_runs, band_sorter.BandSorter._chunks
    monkeypatch.setattr(band_sorter, "sort_runs", lambda k, d, starts, lengths, t: groups.append(
        (int(lengths.sum()), int(lengths.max()), min(t, len(lengths)))) or real_sort(k, d, starts, lengths, t))
    monkeypatch.setattr(band_sorter.BandSorter, "_chunks", lambda self, part, rows: chunks.append(rows) or real_chunks(
        self, part, rows))
    sorter = band_sorter.BandSorter(plan)
    try:
        for s in range(0, n, 1000):
            sorter.add(keys[s:s + 1000])
        got = [(k.copy(), d.copy()) for k, d in sorter.sorted_chunks()]
    finally:
        sorter.close()
    assert groups and chunks
    for total, longest, t in groups:
        assert (2 * total + t * longest) * band_sorter.ROW_BYTES <= plan.sort_bytes
    for rows in chunks:
        assert 3 * rows * band_sorter.ROW_BYTES <= plan.sort_bytes / 2
    flat_k = keys.T.reshape(-1)
    flat_d = np.tile(np.arange(n, dtype=np.uint32), b)
    o = np.lexsort((flat_d, flat_k))
    assert np.array_equal(np.concatenate([g[0] for g in got]), flat_k[o])
    assert np.array_equal(np.concatenate([g[1] for g in got]), flat_d[o])


def test_build_scans_within_the_pipeline_share(tmp_path, monkeypatch):
    uri = str(tmp_path / "ds.lance")
    write(uri, corpus_table(1000))
    seen = []
    real = build_mod.scan_text

    def recording(*a, **k):
        seen.append(k)
        return real(*a, **k)

    monkeypatch.setattr(build_mod, "scan_text", recording)
    build_index(uri, "text", memory_limit="512MiB")
    plan = band_sorter.plan_sort(1000, 16, "512MiB", num_hashes=128)
    (kw,) = seen
    assert kw["batch_rows"] == plan.scan_rows and kw["io_buffer_size"] == plan.io_buffer
    assert kw["batch_readahead"] == plan.readahead and kw["fragment_readahead"] >= 1


def test_heap_thresholds_are_set_for_a_build_and_restored(tmp_path, monkeypatch):
    min_rows = band_sorter.HEAP_BOUND_MIN_ROWS
    monkeypatch.setattr(band_sorter, "HEAP_BOUND_MIN_ROWS", 100)
    calls = []
    monkeypatch.setattr(memory_mod, "_MALLOPT", lambda opt, value: calls.append((opt, value)) or 1)
    during = [(memory_mod._M_MMAP_THRESHOLD, memory_mod._HEAP_DURING_BUILD[0]),
              (memory_mod._M_TRIM_THRESHOLD, memory_mod._HEAP_DURING_BUILD[1])]
    after = [(memory_mod._M_MMAP_THRESHOLD, memory_mod._HEAP_AFTER_BUILD[0]),
             (memory_mod._M_TRIM_THRESHOLD, memory_mod._HEAP_AFTER_BUILD[1])]
    with memory_mod.bounded_heap():
        with memory_mod.bounded_heap():  # a concurrent build: set once, restored once
            assert calls == during
        assert calls == during
    assert calls == during + after
    calls.clear()
    uri = str(tmp_path / "ds.lance")
    write(uri, corpus_table(300))
    build_index(uri, "text", memory_limit="64KiB")  # a tight plan (it spills)
    assert calls == during + after
    calls.clear()
    build_index(uri, "text", memory_limit="2GiB")  # 300 rows in 2 GiB: the heap is left alone
    assert calls == []
    with pytest.raises(DatasetError):
        build_index(uri, "no_such_column", memory_limit="64KiB")  # refused before any work
    assert calls == []
    monkeypatch.setattr(band_sorter, "HEAP_BOUND_MIN_ROWS", min_rows)
    assert band_sorter.plan_sort(10_000_000, 16, "2GiB").tight  # in memory, but above half of 2 GiB
    assert not band_sorter.plan_sort(1_000_000, 16, "2GiB").tight
    assert band_sorter.plan_sort(1_000_000, 16, None, temp_dir=str(tmp_path)).tight  # the default budget spills
    assert not band_sorter.plan_sort(1000, 16, "64KiB", temp_dir=str(tmp_path)).tight  # few rows
    assert band_sorter.plan_sort(1_000_000, 16, "64MiB", temp_dir=str(tmp_path)).tight


def test_radix_sort_is_stable_and_sorted():
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 17, 10_000):
        keys = rng.integers(0, 50, size=n, dtype=np.uint64) << np.uint64(rng.integers(0, 60))
        docs = np.arange(n, dtype=np.uint32)
        o = np.argsort(keys, kind="stable")
        k, d = keys.copy(), docs.copy()
        band_sorter.sort_runs(k, d, np.array([0], np.int64), np.array([n], np.int64), 2)
        assert np.array_equal(k, keys[o]) and np.array_equal(d, docs[o])


def test_radix_sort_of_hash_keys_with_repeats_is_stable():
    """Band keys are hashes: a bucket's rows spread over the next digit's groups and are
    finished by an insertion sort, which must keep a repeated key's rows in their order."""
    rng = np.random.default_rng(1)
    for n, bits in ((300_000, 56), (50_000, 20), (5_000, 12)):
        keys = (rng.integers(0, 1 << bits, size=n, dtype=np.uint64) | np.uint64(7 << 56))
        repeat = rng.random(n) < 0.1
        keys[repeat] = rng.choice(keys[:100], size=int(repeat.sum()))
        docs = np.arange(n, dtype=np.uint32)
        o = np.argsort(keys, kind="stable")
        k, d = keys.copy(), docs.copy()
        band_sorter.sort_runs(k, d, np.array([0], np.int64), np.array([n], np.int64), 2)
        assert np.array_equal(k, keys[o]) and np.array_equal(d, docs[o])


def test_parse_bytes():  # the rule itself: tests/test_sizes.py
    assert band_sorter.parse_bytes("512MiB", "x") == 512 << 20
    assert band_sorter.parse_bytes("2GB", "x") == 2 * 10**9
    assert band_sorter.parse_bytes(" 1.5 gib ", "x") == 3 << 29
    assert band_sorter.parse_bytes("100", "x") == 100 and band_sorter.parse_bytes(7, "x") == 7
    for bad in ("lots", "12 parsecs", "-1", 0, True, 1.5):
        with pytest.raises(InvalidParameterError):
            band_sorter.parse_bytes(bad, "x")


def test_temp_limit_too_small_fails_before_writing(tmp_path, monkeypatch):
    uri = str(tmp_path / "ds.lance")
    ds = write(uri, corpus_table(1000))
    build_index(uri, "text")
    before = state(ds)
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    monkeypatch.setenv(band_sorter.ENV_MAX_TEMP, "100KiB")
    with pytest.raises(ResourceLimitError, match=band_sorter.ENV_MAX_TEMP):
        build_index(uri, "text", memory_limit="64KiB", temp_dir=str(spill_dir))
    assert state(ds) == before and os.listdir(spill_dir) == []
    monkeypatch.setenv(band_sorter.ENV_MAX_TEMP, "1GB")
    monkeypatch.setattr(band_sorter.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**12, 10**12, 1000))
    with pytest.raises(ResourceLimitError, match="free"):
        build_index(uri, "text", memory_limit="64KiB", temp_dir=str(spill_dir))
    assert state(ds) == before and os.listdir(spill_dir) == []
    monkeypatch.setenv(band_sorter.ENV_MAX_TEMP, "a lot")
    with pytest.raises(InvalidParameterError, match=band_sorter.ENV_MAX_TEMP):
        build_index(uri, "text", memory_limit="64KiB")


def test_too_many_rows_for_one_segment(tmp_path, monkeypatch):
    ds = write(str(tmp_path / "ds.lance"), corpus_table(100))
    before = state(ds)
    monkeypatch.setattr(ds, "count_rows", lambda *a, **k: 2**32 + 1)
    with pytest.raises(ResourceLimitError, match="per-fragment"):
        build_index(ds, "text")
    assert state(ds) == before


# --------------------------------------------------------------------------- failures and leftovers


def _baseline(tmp_path):
    uri = str(tmp_path / "ds.lance")
    write(uri, corpus_table(1200))
    build_index(uri, "text")
    ds = lance.dataset(uri)
    answers = [query(ds, q) for q in _queries(10, 5, 5)]
    return ds, answers


def _assert_unchanged(ds, before, answers):
    assert state(ds) == before
    now = lance.dataset(ds.uri)
    assert [query(now, q) for q in _queries(10, 5, 5)] == answers
    assert os.listdir(marker_dir()) == []


class _FailingBands(BandsWriter):
    def write(self, keys, docs):
        if self.rows > 5000:
            raise RuntimeError("injected failure while writing bands")
        super().write(keys, docs)


@pytest.mark.parametrize("memory_limit", [None, "64KiB"])
def test_failure_writing_bands_leaves_dataset_unchanged(tmp_path, monkeypatch, memory_limit):
    ds, answers = _baseline(tmp_path)
    before = state(ds)
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    monkeypatch.setattr(build_mod, "BandsWriter", _FailingBands)
    with pytest.raises(RuntimeError, match="injected"):
        build_index(ds.uri, "text", num_hashes=64, num_bands=8, memory_limit=memory_limit,
                    temp_dir=str(spill_dir))
    _assert_unchanged(ds, before, answers)
    assert os.listdir(spill_dir) == []  # temp folder gone after failure


def test_failure_at_commit_leaves_dataset_unchanged(tmp_path, monkeypatch):
    ds, answers = _baseline(tmp_path)
    before = state(ds)

    def boom(*a, **k):
        raise OSError("injected commit failure")

    monkeypatch.setattr(manifest, "commit_segments", boom)
    with pytest.raises(OSError, match="injected"):
        build_index(ds.uri, "text")
    _assert_unchanged(ds, before, answers)


def test_keyboard_interrupt_while_signing_leaves_dataset_unchanged(tmp_path, monkeypatch):
    ds, answers = _baseline(tmp_path)
    before = state(ds)
    monkeypatch.setattr(build_mod, "scan_text", interrupted_after_first(build_mod.scan_text))
    with pytest.raises(KeyboardInterrupt):
        build_index(ds.uri, "text", memory_limit="64KiB")
    _assert_unchanged(ds, before, answers)
    assert not [p for p in os.listdir(tempfile.gettempdir()) if p.startswith(band_sorter.SPILL_PREFIX)]


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _leftover(ds, pid, seg_uuid=None, spill_dir=None):
    seg_uuid = seg_uuid or str(uuid.uuid4())
    path = manifest.segment_dir(ds, seg_uuid)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "signatures.lance"), "wb") as f:
        f.write(b"partial")
    os.makedirs(marker_dir(), exist_ok=True)
    with open(os.path.join(marker_dir(), f"{seg_uuid}.json"), "w") as f:
        json.dump({"dataset": ds.uri, "uuid": seg_uuid, "segment": path, "spill": spill_dir, "pid": pid,
                   "proc_start": None, "started": time.time(), "read_version": ds.version}, f)
    return seg_uuid, path


def test_leftover_of_dead_build_is_cleaned_by_next_build(tmp_path):
    uri = str(tmp_path / "ds.lance")
    ds = write(uri, corpus_table(600))
    r0 = build_index(uri, "text")
    ds = lance.dataset(uri)
    spill_dir = os.path.join(tempfile.gettempdir(), band_sorter.SPILL_PREFIX + "dead")
    os.makedirs(spill_dir)
    dead_uuid, dead_path = _leftover(ds, _dead_pid(), spill_dir=spill_dir)
    live_uuid, live_path = _leftover(ds, os.getpid())  # a build still running: untouched
    # a dead build whose segment was committed: the manifest references it, keep the folder
    ref_uuid = r0.segment_uuids[0]
    os.makedirs(marker_dir(), exist_ok=True)
    with open(os.path.join(marker_dir(), f"{ref_uuid}.json"), "w") as f:
        json.dump({"dataset": ds.uri, "uuid": ref_uuid, "segment": manifest.segment_dir(ds, ref_uuid),
                   "spill": None, "pid": _dead_pid(), "read_version": 1}, f)
    r = build_index(uri, "text")
    assert not os.path.exists(dead_path) and not os.path.exists(spill_dir)
    assert os.path.isdir(live_path)
    assert os.path.isdir(manifest.segment_dir(ds, ref_uuid))  # version 2 still uses it
    assert sorted(os.listdir(marker_dir())) == [f"{live_uuid}.json"]
    assert lance.dataset(uri, version=2).describe_indices()[0].segments[0].uuid == ref_uuid
    # the rebuilt index answers: each of some indexed texts finds itself at distance 0
    ds = lance.dataset(uri)
    for i, text in enumerate(ds.to_table(columns=["text"], limit=5).column("text").to_pylist()):
        assert query(ds, text).column("_distance")[0].as_py() == 0.0, i
    assert r.dataset_version == 3


def test_leftovers_of_other_datasets_are_left_alone(tmp_path):
    a = write(str(tmp_path / "a.lance"), corpus_table(300))
    b = write(str(tmp_path / "b.lance"), corpus_table(300))
    _, path = _leftover(a, _dead_pid())
    build_index(b.uri, "text")
    assert os.path.isdir(path)
    build_index(a.uri, "text")
    assert not os.path.exists(path)


# --------------------------------------------------------------------------- bad input


def _empty_indices(uri):
    p = os.path.join(uri, "_indices")
    return not os.path.isdir(p) or os.listdir(p) == []


def test_missing_dataset(tmp_path):
    with pytest.raises(DatasetError, match="cannot be opened"):
        build_index(str(tmp_path / "nope.lance"), "text")
    with pytest.raises(InvalidInputError):
        build_index(42, "text")


@pytest.mark.parametrize("column, match", [("nope", "not in dataset"), ("id", "string column"), ("", "string column")])
def test_bad_column(tmp_path, column, match):
    ds = write(str(tmp_path / "ds.lance"), corpus_table(100))
    with pytest.raises(DatasetError, match=match):
        build_index(ds.uri, column)
    assert lance.dataset(ds.uri).version == 1 and _empty_indices(ds.uri)


@pytest.mark.parametrize("kw, match", [
    (dict(num_bands=7), "does not divide"),
    (dict(num_hashes=0), "out of range"),
    (dict(num_hashes=8192), "out of range"),
    (dict(num_bands=512, num_hashes=512), "out of range"),
    (dict(shingle_size=0), "shingle_size"),
    (dict(threshold=0.8, num_bands=16), "both"),
    (dict(threshold=1.5), "threshold"),
    (dict(tokenizer={"base_tokenizer": "klingon"}), "unknown"),
    (dict(tokenizer={"stemmer": True}), "unknown"),
    (dict(tokenizer="{not json"), "JSON"),
    (dict(replace="yes"), "replace"),
    (dict(progress=1), "progress"),
    (dict(name=""), "name"),
    (dict(memory_limit="lots"), "memory_limit"),
    (dict(memory_limit=1024), "minimum"),
    (dict(memory_limit="64KiB", temp_dir="/nonexistent/dir"), "temp_dir"),
])
def test_invalid_parameters(tmp_path, kw, match):
    ds = write(str(tmp_path / "ds.lance"), corpus_table(300))
    with pytest.raises(InvalidParameterError, match=match):
        build_index(ds.uri, "text", **kw)
    assert lance.dataset(ds.uri).version == 1 and _empty_indices(ds.uri)


def test_threshold_chooses_bands(tmp_path):
    ds = write(str(tmp_path / "ds.lance"), corpus_table(300))
    r = build_index(ds.uri, "text", threshold=0.8)
    assert (r.num_bands, r.rows_per_band) == (16, 8)  # P(0.8 is a candidate) = 0.947


def test_empty_dataset(tmp_path):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(pa.table({"id": pa.array([], pa.int64()), "text": pa.array([], pa.string())}), uri)
    with pytest.raises(DatasetError, match="no rows"):
        build_index(uri, "text")
    assert lance.dataset(uri).version == 1 and _empty_indices(uri)


@pytest.mark.parametrize("texts, match", [
    ([None] * 50, "NULL in all 50 rows"),
    ([None, "!!! ???", "", "  ", None] * 10, "no tokens"),
])
def test_column_without_tokens(tmp_path, texts, match):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())}), uri)
    with pytest.raises(DatasetError, match=match):
        build_index(uri, "text")
    assert lance.dataset(uri).version == 1 and _empty_indices(uri)
    assert os.listdir(marker_dir()) == []


def test_build_failures_are_caught_by_the_package_base_class(tmp_path, monkeypatch):
    """Each kind of failing build raises its own class, caught by ``except LanceMinHashError``
    (and by the builtin a caller would expect: ValueError for a bad value, TypeError for a
    wrong type), with a message naming the offending value."""
    uri = write(str(tmp_path / "ds.lance"), corpus_table(1000)).uri
    monkeypatch.setenv(band_sorter.ENV_MAX_TEMP, "100KiB")
    cases = [
        (lambda: build_index(uri, "text", num_hashes=128, num_bands=7), InvalidParameterError, ValueError, "7"),
        (lambda: build_index(42, "text"), InvalidInputError, TypeError, "42"),
        (lambda: build_index(str(tmp_path / "nope.lance"), "text"), DatasetError, None, "nope.lance"),
        (lambda: build_index(uri, "no_such_column"), DatasetError, None, "no_such_column"),
        (lambda: build_index(uri, "text", memory_limit="64KiB", temp_dir=str(tmp_path)), ResourceLimitError, None,
         band_sorter.ENV_MAX_TEMP),
    ]
    for call, cls, builtin, named in cases:
        with pytest.raises(LanceMinHashError) as info:
            call()
        assert type(info.value) is cls, (cls, info.value)
        assert builtin is None or isinstance(info.value, builtin)
        assert named in str(info.value), (named, str(info.value))
    assert lance.dataset(uri).version == 1 and _empty_indices(uri)


def test_progress_bars(tmp_path, capsys):
    ds = write(str(tmp_path / "ds.lance"), corpus_table(500))
    build_index(ds.uri, "text", progress=True)
    err = capsys.readouterr().err
    assert "signing" in err and "writing bands" in err and "500" in err


def test_large_string_column(tmp_path):
    table = corpus_table(400)
    table = table.set_column(1, "text", table.column("text").cast(pa.large_string()))
    native, ours, _ = pair(tmp_path, table)
    assert_same_files(native, ours)


_KILLED_CHILD = r"""
import sys, time
from lance_minhash_sql.indexer import builder as b
real = b.scan_text
def slow(*a, **k):
    it = real(*a, **k)
    yield next(it)
    time.sleep(120)
b.scan_text = slow
b.build_index(sys.argv[1], "text", memory_limit="64KiB")
"""


def test_kill_9_leftover_is_cleaned_by_next_build(tmp_path, private_tmp):
    uri = str(tmp_path / "ds.lance")
    write(uri, corpus_table(2000), max_rows_per_file=500, max_rows_per_group=500)
    env = dict(os.environ, TMPDIR=str(private_tmp))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(build_mod.__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    child = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD, uri], env=env)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.isdir(marker_dir()) and os.listdir(marker_dir())):
            time.sleep(0.05)
        time.sleep(0.3)
        assert child.poll() is None, "the child build ended before it could be killed"
    finally:
        child.kill()
        child.wait()
    (marker,) = os.listdir(marker_dir())
    with open(os.path.join(marker_dir(), marker)) as f:
        rec = json.load(f)
    assert rec["pid"] == child.pid and os.path.isdir(rec["segment"]) and os.path.isdir(rec["spill"])
    assert lance.dataset(uri).version == 1
    build_index(uri, "text")
    assert not os.path.exists(rec["segment"]) and not os.path.exists(rec["spill"])
    assert os.listdir(marker_dir()) == []
    assert os.listdir(os.path.join(uri, "_indices")) == [s.uuid for s in manifest.minhash_segments(lance.dataset(uri))]


def test_run_chunks_covers_every_chunk_once_and_raises_the_first_error():
    """The calling thread works beside the helper threads; a chunk function may itself
    run chunks (the helpers are shared, so a nested call must not wait for busy helpers)."""
    from lance_minhash_sql.runtime.threads import run_chunks

    seen = []
    lock = threading.Lock()

    def fn(lo, hi):
        with lock:
            seen.append((lo, hi))

    run_chunks(fn, 10_001, 1000, threads=2)
    assert sorted(seen) == [(lo, min(10_001, lo + 1000)) for lo in range(0, 10_001, 1000)]
    inner = []
    run_chunks(lambda lo, hi: run_chunks(lambda a, b: inner.append(b - a), 100, 10, threads=2), 4, 1, threads=2)
    assert len(inner) == 40 and sum(inner) == 400

    calls = []

    def bad(lo, hi):
        calls.append(lo)
        if lo == 3:
            raise ValueError("chunk 3")

    with pytest.raises(ValueError, match="chunk 3"):
        run_chunks(bad, 1000, 1, threads=2)
    assert 3 in calls and len(calls) < 1000  # no new chunk starts after the failure
