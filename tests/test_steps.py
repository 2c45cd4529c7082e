"""The self-join under a memory budget (``selfjoin/steps.py``): what it holds, and that the
answers do not depend on it.

The oracle tests of pairs, clusters, dedup and join run at three budgets through the
``self_join_budget`` fixture (``conftest.py``); here: that the small budget really reads in
groups, windows and chunks, that a giant bucket is never held whole, the bit-set and union-find kernels against plain numpy, the row id runs,
and the errors of ``memory_limit`` in Python, SQL and the CLI.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

from conftest import TIGHT_BUDGET, indexed_corpus
import naive
from naive import oracle_clusters
from test_pairs import PARAMS, as_clusters, as_dict, components, oracle

from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core import budget as core_budget
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.errors import InvalidParameterError, LowRecallWarning, ResourceLimitError
from lance_minhash_sql.faces import cli
from lance_minhash_sql.faces.corpus import generate_batches, write_corpus
from lance_minhash_sql.index import rowid_runs
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.selfjoin import pool, sizing
from lance_minhash_sql.selfjoin.clusters import clusters
from lance_minhash_sql.selfjoin.dedup import dedup, keep_flags
from lance_minhash_sql.selfjoin.join import join
from lance_minhash_sql.selfjoin.pairs import pairs
from lance_minhash_sql.kernels.components import (count_unmarked, flatten_roots, linked_members, marked_ids,
                                                  new_marks, ranks, set_marks, union_min)

COPIES = 200_000
CROWD_T = 0.5  # the crowded bucket's threshold: its texts share about 45 % of their values


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    return indexed_corpus(str(tmp_path_factory.mktemp("bounded") / "corpus.lance"), 4000, 1500, "id % 11 = 4")


def reset_stats() -> None:
    pool.STATS.update(max_pool_rows=0, groups=0, streamed_shards=0, pruned_rows=0, fetched_rows=0, carried_rows=0)


def test_a_small_budget_reads_in_groups_and_windows_with_the_same_answers(corpus, monkeypatch):
    """The fixture's small budget pools this corpus's candidates in several groups of
    several shards; a smaller pool with larger shards reads every shard alone, window by
    window; a large budget reads everything in one group. The answers never change."""
    want_pairs, want_clusters = oracle(corpus, 0.8), oracle_clusters(corpus, "text", 0.8, PARAMS)
    for limit, shard_rows, mode in ((TIGHT_BUDGET, 1024, "groups"), (128 << 10, 4096, "windows"),
                                    (64 << 30, 1024, "whole")):
        monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", limit)
        monkeypatch.setattr(sizing, "MIN_SHARD_ROWS", shard_rows)
        shards = -(-4000 * 16 // sizing.shard_rows(Budget.of(limit)))
        reset_stats()
        assert as_dict(pairs(corpus, "text", 0.8)) == want_pairs
        assert as_clusters(clusters(corpus, "text", 0.8)) == want_clusters
        groups, streamed, held = pool.STATS["groups"], pool.STATS["streamed_shards"], pool.STATS["max_pool_rows"]
        if mode == "groups":
            assert 4 < groups < shards and streamed == 0
            assert held <= sizing.pool_rows(Budget.of(limit), 128)
        elif mode == "windows":
            # pairs and clusters: the first band's shards alone, in windows; the later bands'
            # buckets mostly repeat the first's, and what is left of them may fit a pool
            assert streamed >= 2 and groups <= 2 * shards
            assert held <= sizing.pool_rows(Budget.of(limit), 128)
        else:
            assert groups == 2 and streamed == 0  # one group each for pairs and clusters


def test_buckets_that_repeat_an_earlier_band_are_pruned_with_the_same_answers(corpus, monkeypatch):
    """Shards are taken band after band; a bucket whose docs are already one component
    (clusters) or all carry one pure bucket's label (pairs) is dropped before its
    signatures are read. Both prune on this corpus, and the answers stay the oracles'."""
    monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", TIGHT_BUDGET)
    reset_stats()
    assert as_dict(pairs(corpus, "text", 0.8)) == oracle(corpus, 0.8)
    assert pool.STATS["pruned_rows"] > 0
    reset_stats()
    assert as_clusters(clusters(corpus, "text", 0.8)) == oracle_clusters(corpus, "text", 0.8, PARAMS)
    assert pool.STATS["pruned_rows"] > 0



