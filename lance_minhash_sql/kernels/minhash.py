"""MinHash signatures (``signature_version`` 0) and shingle sets over Arrow string buffers.

For shingle hashes ``x = XXH64(shingle, seed=42)`` (:data:`..core.lance_format.SEED`) and per-hash coefficients
``a[i], b[i], c[i]``::

    m[i]   = min over shingles of (a[i] * x + b[i]) mod 2**64     (unsigned)
    sig[i] = ((c[i] * m[i]) mod 2**64) >> 48                        (u16)

Coefficients come from SplitMix64 seeded with 42: the ``k`` pairs ``(a, b)`` interleaved
first (``a`` forced odd), then the ``k`` values ``c`` (forced odd).

Rows are read straight from the Arrow buffers: ``offsets`` (int64, already
sliced to the array's ``offset``), ``data`` (uint8), and the validity bitmap ``valid``
with its bit offset (empty array: no NULLs). The parallel kernels split rows into
chunks; each chunk owns its scratch buffers. Signing runs :func:`sign_range` over
disjoint row ranges, on the calling thread or on several (it releases the GIL).

Where a core's time goes, stage by stage against each stage's limit, is measured by
``benchmarks/roofline.py`` (``docs/performance.md``). The minima run over blocks of 8
hashes with 8 running minima in registers (one pass over the shingles per block, no
reduction): 0.47 -> 0.27 CPU s per 200k rows on the minima alone against a reduction over
the shingles per hash, and updating all ``k`` minima per shingle (a load and a store of
each minimum per shingle) was slower than either. 512-bit vectors (LLVM's
``-prefer-256-bit`` off) measured no faster.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from lance_minhash_sql.core import lance_format
from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.order import sort_values
from lance_minhash_sql.kernels.tokenize import grow, new_buffers, tokenize_row
from lance_minhash_sql.kernels.xxh64 import xxh64

SEED = np.uint64(lance_format.SEED)
_MASK64 = (1 << 64) - 1
_U48 = np.uint64(48)


def _splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & _MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return state, z ^ (z >> 31)


@lru_cache(maxsize=64)
def coefficients(num_hashes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, c)``, each ``uint64[num_hashes]``, read-only."""
    state = lance_format.SEED
    a, b, c = [], [], []
    for _ in range(num_hashes):
        state, x = _splitmix64(state)
        a.append(x | 1)
        state, x = _splitmix64(state)
        b.append(x)
    for _ in range(num_hashes):
        state, x = _splitmix64(state)
        c.append(x | 1)
    return tuple(readonly(np.array(v, dtype=np.uint64)) for v in (a, b, c))


@njit(**JIT, inline="always")
def is_valid(valid, valid_offset, row):
    if valid.size == 0:
        return True
    i = valid_offset + row
    return (valid[i >> 3] >> (i & 7)) & 1 == 1


@njit(**JIT, inline="always")
def _shingle_hashes_into(out, tok_start, tok_end, ntok, shingle, dest, pos):
    w = min(shingle, ntok)
    for s in range(ntok - w + 1):
        st = tok_start[s]
        dest[pos] = xxh64(out, st, tok_end[s + w - 1] - st, SEED)
        pos += 1
    return pos


@njit(**JIT, inline="always")
def minhash_doc(out, tok_start, tok_end, ntok, shingle, a, b, c, xs, sig):
    """Signature of one document's tokens into ``sig``; ``xs`` is scratch (>= ntok).

    Hashes are taken 8 at a time: eight running minima in registers, each shingle hash
    loaded once per block and multiplied by the eight coefficients (LLVM packs the eight
    lanes into 256-bit ``vpmullq`` / ``vpminuq``), with no reduction at the end; the
    ``k % 8`` last hashes take the plain loop."""
    n = _shingle_hashes_into(out, tok_start, tok_end, ntok, shingle, xs, np.int64(0))
    k = a.size
    top = k - k % 8
    for i in range(0, top, 8):
        a0, a1, a2, a3, a4, a5, a6, a7 = a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]
        b0, b1, b2, b3, b4, b5, b6, b7 = b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]
        m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = np.uint64(0xFFFFFFFFFFFFFFFF)
        for s in range(n):
            x = xs[s]
            m0 = min(m0, a0 * x + b0)
            m1 = min(m1, a1 * x + b1)
            m2 = min(m2, a2 * x + b2)
            m3 = min(m3, a3 * x + b3)
            m4 = min(m4, a4 * x + b4)
            m5 = min(m5, a5 * x + b5)
            m6 = min(m6, a6 * x + b6)
            m7 = min(m7, a7 * x + b7)
        sig[i] = np.uint16((c[i] * m0) >> _U48)
        sig[i + 1] = np.uint16((c[i + 1] * m1) >> _U48)
        sig[i + 2] = np.uint16((c[i + 2] * m2) >> _U48)
        sig[i + 3] = np.uint16((c[i + 3] * m3) >> _U48)
        sig[i + 4] = np.uint16((c[i + 4] * m4) >> _U48)
        sig[i + 5] = np.uint16((c[i + 5] * m5) >> _U48)
        sig[i + 6] = np.uint16((c[i + 6] * m6) >> _U48)
        sig[i + 7] = np.uint16((c[i + 7] * m7) >> _U48)
    for i in range(top, k):
        ai = a[i]
        bi = b[i]
        m = np.uint64(0xFFFFFFFFFFFFFFFF)
        for s in range(n):
            v = ai * xs[s] + bi
            if v < m:
                m = v
        sig[i] = np.uint16((c[i] * m) >> _U48)


