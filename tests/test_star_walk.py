"""The star walk's edges, and what exact verification and star hold against their shares of
the budget: ties exactly at the threshold (both walks, estimate and exact), the centres
reset when a chunk starts a new component, exact verification's shingle sets on disk with
each row fetched once in row-id order however they outgrow ``memory_limit``, and star's
chunks within a quarter of it (``core/tuning.py``: SHINGLE_FETCH_ROWS, STAR_CHUNK_SHARE;
``docs/scale.md``). Each test fails on a mutation that the oracle tests
of ``test_star.py`` and ``test_verify.py`` let through."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

import naive

import lance_minhash_sql as lms
from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.faces.corpus import write_corpus
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.kernels.star import block_keys, star_match, star_walk
from lance_minhash_sql.selfjoin import verify as verify_mod
from lance_minhash_sql.selfjoin import star as star_mod
from lance_minhash_sql.selfjoin.clusters import linked_components

QUARTER = 0.25  # the share of memory_limit the docs give the shingle sets, and star's chunk
LIMIT = 4 << 20  # the smallest budget: the corpus below is several times a quarter of it


def _csr(sets: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sets], out=offsets[1:])
    return offsets, np.array([h for s in sets for h in sorted(s)], dtype=np.uint64)


# --------------------------------------------------------------------------- ties at the threshold

NO_SETS = np.zeros(3, dtype=np.int64), np.empty(0, dtype=np.uint64)


def _walk(sigs, keys, comp, min_eq, sets=None, threshold=0.0, before=None, listed=None, most=16):
    """The kernel's walk of one chunk (no earlier chunk unless ``before`` and ``listed``):
    ``(twin, eq, jaccard, listed)``."""
    offsets, hashes = _csr([list(x) for x in sets]) if sets is not None else (np.zeros(len(comp) + 1, np.int64),
                                                                           np.empty(0, np.uint64))
    before = np.full(len(comp), -1, dtype=np.int64) if before is None else before
    listed = np.zeros(np.shape(keys), dtype=np.int64) if listed is None else listed
    return star_walk(np.asarray(sigs, np.uint16), np.asarray(keys, np.uint64), offsets, hashes,
                     np.asarray(comp, np.int64), before, listed, np.int64(most), np.int64(min_eq), float(threshold),
                     sets is not None)


def _match(sigs, keys, n, c_sigs, c_keys, base, min_eq, sets=None, c_sets=None, threshold=0.0, state=None,
           c_listed=None):
    """The kernel's match of members ``0 .. n - 1`` against one block of centres (listed
    under every key unless ``c_listed``): ``(twin, eq, jaccard, listed)``, updated in
    ``state`` when given."""
    m = len(sigs)
    offsets, hashes = _csr([list(x) for x in sets]) if sets is not None else (np.zeros(m + 1, np.int64),
                                                                           np.empty(0, np.uint64))
    c_off, c_hash = _csr([list(x) for x in c_sets]) if c_sets is not None else (np.zeros(len(c_sigs) + 1, np.int64),
                                                                             np.empty(0, np.uint64))
    state = state if state is not None else (np.full(m, -1, np.int64), np.zeros(m, np.int64), np.full(m, np.nan),
                                             np.zeros(np.shape(keys), np.int64))
    c_listed = np.ones(np.shape(c_keys), np.uint8) if c_listed is None else c_listed
    sorted_keys, centre = block_keys(np.asarray(c_keys, np.uint64), c_listed)
    star_match(np.asarray(sigs, np.uint16), np.asarray(keys, np.uint64), offsets, hashes, n,
               np.asarray(c_sigs, np.uint16), sorted_keys, centre, c_off, c_hash, np.int64(base), np.int64(min_eq),
               float(threshold), sets is not None, *state)
    return state


def test_a_member_sharing_exactly_min_eq_values_and_a_band_is_a_twin_in_the_walk_and_the_match():
    sigs = [[1, 2, 3, 4], [1, 2, 3, 9]]  # 3 of 4 equal: exactly min_eq
    twin, eq, _, _ = _walk(sigs, [[1, 2], [3, 2]], [0, 0], 3)
    assert twin.tolist() == [-1, 0] and eq.tolist() == [0, 3]
    twin, eq, _, listed = _match(sigs[1:], [[3, 2]], 1, sigs[:1], [[1, 2]], 5, 3)
    assert twin.tolist() == [5] and eq.tolist() == [3] and listed.tolist() == [[0, 1]]


def test_a_similar_centre_sharing_no_band_is_no_twin():
    sigs = [[1, 2, 3, 4], [1, 2, 3, 4]]
    assert _walk(sigs, [[1, 2], [3, 4]], [0, 0], 3)[0].tolist() == [-1, -1]
    assert _match(sigs[1:], [[3, 4]], 1, sigs[:1], [[1, 2]], 0, 3)[0].tolist() == [-1]


def test_the_most_similar_centre_is_the_twin_ties_to_the_earlier():
    """Rows 0 and 1 share no band: two centres; 4 shares a band with both, 0 values with 0
    and 4 with 1: its twin is 1; 5 shares 2 values and a band with each: the earlier, 0."""
    sigs = [[1, 1, 1, 1], [2, 2, 2, 2], [1, 1, 1, 5], [2, 2, 2, 6]]
    keys = [[1, 2], [3, 4], [1, 9], [3, 8]]
    twin, eq, _, _ = _walk(sigs + [[2, 2, 2, 2], [1, 1, 2, 2]], keys + [[2, 3], [1, 4]], [0] * 6, 2)
    assert twin.tolist() == [-1, -1, 0, 1, 1, 0] and eq.tolist() == [0, 0, 3, 3, 4, 2]
    assert twin.tolist() == naive.star_walk(np.array(sigs + [[2, 2, 2, 2], [1, 1, 2, 2]]),
                                            np.array(keys + [[2, 3], [1, 4]]), [0] * 6, 2)[0]


def test_a_member_at_exactly_the_jaccard_threshold_is_a_twin_in_the_exact_walk_and_match():
    sets = [[1, 2, 3, 4], [1, 2, 3, 5]]  # Jaccard 3 / 5, the threshold itself
    sigs, keys = [[0, 0], [0, 0]], [[7], [7]]
    twin, _, jac, _ = _walk(sigs, keys, [0, 0], 0, sets, 3 / 5)
    assert twin.tolist() == [-1, 0] and jac[1] == 3 / 5
    twin, _, jac, _ = _match(sigs[1:], keys[1:], 1, sigs[:1], keys[:1], 0, 0, sets[1:], sets[:1], 3 / 5)
    assert twin.tolist() == [0] and jac[0] == 3 / 5


def test_exact_tries_the_next_candidate_when_the_most_similar_fails():
    """Centres 0 (estimate 4 of 4 with member 2, Jaccard 0) and 1 (3 of 4, Jaccard 1): the
    exact twin is 1, with its equal values."""
    sigs = [[1, 2, 3, 4], [1, 2, 3, 9], [1, 2, 3, 4]]
    sets = [{1, 2}, {5, 6}, {5, 6}]
    twin, eq, jac, _ = _walk(sigs, [[1], [1], [1]], [0, 0, 0], 2, sets, 0.8)
    assert twin.tolist() == [-1, -1, 1] and eq[2] == 3 and jac[2] == 1.0
    assert twin.tolist() == naive.star_walk_exact(sets, np.array(sigs), np.array([[1]] * 3), [0] * 3, 2, 0.8)


# --------------------------------------------------------------------------- centres per component


def test_a_bucket_lists_its_first_centres_only():
    """Three unrelated centres in one bucket listing two: a copy of the third is compared
    with the first two only, and is a centre; under a cap of three it is the third's twin."""
    sigs = [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [3, 3, 3, 3]]
    keys = [[7]] * 4
    twin, _, _, listed = _walk(sigs, keys, [0] * 4, 3, most=2)
    assert twin.tolist() == [-1, -1, -1, -1] == naive.star_walk(np.array(sigs), np.array(keys), [0] * 4, 3, 2)[0]
    assert listed[:, 0].tolist() == [1, 1, 0, 0]
    assert _walk(sigs, keys, [0] * 4, 3, most=3)[0].tolist() == [-1, -1, -1, 2]
    # the same cut in two chunks: the first chunk's listed centres count against the cap
    state = _match(sigs[2:], keys[2:], 2, sigs[:2], keys[:2], 0, 3)
    assert state[3].tolist() == [[2], [2]]
    assert _walk(sigs[2:], keys[2:], [0, 0], 3, before=np.full(2, -1), listed=state[3], most=2)[0].tolist() == [-1, -1]


