"""optimize follows Lance's own optimize_indices: delta segments and merges give the same
segment files as Lance on the same index, search answers stay identical (and equal to
Lance's MinHashQuery) through appends, deletes, merges and compactions (with and without
a deferred index remap), mixed parameters are refused, failures change nothing."""

from __future__ import annotations

import os
import tempfile

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.dataset import Index, IndexFile, LanceOperation
from lance.file import LanceFileReader
from lance.indices import IndexConfig
from lance.query import MinHashQuery
from conftest import interrupted_after_first

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import (DatasetError, IndexNotFoundError, InvalidInputError, InvalidParameterError,
                                           ParameterMismatchError, UnsupportedIndexError)
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index import band_sorter
from lance_minhash_sql.index.opened import clear_cache, open_index
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io import manifest
from lance_minhash_sql.io.details import TYPE_URL, encode_details
from lance_minhash_sql.io.segment_writers import BandsWriter, SignaturesWriter
from lance_minhash_sql.kernels.lsh import sort_bands
from lance_minhash_sql.lifecycle.optimize import OptimizeResult, optimize, parse_merge
from lance_minhash_sql.query.topk import search_ids
from lance_minhash_sql.selfjoin.pairs import pairs

PARAMS = MinHashParams(64, 8, 2)
N = 3000


