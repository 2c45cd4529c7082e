"""Every tokenizer configuration Lance's MinHash index accepts: stemming and stop words per
language, ``icu``, ``icu/split``, ``code``, with the kernel filters, against Lance's native
index built with the same options (``IndexConfig("MINHASHLSH", {"tokenizer": ...})``)."""

from __future__ import annotations

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
    {"base_tokenizer": "code"},
    {"base_tokenizer": "code", "index_operators": True, "max_token_length": 12},
    {"base_tokenizer": "whitespace", "stem": True},
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


@pytest.mark.parametrize("tok", [{"with_position": True},
                                 {"base_tokenizer": "code", "split_identifiers": True, "split_on_numerics": True,
                                  "preserve_original": True}], ids=_id)
def test_options_that_change_nothing_are_accepted_as_lance_accepts_them(native_index, tok):
    texts = multilingual.rows(200, seed=9)
    params = MinHashParams(num_hashes=16, num_bands=4, tokenizer=tok)
    native = native_index(pa.table({"text": pa.array(texts, pa.string())}), params)
    assert_matches_native(native, texts, params)
    assert native.signatures_metadata["minhash_lsh_details"] == encode_details(params).hex()
