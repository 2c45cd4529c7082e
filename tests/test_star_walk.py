"""The star walk's edges, and what exact verification and star hold against their shares of
the budget: ties exactly at the threshold (both walks, estimate and exact), the centres
reset when a chunk starts a new component, exact verification's shingle sets on disk with
each row fetched once in row-id order however they outgrow ``memory_limit``, and star's
chunks within a quarter of it (``core/tuning.py``: SHINGLE_FETCH_ROWS, STAR_CHUNK_SHARE;
``docs/scale.md``). Each test fails on a mutation that the oracle tests
of ``test_star.py`` and ``test_verify.py`` let through."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import naive

import lance_minhash_sql as lms
from lance_minhash_sql.faces.corpus import write_corpus
from lance_minhash_sql.kernels.star import star_match, star_match_exact, star_walk, star_walk_exact
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


def test_a_member_sharing_exactly_min_eq_values_is_a_twin_in_the_walk_and_the_match():
    sigs = np.array([[1, 2, 3, 4], [1, 2, 3, 9]], dtype=np.uint16)  # 3 of 4 equal: exactly min_eq
    comp = np.zeros(2, dtype=np.int64)
    twin, eq = star_walk(sigs, comp, np.zeros(2, dtype=np.bool_), np.int64(3))
    assert twin.tolist() == [-1, 0] and eq.tolist() == [0, 3]
    twin = np.full(1, -1, dtype=np.int64)
    eq = np.zeros(1, dtype=np.int64)
    star_match(sigs[1:], 1, sigs[:1], np.int64(5), np.int64(3), twin, eq)
    assert twin.tolist() == [5] and eq.tolist() == [3]


def test_a_member_at_exactly_the_jaccard_threshold_is_a_twin_in_the_exact_walk_and_match():
    offsets, hashes = _csr([[1, 2, 3, 4], [1, 2, 3, 5]])  # Jaccard 3 / 5, the threshold itself
    sigs = np.zeros((2, 4), dtype=np.uint16)
    comp = np.zeros(2, dtype=np.int64)
    twin, _, jac = star_walk_exact(sigs, offsets, hashes, comp, np.zeros(2, dtype=np.bool_), 3 / 5)
    assert twin.tolist() == [-1, 0] and jac[1] == 3 / 5
    twin = np.full(1, -1, dtype=np.int64)
    eq = np.zeros(1, dtype=np.int64)
    jac = np.full(1, np.nan)
    m_off, m_hash = _csr([[1, 2, 3, 5]])
    c_off, c_hash = _csr([[1, 2, 3, 4]])
    star_match_exact(sigs[1:], m_off, m_hash, 1, sigs[:1], c_off, c_hash, np.int64(0), 3 / 5, twin, eq, jac)
    assert twin.tolist() == [0] and jac[0] == 3 / 5


# --------------------------------------------------------------------------- centres per component


def test_a_chunk_forgets_the_centres_of_the_component_before():
    """Two identical rows of two components in one chunk: two centres, by both walks."""
    sigs = np.array([[1, 2, 3, 4]] * 2, np.uint16)
    comp, matched = np.array([0, 1]), np.zeros(2, bool)
    twin, eq = star_walk(sigs, comp, matched, np.int64(3))
    assert twin.tolist() == [-1, -1] == naive.star_walk(sigs, comp, matched, 3)[0]
    offsets, hashes = _csr([[1, 2, 3], [1, 2, 3]])
    twin, _, _ = star_walk_exact(sigs, offsets, hashes, comp, matched, 0.5)
    assert twin.tolist() == [-1, -1] == naive.star_walk_exact([{1, 2, 3}] * 2, comp, matched, 0.5)


@pytest.mark.parametrize("seed", range(4))
def test_the_walks_equal_the_longhand_walk(seed):
    """Random chunks of several components, some rows matched already: both walks give
    the twins (and equal counts, and Jaccards) of tests/naive.py's walk."""
    rng = np.random.default_rng(seed)
    n = 300
    sigs = rng.integers(0, 3, (n, 8)).astype(np.uint16)
    comp = np.sort(rng.integers(0, 12, n))
    matched = rng.random(n) < 0.1
    twin, eq = star_walk(sigs, comp, matched, np.int64(5))
    want_twin, want_eq = naive.star_walk(sigs, comp, matched, 5)
    assert twin.tolist() == want_twin and eq.tolist() == want_eq
    assert 20 < (twin >= 0).sum() < n - 20  # twins and centres both
    sets = [set(rng.choice(12, int(rng.integers(0, 8)), replace=False).tolist()) for _ in range(n)]
    offsets, hashes = _csr([list(x) for x in sets])
    twin, eq, jac = star_walk_exact(sigs, offsets, hashes, comp, matched, 0.5)
    assert twin.tolist() == naive.star_walk_exact(sets, comp, matched, 0.5)
    assert 20 < (twin >= 0).sum() < n - 20
    has = twin >= 0
    assert jac[has].tolist() == [len(sets[i] & sets[j]) / len(sets[i] | sets[j]) for i, j in
                                 zip(np.flatnonzero(has), twin[has])]
    assert eq[has].tolist() == [int((sigs[i] == sigs[j]).sum()) for i, j in zip(np.flatnonzero(has), twin[has])]


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
    twin, _, _ = star_mod.star_twins(twins_dataset, 0.8, rowid, cluster, order, verify, 64 << 20)
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
    spilled = []
    savez = np.savez

    def recorded(path, *arrays):
        spilled.append(sum(a.nbytes for a in arrays))
        return savez(path, *arrays)

    monkeypatch.setattr(star_mod.np, "savez", recorded)
    rowid, sigs = naive.signed(unrelated.uri, unrelated.params)[:2]
    cluster = np.zeros(rowid.size, dtype=np.uint64)
    chunks = star_mod.STATS["chunks"]
    twin, _, _ = star_mod.star_twins(unrelated, 0.8, rowid, cluster, np.arange(rowid.size), "estimate", limit)
    chunks = star_mod.STATS["chunks"] - chunks
    k = unrelated.params.num_hashes
    assert twin.tolist() == naive.star_walk(sigs, np.zeros(rowid.size), np.zeros(rowid.size, bool),
                                            naive.min_equal(0.8, k))[0]
    centres = int((twin < 0).sum())
    added = centres * (8 + 2 * k + 8) + 8 * chunks  # each centre's position, signature and offset; a block's end
    assert added > 4 * QUARTER * limit  # the centres do not fit the share
    assert added - sum(spilled) <= QUARTER * limit + 8 * chunks


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
    walked = linked_components(corpus, "text", 0.8, "exact", LIMIT, None, "star").num_rows  # the stars list fewer
    assert fetched == [walked] and sum(r for r, _ in chunks) == walked  # fetched once, walked once
    for rows, nbytes in chunks[1:]:  # (the first chunk's rows come from an assumed size a row)
        assert nbytes <= QUARTER * LIMIT  # signatures and shingle sets
