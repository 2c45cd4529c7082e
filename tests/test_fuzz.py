"""Bad and extreme input, fuzzed: every call gives the right answer or a clear error from
the package's exception classes, never a crash, a bare traceback from deep inside, or a
silently wrong result."""

from __future__ import annotations

import os

import duckdb
import lance
import naive
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lance.query import MinHashQuery

import lance_minhash_sql as lms
from lance_minhash_sql.indexer.builder import build_index
from lance_minhash_sql.core.errors import LanceMinHashError
from lance_minhash_sql.core.params import MAX_SHINGLE_SIZE, MinHashParams
from lance_minhash_sql.faces.corpus import generate_texts, vocabulary
from lance_minhash_sql.index.sign import Signer
from lance_minhash_sql.query.topk import search, search_ids

MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)
PACKAGE_ERRORS = ("InvalidParameterError", "InvalidInputError", "DatasetError", "IndexNotFoundError",
                  "CorruptIndexError", "UnsupportedIndexError", "ResourceLimitError")


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def reference_signature(text: str, params: MinHashParams) -> list[int] | None:
    """Lance's tokens (``lance.tokenize``), ``xxhash`` and numpy: the formula of docs/signatures.md,
    vectorised so that texts of millions of tokens stay checkable."""
    tokens = naive.lance_tokens(text, params.tokenizer)
    shingles = naive.shingles(tokens, params.shingle_size)
    if not shingles:
        return None
    a, b, c = (np.array(v, dtype=np.uint64) for v in naive.splitmix_coefficients(params.num_hashes))
    xs = np.fromiter((xxhash.xxh64_intdigest(s, seed=42) for s in shingles), dtype=np.uint64, count=len(shingles))
    m = np.full(params.num_hashes, MASK64, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for s in range(0, xs.size, 1 << 16):
            part = xs[s:s + (1 << 16)]
            m = np.minimum(m, (a[:, None] * part[None, :] + b[:, None]).min(axis=1))
        return ((c * m) >> np.uint64(48)).astype(int).tolist()


def ours(text: str, params: MinHashParams) -> list[int] | None:
    sigs, has = Signer(params).sign(pa.array([text], pa.large_string()))
    return sigs[0].astype(int).tolist() if has[0] else None


# --------------------------------------------------------------------------- texts

# every plane: BMP, supplementary planes, private use, noncharacters; no lone surrogates
# (they are not Unicode scalar values and cannot be UTF-8 encoded)
_ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=("Cs",))
_CONTROL = st.sampled_from([chr(c) for c in list(range(0, 32)) + [0x7F, 0x85, 0x2028, 0x2029, 0xFEFF, 0x200B]])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=_ANY_CHAR | _CONTROL, max_size=60))
def test_random_unicode_of_all_planes_signs_as_lance_tokenizes(text):
    p = MinHashParams(num_hashes=16, num_bands=4, shingle_size=2)
    assert ours(text, p) == reference_signature(text, p)


def test_a_million_tokens():
    words = vocabulary().to_pylist()
    rng = np.random.default_rng(5)
    text = " ".join(words[i] for i in rng.integers(0, len(words), 1_000_000))
    p = MinHashParams()
    assert ours(text, p) == reference_signature(text, p)


def test_one_token_of_a_hundred_thousand_bytes():
    token = "é" * 50_000  # 100,000 UTF-8 bytes
    default = MinHashParams()
    assert ours(token, default) is None  # dropped by max_token_length=40: no tokens, no signature
    assert ours(f"a {token} b", default) == reference_signature("a b", default)
    unlimited = MinHashParams().with_tokenizer(max_token_length=None)
    assert ours(token, unlimited) == reference_signature(token, unlimited) is not None


@pytest.mark.slow
def test_a_fifty_megabyte_text():
    words = vocabulary().to_pylist()
    rng = np.random.default_rng(6)
    parts, size = [], 0
    while size < 50 * 2**20:
        chunk = " ".join(words[i] for i in rng.integers(0, len(words), 100_000))
        parts.append(chunk)
        size += len(chunk) + 1
    text = " ".join(parts)
    p = MinHashParams()
    assert ours(text, p) == reference_signature(text, p)


def test_large_texts_through_sql():
    con = lms.connect()
    texts = ["x" * 3_000_000, "word " * 400_000, "\x00\x01 a b c \x1f d e"]
    got = con.execute("SELECT minhash_signature(t) FROM (SELECT unnest(?::VARCHAR[]) AS t)", [texts]).fetchall()
    want = [reference_signature(t, MinHashParams()) for t in texts]
    assert [g[0] for g in got] == want


