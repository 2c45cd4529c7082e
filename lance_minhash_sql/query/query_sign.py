"""Signatures and band keys of query texts: the one place a search signs its queries.

:func:`sign_texts` signs with one of two engines, side by side here. The kernels' engine
is the index's own signer (``index/sign.py``: the numba tokenizer, XXH64 and minima,
the same code that built the segments). The numpy engine (:func:`sign_queries`) is for a
few short texts (:func:`fits`) in a process that has not loaded numba:

A search of one text needs one signature, which the numpy signer (``index/numpy_sign.py``:
Lance's tokens, the shingles' XXH64, minima and band keys in numpy arithmetic, as
docs/signatures.md defines them) gives bit-identical to the numba signer's
(``index/sign.py``; the tests compare both with Lance), without loading numba, whose
import and kernel loads cost a new process about a third of a second even with every
kernel cached. Which engine signs is the search's engine policy (``query/engine.py``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.tuning import MAX_QUERIES, MAX_TEXT_CHARS
from lance_minhash_sql.index.numpy_sign import band_keys_numpy, sign_numpy
from lance_minhash_sql.index.sign import Signer

__all__ = ["MAX_QUERIES", "MAX_TEXT_CHARS", "SignedQueries", "fits", "sign_texts", "sign_queries"]

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


def sign_queries(signer: Signer, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(signatures uint16[n, k], has bool[n], band keys uint64[n, b])`` of a few texts,
    with ``signer``'s parameters, coefficients and tokenizer options, without numba
    (``index/numpy_sign.py``); a text without tokens has ``has`` false (its rows are zero)."""
    sigs, has = sign_numpy(signer, texts)
    keys = band_keys_numpy(sigs, signer.params.num_bands)
    keys[~has] = 0
    return sigs, has, keys
