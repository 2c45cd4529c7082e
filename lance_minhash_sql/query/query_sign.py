"""Signatures and band keys of query texts: the one place a search signs its queries.

:func:`sign_texts` signs with one of two engines, side by side here. The kernels' engine
is the index's own signer (``index/sign.py``: the numba tokenizer, XXH64 and minima,
the same code that built the segments). The numpy engine (:func:`sign_queries`) is for a
few short texts (:func:`fits`) in a process that has not loaded numba:

A search of one text needs one signature: tokens from ``lance.tokenize``
(``io/tokens.py``), each shingle hashed by the ``xxhash`` package, the ``k`` minima of
``a * x + b`` over the shingles in wrapping ``uint64`` numpy arithmetic, and the band keys
hashed by ``xxhash`` again, as docs/signatures.md defines them. The values are
bit-identical to the numba signer's (``index/sign.py``; the tests compare both with
Lance), but it loads no numba, whose import and compiler set-up cost a new process about
half a second even with every kernel cached. Which engine signs is the search's engine
policy (``query/engine.py``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import xxhash

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.lance_format import BAND_HASH_MASK, BAND_SHIFT, SEED, SHINGLE_SEPARATOR
from lance_minhash_sql.core.tuning import MAX_QUERIES, MAX_TEXT_CHARS, SHINGLE_BLOCK
from lance_minhash_sql.index.sign import Signer
from lance_minhash_sql.io.tokens import lance_tokens

__all__ = ["MAX_QUERIES", "MAX_TEXT_CHARS", "SignedQueries", "fits", "sign_texts", "sign_queries"]

_SEP = bytes([SHINGLE_SEPARATOR])
_U48 = np.uint64(48)


def fits(texts: list[str]) -> bool:
    """True when these texts are few and short enough for this module."""
    return len(texts) <= MAX_QUERIES and all(len(t) <= MAX_TEXT_CHARS for t in texts)


class SignedQueries(NamedTuple):
    """What the top-k engines read of the queries (:func:`sign_texts`)."""

    has: np.ndarray  # bool[n]: the query has tokens (a query without tokens has no candidates)
    active: np.ndarray  # int64: the positions of the queries with tokens
    sigs: np.ndarray  # uint16[active.size, k], read-only: their signatures
    keys: np.ndarray  # uint64[active.size, b], read-only: their band keys


def sign_texts(signer: Signer, texts: pa.Array, few: list[str] | None) -> SignedQueries:
    """The query texts signed with the index's signer: by numpy when ``few`` (the texts as
    a list) is given, else by the kernels; only the queries with tokens are handed on."""
    sigs, has, keys = sign_queries(signer, few) if few is not None else signer.sign_with_keys(texts)
    active = np.flatnonzero(has)
    if active.size < has.size:
        sigs, keys = sigs[active], keys[active]
    return SignedQueries(has, active, readonly(sigs), readonly(keys))


def _signature(tokens: list[bytes], shingle: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``uint16[k]``: each shingle of ``shingle`` tokens hashed by XXH64, then the ``k``
    minima of ``a * x + b``, each reduced to its top 16 bits by ``c``."""
    w = min(shingle, len(tokens))
    x = np.fromiter((xxhash.xxh64_intdigest(_SEP.join(tokens[s:s + w]), SEED) for s in range(len(tokens) - w + 1)),
                    dtype=np.uint64)
    m = np.full(a.size, np.iinfo(np.uint64).max, dtype=np.uint64)
    for lo in range(0, x.size, SHINGLE_BLOCK):
        np.minimum(m, (x[lo:lo + SHINGLE_BLOCK, None] * a + b).min(axis=0), out=m)  # wraps mod 2**64
    return ((c * m) >> _U48).astype(np.uint16)


def _band_keys(signature: np.ndarray, num_bands: int) -> np.ndarray:
    """``uint64[num_bands]``: ``(j << 56) | (XXH64(band j's values as little-endian u16) & (2**56 - 1))``."""
    raw = signature.astype("<u2").tobytes()
    width = len(raw) // num_bands
    return np.array([(j << BAND_SHIFT) | (xxhash.xxh64_intdigest(raw[j * width:(j + 1) * width], SEED) & BAND_HASH_MASK)
                     for j in range(num_bands)], dtype=np.uint64)


def sign_queries(signer: Signer, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(signatures uint16[n, k], has bool[n], band keys uint64[n, b])`` of a few texts,
    with ``signer``'s parameters, coefficients and tokenizer options, without numba; a text
    without tokens has ``has`` false (its rows are zero)."""
    params = signer.params
    sigs = np.zeros((len(texts), params.num_hashes), dtype=np.uint16)
    keys = np.zeros((len(texts), params.num_bands), dtype=np.uint64)
    has = np.zeros(len(texts), dtype=np.bool_)
    for i, text in enumerate(texts):
        tokens = [t.encode("utf-8") for t in lance_tokens(text, signer.lance_options)]
        if not tokens:
            continue
        sigs[i] = _signature(tokens, params.shingle_size, signer.a, signer.b, signer.c)
        keys[i] = _band_keys(sigs[i], params.num_bands)
        has[i] = True
    return sigs, has, keys