def test_a_chunk_forgets_the_centres_of_the_component_before():
    """Two identical rows of two components in one chunk: two centres, by both walks."""
    sigs, keys, comp = [[1, 2, 3, 4]] * 2, [[1, 2]] * 2, [0, 1]
    twin = _walk(sigs, keys, comp, 3)[0]
    assert twin.tolist() == [-1, -1] == naive.star_walk(np.array(sigs), np.array(keys), comp, 3)[0]
    twin = _walk(sigs, keys, comp, 3, [{1, 2, 3}] * 2, 0.5)[0]
    assert twin.tolist() == [-1, -1] == naive.star_walk_exact([{1, 2, 3}] * 2, np.array(sigs), np.array(keys), comp,
                                                             3, 0.5)


def _random_chunk(seed: int, n: int = 300):
    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, 3, (n, 8)).astype(np.uint16)
    keys = (np.arange(4, dtype=np.uint64) << np.uint64(56)) + rng.integers(0, 3, (n, 4)).astype(np.uint64)
    comp = np.sort(rng.integers(0, 12, n))
    sets = [set(rng.choice(12, int(rng.integers(0, 8)), replace=False).tolist()) for _ in range(n)]
    return sigs, keys, comp, sets


@pytest.mark.parametrize("seed", range(4))
def test_the_walks_equal_the_longhand_walk(seed):
    """Random chunks of several components, band keys shared in part: both walks give the
    twins (and equal counts, and Jaccards) of tests/naive.py's walk."""
    sigs, keys, comp, sets = _random_chunk(seed)
    n = comp.size
    most = 2 + seed  # a few centres a bucket: the caps are reached
    twin, eq, _, _ = _walk(sigs, keys, comp, 5, most=most)
    want_twin, want_eq = naive.star_walk(sigs, keys, comp, 5, most)
    assert twin.tolist() == want_twin and eq.tolist() == want_eq
    assert 20 < (twin >= 0).sum() < n - 20  # twins and centres both
    assert want_twin != naive.star_walk(sigs, keys, comp, 5, n)[0]  # the cap changes some twins
    twin, eq, jac, _ = _walk(sigs, keys, comp, 3, sets, 0.5, most=most)
    assert twin.tolist() == naive.star_walk_exact(sets, sigs, keys, comp, 3, 0.5, most)
    assert 20 < (twin >= 0).sum() < n - 20
    has = twin >= 0
    assert jac[has].tolist() == [len(sets[i] & sets[j]) / len(sets[i] | sets[j]) for i, j in
                                 zip(np.flatnonzero(has), twin[has])]
    assert eq[has].tolist() == [int((sigs[i] == sigs[j]).sum()) for i, j in zip(np.flatnonzero(has), twin[has])]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("exact", [False, True])
