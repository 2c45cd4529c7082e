"""UTF-8 one code point at a time, as Lance's tokenizer reads and writes it: the kernels
of :mod:`lance_minhash_sql.kernels.tokenize` and :mod:`lance_minhash_sql.kernels.code_tokens`."""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit

__all__ = ["decode", "encode"]


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
def encode(cp, out, q):
    """Code point ``cp`` written as UTF-8 at ``out[q]``; returns the position after it."""
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
