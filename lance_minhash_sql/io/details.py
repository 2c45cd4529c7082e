"""``lance.index.pb.MinHashLshIndexDetails``: the protobuf that records an index's parameters.

The same bytes are the manifest's ``index_details`` (type URL
:data:`TYPE_URL`) and, as lower-case hex, the ``minhash_lsh_details`` schema metadata of
both segment files (``docs/index-format.md``). Fields, as pylance 14.0.2 writes them (proto3: zero /
false omitted, ``optional`` fields written when set)::

    1 num_hashes (u32)   2 num_bands (u32)   3 shingle_size (u32)   5 signature_version (u32)
    4 tokenizer = lance.table.InvertedIndexDetails:
        1 base_tokenizer (optional string)      2 language (string, JSON-quoted: "\\"English\\"")
        3 with_position (bool)                  4 max_token_length (optional u32; absent = no limit)
        5 lower_case  6 stem  7 remove_stop_words  8 ascii_folding (bool)
        9 min_ngram_length  10 max_ngram_length (u32)   11 prefix_only (bool)
        12 block_size (optional u32)            13 code_config (message, "code" tokenizer only:
                                                   1 split_identifiers, 2 split_on_numerics,
                                                   3 preserve_original, 4 index_operators)
        14 document_granularity (enum: 0 row, 1 list_element)
        15 posting_format_version (optional u32)

Readers compare the *parsed* parameters, never the bytes.
"""

from __future__ import annotations

import json

from lance_minhash_sql.core.errors import UnsupportedIndexError
from lance_minhash_sql.core.params import GRANULARITIES, SIGNATURE_VERSION, MinHashParams, TokenizerParams

__all__ = ["TYPE_URL", "encode_details", "decode_details", "details_hex", "params_from_hex"]

TYPE_URL = "/lance.index.pb.MinHashLshIndexDetails"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _uint(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, 2) + _varint(len(value)) + value


def _encode_tokenizer(tok: TokenizerParams) -> bytes:
    out = _bytes(1, tok.base_tokenizer.encode())
    out += _bytes(2, json.dumps(tok.language).encode())
    if tok.with_position:
        out += _uint(3, 1)
    if tok.max_token_length is not None:
        out += _uint(4, tok.max_token_length)
    for field, flag in ((5, tok.lower_case), (6, tok.stem), (7, tok.remove_stop_words), (8, tok.ascii_folding)):
        if flag:
            out += _uint(field, 1)
    out += _uint(9, tok.min_ngram_length) + _uint(10, tok.max_ngram_length)
    if tok.prefix_only:
        out += _uint(11, 1)
    out += _uint(12, tok.block_size)
    if tok.base_tokenizer == "code":
        out += _bytes(13, _encode_code_config(tok))
    if tok.document_granularity != "row":
        out += _uint(14, GRANULARITIES.index(tok.document_granularity))
    out += _uint(15, 3 if tok.block_size == 256 or tok.base_tokenizer == "code" else 2)
    return out


def _encode_code_config(tok: TokenizerParams) -> bytes:
    """``code_config`` as Lance 14.0.2 writes it: 1 ``split_identifiers`` when set, 2
    ``split_on_numerics`` and 3 ``preserve_original`` always (``optional``), 4
    ``index_operators`` when set."""
    return ((_uint(1, 1) if tok.split_identifiers else b"") + _uint(2, int(tok.split_on_numerics))
            + _uint(3, int(tok.preserve_original)) + (_uint(4, 1) if tok.index_operators else b""))


def encode_details(params: MinHashParams) -> bytes:
    """The protobuf bytes pylance 14.0.2 writes for these parameters."""
    return (_uint(1, params.num_hashes) + _uint(2, params.num_bands) + _uint(3, params.shingle_size)
            + _bytes(4, _encode_tokenizer(params.tokenizer)))


def details_hex(params: MinHashParams) -> str:
    return encode_details(params).hex()


def _fields(data: bytes, what: str) -> dict[int, int | bytes]:
    out: dict[int, int | bytes] = {}
    pos = 0
    n = len(data)

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= n:
                raise UnsupportedIndexError(f"{what}: truncated varint in MinHash LSH index details")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    while pos < n:
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out[field] = varint()
        elif wire == 2:
            length = varint()
            if pos + length > n:
                raise UnsupportedIndexError(f"{what}: truncated field {field} in MinHash LSH index details")
            out[field] = data[pos:pos + length]
            pos += length
        elif wire == 1:
            out[field] = int.from_bytes(data[pos:pos + 8], "little")
            pos += 8
        elif wire == 5:
            out[field] = int.from_bytes(data[pos:pos + 4], "little")
            pos += 4
        else:
            raise UnsupportedIndexError(f"{what}: unknown protobuf wire type {wire} in MinHash LSH index details")
    return out


def decode_details(data: bytes, what: str = "index") -> MinHashParams:
    """Parameters recorded in a details protobuf; unknown versions and tokenizers are refused."""
    top = _fields(bytes(data), what)
    version = top.get(5, 0)
    if version != SIGNATURE_VERSION:
        raise UnsupportedIndexError(
            f"{what}: MinHash LSH index was built with signature_version {version}, but this package "
            f"reads only signature_version {SIGNATURE_VERSION}; rebuild the index with minhash_build"
        )
    tok = _fields(top.get(4, b""), what) if isinstance(top.get(4, b""), bytes) else {}
    code = _fields(tok[13], what) if isinstance(tok.get(13), bytes) else {}
    language = json.loads(tok[2].decode()) if 2 in tok else "English"
    try:
        tokenizer = TokenizerParams(
            base_tokenizer=tok[1].decode() if 1 in tok else "simple",
            language=language,
            with_position=bool(tok.get(3, 0)),
            max_token_length=tok.get(4),
            lower_case=bool(tok.get(5, 0)),
            stem=bool(tok.get(6, 0)),
            remove_stop_words=bool(tok.get(7, 0)),
            ascii_folding=bool(tok.get(8, 0)),
            min_ngram_length=tok.get(9, 0),
            max_ngram_length=tok.get(10, 0),
            prefix_only=bool(tok.get(11, 0)),
            block_size=tok.get(12, 128),
            index_operators=bool(code.get(4, 0)),
            split_identifiers=bool(code.get(1, 0)),
            split_on_numerics=bool(code[2]) if 2 in code else None,
            preserve_original=bool(code[3]) if 3 in code else None,
            document_granularity=_granularity_name(tok.get(14, 0), what),
        )
        return MinHashParams(num_hashes=top.get(1, 0), num_bands=top.get(2, 0),
                             shingle_size=top.get(3, 0), tokenizer=tokenizer)
    except ValueError as exc:
        raise UnsupportedIndexError(f"{what}: index parameters are not supported by lance_minhash_sql: {exc}") from None


def _granularity_name(value: int, what: str) -> str:
    if not 0 <= value < len(GRANULARITIES):
        raise UnsupportedIndexError(f"{what}: unknown document_granularity {value} in MinHash LSH index details")
    return GRANULARITIES[value]


def params_from_hex(value: str, what: str = "index") -> MinHashParams:
    try:
        data = bytes.fromhex(value)
    except ValueError:
        raise UnsupportedIndexError(f"{what}: minhash_lsh_details {value[:40]!r} is not hex") from None
    return decode_details(data, what)