def test_a_component_split_into_chunks_and_blocks_walks_as_one(seed, exact):
    """One component cut into chunks: each chunk matched against the earlier chunks'
    centres (one block per chunk, in walk order), then walked with those twins: the twins
    and equal counts of one walk over the whole component."""
    sigs, keys, _, sets = _random_chunk(seed, 200)
    comp = np.zeros(200, dtype=np.int64)
    min_eq, threshold = (3, 0.5) if exact else (5, 0.0)
    sets = sets if exact else None
    most = 3
    whole_twin, whole_eq, _, _ = _walk(sigs, keys, comp, min_eq, sets, threshold, most=most)
    cuts = [0, 37, 38, 90, 200]
    twin = np.full(200, -1, dtype=np.int64)
    eq = np.zeros(200, dtype=np.int64)
    blocks: list = []  # (centres, their listed keys)
    for a, b in zip(cuts, cuts[1:]):
        m = b - a
        state = (np.full(m, -1, np.int64), np.zeros(m, np.int64), np.full(m, np.nan), np.zeros((m, 4), np.int64))
        base = 0
        for block, listed in blocks:
            _match(sigs[a:b], keys[a:b], m, sigs[block], keys[block], base, min_eq,
                   None if sets is None else sets[a:b], None if sets is None else [sets[c] for c in block],
                   threshold, state, listed)
            base += len(block)
        flat = [c for block, _ in blocks for c in block]
        got = state[0] >= 0
        twin[a:b][got] = np.array(flat, dtype=np.int64)[state[0][got]] if flat else []
        eq[a:b][got] = state[1][got]
        t_in, e_in, _, listed = _walk(sigs[a:b], keys[a:b], comp[a:b], min_eq, None if sets is None else sets[a:b],
                                      threshold, np.where(got, state[1], -1), state[3], most)
        inside = t_in >= 0
        twin[a:b][inside] = a + t_in[inside]
        eq[a:b][inside] = e_in[inside]
        new = np.flatnonzero(~got & ~inside)
        blocks.append(([a + i for i in new], listed[new]))
    assert twin.tolist() == whole_twin.tolist() and eq.tolist() == whole_eq.tolist()
    assert 20 < (twin >= 0).sum() < 180


