"""Threshold search (``threshold``, ``k=None``) and exact scores (``exact``) against
brute force: every live row sharing a band key with the query (Lance's candidate rule),
kept when ``float32(eq) / float32(k) >= threshold``, ordered by ``(_distance, _rowid)``.

The index is built by Lance itself; rows are deleted and a fragment no segment covers is
appended, and a filter is applied, for at least 200 queries.
"""

from __future__ import annotations

import warnings

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.query import MinHashQuery
from naive import exact_jaccard

import lance_minhash_sql as lms
from lance_minhash_sql.core.errors import InvalidParameterError, LowRecallWarning
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.faces.corpus import CorpusSpec, generate_batches, generate_texts
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.query.topk import SEARCH_IDS_EXACT_SCHEMA, SEARCH_IDS_SCHEMA, search, search_ids

PARAMS = MinHashParams()
SPEC = CorpusSpec(seed=3)
FILTER = "id % 3 != 1"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A Lance-built index on 3000 rows, 300 more rows appended unindexed, deletions."""
    from conftest import build_native_index

    uri = str(tmp_path_factory.mktemp("threshold") / "corpus.lance")
    table = pa.Table.from_batches(list(generate_batches(3000, SPEC)))
    build_native_index(uri, table, PARAMS, max_rows_per_file=1000)
    lance.write_dataset(pa.Table.from_batches(list(generate_batches(300, SPEC, start=3000))), uri, mode="append")
    lance.dataset(uri).delete("id % 10 = 7")
    return uri


@pytest.fixture(scope="module")
def queries():
    """Rows of the corpus (indexed, appended, deleted), the same with a few words dropped,
    rows 3300..3339 of the same generator (some near-duplicates of earlier rows), and an
    empty and a token-less text."""
    rng = np.random.default_rng(1)
    texts = generate_texts(0, 3300, SPEC).to_pylist()
    out = [texts[i] for i in rng.integers(0, 3300, 120)]
    for i in rng.integers(0, 3300, 80):
        words = texts[i].split()
        drop = set(rng.integers(0, len(words), max(1, len(words) // 20)).tolist())
        out.append(" ".join(w for j, w in enumerate(words) if j not in drop))
    return out + generate_texts(3300, 3340, SPEC).to_pylist() + ["", "!!! ???"]


def brute(uri: str, queries: list[str], threshold: float, filter_ids=None) -> list[list[tuple[int, float]]]:
    """Per query, ``[(rowid, distance)]`` of every qualifying candidate in order."""
    t = lance.dataset(uri).to_table(columns=["id", "text"], with_row_id=True)
    signer = signer_for(PARAMS)
    sigs, has = signer.sign(t.column("text").combine_chunks())
    rowids = t.column("_rowid").to_numpy()
    ok = has if filter_ids is None else has & filter_ids(t.column("id").to_numpy())
    sigs, rowids = sigs[ok], rowids[ok]
    keys = signer.band_keys(sigs)
    qsigs, qhas = signer.sign(pa.array(queries, pa.string()))
    qkeys = signer.band_keys(qsigs)
    k = np.float32(PARAMS.num_hashes)
    out = []
    for i in range(len(queries)):
        if not qhas[i]:
            out.append([])
            continue
        cand = np.flatnonzero((keys == qkeys[i]).any(axis=1))
        eq = (sigs[cand] == qsigs[i]).sum(axis=1)
        sim = eq.astype(np.float32) / k
        dist = np.float32(1) - sim
        keep = sim.astype(np.float64) >= threshold
        rows = sorted(zip(dist[keep].tolist(), rowids[cand[keep]].tolist()))
        out.append([(r, d) for d, r in rows])
    return out


def per_query(table: pa.Table, n: int) -> list[list[tuple[int, float]]]:
    out = [[] for _ in range(n)]
    for q, r, d in zip(*(table.column(c).to_pylist() for c in ("query_index", "_rowid", "_distance"))):
        out[q].append((r, d))
    return out


@pytest.mark.parametrize("threshold", [0.8, 0.6])
def test_threshold_search_equals_brute_force(dataset, queries, threshold):
    assert len(queries) >= 200
    want = brute(dataset, queries, threshold)
    assert sum(map(len, want)) > 150 and max(map(len, want)) > 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowRecallWarning)
        got = search_ids(dataset, "text", queries, None, threshold=threshold)
        assert got.schema.equals(SEARCH_IDS_SCHEMA)
        assert per_query(got, len(queries)) == want
        # with a limit: the first k of the same order
        got = per_query(search_ids(dataset, "text", queries, 2, threshold=threshold), len(queries))
        assert got == [w[:2] for w in want]
        # with a filter, applied before the cut
        got = search_ids(dataset, "text", queries, None, threshold=threshold, filter=FILTER)
        assert per_query(got, len(queries)) == brute(dataset, queries, threshold, lambda ids: ids % 3 != 1)
        # one query with the user's columns
        i = int(np.argmax([len(w) for w in want]))
        one = search(dataset, "text", queries[i], None, threshold=threshold, columns=["id"])
        assert list(zip(one.column("_rowid").to_pylist(), one.column("_distance").to_pylist())) == want[i]


def test_lance_with_a_large_limit_agrees(dataset, queries):
    """Lance's own MinHashQuery (limit large enough for every candidate), cut at the threshold."""
    ds = lance.dataset(dataset)
    got = per_query(search_ids(dataset, "text", queries[:60], None, threshold=0.8), 60)
    for q, mine in zip(queries[:60], got):
        if not signer_for(PARAMS).tokens(q):
            continue
        ref = ds.to_table(nearest=MinHashQuery(q, "text"), limit=5000, columns=["_distance"], with_row_id=True)
        dist = ref.column("_distance").to_numpy()
        keep = (np.float32(1) - dist).astype(np.float64) >= 0.8
        assert mine == list(zip(ref.column("_rowid").to_numpy()[keep].tolist(), dist[keep].tolist()))


