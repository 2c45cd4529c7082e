"""Lance 14.0.2's MinHash tokenizer over UTF-8 bytes, one document at a time.

Pipeline, in Lance's order: base tokenizer (``simple``: runs of alphanumeric code points;
``whitespace``: split on the bytes ``" \\t\\n\\x0c\\r"``; ``raw``: the whole text, even
empty; ``ngram``: character n-grams of the whole text), then drop tokens whose
*original* UTF-8 length is ``>= max_len`` bytes, then per-code-point lower-casing, then
per-code-point ASCII folding of the lower-cased token.

The final tokens are written into one byte buffer, each followed by the shingle
separator ``0x1F``, so the shingle of tokens ``s..s+w-1`` is the contiguous byte range
``out[tok_start[s]:tok_end[s+w-1]]``.

``cfg`` is a tuple ``(kind, max_len, lower, fold, ngram_min, ngram_max, prefix_only)``
(``max_len < 0``: no limit); ``tables`` is the tuple of arrays from
:mod:`lance_minhash_sql.unicode_tables`. Buffers grow by doubling and are returned so
the caller reuses them across documents.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .config import JIT

SIMPLE = 0
WHITESPACE = 1
RAW = 2
NGRAM = 3
SEPARATOR = np.uint8(0x1F)


@njit(**JIT, inline="always")
def decode(data, p, end):
    """The code point starting at byte ``p`` and the position after it (lenient UTF-8)."""
    b0 = np.int64(data[p])
    if b0 < 0x80:
        return b0, p + 1
    if b0 < 0xE0 and p + 1 < end:
        return ((b0 & 0x1F) << 6) | (np.int64(data[p + 1]) & 0x3F), p + 2
    if b0 < 0xF0 and p + 2 < end:
        return (((b0 & 0x0F) << 12) | ((np.int64(data[p + 1]) & 0x3F) << 6)
                | (np.int64(data[p + 2]) & 0x3F)), p + 3
    if p + 3 < end:
        cp = (((b0 & 0x07) << 18) | ((np.int64(data[p + 1]) & 0x3F) << 12)
              | ((np.int64(data[p + 2]) & 0x3F) << 6) | (np.int64(data[p + 3]) & 0x3F))
        if cp > 0x10FFFF:
            cp = 0xFFFD
        return cp, p + 4
    return 0xFFFD, end


@njit(**JIT, inline="always")
def _encode(cp, out, q):
    if cp < 0x80:
        out[q] = cp
        return q + 1
    if cp < 0x800:
        out[q] = 0xC0 | (cp >> 6)
        out[q + 1] = 0x80 | (cp & 0x3F)
        return q + 2
    if cp < 0x10000:
        out[q] = 0xE0 | (cp >> 12)
        out[q + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[q + 2] = 0x80 | (cp & 0x3F)
        return q + 3
    out[q] = 0xF0 | (cp >> 18)
    out[q + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[q + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[q + 3] = 0x80 | (cp & 0x3F)
    return q + 4


@njit(**JIT, inline="always")
def _emit_folded(cp, fold, tables, out, q):
    fold_index, fold_offsets, fold_values = tables[4], tables[5], tables[6]
    if fold:
        e = fold_index[cp]
        if e >= 0:
            for j in range(fold_offsets[e], fold_offsets[e + 1]):
                out[q] = fold_values[j]
                q += 1
            return q
    return _encode(cp, out, q)


@njit(**JIT, inline="always")
def _grow_u8(buf, need):
    if need <= buf.size:
        return buf
    size = buf.size * 2
    while size < need:
        size *= 2
    new = np.empty(size, dtype=np.uint8)
    new[: buf.size] = buf
    return new


@njit(**JIT, inline="always")
def _grow_i64(buf, need):
    if need <= buf.size:
        return buf
    size = buf.size * 2
    while size < need:
        size *= 2
    new = np.empty(size, dtype=np.int64)
    new[: buf.size] = buf
    return new


@njit(**JIT)
def _push(data, ts, te, cfg, tables, out, q, tok_start, tok_end, ntok):
    """Filter and transform the original token ``data[ts:te]``; append it to ``out``."""
    max_len = cfg[1]
    if max_len >= 0 and te - ts >= max_len:
        return out, q, tok_start, tok_end, ntok
    lower = cfg[2]
    fold = cfg[3]
    lower_index, lower_offsets, lower_values = tables[1], tables[2], tables[3]
    # one input code point of n >= 2 bytes yields at most 2 lower-cased code points,
    # each folding to at most 5 ASCII bytes or encoding to at most 4: <= 5 bytes per byte
    out = _grow_u8(out, q + 5 * (te - ts) + 1)
    tok_start = _grow_i64(tok_start, ntok + 1)
    tok_end = _grow_i64(tok_end, ntok + 1)
    tok_start[ntok] = q
    p = ts
    while p < te:
        b0 = data[p]
        if b0 < 0x80:
            if lower and 65 <= b0 <= 90:
                b0 += 32
            out[q] = b0
            q += 1
            p += 1
            continue
        cp, p = decode(data, p, te)
        if lower and lower_index[cp] >= 0:
            e = lower_index[cp]
            for j in range(lower_offsets[e], lower_offsets[e + 1]):
                q = _emit_folded(lower_values[j], fold, tables, out, q)
        else:
            q = _emit_folded(cp, fold, tables, out, q)
    tok_end[ntok] = q
    out[q] = SEPARATOR
    return out, q + 1, tok_start, tok_end, ntok + 1


@njit(**JIT, inline="always")
def _is_ascii_space(b):
    return b == 0x20 or b == 0x09 or b == 0x0A or b == 0x0C or b == 0x0D


@njit(**JIT)
def tokenize_doc(data, s, e, cfg, tables, out, tok_start, tok_end, cpos):
    """Tokens of ``data[s:e]``: returns ``(ntok, out, tok_start, tok_end, cpos)``.

    Token ``t`` is ``out[tok_start[t]:tok_end[t]]``; ``cpos`` is scratch for n-grams.
    """
    kind = cfg[0]
    alnum = tables[0]
    q = 0
    ntok = 0
    if kind == RAW:
        out, q, tok_start, tok_end, ntok = _push(data, s, e, cfg, tables, out, q, tok_start, tok_end, ntok)
    elif kind == NGRAM:
        cpos = _grow_i64(cpos, e - s + 1)
        nchars = 0
        p = s
        while p < e:
            cpos[nchars] = p
            nchars += 1
            _, p = decode(data, p, e)
        cpos[nchars] = e
        lo = cfg[4]
        hi = cfg[5]
        starts = 1 if cfg[6] else nchars
        for i in range(min(starts, nchars)):
            for n in range(lo, hi + 1):
                if i + n > nchars:
                    break
                out, q, tok_start, tok_end, ntok = _push(data, cpos[i], cpos[i + n], cfg, tables, out, q,
                                                         tok_start, tok_end, ntok)
    else:
        ts = -1
        p = s
        while p < e:
            b0 = data[p]
            if kind == WHITESPACE:
                inside = not _is_ascii_space(b0)
                nxt = p + 1
            elif b0 < 0x80:
                inside = alnum[b0] != 0
                nxt = p + 1
            else:
                cp, nxt = decode(data, p, e)
                inside = alnum[cp] != 0
            if inside:
                if ts < 0:
                    ts = p
            elif ts >= 0:
                out, q, tok_start, tok_end, ntok = _push(data, ts, p, cfg, tables, out, q,
                                                         tok_start, tok_end, ntok)
                ts = -1
            p = nxt
        if ts >= 0:
            out, q, tok_start, tok_end, ntok = _push(data, ts, e, cfg, tables, out, q, tok_start, tok_end, ntok)
    return ntok, out, tok_start, tok_end, cpos


@njit(**JIT)
def new_buffers():
    """Initial scratch buffers for :func:`tokenize_doc` (they grow as needed)."""
    return (np.empty(4096, dtype=np.uint8), np.empty(512, dtype=np.int64),
            np.empty(512, dtype=np.int64), np.empty(512, dtype=np.int64))
