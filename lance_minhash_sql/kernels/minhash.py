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
disjoint row ranges, on the calling thread or on several (it releases the GIL); with the
``simple`` tokenizer, :func:`sign_ascii_range` first, and :func:`sign_range` then only on
the rows it left (text with a non-ASCII byte, or a token too long to keep).

Where a core's time goes, stage by stage against each stage's limit, is measured by
``benchmarks/roofline.py`` (``docs/performance.md``). The minima are taken
:data:`LANES` hashes at a time (:func:`lane_minima`): the coefficients of the lanes and
their running minima are ``LANES``-wide vectors of LLVM's own IR, each shingle hash is
broadcast and multiplied into all lanes at once, so LLVM lowers the block to the widest
integer vectors the CPU has (on AVX-512, ``vpmullq`` / ``vpminuq`` on 512-bit registers),
with no vendor-specific flag and no reduction at the end. Where the CPU has no 64-bit
vector multiply (``kernels/cpu.py: has_wide_multiply`` false: AVX2, other
architectures) the block is written in 32-bit pieces, two multiplies a product, and
takes signed minima of values offset by ``2**63`` (still LLVM's own IR: :class:`_MinimaIR`).
Faster than eight running minima in scalars, which LLVM vectorized over four shingles at
a time and reduced per hash (``docs/performance.md``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from lance_minhash_sql.core import lance_format
from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.kernels.borrow import borrowed, keep_alive
from lance_minhash_sql.kernels.config import JIT, intrinsic, njit
from lance_minhash_sql.kernels.cpu import WIDE_MULTIPLY, has_vectors_256, has_wide_multiply, target_has
from lance_minhash_sql.kernels.order import new_hash_scratch, sort_hashes
from lance_minhash_sql.kernels.tokenize import ascii_buffers, ascii_row_tokens, grow, is_valid, new_buffers, row_tokens
from lance_minhash_sql.kernels.xxh64 import xxh64, xxh64_short, xxh64_short8

SEED = np.uint64(lance_format.SEED)
_MASK64 = (1 << 64) - 1
_U48 = np.uint64(48)
LANES = 16  # hashes whose minima one vector block keeps (16 measured faster than 32, 64 or 128)


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
def shingle_hashes_into(out, tok_start, tok_end, ntok, shingle, dest, pos):
    """XXH64 of each shingle's bytes in the token buffer ``out``, into ``dest[pos:]``:
    those of 8 to 31 bytes (nearly all) by :func:`..kernels.xxh64.xxh64_short8`, eight
    shingles at once, where the CPU has vectors of 64-bit lanes (``kernels/cpu.py:
    has_wide_multiply`` or ``has_vectors_256``), else one at a time by
    :func:`..kernels.xxh64.xxh64_short` in the loop itself; the others by a call of
    :func:`..kernels.xxh64.xxh64`."""
    w = min(shingle, ntok)
    count = ntok - w + 1
    if has_wide_multiply() or has_vectors_256():
        for s0 in range(0, count, 8):
            others = xxh64_short8(out, tok_start, tok_end, s0, w, min(8, count - s0), SEED, dest, pos + s0)
            if others != 0:
                for j in range(8):
                    if (others >> j) & 1:
                        st = tok_start[s0 + j]
                        dest[pos + s0 + j] = xxh64(out, st, tok_end[s0 + j + w - 1] - st, SEED)
        return pos + count
    for s in range(count):
        st = tok_start[s]
        n = tok_end[s + w - 1] - st
        if n >= 8 and n < 32:
            dest[pos] = xxh64_short(out, st, n, SEED)
        else:
            dest[pos] = xxh64(out, st, n, SEED)
        pos += 1
    return pos


class _MinimaIR:
    """LLVM IR of :func:`lane_minima`'s running minima on ``LANES``-lane vectors, from the
    lanes' coefficients ``a`` and ``b``: :attr:`start`, the minima before any shingle;
    :meth:`step`, the minima after one more shingle hash; :meth:`least`, the minima of
    ``a * x + b`` they stand for.

    Where the CPU multiplies 64-bit lanes (``wide``: ``kernels/cpu.py: WIDE_MULTIPLY``)
    the product is one ``mul`` and the minimum an unsigned one. Elsewhere (AVX2, other
    architectures) the product is taken in 32-bit pieces: ``lo(a) * lo(x)`` to 64 bits,
    plus the cross terms ``hi(a) * lo(x) + lo(a) * hi(x)``, needed only mod ``2**32``,
    both from one 32-bit multiply of ``x`` by ``a`` with its halves swapped (once, here):
    two multiplies where LLVM's own lowering of the 64-bit one takes three. And the
    minima are signed ones of ``a * x + b + 2**63`` (the offset folded into ``b``): the
    order of ``a * x + b`` as unsigned values, without flipping both sides of each
    compare where the CPU has no unsigned 64-bit min."""

    def __init__(self, builder, a, b, wide: bool):
        from llvmlite import ir

        self.ir, self.builder, self.wide = ir, builder, wide
        self.i64 = ir.IntType(64)
        self.vec = ir.VectorType(self.i64, LANES)
        self.v32 = ir.VectorType(ir.IntType(32), 2 * LANES)
        self.a, self.b = a, b
        if not wide:
            self.b = builder.xor(b, self.const(-(1 << 63)))
            self.a_lo = builder.and_(a, self.const(0xFFFFFFFF))
            self.a_swapped = builder.bitcast(builder.or_(builder.shl(a, self.const(32)),
                                                         builder.lshr(a, self.const(32))), self.v32)
        self.start = self.const(-1 if wide else (1 << 63) - 1)

    def const(self, c):
        return self.ir.Constant(self.vec, [self.ir.Constant(self.i64, c)] * LANES)

    def splat(self, x):
        ir, b = self.ir, self.builder
        one = b.insert_element(ir.Constant(self.vec, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
        return b.shuffle_vector(one, ir.Constant(self.vec, ir.Undefined),
                                ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))

    def step(self, x, m):
        """The minima ``m`` after the shingle hash ``x`` (an i64)."""
        b, xv = self.builder, self.splat(x)
        if self.wide:
            v = b.add(b.mul(self.a, xv), self.b)
            return b.select(b.icmp_unsigned("<", v, m), v, m)
        t = b.bitcast(b.mul(self.a_swapped, b.bitcast(xv, self.v32)), self.vec)  # hi(a) lo(x), lo(a) hi(x)
        cross = b.shl(b.add(t, b.lshr(t, self.const(32))), self.const(32))
        v = b.add(b.add(b.mul(self.a_lo, b.and_(xv, self.const(0xFFFFFFFF))), cross), self.b)
        return b.select(b.icmp_signed("<", v, m), v, m)

    def least(self, m):
        """The minima of ``a * x + b`` that ``m`` stands for."""
        return m if self.wide else self.builder.xor(m, self.const(-(1 << 63)))


@intrinsic
def lane_minima(typingctx, xs, n, a, b, c, i, sigs, r):
    """``sigs[r, i + j] = (c[i + j] * m[j]) >> 48`` for ``j < LANES``, where ``m[j]`` is the
    minimum over ``s < n`` of ``a[i + j] * xs[s] + b[i + j]`` (all u64, wrapping): one
    block of :func:`minhash_doc`, written as LLVM IR on ``LANES``-lane vectors. The caller
    keeps ``i + LANES <= a.size <= sigs.shape[1]``, ``r < sigs.shape[0]`` and ``n <=
    xs.size``; the arrays must be contiguous (typing refuses others). Row ``r`` is an
    index, not a view ``sigs[r]``: a view per row is a reference-counted object."""
    from llvmlite import ir
    from numba.core import cgutils, types

    ok = (all(isinstance(t, types.Array) and t.dtype == types.uint64 and t.ndim == 1 and t.layout == "C"
              for t in (xs, a, b, c))
          and isinstance(sigs, types.Array) and sigs.dtype == types.uint16 and sigs.ndim == 2 and sigs.layout == "C"
          and all(isinstance(t, types.Integer) for t in (n, i, r)))
    if not ok:
        return None

    def codegen(context, builder, signature, args):
        xs_v, n_v, a_v, b_v, c_v, i_v, sig_v, r_v = args
        arrays = [context.make_array(t)(context, builder, v)
                  for t, v in zip((signature.args[0], signature.args[2], signature.args[3], signature.args[4],
                                   signature.args[6]), (xs_v, a_v, b_v, c_v, sig_v))]
        xs_a, a_a, b_a, c_a, sig_a = arrays
        i64 = ir.IntType(64)
        vec = ir.VectorType(i64, LANES)
        n_v = context.cast(builder, n_v, signature.args[1], types.int64)
        i_v = context.cast(builder, i_v, signature.args[5], types.int64)
        r_v = context.cast(builder, r_v, signature.args[7], types.int64)

        def lanes(arr):
            return builder.load(builder.bitcast(builder.gep(arr.data, [i_v]), vec.as_pointer()), align=8)

        block = _MinimaIR(builder, lanes(a_a), lanes(b_a), target_has(context, *WIDE_MULTIPLY))
        acc = builder.alloca(vec)  # promoted to registers by LLVM
        builder.store(block.start, acc)
        idx = builder.alloca(i64)
        builder.store(ir.Constant(i64, 0), idx)
        cond = builder.append_basic_block("lanes.cond")
        body = builder.append_basic_block("lanes.body")
        done = builder.append_basic_block("lanes.done")
        builder.branch(cond)
        builder.position_at_end(cond)
        s = builder.load(idx)
        builder.cbranch(builder.icmp_signed("<", s, n_v), body, done)
        builder.position_at_end(body)
        builder.store(block.step(builder.load(builder.gep(xs_a.data, [s])), builder.load(acc)), acc)
        builder.store(builder.add(s, ir.Constant(i64, 1)), idx)
        builder.branch(cond)
        builder.position_at_end(done)
        top = builder.lshr(builder.mul(lanes(c_a), block.least(builder.load(acc))), block.const(48))
        out = builder.trunc(top, ir.VectorType(ir.IntType(16), LANES))
        width = cgutils.unpack_tuple(builder, sig_a.shape, 2)[1]
        dest = builder.gep(sig_a.data, [builder.add(builder.mul(r_v, width), i_v)])
        builder.store(out, builder.bitcast(dest, ir.VectorType(ir.IntType(16), LANES).as_pointer()), align=2)
        return context.get_dummy_value()

    return types.void(xs, n, a, b, c, i, sigs, r), codegen


@njit(**JIT, inline="always")
def minhash_doc(out, tok_start, tok_end, ntok, shingle, a, b, c, xs, sigs, r):
    """Signature of one document's tokens into row ``r`` of ``sigs``; ``xs`` is scratch
    (>= ntok).

    Hashes are taken :data:`LANES` at a time (:func:`lane_minima`); the ``k % LANES``
    last hashes take the plain loop."""
    n = shingle_hashes_into(out, tok_start, tok_end, ntok, shingle, xs, np.int64(0))
    k = a.size
    top = k - k % LANES
    for i in range(0, top, LANES):
        lane_minima(xs, n, a, b, c, i, sigs, r)
    for i in range(top, k):
        ai = a[i]
        bi = b[i]
        m = np.uint64(0xFFFFFFFFFFFFFFFF)
        for s in range(n):
            v = ai * xs[s] + bi
            if v < m:
                m = v
        sigs[r, i] = np.uint16((c[i] * m) >> _U48)


@njit(**JIT)
def sign_range(offsets, data, valid, valid_offset, cfg, tables, shingle, a, b, c, sigs, has, lo, hi):
    """Sign rows ``lo:hi`` into ``sigs`` / ``has`` with one set of scratch buffers.

    ``has[i]`` stays false for NULL rows and rows without tokens (their signature row is
    left as it is). Callers run disjoint ranges on several threads (the kernel releases
    the GIL), rather than a ``parallel=True`` twin: one compiled kernel serves both."""
    out, tok_start, tok_end, raw = new_buffers()
    xs = np.empty(1024, dtype=np.uint64)
    for r in range(lo, hi):
        ntok, out, tok_start, tok_end, raw = row_tokens(offsets, data, valid, valid_offset, r, cfg, tables,
                                                        out, tok_start, tok_end, raw)
        if ntok > 0:
            xs = grow(xs, ntok)
            minhash_doc(out, tok_start, tok_end, ntok, shingle, a, b, c, xs, sigs, r)
            has[r] = True


@njit(**JIT)
def sign_ascii_range(offsets, data, valid, valid_offset, max_len, lower, alnum, shingle, a, b, c, sigs, has, todo,
                     lo, hi):
    """:func:`sign_range` for the ``simple`` tokenizer (``max_len``, ``lower`` and the
    ``alnum`` table of its ``cfg`` and ``tables``) on rows of ASCII text: a row it cannot
    take (a non-ASCII byte, or a token of ``>= max_len`` bytes: :func:`ascii_row_tokens`
    answers ``-1``) gets ``todo[r] = True`` and is left to :func:`sign_range`. Other rows
    get the same signature as :func:`sign_range` gives them.

    A kernel of its own, which does not call the general tokenizer
    (``kernels/tokenize.py: tokenize_doc``): signing ASCII text never compiles it, which
    is most of the signing code's compile time on a fresh install."""
    held = ascii_buffers(offsets, lo, hi)
    xs_held = np.empty(held[1].size, dtype=np.uint64)
    # the row loop on borrowed views (kernels/borrow.py): no atomic reference counts per row
    out, tok_start, tok_end, xs = borrowed(held[0]), borrowed(held[1]), borrowed(held[2]), borrowed(xs_held)
    offsets, data, valid, alnum = borrowed(offsets), borrowed(data), borrowed(valid), borrowed(alnum)
    a, b, c, sigs, has, todo = borrowed(a), borrowed(b), borrowed(c), borrowed(sigs), borrowed(has), borrowed(todo)
    for r in range(lo, hi):
        if not is_valid(valid, valid_offset, r):
            continue
        ntok = ascii_row_tokens(offsets, data, r, max_len, lower, alnum, out, tok_start, tok_end)
        if ntok < 0:
            todo[r] = True
        elif ntok > 0:
            minhash_doc(out, tok_start, tok_end, ntok, shingle, a, b, c, xs, sigs, r)
            has[r] = True
    keep_alive((held, xs_held))


@njit(**JIT, inline="always")
def _append_set(xs, n, tmp, counts, hashes, used):
    """Sort the ``n`` shingle hashes ``xs[:n]`` and append the distinct ones to
    ``hashes[used:]`` (grown, doubling, when full): ``(count appended, tmp, counts,
    hashes)``."""
    seg = xs[:n]
    tmp, counts = sort_hashes(seg, tmp, counts)
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
    return m, tmp, counts, hashes


@njit(**JIT)
def shingle_sets_range(offsets, data, valid, valid_offset, cfg, tables, shingle, lo, hi):
    """Sorted distinct shingle hashes of rows ``lo:hi``: ``(sizes int64[hi - lo], hashes)``,
    row ``r``'s set being the ``sizes[r - lo]`` hashes after those of the rows before it
    (a NULL row or a row without tokens has size 0).

    One pass, one serial kernel: each row is tokenized once, its hashes sorted and
    deduplicated in scratch and appended to a buffer that doubles when full. Callers run
    disjoint ranges on several threads and concatenate (``Signer.shingle_sets``)."""
    out, tok_start, tok_end, raw = new_buffers()
    tmp, counts = new_hash_scratch()
    sizes = np.zeros(hi - lo, dtype=np.int64)
    hashes = np.empty(1024, dtype=np.uint64)
    xs = np.empty(1024, dtype=np.uint64)
    used = 0
    for r in range(lo, hi):
        ntok, out, tok_start, tok_end, raw = row_tokens(offsets, data, valid, valid_offset, r, cfg, tables,
                                                        out, tok_start, tok_end, raw)
        if ntok == 0:
            continue
        xs = grow(xs, ntok)
        n = shingle_hashes_into(out, tok_start, tok_end, ntok, shingle, xs, np.int64(0))
        m, tmp, counts, hashes = _append_set(xs, n, tmp, counts, hashes, used)
        sizes[r - lo] = m
        used += m
    return sizes, hashes[:used]


@njit(**JIT)
def shingle_sets_ascii_range(offsets, data, valid, valid_offset, max_len, lower, alnum, shingle, todo, lo, hi):
    """:func:`shingle_sets_range` for the ``simple`` tokenizer on rows of ASCII text, as
    :func:`sign_ascii_range` signs them: a row :func:`ascii_row_tokens` cannot take gets
    ``todo[r] = True`` and size 0, and is left to :func:`shingle_sets_range`; the others
    get the same set as :func:`shingle_sets_range` gives them. Without the general
    tokenizer, as :func:`sign_ascii_range`."""
    out, tok_start, tok_end = ascii_buffers(offsets, lo, hi)
    xs = np.empty(tok_start.size, dtype=np.uint64)
    tmp, counts = new_hash_scratch()
    sizes = np.zeros(hi - lo, dtype=np.int64)
    hashes = np.empty(1024, dtype=np.uint64)
    used = 0
    for r in range(lo, hi):
        if not is_valid(valid, valid_offset, r):
            continue
        ntok = ascii_row_tokens(offsets, data, r, max_len, lower, alnum, out, tok_start, tok_end)
        if ntok < 0:
            todo[r] = True
        elif ntok > 0:
            n = shingle_hashes_into(out, tok_start, tok_end, ntok, shingle, xs, np.int64(0))
            m, tmp, counts, hashes = _append_set(xs, n, tmp, counts, hashes, used)
            sizes[r - lo] = m
            used += m
    return sizes, hashes[:used]