@pytest.fixture(scope="module")
def twins_dataset(tmp_path_factory):
    """Three rows: 0 and 1 the same text, 2 another; the caller puts 0 alone in one
    component and 1, 2 in the next."""
    import lance

    from lance_minhash_sql.index.opened import open_index

    uri = str(tmp_path_factory.mktemp("walk") / "three.lance")
    same = "the same text in two components " * 4
    lance.write_dataset(pa.table({"text": [same, same, "an unrelated text with other words " * 4]}), uri)
    lms.build_index(uri, "text")
    return open_index(uri, "text")


@pytest.mark.parametrize("verify", ["estimate", "exact"])
def test_a_chunk_that_starts_a_new_component_does_not_match_the_last_components_centres(twins_dataset, monkeypatch,
                                                                                         verify):
    monkeypatch.setattr(star_mod, "STAR_ROWS", 1)  # one member per chunk: every chunk starts afresh
    rowid = twins_dataset.ds.to_table(columns=[], with_row_id=True).column("_rowid").to_numpy()
    cluster = np.array([rowid[0], rowid[1], rowid[1]], dtype=np.uint64)
    order = np.arange(3)
    twin, _, _ = star_mod.star_twins(twins_dataset, 0.8, rowid, cluster, order, verify, Budget.of(64 << 20))
    assert twin.tolist() == [-1, -1, -1]  # row 1 is the first of its component: a centre, not row 0's twin


# --------------------------------------------------------------------------- shares of the budget


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("shares") / "corpus.lance")
    write_corpus(uri, 60_000)
    lms.build_index(uri, "text")
    return uri


