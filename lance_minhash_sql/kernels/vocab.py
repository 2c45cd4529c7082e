"""Distinct base tokens, and token streams rebuilt from a per-token mapping.

Stemming and stop-word removal act on one token at a time, so a batch is tokenized here
by the base tokenizer alone (``tokenize_doc`` with no length limit, no lower-casing, no
folding: each token is its original bytes), each distinct token gets an id in a
vocabulary that lives across batches (:func:`count_tokens`, then :func:`assign_ids`: an
open-addressing table of ids, each token's :data:`RECORD` holding its hash and leading
bytes: :func:`find` compares a token byte for byte, so two tokens share an id only when
they are equal), the caller maps each new token once through Lance's filter chain
(``io/tokens.py``) into its record, and ``kernels/vocab_sign.py`` signs rows from the
records, or :func:`vocab_streams` writes each row's final tokens as a ``TOKENS`` stream
(``kernels/tokenize.py``: u32 length + bytes per token). :func:`icu_simple_rows`,
:func:`kernel_streams` and :func:`merge_streams` serve the ``icu`` tokenizers, and with
:func:`ascii_rows` the ``code`` tokenizer with ``split_identifiers`` (``index/sign.py``).
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.tokenize import is_valid, new_buffers, row_tokens, tokenize_row
from lance_minhash_sql.kernels.xxh64 import P2, P3, read64, xxh64

INLINE = 16  # leading bytes of a token its record holds (two little-endian words)
# A token's record, one row of a uint64[n, RECORD] array (64 bytes: one cache line holds
# what a lookup and the copy of its filtered form read), by column:
REC_HASH = 0  # the token's hash (token_key)
REC_WORD0 = 1  # its first 8 bytes, little-endian, zero past its end
REC_WORD1 = 2  # its next 8 bytes
REC_LENGTH = 3  # its length in bytes
# its filtered form, filled by index/sign.py once Lance has filtered the token:
REC_FORM_WORD0 = 4  # the form's first 8 bytes
REC_FORM_WORD1 = 5  # its next 8 bytes
REC_FORM_LENGTH = 6  # the form's length + 1; 0 when the filters drop the token
REC_FORM_START = 7  # where the form starts in the forms' bytes
RECORD = 8
_SEED = np.uint64(0)
_K1 = np.uint64(0x9E3779B185EBCA87)
_U8 = np.uint64(8)
_U29 = np.uint64(29)
_U31 = np.uint64(31)
_U32 = np.uint64(32)
_U33 = np.uint64(33)


_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


@njit(**JIT, inline="always")
def _low_bytes(word, n):
    """``word`` with only its ``n`` low bytes kept (all of them from 8 on, none below 1):
    a table lookup, no branch."""
    return word & _LOW_BYTES[min(max(n, 0), 8)]


@njit(**JIT, inline="always")
def token_key(out, s, e):
    """``(hash, w0, w1)`` of the token ``out[s:e]``: its first :data:`INLINE` bytes as two
    little-endian words (zero past its end), and its hash: the words and length mixed for
    a token that fits them, XXH64 otherwise."""
    n = e - s
    if s + INLINE <= out.size:
        w0 = _low_bytes(read64(out, s), n)
        w1 = _low_bytes(read64(out, s + 8), n - 8)
    else:
        w0 = np.uint64(0)
        w1 = np.uint64(0)
        for j in range(min(n, INLINE)):
            if j < 8:
                w0 |= np.uint64(out[s + j]) << (_U8 * np.uint64(j))
            else:
                w1 |= np.uint64(out[s + j]) << (_U8 * np.uint64(j - 8))
    if n > INLINE:
        return xxh64(out, s, n, _SEED), w0, w1
    h = w0 * _K1 ^ ((w1 * P2 + np.uint64(n)) << _U31 | (w1 * P2 + np.uint64(n)) >> _U33)
    h ^= h >> _U29
    h *= P3
    h ^= h >> _U32
    return h, w0, w1


@njit(**JIT, inline="always")
def _same(a, sa, ea, b, sb, eb):
    if ea - sa != eb - sb:
        return False
    for j in range(ea - sa):
        if a[sa + j] != b[sb + j]:
            return False
    return True


@njit(**JIT, inline="always")
def find(out, s, e, h, w0, w1, slots, records, vocab, vocab_offsets):
    """``(slot, id)`` of the token ``out[s:e]`` (:func:`token_key` ``h, w0, w1``) in the
    table ``slots``: its id, or -1 and the empty slot where it would go. Linear probing
    over ids; token ``i``'s record (:data:`RECORD`: hash, leading words, length) decides,
    and the bytes past the first :data:`INLINE` are compared in ``vocab`` for a longer
    token: a token is found only where its bytes equal a vocabulary entry's."""
    mask = slots.size - 1
    k = np.int64(h & np.uint64(mask))
    v = slots[k]
    n = e - s
    while v >= 0:
        if (records[v, REC_HASH] == h and records[v, REC_WORD0] == w0 and records[v, REC_WORD1] == w1
                and np.int64(records[v, REC_LENGTH]) == n):
            if n <= INLINE or _same(vocab, vocab_offsets[v] + INLINE, vocab_offsets[v + 1], out, s + INLINE, e):
                return k, v
        k = (k + 1) & mask
        v = slots[k]
    return k, v


