"""The cross-dataset join against brute-force oracles.

The oracle signs every live row of both datasets with the right index's parameters (the
signer is bit-identical to Lance, see test_signatures.py), lists every (left, right) pair
sharing at least one band key in plain numpy, and verifies it with the full signatures.
The join must equal it exactly (set and similarity), whatever the shards, chunks,
segments, unindexed fragments, deletions, left index and store.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from conftest import indexed_corpus
from exact_join import exact_join
from naive import candidate_floor, shingle_set

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import DatasetError, IndexNotFoundError, InvalidParameterError, LowRecallWarning
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches, generate_texts, write_corpus
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.selfjoin.join import JOIN_SCHEMA, join
from lance_minhash_sql.selfjoin.join_shards import join_shards, shard_join
from lance_minhash_sql.selfjoin.pairs import pairs

PARAMS = MinHashParams()


# --------------------------------------------------------------------------- oracles


def signed_rows(uri: str, column: str, params: MinHashParams, options=None):
    t = lance.dataset(uri, storage_options=options).to_table(columns=[column], with_row_id=True)
    sigs, has = signer_for(params).sign(t.column(column).combine_chunks())
    sigs = sigs[has]
    return t.column("_rowid").to_numpy()[has], sigs, signer_for(params).band_keys(sigs)


def brute_join(left: str, right: str, threshold: float, params=PARAMS, column="text", right_column="text",
               left_options=None, right_options=None) -> dict:
    """``{(left_rowid, right_rowid): similarity}`` of every verified left x right candidate."""
    lr, ls, lk = signed_rows(left, column, params, left_options)
    rr, rs, rk = signed_rows(right, right_column, params, right_options)
    cand = []
    for j in range(params.num_bands):
        order = np.argsort(rk[:, j], kind="stable")
        sk = rk[order, j]
        lo = np.searchsorted(sk, lk[:, j], "left")
        hi = np.searchsorted(sk, lk[:, j], "right")
        for i in np.flatnonzero(hi > lo):
            for p in order[lo[i]:hi[i]]:
                cand.append((i, p))
    if not cand:
        return {}
    cand = np.unique(np.array(cand), axis=0)
    eq = (ls[cand[:, 0]] == rs[cand[:, 1]]).sum(axis=1)
    sim = (eq.astype(np.float32) / np.float32(params.num_hashes)).astype(np.float64)
    keep = sim >= threshold
    return {(int(a), int(b)): float(s) for a, b, s in zip(lr[cand[keep, 0]], rr[cand[keep, 1]], sim[keep])}


def as_dict(batches, with_jaccard: bool = False) -> dict:
    out = {}
    count = 0
    for b in batches:
        assert b.schema.equals(JOIN_SCHEMA)
        jac = b.column("jaccard")
        assert (jac.null_count == 0) if with_jaccard else (jac.null_count == b.num_rows)
        vals = zip(b.column("left_rowid").to_pylist(), b.column("right_rowid").to_pylist(),
                   b.column("similarity").to_pylist(), jac.to_pylist())
        for x, y, s, j in vals:
            out[(x, y)] = (s, j) if with_jaccard else s
        count += b.num_rows
    assert count == len(out), "a pair was reported twice"
    return out


def all_shards(*args, num_shards, chunk_pairs, threads=1, **kw):
    for s in join_shards(*args, num_shards=num_shards, **kw):
        yield from shard_join(s, chunk_pairs=chunk_pairs, threads=threads)


# --------------------------------------------------------------------------- fixtures


def _left_table(start: int, stop: int) -> pa.Table:
    """Corpus rows ``start .. stop - 1``: their near-duplicates' sources are earlier rows."""
    t = pa.Table.from_batches(list(generate_batches(stop - start, start=start)))
    return t


@pytest.fixture(scope="module")
def right(tmp_path_factory) -> str:
    """Indexed rows 0..2999 in three fragments, an unindexed appended fragment, deletions."""
    return indexed_corpus(str(tmp_path_factory.mktemp("join") / "right.lance"), 3000, 1000, "id % 7 = 3",
                          appended=800)