def test_labels_past_their_part_are_held_in_a_file_and_still_prune(corpus, monkeypatch):
    """Labels (4 bytes a doc) that do not fit the budget's ``labels`` part are held in a
    temporary file instead of going without: buckets are still pruned, the pairs are the
    oracle's, and the file is gone once the pairs are read."""
    import dataclasses
    import glob
    import os
    import tempfile

    from lance_minhash_sql.io.file_arrays import TEMP_PREFIX

    monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", TIGHT_BUDGET)
    of = Budget.of.__func__
    monkeypatch.setattr(Budget, "of", classmethod(lambda cls, n: dataclasses.replace(of(cls, n), labels=0)))
    assert not sizing.pairs_pool(4000, 128, Budget.of(TIGHT_BUDGET))[0]
    folders = set(glob.glob(os.path.join(tempfile.gettempdir(), TEMP_PREFIX + "*")))
    reset_stats()
    before = pool.STATS["labels_in_file"]
    assert as_dict(pairs(corpus, "text", 0.8)) == oracle(corpus, 0.8)
    assert pool.STATS["labels_in_file"] == before + 1 and pool.STATS["pruned_rows"] > 0
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), TEMP_PREFIX + "*"))) == folders


def test_a_carried_pool_holds_the_signatures_of_each_groups_docs(corpus):
    """Successive groups' docs (overlapping, so rows are carried and the pool leaves doc
    order), a drop between: every pool row given for a doc holds that doc's signature, row
    id and liveness as a fresh fetch reads them."""
    from lance_minhash_sql.selfjoin.shards import plan_shards

    plan = plan_shards(corpus, "text", 0.8, 4, None)[0].plan
    carried = pool.CarriedPool(plan, 1500)
    rng = np.random.default_rng(3)
    reset_stats()
    for step in range(6):
        if step == 3:
            carried.drop()
        ugids = np.sort(rng.choice(plan.total_docs, 1200, replace=False)).astype(np.uint32)
        rows = carried.fill(ugids)
        want = np.empty((ugids.size, plan.params.num_hashes), dtype=np.uint16)
        want_rowids = pool.fetch_signatures(plan, ugids, want)
        assert np.array_equal(carried.sigs[rows], want)
        assert np.array_equal(carried.rowids[rows], want_rowids)
        assert np.array_equal(carried.gids[rows], ugids)
        assert np.array_equal(carried.alive[rows], plan.opened.liveness.alive(want_rowids))
        assert np.array_equal(np.sort(rows), np.arange(ugids.size))
    assert pool.STATS["carried_rows"] > 0
    assert pool.STATS["carried_rows"] + pool.STATS["fetched_rows"] == 6 * 1200

def _buckets(keys, gids):
    """Plain Python: the buckets of sorted band rows as lists of (key, gid)."""
    out: list = []
    for k, g in zip(keys.tolist(), gids.tolist()):
        if out and out[-1][0][0] == k:
            out[-1].append((k, g))
        else:
            out.append([(k, g)])
    return out


