"""XXH64 of many byte ranges at once, in numpy array arithmetic: no numba.

The numpy twin of ``kernels/xxh64.py: xxh64`` for signing without the kernels
(``index/numpy_sign.py``), in whole-array operations (``uint64`` arrays wrap on
overflow, as XXH64 needs). Ranges of 32 bytes and more first go through the four-lane
stripes, all such ranges' stripe ``i`` at once; then every range's 8-byte lanes, its
4-byte lane and its last bytes, each step computed for every range and kept where the
remaining length takes it. ``tests/test_numpy_sign.py`` checks it against the ``xxhash``
package and the kernels on the same inputs.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.xxh64 import P1, P2, P3, P4, P5

__all__ = ["xxh64_ranges"]

_PAD = 8  # bytes after the data, so that an 8-byte read at any byte of the data stays inside


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * P2, 31) * P1


def _words(data: np.ndarray, dtype: str) -> np.ndarray:
    """The little-endian words starting at every byte of ``data`` (which ends in ``_PAD``
    spare bytes): a strided view, read by fancy indexing."""
    size = np.dtype(dtype).itemsize
    return np.ndarray(shape=(data.size - size + 1,), dtype=dtype, buffer=data, strides=(1,))


def xxh64_ranges(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, seed: int) -> np.ndarray:
    """``uint64[n]``: XXH64 with ``seed`` of ``data[starts[i]:starts[i] + lengths[i]]``
    (``data`` a uint8 array), for every ``i``."""
    buf = np.zeros(data.size + _PAD, dtype=np.uint8)
    buf[:data.size] = data
    w64, w32 = _words(buf, "<u8"), _words(buf, "<u4")
    p = np.asarray(starts, dtype=np.int64).copy()
    lengths = np.asarray(lengths, dtype=np.int64)
    end = p + lengths
    seed64 = np.uint64(seed)
    h = np.full(p.size, (int(seed) + int(P5)) % (1 << 64), dtype=np.uint64)
    longs = np.flatnonzero(lengths >= 32)
    if longs.size:
        h[longs] = _stripes(w64, p, end, longs, seed64)
    h += lengths.astype(np.uint64)
    left = end - p  # below 32 after the stripes
    # each step on every range, kept where the remaining length takes it: whole-array
    # operations without gathering the ranges that take it
    for _ in range(3):  # 8-byte lanes
        take = left >= 8
        if not take.any():
            break
        lane = _rotl(h ^ _round(np.zeros(p.size, np.uint64), w64[np.where(take, p, 0)]), 27) * P1 + P4
        np.copyto(h, lane, where=take)
        p += take * 8
        left -= take * 8
    take = left >= 4
    if take.any():
        lane = _rotl(h ^ (w32[np.where(take, p, 0)].astype(np.uint64) * P1), 23) * P2 + P3
        np.copyto(h, lane, where=take)
        p += take * 4
        left -= take * 4
    for _ in range(3):  # the last 0 to 3 bytes
        take = left >= 1
        if not take.any():
            break
        lane = _rotl(h ^ (buf[np.where(take, p, 0)].astype(np.uint64) * P5), 11) * P1
        np.copyto(h, lane, where=take)
        p += take
        left -= take
    h ^= h >> np.uint64(33)
    h *= P2
    h ^= h >> np.uint64(29)
    h *= P3
    h ^= h >> np.uint64(32)
    return h


def _stripes(w64: np.ndarray, p: np.ndarray, end: np.ndarray, rows: np.ndarray, seed: np.uint64) -> np.ndarray:
    """The stripe phase and its merge for the ranges ``rows`` (each 32 bytes or more);
    advances their ``p`` past the stripes."""
    s, p1, p2 = int(seed), int(P1), int(P2)  # Python integers: numpy scalars warn when they wrap
    v = [np.full(rows.size, x % (1 << 64), dtype=np.uint64) for x in (s + p1 + p2, s + p2, s, s - p1)]
    live = np.arange(rows.size)
    while True:
        live = live[end[rows[live]] - p[rows[live]] >= 32]
        if not live.size:
            break
        at = p[rows[live]]
        for j in range(4):
            v[j][live] = _round(v[j][live], w64[at + 8 * j])
        p[rows[live]] += 32
    h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
    zero = np.zeros(rows.size, np.uint64)
    for x in v:
        h = (h ^ _round(zero, x)) * P1 + P4
    return h