# --------------------------------------------------------------------------- parameters

_WILD = (st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True, allow_infinity=True)
         | st.text(max_size=8) | st.none() | st.booleans())


@settings(max_examples=200, deadline=None)
@given(num_hashes=_WILD, num_bands=_WILD, shingle_size=_WILD)
def test_wild_parameters_are_valid_or_refused_clearly(num_hashes, num_bands, shingle_size):
    try:
        p = MinHashParams.create(num_hashes, num_bands, shingle_size, None, None)
    except LanceMinHashError as exc:
        text = str(exc)
        assert len(text) > 20 and any(n in text for n in ("num_hashes", "num_bands", "shingle_size")), text
        return
    assert 1 <= p.num_hashes <= 4096 and 1 <= p.num_bands <= 256 and p.num_hashes % p.num_bands == 0
    assert p.shingle_size >= 1


_SQL_VALUES = st.sampled_from(["NULL", "0", "-1", "1", "3", "4097", "1e300", "'nan'::DOUBLE", "2.5", "'abc'",
                               "true", "[1, 2]", "{'a': 1}", "'{\"base_tokenizer\": 7}'", "''",
                               "9223372036854775807"])
# DuckDB refuses these before any of the package's code runs: a string that is not a number
# cast to the macro's numeric parameter (Conversion Error), a type no overload takes (Binder Error)
_NOT_A_NUMBER = {"'abc'": "Conversion Error", "'{\"base_tokenizer\": 7}'": "Conversion Error",
                 "''": "Conversion Error", "true": "Binder Error", "[1, 2]": "Binder Error",
                 "{'a': 1}": "Binder Error"}


def _expected_integer(name: str, literal: str, lo: int, hi: int | None):
    """``("ok", value)`` for a valid SQL literal of an integer parameter, else the error
    expected: ``("duckdb", kind)`` or ``("package", text the message must hold)``."""
    if literal in _NOT_A_NUMBER:
        return "duckdb", _NOT_A_NUMBER[literal]
    if literal == "NULL":
        return "package", f"{name} is NULL"
    value = float("nan") if literal == "'nan'::DOUBLE" else float(literal) if "." in literal or "e" in literal \
        else int(literal)
    if value != value or value != int(value):
        shown = "nan" if value != value else literal
        return "package", f"{name} := {shown} must be an integer"
    if value < lo or (hi is not None and value > hi):
        return "package", f"{name} := "
    return "ok", int(value)


def _expected_tokenizer(literal: str):
    """NULL or an empty string: the default tokenizer; anything else here is not a valid
    tokenizer object (a number, a list, unknown options, a non-string base_tokenizer)."""
    if literal in ("NULL", "''"):
        return "ok", None
    return "package", "tokenizer" if literal != "'{\"base_tokenizer\": 7}'" else "base_tokenizer := 7"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(num_hashes=_SQL_VALUES, shingle_size=_SQL_VALUES, tokenizer=_SQL_VALUES)
def test_wild_sql_arguments_give_the_reference_answer_or_the_expected_error(sql_con, num_hashes, shingle_size,
                                                                            tokenizer):
    """Each argument's outcome follows from the parameter rules written out here (num_hashes
    an integer in 1..4096, shingle_size an integer in 1..MAX_SHINGLE_SIZE, tokenizer a JSON object or NULL):
    all valid gives the reference signature; otherwise the error is one of those the
    invalid arguments call for."""
    text = "the quick brown fox jumps"
    expected = [_expected_integer("num_hashes", num_hashes, 1, 4096),
                _expected_integer("shingle_size", shingle_size, 1, MAX_SHINGLE_SIZE), _expected_tokenizer(tokenizer)]
    sql = (f"SELECT minhash_signature({lit(text)}, num_hashes := {num_hashes}, "
           f"shingle_size := {shingle_size}, tokenizer := {tokenizer})")
    try:
        (value,) = sql_con.execute(sql).fetchone()
    except duckdb.Error as exc:
        message = str(exc)
        wanted = [e for e in expected if e[0] != "ok"]
        assert wanted, (sql, message)  # every argument valid, yet an error
        assert any((kind == "duckdb" and message.startswith(what)) or
                   (kind == "package" and any(n in message for n in PACKAGE_ERRORS) and what in message)
                   for kind, what in wanted), (sql, message, wanted)
        return
    assert all(e[0] == "ok" for e in expected), (sql, value, expected)
    params = MinHashParams(num_hashes=expected[0][1], num_bands=1, shingle_size=expected[1][1])
    assert value == reference_signature(text, params)