def test_prune_kernels_against_plain_python():
    from lance_minhash_sql.kernels.prune import drop_joined, drop_labelled, marked_buckets

    rng = np.random.default_rng(11)
    for _ in range(30):
        n, docs = int(rng.integers(0, 60)), 20
        keys = np.sort(rng.integers(0, 12, n)).astype(np.uint64)
        gids = rng.integers(0, docs, n).astype(np.uint32)
        parent = np.arange(docs, dtype=np.int32)
        union_min(parent, rng.integers(0, docs, 8).astype(np.uint32), rng.integers(0, docs, 8).astype(np.uint32))
        flat = parent.copy()
        flatten_roots(flat)
        labels = rng.integers(0, 3, docs).astype(np.uint32)
        marks = new_marks(docs)
        set_marks(marks, np.unique(rng.integers(0, docs, 14)).astype(np.uint32), True)
        marked = set(marked_ids(marks)[0].tolist())

        def kept(rule):
            rows = [r for b in _buckets(keys, gids) if rule([g for _, g in b]) for r in b]
            return [k for k, _ in rows], [g for _, g in rows]

        got = drop_joined(keys, gids, parent)
        assert [a.tolist() for a in got] == list(kept(lambda b: len({int(flat[g]) for g in b}) > 1))
        got = drop_labelled(keys, gids, labels)
        assert [a.tolist() for a in got] == list(kept(lambda b: len({int(labels[g]) for g in b}) > 1
                                                      or labels[b[0]] == 0))
        got = marked_buckets(keys, gids, marks)
        assert [a.tolist() for a in got] == list(kept(lambda b: all(g in marked for g in b)))


def test_a_key_collision_is_never_labelled():
    """Two docs sharing a band key but not its values (a 56-bit collision) must not get a
    label: a later band where their values are equal is the one that reports them."""
    from lance_minhash_sql.kernels.prune import label_pure

    r, k = 2, 8
    sigs = np.arange(5 * k, dtype=np.uint16).reshape(5, k)
    sigs[1, 2:4] = sigs[0, 2:4]  # docs 0 and 1: equal values in band 1
    sigs[3, 2:4] = sigs[2, 2:4]
    sigs[4, 2:4] = sigs[2, 2:4]
    sigs[4, 3] += 1  # doc 4 shares band 1's key with docs 2 and 3, not its values
    band1 = np.uint64(1 << 56)
    keys = np.array([band1 + 5, band1 + 5, band1 + 9, band1 + 9, band1 + 9], np.uint64)
    docs = np.arange(5, dtype=np.uint32)
    gids = np.array([10, 11, 12, 13, 14], np.int64)
    labels = np.zeros(16, np.uint32)
    n = label_pure(keys, docs, np.array([0, 2]), np.array([2, 5]), sigs, gids, r, labels, 7)
    assert n == 1 and labels.tolist() == [0] * 10 + [7, 7] + [0] * 4


@pytest.fixture(scope="module")
def giant(tmp_path_factory) -> str:
    """One text repeated 200,000 times among 2,000 ordinary rows, a few copies deleted."""
    uri = str(tmp_path_factory.mktemp("giant200k") / "giant.lance")
    base = pa.Table.from_batches(list(generate_batches(2000)))
    text = "the same boilerplate footer appended to every page of the crawl, word for word"
    texts = pa.concat_arrays([base.column("text").combine_chunks(), pa.array([text] * COPIES, pa.string())])
    rng = np.random.default_rng(5)
    order = rng.permutation(len(texts))
    table = pa.table({"id": pa.array(np.arange(len(texts))), "text": texts.take(pa.array(order))})
    lance.write_dataset(table, uri, max_rows_per_file=60_000)
    build_index(uri, "text")
    lance.dataset(uri).delete("id % 10007 = 3")
    return uri


def test_a_giant_bucket_is_never_held_whole(giant):
    """Under a 4 MiB budget a shard holds at most a few thousand signature rows, never the
    200,000 rows of the bucket (``STATS['max_pool_rows']`` is the most any read held);
    the clusters equal the representatives' rule (tests/naive.py), and dedup keeps
    exactly one row of each cluster."""
    want = oracle_clusters(giant, "text", 0.8, PARAMS)
    copies = lance.dataset(giant).to_table(columns=["text"], with_row_id=True)
    dup_text = "the same boilerplate footer appended to every page of the crawl, word for word"
    dup = {r for r, t in zip(copies.column("_rowid").to_pylist(), copies.column("text").to_pylist()) if t == dup_text}
    assert len(dup) > COPIES * 0.99
    reset_stats()
    got = clusters(giant, "text", 0.8, memory_limit="4MiB")
    assert pool.STATS["max_pool_rows"] < 20_000  # the bucket's 200,000 rows never at once
    assert pool.STATS["streamed_shards"] >= 16  # the bucket's shard of every band, window by window
    by_cluster = as_clusters(got)
    assert by_cluster == want
    first = min(dup)
    assert {r for r, c in by_cluster.items() if c == first} == dup
    flags = keep_flags(giant, "text", 0.8, memory_limit="4MiB")
    keep = flags.column("keep").to_numpy(zero_copy_only=False)
    cid = flags.column("cluster_id").to_numpy()
    assert np.array_equal(np.sort(cid[keep]), np.unique(cid))  # exactly one kept per cluster
    r = dedup(giant, "text", 0.8, memory_limit="4MiB")
    assert r.removed == len(by_cluster) - len(set(by_cluster.values())) and r.removed >= len(dup) - 1


