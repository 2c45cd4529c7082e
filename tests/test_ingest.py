"""The pipeline of a growing corpus: the ingest plan against its brute-force oracle
(``tests/naive.py: ingest_oracle``), the ingest's append and index update as one version
(Lance's own index query and a fresh index as oracles), kill -9 at counted moments, two
ingests at once, the cleanup of old versions; in Python, SQL and on the command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lance.query import MinHashQuery

import lance_minhash_sql as lms
from lance_minhash_sql.core.errors import DatasetError, IndexNotFoundError, InvalidParameterError
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.lifecycle import ingest as ingest_module

from conftest import groups_table
from naive import ingest_oracle

HERE = os.path.dirname(os.path.abspath(__file__))
T = 0.8


def _table(seed: int) -> pa.Table:
    """Near-duplicate groups and unrelated rows (tests/conftest.py), shuffled, with an id."""
    return groups_table(np.random.default_rng(seed), ["", "a", None], 120, 6, 2, 600)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    """A corpus (two thirds, indexed, a few rows deleted) and a batch (the rest, with copies
    of corpus rows, rows without tokens, and a deleted row)."""
    root = tmp_path_factory.mktemp("ingest")
    t = _table(3)
    n = t.num_rows
    cut = 2 * n // 3
    corpus = str(root / "corpus.lance")
    batch = str(root / "batch.lance")
    lance.write_dataset(t.slice(0, cut), corpus, max_rows_per_file=500)
    lance.dataset(corpus).delete("id < 5")
    lms.build_index(corpus, "text", threshold=T)
    copies = t.slice(10, 30)  # rows of the corpus, offered again
    lance.write_dataset(pa.concat_tables([t.slice(cut), copies]), batch)
    lance.dataset(batch).delete(f"id = {cut + 1}")
    return {"root": root, "corpus": corpus, "batch": batch, "table": t}


def _copy(src: str, dst) -> str:
    shutil.copytree(src, str(dst))
    return str(dst)


def _plan_rows(plan: pa.Table) -> dict:
    return {r["_rowid"]: (r["keep"], r["twin_rowid"], r["twin_in"], r["similarity"], r["jaccard"])
            for r in plan.to_pylist()}


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_the_plan_is_the_rule_of_its_oracle(data, verify):
    params = open_index(data["corpus"], "text").params
    plan = lms.ingest_plan(data["corpus"], data["batch"], "text", T, verify=verify)
    oracle = ingest_oracle(data["corpus"], data["batch"], T, params, verify)
    got = _plan_rows(plan)
    assert set(got) == set(oracle)
    assert plan.column("_rowid").to_pylist() == sorted(got)
    for rid, (keep, twin, where, sim, jac) in got.items():
        o = oracle[rid]
        assert (keep, twin, where) == o[:3], rid
        if not keep:
            assert sim == pytest.approx(o[3], abs=1e-12)
            if verify == "exact":
                assert jac == pytest.approx(o[4], abs=1e-12) and jac >= T
            else:
                assert jac is None and sim >= T
        else:
            assert twin is None and where is None and sim is None and jac is None
    wheres = [v[2] for v in got.values()]
    assert wheres.count("corpus") >= 30 and wheres.count("batch") > 0  # both kinds of twin are exercised


@pytest.mark.parametrize("k", [7, 8, 128])
def test_the_sketch_skips_only_pairs_that_cannot_win(k):
    """``kernels/ingest.py: best_in_block`` against a longhand best over the same matches.
    Docs that copy most values of a batch row, the others of four kinds that agree on their
    low nibble half the time (so the sketches often pass where the values differ), a small
    ``k`` so ties and pairs at exactly
    ``min_eq`` are common, row ids in another order than the docs, dead docs, and the
    blocks folded in both orders."""
    from lance_minhash_sql.kernels.ingest import best_in_block, nibble_sketches, visit_order

    rng = np.random.default_rng(k)
    rows, docs, keys = 20, 300, 5
    value = lambda n: (rng.integers(0, 2, (n, k)) * 16 + rng.integers(0, 2, (n, k))).astype(np.uint16)
    lsigs = value(rows)
    dsigs = np.where(rng.random((docs, k)) < 0.6, lsigs[rng.integers(0, rows, docs)], value(docs))  # near rows
    row_keys = [rng.choice(keys, 2, replace=False) for _ in range(rows)]
    doc_keys = [rng.choice(keys, 2, replace=False) for _ in range(docs)]
    entries = sorted((int(key), r) for r in range(rows) for key in row_keys[r])
    lkeys = np.array([e[0] for e in entries], np.uint64)
    ldocs = np.array([e[1] for e in entries], np.uint32)
    matches = sorted((d, int(np.searchsorted(lkeys, key))) for d in range(docs) for key in doc_keys[d]
                     if key in lkeys)
    mdocs = np.array([m[0] for m in matches], np.uint64)
    mpos = np.array([m[1] for m in matches], np.uint32)
    rowids = rng.permutation(10 * docs)[:docs].astype(np.uint64)
    alive = rng.random(docs) > 0.1
    min_eq = max(1, (k * 5) // 8)

    want = {}
    for d in range(docs):
        for r in range(rows):
            eq = int((lsigs[r] == dsigs[d]).sum())
            if alive[d] and set(doc_keys[d]) & set(row_keys[r]) and eq >= min_eq:
                if r not in want or (eq, -int(rowids[d])) > (want[r][0], -int(want[r][1])):
                    want[r] = (eq, rowids[d])
    assert len(want) > rows // 2

    split = docs // 2  # two blocks of docs: matches [0, at) and [at, end)
    at = int(np.searchsorted(mdocs, split))
    blocks = [(0, at, 0, split), (at, mdocs.size, split, docs)]
    walk = visit_order(mpos, lkeys, ldocs, rows)  # the walk's numbering of the rows, as best_rows.py uses it
    assert sorted(walk.tolist()) == list(range(rows))
    walk_row = np.argsort(walk).astype(np.uint32)
    sketch = nibble_sketches(lsigs)[walk]
    for order in (blocks, blocks[::-1]):
        stamp, best_eq, best_right = np.full(rows, -1, np.int64), np.full(rows, -1, np.int64), np.zeros(rows, np.uint64)
        for lo, hi, a, b in order:
            sigs = np.ascontiguousarray(dsigs[np.unique(mdocs[lo:hi]).astype(np.int64)])
            live = alive[np.unique(mdocs[lo:hi]).astype(np.int64)]
            rids = rowids[np.unique(mdocs[lo:hi]).astype(np.int64)]
            best_in_block(mdocs, mpos, lo, hi, sigs, rids, live, lkeys, walk_row[ldocs], lsigs, walk, sketch,
                          np.int64(min_eq), stamp, best_eq, best_right)
        got = {int(walk[w]): (int(best_eq[w]), best_right[w]) for w in range(rows) if best_eq[w] >= 0}
        assert got == {r: (e, rid) for r, (e, rid) in want.items()}


def test_a_failed_read_ahead_of_row_ids_leaves_the_plan_to_the_reads(data, monkeypatch):
    """``selfjoin/best_rows.py`` reads the corpus's row id runs on a thread while it lists
    the matches; when that thread fails, the fetches read them and the plan is the same,
    with no exception escaping the thread."""
    import threading

    from lance_minhash_sql.selfjoin import best_rows as doc_order

    want = lms.ingest_plan(data["corpus"], data["batch"], "text", T)
    calls, escaped = [], []

    def failing(plan):
        calls.append(plan)
        raise OSError("read ahead failed")

    monkeypatch.setattr(doc_order, "prepare_fetch", failing)
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args))
    assert lms.ingest_plan(data["corpus"], data["batch"], "text", T).equals(want)
    assert len(calls) == 1 and escaped == []


def test_the_visit_order_is_the_order_the_matches_reach_the_rows():
    """``kernels/ingest.py: visit_order`` against a longhand walk of the matches: each row
    at its first meeting, then the rows no match reaches, in row order."""
    from lance_minhash_sql.kernels.ingest import visit_order

    rng = np.random.default_rng(6)
    rows = 50
    lkeys = np.sort(rng.integers(0, 30, 120).astype(np.uint64))
    ldocs = rng.integers(0, rows - 5, 120).astype(np.uint32)  # rows 45..49 have no key
    firsts = np.searchsorted(lkeys, np.unique(lkeys))
    mpos = rng.choice(firsts, 200).astype(np.uint32)  # matches in doc order, keys repeated
    want = []
    for p in mpos.tolist():
        for q in range(p, lkeys.size):
            if lkeys[q] != lkeys[p]:
                break
            if ldocs[q] not in want:
                want.append(int(ldocs[q]))
    want += [r for r in range(rows) if r not in want]
    assert visit_order(mpos, lkeys, ldocs, rows).tolist() == want


def test_band_buckets_number_the_keys_as_numpy_does():
    """``kernels/ingest.py: band_buckets`` against the same numbering in numpy: equal keys
    one bucket, buckets counted from 0 in key order, each row's bucket for each band, rows
    placed through ``at`` (rows without keys keep bucket 0)."""
    from lance_minhash_sql.core.lance_format import BAND_SHIFT
    from lance_minhash_sql.kernels.ingest import band_buckets

    rng = np.random.default_rng(4)
    signed, bands = 30, 4
    keys = np.concatenate([(np.uint64(j) << np.uint64(BAND_SHIFT)) | rng.integers(0, 9, signed).astype(np.uint64)
                           for j in range(bands)])
    docs = np.tile(np.arange(signed, dtype=np.uint32), bands)
    o = np.argsort(keys, kind="stable")
    keys, docs = keys[o], docs[o]
    at = np.sort(rng.choice(40, signed, replace=False))  # 40 rows, 10 without keys
    got = np.zeros((40, bands), np.int64)
    num = band_buckets(keys, docs, at, got)
    ids = np.cumsum(np.concatenate(([True], keys[1:] != keys[:-1]))) - 1
    want = np.zeros((40, bands), np.int64)
    want[at[docs], (keys >> np.uint64(BAND_SHIFT)).astype(np.int64)] = ids
    assert num == ids[-1] + 1 == np.unique(keys).size and np.array_equal(got, want)


def test_first_positions_are_numpys_left_search():
    """``kernels/ingest.py: first_positions``, the merge that places the corpus's matched
    keys among the batch's, against ``np.searchsorted`` (repeated keys on both sides)."""
    from lance_minhash_sql.kernels.ingest import first_positions

    rng = np.random.default_rng(3)
    lkeys = np.sort(rng.integers(0, 50, 400).astype(np.uint64))
    keys = np.sort(rng.choice(lkeys, 300))
    got = first_positions(lkeys, keys, np.int64(7))
    assert got.dtype == np.uint32 and np.array_equal(got, np.searchsorted(lkeys, keys) + 7)
    assert first_positions(lkeys, keys[:0], np.int64(0)).size == 0