def test_exact_scores_equal_shingle_jaccard(dataset, queries):
    """verify="exact" with a threshold: the hits whose estimate reaches 4 standard
    deviations under it (the floor written out here) kept iff their exact Jaccard reaches it."""
    ds = lance.dataset(dataset)
    floor = 0.7 - 4 * np.sqrt(0.7 * 0.3 / PARAMS.num_hashes)
    plain = search_ids(dataset, "text", queries, None, threshold=floor)
    got = search_ids(dataset, "text", queries, None, threshold=0.7, verify="exact")
    assert got.schema.equals(SEARCH_IDS_EXACT_SCHEMA)
    with pytest.warns(FutureWarning, match="verify := 'exact'"):
        older = search_ids(dataset, "text", queries, None, threshold=0.7, exact=True)
    assert older.equals(got)
    text_of = dict(zip(ds.to_table(columns=["text"], with_row_id=True).column("_rowid").to_pylist(),
                       ds.to_table(columns=["text"]).column("text").to_pylist()))
    want = []
    for q, r, d in zip(*(plain.column(c).to_pylist() for c in ("query_index", "_rowid", "_distance"))):
        j = exact_jaccard(queries[q], text_of[r], PARAMS)
        if j >= 0.7:
            want.append((q, r, d, j))
    rows = list(zip(*(got.column(c).to_pylist() for c in ("query_index", "_rowid", "_distance", "_jaccard"))))
    assert [r[:3] for r in rows] == [w[:3] for w in want]
    assert np.allclose([r[3] for r in rows], [w[3] for w in want], rtol=0, atol=1e-12)
    assert 0 < len(rows) < plain.num_rows
    assert any(1 - d < 0.7 for _, _, d, _ in rows)  # found below the threshold's estimate
    # without a threshold: every top-k hit gets its score, none dropped
    top = search_ids(dataset, "text", queries[:20], 3, verify="exact")
    assert top.num_rows == search_ids(dataset, "text", queries[:20], 3).num_rows
    one = search(dataset, "text", queries[0], 3, verify="exact", columns=["id"])
    assert one.column_names == ["id", "_rowid", "_distance", "_jaccard"]
    assert one.column("_jaccard").to_pylist() == [
        pytest.approx(exact_jaccard(queries[0], text_of[r], PARAMS)) for r in one.column("_rowid").to_pylist()]


