"""The SQL argument decoding every UDF shares (duck/args.py), rule by rule.

Oracles: DuckDB itself for the SQL text written into generated queries (a literal must read
back as the value, an identifier as the name), the ``json`` module for ``to_json()`` text,
and the documented rules (NULL, whole numbers, true/false, VARCHAR only) for the rest.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from lance_minhash_sql.core.errors import InvalidInputError, InvalidParameterError
from lance_minhash_sql.core.params import TokenizerParams
from lance_minhash_sql.duck import args, sqltext


def test_udf_record_defaults_to_arrow():
    u = args.Udf("f", len, ("VARCHAR",), "BIGINT", False)
    assert u.arrow is True and u.side_effects is False
    assert args.Udf("f", len, ("VARCHAR",), "BIGINT", True, False).arrow is False


def test_column_joins_chunks_and_passes_arrays_through():
    arr = pa.array([1, 2, 3])
    assert args.column(arr) is arr
    one = pa.chunked_array([[1, 2]])
    assert args.column(one).equals(pa.array([1, 2])) and isinstance(args.column(one), pa.Array)
    many = pa.chunked_array([[1, 2], [], [3]])
    got = args.column(many)
    assert isinstance(got, pa.Array) and got.to_pylist() == [1, 2, 3]


def test_scalar_rows_are_the_rows_by_argument_name():
    rows = args.scalar_rows("f", a=pa.chunked_array([[1, None], [3]]), b=pa.array(["x", "y", None]))
    assert rows == [{"a": 1, "b": "x"}, {"a": None, "b": "y"}, {"a": 3, "b": None}]
    assert args.scalar_rows("f", a=pa.array([], pa.int64())) == []


def test_require_names_the_first_null_argument():
    args.require("fn", {"a": 0, "b": "", "c": False}, "a", "b", "c")  # falsy values are values
    with pytest.raises(InvalidInputError) as e:
        args.require("fn", {"a": 1, "b": None, "c": None}, "a", "b", "c")
    assert str(e.value) == "fn: b is NULL; pass a value"
    args.require("fn", {"a": None})  # nothing required, nothing checked


@pytest.mark.parametrize("x, want", [(128.0, 128), (-3.0, -3), (0.0, 0), (1.5, 1.5), (7, 7), ("8", "8"),
                                     (None, None), (True, True)])
def test_number_turns_whole_floats_into_ints(x, want):
    got = args.number(x)
    assert got == want and type(got) is type(want)


def test_integer_takes_whole_numbers_and_null():
    assert args.integer("fn", "k", None) is None
    for value, want in ((5.0, 5), (5, 5), (-2.0, -2), (2.0 ** 40, 2 ** 40)):
        got = args.integer("fn", "k", value)
        assert got == want and type(got) is int
    for bad in (1.5, "3", True, float("nan")):
        with pytest.raises(InvalidParameterError) as e:
            args.integer("fn", "k", bad)
        assert str(e.value) == f"fn: k={bad!r} must be an integer; pass a whole number"


def test_flag_is_true_or_false_only():
    assert args.flag("fn", "exact", True) is True and args.flag("fn", "exact", False) is False
    assert args.flag("fn", "exact", np.bool_(True)) is True
    for bad in (1, 0, None, "true", 1.0):
        with pytest.raises(InvalidParameterError) as e:
            args.flag("fn", "exact", bad)
        assert str(e.value) == f"fn: exact={bad!r} must be true or false"


def test_text_refuses_null_and_other_types_by_name():
    assert args.text("fn", "query", "") == "" and args.text("fn", "query", "a b") == "a b"
    for bad, shown in ((None, "NULL"), (3, "int"), (b"x", "bytes"), (["a"], "list")):
        with pytest.raises(InvalidInputError) as e:
            args.text("fn", "query", bad)
        assert str(e.value) == f"fn: query is {shown}; pass a text"


@pytest.mark.parametrize("typ, fix", [
    ("BLOB", "decode UTF-8 bytes first, e.g. fn(decode(t), ...)"),
    ("VARCHAR[]", "join the list into one string first, e.g. fn(array_to_string(t, ' '), ...)"),
    ("VARCHAR[2]", "join the list into one string first, e.g. fn(array_to_string(t, ' '), ...)"),
    ("JSON", "extract the text, e.g. json_extract_string(t, '$.field'), or cast with t::VARCHAR"),
    ("INTEGER", "cast it, e.g. fn(CAST(t AS VARCHAR), ...), if its text form is what you mean"),
])
def test_check_text_types_names_the_type_and_the_conversion(typ, fix):
    with pytest.raises(InvalidInputError) as e:
        args.check_text_types("fn", "t", pa.array(["VARCHAR", typ, "VARCHAR"]))
    assert str(e.value) == f"fn: t has type {typ}, but a VARCHAR is required; {fix}"


def test_check_text_types_accepts_varchar_and_untyped_null():
    args.check_text_types("fn", "t", pa.array(["VARCHAR", '"NULL"', "VARCHAR"]))
    args.check_text_types("fn", "t", pa.chunked_array([["VARCHAR"], ['"NULL"']]))
    args.check_text_types("fn", "t", pa.array([], pa.string()))


def test_check_text_types_against_duckdb_typeof():
    """The accepted spellings are what DuckDB's typeof() returns."""
    con = duckdb.connect()
    got = con.execute("SELECT typeof('x'), typeof(NULL), typeof('x'::BLOB), typeof(['x']), "
                      "typeof('{}'::JSON), typeof(1)").fetchone()
    args.check_text_types("fn", "t", pa.array(got[:2]))
    for t in got[2:]:
        with pytest.raises(InvalidInputError, match=f"has type {t.replace('[', '.').replace(']', '.')}"):
            args.check_text_types("fn", "t", pa.array([t]))