def _texts(n: int = N) -> list[str]:
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(400)]
    base = [" ".join(rng.choice(words, 30)) for _ in range(n // 10)]
    out = []
    for i in range(n):  # near-duplicates: a base text with one word changed
        t = base[i % len(base)].split()
        t[i % len(t)] = f"x{i % 7}"
        out.append(" ".join(t))
    return out


TEXTS = _texts()


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    t = tmp_path / "tmp"
    t.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    monkeypatch.delenv(band_sorter.ENV_MEMORY, raising=False)
    clear_cache()
    return t


def table(lo: int, hi: int, texts=TEXTS) -> pa.Table:
    return pa.table({"id": np.arange(lo, hi, dtype=np.int64), "text": pa.array(texts[lo:hi], pa.string())})


def build(uri: str, who: str, params: MinHashParams = PARAMS) -> None:
    if who == "lance":
        lance.dataset(uri).create_scalar_index("text", IndexConfig("MINHASHLSH", params.to_lance_config()))
    else:
        build_index(uri, "text", num_hashes=params.num_hashes, num_bands=params.num_bands,
                    shingle_size=params.shingle_size, tokenizer=params.tokenizer.to_dict())


def append(uri: str, lo: int, hi: int) -> None:
    lance.dataset(uri).insert(table(lo, hi))


def four_segments(uri: str, who: str) -> None:
    """A 1000-row fragment indexed, three delta segments of 100 rows, deletions, an
    unindexed fragment of 50 rows."""
    lance.write_dataset(table(0, 1000), uri)
    build(uri, who)
    for i in range(3):
        append(uri, 1000 + 100 * i, 1100 + 100 * i)
        lance.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    lance.dataset(uri).delete("id % 10 = 3")
    append(uri, 2000, 2050)


def segment_tables(uri: str) -> list[tuple]:
    """Per segment in manifest order: fragments, signatures, bands, page table, metadata."""
    ds = lance.dataset(uri)
    out = []
    for seg in manifest.minhash_segments(ds, "text"):
        path = manifest.segment_dir(ds, seg.uuid)
        assert sorted(os.listdir(path)) == ["bands.lance", "signatures.lance"]
        sigs = LanceFileReader(os.path.join(path, "signatures.lance")).read_all().to_table()
        reader = LanceFileReader(os.path.join(path, "bands.lance"))
        bands = reader.read_all().to_table()
        meta = dict(bands.schema.metadata)
        pages = reader.read_global_buffer(int(meta[b"minhash_lsh_page_table_buffer"]))
        smeta = dict(sigs.schema.metadata)
        out.append((sorted(seg.fragment_ids), sigs, bands, pages, meta, smeta))
    return out


def assert_same_segments(a: str, b: str) -> None:
    ta, tb = segment_tables(a), segment_tables(b)
    assert len(ta) == len(tb)
    for x, y in zip(ta, tb):
        assert x[0] == y[0], "fragment ids differ"
        assert x[1].equals(y[1]), "signatures differ"
        assert x[2].equals(y[2]), "bands differ"
        assert x[3] == y[3], "page tables differ"
        assert x[4] == y[4] and x[5] == y[5], "metadata differs"


QUERIES = TEXTS[::97] + ["w1 w2 w3 w4 w5", "nothing like the corpus at all"]


def lance_answers(uri: str, k: int = 5) -> list:
    ds = lance.dataset(uri)
    out = []
    for q in QUERIES:
        t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=k, with_row_id=True, columns=["_distance"])
        out.append(list(zip(t.column("_rowid").to_pylist(), t.column("_distance").to_pylist())))
    return out


def our_answers(uri: str, k: int = 5) -> list:
    t = search_ids(uri, "text", QUERIES, k)
    out = [[] for _ in QUERIES]
    for q, r, d in zip(t.column("query_index").to_pylist(), t.column("_rowid").to_pylist(),
                       t.column("_distance").to_pylist()):
        out[q].append((r, d))
    return out


def assert_answers_match_lance(uri: str) -> list:
    ours = our_answers(uri)
    assert ours == lance_answers(uri)
    assert sum(len(a) > 1 for a in ours) > len(QUERIES) // 3  # the queries do find near-duplicates
    return ours


def state(uri: str):
    ds = lance.dataset(uri)
    return ds.version, sorted(os.listdir(os.path.join(uri, "_indices")))


# --------------------------------------------------------------------------- same files as Lance


@pytest.mark.parametrize("merge", [0, 2, 4, 10, "all"])
def test_optimize_writes_the_segments_lance_writes(tmp_path, merge):
    """Lance's optimize_indices on our index == our optimize on Lance's index."""
    theirs, ours = str(tmp_path / "theirs.lance"), str(tmp_path / "ours.lance")
    four_segments(theirs, "ours")
    four_segments(ours, "lance")
    lance.dataset(theirs).optimize.optimize_indices(num_indices_to_merge=4 if merge == "all" else merge)
    r = optimize(ours, "text", merge=merge)
    assert_same_segments(theirs, ours)
    assert isinstance(r, OptimizeResult)
    assert r.new_fragments == (4,) and r.rows_added == 50 and r.rows_without_tokens == 0
    assert r.dataset_version == lance.dataset(ours).version
    if merge == 0:
        assert (r.action, r.merged_segments, r.segments_after, r.rows_indexed, r.rows_dropped) == \
            ("delta", 0, 5, 50, 0)
    else:
        n = 2 if merge == 2 else 4
        assert (r.action, r.merged_segments, r.segments_after) == ("merge", n, 5 - n)
        assert r.rows_dropped == (20 if n == 2 else 130)  # id % 10 == 3 of the merged segments' rows
        assert r.rows_indexed == segment_tables(ours)[-1][1].num_rows
    assert_answers_match_lance(ours)
    assert our_answers(ours) == lance_answers(theirs)


def test_default_merge_rewrites_the_newest_segment_with_new_rows(tmp_path):
    theirs, ours = str(tmp_path / "theirs.lance"), str(tmp_path / "ours.lance")
    for uri in (theirs, ours):
        lance.write_dataset(table(0, 1000), uri)
        build(uri, "lance")
        append(uri, 1000, 1100)
        lance.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
        append(uri, 1100, 1200)
    lance.dataset(theirs).optimize.optimize_indices()
    r = optimize(ours, "text")
    assert (r.action, r.merged_segments, r.rows_indexed) == ("merge", 1, 200)
    assert_same_segments(theirs, ours)
    assert [t[0] for t in segment_tables(ours)] == [[0], [1, 2]]


def test_single_segment_merge_drops_deleted_rows_lance_keeps_them_answers_equal(tmp_path):
    """Lance appends new rows to a single segment keeping rows deleted since (masked at
    query time); ours drops them. Both answer alike."""
    theirs, ours = str(tmp_path / "theirs.lance"), str(tmp_path / "ours.lance")
    for uri in (theirs, ours):
        lance.write_dataset(table(0, 1000), uri)
        build(uri, "ours")
        lance.dataset(uri).delete("id < 100")
        append(uri, 1000, 1100)
    lance.dataset(theirs).optimize.optimize_indices()
    r = optimize(ours, "text")
    assert (r.rows_indexed, r.rows_dropped, r.rows_added) == (1000, 100, 100)
    assert segment_tables(theirs)[0][1].num_rows == 1100
    assert our_answers(ours) == lance_answers(theirs) == lance_answers(ours)


def test_delta_of_rows_without_tokens_is_an_empty_segment_like_lances(tmp_path):
    theirs, ours = str(tmp_path / "theirs.lance"), str(tmp_path / "ours.lance")
    blank = pa.table({"id": np.arange(1000, 1010), "text": pa.array([None] * 5 + ["!!! ???"] * 5, pa.string())})
    for uri in (theirs, ours):
        lance.write_dataset(table(0, 1000), uri)
        build(uri, "ours")
        lance.dataset(uri).insert(blank)
    lance.dataset(theirs).optimize.optimize_indices(num_indices_to_merge=0)
    r = optimize(ours, "text", merge=0)
    assert (r.action, r.rows_indexed, r.rows_without_tokens) == ("delta", 0, 10)
    assert_same_segments(theirs, ours)
    assert_answers_match_lance(ours)


def test_nothing_to_do_commits_nothing(tmp_path):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(table(0, 500), uri)
    build(uri, "ours")
    lance.dataset(uri).delete("id < 10")
    before = state(uri)
    for merge in (0, 1, "all"):
        r = optimize(uri, "text", merge=merge)
        assert (r.action, r.segment_uuid, r.segments_after) == ("none", None, 1)
    assert state(uri) == before


# --------------------------------------------------------------------------- answers through the lifecycle


def test_answers_identical_through_appends_deletes_merges_and_compactions(tmp_path):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(table(0, 1200), uri, max_rows_per_file=400)
    build(uri, "ours")
    first = assert_answers_match_lance(uri)

    append(uri, 1200, 1800)  # unindexed rows are scored on the fly
    unoptimized = assert_answers_match_lance(uri)
    assert unoptimized != first  # the appended near-duplicates are found
    optimize(uri, "text", merge=0)
    assert len(manifest.minhash_segments(lance.dataset(uri), "text")) == 2
    assert assert_answers_match_lance(uri) == unoptimized

    lance.dataset(uri).delete("id % 9 = 4 OR id BETWEEN 400 AND 799")  # a whole fragment too
    deleted = assert_answers_match_lance(uri)
    append(uri, 1800, 2100)
    appended = assert_answers_match_lance(uri)
    r = optimize(uri, "text", merge="all")
    assert (r.merged_segments, r.segments_after) == (2, 1)
    assert assert_answers_match_lance(uri) == appended != deleted
    seg = manifest.minhash_segments(lance.dataset(uri), "text")[0]
    assert seg.fragment_ids == frozenset(manifest.fragment_ids(lance.dataset(uri)))

    # a compaction remaps the index itself (Lance rewrites our segment)
    lance.dataset(uri).delete("id % 11 = 2")
    before_compaction = assert_answers_match_lance(uri)
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=10_000)
    after = assert_answers_match_lance(uri)
    assert [[d for _, d in a] for a in after] == [[d for _, d in a] for a in before_compaction]
    uuid_after = manifest.minhash_segments(lance.dataset(uri), "text")[0].uuid
    assert uuid_after != seg.uuid


