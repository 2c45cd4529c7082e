"""The self-join's up-front candidate read (``selfjoin/shards.py:pool_candidates``): when a
segment's signatures do not fit the cache whole but the candidate docs of all shards do,
those docs go into the segment's pool in one sorted pass over the mapped file before
the first shard loads. Pairs and clusters must equal the oracle and the per-shard path's
answers, with deletions, whatever the shard count. Also: clusters skip sorting buckets
by row id where a shard's row ids already ascend with its docs.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import indexed_corpus
from test_pairs import all_shards, as_clusters, as_dict, oracle

from lance_minhash_sql.index.entries import SegmentEntry
from lance_minhash_sql.kernels.pairs import multi_rows
from lance_minhash_sql.runtime.cache import clear_cache, set_cache_capacity
from lance_minhash_sql.selfjoin import shards as shards_mod
from lance_minhash_sql.selfjoin.clusters import clusters, unbounded_clusters
from lance_minhash_sql.selfjoin.pairs import pair_shards, shard_pairs, unbounded_pairs


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    return indexed_corpus(str(tmp_path_factory.mktemp("pooled") / "pooled.lance"), 6000, 2000, "id % 11 = 4")


def candidate_budget(uri: str) -> tuple[int, int]:
    """(bytes the candidates' pool needs beside the row ids, bytes of the whole signatures)."""
    plan = pair_shards(uri, "text", 0.8)[0].plan
    entry = plan.entries[0]
    cand = shards_mod.candidate_docs(plan)[0]
    store = entry.docs
    return cand.size * store.row_bytes + store.num_docs * (8 + 4), store.file_bytes()


def count_pool_docs(monkeypatch) -> list[tuple[int, bool]]:
    """Patch SegmentEntry.pool_docs to record ``(docs asked, all pooled)`` per call."""
    calls: list[tuple[int, bool]] = []
    pool_docs = SegmentEntry.pool_docs

    def counted(self, docs):
        ok = pool_docs(self, docs)
        calls.append((docs.size, ok))
        return ok

    monkeypatch.setattr(SegmentEntry, "pool_docs", counted)
    return calls


def test_candidate_docs_are_every_shards_docs(dataset):
    """candidate_docs lists exactly the docs of every shard's buckets of two rows or more."""
    shards = pair_shards(dataset, "text", 0.8, num_shards=7)
    plan = shards[0].plan
    got = shards_mod.candidate_docs(plan)
    want = []
    for s in shards:
        keys, docs = shards_mod.read_run(plan.entries[0], s.lo, s.hi)
        want.append(multi_rows(keys, docs)[1])
    assert len(got) == 1
    assert np.array_equal(got[0], np.unique(np.concatenate(want)))
    assert 0 < got[0].size < plan.entries[0].docs.num_docs


def test_candidate_docs_of_some_shards_are_those_shards_docs(dataset):
    """With key ranges, candidate_docs lists exactly the docs of those shards' buckets."""
    shards = pair_shards(dataset, "text", 0.8, num_shards=7)
    plan = shards[0].plan
    some = shards_mod.run_together([shards[1], shards[4], shards[5]])
    assert {s.peers for s in some} == {((shards[1].lo, shards[1].hi), (shards[4].lo, shards[4].hi),
                                        (shards[5].lo, shards[5].hi))}
    got = shards_mod.candidate_docs(plan, some[0].peers)
    want = np.unique(np.concatenate([multi_rows(*shards_mod.read_run(plan.entries[0], s.lo, s.hi))[1] for s in some]))
    assert np.array_equal(got[0], want)
    assert 0 < got[0].size < shards_mod.candidate_docs(plan)[0].size


def test_shards_run_together_pool_only_their_candidates(dataset, monkeypatch):
    """A process running some shards (a distributed task) pools their candidates alone, and
    their pairs are the ones those shards give without pooling; a later whole self-join of
    the same plan pools the rest and equals the oracle."""
    want = oracle(dataset, 0.8)
    need, _ = candidate_budget(dataset)

    def some_pairs(together: bool) -> dict:
        shards = pair_shards(dataset, "text", 0.8, num_shards=6)
        picked = [shards[0], shards[3]]
        if together:
            picked = shards_mod.run_together(picked)
        return as_dict([b for s in picked for b in shard_pairs(s)])

    every = shards_mod.candidate_docs(pair_shards(dataset, "text", 0.8)[0].plan)[0].size
    old = set_cache_capacity(need + (64 << 10))
    try:
        pooled = count_pool_docs(monkeypatch)
        clear_cache()
        alone = some_pairs(True)
        first = list(pooled)
        whole = as_dict(unbounded_pairs(dataset, "text", 0.8))
        monkeypatch.setattr(shards_mod, "_pools_candidates", lambda entry: False)
        clear_cache()
        unpooled = some_pairs(False)
    finally:
        set_cache_capacity(old)
        clear_cache()
    assert first and all(ok for _, ok in first)
    assert all(0 < n < every for n, _ in first)  # these shards' candidates, not all of them
    assert alone == unpooled and 0 < len(alone) < len(want)
    assert all(want[p] == s for p, s in alone.items())
    assert whole == want
    assert len(pooled) > len(first)  # the whole self-join pooled its own candidates


def test_a_plan_keeps_the_latest_set_of_ranges_only(dataset):
    """A worker process runs task after task on one cached plan: it keeps the candidates
    of all shards and of the latest set of shards run together, not of every set."""
    need, _ = candidate_budget(dataset)
    old = set_cache_capacity(need + (64 << 10))
    try:
        clear_cache()
        shards = pair_shards(dataset, "text", 0.8, num_shards=6)
        plan = shards[0].plan
        for picked in ([0, 3], [1, 2], [4]):
            for s in shards_mod.run_together([shards[i] for i in picked]):
                list(shard_pairs(s))
        list(unbounded_pairs(dataset, "text", 0.8))
        kept = set(plan.candidates)
    finally:
        set_cache_capacity(old)
        clear_cache()
    assert kept == {None, ((shards[4].lo, shards[4].hi),)}


def test_pooled_candidates_give_the_same_pairs_and_clusters(dataset, monkeypatch):
    want = oracle(dataset, 0.8)
    need, whole = candidate_budget(dataset)
    assert need < whole  # the pooled path has room the whole read has not
    results = {}
    pooled = count_pool_docs(monkeypatch)
    old = set_cache_capacity(need + (64 << 10))
    try:
        for mode in ("pooled", "per shard"):
            if mode == "per shard":
                monkeypatch.setattr(shards_mod, "_pools_candidates", lambda entry: False)
            clear_cache()
            got = [as_dict(unbounded_pairs(dataset, "text", 0.8)),
                   as_dict(all_shards(dataset, 0.8, num_shards=9, chunk_pairs=13)),
                   as_clusters(unbounded_clusters(dataset, "text", 0.8))]
            got.append(as_clusters(unbounded_clusters(dataset, "text", 0.8)))  # again: from the pool kept in the cache
            results[mode] = got
    finally:
        set_cache_capacity(old)
        clear_cache()
    assert pooled and all(ok for _, ok in pooled)
    assert results["pooled"][0] == want and results["pooled"][1] == want
    assert results["pooled"] == results["per shard"]
    assert results["pooled"][2] == results["pooled"][3]


def test_candidates_beyond_the_cache_fall_back_to_each_shards_reads(dataset, monkeypatch):
    """Too little room for the candidates: pool_docs declines once per plan, and the shards
    read their own docs (the answer is the same)."""
    want = oracle(dataset, 0.8)
    need, _ = candidate_budget(dataset)
    calls = count_pool_docs(monkeypatch)
    old = set_cache_capacity(need // 2)
    try:
        clear_cache()
        assert as_dict(all_shards(dataset, 0.8, num_shards=5)) == want
    finally:
        set_cache_capacity(old)
        clear_cache()
    assert [ok for _, ok in calls] == [False]


def test_buckets_in_row_id_order_skip_the_sort(dataset, monkeypatch):
    """Where a shard's row ids ascend with its local ids, ``order_buckets`` would move no
    bucket (so clusters skip it); forcing the sort gives the same clusters."""
    from lance_minhash_sql.kernels.pairs import order_buckets

    for s in pair_shards(dataset, "text", 0.8, num_shards=4):
        data = shards_mod.load_shard(s)
        assert data.rowids_ascend()
        docs = data.docs.copy()
        assert not order_buckets(docs, data.slot, data.rowids, data.starts, data.ends)
        assert np.array_equal(docs, data.docs)
    want = as_clusters(clusters(dataset, "text", 0.8))
    monkeypatch.setattr(shards_mod.ShardData, "rowids_ascend", lambda self: False)
    assert as_clusters(clusters(dataset, "text", 0.8)) == want


def test_rowids_ascend_sees_a_descent():
    keys = np.array([5, 5, 7, 7], dtype=np.uint64)
    docs = np.array([0, 1, 1, 2], dtype=np.uint32)
    data = shards_mod.ShardData(keys, docs, np.array([0, 2]), np.array([2, 4]), np.zeros((3, 4), np.uint16),
                                np.empty(0, np.int32), np.array([10, 30, 20], dtype=np.uint64), 0, None)
    assert not data.rowids_ascend()
    data.rowids = np.array([10, 20, 20], dtype=np.uint64)
    assert data.rowids_ascend()