def test_sql_threshold_and_exact(dataset, queries):
    con = lms.connect()
    con.execute("CREATE TEMP TABLE qs AS SELECT * FROM (SELECT unnest(?) AS q, unnest(range(?)) AS qid)",
                [queries, len(queries)])
    rows = con.execute("SELECT qid, s._rowid, s._distance, s._jaccard FROM qs, LATERAL minhash_search_ids("
                       "?, 'text', q, k := NULL, threshold := 0.8) s ORDER BY qid, s._distance, s._rowid",
                       [dataset]).fetchall()
    want = brute(dataset, queries, 0.8)
    assert rows == [(q, r, d, None) for q, w in enumerate(want) for r, d in w]
    rows = con.execute("SELECT qid, s._rowid, s._jaccard FROM qs, LATERAL minhash_search_ids("
                       "?, 'text', q, NULL, threshold := 0.8, verify := 'exact') s", [dataset]).fetchall()
    py = search_ids(dataset, "text", queries, None, threshold=0.8, verify="exact")
    assert sorted(rows) == sorted(zip(*(py.column(c).to_pylist() for c in ("query_index", "_rowid", "_jaccard"))))
    i = int(np.argmax([len(w) for w in want]))
    q = queries[i].replace("'", "''")
    t = con.sql(f"SELECT * FROM minhash_search('{dataset}', 'text', '{q}', k := NULL, threshold := 0.8, "
                "verify := 'exact')").to_arrow_table()
    assert t.column_names == ["id", "text", "_rowid", "_distance", "_jaccard"]
    ref = search(dataset, "text", queries[i], None, threshold=0.8, verify="exact")
    assert t.column("_rowid").to_pylist() == ref.column("_rowid").to_pylist()
    assert t.column("_jaccard").to_pylist() == ref.column("_jaccard").to_pylist()
    t = con.sql(f"SELECT * FROM minhash_search('{dataset}', 'text', '{q}', threshold := 0.8)").to_arrow_table()
    assert t.column_names == ["id", "text", "_rowid", "_distance"]
    assert t.column("_rowid").to_pylist() == [r for r, _ in want[i][:10]]


def test_bad_input(dataset):
    for k, t, match in [(None, None, "needs a threshold"), (0, 0.8, "k=0"), (-1, None, "k=-1"),
                        (None, 0, "threshold=0"), (5, 1.5, "threshold=1.5"), (None, float("nan"), "threshold=nan"),
                        (None, "0.8", "threshold='0.8'")]:
        with pytest.raises(InvalidParameterError, match=match):
            search_ids(dataset, "text", ["a b c"], k, threshold=t)
        with pytest.raises(InvalidParameterError, match=match):
            search(dataset, "text", "a b c", k, threshold=t)
    with pytest.raises(InvalidParameterError, match="exact"):
        search_ids(dataset, "text", ["a b c"], 5, exact="yes")
    with pytest.warns(LowRecallWarning, match="threshold := 0.3 .* bands of"):
        search_ids(dataset, "text", ["a b c"], None, threshold=0.3)
    con = lms.connect()
    for sql, match in [
        ("SELECT * FROM minhash_search_ids(?, 'text', 'a b c', k := NULL)", "needs a threshold"),
        ("SELECT * FROM minhash_search_ids(?, 'text', 'a b c', k := 0)", "k := 0"),
        ("SELECT * FROM minhash_search_ids(?, 'text', 'a b c', threshold := 2)", "threshold := 2"),
        ("SELECT * FROM minhash_search(?, 'text', 'a b c', k := NULL)", "needs a threshold"),
        ("SELECT * FROM minhash_search(?, 'text', 'a b c', threshold := 0)", "threshold := 0"),
        ("SELECT * FROM minhash_search(?, 'text', 'a b c', exact := NULL)", "exact is NULL"),
    ]:
        with pytest.raises(Exception, match=match):
            con.execute(sql, [dataset]).fetchall()