@pytest.fixture(scope="module")
def left(tmp_path_factory) -> str:
    """Rows 2500..3999 of the same corpus (overlapping the right's rows and near-duplicates
    of them), no index, deletions."""
    uri = str(tmp_path_factory.mktemp("join") / "left.lance")
    lance.write_dataset(_left_table(2500, 4000), uri, max_rows_per_file=600)
    lance.dataset(uri).delete("id % 11 = 5")
    return uri


@pytest.fixture(scope="module")
def want_08(left, right):
    want = brute_join(left, right, 0.8)
    assert len(want) > 300
    return want


# --------------------------------------------------------------------------- equality with the oracle


def test_join_equals_brute_force(left, right, want_08, self_join_budget):
    assert as_dict(join(left, right, "text", 0.8)) == want_08
    # pairs with rows of the unindexed fragment and with indexed ones
    frag = min(f.fragment_id for f in lance.dataset(right).get_fragments()[3:])
    assert any(y >> 32 >= frag for _, y in want_08) and any(y >> 32 < frag for _, y in want_08)


@pytest.mark.parametrize("num_hashes, num_bands", [(100, 20), (60, 12)])
def test_join_equals_brute_force_at_other_signature_lengths(tmp_path, left, num_hashes, num_bands):
    # with k not a power of two, eq / k differs between float32 (Lance's formula) and float64
    params = MinHashParams(num_hashes, num_bands)
    uri = str(tmp_path / "right.lance")
    write_corpus(uri, 3000, rows_per_fragment=1000)
    build_index(uri, "text", num_hashes=num_hashes, num_bands=num_bands)
    want = brute_join(left, uri, 0.7, params=params)
    assert len(want) > 100
    assert any(s != float(np.float64(round(s * num_hashes)) / num_hashes) for s in want.values())
    assert as_dict(join(left, uri, "text", 0.7)) == want


@pytest.mark.parametrize("threshold", [0.5, 0.9, 1.0])
def test_other_thresholds(left, right, threshold):
    with pytest.warns(LowRecallWarning) if threshold == 0.5 else _no_warning():
        got = as_dict(join(left, right, "text", threshold))
    assert got == brute_join(left, right, threshold)


class _no_warning:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("error", LowRecallWarning)

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)


def test_shards_and_chunks_do_not_change_the_answer(left, right, want_08):
    assert as_dict(all_shards(left, right, "text", 0.8, num_shards=7, chunk_pairs=13)) == want_08
    assert as_dict(all_shards(left, right, "text", 0.8, num_shards=1, chunk_pairs=1)) == want_08
    # a shard's key range cut into parts joined on threads: the same pairs in the same order
    one = pa.Table.from_batches(list(all_shards(left, right, "text", 0.8, num_shards=2, chunk_pairs=64)))
    three = pa.Table.from_batches(list(all_shards(left, right, "text", 0.8, num_shards=2, chunk_pairs=64, threads=3)))
    assert three.equals(one)
    assert as_dict(three.to_batches()) == want_08


def test_left_index_reused_only_with_identical_parameters(tmp_path, right):
    same = str(tmp_path / "same.lance")
    lance.write_dataset(_left_table(2800, 3600), same, max_rows_per_file=300)
    build_index(same, "text")
    write_corpus(same, 200, mode="append", start=100)  # unindexed left rows
    lance.dataset(same).delete("id % 13 = 0")
    (s, *_) = join_shards(same, right, "text", 0.8)
    assert s.plan.left.reused
    want = brute_join(same, right, 0.8)
    assert want and as_dict(join(same, right, "text", 0.8)) == want

    other = str(tmp_path / "other.lance")
    lance.write_dataset(_left_table(2800, 3600), other, max_rows_per_file=300)
    build_index(other, "text", num_bands=32)  # other parameters: its signatures are never mixed in
    (s, *_) = join_shards(other, right, "text", 0.8)
    assert not s.plan.left.reused
    assert as_dict(join(other, right, "text", 0.8)) == brute_join(other, right, 0.8)


