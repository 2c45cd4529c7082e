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
    row has no tokens."""
    n = offsets.size - 1
    out, tok_start, tok_end, raw = new_buffers()
    row_offsets = np.zeros(n + 1, dtype=np.int64)
    ids = np.empty(1024, dtype=np.int64)
    vocab = np.empty(4096, dtype=np.uint8)
    vstart = np.empty(1024, dtype=np.int64)
    vend = np.empty(1024, dtype=np.int64)
    vhash = np.empty(1024, dtype=np.uint64)
    slots = np.full(2048, -1, dtype=np.int64)
    nv = 0
    used = 0  # bytes of vocab
    nid = 0
    for r in range(n):
        if is_valid(valid, valid_offset, r):
            ntok, out, tok_start, tok_end, raw = tokenize_doc(
                data, offsets[r], offsets[r + 1], cfg, tables, out, tok_start, tok_end, raw)
            for t in range(ntok):
                s = tok_start[t]
                e = tok_end[t]
                h = xxh64(out, s, e - s, _SEED)
                mask = slots.size - 1
                k = np.int64(h & np.uint64(mask))
                while True:
                    v = slots[k]
                    if v < 0:
                        break
                    if vhash[v] == h and _same(vocab, vstart[v], vend[v], out, s, e):
                        break
                    k = (k + 1) & mask
                if v < 0:  # a new token: append it to the vocabulary
                    if nv == vstart.size:
                        vstart2 = np.empty(2 * nv, dtype=np.int64)
                        vend2 = np.empty(2 * nv, dtype=np.int64)
                        vhash2 = np.empty(2 * nv, dtype=np.uint64)
                        for j in range(nv):
                            vstart2[j] = vstart[j]
                            vend2[j] = vend[j]
                            vhash2[j] = vhash[j]
                        vstart, vend, vhash = vstart2, vend2, vhash2
                    if used + e - s > vocab.size:
                        vocab2 = np.empty(max(2 * vocab.size, used + e - s), dtype=np.uint8)
                        for j in range(used):
                            vocab2[j] = vocab[j]
                        vocab = vocab2
                    for j in range(e - s):
                        vocab[used + j] = out[s + j]
                    vstart[nv] = used
                    vend[nv] = used + e - s
                    vhash[nv] = h
                    used += e - s
                    v = nv
                    slots[k] = v
                    nv += 1
                    if 2 * nv > slots.size:  # keep the table at most half full
                        slots = np.full(2 * slots.size, -1, dtype=np.int64)
                        mask = slots.size - 1
                        for i in range(nv):
                            k = np.int64(vhash[i] & np.uint64(mask))
                            while slots[k] >= 0:
                                k = (k + 1) & mask
                            slots[k] = i
                if nid == ids.size:
                    ids2 = np.empty(2 * nid, dtype=np.int64)
                    for j in range(nid):
                        ids2[j] = ids[j]
                    ids = ids2
                ids[nid] = v
                nid += 1
        row_offsets[r + 1] = nid
    vocab_offsets = np.empty(nv + 1, dtype=np.int64)
    for i in range(nv):  # vocabulary entries are contiguous and in order
        vocab_offsets[i] = vstart[i]
    vocab_offsets[nv] = used
    return row_offsets, ids[:nid], vocab_offsets, vocab[:used]


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