@pytest.mark.parametrize("value", [{"a": [1, None]}, "text", 3, 2.5, None, True, []])
def test_json_value_reads_to_json_text(value):
    con = duckdb.connect()
    if value is None:
        assert args.json_value(None) is None
    text = con.execute("SELECT to_json(?::JSON)", [json.dumps(value)]).fetchone()[0]
    assert args.json_value(text) == value


def test_json_value_passes_non_json_text_through():
    assert args.json_value("{not json") == "{not json"
    assert args.json_value("") == ""


def test_tokenizer_from_each_form_the_macro_passes():
    want = TokenizerParams(base_tokenizer="whitespace", lower_case=False)
    options = {"base_tokenizer": "whitespace", "lower_case": False}
    con = duckdb.connect()
    as_struct = con.execute("SELECT to_json({'base_tokenizer': 'whitespace', 'lower_case': false})").fetchone()[0]
    as_text = con.execute("SELECT to_json(?::VARCHAR)", [json.dumps(options)]).fetchone()[0]
    for value in (as_struct, as_text, json.dumps(options)):
        args.tokenizer.cache_clear()
        assert args.tokenizer("fn", value) == want
    for default in (None, "null", json.dumps(""), json.dumps("  "), "{}", json.dumps("{}")):
        assert args.tokenizer("fn", default) == TokenizerParams()


@pytest.mark.parametrize("inner", ["[1, 2]", "3", "\"whitespace\"", "true"])
def test_tokenizer_text_that_is_json_but_not_an_object(inner):
    with pytest.raises(InvalidParameterError) as e:
        args.tokenizer("fn", json.dumps(inner))
    assert str(e.value) == (f"fn: tokenizer={inner!r} must be a JSON object of tokenizer options, e.g. "
                            "'{\"base_tokenizer\": \"whitespace\"}' or {'base_tokenizer': 'whitespace'}")


def test_tokenizer_errors_carry_the_function_name():
    with pytest.raises(InvalidParameterError) as e:
        args.tokenizer("fn", json.dumps("{not json"))
    assert str(e.value).startswith("fn: tokenizer='{not json' is not valid JSON")
    with pytest.raises(InvalidParameterError) as e:
        args.tokenizer("fn", json.dumps({"nope": 1}))
    assert str(e.value).startswith("fn: tokenizer option(s) ['nope'] are unknown")


def test_prefixed_names_the_function_on_parameter_errors_only():
    def make(*a, **kw):
        if kw.get("fail") == "param":
            raise InvalidParameterError("x=1 is bad")
        if kw.get("fail") == "other":
            raise ValueError("not a parameter error")
        return a, kw

    assert args.prefixed("fn", make, 1, 2, k=3) == ((1, 2), {"k": 3})
    with pytest.raises(InvalidParameterError) as e:
        args.prefixed("fn", make, fail="param")
    assert str(e.value) == "fn: x=1 is bad" and e.value.__cause__ is None and e.value.__suppress_context__
    with pytest.raises(ValueError, match="^not a parameter error$"):
        args.prefixed("fn", make, fail="other")


@pytest.mark.parametrize("value", [None, True, False, 0, -7, 2 ** 62, 1.5, -0.25, 1e300, "", "it's", "a''b",
                                   "x\ny", "Café"])
def test_literal_reads_back_as_the_value_in_duckdb(value):
    got = duckdb.connect().execute(f"SELECT {sqltext.literal(value)}").fetchone()[0]
    if isinstance(value, float):  # DuckDB reads 1.5 as DECIMAL and 1e300 as DOUBLE: the same number
        assert float(got) == value
    else:
        assert got == value and type(got) is type(value)


@pytest.mark.parametrize("name", ["text", "my col", 'a"b', '""', "SELECT", "Café", "x'y"])
def test_ident_names_a_column_in_duckdb(name):
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({sqltext.ident(name)} INTEGER)")
    assert [d[0] for d in con.execute("SELECT * FROM t").description] == [name]