@njit(**JIT)
def sign_range(offsets, data, valid, valid_offset, cfg, tables, shingle, a, b, c, sigs, has, lo, hi):
    """Sign rows ``lo:hi`` into ``sigs`` / ``has`` with one set of scratch buffers.

    ``has[i]`` stays false for NULL rows and rows without tokens (their signature row is
    left as it is). Callers run disjoint ranges on several threads (the kernel releases
    the GIL), rather than a ``parallel=True`` twin: one compiled kernel serves both."""
    out, tok_start, tok_end, raw = new_buffers()
    xs = np.empty(1024, dtype=np.uint64)
    for r in range(lo, hi):
        if not is_valid(valid, valid_offset, r):
            continue
        ntok, out, tok_start, tok_end, raw = tokenize_row(
            data, offsets[r], offsets[r + 1], cfg, tables, out, tok_start, tok_end, raw)
        if ntok > 0:
            xs = grow(xs, ntok)
            minhash_doc(out, tok_start, tok_end, ntok, shingle, a, b, c, xs, sigs[r])
            has[r] = True


def sign_rows_serial(offsets, data, valid, valid_offset, cfg, tables, shingle, a, b, c):
    """Signatures of every row on the calling thread: ``(sigs uint16[n, k], has bool[n])``;
    ``has[i]`` is false for NULL rows and rows without tokens (their signature row is 0).

    Plain Python around :func:`sign_range`: a jitted wrapper would compile the whole
    signing code a second time on a fresh install (seconds) to save microseconds."""
    n = offsets.size - 1
    sigs = np.zeros((n, a.size), dtype=np.uint16)
    has = np.zeros(n, dtype=np.bool_)
    sign_range(offsets, data, valid, valid_offset, cfg, tables, shingle, a, b, c, sigs, has, 0, n)
    return sigs, has


@njit(**JIT)
def shingle_sets_range(offsets, data, valid, valid_offset, cfg, tables, shingle, lo, hi):
    """Sorted distinct shingle hashes of rows ``lo:hi``: ``(sizes int64[hi - lo], hashes)``,
    row ``r``'s set being the ``sizes[r - lo]`` hashes after those of the rows before it
    (a NULL row or a row without tokens has size 0).

    One pass, one serial kernel: each row is tokenized once, its hashes sorted and
    deduplicated in scratch and appended to a buffer that doubles when full. Callers run
    disjoint ranges on several threads and concatenate (``Signer.shingle_sets``)."""
    out, tok_start, tok_end, raw = new_buffers()
    sizes = np.zeros(hi - lo, dtype=np.int64)
    hashes = np.empty(1024, dtype=np.uint64)
    xs = np.empty(1024, dtype=np.uint64)
    used = 0
    for r in range(lo, hi):
        if not is_valid(valid, valid_offset, r):
            continue
        ntok, out, tok_start, tok_end, raw = tokenize_row(
            data, offsets[r], offsets[r + 1], cfg, tables, out, tok_start, tok_end, raw)
        if ntok == 0:
            continue
        if xs.size < ntok:
            xs = np.empty(2 * ntok, dtype=np.uint64)
        n = _shingle_hashes_into(out, tok_start, tok_end, ntok, shingle, xs, np.int64(0))
        seg = xs[:n]
        sort_values(seg)
        if used + n > hashes.size:
            grown = np.empty(max(2 * hashes.size, used + n), dtype=np.uint64)
            for j in range(used):  # a loop: slice assignment compiles numba's broadcasting code
                grown[j] = hashes[j]
            hashes = grown
        m = 0
        for j in range(n):
            if j == 0 or seg[j] != seg[j - 1]:
                hashes[used + m] = seg[j]
                m += 1
        sizes[r - lo] = m
        used += m
    return sizes, hashes[:used]