def crowded_texts(seed: int = 11) -> list[str]:
    """Texts in row order whose clusters need every representative of one giant bucket
    (``naive.REPS``): variants of one text (a block of 20 of its 60 words replaced) that
    share the key of one band, pairwise under :data:`CROWD_T`; after the ``REPS``-th of
    them (``x``) a text similar to ``x`` alone and sharing no other bucket with it, then
    more of the crowd. With one representative fewer, ``x`` is no representative and its
    similar text finds nothing to link to."""
    from lance_minhash_sql.faces.corpus import vocabulary
    from lance_minhash_sql.index.sign import signer_for

    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary().to_pylist())
    signer = signer_for(PARAMS)
    min_eq = naive.min_equal(CROWD_T, PARAMS.num_hashes)

    def variants(words, n, block):
        out = []
        for _ in range(n):
            w = words.copy()
            p = int(rng.integers(0, w.size - block + 1))
            w[p:p + block] = rng.choice(vocab, block)
            out.append(w)
        sigs, _ = signer.sign(pa.array([" ".join(w) for w in out]))
        return out, sigs, signer.band_keys(sigs)

    base = rng.choice(vocab, 60)
    words, sigs, keys = variants(base, 4000, 20)
    band = int(np.argmax([np.unique(keys[:, j], return_counts=True)[1].max() for j in range(keys.shape[1])]))
    values, counts = np.unique(keys[:, band], return_counts=True)
    crowd: list[int] = []
    for i in np.flatnonzero(keys[:, band] == values[np.argmax(counts)]):
        if all((sigs[i] == sigs[j]).sum() < min_eq for j in crowd):
            crowd.append(int(i))
    x = crowd[naive.REPS - 1]
    near, near_sigs, near_keys = variants(words[x], 4000, 6)
    for w, s, k in zip(near, near_sigs, near_keys):
        others = np.delete(sigs[crowd], naive.REPS - 1, axis=0)
        if ((s == sigs[x]).sum() >= min_eq and k[band] == keys[x, band]
                and (k == keys[x]).sum() == 1 and ((others == s).sum(axis=1) < min_eq).all()):
            break
    else:
        raise AssertionError("no text similar to the crowd's representative alone")
    order = [" ".join(words[i]) for i in crowd]
    return order[:naive.REPS] + [" ".join(w)] + order[naive.REPS:]
@pytest.fixture(scope="module")
def crowded(tmp_path_factory) -> str:
    uri = str(tmp_path_factory.mktemp("crowded") / "crowded.lance")
    lance.write_dataset(pa.table({"text": crowded_texts()}), uri)
    build_index(uri, "text")
    return uri


def test_a_giant_bucket_keeps_every_representative(crowded, monkeypatch):
    """A bucket linked in chunks of rows (windows of 20 rows under a 20 KiB budget) keeps
    all ``naive.REPS`` representatives: the clusters equal the rule's, which here differ
    from those of one representative fewer."""
    want = oracle_clusters(crowded, "text", CROWD_T, PARAMS)
    assert want != oracle_clusters(crowded, "text", CROWD_T, PARAMS, reps=naive.REPS - 1) == {}
    monkeypatch.setattr(sizing, "MIN_WINDOW_ROWS", 20)
    monkeypatch.setattr(core_budget, "DEFAULT_SELF_JOIN_MEMORY", 20 << 10)
    reset_stats()
    with pytest.warns(LowRecallWarning):
        got = as_clusters(clusters(crowded, "text", CROWD_T))
    assert pool.STATS["streamed_shards"] >= 1 and pool.STATS["max_pool_rows"] < 40  # the bucket in chunks
    assert got == want and len(want) == 2


