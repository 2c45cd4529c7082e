"""Every tokenizer configuration Lance's MinHash index accepts: stemming and stop words per
language, ``icu``, ``icu/split``, ``code``, with the kernel filters, against Lance's native
index built with the same options (``IndexConfig("MINHASHLSH", {"tokenizer": ...})``)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

import multilingual
import naive
from test_signatures import assert_matches_native

from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.core.params import LANGUAGES, MinHashParams, TokenizerParams
from lance_minhash_sql.index.sign import Signer
from lance_minhash_sql.io.details import decode_details, encode_details

CONFIGS = [
    {"stem": True},
    {"remove_stop_words": True},
    {"stem": True, "remove_stop_words": True},
    {"stem": True, "remove_stop_words": True, "language": "French"},
    {"stem": True, "language": "Russian", "ascii_folding": False},
    {"stem": True, "remove_stop_words": True, "language": "Arabic", "max_token_length": None},
    {"base_tokenizer": "icu"},
    {"base_tokenizer": "icu/split"},
    {"base_tokenizer": "icu", "stem": True, "remove_stop_words": True, "lower_case": False},
    {"base_tokenizer": "icu/split", "remove_stop_words": True, "language": "German"},
    {"base_tokenizer": "code"},
    {"base_tokenizer": "code", "index_operators": True, "max_token_length": 12},
    {"base_tokenizer": "code", "split_identifiers": True},
    {"base_tokenizer": "code", "split_identifiers": True, "split_on_numerics": False, "preserve_original": False},
    {"base_tokenizer": "code", "stem": True, "remove_stop_words": True},
    {"base_tokenizer": "code", "split_identifiers": True, "stem": True},
    {"base_tokenizer": "whitespace", "stem": True},
    {"base_tokenizer": "raw", "stem": True, "remove_stop_words": True, "max_token_length": None},
    {"base_tokenizer": "ngram", "min_ngram_length": 2, "max_ngram_length": 4, "remove_stop_words": True},
]


def _id(tok):
    return ",".join(f"{k}={v}" for k, v in tok.items())


@pytest.mark.parametrize("tok", CONFIGS, ids=_id)
def test_signatures_match_lance_native(native_index, tok):
    texts = multilingual.rows(600, seed=len(_id(tok)))
    params = MinHashParams(num_hashes=64, num_bands=8, shingle_size=3, tokenizer=tok)
    native = native_index(pa.table({"text": pa.array(texts, pa.string())}), params)
    assert native.signatures.num_rows > 500
    assert_matches_native(native, texts, params)
    # the details Lance wrote are the ones this package writes, and read back to the same params
    assert native.signatures_metadata["minhash_lsh_details"] == encode_details(params).hex()
    assert decode_details(encode_details(params)) == params


@pytest.mark.parametrize("tok", CONFIGS, ids=_id)
def test_tokens_are_lance_tokens(tok):
    params = MinHashParams(tokenizer=tok)
    signer = Signer(params)
    for text in multilingual.SENTENCES:
        assert signer.tokens(text) == naive.lance_tokens(text, params.tokenizer)


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_language_stems_and_drops_stop_words_as_lance(native_index, language):
    texts = multilingual.rows(150, seed=3)
    params = MinHashParams(num_hashes=16, num_bands=4, tokenizer={"stem": True, "remove_stop_words": True,
                                                                   "language": language})
    assert_matches_native(native_index(pa.table({"text": pa.array(texts, pa.string())}), params), texts, params)


@pytest.mark.parametrize("tok, fragments", [
    ({"base_tokenizer": "jieba/default"}, ["refused by Lance's MinHash index", "LANCE_LANGUAGE_MODEL_HOME",
                                            "base_tokenizer='icu'"]),
    ({"base_tokenizer": "lindera/ipadic"}, ["refused by Lance's MinHash index", "base_tokenizer='icu'"]),
    ({"base_tokenizer": "jieba"}, ["refused by Lance's MinHash index"]),
    ({"custom_stop_words": ["a"]}, ["custom_stop_words=['a']", "not recorded in the index details",
                                    "remove_stop_words=true"]),
    ({"lance_tokenizer": "x"}, ["lance_tokenizer='x'", "not recorded"]),
    ({"index_operators": True}, ["index_operators=True applies to base_tokenizer='code' only"]),
])
def test_what_lance_refuses_stays_refused(tmp_path, tok, fragments):
    import lance
    from lance.indices import IndexConfig

    with pytest.raises(InvalidParameterError) as err:
        TokenizerParams.parse(tok)
    for fragment in fragments:
        assert fragment in str(err.value)
    if "index_operators" not in tok:  # Lance refuses it too, for the reason quoted
        ds = lance.write_dataset(pa.table({"text": ["a b c"]}), str(tmp_path / "ds"))
        with pytest.raises(Exception, match="not recorded|outside Lance"):
            ds.create_scalar_index("text", IndexConfig("MINHASHLSH", {"tokenizer": tok}))


def test_split_identifiers_splits_them_as_lance_does():
    # Lance's MinHash index honours the code tokenizer's split options (and records them)
    plain = Signer(MinHashParams(tokenizer={"base_tokenizer": "code"}))
    split = Signer(MinHashParams(tokenizer={"base_tokenizer": "code", "split_identifiers": True}))
    text = "def parseHTTPRequest(raw_bytes): return getUserName2(x)"
    assert "parsehttprequest" in plain.tokens(text) and "user" not in plain.tokens(text)
    assert {"parse", "http", "request", "user"} <= set(split.tokens(text))
    assert split.tokens(text) == naive.lance_tokens(text, split.params.tokenizer)


@pytest.mark.parametrize("tok", [{"with_position": True}], ids=_id)
def test_options_that_change_nothing_are_accepted_as_lance_accepts_them(native_index, tok):
    texts = multilingual.rows(200, seed=9)
    params = MinHashParams(num_hashes=16, num_bands=4, tokenizer=tok)
    native = native_index(pa.table({"text": pa.array(texts, pa.string())}), params)
    assert_matches_native(native, texts, params)
    assert native.signatures_metadata["minhash_lsh_details"] == encode_details(params).hex()


SURFACE_CONFIGS = [
    {"stem": True, "remove_stop_words": True},
    {"stem": True, "remove_stop_words": True, "language": "French"},
    {"base_tokenizer": "icu"},
    {"base_tokenizer": "icu/split"},
    {"base_tokenizer": "code", "index_operators": True},
]


def _query_texts(texts, n=100):
    """``n`` queries: corpus rows with their last word dropped, and a few plain sentences."""
    rows = [t for t in texts if t]
    out = [" ".join(rows[(i * 37) % len(rows)].split(" ")[:-1]) or rows[i] for i in range(n - 10)]
    return out + multilingual.SENTENCES[:10]


@pytest.mark.parametrize("tok", SURFACE_CONFIGS, ids=_id)
def test_index_files_and_top10_answers_equal_lances_both_ways(tmp_path, tok):
    from test_build import assert_same_files, pair, query

    from lance_minhash_sql.query.topk import search_ids

    texts = multilingual.rows(2000, seed=11)
    table = pa.table({"id": np.arange(len(texts), dtype=np.int64), "text": pa.array(texts, pa.string())})
    params = MinHashParams(num_hashes=64, num_bands=16, shingle_size=2, tokenizer=tok)
    native, ours, result = pair(tmp_path, table, params)
    assert_same_files(native, ours)
    queries = _query_texts(texts)
    ours_on_native = search_ids(native, "text", queries, 10)
    found = 0
    for i, q in enumerate(queries):
        lance_native = query(native, q)
        assert query(ours, q).equals(lance_native), q  # Lance answers the same on our index
        mine = ours_on_native.filter(pa.compute.equal(ours_on_native["query_index"], i))
        assert mine["_rowid"].to_pylist() == lance_native["_rowid"].to_pylist(), q  # and we on Lance's
        assert mine["_distance"].to_pylist() == lance_native["_distance"].to_pylist(), q
        found += lance_native.num_rows
    assert found > 300  # the queries find near-duplicates, not empty answers


def test_per_token_filters_are_remembered_across_batches(monkeypatch):
    from lance_minhash_sql.index import sign

    texts = pa.array(multilingual.rows(5000, seed=5), pa.string())  # > PARALLEL_MIN_ROWS: signed on several threads
    params = MinHashParams(num_hashes=32, num_bands=8, tokenizer={"stem": True, "remove_stop_words": True})
    whole, has = Signer(params).sign(texts)
    signer = Signer(params)
    assert signer.per_token
    first, _ = signer.sign(texts.slice(0, 200))
    assert (first == whole[:200]).all()
    remembered = signer.vocabulary.nv
    second, _ = signer.sign(texts.slice(200, 200))
    assert remembered == signer.vocabulary.nv > 100  # the second batch had no new token
    signer.sign(pa.array(["Zebras galloping the"]))
    assert signer.vocabulary.nv == remembered + 2  # a batch adds only its new tokens
    assert (np.vstack([first, second]) == whole[:400]).all()
    monkeypatch.setattr(sign, "TOKEN_MEMORY", 10)  # a full memory starts over, same answers
    small = Signer(params)
    again = np.vstack([small.sign(texts.slice(i, 1000))[0] for i in range(0, 5000, 1000)])
    assert (again == whole).all() and small.vocabulary.nv <= 10 + 1000
    for i, text in enumerate(texts.to_pylist()[:400]):  # and each row is its Lance tokens' signature
        ref = naive.signature(text, params) if text is not None else None
        assert has[i] == (ref is not None)
        if ref is not None:
            assert whole[i].tolist() == ref


@pytest.mark.parametrize("tok", [{"stem": True, "remove_stop_words": True},
                                 {"stem": True, "language": "German", "max_token_length": 1},
                                 {"remove_stop_words": True, "lower_case": False, "ascii_folding": False}], ids=_id)
def test_filtered_tokens_in_batches_equal_one_token_at_a_time(tok):
    import lance

    from lance_minhash_sql.io.tokens import filtered_tokens

    options = TokenizerParams.parse(tok).lance_tokenize_kwargs()
    words = sorted({w for s in multilingual.SENTENCES for w in s.split(" ")})
    words += ["", "the", "The running", "a\tb", "0", "Running"] * 2
    alone = []
    for w in words:
        result = lance.tokenize(w, **{**options, "base_tokenizer": "raw"})
        alone.append(result[0].text if result else None)
    assert filtered_tokens(words, options) == alone
    assert alone != words  # the filters did something


@pytest.mark.parametrize("tok", [{"base_tokenizer": "icu"}, {"stem": True, "remove_stop_words": True}], ids=_id)
def test_the_whole_surface_reads_and_writes_these_indexes(tmp_path, tok):
    """SQL build and search, the CLI, pairs (exact Jaccard against a brute-force reference
    on Lance's tokens), clusters and join, on Lance's index and on ours."""
    import json

    import lance
    from lance.indices import IndexConfig
    from lance.query import MinHashQuery

    import lance_minhash_sql as lms
    from lance_minhash_sql.faces import cli

    texts = multilingual.rows(800, seed=21)
    table = pa.table({"id": np.arange(len(texts)), "text": pa.array(texts, pa.string())})
    params = MinHashParams(tokenizer=tok)
    native = str(tmp_path / "native.lance")
    lance.write_dataset(table, native).create_scalar_index("text", IndexConfig("MINHASHLSH", params.to_lance_config()))
    ours = str(tmp_path / "ours.lance")
    lance.write_dataset(table, ours)
    con = lms.connect()
    row = con.execute(f"SELECT tokenizer, rows_indexed FROM minhash_build('{ours}', 'text', "
                  f"tokenizer := '{json.dumps(tok)}')").fetchone()
    assert TokenizerParams.parse(json.loads(row[0])) == params.tokenizer and row[1] > 700
    def lance_top10(uri, q):
        return lance.dataset(uri).to_table(nearest=MinHashQuery(q, "text"), limit=10, with_row_id=True)

    query = next(t for t in texts if t and lance_top10(native, t).num_rows >= 3)  # one with neighbours
    want = lance_top10(native, query)
    for uri in (native, ours):
        got = con.execute(f"SELECT _rowid, _distance FROM minhash_search('{uri}', 'text', ?)", [query]).fetchall()
        assert [r[0] for r in got] == want["_rowid"].to_pylist()
    cli_ds = str(tmp_path / "cli.lance")
    lance.write_dataset(table, cli_ds)
    assert cli.main(["build", cli_ds, "text", "--tokenizer", json.dumps(tok)]) == 0
    assert lance_top10(cli_ds, query).equals(want) and lance_top10(ours, query).equals(want)
    found = pa.Table.from_batches(list(lms.pairs(native, "text", 0.8, verify="exact")))
    assert found.num_rows > 50
    by_id = dict(zip(range(len(texts)), texts))
    for a, b, j in zip(*(found.column(i).to_pylist() for i in (0, 1, found.num_columns - 1))):
        assert j == pytest.approx(naive.exact_jaccard(by_id[a], by_id[b], params))
    assert lms.clusters(ours, "text", 0.8).num_rows > 50
    joined = pa.Table.from_batches(list(lms.join(ours, native, "text", 0.9)))
    assert joined.num_rows >= len([t for t in texts if t])  # every row finds itself
    # optimize: new rows signed into a merged segment, by Lance on ours and by us on Lance's
    more = multilingual.rows(300, seed=22)
    extra = pa.table({"id": np.arange(len(texts), len(texts) + 300), "text": pa.array(more, pa.string())})
    for uri in (native, ours):
        lance.write_dataset(extra, uri, mode="append")
    lance.dataset(ours).optimize.optimize_indices()
    con.execute(f"SELECT * FROM minhash_optimize('{native}', 'text')").fetchall()
    for q in more[:20]:
        if q:
            assert lance_top10(ours, q).equals(lance_top10(native, q)), q


@pytest.mark.parametrize("base", ["icu", "icu/split"])
def test_icu_rows_taken_by_the_kernels_are_segmented_as_lance_segments_them(base):
    """The rule of ``kernels/vocab.icu_simple_rows`` against Lance: on random texts over
    ASCII letters, digits, the mid-word punctuation, ``_`` and other characters, every row it
    lets through has Lance's ``icu`` tokens equal to its ``simple`` tokens, and the signer's
    tokens of every row are Lance's."""
    import random

    import lance

    from lance_minhash_sql.io.arrow import string_buffers
    from lance_minhash_sql.kernels.vocab import icu_simple_rows

    rng = random.Random(7)
    alphabet = "aZk09 .,;:'_-!?()\"\t\n\r/@#&=+%é東"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))) for _ in range(3000)]
    texts += ["e.g. 3,14 don't a:b x_y", "Ege uu, mya axi. Iuwe.", "end. Next", "1.5 kg", "a . b", "x'", "'x"]
    buf = string_buffers(pa.array(texts, pa.string()))
    simple = icu_simple_rows(buf.offsets, buf.data, buf.valid, buf.valid_offset)
    assert 0.2 < simple.mean() < 0.9  # both routes are exercised
    options = TokenizerParams(base_tokenizer=base).lance_tokenize_kwargs()
    for text, ok in zip(texts, simple):
        if ok:
            icu = [t.text for t in lance.tokenize(text, **options)]
            assert icu == [t.text for t in lance.tokenize(text, **{**options, "base_tokenizer": "simple"})], text
    signer = Signer(MinHashParams(tokenizer={"base_tokenizer": base}))
    stemmed = Signer(MinHashParams(tokenizer={"base_tokenizer": base, "stem": True, "remove_stop_words": True}))
    for text in texts[:400] + texts[-7:]:
        assert signer.tokens(text) == naive.lance_tokens(text, signer.params.tokenizer), text
        assert stemmed.tokens(text) == naive.lance_tokens(text, stemmed.params.tokenizer), text
    many = pa.array(texts * 2, pa.string())  # > PARALLEL_MIN_ROWS: ranges on several threads
    for s in (signer, stemmed):
        whole, has = s.sign(many)
        parts = [s.sign(many.slice(i, 1000)) for i in range(0, len(many), 1000)]
        assert (np.vstack([p[0] for p in parts]) == whole).all()
        assert (np.concatenate([p[1] for p in parts]) == has).all()
    plain = [t for t, ok in zip(texts, simple) if ok][:300]  # a batch of plain rows only: the texts as they are
    params = signer.params
    assert signer.inputs(pa.array(plain))[1] != signer.cfg
    sigs, has = signer.sign(pa.array(plain))
    for i, text in enumerate(plain):
        ref = naive.signature(text, params)
        assert has[i] == (ref is not None) and (ref is None or sigs[i].tolist() == ref), text



