"""Signatures and band keys of a few query texts with numpy, xxhash and Lance's tokenizer.

A search of one text needs one signature: tokens from ``lance.tokenize``
(``io/tokens.py``), each shingle hashed by the ``xxhash`` package, the ``k`` minima of
``a * x + b`` over the shingles in wrapping ``uint64`` numpy arithmetic, and the band keys
hashed by ``xxhash`` again, as docs/signatures.md defines them. The values are
bit-identical to the numba signer's (``index/sign.py``; the tests compare both with
Lance), but nothing here loads numba, whose import and compiler set-up cost a new
process about half a second even with every kernel cached. Long texts and large batches
go to the numba signer (:func:`fits`).
"""

from __future__ import annotations


import numpy as np
import xxhash

from lance_minhash_sql.runtime.cache import memoized
from lance_minhash_sql.core.lance_format import BAND_HASH_MASK, BAND_SHIFT, SEED, SHINGLE_SEPARATOR
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.io.tokens import lance_tokens
from lance_minhash_sql.kernels.minhash import coefficients

__all__ = ["MAX_QUERIES", "MAX_TEXT_CHARS", "fits", "sign_queries"]

MAX_QUERIES = 16  # more queries than this are signed (and searched) by the numba kernels
MAX_TEXT_CHARS = 1 << 16  # a longer text is signed by the numba kernels (a shingle costs ~0.3 us here)
_BLOCK = 2048  # shingles per block of the minima (a block holds 2048 x k uint64)
_SEP = bytes([SHINGLE_SEPARATOR])
_U48 = np.uint64(48)


def fits(texts: list[str]) -> bool:
    """True when these texts are few and short enough for this module."""
    return len(texts) <= MAX_QUERIES and all(len(t) <= MAX_TEXT_CHARS for t in texts)


@memoized(16)
def _options(params: MinHashParams) -> dict:
    return params.tokenizer.lance_tokenize_kwargs()


def _signature(tokens: list[bytes], shingle: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    w = min(shingle, len(tokens))
    x = np.fromiter((xxhash.xxh64_intdigest(_SEP.join(tokens[s:s + w]), SEED) for s in range(len(tokens) - w + 1)),
                    dtype=np.uint64)
    m = np.full(a.size, np.iinfo(np.uint64).max, dtype=np.uint64)
    for lo in range(0, x.size, _BLOCK):
        np.minimum(m, (x[lo:lo + _BLOCK, None] * a + b).min(axis=0), out=m)  # wraps mod 2**64
    return ((c * m) >> _U48).astype(np.uint16)


def band_keys(signature: np.ndarray, num_bands: int) -> np.ndarray:
    """``uint64[num_bands]``: ``(j << 56) | (XXH64(band j's values as little-endian u16) & (2**56 - 1))``."""
    raw = signature.astype("<u2").tobytes()
    width = len(raw) // num_bands
    return np.array([(j << BAND_SHIFT) | (xxhash.xxh64_intdigest(raw[j * width:(j + 1) * width], SEED) & BAND_HASH_MASK)
                     for j in range(num_bands)], dtype=np.uint64)


def sign_queries(params: MinHashParams, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(signatures uint16[n, k], has bool[n], band keys uint64[n, b])``; a text without
    tokens has ``has`` false (its rows are zero)."""
    k, nb = params.num_hashes, params.num_bands
    a, b, c = coefficients(k)
    sigs = np.zeros((len(texts), k), dtype=np.uint16)
    keys = np.zeros((len(texts), nb), dtype=np.uint64)
    has = np.zeros(len(texts), dtype=np.bool_)
    options = _options(params)
    for i, text in enumerate(texts):
        tokens = [t.encode("utf-8") for t in lance_tokens(text, options)]
        if not tokens:
            continue
        sigs[i] = _signature(tokens, params.shingle_size, a, b, c)
        keys[i] = band_keys(sigs[i], nb)
        has[i] = True
    return sigs, has, keys