def test_the_budget_of_a_pairs_shard_through_sql_and_the_cli(corpus, tmp_path, capsys):
    from lance_minhash_sql.duck.install import connect

    con = connect()
    want = oracle(corpus, 0.8)
    for limit in ("'4MiB'", "4194304", "NULL"):
        got = con.sql(f"SELECT left_rowid, right_rowid, similarity FROM minhash_pairs('{corpus}', 'text', "
                      f"memory_limit := {limit})").fetchall()
        assert {(a, b): s for a, b, s in got} == want
    out = str(tmp_path / "c.csv")
    assert cli.main(["clusters", corpus, "text", "--memory-limit", "4MiB", "--output", out]) == 0
    assert sum(1 for _ in open(out)) == clusters(corpus, "text", 0.8).num_rows + 1
    assert cli.main(["clusters", corpus, "text", "--memory-limit", "lots"]) == 2
    err = capsys.readouterr().err
    assert "--memory-limit 'lots' is not a byte size" in err and "512MiB" in err  # in the CLI's syntax


@pytest.mark.parametrize("bad, rule, sql_rule", [
    ("lots", "is not a byte size", "is not a byte size"),
    ("1KiB", "below the minimum of 4 MiB", "below the minimum of 4 MiB"),
    (-1, "below the minimum", "below the minimum"),  # one rule and one wording in Python and SQL
    (True, "is not a byte size", "is not a byte size")])
def test_memory_limit_errors_name_the_value_and_the_rule(corpus, bad, rule, sql_rule):
    calls = [lambda: pairs(corpus, "text", memory_limit=bad), lambda: clusters(corpus, "text", memory_limit=bad),
             lambda: keep_flags(corpus, "text", memory_limit=bad), lambda: dedup(corpus, "text", memory_limit=bad),
             lambda: join(corpus, corpus, "text", memory_limit=bad)]
    for call in calls:
        with pytest.raises(InvalidParameterError, match=rule):
            call()
    from lance_minhash_sql.duck.install import connect

    con = connect()
    value = f"'{bad}'" if isinstance(bad, str) else str(bad).lower()
    for fn in ("minhash_pairs", "minhash_clusters", "minhash_dedup"):
        with pytest.raises(Exception, match=f"{fn}: memory_limit := .* {sql_rule}"):
            con.sql(f"SELECT * FROM {fn}('{corpus}', 'text', memory_limit := {value})").fetchall()


def test_clusters_say_when_the_budget_cannot_hold_their_components(corpus, monkeypatch):
    monkeypatch.setattr(core_budget, "MIN_SELF_JOIN_MEMORY", 1024)
    with pytest.raises(ResourceLimitError, match=r"memory_limit=64 KiB .* too small for the clusters of the 4,000 "
                                                 r"rows .* raise memory_limit to at least"):
        clusters(corpus, "text", memory_limit="64KiB")


def test_join_under_a_budget_equals_the_join_without(corpus):
    def both(**kw):
        return sorted(tuple(r.values()) for b in join(corpus, corpus, "text", 0.8, **kw) for r in b.to_pylist())

    want = both(memory_limit="64GiB")
    assert len(want) > 4000 and both() == want and both(memory_limit="4MiB") == want
    from lance_minhash_sql.duck.install import connect

    got = connect().sql(f"SELECT * FROM minhash_join('{corpus}', '{corpus}', 'text', memory_limit := '4MiB')").fetchall()
    assert sorted(got) == want


# --------------------------------------------------------------------------- kernels and row id runs


