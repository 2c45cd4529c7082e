"""The scalar UDF callables (duck/udfs.py) on Arrow chunks, as DuckDB hands them over.

Each chunk mixes what one DuckDB chunk can hold: NULL values, texts without tokens, and
parameter columns that are constant, take exactly two values, or vary per row (so every
path through the per-chunk grouping runs). Every row is checked against an oracle that
does not use the package's engine: ``tests/naive.py`` (tokens from ``lance.tokenize``,
hashes from ``xxhash``, plain Python MinHash and band keys, exact shingle-set Jaccard),
counting equal positions for similarity, and ``1 - (1 - s**r)**b`` in Python floats.
"""

from __future__ import annotations

import json

import naive
import numpy as np
import pyarrow as pa
import pytest

from lance_minhash_sql.core.errors import InvalidInputError, InvalidParameterError
from lance_minhash_sql.core.params import MAX_NUM_HASHES, MinHashParams, TokenizerParams
from lance_minhash_sql.duck import udfs

WHITESPACE = json.dumps({"base_tokenizer": "whitespace"})  # to_json() of a STRUCT: the object itself
CASED = json.dumps(json.dumps({"lower_case": False}))  # to_json() of a VARCHAR: a JSON string holding it

TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    None,
    "The Quick brown fox jumps over the lazy cat",
    "",
    "Café naïve ÉCOLE, école",
    "a b a b a b",
    "!!! ... ???",
    "one",
    "one two",
    "w1 w2 w3 w4 w5 w6 w7 w8 w9",
    "w1 w2 w3 w4 w5 w6 w7 w8 x9",
    "don't stop-me now",
]


def strings(values) -> pa.Array:
    return pa.array(values, pa.string())


def doubles(values) -> pa.Array:
    return pa.array([None if v is None else float(v) for v in values], pa.float64())


def varchar(n: int) -> pa.Array:
    return strings(["VARCHAR"] * n)


def params_of(k, w, tok) -> MinHashParams:
    options = json.loads(tok) if tok is not None else None
    if isinstance(options, str):
        options = json.loads(options)
    return MinHashParams(num_hashes=int(k), num_bands=1, shingle_size=int(w), tokenizer=TokenizerParams.parse(options))


def naive_signatures(texts, ks, ws, toks):
    return [naive.signature(t, params_of(k, w, tok)) for t, k, w, tok in zip(texts, ks, ws, toks)]


def assert_close(got: list, want: list) -> None:
    """Equal NULLs, and numbers equal to 1e-12 (numpy's vectorised pow may differ from Python's
    in the last bits)."""
    assert [g is None for g in got] == [w is None for w in want]
    assert [g for g in got if g is not None] == pytest.approx([w for w in want if w is not None], rel=0, abs=1e-12)


def two_chunks(values, type_=pa.string()) -> pa.ChunkedArray:
    half = len(values) // 2
    return pa.chunked_array([pa.array(values[:half], type_), pa.array(values[half:], type_)])


# --------------------------------------------------------------------------- minhash_signature