def compacted_pair(tmp_path) -> tuple[str, str]:
    """Two identical indexed datasets with deletions, compacted: one with a deferred index
    remap, one remapped by Lance at compaction time."""
    deferred, native = str(tmp_path / "deferred.lance"), str(tmp_path / "native.lance")
    for uri in (deferred, native):
        lance.write_dataset(table(0, 1500), uri, max_rows_per_file=500)
        build(uri, "ours")
        lance.dataset(uri).delete("id % 10 = 3")
    lance.dataset(native).optimize.compact_files(target_rows_per_fragment=10_000)
    lance.dataset(deferred).optimize.compact_files(target_rows_per_fragment=10_000, defer_index_remap=True)
    return deferred, native


def test_deferred_remap_is_applied_by_the_reader_and_written_by_optimize(tmp_path):
    """compact_files(defer_index_remap=True) leaves old row addresses in the segment and a
    fragment-reuse index: our reader maps them as Lance's does; optimize rewrites them."""
    deferred, native = compacted_pair(tmp_path)
    ds = lance.dataset(deferred)
    assert any(d.name == "__lance_frag_reuse" for d in ds.describe_indices())
    stored = segment_tables(deferred)[0][1].column("_rowid").to_numpy()
    current = set(manifest.fragment_ids(ds))
    assert not current & set((stored >> 32).tolist())  # the segment still holds old addresses

    answers = assert_answers_match_lance(deferred)
    assert answers == our_answers(native) == lance_answers(native)

    r = optimize(deferred, "text")  # nothing new, one segment: rewritten for its remap
    assert (r.action, r.merged_segments, r.rows_dropped) == ("merge", 1, 150)
    rewritten = segment_tables(deferred)[0][1].column("_rowid").to_numpy()
    assert set((rewritten >> 32).tolist()) <= current
    # the same rows, ids and signatures as Lance's own remap at compaction time
    assert segment_tables(deferred)[0][1].equals(segment_tables(native)[0][1])
    assert segment_tables(deferred)[0][2].equals(segment_tables(native)[0][2])
    clear_cache()
    assert assert_answers_match_lance(deferred) == answers
    assert optimize(deferred, "text").action == "none"  # caught up


