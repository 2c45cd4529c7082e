"""The table macros in SQL: minhash_build, minhash_indexes (search is in test_duck_search.py)."""

from __future__ import annotations

import dataclasses

import duckdb
import lance
import pyarrow as pa
import pytest
from lance.indices import IndexConfig
from lance.query import MinHashQuery

import lance_minhash_sql as lms
from lance_minhash_sql.core.banding import recall_bands
from lance_minhash_sql.core.records import record_schema
from lance_minhash_sql.diagnostics import tables as report_tables
from lance_minhash_sql.duck import cross_join, lifecycle, report, self_join, tables, udfs
from lance_minhash_sql.duck.results import duck_type
from lance_minhash_sql.faces.corpus import generate_texts, write_corpus
from lance_minhash_sql.index import results
from lance_minhash_sql.index.results import BuildResult


@pytest.fixture
def corpus(tmp_path):
    uri = str(tmp_path / "corpus.lance")
    write_corpus(uri, 3000, rows_per_fragment=1000)
    return uri


@pytest.fixture
def con():
    return lms.connect()


def test_build_returns_one_row_and_lance_answers(con, corpus, tmp_path):
    row = con.sql(f"SELECT * FROM minhash_build('{corpus}', 'text')").fetchall()
    names = [d[0] for d in con.sql(f"SELECT * FROM minhash_build('{corpus}', 'text')").description]
    assert names == ["index_name", "column", "num_hashes", "num_bands", "rows_per_band", "shingle_size",
                     "tokenizer", "segments", "rows_indexed", "rows_without_tokens", "seconds", "bytes",
                     "dataset_version", "segment_uuids", "spilled_bytes"]
    assert names == [f.name for f in dataclasses.fields(BuildResult)]  # the record, described once
    r = dict(zip(names, row[0]))
    assert (r["index_name"], r["column"], r["num_hashes"], r["num_bands"], r["rows_per_band"]) == \
        ("text_idx", "text", 128, 16, 8)
    assert r["rows_indexed"] == 3000 and r["rows_without_tokens"] == 0 and r["segments"] == 1 and r["bytes"] > 0
    assert r["spilled_bytes"] == 0  # 3,000 rows sort in memory
    ds = lance.dataset(corpus)
    (desc,) = ds.describe_indices()
    assert r["segment_uuids"] == [desc.segments[0].uuid]
    assert desc.type_url == "/lance.index.pb.MinHashLshIndexDetails" and desc.num_rows_indexed == 3000
    # the same data indexed by Lance itself answers identically
    native = lance.write_dataset(ds.to_table(), str(tmp_path / "native.lance"), max_rows_per_file=1000)
    native.create_scalar_index("text", IndexConfig("MINHASHLSH", {}))
    native = lance.dataset(str(tmp_path / "native.lance"))
    for q in generate_texts(0, 25).to_pylist():
        kw = dict(limit=10, with_row_id=True, columns=["id", "_distance"])
        assert ds.to_table(nearest=MinHashQuery(q, "text"), **kw).equals(
            native.to_table(nearest=MinHashQuery(q, "text"), **kw))


def test_build_memory_limit_in_sql_spills_and_gives_the_same_index(con, corpus):
    """``minhash_build(..., memory_limit := ...)``: the sort budget in SQL, as in Python and
    on the command line; a small budget spills and writes the same band rows."""
    def bands():  # the segment's band rows, read by Lance's own file reader
        from lance.file import LanceFileReader

        (seg,) = lance.dataset(corpus).describe_indices()[0].segments
        return LanceFileReader(f"{corpus}/_indices/{seg.uuid}/bands.lance").read_all().to_table()

    (small,) = con.sql(f"SELECT spilled_bytes FROM minhash_build('{corpus}', 'text', memory_limit := '64KiB')").fetchall()
    assert small[0] > 0
    spilled = bands()
    (full,) = con.sql(f"SELECT spilled_bytes FROM minhash_build('{corpus}', 'text', memory_limit := 1073741824)").fetchall()
    assert full[0] == 0 and bands().equals(spilled)
    with pytest.raises(duckdb.Error, match="minhash_build: memory_limit := 'lots' is not a byte size"):
        con.sql(f"SELECT * FROM minhash_build('{corpus}', 'text', memory_limit := 'lots')").fetchall()