def test_same_dataset_is_pairs_both_orders_plus_diagonal(right):
    got = as_dict(join(right, right, "text", 0.8))
    (s, *_) = join_shards(right, right, "text", 0.8)
    assert s.plan.left.reused
    want = {}
    for b in pairs(right, "text", 0.8):
        for x, y, sim in zip(*(b.column(i).to_pylist() for i in range(3))):
            want[(x, y)] = want[(y, x)] = sim
    rowids, _, _ = signed_rows(right, "text", PARAMS)
    for r in rowids.tolist():
        want[(r, r)] = 1.0
    assert got == want


def exact_brute_join(left: str, right: str, threshold: float, params=PARAMS, left_options=None,
                     right_options=None) -> dict:
    """``{(left_rowid, right_rowid): (similarity, jaccard)}`` of ``verify='exact'``: every
    candidate whose estimate reaches the floor (tests/naive.py), kept iff the exact Jaccard
    of its shingle sets (``lance.tokenize``) reaches ``threshold``."""
    cand = brute_join(left, right, candidate_floor(threshold, params.num_hashes), params, left_options=left_options,
                      right_options=right_options)
    lt = lance.dataset(left, storage_options=left_options).to_table(columns=["text"], with_row_id=True).to_pydict()
    rt = lance.dataset(right, storage_options=right_options).to_table(columns=["text"], with_row_id=True).to_pydict()
    ltext, rtext = dict(zip(lt["_rowid"], lt["text"])), dict(zip(rt["_rowid"], rt["text"]))
    out = {}
    for (x, y), sim in cand.items():
        a, b = shingle_set(ltext[x], params), shingle_set(rtext[y], params)
        jac = len(a & b) / len(a | b)
        if jac >= threshold:
            out[(x, y)] = (sim, jac)
    return out


def assert_exact(got: dict, want: dict) -> None:
    """The exact join's pairs are the oracle's, with its similarity and Jaccard."""
    assert got.keys() == want.keys() and len(want) > 100
    assert all(got[p][0] == want[p][0] and got[p][1] == pytest.approx(want[p][1], abs=1e-12) for p in want)


def test_verify_exact_is_the_exact_rule(left, right, want_08):
    got = as_dict(join(left, right, "text", 0.8, verify="exact"), with_jaccard=True)
    want = exact_brute_join(left, right, 0.8)
    assert_exact(got, want)
    assert set(want_08) - set(got), "some estimates >= 0.8 have a true Jaccard below"
    with pytest.warns(FutureWarning, match="exact=True is verify='exact'"):
        older = as_dict(lms.join(left, right, "text", 0.8, exact=True), with_jaccard=True)
    assert older == got


def test_sql_equals_python_with_right_column(tmp_path, left, right, want_08, self_join_budget):
    body = str(tmp_path / "body.lance")
    t = lance.dataset(left).to_table()
    lance.write_dataset(t.rename_columns(["id", "body"]), body)
    con = lms.connect()
    rows = con.execute("SELECT left_rowid, right_rowid, similarity, jaccard FROM "
                       "minhash_join(?, ?, 'body', right_column := 'text')", [body, right]).fetchall()
    # row addresses of the rewritten left differ: compare through the ids
    ids = dict(zip(lance.dataset(body).to_table(columns=["id"], with_row_id=True).column("_rowid").to_pylist(),
                   t.column("id").to_pylist()))
    lid = dict(zip(lance.dataset(left).to_table(columns=["id"], with_row_id=True).column("id").to_pylist(),
                   lance.dataset(left).to_table(columns=["id"], with_row_id=True).column("_rowid").to_pylist()))
    got = {(lid[ids[x]], y): s for x, y, s, j in rows}
    assert len(got) == len(rows) and all(r[3] is None for r in rows)
    assert got == want_08
    got = {(x, y): (s, j) for x, y, s, j in con.execute(
        "SELECT * FROM minhash_join(?, ?, 'text', threshold := 0.8, verify := 'exact')", [left, right]).fetchall()}
    assert got == as_dict(join(left, right, "text", 0.8, verify="exact"), with_jaccard=True)