def test_lance_optimize_after_deferred_remap_equals_ours(tmp_path):
    theirs, ours = str(tmp_path / "theirs.lance"), str(tmp_path / "ours.lance")
    for uri in (theirs, ours):
        lance.write_dataset(table(0, 1500), uri, max_rows_per_file=500)
        build(uri, "ours")
        lance.dataset(uri).delete("id % 10 = 3")
        lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=10_000, defer_index_remap=True)
        append(uri, 1500, 1600)
    lance.dataset(theirs).optimize.optimize_indices()
    optimize(ours, "text")
    assert_same_segments(theirs, ours)
    assert_answers_match_lance(ours)


def all_pairs(uri: str) -> pa.Table:
    """Every pair at similarity >= 0.8, sorted."""
    t = pa.Table.from_batches(list(pairs(uri, "text", threshold=0.8)))
    return t.sort_by([("left_rowid", "ascending"), ("right_rowid", "ascending")])


def test_pairs_identical_with_and_without_optimize(tmp_path):
    a, b = str(tmp_path / "a.lance"), str(tmp_path / "b.lance")
    for uri in (a, b):
        lance.write_dataset(table(0, 900), uri)
        build(uri, "ours")
        append(uri, 900, 1500)
        lance.dataset(uri).delete("id % 13 = 5")
    optimize(b, "text", merge=0)
    expected = all_pairs(a)
    assert expected.num_rows > 100
    assert all_pairs(b).equals(expected)
    optimize(b, "text", merge="all")
    assert all_pairs(b).equals(expected)


def test_merge_a_chosen_group_of_segments(tmp_path):
    uri = str(tmp_path / "ds.lance")
    four_segments(uri, "ours")
    segs = manifest.minhash_segments(lance.dataset(uri), "text")
    before = assert_answers_match_lance(uri)
    r = optimize(uri, "text", merge=[segs[0].uuid, segs[2].uuid])
    after = manifest.minhash_segments(lance.dataset(uri), "text")
    assert r.merged_segments == 2 and len(after) == 3
    assert [s.uuid for s in after[:2]] == [segs[1].uuid, segs[3].uuid]
    assert after[2].fragment_ids == frozenset({0, 2, 4})
    answers = assert_answers_match_lance(uri)
    assert answers == before  # fragment 4 is indexed now: the same rows, found through the index


# --------------------------------------------------------------------------- parameters and bad input


def _write_segment(ds, frags, params: MinHashParams, texts: list[str], rowids) -> manifest.NewSegment:
    seg = manifest.new_segment(ds, frags, params)
    signer = signer_for(params)
    sigs, has = signer.sign(pa.array(texts, pa.string()))
    sw = SignaturesWriter(seg.path, params)
    sw.write(np.asarray(rowids, np.uint64)[has], sigs[has])
    sw.close()
    keys, docs = sort_bands(signer.band_keys(sigs[has]))
    bw = BandsWriter(seg.path, params, num_docs=int(has.sum()))
    bw.write(keys, docs)
    bw.close()
    return seg


def test_committing_a_segment_with_other_parameters_is_refused(tmp_path):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(table(0, 500), uri)
    build(uri, "ours")
    append(uri, 500, 600)
    ds = lance.dataset(uri)
    before = state(uri)
    other = MinHashParams(128, 16, 3)  # the index is 64/8/2
    seg = _write_segment(ds, [1], other, TEXTS[500:600], [(1 << 32) + i for i in range(100)])
    with pytest.raises(ParameterMismatchError) as err:
        manifest.commit_segments(ds, "text_idx", "text", [seg])
    msg = str(err.value)
    for part in ("num_hashes=128 vs 64", "num_bands=16 vs 8", "shingle_size=3 vs 2", "identical parameters",
                 "minhash_build", seg.uuid):
        assert part in msg
    assert isinstance(err.value, InvalidParameterError)
    # the index merged with itself under other parameters: the same fragments, refused too
    seg2 = _write_segment(ds, [0], other, TEXTS[:500], list(range(500)))
    with pytest.raises(ParameterMismatchError):
        manifest.commit_segments(ds, "text_idx", "text", [seg2])
    with pytest.raises(ParameterMismatchError, match="differ from new segment"):
        good = _write_segment(ds, [1], PARAMS, TEXTS[500:600], [(1 << 32) + i for i in range(100)])
        manifest.commit_segments(ds, "text_idx", "text", [good, seg], removed=manifest.minhash_segments(ds, "text"))
    assert lance.dataset(uri).version == before[0]
    assert_answers_match_lance(uri)