@njit(**JIT)
def _fill(offsets, data, cfg, tables, r, row_offsets, slots, ids, vocab, vocab_offsets,
          records, nv, bufs):
    """Ids of rows ``r..`` into ``ids`` until done or until the next row could fill
    ``slots`` past half: returns ``(next row, nv, bufs)``. Its arrays are never reassigned
    here (an array reassigned inside the per-token loop costs reference counting on every
    token), so the table grows in :func:`assign_ids`, between calls."""
    out, tok_start, tok_end, raw = bufs
    n = offsets.size - 1
    while r < n:
        nid = row_offsets[r]
        if row_offsets[r + 1] == nid:
            r += 1
            continue
        if 2 * (nv + row_offsets[r + 1] - nid) > slots.size:
            break
        ntok, out, tok_start, tok_end, raw = tokenize_row(
            data, offsets[r], offsets[r + 1], cfg, tables, out, tok_start, tok_end, raw)
        for t in range(ntok):
            s = tok_start[t]
            e = tok_end[t]
            h, w0, w1 = token_key(out, s, e)
            k, v = find(out, s, e, h, w0, w1, slots, records, vocab, vocab_offsets)
            if v < 0:  # a new token: append it to the vocabulary
                used = vocab_offsets[nv]
                for j in range(e - s):
                    vocab[used + j] = out[s + j]
                vocab_offsets[nv + 1] = used + e - s
                records[nv, REC_HASH] = h
                records[nv, REC_WORD0] = w0
                records[nv, REC_WORD1] = w1
                records[nv, REC_LENGTH] = np.uint64(e - s)
                v = nv
                slots[k] = v
                nv += 1
            ids[nid] = v
            nid += 1
        r += 1
    return r, nv, (out, tok_start, tok_end, raw)


@njit(**JIT)
def count_tokens(offsets, data, valid, valid_offset, cfg, tables):
    """``(row_offsets int64[n+1], nbytes)``: where each row's base tokens start among the
    batch's tokens, and their total bytes (NULL rows have none)."""
    n = offsets.size - 1
    out, tok_start, tok_end, raw = new_buffers()
    row_offsets = np.zeros(n + 1, dtype=np.int64)
    nbytes = 0
    for r in range(n):
        ntok, out, tok_start, tok_end, raw = row_tokens(offsets, data, valid, valid_offset, r, cfg, tables,
                                                        out, tok_start, tok_end, raw)
        for t in range(ntok):
            nbytes += tok_end[t] - tok_start[t]
        row_offsets[r + 1] = row_offsets[r] + ntok
    return row_offsets, nbytes


