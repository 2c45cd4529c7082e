"""Signatures of rows whose tokens map through a vocabulary, in one pass per row.

With stemming or stop-word removal after a base tokenizer the kernels reproduce, a row's
final tokens are its base tokens each replaced by the vocabulary's filtered form
(``kernels/vocab.py``: the table, and ``index/sign.py``: Lance's filter chain applied once
per distinct token). :func:`sign_vocab_range` tokenizes a row with the base tokenizer,
finds each token in the vocabulary, lays the kept forms out as ``tokenize_doc`` lays out
tokens (each followed by the shingle separator, so a shingle is one byte range) and signs
them with the same minima as :func:`.minhash.sign_range`: no token stream is written or
read back. It only reads the vocabulary, so threads run disjoint row ranges at once. A
row with a token the vocabulary lacks is left unsigned and marked ``pending``: the caller
adds the pending rows' tokens to the vocabulary and signs those rows again.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.minhash import minhash_doc
from lance_minhash_sql.kernels.tokenize import SEPARATOR, grow, new_buffers, row_tokens
from lance_minhash_sql.kernels.vocab import (INLINE, REC_FORM_LENGTH, REC_FORM_START, REC_FORM_WORD0, REC_FORM_WORD1,
                                             find, token_key)

_BYTE = np.uint64(0xFF)
_U1, _U2, _U3, _U4, _U5, _U6, _U7 = (np.uint64(i) for i in range(1, 8))
_U8, _U16, _U24, _U32, _U40, _U48, _U56 = (np.uint64(8 * i) for i in range(1, 8))


@njit(**JIT, inline="always")
def _write64(buf, p, w):
    """``w`` as 8 little-endian bytes at ``buf[p:p+8]`` (unsigned indices: LLVM merges the
    eight stores into one)."""
    q = np.uint64(p)
    buf[q] = np.uint8(w & _BYTE)
    buf[q + _U1] = np.uint8((w >> _U8) & _BYTE)
    buf[q + _U2] = np.uint8((w >> _U16) & _BYTE)
    buf[q + _U3] = np.uint8((w >> _U24) & _BYTE)
    buf[q + _U4] = np.uint8((w >> _U32) & _BYTE)
    buf[q + _U5] = np.uint8((w >> _U40) & _BYTE)
    buf[q + _U6] = np.uint8((w >> _U48) & _BYTE)
    buf[q + _U7] = np.uint8((w >> _U56) & _BYTE)


@njit(**JIT)
def sign_vocab_range(offsets, data, valid, valid_offset, cfg, tables, shingle, a, b, c,
                      slots, records, vocab, vocab_offsets, form_bytes, sigs, has, pending, lo, hi):
    """Sign rows ``lo:hi`` (base tokenizer ``cfg``) into ``sigs`` / ``has``, token ``i`` of
    the vocabulary (``slots`` / ``records`` / ``vocab`` / ``vocab_offsets``,
    :func:`.vocab.find`) becoming its filtered form (:data:`.vocab.RECORD`: its leading
    words in the record, the rest in ``form_bytes``), or dropped; a row with a token
    the vocabulary lacks gets ``pending[r] = True`` and no signature. NULL rows and rows
    without a kept token keep ``has[r]`` false."""
    out, tok_start, tok_end, raw = new_buffers()
    mout, mstart, mend, ids = new_buffers()
    xs = np.empty(1024, dtype=np.uint64)
    for r in range(lo, hi):
        ntok, out, tok_start, tok_end, raw = row_tokens(offsets, data, valid, valid_offset, r, cfg, tables,
                                                        out, tok_start, tok_end, raw)
        ids = grow(ids, ntok)
        size = 0
        kept = 0
        for t in range(ntok):
            s = tok_start[t]
            e = tok_end[t]
            h, w0, w1 = token_key(out, s, e)
            _, v = find(out, s, e, h, w0, w1, slots, records, vocab, vocab_offsets)
            if v < 0:
                pending[r] = True
                break
            ids[t] = v
            if records[v, REC_FORM_LENGTH]:
                size += np.int64(records[v, REC_FORM_LENGTH]) + INLINE  # room for whole words
                kept += 1
        if pending[r] or kept == 0:
            continue
        mout = grow(mout, size)
        mstart = grow(mstart, kept)
        mend = grow(mend, kept)
        xs = grow(xs, kept)
        q = 0
        m = 0
        for t in range(ntok):
            v = ids[t]
            mlen = np.int64(records[v, REC_FORM_LENGTH]) - 1
            if mlen >= 0:
                mstart[m] = q
                if mlen <= INLINE:  # whole words; the bytes past the form are overwritten next
                    _write64(mout, q, records[v, REC_FORM_WORD0])
                    if mlen > 8:
                        _write64(mout, q + 8, records[v, REC_FORM_WORD1])
                    q += mlen
                else:
                    ms = np.int64(records[v, REC_FORM_START])
                    for p in range(ms, ms + mlen):
                        mout[q] = form_bytes[p]
                        q += 1
                mend[m] = q
                mout[q] = SEPARATOR
                q += 1
                m += 1
        minhash_doc(mout, mstart, mend, kept, shingle, a, b, c, xs, sigs, r)
        has[r] = True
