"""A few queries without numba (query/query_sign.py, query/probe.py): the same signatures,
band keys and answers as the kernels and as Lance, and a new process that searches once
never loads numba."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import build_native_index
from lance.query import MinHashQuery
from test_search import corpus_table, force_whole_reads, make_queries
from test_signatures import PARAMS, _param_id
from torture import TORTURE_TEXTS

from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.core.tuning import END_ROWS, FANOUT
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.kernels import gather as gather_mod
from lance_minhash_sql.lifecycle.prewarm import warm as prewarm_index
from lance_minhash_sql.query import probe as probe_mod
from lance_minhash_sql.query import engine as search_mod
from lance_minhash_sql.query.query_sign import MAX_QUERIES, fits, sign_queries
from lance_minhash_sql.query.topk import search, search_ids
from lance_minhash_sql.runtime.cache import cache_capacity, clear_cache, set_cache_capacity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    # this process has run the search kernels (other tests did): a few queries would take
    # them, as they do in any process that has (query/topk.py: _few)
    monkeypatch.setattr(search_mod, "search_kernels_loaded", lambda: False)
    monkeypatch.setattr(search_mod, "KERNEL_LOAD_SECONDS", float("inf"))  # never "rent paid"
    old = cache_capacity()
    clear_cache()
    yield
    set_cache_capacity(old)
    clear_cache()


def _texts() -> list[str]:
    t = pa.Table.from_batches(list(generate_batches(300, CorpusSpec(seed=5))))
    return [s for s in TORTURE_TEXTS if s is not None] + t.column("text").to_pylist()


@pytest.mark.parametrize("params", PARAMS, ids=_param_id)
def test_numpy_signatures_equal_the_kernels(params):
    texts = _texts()
    sigs, has, keys = sign_queries(signer_for(params), texts)
    signer = signer_for(params)
    ref_sigs, ref_has = signer.sign(texts)
    assert has.tolist() == ref_has.tolist()
    assert has.sum() > 30  # texts with tokens (the raw tokenizer drops texts of 40 bytes or more)
    assert np.array_equal(sigs[has], ref_sigs[has])
    assert not sigs[~has].any()
    assert np.array_equal(keys[has], signer.band_keys(ref_sigs[has]))


def test_known_answer_vectors():
    # docs/signatures.md: k=4, b=2, shingle_size=2
    sigs, has, keys = sign_queries(signer_for(MinHashParams(4, 2, 2)), ["The quick brown fox", "Fox", "!!!"])
    assert [f"{v:04x}" for v in sigs[0]] == ["b00f", "59d6", "511a", "cd2c"]
    assert [f"{v:016x}" for v in keys[0]] == ["00f30f3501d458ea", "01aec5df28d04915"]
    assert [f"{v:04x}" for v in sigs[1]] == ["2970", "d6db", "65f8", "adfc"]
    assert [f"{v:016x}" for v in keys[1]] == ["003cf6e803312eca", "017c5504fbc83f36"]
    assert has.tolist() == [True, True, False]


def test_a_long_text_signed_in_blocks_equals_the_kernels():
    text = " ".join(f"w{i % 5000}" for i in range(9_000))  # 8,998 shingles: five blocks of minima
    assert fits([text]) and not fits([text * 6]) and not fits(["a"] * (MAX_QUERIES + 1))
    sigs, has, keys = sign_queries(signer_for(MinHashParams()), [text])
    ref, ref_has = signer_for(MinHashParams()).sign([text])
    assert has[0] and ref_has[0] and np.array_equal(sigs[0], ref[0])


@pytest.fixture(scope="module")
def dup_ds(tmp_path_factory):
    """Two fragments, a bucket of 5,000 identical rows (more than a page of band rows: it
    spans pages, with more than one page at that key), deletions after the build."""
    uri = str(tmp_path_factory.mktemp("probe") / "dup.lance")
    table = corpus_table(12_000, seed=4)
    texts = table.column("text").to_pylist()
    for i in range(3000, 8000):
        texts[i] = "one two three four five six seven eight nine ten eleven twelve"
    table = table.set_column(1, "text", pa.array(texts, pa.string()))
    build_native_index(uri, table, MinHashParams(), max_rows_per_file=6000)
    lance.dataset(uri).delete("id % 13 = 0")
    return uri, table


def _kernels(uri, queries, k, **kw):
    """The kernels' answer to each query (search_ids of more queries than the probe takes)."""
    batch = list(queries) * (MAX_QUERIES // len(queries) + 1)
    t = search_ids(uri, "text", batch, k, **kw)
    n = len(queries)
    qi = t.column("query_index").to_numpy()
    return [list(zip(t.column("_rowid").to_numpy()[qi == i].tolist(),
                     t.column("_distance").to_numpy()[qi == i].tolist())) for i in range(n)]


def _lance(uri, q, k, **kw):
    t = lance.dataset(uri).to_table(nearest=MinHashQuery(q, "text"), limit=k, columns=["_distance"],
                                    with_row_id=True, **kw)
    return list(zip(t.column("_rowid").to_pylist(), t.column("_distance").to_pylist()))


def _probed(uri, q, k, monkeypatch, compiled=False, **kw):
    """The answer, and whether each probe of the kind asked (``compiled``: the bucket search
    of kernels/gather.py, else numpy) answered."""
    calls = []
    real = probe_mod.probe_topk

    def spy(*a, **kws):
        out = real(*a, **kws)
        if kws.get("compiled", False) == compiled:
            calls.append(out is not None)
        return out

    monkeypatch.setattr(search_mod, "probe_topk", spy)
    t = search_ids(uri, "text", q, k, **kw)
    monkeypatch.setattr(search_mod, "probe_topk", real)
    return list(zip(t.column("_rowid").to_pylist(), t.column("_distance").to_pylist())), calls


def test_probe_equals_lance_and_the_kernels(dup_ds, monkeypatch):
    uri, table = dup_ds
    queries = make_queries(table, 30, seed=7) + [table.column("text")[3000].as_py()]
    kernels = _kernels(uri, queries, 10)
    served = 0
    for q, want in zip(queries, kernels):
        got, calls = _probed(uri, q, 10, monkeypatch)
        assert got == want == _lance(uri, q, 10), q
        served += calls == [True]
    _, has, _ = sign_queries(signer_for(MinHashParams()), queries[:MAX_QUERIES])
    _, has2, _ = sign_queries(signer_for(MinHashParams()), queries[MAX_QUERIES:])
    assert served == has.sum() + has2.sum() > 40  # every query with tokens (the others return early)
    # the big bucket: 5,000 rows less the deleted, the lowest row ids first
    got, calls = _probed(uri, table.column("text")[3000].as_py(), 10, monkeypatch)
    assert calls == [True] and [d for _, d in got] == [0.0] * 10
    assert [r for r, _ in got] == sorted(r for r, _ in got) and len(got) == 10


def test_with_numba_loaded_a_few_queries_take_the_compiled_probe(dup_ds, monkeypatch):
    uri, table = dup_ds
    monkeypatch.setattr(search_mod, "search_kernels_loaded", lambda: True)
    force_whole_reads(monkeypatch, False)  # the segment stays on its files (held whole, the kernels answer)
    queries = make_queries(table, 30, seed=7) + [table.column("text")[3000].as_py()]
    served = 0
    for q, want in zip(queries, _kernels(uri, queries, 10)):
        got, calls = _probed(uri, q, 10, monkeypatch, compiled=True)
        numpy_calls = _probed(uri, q, 10, monkeypatch)[1]
        assert got == want == _lance(uri, q, 10), q
        assert numpy_calls == []
        served += calls == [True]
    assert served > 40
    got, calls = _probed(uri, queries[:3], 10, monkeypatch, compiled=True, filter="score < 50")
    assert calls == [True]
    assert got == [hit for q in queries[:3] for hit in _lance(uri, q, 10, filter="score < 50", prefilter=True)]
    # more queries than a probe takes, or the segment held whole in memory: the batch kernels
    assert _probed(uri, queries[:MAX_QUERIES + 1], 10, monkeypatch, compiled=True)[1] == []
    assert prewarm_index(open_index(uri, "text")).complete
    got, calls = _probed(uri, queries[0], 10, monkeypatch, compiled=True)
    assert calls == [] and got == _lance(uri, queries[0], 10)


def test_the_compiled_bucket_search_finds_the_numpy_bounds(dup_ds):
    from lance_minhash_sql.kernels.gather import mapped_bucket_bounds, mapped_bucket_bounds_numpy, values_at

    uri, table = dup_ds
    entry = open_index(uri, "text").segment_entries()[0]
    rng = np.random.default_rng(2)
    for _ in range(2):  # the memory map, then the keys held whole (one chunk)
        values, first_row, value_index, _docs = entry.band_chunks()
        store = entry.bands
        present = values_at(values, first_row, value_index, rng.integers(0, store.num_rows, 400))
        spread = (rng.integers(0, 16, 400, dtype=np.uint64) << np.uint64(56)) | rng.integers(0, 1 << 56, 400,
                                                                                               dtype=np.uint64)
        edges = np.concatenate([store.page_table, store.page_table + np.uint64(1), store.page_table - np.uint64(1),
                                np.array([0, 1, 2**64 - 2, 2**64 - 1], dtype=np.uint64)])
        keys = np.concatenate([present, spread, edges])
        got = mapped_bucket_bounds(values, first_row, value_index, store.page_table, store.page_rows,
                                   store.num_rows, keys)
        want = mapped_bucket_bounds_numpy(values, first_row, value_index, store.page_table, store.page_rows,
                                          store.num_rows, keys)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        every = values_at(values, first_row, value_index, np.arange(store.num_rows))  # the obvious way
        assert np.array_equal(got[0], np.searchsorted(every, keys, side="left"))
        assert np.array_equal(got[1], np.searchsorted(every, keys, side="right"))
        assert (got[1] - got[0]).max() > store.page_rows  # the 5,000-row bucket spans pages
        assert first_row.size > 1 or entry.bands.full
        assert prewarm_index(open_index(uri, "text")).complete


@pytest.mark.filterwarnings("ignore::lance_minhash_sql.core.errors.LowRecallWarning")
def test_probe_with_a_filter_and_a_threshold(dup_ds, monkeypatch):
    uri, table = dup_ds
    queries = make_queries(table, 12, seed=9)
    for q, want in zip(queries, _kernels(uri, queries, 10, filter="score < 50")):
        got, calls = _probed(uri, q, 10, monkeypatch, filter="score < 50")
        assert got == want == _lance(uri, q, 10, filter="score < 50", prefilter=True)
    for q, want in zip(queries, _kernels(uri, queries, None, threshold=0.5)):
        got, _ = _probed(uri, q, None, monkeypatch, threshold=0.5)
        assert got == want and all(1 - d >= 0.5 for _, d in got)


def test_probe_over_segments_unindexed_rows_and_memory(tmp_path, monkeypatch):
    uri = str(tmp_path / "seg.lance")
    table = corpus_table(4000, seed=8)
    lance.write_dataset(table.slice(0, 2500), uri)
    build_index(uri, "text")
    lance.write_dataset(table.slice(2500, 1000), uri, mode="append")
    from lance_minhash_sql.lifecycle.optimize import optimize

    optimize(uri, "text", merge=0)  # a second segment
    lance.write_dataset(table.slice(3500, 500), uri, mode="append")  # rows no segment covers
    queries = make_queries(table, 16, seed=3)
    for q, want in zip(queries, _kernels(uri, queries, 7)):
        got, calls = _probed(uri, q, 7, monkeypatch)
        assert got == want == _lance(uri, q, 7)
    assert len(open_index(uri, "text").segment_entries()) == 2
    assert prewarm_index(open_index(uri, "text")).complete  # now both segments are in memory
    for q, want in zip(queries, _kernels(uri, queries, 7)):
        got, calls = _probed(uri, q, 7, monkeypatch)
        assert got == want and calls in ([True], [])


def test_the_kernels_take_over_when_the_probe_cannot(dup_ds, monkeypatch):
    uri, table = dup_ds
    q = table.column("text")[3000].as_py()
    want = _lance(uri, q, 10)
    limit = probe_mod.MAX_CANDIDATES
    monkeypatch.setattr(probe_mod, "MAX_CANDIDATES", 100)  # the 5,000-row bucket is too big
    got, calls = _probed(uri, q, 10, monkeypatch)
    assert got == want and calls == [False]
    monkeypatch.setattr(probe_mod, "MAX_CANDIDATES", limit)
    clear_cache()
    set_cache_capacity(1)  # no room for the row ids: direct reads are refused
    got, calls = _probed(uri, q, 10, monkeypatch)
    assert got == want and calls == [False]


def test_a_probe_reads_a_few_keys_per_band(dup_ds, monkeypatch):
    uri, table = dup_ds
    read = []
    real = gather_mod.values_at
    monkeypatch.setattr(gather_mod, "values_at", lambda *chunks_rows: (read.append(chunks_rows[-1].size),
                                                                       real(*chunks_rows))[1])
    q = table.column("text")[17].as_py()
    got = search(uri, "text", q, 5, columns=["id"])
    assert got["id"].to_pylist()[0] == 17
    # a band's start in one page of 4,096 rows: two steps of 64 keys; its end from the
    # rows after the start (a bucket of one row)
    assert read == [16 * FANOUT] * 2 + [16 * END_ROWS]


FIRST_QUERY = textwrap.dedent("""
    import json, sys, warnings
    import lance_minhash_sql as lms
    warnings.simplefilter("ignore")
    con = lms.connect()
    uri, q = sys.argv[1:3]
    a = con.execute(f"SELECT _rowid, _distance FROM minhash_search_ids('{uri}', 'text', ?, 5)", [q]).fetchall()
    b = con.execute(f"SELECT id, _distance FROM minhash_search('{uri}', 'text', ?, 3)", [q]).fetchall()
    c = lms.search(uri, "text", q, 3, columns=["id"]).to_pylist()
    d = con.execute(f"SELECT count(*) FROM minhash_search_ids('{uri}', 'text', '', 5)").fetchall()
    print(json.dumps({"numba": "numba" in sys.modules, "ids": a, "rows": b, "py": c, "empty": d}))
""")


def test_a_new_process_searching_once_loads_no_numba(dup_ds):
    uri, table = dup_ds
    q = table.column("text")[42].as_py()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", FIRST_QUERY, uri, q], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["numba"] is False
    want = _lance(uri, q, 5)
    assert [tuple(r) for r in out["ids"]] == [(r, d) for r, d in want]
    assert [r[0] for r in out["rows"]] == [r["id"] for r in out["py"]] == [42] + [r[0] for r in out["rows"]][1:]
    assert out["empty"] == [[0]]


def test_the_search_tests_pass_through_the_probe(tmp_path, monkeypatch):
    """tests/test_search.py's scenarios with single queries answered by numpy: each checks
    every single-query search() (the probe here) and a batch (the kernels) against Lance."""
    import test_search as ts

    calls = []
    real = probe_mod.probe_topk
    monkeypatch.setattr(search_mod, "probe_topk", lambda *a, **kw: (calls.append(1), real(*a, **kw))[1])
    ts.test_deletions_after_build_are_masked_before_the_cut(tmp_path / "del", "auto")
    ts.test_fully_deleted_fragment(tmp_path / "gone")
    ts.test_appended_unindexed_fragments(tmp_path / "app")
    ts.test_stable_row_ids(tmp_path / "stable")
    ts.test_compaction_after_deletions(tmp_path / "compact", False)
    ts.test_compaction_after_deletions(tmp_path / "compact-stable", True)
    ts.test_multi_segment_index(tmp_path / "multi")
    assert len(calls) > 100


AFTER_BUILD = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import lance_minhash_sql as lms
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.kernels.config import COMPILES, load_numba, numba_loaded
    from lance_minhash_sql.kernels.lsh import search_kernels_loaded
    uri = sys.argv[1]
    write_corpus(uri, 3000)
    load_numba()  # a build by the kernels (a small one would take numpy: index/numpy_sign.py)
    lms.build_index(uri, "text")
    loaded = numba_loaded()
    one = lms.search_ids(uri, "text", "Cc rg goq uh ezi onozr avu sk uh", 5).num_rows
    after_one = search_kernels_loaded()
    lms.search_ids(uri, "text", ["a b c d"] * 17, 5)  # a batch takes the kernels
    print(json.dumps({"numba": loaded, "after_one": after_one, "after_batch": search_kernels_loaded()}))
""")


def test_after_a_build_a_single_query_still_needs_no_search_kernel(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", AFTER_BUILD, str(tmp_path / "b.lance")], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"numba": True, "after_one": False, "after_batch": True}


def test_numpy_answers_until_their_time_reaches_the_kernels_load(dup_ds, monkeypatch):
    uri, table = dup_ds
    queries = [table.column("text")[i].as_py() for i in (11, 12, 13, 14)]
    monkeypatch.setattr(search_mod.NUMPY_SECONDS, "value", 0.0)
    monkeypatch.setattr(search_mod, "KERNEL_LOAD_SECONDS", 1e9)
    routes = [_probed(uri, q, 5, monkeypatch)[1] for q in queries[:2]]
    spent = search_mod.NUMPY_SECONDS.value
    assert routes == [[True], [True]] and spent > 0
    monkeypatch.setattr(search_mod, "KERNEL_LOAD_SECONDS", spent)  # the rent now equals the load
    got, calls = _probed(uri, queries[2], 5, monkeypatch)
    assert calls == [] and got == _lance(uri, queries[2], 5)  # the kernels answered
    assert search_mod.NUMPY_SECONDS.value == spent


def _brute_topk(uri: str, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
    """Slow, obvious top-k: every live row's stored signature against the query's, the
    candidates being the rows that share a band key, ordered by (distance, row id)."""
    t = lance.dataset(uri).to_table(columns=["text"], with_row_id=True)
    params = open_index(uri, "text").params
    signer = signer_for(params)
    sigs, has = signer.sign(t.column("text").to_pylist())
    keys = signer.band_keys(sigs)
    rowids = t.column("_rowid").to_numpy()
    out = []
    qsigs, _ = signer.sign(queries)
    qkeys = signer.band_keys(qsigs)
    for qs, qk in zip(qsigs, qkeys):
        cand = has & (keys == qk).any(axis=1)
        eq = (sigs[cand] == qs).sum(axis=1)
        dist = (np.float32(1) - np.float32(eq) / np.float32(params.num_hashes)).astype(np.float32)
        order = np.lexsort((rowids[cand], dist))[:k]
        out.append(list(zip(rowids[cand][order].tolist(), dist[order].tolist())))
    return out


def test_both_engines_answer_alike_on_segments_out_of_row_id_order(tmp_path):
    # Identical texts in both segments tie at distance 0: the top-k cut must take the
    # smallest row ids whatever order the segments are listed in, in both engines.
    uri = str(tmp_path / "ties.lance")
    table = corpus_table(3000, seed=11)
    texts = table.column("text").to_pylist()
    same = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    for i in list(range(100, 130)) + list(range(2100, 2130)):
        texts[i] = same
    table = table.set_column(1, "text", pa.array(texts, pa.string()))
    lance.write_dataset(table.slice(0, 2000), uri)
    build_index(uri, "text")
    lance.write_dataset(table.slice(2000, 1000), uri, mode="append")
    from lance_minhash_sql.lifecycle.optimize import optimize
    from lance_minhash_sql.query.probe import probe_topk
    from lance_minhash_sql.query.engine import topk
    from lance_minhash_sql.query.kernel_topk import kernel_topk

    optimize(uri, "text", merge=0)  # a second segment, over the later row ids
    queries = [same] + make_queries(table, 7, seed=5)
    want = _brute_topk(uri, queries, 10)
    assert [r for r, _ in want[0]] == list(range(100, 110))
    opened = open_index(uri, "text")
    assert len(opened.segments) == 2
    signer = signer_for(opened.params)
    qsigs, _ = signer.sign(queries)
    qsigs = np.ascontiguousarray(qsigs)
    qkeys = np.ascontiguousarray(signer.band_keys(qsigs))
    qsigs.setflags(write=False)
    qkeys.setflags(write=False)

    def ok_of(ids):
        return np.ones(ids.size, dtype=np.bool_)

    for order in (slice(None), slice(None, None, -1)):  # the manifest's order, then reversed
        entries = opened.segment_entries()[order]
        answers = {"numpy": probe_topk(entries, qsigs, qkeys, 10, ok_of),
                   "kernels": kernel_topk(entries, qsigs, qkeys, 10, ok_of)}
        for engine, answer in answers.items():
            assert answer is not None, engine
            q, rid, dist, counts = answer
            got = [list(zip(rid[q == i].tolist(), dist[q == i].tolist())) for i in range(len(queries))]
            assert got == want, (engine, order)
    # and through the public entry point, each engine forced
    for engine in ("numpy", "kernels"):
        q, rid, dist = topk(opened, pa.array(queries, pa.string()), 10, engine=engine)
        got = [list(zip(rid[q == i].tolist(), dist[q == i].tolist())) for i in range(len(queries))]
        assert got == want, engine


def test_an_unknown_engine_is_refused_by_name(dup_ds):
    from lance_minhash_sql.core.errors import InvalidParameterError
    from lance_minhash_sql.query.engine import topk

    uri, table = dup_ds
    opened = open_index(uri, "text")
    texts = pa.array([table.column("text")[5].as_py()], pa.string())
    for bad in ("fast", "", None, 1):
        with pytest.raises(InvalidParameterError, match=r"engine=.* is not a search engine: use 'auto'"):
            topk(opened, texts, 5, engine=bad)
    q, rid, _ = topk(opened, texts, 5, engine="NUMPY")  # case-insensitive, as every choice
    assert rid.tolist() == [r for r, _ in _lance(uri, texts[0].as_py(), 5)]
