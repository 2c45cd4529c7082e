"""Self-join: pairs and clusters against brute-force oracles.

The oracle signs every live row (the signer is bit-identical to Lance, see
test_signatures.py), lists every pair sharing at least one band key in plain numpy, and
verifies it with the full signatures. Pairs must equal it exactly (set and similarity),
whatever the shards, chunks, segments, unindexed fragments and deletions.
"""

from __future__ import annotations

import doctest
import tracemalloc
import warnings

import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import indexed_corpus
import naive
from naive import components, exact_pairs, live_rows, oracle_pairs

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import IndexNotFoundError, InvalidParameterError, LowRecallWarning
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import generate_batches, ground_truth, vocabulary, write_corpus
from lance_minhash_sql.io.manifest import minhash_segments
from lance_minhash_sql.kernels import components as components_kernels
from lance_minhash_sql.kernels.components import flatten_roots, union_min
from lance_minhash_sql.selfjoin import shards as shards_mod
from lance_minhash_sql.selfjoin.steps import run_shard
from lance_minhash_sql.selfjoin.clusters import CLUSTERS_SCHEMA, clusters
from lance_minhash_sql.selfjoin.pairs import PAIRS_EXACT_SCHEMA, PAIRS_SCHEMA, pairs
from lance_minhash_sql.selfjoin.shards import pair_shards
from lance_minhash_sql.selfjoin.verify import pair_verifier

N = 5000
PARAMS = MinHashParams()


# --------------------------------------------------------------------------- oracles


def signed(uri: str, params=PARAMS):
    return naive.signed(uri, params)


def oracle(uri: str, threshold: float, params=PARAMS) -> dict:
    """``{(left_rowid, right_rowid): similarity}`` of every verified candidate pair."""
    return oracle_pairs(uri, threshold, params)


def as_dict(batches, schema=PAIRS_SCHEMA) -> dict:
    """Pairs as a dict, checking the schema, ``left < right`` and that each pair comes once."""
    out = {}
    count = 0
    for b in batches:
        assert b.schema.equals(schema)
        left, right = b.column("left_rowid").to_numpy(), b.column("right_rowid").to_numpy()
        assert (left < right).all()
        for x, y, s in zip(left.tolist(), right.tolist(), b.column("similarity").to_pylist()):
            out[(x, y)] = s
        count += b.num_rows
    assert count == len(out), "a pair was reported twice"
    return out


def as_clusters(table: pa.Table) -> dict:
    assert table.schema.equals(CLUSTERS_SCHEMA)
    d = table.to_pydict()
    out = dict(zip(d["_rowid"], d["cluster_id"]))
    assert len(out) == table.num_rows
    sizes: dict = {}
    for c in d["cluster_id"]:
        sizes[c] = sizes.get(c, 0) + 1
    assert d["cluster_size"] == [sizes[c] for c in d["cluster_id"]]
    assert all(c == min(r for r, cc in out.items() if cc == c) for c in sizes)
    keys = list(zip(d["cluster_id"], d["_rowid"]))
    assert keys == sorted(keys)
    return out


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    uri = str(tmp_path_factory.mktemp("pairs") / "corpus.lance")
    write_corpus(uri, N, rows_per_fragment=2000)
    build_index(uri, "text")
    return uri


@pytest.fixture(scope="module")
def oracle_08(corpus) -> dict:
    return oracle(corpus, 0.8)


def shard_batches(shard, chunk_pairs=1 << 20, memory_limit=None):
    """One shard's pairs run on their own (as SQL runs a shard per call), in batches of
    at most ``chunk_pairs`` rows."""
    return run_shard(shard, Budget.parse(memory_limit), pair_verifier("estimate"), chunk_pairs)


def all_shards(uri, threshold, num_shards=None, chunk_pairs=1 << 20):
    return [b for s in pair_shards(uri, "text", threshold, num_shards=num_shards)
            for b in shard_batches(s, chunk_pairs)]


# --------------------------------------------------------------------------- pairs


def test_pairs_equal_brute_force(corpus, oracle_08, self_join_budget):
    got = as_dict(pairs(corpus, "text", 0.8))
    assert len(oracle_08) > 300
    assert got == oracle_08