@pytest.mark.parametrize("layout", ["constant", "two values", "one varying", "all varying"])
def test_signature_rows_match_the_naive_signatures(layout):
    texts = TEXTS * 2
    n = len(texts)
    ks = {"constant": [8] * n, "two values": [4, 12] * (n // 2),
          "one varying": [4] * n, "all varying": [4, 8, 12] * (n // 3)}[layout]
    ws = {"constant": [2] * n, "two values": [2] * n, "one varying": [1, 2, 3] * (n // 3),
          "all varying": [1, 3] * (n // 2)}[layout]
    toks = {"constant": [None] * n, "two values": [WHITESPACE] * n, "one varying": [None] * n,
            "all varying": [None, WHITESPACE, CASED, WHITESPACE] * (n // 4)}[layout]
    got = udfs.signature(two_chunks(texts), varchar(n), doubles(ks), doubles(ws), strings(toks))
    assert got.type == pa.list_(pa.uint16()) and len(got) == n
    want = naive_signatures(texts, ks, ws, toks)
    assert got.to_pylist() == want
    assert got.null_count == sum(w is None for w in want) >= 4  # NULL text and texts without tokens


def test_signature_of_a_chunk_without_nulls():
    texts = [t for t in TEXTS if t is not None and naive.signature(t, params_of(6, 2, None)) is not None]
    n = len(texts)
    got = udfs.signature(strings(texts), varchar(n), doubles([6] * n), doubles([2] * n), strings([None] * n))
    assert got.null_count == 0 and got.to_pylist() == naive_signatures(texts, [6] * n, [2] * n, [None] * n)


def test_signature_of_an_empty_chunk():
    got = udfs.signature(strings([]), varchar(0), doubles([]), doubles([]), strings([]))
    assert got.type == pa.list_(pa.uint16()) and len(got) == 0


@pytest.mark.parametrize("name, position, fix", [
    ("num_hashes", 2, f"pass an integer in 1..{MAX_NUM_HASHES}, e.g. num_hashes := 128"),
    ("shingle_size", 3, "pass an integer >= 1, e.g. shingle_size := 3"),
])
def test_signature_null_parameter(name, position, fix):
    columns = [strings(["a b c", "d e f"]), varchar(2), doubles([4, 4]), doubles([2, 2]), strings([None, None])]
    columns[position] = doubles([4, None])
    with pytest.raises(InvalidParameterError) as e:
        udfs.signature(*columns)
    assert str(e.value) == f"minhash_signature: {name} is NULL; {fix}"


def test_signature_parameter_errors_name_the_function():
    with pytest.raises(InvalidParameterError) as e:
        udfs.signature(strings(["a b"] * 2), varchar(2), doubles([4, 0]), doubles([2, 2]), strings([None] * 2))
    assert str(e.value).startswith("minhash_signature: num_hashes=0 is out of range")
    with pytest.raises(InvalidParameterError) as e:
        udfs.signature(strings(["a b"]), varchar(1), doubles([4]), doubles([2]), strings([json.dumps({"x": 1})]))
    assert str(e.value).startswith("minhash_signature: tokenizer option(s) ['x'] are unknown")


def test_signature_text_type_error():
    with pytest.raises(InvalidInputError) as e:
        udfs.signature(strings(["a"]), strings(["BLOB"]), doubles([4]), doubles([2]), strings([None]))
    assert str(e.value).startswith("minhash_signature: text has type BLOB, but a VARCHAR is required; ")


# --------------------------------------------------------------------------- minhash_similarity


def sig_array(sigs) -> pa.Array:
    return pa.array(sigs, pa.list_(pa.uint16()))


def equal_fraction(a, b):
    """Lance's estimate: equal positions over k, both as float32, divided in float32."""
    if a is None or b is None:
        return None
    return float(np.float32(sum(x == y for x, y in zip(a, b))) / np.float32(len(a)))


def random_sig_pairs(lengths, seed=0):
    rng = np.random.default_rng(seed)
    pairs = []
    for k in lengths:
        a = rng.integers(0, 4, k).tolist()  # small alphabet: many equal positions
        b = rng.integers(0, 4, k).tolist()
        pairs.append((a, b))
    return pairs


@pytest.mark.parametrize("lengths", [[7] * 9, [3, 7, 3, 1, 7, 7, 2, 5, 3]])
def test_similarity_counts_equal_positions(lengths):
    pairs = random_sig_pairs(lengths)
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    a[2] = None  # NULL on either side gives NULL
    b[5] = None
    got = udfs.similarity(sig_array(a), two_chunks(b, pa.list_(pa.uint16())))
    assert got.type == pa.float64()
    assert got.to_pylist() == [equal_fraction(x, y) for x, y in zip(a, b)]
    assert got.null_count == 2


def test_similarity_with_every_row_null_or_none():
    assert udfs.similarity(sig_array([None, None]), sig_array([[1], None])).to_pylist() == [None, None]
    assert udfs.similarity(sig_array([]), sig_array([])).to_pylist() == []


def test_similarity_of_a_third():
    """Lance divides in float32: 1/3 is float32(1/3), not the double."""
    got = udfs.similarity(sig_array([[1, 2, 3]]), sig_array([[1, 0, 0]])).to_pylist()[0]
    assert got == float(np.float32(1) / np.float32(3)) != 1 / 3


def test_similarity_of_different_lengths_names_the_first_row():
    a = sig_array([[1, 2], [1, 2, 3], [1]])
    b = sig_array([[1, 2], [1, 2], [1, 2, 3, 4]])
    with pytest.raises(InvalidInputError) as e:
        udfs.similarity(a, b)
    assert str(e.value) == ("minhash_similarity: sig_a has 3 values but sig_b has 2; signatures are comparable "
                            "only when computed with the same num_hashes")


@pytest.mark.parametrize("side", ["sig_a", "sig_b"])
def test_similarity_of_malformed_signatures(side):
    good = sig_array([[1, 2], [3, 4]])
    for bad, message in (
        (sig_array([[1, 2], [3, None]]), f"minhash_similarity: {side} contains NULL elements; a signature is a list "
                                         "of non-NULL USMALLINT values, as minhash_signature returns it"),
        (sig_array([[1, 2], []]), f"minhash_similarity: {side} is an empty list; a signature has "
                                  f"1..{MAX_NUM_HASHES} values (minhash_signature returns NULL, not [], for a text "
                                  "without tokens)"),
    ):
        with pytest.raises(InvalidInputError) as e:
            udfs.similarity(*((bad, good) if side == "sig_a" else (good, bad)))
        assert str(e.value) == message


def test_similarity_of_one_value_signatures():
    got = udfs.similarity(sig_array([[5], [5], None]), sig_array([[5], [6], [5]])).to_pylist()
    assert got == [1.0, 0.0, None]


# --------------------------------------------------------------------------- minhash_band_keys


@pytest.mark.parametrize("bands", ["constant", "varying"])
def test_band_keys_match_the_naive_keys(bands):
    rng = np.random.default_rng(3)
    lengths = [12, 12, 6, 12, 4, 6, 12, 12]
    sigs = [rng.integers(0, 1 << 16, k).tolist() for k in lengths]
    sigs[3] = None
    nb = [2] * len(sigs) if bands == "constant" else [2, 3, 1, 6, 4, 2, 12, 4]
    got = udfs.band_keys(two_chunks(sigs, pa.list_(pa.uint16())), doubles(nb))
    assert got.type == pa.list_(pa.uint64())
    assert got.to_pylist() == [None if s is None else naive.band_keys(s, b) for s, b in zip(sigs, nb)]


def test_band_keys_of_one_length_and_two_band_counts():
    rng = np.random.default_rng(4)
    sigs = [rng.integers(0, 1 << 16, 8).tolist() for _ in range(6)]
    nb = [2, 4, 2, 4, 4, 2]
    got = udfs.band_keys(sig_array(sigs), doubles(nb)).to_pylist()
    assert got == [naive.band_keys(s, b) for s, b in zip(sigs, nb)]


def test_band_keys_of_null_signatures():
    got = udfs.band_keys(sig_array([None, None]), doubles([2, 2]))
    assert got.type == pa.list_(pa.uint64()) and got.to_pylist() == [None, None]


def test_band_keys_errors():
    with pytest.raises(InvalidParameterError) as e:
        udfs.band_keys(sig_array([[1, 2, 3, 4, 5, 6]]), doubles([4]))
    assert str(e.value).startswith("minhash_band_keys: the signature has 6 values (its num_hashes); num_bands=4 "
                                   "does not divide num_hashes=6")
    with pytest.raises(InvalidParameterError) as e:
        udfs.band_keys(sig_array([[1, 2]]), doubles([None]))
    assert str(e.value) == ("minhash_band_keys: num_bands is NULL; pass a divisor of the signature length, "
                            "e.g. num_bands := 16")
    with pytest.raises(InvalidInputError) as e:
        udfs.band_keys(sig_array([[1, 2], []]), doubles([1, 1]))
    assert str(e.value).startswith("minhash_band_keys: sig is an empty list")


# --------------------------------------------------------------------------- shingle_jaccard


@pytest.mark.parametrize("layout", ["constant", "one varying", "varying"])
def test_shingle_jaccard_is_the_exact_set_jaccard(layout):
    a = TEXTS
    b = TEXTS[1:] + TEXTS[:1]
    n = len(a)
    ws = [1, 2, 3, 2] * (n // 4) if layout == "varying" else [2] * n
    toks = [None] * n if layout == "constant" else [None, WHITESPACE, None, CASED] * (n // 4)
    got = udfs.shingle_jaccard(two_chunks(a), varchar(n), strings(b), varchar(n), doubles(ws), strings(toks))
    assert got.type == pa.float64()
    want = [None if x is None or y is None else naive.exact_jaccard(x, y, params_of(8, w, tok))
            for x, y, w, tok in zip(a, b, ws, toks)]
    assert_close(got.to_pylist(), want)
    assert got.null_count == sum(w is None for w in want) >= 3
    assert any(w not in (None, 0.0, 1.0) for w in want)


def test_shingle_jaccard_of_an_empty_chunk_and_of_equal_texts():
    got = udfs.shingle_jaccard(strings([]), varchar(0), strings([]), varchar(0), doubles([]), strings([]))
    assert got.type == pa.float64() and len(got) == 0
    same = udfs.shingle_jaccard(strings(["a b c", "x"]), varchar(2), strings(["a b c", "x"]), varchar(2),
                                doubles([3, 3]), strings([None, None]))
    assert same.to_pylist() == [1.0, 1.0]


def test_shingle_jaccard_errors():
    with pytest.raises(InvalidInputError) as e:
        udfs.shingle_jaccard(strings(["a"]), varchar(1), strings(["a"]), strings(["INTEGER"]), doubles([3]),
                             strings([None]))
    assert str(e.value).startswith("shingle_jaccard: text_b has type INTEGER, but a VARCHAR is required; ")
    with pytest.raises(InvalidInputError) as e:
        udfs.shingle_jaccard(strings(["a"]), strings(["BLOB"]), strings(["a"]), varchar(1), doubles([3]),
                             strings([None]))
    assert str(e.value).startswith("shingle_jaccard: text_a has type BLOB")
    with pytest.raises(InvalidParameterError) as e:
        udfs.shingle_jaccard(strings(["a"]), varchar(1), strings(["a"]), varchar(1), doubles([None]), strings([None]))
    assert str(e.value) == "shingle_jaccard: shingle_size is NULL; pass an integer >= 1, e.g. shingle_size := 3"
    with pytest.raises(InvalidParameterError) as e:
        udfs.shingle_jaccard(strings(["a"]), varchar(1), strings(["a"]), varchar(1), doubles([0]), strings([None]))
    assert str(e.value).startswith("shingle_jaccard: shingle_size=0")


# --------------------------------------------------------------------------- lsh_probability


def test_lsh_probability_is_the_s_curve():
    s = [0.0, 1.0, 0.5, None, 0.8, 0.3, 1e-3, 0.99]
    b = [1, 16, 20, 4, 7, 1, 3, 50]
    r = [1, 8, 5, 4, 1, 9, 2, 13]
    got = udfs.lsh_probability(doubles(s), two_chunks(doubles(b), pa.float64()), doubles(r))
    assert got.type == pa.float64()
    want = [None if x is None else 1 - (1 - x ** rr) ** bb for x, bb, rr in zip(s, b, r)]
    assert_close(got.to_pylist(), want)
    assert got.to_pylist()[:2] == [0.0, 1.0]


def test_lsh_probability_without_nulls():
    got = udfs.lsh_probability(doubles([0.5, 0.9]), doubles([2, 3]), doubles([2, 1])).to_pylist()
    assert got == pytest.approx([1 - 0.75 ** 2, 1 - 0.1 ** 3], abs=1e-12)


@pytest.mark.parametrize("row, message", [
    ((-0.1, 2, 2), "lsh_probability: similarity=-0.1 must be a number in [0, 1]; e.g. 0.8"),
    ((1.5, 2, 2), "lsh_probability: similarity=1.5 must be a number in [0, 1]; e.g. 0.8"),
    ((0.5, 0, 2), "lsh_probability: num_bands=0, rows_per_band=2 must both be >= 1"),
    ((0.5, 2, 0), "lsh_probability: num_bands=2, rows_per_band=0 must both be >= 1"),
    ((0.5, 2.5, 2), "lsh_probability: num_bands=2.5 must be an integer; use a positive integer"),
    ((0.5, 2, 1.5), "lsh_probability: rows_per_band=1.5 must be an integer; use a positive integer"),
])
def test_lsh_probability_reports_the_first_invalid_row(row, message):
    # a valid row, a NULL similarity (valid), the invalid row, and a later invalid row (not the one reported)
    s, b, r = zip((0.5, 2, 2), (None, 2, 2), row, (2.0, 0, 0.5))
    with pytest.raises(InvalidParameterError) as e:
        udfs.lsh_probability(doubles(s), doubles(b), doubles(r))
    assert str(e.value) == message


@pytest.mark.parametrize("name, fix", [("num_bands", "pass an integer >= 1, e.g. 16"),
                                       ("rows_per_band", "pass an integer >= 1, e.g. 8")])
def test_lsh_probability_null_parameters(name, fix):
    cols = {"num_bands": doubles([2, 2]), "rows_per_band": doubles([2, 2])}
    cols[name] = doubles([2, None])
    with pytest.raises(InvalidParameterError) as e:
        udfs.lsh_probability(doubles([0.5, 0.5]), **cols)
    assert str(e.value) == f"lsh_probability: {name} is NULL; {fix}"


def test_lsh_probability_of_a_null_similarity_with_an_invalid_band_count():
    with pytest.raises(InvalidParameterError) as e:
        udfs.lsh_probability(doubles([None]), doubles([0]), doubles([3]))
    assert str(e.value) == "lsh_probability: num_bands=0, rows_per_band=3 must both be >= 1"
