"""Lance's MinHash LSH format, written once: its constants and its similarity formula.

Every module that hashes, keys, pages or sizes band rows takes its numbers from here
(``params`` re-exports the public ones), and every similarity or distance computed from
equal signature values comes from :func:`similarity`. What they mean:
``docs/signatures.md`` (seed, separator, band keys, similarity) and
``docs/index-format.md`` (band rows, pages). Importing this module does not load numba.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "SEED",
    "SHINGLE_SEPARATOR",
    "SIGNATURE_VERSION",
    "INDEX_VERSION",
    "MAX_NUM_HASHES",
    "MAX_NUM_BANDS",
    "BAND_SHIFT",
    "BAND_HASH_MASK",
    "BAND_KEY_BYTES",
    "DOC_ID_BYTES",
    "BAND_ROW_BYTES",
    "DEFAULT_PAGE_ROWS",
    "page_ends",
    "similarity",
    "min_matches",
]

# XXH64 seed of the shingle hashes and of the band keys, and the SplitMix64 seed of the
# signature coefficients.
SEED = 42
# Byte written after every token, so a shingle of w tokens is one contiguous byte range.
SHINGLE_SEPARATOR = 0x1F
MAX_NUM_HASHES = 4096  # Lance's limit on a signature's length
SIGNATURE_VERSION = 0  # the signature algorithm (docs/signatures.md); readers refuse others
INDEX_VERSION = 0  # minhash_lsh_index_version of the segment files; readers refuse others
# A band key is (band id << 56) | (XXH64 of the band's values & (2**56 - 1)): the band id
# is the key's top byte, so there are at most 256 bands.
BAND_SHIFT = 56
BAND_HASH_MASK = (1 << BAND_SHIFT) - 1
MAX_NUM_BANDS = 1 << (64 - BAND_SHIFT)
# One row of bands.lance: a u64 band key and a u32 doc id.
BAND_KEY_BYTES = 8
DOC_ID_BYTES = 4
BAND_ROW_BYTES = BAND_KEY_BYTES + DOC_ID_BYTES
# Band rows per page of the page table (Lance writes 4096).
DEFAULT_PAGE_ROWS = 4096


def page_ends(first_row: int, n: int, page_rows: int) -> np.ndarray:
    """Positions, within ``n`` sorted band rows that start at global row ``first_row``,
    of the rows that end a page: page ``p`` ends at global row ``(p + 1) * page_rows - 1``.
    The page table holds the band key at each page's last row; a last, partial page ends
    at the last row.

    >>> page_ends(0, 10, 4).tolist(), page_ends(6, 10, 4).tolist()
    ([3, 7], [1, 5, 9])
    """
    return np.arange(page_rows - 1 - first_row % page_rows, n, page_rows)


def similarity(eq, k):
    """Lance's estimated Jaccard of two signatures with ``eq`` equal values of ``k``:
    ``float32(eq) / float32(k)``, in float32 as Lance computes it (Lance's ``_distance``
    is ``float32(1)`` minus this). For Python scalars and NumPy arrays; numba kernels
    call its compiled twin, :func:`lance_minhash_sql.kernels.similarity.lance_similarity_jit`.

    >>> float(similarity(96, 128)), similarity(np.array([1, 2]), 3).dtype
    (0.75, dtype('float32'))
    """
    return np.float32(eq) / np.float32(k)


def min_matches(threshold: float, num_hashes: int) -> int:
    """Smallest ``eq`` with ``float64(float32(eq) / float32(k)) >= threshold`` (``k + 1``
    if none): the verification rule in integers.

    >>> min_matches(0.8, 128), min_matches(1.0, 128)
    (103, 128)
    """
    for eq in range(num_hashes + 1):
        if float(similarity(eq, num_hashes)) >= threshold:
            return eq
    return num_hashes + 1
