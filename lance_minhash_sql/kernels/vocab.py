"""Distinct base tokens of a batch, and token streams rebuilt from a per-token mapping.

Stemming and stop-word removal act on one token at a time, so a batch is tokenized here
by the base tokenizer alone (``tokenize_doc`` with no length limit, no lower-casing, no
folding: each token is its original bytes), each distinct token gets an id
(:func:`token_ids`, an open-addressing table keyed by the token's bytes, compared byte
for byte, so two tokens share an id only when they are equal), the caller maps each
distinct token once through Lance's filter chain (``io/tokens.py``), and
:func:`mapped_streams` writes each row's final tokens as a ``TOKENS`` stream
(``kernels/tokenize.py``: u32 length + bytes per token).
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.minhash import is_valid
from lance_minhash_sql.kernels.tokenize import new_buffers, tokenize_doc
from lance_minhash_sql.kernels.xxh64 import xxh64

_SEED = np.uint64(0)


@njit(**JIT, inline="always")
def _same(a, sa, ea, b, sb, eb):
    if ea - sa != eb - sb:
        return False
    for j in range(ea - sa):
        if a[sa + j] != b[sb + j]:
            return False
    return True


@njit(**JIT)
def token_ids(offsets, data, valid, valid_offset, cfg, tables):
    """``(row_offsets int64[n+1], ids int64[], vocab_offsets int64[m+1], vocab uint8[])``:
    row ``r``'s base tokens are ``ids[row_offsets[r]:row_offsets[r+1]]``, token ``i`` of the
    vocabulary is ``vocab[vocab_offsets[i]:vocab_offsets[i+1]]`` (first-seen order). A NULL
    row has no tokens.

    Two passes: the first counts the tokens and their bytes, so every array of the second
    is allocated once (an array reassigned inside the per-token loop costs reference
    counting on every token: 4x slower); the table has a power of two >= twice the
    tokens, so it is at most half full."""
    n = offsets.size - 1
    out, tok_start, tok_end, raw = new_buffers()
    row_offsets = np.zeros(n + 1, dtype=np.int64)
    nbytes = 0
    for r in range(n):
        ntok = 0
        if is_valid(valid, valid_offset, r):
            ntok, out, tok_start, tok_end, raw = tokenize_doc(
                data, offsets[r], offsets[r + 1], cfg, tables, out, tok_start, tok_end, raw)
            for t in range(ntok):
                nbytes += tok_end[t] - tok_start[t]
        row_offsets[r + 1] = row_offsets[r] + ntok
    total = row_offsets[n]
    size = 16
    while size < 2 * total:
        size *= 2
    mask = size - 1
    slots = np.full(size, -1, dtype=np.int64)
    ids = np.empty(total, dtype=np.int64)
    vocab = np.empty(nbytes, dtype=np.uint8)
    vocab_offsets = np.zeros(total + 1, dtype=np.int64)
    vhash = np.empty(total, dtype=np.uint64)
    nv = 0
    nid = 0
    for r in range(n):
        if row_offsets[r + 1] == row_offsets[r]:
            continue
        ntok, out, tok_start, tok_end, raw = tokenize_doc(
            data, offsets[r], offsets[r + 1], cfg, tables, out, tok_start, tok_end, raw)
        for t in range(ntok):
            s = tok_start[t]
            e = tok_end[t]
            h = xxh64(out, s, e - s, _SEED)
            k = np.int64(h & np.uint64(mask))
            v = slots[k]
            while v >= 0:
                if vhash[v] == h and _same(vocab, vocab_offsets[v], vocab_offsets[v + 1], out, s, e):
                    break
                k = (k + 1) & mask
                v = slots[k]
            if v < 0:  # a new token: append it to the vocabulary
                used = vocab_offsets[nv]
                for j in range(e - s):
                    vocab[used + j] = out[s + j]
                vocab_offsets[nv + 1] = used + e - s
                vhash[nv] = h
                v = nv
                slots[k] = v
                nv += 1
            ids[nid] = v
            nid += 1
    return row_offsets, ids, vocab_offsets[:nv + 1], vocab[:vocab_offsets[nv]]


@njit(**JIT)
def mapped_streams(row_offsets, ids, map_offsets, map_bytes, keep):
    """``(offsets int64[n+1], data uint8[])``: each row's ``TOKENS`` stream, token ``ids[j]``
    replaced by ``map_bytes[map_offsets[i]:map_offsets[i+1]]`` (``i = ids[j]``) and dropped
    where ``keep[i]`` is false."""
    n = row_offsets.size - 1
    size = 0
    for j in range(ids.size):
        i = ids[j]
        if keep[i]:
            size += 4 + map_offsets[i + 1] - map_offsets[i]
    data = np.empty(size, dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    q = 0
    for r in range(n):
        for j in range(row_offsets[r], row_offsets[r + 1]):
            i = ids[j]
            if keep[i]:
                length = map_offsets[i + 1] - map_offsets[i]
                data[q] = length & 0xFF
                data[q + 1] = (length >> 8) & 0xFF
                data[q + 2] = (length >> 16) & 0xFF
                data[q + 3] = (length >> 24) & 0xFF
                q += 4
                for p in range(map_offsets[i], map_offsets[i + 1]):
                    data[q] = map_bytes[p]
                    q += 1
        offsets[r + 1] = q
    return offsets, data