@pytest.fixture(scope="module")
def sql_con():
    return lms.connect()


# --------------------------------------------------------------------------- datasets and paths


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("fz") / "ds.lance")
    lance.write_dataset(pa.table({"id": np.arange(500), "text": generate_texts(0, 500)}), uri)
    build_index(uri, "text")
    return uri


ODD_PATHS = ["", " ", "nope.lance", "/nonexistent/dir/x.lance", "memory://nope.lance", "foo://bucket/x.lance",
             "file:///nonexistent/x.lance", "../../../../../../etc", "/dev/null", "with'quote.lance",
             "with\"double.lance", "日本語.lance", "a\x00b.lance", "%s%n.lance"]


@pytest.mark.parametrize("path", ODD_PATHS)
def test_odd_dataset_paths_are_clear_errors(sql_con, path):
    for sql in (f"SELECT * FROM minhash_search({lit(path)}, 'text', 'a b c')",
                f"SELECT * FROM minhash_search_ids({lit(path)}, 'text', 'a b c')",
                f"SELECT * FROM minhash_build({lit(path)}, 'text')",
                f"SELECT * FROM minhash_indexes({lit(path)})"):
        with pytest.raises(duckdb.Error) as info:
            sql_con.execute(sql).fetchall()
        assert any(n in str(info.value) for n in PACKAGE_ERRORS), (sql, str(info.value))
    with pytest.raises(LanceMinHashError):
        search(path, "text", "a b c")


@pytest.mark.parametrize("args, fragment", [
    ("NULL, 'text', 'a b c'", "dataset"),
    ("{uri}, NULL, 'a b c'", "column"),
    ("{uri}, 'text', NULL, -3", "k"),
    ("{uri}, 'text', 'a b c', NULL", "k"),
    ("{uri}, 'text', 'a b c', -3", "k"),
    ("{uri}, 'text', 'a b c', 2.5", "k"),
    ("{uri}, 'id', 'a b c'", "string"),
    ("{uri}, 'text', 'a b c', 3, fast_search := NULL", "fast_search"),
    ("{uri}, 'text', 'a b c', 3, \"filter\" := 'no_such_column > 1'", "filter"),
])
def test_bad_search_arguments(sql_con, indexed, args, fragment):
    sql = f"SELECT * FROM minhash_search({args.format(uri=lit(indexed))})"
    with pytest.raises(duckdb.Error) as info:
        sql_con.execute(sql).fetchall()
    text = str(info.value)
    assert any(n in text for n in PACKAGE_ERRORS) and fragment in text, (sql, text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet=_ANY_CHAR | _CONTROL, max_size=40) | st.none(), min_size=1, max_size=6))
def test_fuzzed_query_batches_equal_one_by_one(indexed, queries):
    """A batch with NULLs is refused clearly; otherwise each of its queries, and each query
    alone, answers as Lance's own MinHashQuery does on the same index."""
    if any(q is None for q in queries):
        with pytest.raises(LanceMinHashError, match="NULL"):
            search_ids(indexed, "text", queries, 3)
        return
    ds = lance.dataset(indexed)
    batch = search_ids(indexed, "text", queries, 3)
    for i, q in enumerate(queries):
        ref = ds.to_table(nearest=MinHashQuery(q, "text"), limit=3, with_row_id=True, columns=["_distance"])
        one = search(indexed, "text", q, 3, columns=[])
        mine = batch.filter(pc.equal(batch.column("query_index"), i))
        for got in (one, mine):
            assert got.column("_rowid").to_pylist() == ref.column("_rowid").to_pylist(), q
            assert got.column("_distance").to_pylist() == ref.column("_distance").to_pylist(), q


def test_nothing_written_by_failed_calls(sql_con, indexed):
    """The failing calls above leave the indexed dataset exactly as it was."""
    before = (lance.dataset(indexed).version, sorted(os.listdir(os.path.join(indexed, "_indices"))))
    for sql in (f"SELECT * FROM minhash_build({lit(indexed)}, 'text', num_hashes := 7, num_bands := 2)",
                f"SELECT * FROM minhash_build({lit(indexed)}, 'id')",
                f"SELECT * FROM minhash_build({lit(indexed)}, 'text', tokenizer := '{{\"base_tokenizer\": \"jieba\"}}')"):
        with pytest.raises(duckdb.Error):
            sql_con.execute(sql).fetchall()
    assert (lance.dataset(indexed).version, sorted(os.listdir(os.path.join(indexed, "_indices")))) == before