def test_the_corpus_side_read_in_doc_order_is_the_joins_best(data, tmp_path, monkeypatch):
    """Both engines of the plan's corpus side, on one corpus with deleted twins and rows
    no segment covers: the corpus read in doc order (``selfjoin/best_rows.py``, many small
    blocks here) and the join reduced to each row's best (taken when the matches pass the
    budget, and by Ray and exact verification). Each is counted as it runs; both give the
    oracle's plan."""
    from lance_minhash_sql.selfjoin import best_rows as doc_order
    from lance_minhash_sql.selfjoin import ingest as plan_module
    from lance_minhash_sql.selfjoin.executor import LOCAL

    corpus = _copy(data["corpus"], tmp_path / "corpus.lance")
    lance.dataset(corpus).delete("id >= 10 AND id < 16")  # rows the batch holds copies of
    unindexed = lance.dataset(data["batch"]).to_table().slice(40, 30)  # rows no segment covers, twins of batch rows
    lance.write_dataset(unindexed, corpus, mode="append")
    runs = {"doc order": 0, "join": 0}
    best, join = plan_module.best_rows, type(LOCAL).join

    def counted_best(*args):
        got = best(*args)
        runs["doc order"] += got is not None  # (None: the matches passed the budget)
        return got

    def counted_join(self, *args, **kwargs):
        runs["join"] += 1
        return join(self, *args, **kwargs)

    monkeypatch.setattr(plan_module, "best_rows", counted_best)
    monkeypatch.setattr(type(LOCAL), "join", counted_join)
    monkeypatch.setattr(doc_order, "BLOCK_DOCS", 7)
    in_doc_order = lms.ingest_plan(corpus, data["batch"], "text", T)
    assert runs == {"doc order": 1, "join": 0}
    monkeypatch.setattr(doc_order, "MATCH_BYTES", 1 << 40)  # no match fits: the join answers
    joined = lms.ingest_plan(corpus, data["batch"], "text", T)
    assert runs == {"doc order": 1, "join": 1}
    assert in_doc_order.equals(joined)
    oracle = ingest_oracle(corpus, data["batch"], T, open_index(corpus, "text").params)
    assert {k: v[:3] for k, v in _plan_rows(in_doc_order).items()} == {k: v[:3] for k, v in oracle.items()}
    t = lance.dataset(data["corpus"]).to_table(columns=["id"], with_row_id=True)
    gone = {r for i, r in zip(t.column("id").to_pylist(), t.column("_rowid").to_pylist()) if 10 <= i < 16}
    before = set(lms.ingest_plan(data["corpus"], data["batch"], "text", T).column("twin_rowid").to_pylist())
    after = set(in_doc_order.column("twin_rowid").to_pylist())
    assert gone & before and not gone & after  # the deleted rows were twins, and are no longer
    t = lance.dataset(corpus).to_table(columns=["id"], with_row_id=True)
    appended = {r for i, r in zip(t.column("id").to_pylist(), t.column("_rowid").to_pylist())
                if i in set(unindexed.column("id").to_pylist())}
    assert appended & after  # unindexed corpus rows are twins too


