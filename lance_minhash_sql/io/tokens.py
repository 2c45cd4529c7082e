"""Lance's own tokenizer, ``lance.tokenize``: a few query texts, or the token streams of
the tokenizer options the numba tokenizer does not reproduce.

The index's tokens are Lance's (docs/signatures.md): the numba tokenizer
(``kernels/tokenize.py``) reproduces the ``simple``, ``whitespace``, ``raw``, ``ngram`` and
``code`` pipelines from per-code-point tables for throughput, and a few query texts are
tokenized here by Lance itself, so a single search needs no compiled
kernel (``query/query_sign.py``). For ``icu`` and ``icu/split`` (the rows the kernels do
not take), and for ``code``'s identifier split on rows with non-ASCII text,
:func:`token_streams` asks Lance for every row's tokens and hands them to the kernels as a
``TOKENS`` stream, which they hash like their own; for stemming and stop-word removal
after a base tokenizer the kernels reproduce, :func:`filtered_tokens` runs Lance's filter
chain once per distinct token (``kernels/vocab.py``, ``index/sign.py``).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.errors import LanceMinHashError
from lance_minhash_sql.core.tuning import TOKENIZE_BATCH_TOKENS
from lance_minhash_sql.io.arrow import StringBuffers, as_string_array

__all__ = ["lance_tokens", "token_streams", "filtered_tokens"]

_LENGTH = struct.Struct("<I")


def lance_tokens(text: str, options: dict[str, Any]) -> list[str]:
    """The tokens of ``text`` under ``options`` (``TokenizerParams.lance_tokenize_kwargs()``)."""
    import lance  # on first use: importing the package does not load Lance
    return [t.text for t in lance.tokenize(text, **options)]


def token_streams(texts: pa.Array, options: dict[str, Any]) -> StringBuffers:
    """Buffers of one ``TOKENS`` stream a row (``kernels/tokenize.py``): each token of
    Lance's tokenizer under ``options`` as a little-endian u32 byte length and its UTF-8
    bytes; a NULL row stays NULL (no signature).

    Lance's tokens of every row are taken as one Arrow string array (encoded in C) and laid
    out with numpy, a few passes over the batch's bytes, rather than packed token by token
    in Python (which cost as much as Lance's tokenizer itself)."""
    import lance  # on first use: importing the package does not load Lance
    array = as_string_array(texts)
    tokenize = lance.tokenize
    words: list[str] = []
    counts = np.zeros(len(array), dtype=np.int64)
    valid = np.ones(len(array), dtype=np.bool_)
    for i, text in enumerate(array.to_pylist()):
        if text is None:
            valid[i] = False
            continue
        row = [t.text for t in tokenize(text, **options)]
        counts[i] = len(row)
        words += row
    tokens = pa.array(words, type=pa.large_string())
    tok_off = np.frombuffer(tokens.buffers()[1], dtype=np.int64)[:len(words) + 1]
    tok_data = tokens.buffers()[2]
    tok_bytes = np.frombuffer(tok_data, dtype=np.uint8) if tok_data is not None else np.empty(0, np.uint8)
    lengths = np.diff(tok_off)
    n = lengths.size
    data = np.empty(int(tok_off[-1]) + _LENGTH.size * n, dtype=np.uint8)
    # token i's record starts at its bytes' offset plus the i length fields before it
    starts = tok_off[:-1] + _LENGTH.size * np.arange(n, dtype=np.int64)
    data[(starts[:, None] + np.arange(_LENGTH.size)).reshape(-1)] = lengths.astype("<u4").view(np.uint8)
    owner = np.repeat(np.arange(n, dtype=np.int64), lengths)
    data[np.arange(tok_bytes.size, dtype=np.int64) + _LENGTH.size * (owner + 1)] = tok_bytes[:int(tok_off[-1])]
    tok_end = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths + _LENGTH.size, out=tok_end[1:])
    offsets = tok_end[np.concatenate(([0], np.cumsum(counts)))]
    bits = np.packbits(valid, bitorder="little") if not valid.all() else np.empty(0, dtype=np.uint8)
    return StringBuffers(readonly(offsets), readonly(data), readonly(bits), 0)


_ASCII_SPACE = frozenset(" \t\n\x0c\r")
_SENTINEL = "0"  # kept by every filter chain with max_token_length > 1: no stem, no stop word


def filtered_tokens(tokens: list[str], options: dict[str, Any]) -> list[str | None]:
    """Each base token through Lance's filter chain alone; ``None`` where a filter drops it.

    Lance's filters act on one token at a time, so a token's result is the same alone as
    inside its text (``tests/test_tokenizers.py`` checks whole indexes). Tokens without
    ASCII whitespace go to Lance a few thousand at a time: ``"0 t1 t2 ..."`` under the
    ``whitespace`` base tokenizer (``icu`` / ``icu/split`` for their words, which are runs of
    ASCII letters and digits, ``kernels/vocab.icu_simple_rows``), where the position of each result (gaps left by dropped
    tokens are kept) names its token and the leading ``"0"`` anchors the positions; the
    others, one by one under the ``raw`` base tokenizer (the token as it is)."""
    import lance  # on first use: importing the package does not load Lance
    base = options.get("base_tokenizer")
    # Lance's filters depend on the base tokenizer (with icu, its stop words are those of
    # many languages): the words of icu rows go to Lance under icu itself
    batch_base = base if base in ("icu", "icu/split") else "whitespace"
    opts = {**options}
    for key in ("min_ngram_length", "max_ngram_length", "prefix_only", "split_identifiers", "split_on_numerics",
                "preserve_original", "index_operators"):
        opts.pop(key, None)
    out: list[str | None] = [None] * len(tokens)
    alone: list[int] = []
    batch: list[int] = []
    for i, token in enumerate(tokens):
        (alone if not token or _ASCII_SPACE.intersection(token) else batch).append(i)
    for lo in range(0, len(batch), TOKENIZE_BATCH_TOKENS):
        part = batch[lo:lo + TOKENIZE_BATCH_TOKENS]
        result = lance.tokenize(" ".join([_SENTINEL] + [tokens[i] for i in part]),
                                **{**opts, "base_tokenizer": batch_base})
        if not result or result[0].position != 0 or result[0].text != _SENTINEL:
            alone += part  # the anchor was filtered (max_token_length=1): one token at a time
            continue
        for t in result[1:]:
            out[part[t.position - 1]] = t.text
    raw = {**opts, "base_tokenizer": "raw"}
    for i in alone:
        result = lance.tokenize(tokens[i], **raw)
        if len(result) > 1:
            raise LanceMinHashError(f"Lance's token filters split the token {tokens[i]!r} into {len(result)} tokens; "
                                    "per-token filtering assumes one token at most: please report this")
        out[i] = result[0].text if result else None
    return out
