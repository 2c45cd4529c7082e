"""Signing with numpy, without numba: the second signature engine, beside the kernels'
(``index/sign.py``), and the rule that picks it.

Loading numba costs a new process about a third of a second (its import, its runtime,
the kernels' cache loads) even with every kernel cached: more than signing a few
thousand rows takes. So while numba is not loaded, a few queries (``query/query_sign.py``)
and a small build's batches (``indexer/builder.py``) are signed here:

* tokens: Lance's own tokenizer, ``lance.tokenize``, under the index's options
  (``io/tokens.py``), for every tokenizer;
* each shingle (``shingle_size`` consecutive tokens joined by
  ``core/lance_format.py: SHINGLE_SEPARATOR``, or all of a row's tokens when it has fewer)
  hashed by XXH64 in whole-array numpy arithmetic (``kernels/xxh64_arrays.py``; a few
  shingles by the ``xxhash`` package);
* a row's ``k`` minima of ``a * x + b`` over its shingles (wrapping ``uint64``), each reduced
  to its top 16 bits by ``c``: the signature (docs/signatures.md);
* band keys: ``(j << 56) | (XXH64(band j's values as little-endian u16) & (2**56 - 1))``.

The values are bit-identical to the kernels' (``tests/test_numpy_sign.py`` signs the same
rows with both, and both are checked against Lance). Which engine signs is decided by
:func:`numpy_pays`, a ski rental over :data:`NUMPY_SECONDS`: numpy while the seconds this
process has spent on numpy instead of loading numba, plus the work at hand, stay below
``core/tuning.py: KERNEL_LOAD_SECONDS``; the kernels once numba is loaded anyway.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.lance_format import BAND_HASH_MASK, BAND_SHIFT, SEED, SHINGLE_SEPARATOR
from lance_minhash_sql.core.tuning import (FEW_RANGES, KERNEL_LOAD_SECONDS, NUMPY_BAND_KEY_SECONDS,
                                          NUMPY_SIGN_SECONDS_PER_BYTE, SHINGLE_BLOCK, whole_read_pays)
from lance_minhash_sql.io.arrow import as_string_array, string_buffers
from lance_minhash_sql.io.tokens import lance_tokens
from lance_minhash_sql.kernels import tokenize
from lance_minhash_sql.kernels.config import numba_loaded
from lance_minhash_sql.kernels.xxh64_arrays import xxh64_ranges
from lance_minhash_sql.runtime.cache import StateAccount

__all__ = ["NUMPY_SECONDS", "numpy_pays", "text_seconds", "band_key_seconds", "sign_numpy", "band_keys_numpy"]

# the ski rental's account: CPU seconds this process spent answering with numpy (signing and
# the search's numpy engine, query/engine.py: each on its calling thread, timed by
# time.thread_time, so a loaded machine's waits do not count) while numba was not loaded
NUMPY_SECONDS = StateAccount("seconds spent on numpy instead of loading numba")

_U48 = np.uint64(48)


def numpy_pays(estimate: float) -> bool:
    """True when work estimated at ``estimate`` seconds of numpy is to take numpy: numba is
    not loaded, and the account plus the estimate stay below the price of loading it."""
    return not numba_loaded() and not whole_read_pays(NUMPY_SECONDS.value, estimate, KERNEL_LOAD_SECONDS)


def text_seconds(texts: pa.Array) -> float:
    """Estimated seconds of :func:`sign_numpy` over ``texts`` (by their bytes)."""
    return texts.nbytes * NUMPY_SIGN_SECONDS_PER_BYTE


def band_key_seconds(rows: int, num_bands: int) -> float:
    """Estimated seconds of :func:`band_keys_numpy` over ``rows`` signatures."""
    return rows * num_bands * NUMPY_BAND_KEY_SECONDS


def sign_numpy(signer, texts) -> tuple[np.ndarray, np.ndarray]:
    """``(signatures uint16[n, k], has bool[n])`` of ``texts`` (an Arrow string array, or a
    list of ``str`` or None) with the parameters, coefficients and tokenizer options of
    ``signer`` (an ``index/sign.py`` Signer); a NULL text or one without tokens has ``has``
    false and a zero row."""
    params = signer.params
    texts = as_string_array(texts)
    joined, at, lengths, counts = _tokens(signer, texts)
    sigs = np.zeros((len(texts), params.num_hashes), dtype=np.uint16)
    has = counts > 0
    if has.any():
        x, firsts = _shingle_hashes(joined, at, lengths, counts[has], params.shingle_size)
        sigs[has] = _minima(x, firsts, signer.a, signer.b, signer.c)
    return sigs, has


def _ascii_route(signer) -> bool:
    """Whether rows of ASCII text are tokenized here (:func:`_ascii_tokens`): the ``simple``
    tokenizer without stemming or stop words, whose tokens on ASCII text are the runs of
    ASCII letters and digits."""
    return signer.cfg[0] == tokenize.SIMPLE and not (signer.per_token or signer.routed)


def _byte_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per byte: whether it is an ASCII letter or digit, and the byte lower-cased."""
    byte = np.arange(256)
    upper = (byte >= ord("A")) & (byte <= ord("Z"))
    alnum = upper | ((byte >= ord("a")) & (byte <= ord("z"))) | ((byte >= ord("0")) & (byte <= ord("9")))
    return readonly(alnum), readonly((byte + 32 * upper).astype(np.uint8))