def test_bit_set_ranks_and_components_against_numpy():
    rng = np.random.default_rng(3)
    n = 5000
    marks = new_marks(n)
    ids = np.unique(rng.integers(0, n, 900)).astype(np.uint32)
    assert count_unmarked(marks, ids) == ids.size
    set_marks(marks, ids[::2], True)
    assert count_unmarked(marks, ids) == ids.size - ids[::2].size
    set_marks(marks, ids, True)
    got, prefix = marked_ids(marks)
    assert np.array_equal(got, ids)
    probe = rng.choice(ids, 300)
    assert np.array_equal(ranks(marks, prefix, probe), np.searchsorted(ids, probe))
    set_marks(marks, ids, False)
    assert not marks.any()

    a = rng.integers(0, n, 3000).astype(np.uint32)
    b = rng.integers(0, n, 3000).astype(np.uint32)
    parent = np.arange(n, dtype=np.int32)
    union_min(parent, a, b)
    flatten_roots(parent)
    want = components(range(n), list(zip(a.tolist(), b.tolist())))  # node -> smallest node of its component
    members = linked_members(parent, marks)
    assert members.tolist() == sorted(want)
    assert all(parent[x] == want[x] for x in members.tolist())
    assert not marks.any()


def test_row_id_runs_follow_deletions_before_the_build(tmp_path, monkeypatch):
    uri = str(tmp_path / "runs.lance")
    write_corpus(uri, 3000, rows_per_fragment=1000)
    lance.dataset(uri).delete("id % 97 = 1 OR id BETWEEN 1500 AND 1530")
    build_index(uri, "text")
    entry = open_index(uri, "text", None).segment_entries()[0]
    stored = entry.files.read_rowids()
    runs = rowid_runs.rowid_runs(entry)
    assert 3 < runs.docs.size < 100
    assert np.array_equal(runs.lookup(np.arange(stored.size, dtype=np.uint32)), stored)
    want = oracle_clusters(uri, "text", 0.8, PARAMS)
    assert as_clusters(clusters(uri, "text", 0.8, memory_limit="4MiB")) == want
    monkeypatch.setattr(rowid_runs, "MAX_DOCS_PER_RUN", 10_000)  # too many runs: none kept, row ids read as before
    monkeypatch.setattr(rowid_runs, "_runs", type(rowid_runs._runs)())
    assert rowid_runs.rowid_runs(entry) is None
    assert as_clusters(clusters(uri, "text", 0.8, memory_limit="4MiB")) == want
    assert as_dict(pairs(uri, "text", 0.8, memory_limit="4MiB")) == oracle(uri, 0.8)


def test_the_components_table_takes_its_inputs_over_and_holds_no_copy_of_the_row_ids():
    """clusters_table against the longhand table (each cluster's smallest row id and size,
    rows by (cluster_id, _rowid)): a writable row-id array becomes the ``_rowid`` column's
    buffer itself (no copy of its bytes held beside the table); a read-only one is copied
    and left as it was."""
    from lance_minhash_sql.selfjoin.clusters_table import clusters_table

    rng = np.random.default_rng(5)
    n = 5_000
    roots = rng.integers(0, 700, n).astype(np.int32)
    rowid = rng.permutation(1 << 20)[:n].astype(np.uint64)
    smallest = {r: rowid[roots == r].min() for r in np.unique(roots)}
    size = {r: int((roots == r).sum()) for r in smallest}
    want = sorted((int(smallest[r]), int(w), size[r]) for r, w in zip(roots.tolist(), rowid.tolist()))
    readonly = rowid.copy()
    readonly.flags.writeable = False
    for ids in (readonly, rowid):
        table = clusters_table(roots.copy(), ids)
        got = list(zip(*(table.column(c).to_pylist() for c in ("cluster_id", "_rowid", "cluster_size"))))
        assert got == want
        shared = table.column("_rowid").chunk(0).buffers()[1].address == ids.ctypes.data
        assert shared == ids.flags.writeable
    assert not np.array_equal(rowid, readonly)  # the writable one was reordered in place, the read-only one not
    assert np.array_equal(np.sort(rowid), np.sort(readonly))