CODE_CONFIGS = [
    {"base_tokenizer": "code"},
    {"base_tokenizer": "code", "index_operators": True, "max_token_length": 3},
    {"base_tokenizer": "code", "split_identifiers": True},
    {"base_tokenizer": "code", "split_identifiers": True, "split_on_numerics": False},
    {"base_tokenizer": "code", "split_identifiers": True, "preserve_original": False, "index_operators": True},
    {"base_tokenizer": "code", "split_identifiers": True, "max_token_length": 4, "lower_case": False,
     "ascii_folding": False},
]
CODE_EDGES = [
    "", "_", "___", "a", "__init__", "a_", "_b", "a__b", "x2y 2x x2 9 A1B2c3 utf8_reader",
    "getUserName XMLHttpRequest parseHTML2JSON SCREAMING_SNAKE_CASE ABc AbC aBC AB",
    "a>>>=b<=>c::d->e!==f ?? ?. a+++b ~~ =>= <<<", "std::vector<int> value.parse::<usize>()",
    "ÉcoleNormale camelÉté straßeName ǅx ⅫIV ½x x½ 中文_id", "tab\tnew\nline\r", "x" * 41 + " " + "y_" * 30,
]


@pytest.mark.parametrize("tok", CODE_CONFIGS, ids=_id)
def test_code_tokenizer_kernel_is_lances(tok):
    """The numba ``code`` tokenizer (``kernels/code_tokens.py: code_tokens``) against Lance on
    the identifier edges (``_`` runs, case and digit boundaries, operators, non-ASCII
    letters, empty) and on random texts over the characters at stake: every row's tokens
    and signature are Lance's, batch by batch as row by row; ASCII rows take the kernel
    route (no token stream from Lance), and with ``split_identifiers`` the other rows
    Lance's."""
    import random

    from lance_minhash_sql.kernels import tokenize

    rng = random.Random(len(_id(tok)))
    alphabet = list("aAzZ09_ -.:<>=!&|+*/%^~?()") + ["é", "É", "ß", "ǅ", "Ⅻ", "½", "—", "中", "\u0301"]
    texts = CODE_EDGES + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(1500)]
    signer = Signer(MinHashParams(num_hashes=32, num_bands=8, tokenizer=tok))
    for text in texts:
        assert signer.tokens(text) == naive.lance_tokens(text, signer.params.tokenizer), text
    batch = pa.array(texts * 2, pa.string())  # > PARALLEL_MIN_ROWS: ranges on several threads
    sigs, has = signer.sign(batch)
    for i, text in enumerate(texts):
        ref = naive.signature(text, signer.params)
        assert has[i] == has[i + len(texts)] == (ref is not None), text
        assert ref is None or sigs[i].tolist() == sigs[i + len(texts)].tolist() == ref, text
    plain = [t for t in texts if t.isascii()]
    assert signer.inputs(pa.array(plain))[1][0] == tokenize.CODE
    if tok.get("split_identifiers"):
        with pytest.raises(ValueError, match="non-ASCII"):  # the kernel refuses what only Lance cuts right
            data = np.frombuffer("camelÉté".encode(), dtype=np.uint8)
            tokenize.tokenize_doc(data, 0, data.size, signer.kernel_cfg, signer.tables, *tokenize.new_buffers())


