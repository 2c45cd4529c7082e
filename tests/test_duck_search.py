"""minhash_search / minhash_search_ids in SQL against Lance's own MinHashQuery."""

from __future__ import annotations

import datetime

import duckdb
import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.indices import IndexConfig
from lance.query import MinHashQuery

import lance_minhash_sql as lms
from lance_minhash_sql.faces.corpus import generate_texts


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A Lance-built index over columns of many types, 3 fragments."""
    n = 3000
    texts = generate_texts(0, n)
    rng = np.random.default_rng(3)
    table = pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "text": texts,
        "small": pa.array(rng.integers(0, 100, n), pa.int16()),
        "u": pa.array(rng.integers(0, 2**40, n).astype(np.uint64), pa.uint64()),
        "score": pa.array(rng.random(n).astype(np.float32)),
        "flag": pa.array(rng.random(n) < 0.5),
        "day": pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=int(i % 300)) for i in range(n)]),
        "ts": pa.array(np.arange(n, dtype="int64") * 1_000_000, pa.timestamp("us")),
        "raw": pa.array([bytes([i % 256, 0, 7]) for i in range(n)], pa.binary()),
        "tags": pa.array([[f"t{i % 5}", f"u{i % 3}"] for i in range(n)], pa.list_(pa.string())),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4),
        "meta": pa.array([{"a": int(i), "b": f"x{i}"} for i in range(n)]),
        "price": pa.array([f"{i}.25" for i in range(n)]).cast(pa.decimal128(10, 2)),
    })
    uri = str(tmp_path_factory.mktemp("s") / "typed.lance")
    ds = lance.write_dataset(table, uri, max_rows_per_file=1000)
    ds.create_scalar_index("text", IndexConfig("MINHASHLSH", {}))
    return uri


@pytest.fixture(scope="module")
def con():
    return lms.connect()


QUERIES = generate_texts(0, 40).to_pylist()


def test_search_returns_users_columns_with_real_types(con, dataset):
    rel = con.sql(f"SELECT * FROM minhash_search({lit(dataset)}, 'text', {lit(QUERIES[3])}, 5)")
    names = [d[0] for d in rel.description]
    assert names == ["id", "text", "small", "u", "score", "flag", "day", "ts", "raw", "tags", "emb", "meta",
                     "price", "_rowid", "_distance"]
    types = [str(t) for t in rel.types]
    assert types == ["BIGINT", "VARCHAR", "SMALLINT", "UBIGINT", "FLOAT", "BOOLEAN", "DATE", "TIMESTAMP", "BLOB",
                     "VARCHAR[]", "FLOAT[4]", "STRUCT(a BIGINT, b VARCHAR)", "DECIMAL(10,2)", "UBIGINT", "FLOAT"]
    ours = rel.arrow()
    ours = ours.read_all() if hasattr(ours, "read_all") else ours
    ds = lance.dataset(dataset)
    theirs = ds.to_table(nearest=MinHashQuery(QUERIES[3], "text"), limit=5, with_row_id=True)
    assert ours.column("_rowid").to_pylist() == theirs.column("_rowid").to_pylist()
    assert ours.column("_distance").to_pylist() == theirs.column("_distance").to_pylist()
    for name in ("id", "text", "small", "u", "flag", "day", "ts", "raw", "tags", "meta"):
        assert ours.column(name).to_pylist() == theirs.column(name).to_pylist(), name
    assert np.allclose(np.stack(ours.column("emb").to_numpy(zero_copy_only=False)),
                       np.stack(theirs.column("emb").to_numpy(zero_copy_only=False)))
    assert [str(v) for v in ours.column("price").to_pylist()] == [str(v) for v in theirs.column("price").to_pylist()]


def test_search_equals_lance_for_many_queries(con, dataset):
    ds = lance.dataset(dataset)
    for q in QUERIES:
        ours = con.sql(f"SELECT id, _rowid, _distance FROM minhash_search({lit(dataset)}, 'text', {lit(q)}, 10)").fetchall()
        t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=10, with_row_id=True, columns=["id", "_distance"])
        assert ours == list(zip(t.column("id").to_pylist(), t.column("_rowid").to_pylist(),
                                [float(np.float32(d)) for d in t.column("_distance").to_pylist()]))


def test_lateral_batch_equals_one_by_one(con, dataset):
    con.execute("CREATE OR REPLACE TEMP TABLE queries AS SELECT * FROM (VALUES " +
                ", ".join(f"({i}, {lit(q)})" for i, q in enumerate(QUERIES)) + ") t(qid, q)")
    batch = con.sql(f"SELECT qid, s._rowid, s._distance FROM queries, "
                    f"LATERAL minhash_search_ids({lit(dataset)}, 'text', q, 5) s ORDER BY qid, s._distance, s._rowid").fetchall()
    one_by_one = []
    for i, q in enumerate(QUERIES):
        rows = con.sql(f"SELECT * FROM minhash_search_ids({lit(dataset)}, 'text', {lit(q)}, 5)").fetchall()
        assert all(j is None for _, _, j in rows)  # _jaccard: NULL unless exact := true
        one_by_one += [(i, r, d) for r, d, _ in rows]
    assert batch == one_by_one and len(batch) > len(QUERIES)


def test_search_composes_with_sql(con, dataset):
    rows = con.sql(f"SELECT count(*), max(_distance) <= 1 FROM minhash_search({lit(dataset)}, 'text', "
                   f"{lit(QUERIES[0])}, 20) WHERE small < 50").fetchall()
    assert rows[0][1] is True


def test_search_errors(con, dataset, tmp_path):
    plain = str(tmp_path / "plain.lance")
    lance.write_dataset(pa.table({"text": ["a b c"]}), plain)
    cases = [
        (f"SELECT * FROM minhash_search({lit(plain)}, 'text', 'a b c')", "IndexNotFoundError", "minhash_build"),
        (f"SELECT * FROM minhash_search({lit(dataset)}, 'text', 'a b c', 0)", "k", "k"),
        (f"SELECT * FROM minhash_search({lit(dataset)}, 'nope', 'a b c')", "DatasetError", "nope"),
        (f"SELECT * FROM minhash_search_ids({lit(dataset)}, 'text', NULL, 0)", "k", "k"),
        (f"SELECT * FROM minhash_search_ids({lit(plain)}, 'text', 'a')", "IndexNotFoundError", "minhash_build"),
    ]
    for sql, cls, fragment in cases:
        with pytest.raises(duckdb.Error) as info:
            con.sql(sql).fetchall()
        assert cls in str(info.value) and fragment in str(info.value), (sql, str(info.value))


def test_null_queries_give_no_rows_and_the_others_their_answers(con, dataset):
    """A NULL query is a row without an answer, as NULL input is in SQL: a LATERAL batch
    with NULL queries answers the other rows exactly as each query alone does."""
    queries = [QUERIES[0], None, QUERIES[5], None, QUERIES[9]]
    con.execute("CREATE OR REPLACE TEMP TABLE q AS SELECT * FROM (VALUES "
                + ", ".join(f"({i}, {'NULL' if t is None else lit(t)})" for i, t in enumerate(queries))
                + ") t(id, text)")
    for verify in ("estimate", "exact"):
        got = con.sql(f"SELECT q.id, s._rowid, s._distance FROM q, LATERAL minhash_search_ids({lit(dataset)}, "
                      f"'text', q.text, 4, verify := '{verify}') s ORDER BY q.id, s._distance, s._rowid").fetchall()
        want = []
        for i, t in enumerate(queries):
            if t is not None:
                one = lms.search_ids(dataset, "text", [t], 4)
                want += [(i, r, d) for r, d in zip(one.column("_rowid").to_pylist(),
                                                   one.column("_distance").to_pylist())]
        assert {i for i, _, _ in want} == {0, 2, 4} and got == want
    assert con.sql(f"SELECT * FROM q, LATERAL minhash_search_ids({lit(dataset)}, 'text', NULL::VARCHAR, 4) s"
                   ).fetchall() == []
    for verify in ("estimate", "exact"):  # the one-query function, with its columns and their types
        rel = con.execute(f"SELECT * FROM minhash_search({lit(dataset)}, 'text', ?, 5, verify := '{verify}')", [None])
        names = [d[0] for d in rel.description]
        assert rel.fetchall() == [] and names[-3:] == (["_rowid", "_distance", "_jaccard"] if verify == "exact"
                                                       else ["price", "_rowid", "_distance"])


def test_query_without_tokens_returns_nothing(con, dataset):
    assert con.sql(f"SELECT * FROM minhash_search({lit(dataset)}, 'text', '!!! ???')").fetchall() == []


def test_search_carries_every_scalar_type_exactly(con, tmp_path):
    """Each scalar column comes back with its own type and the identical value (floats
    included: NaN, infinities, -0.0, the extremes), NULLs in place."""
    n = 60
    texts = generate_texts(0, n)
    f32 = np.array([0.1, 1 / 3, 3.4028235e38, -0.0, np.nan, np.inf, 1e-45, -2.5] * 8, np.float32)[:n]
    f64 = np.array([0.1, 1 / 3, 1.7976931348623157e308, 5e-324, -0.0, np.nan, -np.inf, 1e300] * 8)[:n]
    nulls = np.arange(n) % 7 == 3
    table = pa.table({
        "text": texts,
        "i8": pa.array(np.arange(n) - 30, pa.int8()),
        "u32": pa.array(np.arange(n, dtype=np.uint32) * 70_000_000, pa.uint32()),
        "u64": pa.array(np.full(n, 2**64 - 1, np.uint64) - np.arange(n, dtype=np.uint64), pa.uint64()),
        "f32": pa.array(f32),
        "f64": pa.array(f64, mask=nulls),
        "ts_ms": pa.array(np.arange(n, dtype=np.int64) * 1_234_567, pa.timestamp("ms")),
        "ts_ns": pa.array(np.arange(n, dtype=np.int64) * 1_234_567_891, pa.timestamp("ns")),
        "ts_tz": pa.array(np.arange(n, dtype=np.int64) * 86_400_000_001, pa.timestamp("us", tz="Europe/Paris")),
        "t": pa.array(np.arange(n, dtype=np.int64) * 1_000_001, pa.time64("us")),
        "big_text": pa.array([f"é{i}'\"\\x" for i in range(n)], pa.large_string()),
        "cat": pa.array([f"c{i % 3}" for i in range(n)]).dictionary_encode(),
        "blob": pa.array([bytes(range(i % 256, i % 256 + 5)) if i % 5 else None for i in range(n)], pa.large_binary()),
        "dec": pa.array([f"{i}12345678901234567.{i % 100:02d}" for i in range(n)]).cast(pa.decimal128(38, 2)),
    })
    uri = str(tmp_path / "scalars.lance")
    lance.write_dataset(table, uri).create_scalar_index("text", IndexConfig("MINHASHLSH", {}))
    ds = lance.dataset(uri)
    sizes = set()
    for q, k in zip(texts.to_pylist()[:12], [3, 1] * 6):  # one row: the one-SELECT form of duck/tables.inline_sql
        rel = con.sql(f"SELECT * FROM minhash_search({lit(uri)}, 'text', {lit(q)}, {k})")
        ours = rel.fetchall()
        theirs = ds.to_table(nearest=MinHashQuery(q, "text"), limit=k, with_row_id=True)
        expect = con.from_arrow(theirs.select(rel.columns)).fetchall()
        assert [repr(r) for r in ours] == [repr(r) for r in expect], q
        sizes.add(len(ours))
    assert 1 in sizes and max(sizes) > 1
    types = dict(zip(rel.columns, (str(t) for t in rel.types)))
    none = con.sql(f"SELECT * FROM minhash_search({lit(uri)}, 'text', 'zzzz qqqq xxxx', 3)")  # no row, same types
    assert none.fetchall() == [] and none.types == rel.types
    assert types["i8"] == "TINYINT" and types["u64"] == "UBIGINT" and types["ts_ns"] == "TIMESTAMP_NS"
    assert types["ts_tz"] == "TIMESTAMP WITH TIME ZONE" and types["blob"] == "BLOB" and types["dec"] == "DECIMAL(38,2)"


def test_search_rows_stay_ordered_without_insertion_order(dataset):
    """The result order is (_distance, _rowid) even when DuckDB may reorder results."""
    con = lms.connect(threads=2, preserve_insertion_order=False)
    ds = lance.dataset(dataset)
    for q in QUERIES[:10]:
        ours = con.sql(f"SELECT _rowid, _distance FROM minhash_search({lit(dataset)}, 'text', {lit(q)}, 20)").fetchall()
        t = ds.to_table(nearest=MinHashQuery(q, "text"), limit=20, with_row_id=True, columns=["_distance"])
        assert ours == list(zip(t.column("_rowid").to_pylist(),
                                [float(np.float32(d)) for d in t.column("_distance").to_pylist()]))


def test_a_result_too_large_to_inline_is_searched_once(con, tmp_path, monkeypatch):
    # a result longer than INLINE_MAX_CHARS as SQL text goes through _lms_search_rows; the
    # search search_plan ran while DuckDB planned is handed over, not run again
    from lance_minhash_sql.duck import tables
    from lance_minhash_sql.query import topk

    uri = str(tmp_path / "dups.lance")
    texts = ["one two three four five six seven eight"] * 120 + QUERIES
    lance.write_dataset(pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": texts}), uri)
    lms.build_index(uri, "text")
    calls = []
    real = topk.search
    monkeypatch.setattr(topk, "search", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    sql = f"SELECT id, _rowid, _distance FROM minhash_search({lit(uri)}, 'text', ?, 50)"
    inlined = con.execute(sql, [texts[0]]).fetchall()
    assert len(calls) == 1
    monkeypatch.setattr(tables, "INLINE_MAX_CHARS", 100)
    got = con.execute(sql, [texts[0]]).fetchall()
    assert len(calls) == 2 and got == inlined and len(got) == 50
    t = lance.dataset(uri).to_table(nearest=MinHashQuery(texts[0], "text"), limit=50, with_row_id=True,
                                    columns=["id", "_distance"])
    assert [r[1] for r in got] == t.column("_rowid").to_pylist()
    assert tables._AWAITING.usage == 0  # taken by its statement