@pytest.mark.parametrize("threshold", [0.7, 1.0])
def test_pairs_other_thresholds(corpus, threshold, self_join_budget):
    assert as_dict(pairs(corpus, "text", threshold)) == oracle(corpus, threshold)


def test_low_threshold_warns_and_still_matches(corpus):
    with pytest.warns(LowRecallWarning, match=r"threshold := 0.5 .* 64 bands of 2 rows"):
        got = as_dict(pairs(corpus, "text", 0.5))
    assert got == oracle(corpus, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pair_shards(corpus, "text", 0.8)  # no warning at the S-curve


def test_shards_and_chunks_do_not_change_the_answer(corpus, oracle_08):
    one = all_shards(corpus, 0.8, num_shards=1)
    assert as_dict(one) == oracle_08
    many = all_shards(corpus, 0.8, num_shards=37, chunk_pairs=7)
    assert all(b.num_rows <= 7 for b in many)
    assert as_dict(many) == oracle_08
    shards = pair_shards(corpus, "text", 0.8, num_shards=37)
    assert [s.index for s in shards] == list(range(37))
    assert shards[0].lo == 0 and shards[-1].hi == PARAMS.num_bands << 56
    assert all(a.hi == b.lo for a, b in zip(shards, shards[1:]))


def test_direct_window_path(corpus, oracle_08, monkeypatch):
    monkeypatch.setattr(shards_mod, "BUCKET_WINDOW_ROWS", 3)  # most buckets exceed it: read from the pool
    assert as_dict(pairs(corpus, "text", 0.8)) == oracle_08
    base = as_clusters(clusters(corpus, "text", 0.8))
    monkeypatch.undo()
    assert as_clusters(clusters(corpus, "text", 0.8)) == base


def test_verify_exact_is_the_exact_rule(corpus, oracle_08):
    """verify='exact': the candidates whose estimate reaches the floor (4 standard
    deviations under the threshold, written in tests/naive.py), kept iff their exact
    Jaccard reaches the threshold; the estimate of each pair as ``similarity``, its
    Jaccard as ``jaccard``."""
    batches = list(pairs(corpus, "text", 0.8, verify="exact"))
    got = as_dict(batches, PAIRS_EXACT_SCHEMA)
    jac = {(x, y): j for b in batches for x, y, j in zip(b.column("left_rowid").to_pylist(),
                                                          b.column("right_rowid").to_pylist(),
                                                          b.column("jaccard").to_pylist())}
    want = exact_pairs(corpus, 0.8, PARAMS)
    assert got.keys() == want.keys() and len(want) > 300
    assert all(got[p] == want[p][0] and jac[p] == pytest.approx(want[p][1], abs=1e-12) for p in want)
    assert set(oracle_08) - set(got), "some estimates >= 0.8 have a true Jaccard below"


# --------------------------------------------------------------------------- segments, appends, deletions


def test_append_second_segment_and_deletions(tmp_path, self_join_budget):
    uri = str(tmp_path / "grow.lance")
    write_corpus(uri, 3000, rows_per_fragment=1000)
    build_index(uri, "text")
    # appended rows (fresh ids) include near-duplicates of the indexed ones
    write_corpus(uri, 1500, rows_per_fragment=1000, mode="append", start=3000)
    extra = pa.Table.from_batches(list(generate_batches(40, start=10)))
    lance.write_dataset(extra.set_column(0, "id", pa.array(np.arange(4500, 4540))), uri, mode="append")
    want = oracle(uri, 0.8)
    appended = min(f.fragment_id for f in lance.dataset(uri).get_fragments()[3:])
    assert any(x >> 32 < appended <= y >> 32 for x, y in want)  # pairs across indexed / unindexed rows
    unindexed = as_dict(pairs(uri, "text", 0.8))
    assert unindexed == want
    unindexed_clusters = as_clusters(clusters(uri, "text", 0.8))

    lance.dataset(uri).optimize.optimize_indices(num_indices_to_merge=0)
    assert len(minhash_segments(lance.dataset(uri), "text")) == 2
    assert as_dict(pairs(uri, "text", 0.8)) == want
    assert as_dict(all_shards(uri, 0.8, num_shards=5, chunk_pairs=11)) == want
    assert as_clusters(clusters(uri, "text", 0.8)) == unindexed_clusters

    ds = lance.dataset(uri)
    ds.delete("id % 5 = 0 OR id = 4511")
    _, _, ids = live_rows(uri)
    assert ids.size == 4540 - 909
    after = as_dict(pairs(uri, "text", 0.8))
    assert after == oracle(uri, 0.8)
    rowids, _, _ = live_rows(uri)
    live = set(rowids.tolist())
    assert all(x in live and y in live for x, y in after)
    assert len(after) < len(want)
    got_c = as_clusters(clusters(uri, "text", 0.8))
    assert set(got_c) <= live


@pytest.mark.parametrize("capacity", [1 << 10, 256 << 10])
def test_signatures_beyond_the_cache(tmp_path, capacity):
    """A segment whose signatures and row ids exceed the cache (1 KiB) or only its
    signatures (256 KiB): the self-join gathers its candidates out of the memory map
    without holding them in the cache; same pairs and clusters, deletions included."""
    from lance_minhash_sql.runtime.cache import clear_cache, set_cache_capacity

    uri = indexed_corpus(str(tmp_path / "big.lance"), 4000, 1000, "id % 7 = 3")
    want = oracle(uri, 0.8)
    want_clusters = naive.oracle_clusters(uri, "text", 0.8, PARAMS)
    old = set_cache_capacity(capacity)
    try:
        clear_cache()
        assert as_dict(all_shards(uri, 0.8, num_shards=9)) == want
        assert as_dict(pairs(uri, "text", 0.8)) == want
        assert as_clusters(clusters(uri, "text", 0.8)) == want_clusters
    finally:
        set_cache_capacity(old)
        clear_cache()


def test_odd_parameters(tmp_path, monkeypatch, self_join_budget):
    """k = 98 (rows padded to whole u64 words), r = 7 (bands compared value by value)."""
    params = MinHashParams(num_hashes=98, num_bands=14, shingle_size=2)
    uri = str(tmp_path / "odd.lance")
    write_corpus(uri, 2500, rows_per_fragment=1000)
    build_index(uri, "text", num_hashes=98, num_bands=14, shingle_size=2)
    want = oracle(uri, 0.75, params)
    assert len(want) > 100
    assert as_dict(pairs(uri, "text", 0.75)) == want
    assert as_dict(all_shards(uri, 0.75, num_shards=9, chunk_pairs=5)) == want
    monkeypatch.setattr(shards_mod, "BUCKET_WINDOW_ROWS", 3)  # large buckets gathered whole (k % 4 != 0)
    assert as_dict(pairs(uri, "text", 0.75)) == want


def test_stable_row_ids_and_deletions(tmp_path, self_join_budget):
    uri = str(tmp_path / "stable.lance")
    table = pa.Table.from_batches(list(generate_batches(2500)))
    lance.write_dataset(table, uri, max_rows_per_file=1000, enable_stable_row_ids=True)
    build_index(uri, "text")
    lance.dataset(uri).delete("id % 3 = 1")
    got = as_dict(pairs(uri, "text", 0.8))
    assert got and got == oracle(uri, 0.8)


# --------------------------------------------------------------------------- giant bucket


@pytest.fixture(scope="module")
def giant(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("giant") / "giant.lance")
    base = pa.Table.from_batches(list(generate_batches(500)))
    copies = 3000
    text = "one boilerplate paragraph copied three thousand times into the corpus as it is"
    texts = base.column("text").to_pylist() + [text] * copies
    lance.write_dataset(pa.table({"id": pa.array(np.arange(len(texts))), "text": pa.array(texts)}), uri,
                        max_rows_per_file=2000)
    build_index(uri, "text")
    return uri, copies


def test_giant_bucket_streams_in_chunks(giant):
    uri, copies = giant
    chunk = 50_000
    n_pairs = copies * (copies - 1) // 2
    seen = np.zeros(copies * copies, dtype=np.bool_)  # pair (i, j) of copies at i * copies + j
    tracemalloc.start()
    batches = other = 0
    try:
        for s in pair_shards(uri, "text", 0.8):
            for b in shard_batches(s, chunk):
                assert b.num_rows <= chunk
                batches += 1
                # row address -> row number (2,000 rows per fragment); copies are rows 500..3499
                rows = [(a >> np.uint64(32)).astype(np.int64) * 2000 + (a & np.uint64(0xFFFFFFFF)).astype(np.int64)
                        for a in (b.column("left_rowid").to_numpy(), b.column("right_rowid").to_numpy())]
                inside = (rows[0] >= 500) & (rows[1] >= 500)
                other += int((~inside).sum())
                code = (rows[0][inside] - 500) * copies + rows[1][inside] - 500
                assert not seen[code].any()
                seen[code] = True
                del b, rows, inside, code
                if batches == 5:
                    tracemalloc.reset_peak()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert int(seen.sum()) == n_pairs
    assert batches >= n_pairs // chunk
    # all pairs at once would take 20 bytes each (90 MB); a chunk's buffers and batch ~2 MB
    assert peak < 16 * chunk * 20 + (4 << 20)


def test_giant_bucket_cluster(giant, self_join_budget):
    uri, copies = giant
    rowids, _, ids = live_rows(uri)
    got = clusters(uri, "text", 0.8).to_pydict()
    dup = set(rowids[ids >= 500].tolist())
    first = min(dup)
    members = [r for r, c in zip(got["_rowid"], got["cluster_id"]) if c == first]
    assert set(members) == dup
    assert {s for r, s in zip(got["_rowid"], got["cluster_size"]) if r in dup} == {copies}


# --------------------------------------------------------------------------- clusters


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """Groups of near-identical texts (one word changed per copy) among unrelated texts."""
    rng = np.random.default_rng(5)
    vocab = np.array(vocabulary().to_pylist())
    texts, group = [], []
    for g in range(60):
        base = rng.choice(vocab, 80)
        for c in range(int(rng.integers(2, 9))):
            words = base.copy()
            if c:
                words[rng.integers(0, 80)] = rng.choice(vocab)
            texts.append(" ".join(words))
            group.append(g)
    for _ in range(600):
        texts.append(" ".join(rng.choice(vocab, int(rng.integers(5, 60)))))
        group.append(-1)
    order = rng.permutation(len(texts))
    texts = [texts[i] for i in order]
    uri = str(tmp_path_factory.mktemp("grouped") / "grouped.lance")
    lance.write_dataset(pa.table({"id": pa.array(np.arange(len(texts))), "text": pa.array(texts)}), uri,
                        max_rows_per_file=400)
    build_index(uri, "text")
    return uri


def bucket_relation_is_equivalence(uri: str, threshold: float) -> bool:
    """The documented exactness condition: in every bucket the verified pairs form disjoint
    cliques, at most ``naive.REPS`` of them (singletons included)."""
    rowids, sigs, keys, _, _ = signed(uri)
    k = sigs.shape[1]
    for j in range(keys.shape[1]):
        _, inv = np.unique(keys[:, j], return_inverse=True)
        for grp in np.split(np.argsort(inv, kind="stable"), np.flatnonzero(np.diff(np.sort(inv))) + 1):
            if grp.size < 2:
                continue
            eq = (sigs[grp][:, None, :] == sigs[grp][None, :, :]).sum(-1)
            v = (eq.astype(np.float32) / np.float32(k)) >= threshold
            classes = {frozenset(np.flatnonzero(row).tolist()) for row in v}
            members = [m for c in classes for m in c]
            if len(members) != len(set(members)) or len(classes) > naive.REPS:
                return False
    return True


def test_clusters_equal_all_pairs_components_when_the_rule_guarantees_it(grouped, self_join_budget):
    threshold = 0.7
    assert bucket_relation_is_equivalence(grouped, threshold)
    want = oracle(grouped, threshold)
    rowids, _, _ = live_rows(grouped)
    expected = components(rowids.tolist(), list(want))
    got = as_clusters(clusters(grouped, "text", threshold))
    assert len(set(got.values())) >= 50
    assert got == expected


def pair_counts(labels_a: dict, labels_b: dict, rows) -> tuple[int, int, int]:
    """Same-cluster row pairs: (in a, in b, in both); a row missing from a labelling is alone."""
    def key(d, r):
        return d.get(r, ("alone", r))
    both: dict = {}
    ca: dict = {}
    cb: dict = {}
    for r in rows:
        a, b = key(labels_a, r), key(labels_b, r)
        ca[a] = ca.get(a, 0) + 1
        cb[b] = cb.get(b, 0) + 1
        both[(a, b)] = both.get((a, b), 0) + 1
    f = lambda c: sum(n * (n - 1) // 2 for n in c.values())  # noqa: E731
    return f(ca), f(cb), f(both)


def test_clusters_equal_the_representative_rule(corpus, grouped, self_join_budget):
    """The components of the representatives' links, bucket by bucket in plain numpy
    (tests/naive.py), whatever the budget; deletions and unindexed rows included."""
    for uri in (corpus, grouped):
        assert as_clusters(clusters(uri, "text", 0.8)) == naive.oracle_clusters(uri, "text", 0.8, PARAMS)


def test_clusters_refine_all_pairs_and_track_ground_truth(corpus, oracle_08, self_join_budget):
    got = as_clusters(clusters(corpus, "text", 0.8))
    rowids, _, ids = live_rows(corpus)
    allpairs = components(rowids.tolist(), list(oracle_08))
    # precision against all-pairs single linkage is exact: every cluster lies in one component
    for r, c in got.items():
        assert allpairs[r] == allpairs[c]
    ours, ref, both = pair_counts(got, allpairs, rowids.tolist())
    assert both == ours
    assert both / ref > 0.99  # on this corpus the rule loses (almost) nothing
    # against the generator's truth (source_id): same-cluster pairs
    truth = ground_truth(0, N).column("source_id").to_numpy()
    by_row = dict(zip(rowids.tolist(), truth[ids].tolist()))
    ours_t, truth_t, both_t = pair_counts(got, by_row, rowids.tolist())
    precision, recall = both_t / ours_t, both_t / truth_t
    print(f"\nclusters vs ground truth at 0.8: precision {precision:.4f} recall {recall:.4f} "
          f"(all-pairs recall kept {both / ref:.4f})")
    assert precision > 0.95 and recall > 0.3


# --------------------------------------------------------------------------- errors and kernels


@pytest.mark.parametrize("bad", [0, 0.0, 1.5, -0.1, None, True, float("nan"), "0.8"])
def test_threshold_errors(corpus, bad):
    with pytest.raises(InvalidParameterError, match="threshold"):
        pairs(corpus, "text", bad)
    with pytest.raises(InvalidParameterError, match="threshold"):
        pair_shards(corpus, "text", bad)
    with pytest.raises(InvalidParameterError, match="threshold"):
        clusters(corpus, "text", bad)


def test_other_argument_errors(corpus):
    import lance_minhash_sql as lms

    with pytest.raises(InvalidParameterError, match="num_shards"):
        pair_shards(corpus, "text", 0.8, num_shards=0)
    with pytest.raises(InvalidParameterError, match="exact"):
        lms.pairs(corpus, "text", 0.8, exact="yes")
    with pytest.raises(InvalidParameterError, match="verify='exactly'"):
        pairs(corpus, "text", 0.8, verify="exactly")


def test_no_index(tmp_path):
    uri = str(tmp_path / "plain.lance")
    write_corpus(uri, 100)
    for call in (lambda: pairs(uri, "text"), lambda: clusters(uri, "text"), lambda: pair_shards(uri, "text")):
        with pytest.raises(IndexNotFoundError, match="minhash_build"):
            call()


def test_union_find_matches_naive_components():
    assert doctest.testmod(components_kernels).failed == 0
    rng = np.random.default_rng(3)
    n = 2000
    a, b = rng.integers(0, n, 1500).astype(np.uint32), rng.integers(0, n, 1500).astype(np.uint32)
    parent = np.arange(n, dtype=np.int32)
    union_min(parent, a, b)
    flatten_roots(parent)
    want = components(range(n), list(zip(a.tolist(), b.tolist())))
    got: dict = {}
    for x in range(n):
        got.setdefault(int(parent[x]), []).append(x)
    assert {x: min(g) for g in got.values() if len(g) > 1 for x in g} == want
    assert all(r == min(g) for r, g in got.items())  # every root is its component's smallest id


# r = 4 (one word a band), r = 2 (value compares), r = 8 at k = 128 (two words a band, the
# default's one-block compare)
@pytest.mark.parametrize("k, num_bands", [(16, 4), (16, 8), (128, 16)])
@pytest.mark.parametrize("cap", [1, 3, 1 << 10])
def test_kernel_reports_each_candidate_once_key_collisions_included(k, num_bands, cap):
    from lance_minhash_sql.kernels.bucket_pairs import bucket_bounds, new_bucket_cursor, no_sets, pair_chunk
    from lance_minhash_sql.kernels.similarity import band_keys

    r = k // num_bands
    rng = np.random.default_rng(7)
    sigs = rng.integers(0, 60000, (6, k)).astype(np.uint16)
    sigs[:, -1] = 7  # one equal position everywhere (verification needs >= 1), no shared band
    sigs[1, 2 * r:3 * r] = sigs[0, 2 * r:3 * r]  # (0, 1) share band 2
    last = num_bands - 1
    sigs[5, last * r:] = sigs[4, last * r:]  # (4, 5) share the last band
    keys = band_keys(sigs.view(np.uint8).reshape(6, -1), num_bands)
    # (a real 56-bit collision is consistent with the hashes; these fakes are, once per pair)
    keys[3, 1] = keys[2, 1]  # (2, 3): a key collision in band 1, no equal band values
    keys[5, 1] = keys[4, 1]  # (4, 5): a collision in band 1, before their shared band
    flat_k = keys.T.reshape(-1)
    flat_d = np.tile(np.arange(6, dtype=np.uint32), num_bands)
    o = np.lexsort((flat_d, flat_k))
    flat_k, flat_d = flat_k[o], flat_d[o]
    starts, ends = bucket_bounds(flat_k)
    words = np.ascontiguousarray(sigs).view(np.uint64)
    out = [np.empty(cap, np.uint64), np.empty(cap, np.uint64), np.empty(cap, np.int32)]
    cursor, got, done = new_bucket_cursor(), [], False
    while not done:
        n, done = pair_chunk(flat_k, flat_d, starts, ends, words, sigs, np.empty(0, np.int32),
                             np.arange(6, dtype=np.uint64) + 100, k, num_bands, 1, cursor, *out, 2, *no_sets(), 0.0)
        got += list(zip(out[0][:n].tolist(), out[1][:n].tolist(), out[2][:n].tolist()))
    eq = lambda a, b: int((sigs[a] == sigs[b]).sum())  # noqa: E731
    assert sorted(got) == [(100, 101, eq(0, 1)), (102, 103, eq(2, 3)), (104, 105, eq(4, 5))]


def test_min_matches():
    from lance_minhash_sql.kernels.bucket_pairs import min_matches

    assert min_matches(0.8, 128) == 103  # 102/128 = 0.796875, 103/128 = 0.8046875
    assert min_matches(1.0, 128) == 128
    assert min_matches(0.5, 100) == 50
    assert min_matches(1e-9, 128) == 1
    for k in (7, 96, 100):
        for t in (0.3, 0.71, 0.9):
            e = min_matches(t, k)
            assert float(np.float32(e) / np.float32(k)) >= t > float(np.float32(e - 1) / np.float32(k))


def test_buckets_in_row_id_order_skip_the_sort(corpus, monkeypatch):
    """Where a shard's row ids ascend with its local ids, ``order_buckets`` would move no
    bucket (so clusters skip it); forcing the sort gives the same clusters."""
    from lance_minhash_sql.kernels.bucket_pairs import order_buckets
    from lance_minhash_sql.selfjoin.pool import read_multi, span_data

    for s in pair_shards(corpus, "text", 0.8, num_shards=4):
        data = span_data(s.plan, *read_multi(s))
        assert data.rowids_ascend()
        docs = data.docs.copy()
        assert not order_buckets(docs, data.slot, data.rowids, data.starts, data.ends)
        assert np.array_equal(docs, data.docs)
    want = as_clusters(clusters(corpus, "text", 0.8))
    monkeypatch.setattr(shards_mod.ShardData, "rowids_ascend", lambda self: False)
    assert as_clusters(clusters(corpus, "text", 0.8)) == want


def test_rowids_ascend_sees_a_descent():
    keys = np.array([5, 5, 7, 7], dtype=np.uint64)
    docs = np.array([0, 1, 1, 2], dtype=np.uint32)
    data = shards_mod.ShardData(keys, docs, np.array([0, 2]), np.array([2, 4]), np.zeros((3, 4), np.uint16),
                                np.empty(0, np.int32), np.array([10, 30, 20], dtype=np.uint64), 0, None)
    assert not data.rowids_ascend()
    data.rowids = np.array([10, 20, 20], dtype=np.uint64)
    assert data.rowids_ascend()