_ALNUM, _LOWER = _byte_tables()


def _tokens(signer, texts: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(joined uint8, at, lengths, counts[n])``: every row's final tokens in row order, token
    ``t`` at ``joined[at[t]:at[t] + lengths[t]]`` and followed by a separator byte
    (``SHINGLE_SEPARATOR``), a row's tokens one after the other, so that a shingle is one
    contiguous range of ``joined``. Rows of ASCII text under :func:`_ascii_route` are cut
    here, in whole-array operations; the others by Lance's tokenizer, a row at a time."""
    n = len(texts)
    valid = ~np.asarray(texts.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_) if texts.null_count else \
        np.ones(n, dtype=np.bool_)
    parts = []  # (joined, at, lengths, row of each token)
    lance_rows = np.flatnonzero(valid)
    if _ascii_route(signer) and n:
        buf = string_buffers(texts)
        base = int(buf.offsets[0])
        data = np.asarray(buf.data[base:int(buf.offsets[-1])])
        offsets = np.asarray(buf.offsets) - base
        ascii_rows = valid.copy()
        wide = np.flatnonzero(data >= 128)
        if wide.size:
            ascii_rows[np.searchsorted(offsets, wide, side="right") - 1] = False  # not np.unique: it imports numpy.ma
        parts.append(_ascii_tokens(data, offsets, ascii_rows, signer.cfg[1], signer.cfg[2]))
        lance_rows = np.flatnonzero(valid & ~ascii_rows)
    if lance_rows.size:
        parts.append(_lance_tokens(texts, lance_rows, signer.lance_options))
    if not parts:
        return np.empty(0, np.uint8), np.empty(0, np.int64), np.empty(0, np.int64), np.zeros(n, np.int64)
    if len(parts) == 1:
        joined, at, lengths, rows = parts[0]
    else:
        (j0, a0, l0, r0), (j1, a1, l1, r1) = parts
        joined = np.concatenate([j0, j1])
        rows = np.concatenate([r0, r1])
        order = np.argsort(rows, kind="stable")  # a row's tokens all come from one part, in order
        at = np.concatenate([a0, a1 + j0.size])[order]
        lengths = np.concatenate([l0, l1])[order]
        rows = rows[order]
    return joined, at, lengths, np.bincount(rows, minlength=n).astype(np.int64)


def _with_separators(tokens: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(joined, at)``: the bytes of consecutive tokens (``tokens``, end to end, of
    ``lengths``) with a separator after each, and where each starts."""
    at = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1] + 1, out=at[1:])
    joined = np.full(tokens.size + lengths.size, SHINGLE_SEPARATOR, dtype=np.uint8)
    keep = np.ones(joined.size, dtype=np.bool_)
    keep[at + lengths] = False
    joined[keep] = tokens
    return joined, at


def _ascii_tokens(data: np.ndarray, offsets: np.ndarray, rows: np.ndarray, max_len: int, lower: bool):
    """The ``simple`` tokenizer on the rows ``rows`` (bool, all ASCII text) of ``(offsets,
    data)``: runs of ASCII letters and digits, those of ``max_len`` bytes or more dropped
    (``-1``: no limit), lower-cased when ``lower`` (ASCII folding changes no ASCII byte)."""
    alnum = _ALNUM[data]
    for r in np.flatnonzero(~rows):  # the other rows have no token here
        alnum[offsets[r]:offsets[r + 1]] = False
    sizes = np.diff(offsets)
    edge = np.empty(data.size + 1, dtype=np.bool_)  # a token starts or ends at j (between j-1 and j)
    edge[0] = edge[-1] = True
    np.not_equal(alnum[1:], alnum[:-1], out=edge[1:-1])
    edge[offsets[:-1][sizes > 0]] = True  # a token cannot run across rows
    cuts = np.flatnonzero(edge)
    inside = alnum[cuts[:-1]]  # the runs between consecutive cuts that are letters and digits
    starts, ends = cuts[:-1][inside], cuts[1:][inside]
    lengths = ends - starts
    if max_len >= 0:
        keep = lengths < max_len
        starts, lengths = starts[keep], lengths[keep]
    marks = np.zeros(data.size + 1, dtype=np.int8)
    marks[starts] = 1
    marks[starts + lengths] -= 1
    kept = np.cumsum(marks[:-1], dtype=np.int8).view(np.bool_)
    tokens = (_LOWER[data[kept]] if lower else data[kept])
    joined, at = _with_separators(tokens, lengths)
    return joined, at, lengths, np.searchsorted(offsets, starts, side="right") - 1


def _lance_tokens(texts: pa.Array, rows: np.ndarray, options: dict):
    """Lance's tokens of the rows ``rows`` of ``texts`` (``io/tokens.py``)."""
    words: list[str] = []
    counts = np.zeros(rows.size, dtype=np.int64)
    # row numbers from a list: pyarrow converting a numpy array imports numpy.ma (~0.1 s)
    for i, text in enumerate(texts.take(pa.array(rows.tolist(), pa.int64())).to_pylist()):
        row = lance_tokens(text, options)
        counts[i] = len(row)
        words += row
    tokens = pa.array(words, pa.large_string())
    offsets = np.frombuffer(tokens.buffers()[1], dtype=np.int64, count=len(words) + 1)
    data = np.frombuffer(tokens.buffers()[2], dtype=np.uint8, count=int(offsets[-1])) if offsets[-1] else \
        np.empty(0, np.uint8)
    lengths = np.diff(offsets)
    joined, at = _with_separators(data, lengths)
    return joined, at, lengths, np.repeat(rows, counts)


def _shingle_hashes(joined: np.ndarray, at: np.ndarray, lengths: np.ndarray, counts: np.ndarray,
                    shingle: int) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes uint64, first shingle of each row)`` of the shingles of rows whose tokens
    are as :func:`_tokens` lays them out (row ``r`` has ``counts[r] > 0`` of them)."""
    width = np.minimum(counts, shingle)
    per_row = counts - width + 1
    firsts = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(per_row[:-1], out=firsts[1:])
    # shingle i of row r starts at token token_base[r] + i - firsts[r]
    shift = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=shift[1:])
    shift -= firsts
    first_token = np.repeat(shift, per_row)
    first_token += np.arange(first_token.size)
    last_token = first_token + np.repeat(width - 1, per_row)
    begin = at[first_token]
    x = _xxh64(joined, begin, at[last_token] + lengths[last_token] - begin)
    return x, firsts


def _minima(x: np.ndarray, firsts: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``uint16[rows, k]``: per row (its shingles from ``firsts[r]``), the ``k`` minima of
    ``a * x + b`` reduced to their top 16 bits by ``c``. Blocks of :data:`SHINGLE_BLOCK`
    shingles, laid out hash by shingle so that each row's part of a block is reduced along
    contiguous memory."""
    m = np.full((a.size, firsts.size), np.iinfo(np.uint64).max, dtype=np.uint64)
    block = np.empty((a.size, min(SHINGLE_BLOCK, x.size)), dtype=np.uint64)
    a, b = a[:, None], b[:, None]
    for lo in range(0, x.size, SHINGLE_BLOCK):
        hi = min(lo + SHINGLE_BLOCK, x.size)
        # the rows present in this block and where each starts within it
        r0 = int(np.searchsorted(firsts, lo, side="right")) - 1
        r1 = int(np.searchsorted(firsts, hi, side="left"))
        cuts = np.maximum(firsts[r0:r1], lo) - lo
        values = block[:, :hi - lo]
        np.multiply(a, x[None, lo:hi], out=values)  # wraps mod 2**64
        np.add(values, b, out=values)
        np.minimum(m[:, r0:r1], np.minimum.reduceat(values, cuts, axis=1), out=m[:, r0:r1])
    return ((c[:, None] * m) >> _U48).astype(np.uint16).T


def _xxh64(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``uint64[n]``: XXH64 (``SEED``) of the ranges ``(starts, lengths)`` of ``data``: in
    whole-array steps (``kernels/xxh64_arrays.py``), or, fewer than
    :data:`~lance_minhash_sql.core.tuning.FEW_RANGES` of them (a query's shingles, its band
    keys), by the ``xxhash`` package one range at a time, which costs less than the
    steps' fixed cost per numpy call."""
    if len(starts) >= FEW_RANGES:
        return xxh64_ranges(data, starts, lengths, SEED)
    raw = data.tobytes()
    return np.array([xxhash.xxh64_intdigest(raw[s:s + n], SEED) for s, n in zip(starts.tolist(), lengths.tolist())],
                    dtype=np.uint64)


def band_keys_numpy(signatures: np.ndarray, num_bands: int) -> np.ndarray:
    """``uint64[n, num_bands]`` band keys of a signature matrix (as ``index/sign.py:
    Signer.band_keys``)."""
    sig = np.ascontiguousarray(signatures, dtype="<u2")
    n, k = sig.shape
    width = 2 * k // num_bands
    starts = (np.arange(n, dtype=np.int64)[:, None] * (2 * k) + np.arange(num_bands) * width).reshape(-1)
    h = _xxh64(sig.view(np.uint8).reshape(-1), starts, np.full(starts.size, width, np.int64))
    bands = np.arange(num_bands, dtype=np.uint64) << np.uint64(BAND_SHIFT)
    return (h.reshape(n, num_bands) & np.uint64(BAND_HASH_MASK)) | bands
