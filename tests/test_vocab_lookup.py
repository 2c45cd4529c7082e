"""The vocabulary's lookup (``kernels/vocab.py:find``, used by ``assign_ids`` and the
vocabulary signer ``kernels/vocab_sign.py``) finds a token only where its bytes equal an
entry's, not where its record does: a token's record holds its 64-bit hash, its first 16
bytes and its length, so two tokens longer than 16 bytes can share all three (an XXH64
collision) and differ after byte 16. No corpus reaches such a collision, so the lookup is
given one: a table holding token A, asked for token B with A's hash."""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels import vocab


def _table(tokens: list[bytes], size: int = 8):
    """A vocabulary of ``tokens`` as ``assign_ids`` lays it out: slots, records, bytes, offsets."""
    data = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(t) for t in tokens]))).astype(np.int64)
    records = np.zeros((size // 2, vocab.RECORD), dtype=np.uint64)
    slots = np.full(size, -1, dtype=np.int32)
    for i, t in enumerate(tokens):
        h, w0, w1 = vocab.token_key(np.frombuffer(t + b"\0" * 16, dtype=np.uint8), 0, len(t))
        records[i, vocab.REC_HASH], records[i, vocab.REC_WORD0], records[i, vocab.REC_WORD1] = h, w0, w1
        records[i, vocab.REC_LENGTH] = len(t)
        k = int(h) & (size - 1)
        while slots[k] >= 0:
            k = (k + 1) & (size - 1)
        slots[k] = i
    return slots, records, data, offsets


def _find(token: bytes, table, h=None) -> int:
    out = np.frombuffer(token + b"\0" * 16, dtype=np.uint8)  # (as a tokenizer's buffer: room past the end)
    th, w0, w1 = (np.uint64(x) for x in vocab.token_key(out, 0, len(token)))
    _, v = vocab.find(out, 0, len(token), th if h is None else np.uint64(h), w0, w1, *table)
    return int(v)


def test_a_lookup_compares_a_token_past_its_first_16_bytes():
    a = b"internationalisation-a"
    b = b"internationalisation-b"  # same length, same first 16 bytes, differs at byte 21
    assert len(a) == len(b) > vocab.INLINE and a[:vocab.INLINE] == b[:vocab.INLINE] and a != b
    table = _table([a])
    h_a = int(table[1][0, vocab.REC_HASH])
    key_a, key_b = (vocab.token_key(np.frombuffer(t + b"\0" * 16, np.uint8), 0, len(t)) for t in (a, b))
    assert key_a[1:] == key_b[1:]  # the record's leading words agree: only the bytes after them differ
    assert _find(a, table) == 0  # the entry itself is found
    assert _find(b, table, h=h_a) == -1  # A's hash, words and length, but not A's bytes: not found
    assert _find(b, table) == -1  # (and with its own hash)


def test_a_lookup_tells_tokens_apart_by_length_and_short_tokens_by_their_words():
    long_a = b"abcdefghijklmnopq"  # 17 bytes
    table = _table([long_a, b"abcdefghijklmnop", b"short"])
    assert _find(long_a, table) == 0 and _find(b"abcdefghijklmnop", table) == 1 and _find(b"short", table) == 2
    h0 = int(table[1][0, vocab.REC_HASH])
    assert _find(b"abcdefghijklmnopqr", table, h=h0) == -1  # same hash and words, one byte longer
    assert _find(b"shorT", table) == -1