def test_exact_verification_fetches_each_row_once_in_row_order_and_holds_its_index_only(corpus, monkeypatch):
    """The shingle sets of the candidates outgrow a quarter of the budget; still each row
    is fetched once, by takes of at most SHINGLE_FETCH_ROWS ascending row ids, the sets go
    to the file and memory holds the index alone (INDEX_BYTES a row)."""
    from lance_minhash_sql.selfjoin import shingles as shingles_mod

    made, takes = [], []
    take = shingles_mod.take_rows

    def recorded_take(ds, rowids, columns, what, uri=None):
        takes.append(np.asarray(rowids).copy())
        return take(ds, rowids, columns, what, uri)

    class Recorded(shingles_mod.ShingleSets):
        def __init__(self, opened):
            super().__init__(opened)
            made.append(self)

    monkeypatch.setattr(shingles_mod, "take_rows", recorded_take)
    monkeypatch.setattr(shingles_mod, "SHINGLE_FETCH_ROWS", 512)
    monkeypatch.setattr(verify_mod, "ShingleSets", Recorded)
    pairs = sum(b.num_rows for b in lms.pairs(corpus, "text", 0.8, verify="exact", memory_limit=LIMIT))
    assert pairs > 0 and len(made) == 1
    sets, fetched = made[0], np.concatenate(takes)
    assert len(takes) > 1 and all(t.size <= 512 and (np.diff(t.astype(np.int64)) > 0).all() for t in takes)
    assert np.unique(fetched).size == fetched.size == sets.index.ids.size  # each row once
    assert sets.values.size * 8 > QUARTER * LIMIT  # the sets do not fit the share: they live in the file
    assert sets.held_bytes() == shingles_mod.INDEX_BYTES * fetched.size


@pytest.fixture(scope="module")
def unrelated(tmp_path_factory):
    """1,500 unrelated texts, indexed: walked as one component, every row is a centre."""
    import lance

    from lance_minhash_sql.faces.corpus import vocabulary
    from lance_minhash_sql.index.opened import open_index

    rng = np.random.default_rng(4)
    vocab = np.array(vocabulary().to_pylist())
    uri = str(tmp_path_factory.mktemp("centres") / "unrelated.lance")
    lance.write_dataset(pa.table({"text": [" ".join(rng.choice(vocab, 30)) for _ in range(1500)]}), uri)
    lms.build_index(uri, "text")
    return open_index(uri, "text")


def test_star_holds_its_centres_within_a_quarter_of_the_budget(unrelated, monkeypatch):
    """A component whose centres' signatures outgrow a quarter of the budget: the walk
    writes the older blocks to disk, so at the end of the walk what it holds (the
    centres' bytes less those written) is at most a quarter of the budget; the twins are
    the longhand walk's over the rows' signatures (tests/naive.py)."""
    limit = 256 << 10
    written = []
    savez = np.savez

    def recorded(path, *arrays):
        written.append(sum(a.nbytes for a in arrays))
        return savez(path, *arrays)

    monkeypatch.setattr(star_mod.np, "savez", recorded)
    rowid, sigs = naive.signed(unrelated.uri, unrelated.params)[:2]
    cluster = np.zeros(rowid.size, dtype=np.uint64)
    chunks = star_mod.STATS["chunks"]
    twin, _, _ = star_mod.star_twins(unrelated, 0.8, rowid, cluster, np.arange(rowid.size), "estimate",
                                     Budget.of(limit))
    chunks = star_mod.STATS["chunks"] - chunks
    k = unrelated.params.num_hashes
    keys = naive.signed(unrelated.uri, unrelated.params)[2]
    assert twin.tolist() == naive.star_walk(sigs, keys, np.zeros(rowid.size), naive.min_equal(0.8, k))[0]
    centres = int((twin < 0).sum())
    b = unrelated.params.num_bands
    added = centres * (8 + 2 * k + 12 * b + 8) + 8 * chunks  # each centre's position, signature, keys, offset
    assert added > 4 * QUARTER * limit  # the centres do not fit the share
    assert added - sum(written) <= QUARTER * limit + 8 * chunks