# --------------------------------------------------------------------------- bad input


def test_bad_input(tmp_path, left, right):
    versions = (lance.dataset(left).version, lance.dataset(right).version)
    for bad in (0, -0.1, 1.5, float("nan"), None, "0.8", True):
        with pytest.raises(InvalidParameterError, match="threshold"):
            join(left, right, "text", bad)
    with pytest.raises(InvalidParameterError, match="exact"):
        lms.join(left, right, "text", 0.8, exact="yes")
    with pytest.raises(InvalidParameterError, match="verify='exactly'"):
        join(left, right, "text", 0.8, verify="exactly")
    with pytest.raises(DatasetError, match="'nope' is not in dataset"):
        join(left, right, "nope", 0.8, right_column="text")
    with pytest.raises(DatasetError, match="'nope' is not in dataset"):
        join(left, right, "text", 0.8, right_column="nope")
    with pytest.raises(DatasetError, match="string column"):
        join(left, right, "id", 0.8, right_column="text")
    bare = str(tmp_path / "bare.lance")
    lance.write_dataset(_left_table(0, 50), bare)
    with pytest.raises(IndexNotFoundError, match="minhash_build"):
        join(left, bare, "text", 0.8)
    con = lms.connect()
    for sql, match in [
        (f"SELECT * FROM minhash_join('{left}', '{right}', 'text', threshold := 0)", "threshold"),
        (f"SELECT * FROM minhash_join('{left}', '{right}', 'text', threshold := NULL)", "threshold is NULL"),
        (f"SELECT * FROM minhash_join('{left}', '{bare}', 'text')", "minhash_build"),
        (f"SELECT * FROM minhash_join('{left}', '{right}', 'id', right_column := 'text')", "string column"),
        (f"SELECT * FROM minhash_join('{left}', '{right}', 'text', exact := NULL)", "exact is NULL"),
    ]:
        with pytest.raises(Exception, match=match):
            con.execute(sql).fetchall()
    assert (lance.dataset(left).version, lance.dataset(right).version) == versions
    assert len(lance.dataset(bare).describe_indices()) == 0


# --------------------------------------------------------------------------- object store


def test_s3_each_side_with_its_own_options(s3, tmp_path, left, right, want_08):
    """Right on the S3 test server and left local, then the other way round: each side's
    options reach only its own dataset (a local path takes no S3 options)."""
    bucket = s3.make_bucket("lms-join")
    opts = s3.storage_options()
    r_uri = f"s3://{bucket}/right.lance"
    lance.write_dataset(lance.dataset(right).to_table(columns=["id", "text"]), r_uri, storage_options=opts,
                        max_rows_per_file=1000)
    build_index(r_uri, "text", storage_options=opts)
    extra = pa.Table.from_batches(list(generate_batches(300, start=3000)))
    lance.write_dataset(extra, r_uri, mode="append", storage_options=opts)
    lance.dataset(r_uri, storage_options=opts).delete("id % 5 = 1")
    want = brute_join(left, r_uri, 0.8, right_options=opts)
    assert len(want) > 100
    assert as_dict(join(left, r_uri, "text", 0.8, right_storage_options=opts)) == want
    exact = exact_brute_join(left, r_uri, 0.8, right_options=opts)  # the right's texts fetched from the store
    assert_exact(as_dict(join(left, r_uri, "text", 0.8, verify="exact", right_storage_options=opts),
                         with_jaccard=True), exact)

    l_uri = f"s3://{bucket}/left.lance"
    lance.write_dataset(lance.dataset(left).to_table(columns=["id", "text"]), l_uri, storage_options=opts,
                        max_rows_per_file=600)
    lance.dataset(l_uri, storage_options=opts).delete("id % 4 = 0")
    want = brute_join(l_uri, right, 0.8, left_options=opts)
    assert len(want) > 100
    assert as_dict(join(l_uri, right, "text", 0.8, left_storage_options=opts)) == want
    exact = exact_brute_join(l_uri, right, 0.8, left_options=opts)
    assert_exact(as_dict(join(l_uri, right, "text", 0.8, verify="exact", left_storage_options=opts),
                         with_jaccard=True), exact)

    con = lms.connect()
    m = "MAP {" + ", ".join(f"'{k}': '{v}'" for k, v in opts.items()) + "}"
    got = {(x, y): s for x, y, s, _ in con.execute(
        f"SELECT * FROM minhash_join('{l_uri}', '{right}', 'text', left_storage_options := {m})").fetchall()}
    assert got == want
    with pytest.raises(Exception, match="cannot be opened"):  # the right side's options do not reach the left
        con.execute(f"SELECT * FROM minhash_join('{l_uri}', '{right}', 'text', "
                    f"right_storage_options := {m})").fetchall()