@njit(**JIT)
def assign_ids(offsets, data, cfg, tables, row_offsets, slots, ids, vocab, vocab_offsets, records, nv):
    """Ids of the batch's base tokens into ``ids`` (``row_offsets`` from
    :func:`count_tokens`), adding new tokens to the vocabulary ``vocab`` /
    ``vocab_offsets`` (the caller sized them for every token of the batch) and
    ``records`` (half the table's size: :func:`_fill` keeps the table at most half full)
    after its ``nv`` entries, and to the table ``slots``: returns ``(nv, slots, records)``.

    The table and the records double whenever the next row could fill it past half, between calls of
    :func:`_fill`, which never reassigns an array (an array reassigned inside the per-token
    loop costs reference counting on every token); so it stays about the size of the
    vocabulary, where a table sized for every token misses the cache on most lookups."""
    n = offsets.size - 1
    bufs = new_buffers()
    r = 0
    while True:
        r, nv, bufs = _fill(offsets, data, cfg, tables, r, row_offsets, slots, ids, vocab,
                            vocab_offsets, records, nv, bufs)
        if r >= n:
            return nv, slots, records
        size = 2 * slots.size
        while size < 2 * (nv + row_offsets[r + 1] - row_offsets[r]):
            size *= 2
        grown = np.zeros((size // 2, RECORD), dtype=np.uint64)
        for i in range(nv):
            for j in range(RECORD):
                grown[i, j] = records[i, j]
        records = grown
        slots = np.full(size, -1, dtype=np.int32)
        mask = size - 1
        for i in range(nv):
            k = np.int64(records[i, REC_HASH] & np.uint64(mask))
            while slots[k] >= 0:
                k = (k + 1) & mask
            slots[k] = i


@njit(**JIT)
def vocab_streams(row_offsets, ids, records, form_bytes):
    """``(offsets int64[n+1], data uint8[])``: each row's ``TOKENS`` stream, token ``ids[j]``
    replaced by its filtered form (``records[i, REC_FORM_LENGTH] - 1`` bytes of
    ``form_bytes`` from ``records[i, REC_FORM_START]``, ``i = ids[j]``) and dropped where
    ``records[i, REC_FORM_LENGTH] == 0``."""
    n = row_offsets.size - 1
    size = 0
    for j in range(ids.size):
        length = np.int64(records[ids[j], REC_FORM_LENGTH]) - 1
        if length >= 0:
            size += 4 + length
    data = np.empty(size, dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    q = 0
    for r in range(n):
        for j in range(row_offsets[r], row_offsets[r + 1]):
            i = ids[j]
            length = np.int64(records[i, REC_FORM_LENGTH]) - 1
            if length >= 0:
                data[q] = length & 0xFF
                data[q + 1] = (length >> 8) & 0xFF
                data[q + 2] = (length >> 16) & 0xFF
                data[q + 3] = (length >> 24) & 0xFF
                q += 4
                start = np.int64(records[i, REC_FORM_START])
                for p in range(start, start + length):
                    data[q] = form_bytes[p]
                    q += 1
        offsets[r + 1] = q
    return offsets, data


@njit(**JIT, inline="always")
def _alnum_ascii(b):
    return (48 <= b <= 57) or (65 <= b <= 90) or (97 <= b <= 122)


@njit(**JIT)
def icu_simple_rows(offsets, data, valid, valid_offset):
    """``bool[n]``: rows whose ``icu`` words are the ``simple`` tokenizer's tokens (NULL rows
    too: they have neither).

    Unicode word segmentation (UAX #29) and the ``simple`` tokenizer agree on a text of
    printable ASCII, tab, LF and CR where no ``_`` occurs (ExtendNumLet: it joins letters
    and digits into one word) and none of ``. , ; : '`` sits between two letters or digits
    (MidLetter / MidNum / MidNumLet: ``e.g``, ``3,14``, ``don't`` are one word): then a word
    is a maximal run of letters and digits, every other character breaks, and only words
    with a letter or digit are tokens. Any other row is tokenized by Lance."""
    n = offsets.size - 1
    out = np.ones(n, dtype=np.bool_)
    for r in range(n):
        if not is_valid(valid, valid_offset, r):
            continue
        s = offsets[r]
        e = offsets[r + 1]
        for p in range(s, e):
            b = data[p]
            if b >= 0x7F or (b < 0x20 and b != 0x09 and b != 0x0A and b != 0x0D) or b == 0x5F:
                out[r] = False
                break
            if (b == 0x2E or b == 0x2C or b == 0x3B or b == 0x3A or b == 0x27) and p > s and p + 1 < e \
                    and _alnum_ascii(data[p - 1]) and _alnum_ascii(data[p + 1]):
                out[r] = False
                break
    return out


@njit(**JIT)
def kernel_streams(offsets, data, valid, valid_offset, cfg, tables):
    """``(offsets int64[n+1], data uint8[])``: each row's final tokens from the numba
    tokenizer (``cfg``) as a ``TOKENS`` stream; NULL rows empty."""
    n = offsets.size - 1
    out, tok_start, tok_end, raw = new_buffers()
    res = np.zeros(n + 1, dtype=np.int64)
    size = 0
    for r in range(n):  # the streams' size first, so the buffer is allocated once
        ntok, out, tok_start, tok_end, raw = row_tokens(offsets, data, valid, valid_offset, r, cfg, tables,
                                                        out, tok_start, tok_end, raw)
        for t in range(ntok):
            size += 4 + tok_end[t] - tok_start[t]
    dest = np.empty(size, dtype=np.uint8)
    q = 0
    for r in range(n):
        ntok, out, tok_start, tok_end, raw = row_tokens(offsets, data, valid, valid_offset, r, cfg, tables,
                                                        out, tok_start, tok_end, raw)
        for t in range(ntok):
            length = tok_end[t] - tok_start[t]
            dest[q] = length & 0xFF
            dest[q + 1] = (length >> 8) & 0xFF
            dest[q + 2] = (length >> 16) & 0xFF
            dest[q + 3] = (length >> 24) & 0xFF
            q += 4
            for p in range(tok_start[t], tok_end[t]):
                dest[q] = out[p]
                q += 1
        res[r + 1] = q
    return res, dest


@njit(**JIT)
def merge_streams(offsets_a, data_a, offsets_b, data_b, from_a):
    """Row ``r``'s stream from ``a`` (one row per row) where ``from_a[r]``, else the next
    row of ``b`` (which holds only those rows, in order)."""
    n = from_a.size
    size = 0
    j = 0
    for r in range(n):
        if from_a[r]:
            size += offsets_a[r + 1] - offsets_a[r]
        else:
            size += offsets_b[j + 1] - offsets_b[j]
            j += 1
    data = np.empty(size, dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int64)
    q = 0
    j = 0
    for r in range(n):
        if from_a[r]:
            src, lo, hi = data_a, offsets_a[r], offsets_a[r + 1]
        else:
            src, lo, hi = data_b, offsets_b[j], offsets_b[j + 1]
            j += 1
        for p in range(lo, hi):
            data[q] = src[p]
            q += 1
        offsets[r + 1] = q
    return offsets, data


@njit(**JIT)
def ascii_rows(offsets, data):
    """``bool[n]``: rows whose bytes are all ASCII (whatever a NULL row's range holds:
    either route leaves it NULL)."""
    n = offsets.size - 1
    out = np.ones(n, dtype=np.bool_)
    for r in range(n):
        high = np.uint8(0)
        for p in range(offsets[r], offsets[r + 1]):
            high |= data[p]
        out[r] = high < 0x80
    return out