def test_an_index_with_mixed_parameters_fails_loudly_and_is_not_merged(tmp_path):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(table(0, 500), uri)
    build(uri, "ours")
    append(uri, 500, 600)
    ds = lance.dataset(uri)
    other = MinHashParams(64, 8, 3)
    seg = _write_segment(ds, [1], other, TEXTS[500:600], [(1 << 32) + i for i in range(100)])
    # bypass our gate: a raw CreateIndex, as a third-party writer could commit it
    files = [IndexFile(path=f, size_bytes=os.path.getsize(os.path.join(seg.path, f)))
             for f in ("signatures.lance", "bands.lance")]
    idx = Index(uuid=seg.uuid, name="text_idx", fields=[ds.lance_schema.field("text").id()],
                dataset_version=ds.version, fragment_ids={1}, index_version=0, files=files,
                index_details=(TYPE_URL, encode_details(other)))
    lance.LanceDataset.commit(uri, LanceOperation.CreateIndex(new_indices=[idx], removed_indices=[]),
                              read_version=ds.version)
    before = state(uri)
    with pytest.raises(UnsupportedIndexError, match="shingle_size=2 vs 3"):
        open_index(uri, "text")
    with pytest.raises(ParameterMismatchError) as err:
        optimize(uri, "text", merge="all")
    assert "shingle_size=" in str(err.value) and "minhash_build" in str(err.value)
    assert "nothing was changed" in str(err.value)
    assert state(uri) == before


def test_bad_input(tmp_path):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(table(0, 300), uri)
    with pytest.raises(IndexNotFoundError, match="minhash_build"):
        optimize(uri, "text")
    build(uri, "ours")
    before = state(uri)
    with pytest.raises(InvalidInputError):
        optimize(None, "text")
    with pytest.raises(DatasetError):
        optimize(uri, None)
    with pytest.raises(DatasetError, match="not in dataset"):
        optimize(uri, "nope")
    with pytest.raises(DatasetError, match="string column"):
        optimize(uri, "id")
    with pytest.raises(DatasetError, match="cannot be opened"):
        optimize(str(tmp_path / "missing.lance"), "text")
    for merge in (None, -1, 1.5, True, [], ["not-a-segment"], {"a": 1}, "some"):
        with pytest.raises(InvalidParameterError, match="merge"):
            optimize(uri, "text", merge=merge)
    assert state(uri) == before


def test_parse_merge():
    uuids = ["a", "b", "c"]
    assert parse_merge(0, uuids) == []
    assert parse_merge(1, uuids) == ["c"]
    assert parse_merge(2.0, uuids) == ["b", "c"]
    assert parse_merge(9, uuids) == uuids
    assert parse_merge("all", uuids) == parse_merge("ALL", uuids) == parse_merge('"all"', uuids) == uuids
    assert parse_merge(["c", "a"], uuids) == ["a", "c"]
    assert parse_merge('["b"]', uuids) == ["b"]
    assert parse_merge("2", uuids) == ["b", "c"]


def test_failed_commit_leaves_the_dataset_as_it_was(tmp_path, monkeypatch):
    uri = str(tmp_path / "ds.lance")
    four_segments(uri, "ours")
    before = state(uri)
    answers = our_answers(uri)

    def boom(*a, **k):
        raise OSError("injected commit failure")

    monkeypatch.setattr(manifest, "commit_segments", boom)
    with pytest.raises(OSError, match="injected"):
        optimize(uri, "text", merge="all")
    assert state(uri) == before
    assert our_answers(uri) == answers
    assert not os.listdir(tempfile.gettempdir()) or not [
        p for p in os.listdir(tempfile.gettempdir()) if p.startswith(band_sorter.SPILL_PREFIX)]