# given to Lance as written (not as this package resolves them): the analyzer preset, the
# document granularity and the code flags as Lance itself reads them
RAW_CONFIGS = [
    {"analyzer": "code"},
    {"analyzer": "code", "split_identifiers": True, "index_operators": True},
    {"analyzer": "text", "stem": True, "remove_stop_words": True},
    {"analyzer": "text", "split_identifiers": False},
    {"document_granularity": "list_element"},
    {"document_granularity": {"list_element": None}, "base_tokenizer": "code"},
    {"document_granularity": {"row": None}, "base_tokenizer": "whitespace"},
    {"document_granularity": None, "analyzer": None},
]


@pytest.mark.parametrize("tok", RAW_CONFIGS, ids=_id)
def test_analyzer_and_document_granularity_as_lance_reads_them(native_index, tok):
    from types import SimpleNamespace

    texts = multilingual.rows(300, seed=5)
    params = MinHashParams(num_hashes=16, num_bands=4, tokenizer=tok)
    as_written = SimpleNamespace(to_lance_config=lambda: {"num_hashes": 16, "num_bands": 4, "shingle_size": 3,
                                                          "tokenizer": tok})
    native = native_index(pa.table({"text": pa.array(texts, pa.string())}), as_written)
    assert_matches_native(native, texts, params)
    assert native.signatures_metadata["minhash_lsh_details"] == encode_details(params).hex()
    assert decode_details(encode_details(params)) == params
    if tok.get("analyzer") == "code":
        assert params.tokenizer.base_tokenizer == "code"