# --------------------------------------------------------------------------- quality


def test_quality_on_a_two_dataset_split(tmp_path):
    """An evaluation set (every fifth row of a corpus with known near-duplicates) against
    the rest, indexed: at threshold 0.8 the join finds at least 99% of the cross pairs of
    exact Jaccard >= 0.9, and at least 95% of what it reports has exact Jaccard >= 0.7.
    The truth is an exact Jaccard similarity join over all rows (tests/exact_join.py)."""
    n = 20_000
    spec = CorpusSpec(seed=5)
    texts = generate_texts(0, n, spec)
    ids = np.arange(n)
    is_left = ids % 5 == 0
    left, right = str(tmp_path / "eval.lance"), str(tmp_path / "corpus.lance")
    for uri, mask in ((left, is_left), (right, ~is_left)):
        lance.write_dataset(pa.table({"id": ids[mask], "text": texts.filter(pa.array(mask))}), uri,
                            max_rows_per_file=5000)
    build_index(right, "text")

    offsets, hashes = signer_for(PARAMS).shingle_sets(texts)
    a, b, jac = exact_join(offsets, hashes, 0.7)
    cross = is_left[a] != is_left[b]
    lo = np.where(is_left[a], a, b)[cross]
    hi = np.where(is_left[a], b, a)[cross]
    truth = dict(zip(zip(lo.tolist(), hi.tolist()), jac[cross].tolist()))
    high = {p for p, j in truth.items() if j >= 0.9}
    assert len(high) > 300

    def id_of(uri):
        t = lance.dataset(uri).to_table(columns=["id"], with_row_id=True)
        return dict(zip(t.column("_rowid").to_pylist(), t.column("id").to_pylist()))

    lid, rid = id_of(left), id_of(right)
    got = {(lid[x], rid[y]) for x, y in as_dict(join(left, right, "text", 0.8))}
    recall = len(high & got) / len(high)
    precision = sum(p in truth for p in got) / len(got)
    print(f"cross pairs J>=0.9: {len(high)}, reported: {len(got)}, recall {recall:.4f}, precision {precision:.4f}")
    assert recall >= 0.99
    assert precision >= 0.95


# --------------------------------------------------------------------------- command line