def test_star_walks_chunks_within_a_quarter_of_the_budget(corpus, monkeypatch):
    """Each chunk of the walk (its members' signatures and shingle sets, gathered from the
    members' files) holds at most a quarter of the budget, the members fetched once."""
    from lance_minhash_sql.selfjoin import shingles as shingles_mod

    chunks, fetched = [], []
    gather, fetch = shingles_mod.ShingleSets.gather, shingles_mod.ShingleSets.fetch_rows

    def recorded(self, rows):
        got = gather(self, rows)
        chunks.append((len(rows), sum(a.nbytes for a in got)))
        return got

    def recorded_fetch(self, rows, counter="prefetched_rows"):
        fetched.append(len(rows))
        return fetch(self, rows, counter)

    monkeypatch.setattr(shingles_mod.ShingleSets, "gather", recorded)
    monkeypatch.setattr(shingles_mod.ShingleSets, "fetch_rows", recorded_fetch)
    flags = lms.keep_flags(corpus, "text", 0.8, clustering="star", verify="exact", memory_limit=LIMIT)
    assert flags.num_rows > 0 and len(chunks) > 1
    # the rows walked (the stars list fewer)
    walked = linked_components(corpus, "text", 0.8, "exact", Budget.of(LIMIT), None, "star").num_rows
    assert fetched == [walked] and sum(r for r, _ in chunks) == walked  # fetched once, walked once
    for rows, nbytes in chunks[1:]:  # (the first chunk's rows come from an assumed size a row)
        assert nbytes <= QUARTER * LIMIT  # signatures and shingle sets


def test_star_holds_its_walked_arrays_within_their_part_else_in_files(corpus, monkeypatch):
    """The walk's arrays over all its members (twin, equal values, similarity and Jaccard:
    ``_walked_types``) are held in memory when their bytes fit the budget's
    ``star_walked`` part, and in files (memory-mapped, none of their bytes in memory) at
    one byte less; the twins, similarities and Jaccards are the same, and so are the keep
    flags of a whole dedup with every walk's arrays in files."""
    import mmap

    table = linked_components(corpus, "text", 0.8, "exact", Budget.of(LIMIT), None, "star")
    rowid, cluster = table.column("_rowid").to_numpy(), table.column("cluster_id").to_numpy()
    opened = open_index(corpus, "text")
    need = rowid.size * sum(t.itemsize for t in star_mod._walked_types(rowid.size, opened.params.num_hashes, True))
    assert need == rowid.size * (4 + 2 + 4 + 8)
    walked, made = [], star_mod._walked

    def recorded(n, dtype, fill, in_file):
        a = made(n, dtype, fill, in_file)
        walked.append(a)
        return a

    monkeypatch.setattr(star_mod, "_walked", recorded)
    runs = {}
    for part in (need, need - 1):
        walked.clear()
        in_files = star_mod.STATS["walked_in_files"]
        b = dataclasses.replace(Budget.of(LIMIT), star_walked=part)
        runs[part] = star_mod.star_twins(opened, 0.8, rowid, cluster, None, "exact", b)
        in_memory = sum(a.nbytes for a in walked if not isinstance(getattr(a.base, "obj", None), mmap.mmap))
        assert len(walked) == 4 and in_memory <= part
        assert in_memory == (need if part == need else 0)
        assert star_mod.STATS["walked_in_files"] - in_files == (part < need)
    for a, b in zip(runs[need], runs[need - 1]):
        assert np.array_equal(a, b, equal_nan=True)
    assert (runs[need][0] >= 0).sum() > 100  # (rows dropped for a twin)
    expected = lms.keep_flags(corpus, "text", 0.8, clustering="star", verify="exact", memory_limit=LIMIT)
    monkeypatch.setattr(star_mod, "_walked", lambda n, dtype, fill, in_file: made(n, dtype, fill, True))
    assert lms.keep_flags(corpus, "text", 0.8, clustering="star", verify="exact", memory_limit=LIMIT).equals(expected)