def test_document_granularity_is_recorded():
    row, element = (MinHashParams(tokenizer={"document_granularity": g}) for g in ("row", "list_element"))
    assert element.tokenizer.document_granularity == "list_element"
    assert encode_details(row) != encode_details(element)
    assert element.differences(row) == ["tokenizer.document_granularity='list_element' vs 'row'"]
    assert Signer(element).tokens("The same tokens") == Signer(row).tokens("The same tokens")


@pytest.mark.parametrize("tok, ours, lances", [
    ({"analyzer": "Code"}, "analyzer='Code' is unknown", "unknown analyzer 'Code'"),
    ({"analyzer": "simple"}, "expects 'text' or 'code'", "expected 'text' or 'code'"),
    ({"analyzer": "code", "base_tokenizer": "simple"}, "analyzer='code' with base_tokenizer='simple'",
     "requires base_tokenizer='code'"),
    ({"analyzer": "text", "base_tokenizer": "code"}, "use analyzer='code'", "requires analyzer='code'"),
    ({"split_on_numerics": True}, "split_on_numerics=True applies to base_tokenizer='code' only",
     "code analyzer flags require analyzer='code'"),
    ({"analyzer": "text", "split_identifiers": True}, "code analyzer flags require analyzer='code'",
     "code analyzer flags require analyzer='code'"),
    ({"document_granularity": "json"}, "document_granularity='json' is unknown", "unknown variant `json`"),
    ({"document_granularity": {}}, "document_granularity={} is unknown", "single key"),
], ids=lambda v: _id(v) if isinstance(v, dict) else None)
def test_what_lance_refuses_in_analyzer_and_granularity_stays_refused(tmp_path, tok, ours, lances):
    import lance
    from lance.indices import IndexConfig

    with pytest.raises(InvalidParameterError, match=re.escape(ours)):
        TokenizerParams.parse(tok)
    ds = lance.write_dataset(pa.table({"text": ["a b c"]}), str(tmp_path / "ds"))
    with pytest.raises(Exception, match=re.escape(lances)):
        ds.create_scalar_index("text", IndexConfig("MINHASHLSH", {"tokenizer": tok}))