def test_interrupted_merge_leaves_the_dataset_as_it_was(tmp_path, monkeypatch):
    from lance_minhash_sql.lifecycle import optimize as opt_mod

    uri = str(tmp_path / "ds.lance")
    four_segments(uri, "ours")
    before = state(uri)
    monkeypatch.setattr(opt_mod, "iter_signatures", interrupted_after_first(opt_mod.iter_signatures))
    with pytest.raises(KeyboardInterrupt):
        optimize(uri, "text", merge="all", memory_limit="64KiB")
    assert state(uri) == before


def test_spilled_merge_equals_in_memory_merge(tmp_path):
    a, b = str(tmp_path / "a.lance"), str(tmp_path / "b.lance")
    four_segments(a, "ours")
    four_segments(b, "ours")
    optimize(a, "text", merge="all")
    optimize(b, "text", merge="all", memory_limit="64KiB")
    assert_same_segments(a, b)


# --------------------------------------------------------------------------- SQL


def test_sql_minhash_optimize(tmp_path):
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(table(0, 800), uri)
    con = lms.connect()
    con.sql(f"SELECT * FROM minhash_build('{uri}', 'text', num_hashes := 64, num_bands := 8, "
            "shingle_size := 2)").fetchall()
    append(uri, 800, 900)
    row = con.sql(f"SELECT action, merged_segments, segments_after, new_fragments, rows_indexed, rows_added "
                  f"FROM minhash_optimize('{uri}', 'text', merge := 0)").fetchall()
    assert row == [("delta", 0, 2, [1], 100, 100)]
    append(uri, 900, 1000)
    row = con.sql(f"SELECT action, merged_segments, segments_after, rows_indexed, dataset_version "
                  f"FROM minhash_optimize('{uri}', 'text', merge := 'all')").fetchall()
    assert row == [("merge", 2, 1, 1000, lance.dataset(uri).version)]
    assert con.sql(f"SELECT action FROM minhash_optimize('{uri}', 'text')").fetchall() == [("none",)]
    assert_answers_match_lance(uri)
    (seg,) = con.sql(f"SELECT segment_uuid FROM minhash_indexes('{uri}')").fetchall()[0]
    append(uri, 1000, 1100)
    row = con.sql(f"SELECT merged_segments FROM minhash_optimize('{uri}', 'text', merge := ['{seg}'])").fetchall()
    assert row == [(1,)]
    for bad, msg in (("NULL, 'text'", "dataset is NULL"), (f"'{uri}', NULL", "column is NULL"),
                     (f"'{uri}', 'text', merge := NULL", "merge is NULL"),
                     (f"'{uri}', 'text', merge := -2", "merge := -2"),
                     (f"'{uri}', 'id'", "string column")):
        with pytest.raises(Exception, match=msg):
            con.sql(f"SELECT * FROM minhash_optimize({bad})").fetchall()
    uri2 = str(tmp_path / "plain.lance")
    lance.write_dataset(table(0, 10), uri2)
    with pytest.raises(Exception, match="IndexNotFoundError.*minhash_build"):
        con.sql(f"SELECT * FROM minhash_optimize('{uri2}', 'text')").fetchall()


def test_pairs_after_a_deferred_remap_equal_pairs_after_lances_remap(tmp_path):
    deferred, native = compacted_pair(tmp_path)
    expected = all_pairs(native)
    assert expected.num_rows > 100
    assert all_pairs(deferred).equals(expected)
    optimize(deferred, "text")
    clear_cache()
    assert all_pairs(deferred).equals(expected)


def test_cli_optimize(tmp_path, capsys):
    from lance_minhash_sql.faces import cli

    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(table(0, 600), uri)
    build(uri, "ours")
    append(uri, 600, 700)
    assert cli.main(["optimize", uri, "text", "--merge", "0", "--quiet"]) == 0
    assert "text_idx on text: delta: 0 segment(s) rewritten, new fragments [1]; 100 rows" in capsys.readouterr().out
    segs = manifest.minhash_segments(lance.dataset(uri), "text")
    assert cli.main(["optimize", uri, "text", "--merge", f"{segs[0].uuid},{segs[1].uuid}", "--quiet"]) == 0
    assert "merge: 2 segment(s) rewritten" in capsys.readouterr().out
    assert cli.main(["optimize", uri, "text", "--quiet"]) == 0
    assert "up to date (1 segment(s)); nothing committed" in capsys.readouterr().out
    assert_answers_match_lance(uri)
    plain = str(tmp_path / "plain.lance")
    lance.write_dataset(table(0, 10), plain)
    assert cli.main(["optimize", plain, "text", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "IndexNotFoundError" in err and "lance-minhash build" in err  # the CLI's own advice