def test_join_command(tmp_path, capsys, monkeypatch, left, right, want_08):
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from lance_minhash_sql.faces import cli
    from lance_minhash_sql.selfjoin import join as join_mod

    out = tmp_path / "pairs.parquet"
    assert cli.main(["join", left, right, "text", "--threshold", "0.8", "--output", str(out), "--quiet"]) == 0
    assert f"{len(want_08):,} (left, right) pairs at threshold 0.8 written to" in capsys.readouterr().out
    t = pq.read_table(out)
    assert t.schema.equals(JOIN_SCHEMA) and as_dict(t.to_batches()) == want_08
    csv = tmp_path / "pairs.csv"
    assert cli.main(["join", left, right, "text", "--verify", "exact", "--output", str(csv), "--quiet"]) == 0
    t = pcsv.read_csv(csv)
    assert t.num_rows == len(as_dict(join(left, right, "text", 0.8, verify="exact"), with_jaccard=True))
    assert cli.main(["join", left, right, "text", "--limit", "3", "--quiet"]) == 0
    assert "left_rowid" in capsys.readouterr().out
    assert cli.main(["join", left, right, "text", "--output", str(tmp_path / "p.json")]) == 2
    assert ".parquet or .csv" in capsys.readouterr().err

    def failing(*args, **kw):  # a run that fails after its first batch leaves no file behind
        yield next(iter(orig(*args, **kw)))
        raise DatasetError("the store went away")

    orig = join_mod.join
    monkeypatch.setattr(join_mod, "join", failing)
    bad = tmp_path / "half.parquet"
    assert cli.main(["join", left, right, "text", "--output", str(bad), "--quiet"]) == 2
    assert "the store went away" in capsys.readouterr().err
    assert not bad.exists() and [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


def test_signed_left_rows_respect_the_memory_budget(tmp_path, left, right):
    """Signing a left dataset larger than the index cache's capacity is refused with the fix
    (index the left column with the right index's parameters); indexed, it joins."""
    from lance_minhash_sql.core.errors import ResourceLimitError
    from lance_minhash_sql.index.opened import clear_cache, set_cache_capacity
    from lance_minhash_sql.selfjoin.join_shards import signed_bytes

    rows = lance.dataset(left).count_rows()
    copy = str(tmp_path / "indexed.lance")
    lance.write_dataset(lance.dataset(left).to_table(), copy)
    old = set_cache_capacity(signed_bytes(rows, PARAMS) - 1)
    try:
        with pytest.raises(ResourceLimitError, match="num_bands := 16"):
            join(copy, right, "text", 0.8)
        build_index(copy, "text")
        set_cache_capacity(old)
        want = brute_join(copy, right, 0.8)
        set_cache_capacity(signed_bytes(rows, PARAMS) - 1)
        assert as_dict(join(copy, right, "text", 0.8)) == want
    finally:
        set_cache_capacity(old)
        clear_cache()


def test_sql_statement_is_pinned_to_the_versions_it_started_on(tmp_path, right):
    """The planned SQL names both versions; rows appended and deleted afterwards, and a plan
    evicted from the cache (planned again for those versions), change nothing."""
    from lance_minhash_sql.duck import cross_join as duck_join

    lcopy, rcopy = str(tmp_path / "l.lance"), str(tmp_path / "r.lance")
    lance.write_dataset(_left_table(2500, 3300), lcopy)
    lance.write_dataset(lance.dataset(right).to_table(columns=["id", "text"]), rcopy, max_rows_per_file=1000)
    build_index(rcopy, "text")
    want = brute_join(lcopy, rcopy, 0.8)
    con = lms.connect()
    plan = con.execute("SELECT _lms_join_plan(?, ?, 'text', NULL, 0.8, false, NULL, NULL, NULL, 'estimate', 'local', "
                       "NULL)", [lcopy, rcopy]).fetchall()[0][0]
    versions = (lance.dataset(lcopy).version, lance.dataset(rcopy).version)
    assert f", {versions[0]}, {versions[1]}, " in plan
    lance.write_dataset(_left_table(2500, 2600), lcopy, mode="append")
    lance.write_dataset(_left_table(2500, 2600), rcopy, mode="append")
    lance.dataset(rcopy).delete("id % 2 = 0")
    got = {(a, b): s for a, b, s, _ in con.execute(plan).fetchall()}
    assert got == want
    duck_join._PLANS.clear()
    got = {(a, b): s for a, b, s, _ in con.execute(plan).fetchall()}
    assert got == want
    now = {(a, b): s for a, b, s, _ in con.execute("SELECT * FROM minhash_join(?, ?, 'text')",
                                                   [lcopy, rcopy]).fetchall()}
    assert now == brute_join(lcopy, rcopy, 0.8) != want


def test_stable_row_ids_nulls_and_empty_texts(tmp_path):
    """Stable row ids and deletions on both sides (the left reusing its index), and left
    rows without tokens (NULL, empty, punctuation only), which match nothing."""
    right_uri, left_uri = str(tmp_path / "r.lance"), str(tmp_path / "l.lance")
    lance.write_dataset(_left_table(0, 2500), right_uri, max_rows_per_file=1000, enable_stable_row_ids=True)
    build_index(right_uri, "text")
    lance.dataset(right_uri).delete("id % 4 = 1")
    t = _left_table(2000, 3200)
    texts = t.column("text").to_pylist()
    texts[:3] = [None, "", "!!! ???"]
    t = t.set_column(1, "text", pa.array(texts, pa.string()))
    lance.write_dataset(t, left_uri, max_rows_per_file=500, enable_stable_row_ids=True)
    build_index(left_uri, "text")
    lance.dataset(left_uri).delete("id % 6 = 2")
    (s, *_) = join_shards(left_uri, right_uri, "text", 0.8)
    assert s.plan.left.reused
    want = brute_join(left_uri, right_uri, 0.8)
    assert len(want) > 50
    assert as_dict(join(left_uri, right_uri, "text", 0.8)) == want
    lt = lance.dataset(left_uri).to_table(columns=["id"], with_row_id=True, filter="id < 2003")
    tokenless = set(lt.column("_rowid").to_pylist())
    assert len(tokenless) == 2 and not any(x in tokenless for x, _ in want)
    # in SQL too: the NULL left row gives no rows, the others their pairs
    rows = lms.connect().sql(f"SELECT left_rowid, right_rowid FROM minhash_join('{left_uri}', '{right_uri}', "
                             "'text', threshold := 0.8)").fetchall()
    assert set(rows) == set(want)


def test_shared_rows_walks_a_chunked_column_like_numpy():
    """The kernel that finds a shard's right rows in place, against numpy on a column
    stored in uneven chunks with gaps between them (as a mapped file's mini-blocks), both
    by its merge pass and by its search from key to key (long runs, few left keys)."""
    from lance_minhash_sql.kernels.cross_pairs import GALLOP_RATIO, shared_rows

    rng = np.random.default_rng(5)
    galloped = 0
    for trial in range(120):
        n = int(rng.integers(0, 400)) if trial % 2 else int(rng.integers(0, 4000))
        keys = np.sort(rng.integers(0, 60, n).astype(np.uint64))
        sizes = rng.integers(1, 40, n + 1)
        first_row = np.concatenate(([0], np.cumsum(sizes)))
        first_row = first_row[first_row < max(n, 1)].astype(np.int64)
        value_index = first_row + np.arange(first_row.size) * 3  # a 3-value gap before each chunk
        values = np.full(n + 3 * first_row.size, 99, dtype=np.uint64)
        c = np.searchsorted(first_row, np.arange(n), side="right") - 1
        values[value_index[c] + np.arange(n) - first_row[c]] = keys
        lkeys = np.sort(rng.integers(0, 60, int(rng.integers(0, 50))).astype(np.uint64))
        start, stop = sorted(int(x) for x in rng.integers(0, n + 1, 2))
        galloped += stop - start > GALLOP_RATIO * lkeys.size > 0  # searched from key to key, not walked
        lo, last = sorted(int(x) for x in rng.integers(0, 61, 2))
        lmask = np.zeros(lkeys.size, dtype=np.bool_)
        ro = [a.copy() for a in (lkeys, values, first_row, value_index)]
        for a in ro:
            a.setflags(write=False)
        rows, got = shared_rows(*ro, start, stop, np.uint64(lo), np.uint64(last), lmask)
        r = np.arange(start, stop)
        want = r[(keys[r] >= lo) & (keys[r] <= last) & np.isin(keys[r], lkeys)]
        assert rows.tolist() == want.tolist(), trial
        assert got.tolist() == keys[want].tolist()
        assert lmask.tolist() == np.isin(lkeys, keys[want]).tolist()
    assert 10 < galloped < 110  # both ways of finding the rows, against the same oracle


# k = 128 with 16 bands (the kernel's one-compare path), and shapes visited pair by pair:
# 8 values a band at other k (64, and 120 whose rows are not one 128-value block), 4 a band
@pytest.mark.parametrize("k, num_bands", [(128, 16), (64, 8), (120, 15), (128, 32)])
def test_join_kernel_equals_the_longhand_rule(k, num_bands):
    """``join_chunk`` on random signatures (copies, edits of every size, faked key
    collisions) writes exactly the pairs of :func:`naive.join_kernel_pairs`, in its order
    and with its equal positions, whatever the output size and visit budget it resumes
    with."""
    from naive import band_keys, join_kernel_pairs

    from lance_minhash_sql.kernels.bucket_pairs import min_matches, padded_hashes
    from lance_minhash_sql.kernels.cross_pairs import join_chunk, new_join_cursor

    r = k // num_bands
    rng = np.random.default_rng(k + num_bands)
    nl, nr = 40, 160
    left = rng.integers(0, 1 << 16, (nl, k)).astype(np.uint16)
    left[1::5] = left[0::5]  # runs of two left rows per key
    source = rng.integers(0, nl, nr)
    edits = rng.choice([0.0, 0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 1.0], nr)
    right = left[source].copy()
    edited = rng.random((nr, k)) < edits[:, None]
    right[edited] = rng.integers(0, 1 << 16, int(edited.sum()))
    lk = np.array([band_keys(s.tolist(), num_bands) for s in left], dtype=np.uint64)
    rk = np.array([band_keys(s.tolist(), num_bands) for s in right], dtype=np.uint64)
    collided = 0
    for y in np.flatnonzero(edits >= 0.3)[::2]:  # a collision with the source, in one differing band
        differ = [j for j in range(num_bands) if (right[y, j * r:j * r + r] != left[source[y], j * r:j * r + r]).any()]
        if differ:
            j = differ[int(rng.integers(0, len(differ)))]
            rk[y, j] = lk[source[y], j]
            collided += 1
    assert collided >= 5
    pool = np.zeros((nl + nr, padded_hashes(k)), dtype=np.uint16)  # padding lanes 0: equal
    pool[:nl, :k], pool[nl:, :k] = left, right
    rowids = np.concatenate((np.arange(nl), np.arange(nr))).astype(np.uint64) + 1000  # the sides' ids overlap

    def band_rows(keys, first):
        docs = np.repeat(np.arange(keys.shape[0], dtype=np.uint32) + first, num_bands)
        flat = keys.reshape(-1)
        o = np.lexsort((rng.random(flat.size), flat))  # ties in random order: the kernel keeps the given one
        return flat[o].copy(), docs[o].copy()

    (lkeys, ldocs), (rkeys, rdocs) = band_rows(lk, 0), band_rows(rk, nl)
    inputs = [lkeys, ldocs, rkeys, rdocs, pool.view(np.uint64), pool, rowids]
    for a in inputs:
        a.setflags(write=False)  # as the join passes them
    def shares_a_band(pair):
        a, b = pool[pair[0] - 1000], pool[nl + pair[1] - 1000]
        return any((a[j * r:j * r + r] == b[j * r:j * r + r]).all() for j in range(num_bands))

    for min_eq in (1, min_matches(0.5, k), min_matches(0.8, k)):
        want = join_kernel_pairs(lkeys, ldocs, rkeys, rdocs, pool, rowids, k, num_bands, min_eq)
        assert len(want) >= 30
        if min_eq == 1:  # the collisions reach the answer: pairs of no equal band, from a colliding key
            assert not all(shares_a_band(p) for p in want)
        for cap, budget in ((1, 1), (3, 2), (7, 1 << 30), (1 << 12, 5), (1 << 12, 1 << 30)):
            out = [np.empty(cap, np.uint64), np.empty(cap, np.uint64), np.empty(cap, np.int32)]
            cursor, got, done = new_join_cursor(), [], False
            while not done:
                n, done = join_chunk(*inputs, k, num_bands, min_eq, cursor, *out, budget)
                got += list(zip(out[0][:n].tolist(), out[1][:n].tolist(), out[2][:n].tolist()))
            assert got == want, (min_eq, cap, budget)