def test_build_parameters_threshold_and_tokenizer(con, corpus):
    con.sql(f"SELECT * FROM minhash_build('{corpus}', 'text', num_hashes := 64, shingle_size := 2, "
            "threshold := 0.9, tokenizer := {'base_tokenizer': 'whitespace'})").fetchall()
    (seg,) = con.sql(f"SELECT num_hashes, num_bands, rows_per_band, shingle_size, tokenizer, fragment_ids, \"rows\" "
                     f"FROM minhash_indexes('{corpus}')").fetchall()
    b, r = recall_bands(0.9, 64)
    assert seg[:4] == (64, b, r, 2)
    assert '"base_tokenizer": "whitespace"' in seg[4]
    assert seg[5] == [0, 1, 2] and seg[6] == 3000
    details = lance.dataset(corpus).describe_indices()[0].details
    assert details["num_hashes"] == 64 and details["tokenizer"]["base_tokenizer"] == "whitespace"


def test_indexes_of_a_dataset_without_index(con, corpus):
    assert con.sql(f"SELECT count(*) FROM minhash_indexes('{corpus}')").fetchall() == [(0,)]


def test_build_replace_false_and_errors_change_nothing(con, corpus):
    con.sql(f"SELECT * FROM minhash_build('{corpus}', 'text')").fetchall()
    version = lance.dataset(corpus).version
    cases = [
        (f"SELECT * FROM minhash_build('{corpus}', 'text', replace := false)", "DatasetError", "replace"),
        (f"SELECT * FROM minhash_build('{corpus}', 'nope')", "DatasetError", "'nope'"),
        (f"SELECT * FROM minhash_build('{corpus}', 'id')", "DatasetError", "string"),
        (f"SELECT * FROM minhash_build('{corpus}', 'text', num_bands := 7)", "InvalidParameterError", "num_bands := 7"),
        (f"SELECT * FROM minhash_build('{corpus}', 'text', num_hashes := NULL)", "InvalidInputError", "num_hashes"),
        ("SELECT * FROM minhash_build(NULL, 'text')", "InvalidInputError", "dataset"),
        (f"SELECT * FROM minhash_build('{corpus}/missing.lance', 'text')", "DatasetError", "missing.lance"),
        (f"SELECT * FROM minhash_build('{corpus}', 'text', tokenizer := '{{\"custom_stop_words\": [\"a\"]}}')",
         "InvalidParameterError", "custom_stop_words"),
        # the tokenizer text is decoded as the scalar functions decode it (duck/args.py)
        (f"SELECT * FROM minhash_build('{corpus}', 'text', tokenizer := '{{bad')", "InvalidParameterError",
         "minhash_build: tokenizer := '{bad' is not valid JSON"),
        (f"SELECT * FROM minhash_build('{corpus}', 'text', tokenizer := '[1]')", "InvalidParameterError",
         "minhash_build: tokenizer := '[1]' must be a JSON object"),
        (f"SELECT * FROM minhash_build('{corpus}', 'text', replace := NULL)", "InvalidInputError", "replace is NULL"),
        (f"SELECT * FROM minhash_build('{corpus}', 'text', threshold := 1.5)", "InvalidParameterError",
         "threshold := 1.5 is out of range: requires 0 < threshold <= 1"),
    ]
    for sql, cls, fragment in cases:
        with pytest.raises(duckdb.Error) as info:
            con.sql(sql).fetchall()
        assert cls in str(info.value) and fragment in str(info.value), sql
    assert lance.dataset(corpus).version == version


def test_build_is_not_run_at_plan_time(con, corpus):
    con.sql(f"EXPLAIN SELECT * FROM minhash_build('{corpus}', 'text')").fetchall()
    assert lance.dataset(corpus).describe_indices() == []


def _duckdb_type_of(arrow_type: pa.DataType) -> str:
    """DuckDB's own type for an Arrow type (what it makes of an Arrow column)."""
    return str(duckdb.connect().from_arrow(pa.table({"x": pa.array([], arrow_type)})).types[0])


def _parsed(declared: str) -> str:
    """A type text as DuckDB parses and prints it."""
    return str(duckdb.sqltype(declared))