def test_the_plan_bounds_the_heap_when_the_batch_comes_near_the_budget(data, monkeypatch):
    """glibc's heap thresholds (``runtime/memory.py: bounded_heap``) are set for a plan
    whose batch rows take more than half of ``memory_limit``, or that holds shingle sets
    (exact verification), and left alone otherwise; the plans are the same."""
    from lance_minhash_sql.runtime import memory as memory_mod
    from lance_minhash_sql.selfjoin import ingest as plan_module

    calls = []
    monkeypatch.setattr(memory_mod, "_MALLOPT", lambda opt, value: calls.append(opt) or 1)
    bound = [memory_mod._M_MMAP_THRESHOLD, memory_mod._M_TRIM_THRESHOLD] * 2  # set, then restored
    roomy = lms.ingest_plan(data["corpus"], data["batch"], "text", T, memory_limit="64MiB")
    assert calls == []
    lms.ingest_plan(data["corpus"], data["batch"], "text", T, verify="exact", memory_limit="64MiB")
    assert calls == bound
    calls.clear()
    rows = lance.dataset(data["batch"]).count_rows()
    monkeypatch.setattr(plan_module, "_batch_bytes", lambda n, params: n * ((32 << 20) // rows + 1))  # just past half
    assert lms.ingest_plan(data["corpus"], data["batch"], "text", T, memory_limit="64MiB").equals(roomy)
    assert calls == bound
    calls.clear()
    monkeypatch.setattr(plan_module, "_batch_bytes", lambda n, params: n * ((32 << 20) // rows))  # within half
    lms.ingest_plan(data["corpus"], data["batch"], "text", T, memory_limit="64MiB")
    assert calls == []


def test_the_plan_signs_the_batch_once_and_keeps_none_of_it(data, monkeypatch):
    """The walk and the join read one signing of the batch (every text signed counted),
    and the plan leaves none of it in the join's cache."""
    from lance_minhash_sql.index.sign import Signer
    from lance_minhash_sql.runtime.cache import process_caches

    def held() -> int:  # what the join's cache of signed left rows holds
        (n,) = [n for name, unit, n, _ in process_caches() if name == "left rows signed for a join"]
        return n

    signed = []
    sign = Signer.sign
    monkeypatch.setattr(Signer, "sign",
                        lambda self, texts, *a, **k: signed.append(len(texts)) or sign(self, texts, *a, **k))
    lms.clear_cache()  # (other tests' joins leave their left rows there)
    before = lms.ingest_plan(data["corpus"], data["batch"], "text", T)
    assert sum(signed) == lance.dataset(data["batch"]).count_rows() == before.num_rows
    assert held() == 0
    monkeypatch.setattr(Signer, "sign", sign)
    assert lms.ingest_plan(data["corpus"], data["batch"], "text", T).equals(before)


def test_order_by_walks_the_batch_in_that_order(data):
    params = open_index(data["corpus"], "text").params
    plan = lms.ingest_plan(data["corpus"], data["batch"], "text", T, order_by="quality DESC, id DESC")
    t = lance.dataset(data["batch"]).to_table(columns=["id", "quality"], with_row_id=True).to_pylist()
    order = [r["_rowid"] for r in sorted(t, key=lambda r: (-r["quality"], -r["id"], r["_rowid"]))]
    oracle = ingest_oracle(data["corpus"], data["batch"], T, params, order=order)
    assert {k: v[:3] for k, v in _plan_rows(plan).items()} == {k: v[:3] for k, v in oracle.items()}
    assert plan.to_pylist() != lms.ingest_plan(data["corpus"], data["batch"], "text", T).to_pylist()


def _ids(uri: str) -> list:
    return sorted(lance.dataset(uri).to_table(columns=["id"]).column("id").to_pylist())


def _covered(uri: str) -> bool:
    ds = lance.dataset(uri)
    frags = {f.fragment_id for f in ds.get_fragments()}
    segs = lms.connect().sql(f"SELECT fragment_ids FROM minhash_indexes('{uri}')").fetchall()
    covered = set().union(*(set(s[0]) for s in segs))
    return frags <= covered


def test_the_index_update_takes_the_plans_signatures(data, tmp_path, monkeypatch):
    """The ingest signs the batch once: the delta segment stores the plan's signatures of
    the kept rows (no text read again), each under its new row id, as a fresh signing of
    the corpus's texts gives it; a count that does not match the fragments is refused."""
    from lance_minhash_sql.index.sign import Signer
    from lance_minhash_sql.io import manifest
    from lance_minhash_sql.io.segments import iter_signatures, open_segment
    from lance_minhash_sql.lifecycle.optimize import KnownSignatures, optimize
    from naive import signed as naive_signed

    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    counted = []
    sign = Signer.sign
    monkeypatch.setattr(Signer, "sign",
                        lambda self, texts, *a, **k: counted.append(len(texts)) or sign(self, texts, *a, **k))
    r = lms.ingest(corpus, data["batch"], "text", T)
    assert sum(counted) == r.rows_offered and r.rows_appended > 100 and r.index_action == "delta"
    ds = lance.dataset(corpus)
    stored = {}
    for seg in manifest.minhash_segments(ds, "text"):
        for rowids, sigs in iter_signatures(open_segment(manifest.segment_dir(ds, seg.uuid))):
            stored.update(zip(rowids.tolist(), map(bytes, sigs)))
    ids, sigs, _, _, _ = naive_signed(corpus, open_index(corpus, "text").params)
    assert stored == dict(zip(ids.tolist(), map(bytes, np.asarray(sigs, np.uint16))))

    monkeypatch.setattr(Signer, "sign", sign)
    other = _copy(data["corpus"], tmp_path / "o.lance")
    before = lance.dataset(other).version
    lance.write_dataset(lance.dataset(data["batch"]).to_table().slice(0, 10), other, mode="append")
    new = tuple(manifest.fragment_ids(lance.dataset(other)))[-1:]
    with pytest.raises(DatasetError, match="10 rows, but 9 signed rows"):
        optimize(other, "text", merge=0, known=KnownSignatures(new, np.zeros((9, 128), np.uint16), np.ones(9, bool)))
    assert len(manifest.minhash_segments(lance.dataset(other), "text")) == 1
    assert lance.dataset(other).version == before + 1  # the append only


def test_ingest_appends_the_plans_kept_rows_and_indexes_them(data, tmp_path):
    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    before = lance.dataset(corpus)
    plan = lms.ingest_plan(corpus, data["batch"], "text", T, verify="exact")
    kept_rowids = [r["_rowid"] for r in plan.to_pylist() if r["keep"]]
    kept_ids = sorted(lance.dataset(data["batch"]).to_table(columns=["id"], with_row_id=True)
                      .filter(pc.is_in(pc.field("_rowid"), pa.array(kept_rowids, pa.uint64())))
                      .column("id").to_pylist())

    r = lms.ingest(corpus, data["batch"], "text", T, verify="exact")
    assert r.rows_offered == plan.num_rows == r.rows_appended + r.rows_dropped
    assert r.rows_appended == len(kept_rowids) and r.index_action == "delta"
    after = lance.dataset(corpus)
    assert r.dataset_version == after.version == before.version + 1  # one visible step
    assert _ids(corpus) == sorted(_ids(data["corpus"]) + kept_ids)
    assert after.schema == before.schema
    assert _covered(corpus)

    # Lance's own query reads the extended index, and finds an appended row as itself
    t = after.to_table(columns=["id", "text"], with_row_id=True)
    appended = t.filter(pc.is_in(t.column("id"), pa.array(kept_ids)))
    row = next(x for x in appended.to_pylist() if x["text"] and len(x["text"].split()) > 5)
    hits = after.to_table(nearest=MinHashQuery(row["text"], "text"), limit=1, with_row_id=True, columns=["id"])
    assert hits.column("_distance")[0].as_py() == 0.0

    # the corpus's pairs equal those of a fresh copy of its rows with a fresh index
    fresh = str(tmp_path / "fresh.lance")
    lance.write_dataset(after.to_table(columns=["id", "text", "quality"]), fresh)
    lms.build_index(fresh, "text", threshold=T)
    ids_of = {x["_rowid"]: x["id"] for x in t.select(["id", "_rowid"]).to_pylist()}
    fresh_ids = {x["_rowid"]: x["id"] for x in lance.dataset(fresh).to_table(columns=["id"], with_row_id=True)
                 .to_pylist()}

    def pairs(uri, ids):
        out = set()
        for b in lms.pairs(uri, "text", T):
            for a, c in zip(b.column("left_rowid").to_pylist(), b.column("right_rowid").to_pylist()):
                out.add(tuple(sorted((ids[a], ids[c]))))
        return out

    assert pairs(corpus, ids_of) == pairs(fresh, fresh_ids)

    # a rerun appends nothing: every batch row is now in the corpus as its own twin
    again = lms.ingest(corpus, data["batch"], "text", T, verify="exact")
    assert again.rows_appended == 0 and again.index_action == "none"
    assert again.dataset_version == after.version and _ids(corpus) == sorted(_ids(data["corpus"]) + kept_ids)


def test_a_corpus_without_an_index_is_indexed_first(data, tmp_path):
    corpus = str(tmp_path / "bare.lance")
    lance.write_dataset(lance.dataset(data["corpus"]).to_table(columns=["id", "text", "quality"]), corpus)
    with pytest.raises(IndexNotFoundError, match="build_index"):
        lms.ingest_plan(corpus, data["batch"], "text", T)
    r = lms.ingest(corpus, data["batch"], "text", T)
    assert r.index_action == "build" and r.rows_appended > 0 and _covered(corpus)


def test_columns_that_differ_are_refused_and_nothing_is_written(data, tmp_path):
    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    version = lance.dataset(corpus).version
    other = str(tmp_path / "other.lance")
    lance.write_dataset(pa.table({"id": pa.array([1, 2], pa.int32()), "text": ["x y z", "a b c"],
                                  "lang": ["en", "fr"]}), other)
    with pytest.raises(DatasetError) as e:
        lms.ingest(corpus, other, "text", T)
    msg = str(e.value)
    assert "missing from the batch: ['quality']" in msg and "not in the corpus: ['lang']" in msg
    assert "id (int32 in the batch, int64 in the corpus)" in msg and "nothing was written" in msg
    assert lance.dataset(corpus).version == version and lance.dataset(corpus).count_rows() == \
        lance.dataset(data["corpus"]).count_rows()


def test_bad_arguments_are_refused_before_any_work(data):
    for kwargs, what in [({"threshold": 1.5}, "threshold=1.5"), ({"verify": "exakt"}, "verify='exakt'"),
                         ({"order_by": "  "}, "order_by="), ({"memory_limit": "lots"}, "memory_limit")]:
        with pytest.raises(InvalidParameterError, match=what):
            lms.ingest(data["corpus"], data["batch"], "text", **kwargs)
    with pytest.raises(InvalidParameterError, match="order_by="):
        lms.ingest_plan(data["corpus"], data["batch"], "text", order_by="no_such_column")


def test_many_deltas_are_merged_and_the_largest_segment_is_kept(data, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest_module, "INGEST_MAX_SEGMENTS", 3)
    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    base = lms.connect().sql(f"SELECT segment_uuid FROM minhash_indexes('{corpus}')").fetchall()
    t = _table(7).slice(0, 300)
    actions = []
    for i in range(4):
        b = str(tmp_path / f"b{i}.lance")
        lance.write_dataset(t.slice(75 * i, 75), b)
        actions.append(lms.ingest(corpus, b, "text", T).index_action)
    assert actions == ["delta", "delta", "merge", "delta"]
    segs = [s[0] for s in lms.connect().sql(f"SELECT segment_uuid FROM minhash_indexes('{corpus}')").fetchall()]
    assert base[0][0] in segs and len(segs) == 3 and _covered(corpus)


def test_two_ingests_at_once_both_land(data, tmp_path):
    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    t = _table(11)
    batches = []
    for i in range(2):
        b = str(tmp_path / f"b{i}.lance")
        part = t.slice(400 * i, 400)
        lance.write_dataset(part.set_column(0, "id", pa.array(np.arange(400) + 10_000 * (i + 1))), b)
        batches.append(b)
    with ThreadPoolExecutor(2) as workers:
        results = list(workers.map(lambda b: lms.ingest(corpus, b, "text", T), batches))
    ds = lance.dataset(corpus)
    ids = _ids(corpus)
    assert len(ids) == len(set(ids)) == lance.dataset(data["corpus"]).count_rows() + sum(
        r.rows_appended for r in results)
    assert sorted(r.dataset_version for r in results) == [ds.version - 1, ds.version] and _covered(corpus)


def test_another_write_during_the_ingest_fails_it_cleanly(data, tmp_path, monkeypatch):
    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    real = ingest_module.plan_ingest

    def plan_then_write(*args, **kwargs):
        plan = real(*args, **kwargs)
        lance.dataset(corpus).delete("id = 7")  # a write that lands while the ingest runs
        return plan

    monkeypatch.setattr(ingest_module, "plan_ingest", plan_then_write)
    version = lance.dataset(corpus).version
    with pytest.raises(DatasetError, match="changed while the ingest ran"):
        lms.ingest(corpus, data["batch"], "text", T)
    assert lance.dataset(corpus).version == version + 1  # the delete, and nothing else
    assert lance.dataset(corpus).count_rows() == lance.dataset(data["corpus"]).count_rows() - 1


def test_killed_at_any_moment_the_corpus_is_whole_and_a_rerun_completes(data, tmp_path):
    script = os.path.join(HERE, "kill_during_ingest.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))

    def run(corpus, kill_at):
        return subprocess.run([sys.executable, script, corpus, data["batch"], str(kill_at)], capture_output=True,
                              text=True, env=env, timeout=600)

    for name in ("warm", "full"):  # (a first run may compile a kernel, and start a process to compile more)
        full = run(_copy(data["corpus"], tmp_path / f"{name}.lance"), 0)
        assert full.returncode == 0, full.stderr
    total = int(full.stdout.split()[-1])
    expected = _ids(str(tmp_path / "full.lance"))
    rng = np.random.default_rng(5)
    moments = sorted({1, total, *rng.integers(2, total, 3).tolist()})
    for i, at in enumerate(moments):
        corpus = _copy(data["corpus"], tmp_path / f"k{i}.lance")
        version = lance.dataset(corpus).version
        killed = run(corpus, at)
        assert killed.returncode == -9, (at, killed.stderr)
        ds = lance.dataset(corpus)
        assert ds.version in (version, version + 1) and _covered(corpus)
        assert _ids(corpus) in (_ids(data["corpus"]), expected)
        rerun = run(corpus, 0)
        assert rerun.returncode == 0, rerun.stderr
        assert _ids(corpus) == expected and _covered(corpus)


def test_cleanup_removes_old_versions_and_their_files(data, tmp_path):
    corpus = _copy(data["corpus"], tmp_path / "c.lance")

    def size():
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(corpus) for f in fs)

    for _ in range(2):
        lms.build_index(corpus, "text", threshold=T)  # each rebuild keeps the old segment on disk
    lms.ingest(corpus, data["batch"], "text", T)
    latest = lance.dataset(corpus).version
    assert lms.cleanup(corpus) == lms.cleanup(corpus, "7 days")  # nothing is a week old
    big = size()
    r = lms.cleanup(corpus, 0)
    assert r.versions_removed == latest - 1 and r.bytes_removed > 0
    assert big - size() == r.bytes_removed
    ds = lance.dataset(corpus)
    assert ds.version == latest and [v["version"] for v in ds.versions()] == [latest]
    segments = lms.connect().sql(f"SELECT segment_uuid FROM minhash_indexes('{corpus}')").fetchall()
    assert sorted(os.listdir(os.path.join(corpus, "_indices"))) == sorted(s[0] for s in segments)  # the index's own
    assert lms.search_ids(corpus, "text", [ds.take([3], columns=["text"]).column("text")[0].as_py()], k=1) \
        .column("_distance")[0].as_py() == 0.0
    with pytest.raises(InvalidParameterError, match="older_than='a while' is not a duration"):
        lms.cleanup(corpus, "a while")


def test_sql_gives_the_python_answers(data, tmp_path):
    con = lms.connect()
    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    sql = con.sql("SELECT * FROM minhash_ingest_plan(?, ?, 'text', verify := 'exact') ORDER BY _rowid",
                  params=[corpus, data["batch"]]).arrow().read_all()
    assert sql.to_pylist() == lms.ingest_plan(corpus, data["batch"], "text", verify="exact").to_pylist()
    row = con.sql("SELECT * FROM minhash_ingest(?, ?, 'text', verify := 'exact')", params=[corpus, data["batch"]]
                  ).fetchall()
    kept = sum(sql.column("keep").to_pylist())
    assert row[0][:5] == (sql.num_rows, kept, sql.num_rows - kept, lance.dataset(corpus).version, "delta")
    assert con.sql("SELECT versions_removed FROM minhash_cleanup(?, older_than := INTERVAL '0 seconds')",
                   params=[corpus]).fetchall() == [(lance.dataset(corpus).version - 1,)]
    with pytest.raises(Exception, match="minhash_cleanup: older_than := "):
        con.sql("SELECT * FROM minhash_cleanup(?, older_than := INTERVAL '-1 day')", params=[corpus]).fetchall()


def test_the_command_line_ingests_and_cleans_up(data, tmp_path):
    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    cli = [sys.executable, "-m", "lance_minhash_sql.faces.cli"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    plan_file = str(tmp_path / "plan.parquet")
    dry = subprocess.run(cli + ["ingest", corpus, data["batch"], "text", "--output", plan_file, "--quiet"],
                         capture_output=True, text=True, env=env)
    assert dry.returncode == 0, dry.stderr
    kept = sum(pq.read_table(plan_file).column("keep").to_pylist())
    assert f"{kept:,} to append" in dry.stdout and "nothing appended" in dry.stdout
    run = subprocess.run(cli + ["ingest", corpus, data["batch"], "text", "--quiet"], capture_output=True, text=True,
                         env=env)
    assert run.returncode == 0, run.stderr
    assert f"{kept:,} of " in run.stdout and "index: delta" in run.stdout
    clean = subprocess.run(cli + ["cleanup", corpus, "--older-than", "0 seconds"], capture_output=True, text=True,
                           env=env)
    assert clean.returncode == 0 and "old version(s) removed" in clean.stdout
    bad = subprocess.run(cli + ["cleanup", corpus, "--older-than", "soon"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--older-than 'soon'" in bad.stderr


def test_the_review_page_shows_each_dropped_row_beside_its_twin(data, tmp_path):
    plan = {r["_rowid"]: r for r in lms.ingest_plan(data["corpus"], data["batch"], "text", T, verify="exact")
            .to_pylist()}
    out = str(tmp_path / "pages" / "ingest.html")
    r = lms.review_ingest(data["corpus"], data["batch"], "text", T, verify="exact", sample=4, out=out)
    page = open(out, encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and r.offered == len(plan) and r.kept == sum(
        p["keep"] for p in plan.values())
    assert len(r.rows) == 8 and {d.kind for d in r.rows} == {"borderline", "random"}
    params = open_index(data["corpus"], "text").params
    texts = {}
    for name in ("corpus", "batch"):
        t = lance.dataset(data[name]).to_table(columns=["text"], with_row_id=True)
        texts[name] = dict(zip(t.column("_rowid").to_pylist(), t.column("text").to_pylist()))
    from naive import exact_jaccard

    for d in r.rows:
        p = plan[d.rowid]
        assert not p["keep"] and (d.twin_rowid, d.twin_in) == (p["twin_rowid"], p["twin_in"])
        assert d.text == texts["batch"][d.rowid] and d.twin_text == texts[d.twin_in][d.twin_rowid]
        assert d.jaccard == pytest.approx(exact_jaccard(d.text, d.twin_text, params), abs=1e-12)
        assert f'data-rowid="{d.rowid}" data-twin-rowid="{d.twin_rowid}" data-twin-in="{d.twin_in}"' in page
    borderline = [d.jaccard for d in r.rows if d.kind == "borderline"]
    others = [p["jaccard"] for p in plan.values() if not p["keep"]]
    assert borderline == sorted(others)[:4]  # the least similar dropped rows


def test_an_ingest_into_an_object_store_corpus(data, s3):
    """Both datasets on S3 (a local server): the plan is the local one, and the ingest
    appends its kept rows with the index extended, each side with its own options."""
    bucket = s3.make_bucket("lms-ingest")
    opts = s3.storage_options()
    corpus, batch = f"s3://{bucket}/corpus.lance", f"s3://{bucket}/batch.lance"
    lance.write_dataset(lance.dataset(data["corpus"]).to_table(columns=["id", "text", "quality"]), corpus,
                        storage_options=opts)
    lms.build_index(corpus, "text", threshold=T, storage_options=opts)
    lance.write_dataset(lance.dataset(data["batch"]).to_table(columns=["id", "text", "quality"]), batch,
                        storage_options=opts)
    plan = lms.ingest_plan(corpus, batch, "text", T, corpus_storage_options=opts, batch_storage_options=opts)
    r = lms.ingest(corpus, batch, "text", T, corpus_storage_options=opts, batch_storage_options=opts)
    kept = sum(plan.column("keep").to_pylist())
    ds = lance.dataset(corpus, storage_options=opts)
    assert (r.rows_appended, r.index_action, r.dataset_version) == (kept, "delta", ds.version)
    assert ds.count_rows() == lance.dataset(data["corpus"]).count_rows() + kept
    from lance_minhash_sql.io.manifest import minhash_segments

    frags = {f.fragment_id for f in ds.get_fragments()}
    assert frags <= set().union(*(s.fragment_ids for s in minhash_segments(ds, "text")))
    assert lms.cleanup(corpus, 0, storage_options=opts).versions_removed == ds.version - 1


def test_a_batch_of_one_new_row_makes_a_segment_read_without_a_warning(data, tmp_path, caplog):
    """A one-row delta segment's doc column is constant (Lance encodes it so): it is read
    through Lance's reader, and that is not worth a warning."""
    import logging

    corpus = _copy(data["corpus"], tmp_path / "c.lance")
    one = str(tmp_path / "one.lance")
    lance.write_dataset(pa.table({"id": pa.array([10 ** 6]), "text": ["a wholly new text of its own words"],
                                  "quality": pa.array([1], pa.int32())}), one)
    assert lms.ingest(corpus, one, "text", T).rows_appended == 1
    lms.clear_cache()
    with caplog.at_level(logging.WARNING):
        hits = lms.search_ids(corpus, "text", ["a wholly new text of its own words"], k=1)
    assert hits.column("_distance")[0].as_py() == 0.0
    assert not [r for r in caplog.records if "is not read directly" in r.getMessage()]
