"""The details protobuf against pylance's own bytes (docs/index-format.md)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_minhash_sql.core.errors import UnsupportedIndexError
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.io.details import decode_details, details_hex, encode_details, params_from_hex

NATIVE = {
    MinHashParams(): "0880011010180322220a0673696d706c65120922456e676c69736822202828014001480350036080017802",
    MinHashParams().with_tokenizer(lower_case=False, ascii_folding=False, max_token_length=None):
        "08800110101803221c0a0673696d706c65120922456e676c697368224803500360800178 02".replace(" ", ""),
    MinHashParams().with_tokenizer(base_tokenizer="ngram", min_ngram_length=2, max_ngram_length=4, prefix_only=True):
        "0880011010180322230a056e6772616d120922456e676c697368222028280140014802500458016080017802",
    MinHashParams().with_tokenizer(base_tokenizer="raw"):
        "08800110101803221f0a03726177120922456e676c69736822202828014001480350036080017802",
}


@pytest.mark.parametrize("params", list(NATIVE), ids=range(len(NATIVE)))
def test_known_native_bytes(params):
    assert details_hex(params) == NATIVE[params]
    assert params_from_hex(NATIVE[params]) == params


def test_known_prefixes():
    assert details_hex(MinHashParams(64, 8, 5)).startswith("08401008180522220a06")
    assert details_hex(MinHashParams(64, 8, 2)).startswith("08401008180222220a06")
    assert "22260a0a77686974657370616365" in details_hex(MinHashParams().with_tokenizer(base_tokenizer="whitespace"))


@pytest.mark.parametrize("params", [
    MinHashParams(64, 8, 5), MinHashParams(1, 1, 1), MinHashParams(4096, 256, 9),
    MinHashParams().with_tokenizer(base_tokenizer="whitespace", max_token_length=7, block_size=256),
])
def test_matches_lance_written_details(native_index, params):
    native = native_index(pa.table({"text": ["a b c d", "e f g"]}), params)
    assert native.bands_metadata["minhash_lsh_details"] == details_hex(params)
    assert native.signatures_metadata["minhash_lsh_details"] == details_hex(params)


def test_unknown_signature_version_refused():
    data = encode_details(MinHashParams()) + bytes([0x28, 0x01])  # field 5 = 1
    with pytest.raises(UnsupportedIndexError, match="signature_version 1"):
        decode_details(data)


def test_garbage_refused():
    with pytest.raises(UnsupportedIndexError):
        params_from_hex("zz")
    with pytest.raises(UnsupportedIndexError, match="truncated"):
        decode_details(bytes.fromhex("0880"))