def test_sql_result_types_are_duckdbs_mapping_of_the_arrow_schemas():
    """Every result record and table schema gives the SQL type DuckDB itself gives its
    Arrow type, and every UDF's declared return type is one of those derivations."""
    schemas = [record_schema(c) for c in (results.BuildResult, results.OptimizeResult, results.PrewarmResult,
                                          results.IndexSegment)]
    schemas += [getattr(m, n) for m in (results, report_tables) for n in m.__all__ if n.endswith("_SCHEMA")]
    schemas.append(pa.schema([results.SEARCH_IDS_EXACT_SCHEMA.field(n) for n in ("_rowid", "_distance", "_jaccard")]))
    derived = set()
    for schema in schemas:
        t = pa.list_(pa.struct(list(schema)))
        assert _parsed(duck_type(t)) == _duckdb_type_of(t), schema
        derived.add(duck_type(t))
    for t in (udfs.SIGNATURE_TYPE, udfs.BAND_KEYS_TYPE, pa.float64()):
        assert _parsed(duck_type(t)) == _duckdb_type_of(t)
        derived.add(duck_type(t))
    for spec in (tables.TABLE_UDFS + lifecycle.LIFECYCLE_UDFS + self_join.PAIR_UDFS + report.REPORT_UDFS + udfs.UDFS
                 + cross_join.JOIN_UDFS):
        if spec.name not in ("_lms_search_rows", "_lms_search_plan", "_lms_pairs_plan", "_lms_join_plan",
                             "_lms_dedup_plan", "_lms_rows_plan", "_lms_rows_part"):
            assert spec.return_type in derived, spec.name
    assert [f.name for f in dataclasses.fields(BuildResult)] == record_schema(BuildResult).names


def test_collect_columns_keeps_values_and_nulls_and_bounds_rows():
    from lance_minhash_sql.core.errors import ResourceLimitError
    from lance_minhash_sql.duck.results import collect_columns

    schema = pa.schema([("a", pa.uint64()), ("b", pa.float64()), ("c", pa.float64()), ("d", pa.string())])

    def batch(a, b, c, d):
        return pa.record_batch([pa.array(a, pa.uint64()), pa.array(b, pa.float64()), pa.array(c, pa.float64()),
                                pa.array(d, pa.string())], schema=schema)

    parts = [batch([1, 2], [None, None], [0.5, None], ["x", "y"]), batch([], [], [], []),
             batch([3], [None], [1.5], [None])]
    cols = collect_columns(iter(parts), 3, lambda: ResourceLimitError("too many"))
    assert [c.to_pylist() for c in cols] == [[1, 2, 3], [None] * 3, [0.5, None, 1.5], ["x", "y", None]]
    assert [c.type for c in cols] == list(schema.types)
    assert collect_columns(iter([batch([], [], [], [])]), 3, lambda: ResourceLimitError("too many")) is None
    with pytest.raises(ResourceLimitError, match="too many"):
        collect_columns(iter(parts), 2, lambda: ResourceLimitError("too many"))


def test_minhash_rows_are_lances_rows_with_their_row_ids(con, tmp_path):
    """minhash_rows: every live row of every fragment, each column with its own type, and
    _rowid as Lance gives it (the oracle: to_table(with_row_id=True)); columns := a subset."""
    uri = str(tmp_path / "typed.lance")
    table = pa.table({"id": pa.array(range(30), pa.int64()), "text": [f"row {i}" for i in range(30)],
                      "score": pa.array([i / 7 for i in range(30)], pa.float32()),
                      "tags": [[str(i), "x"] for i in range(30)], "raw": [bytes([i]) for i in range(30)]})
    lance.write_dataset(table, uri, max_rows_per_file=8)  # four fragments
    lance.dataset(uri).delete("id % 5 = 0")
    want = lance.dataset(uri).to_table(with_row_id=True).to_pylist()
    got = con.sql(f"SELECT * FROM minhash_rows('{uri}') ORDER BY _rowid").arrow().read_all()
    assert got.column_names == ["id", "text", "score", "tags", "raw", "_rowid"]
    assert sorted(got.to_pylist(), key=lambda r: r["_rowid"]) == sorted(want, key=lambda r: r["_rowid"])
    assert len(want) == 24
    some = con.sql(f"SELECT * FROM minhash_rows('{uri}', columns := ['text']) ORDER BY _rowid").fetchall()
    assert some == [(r["text"], r["_rowid"]) for r in sorted(want, key=lambda r: r["_rowid"])]


DECLARED_FLAT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
                       pa.uint64(), pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.large_string(),
                       pa.binary(), pa.large_binary()]


@pytest.mark.parametrize("arrow_type", DECLARED_FLAT_TYPES, ids=str)
def test_a_flat_columns_declared_sql_type_is_duckdbs(arrow_type):
    """A search's user column of a flat type takes its SQL type from the declared mapping
    (``duck/results.py: duck_type``; ``duck/tables.py`` asks DuckDB only of a type it does
    not declare): each type it declares is DuckDB's own, spelled as DuckDB spells it."""
    assert duck_type(arrow_type) == _duckdb_type_of(arrow_type)


@pytest.mark.parametrize("arrow_type", [pa.date32(), pa.timestamp("us"), pa.decimal128(10, 3)], ids=str)
def test_other_flat_types_are_left_to_duckdb(arrow_type):
    with pytest.raises(TypeError, match="no DuckDB type declared"):
        duck_type(arrow_type)
