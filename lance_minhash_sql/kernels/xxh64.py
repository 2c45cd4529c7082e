"""XXH64 (the standard 64-bit xxHash) over a byte range of a uint8 array.

All arithmetic stays in ``np.uint64`` (wrapping): numba promotes ``uint64`` mixed with a
signed integer to ``float64``, so every constant and shift count here is ``uint64``.

The rounds are ordinary jitted functions, not ``inline="always"``: LLVM inlines them
into :func:`xxh64` all the same (signing throughput unchanged), while numba's own inlining
types a helper again at each of its call sites (a fresh install compiled ``xxh64`` in
0.98 s of CPU with them inlined, 0.64 s without). :func:`xxh64_short`, the shingles'
hash, is inlined at numba's level into the loops that call it, without a branch;
:func:`xxh64_short8` is the same on eight shingles at once, in 8-lane vectors (LLVM IR),
for CPUs with vectors of 64-bit lanes.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, intrinsic, njit
from lance_minhash_sql.kernels.cpu import WIDE_MULTIPLY, target_has

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U4 = np.uint64(4)
_U5 = np.uint64(5)
_U6 = np.uint64(6)
_U7 = np.uint64(7)
_U8 = np.uint64(8)
_U11 = np.uint64(11)
_U12 = np.uint64(12)
_U16 = np.uint64(16)
_U18 = np.uint64(18)
_U23 = np.uint64(23)
_U24 = np.uint64(24)
_U27 = np.uint64(27)
_U29 = np.uint64(29)
_U31 = np.uint64(31)
_U32 = np.uint64(32)
_U33 = np.uint64(33)
_U40 = np.uint64(40)
_U48 = np.uint64(48)
_U56 = np.uint64(56)
_U64 = np.uint64(64)


@njit(**JIT)
def _rotl(x, r):
    return (x << r) | (x >> (_U64 - r))


@njit(**JIT)
def read64(buf, p):
    # unsigned indices: no negative-index wraparound per byte, so LLVM merges the eight
    # byte loads into one 64-bit load
    q = np.uint64(p)
    return (np.uint64(buf[q]) | (np.uint64(buf[q + _U1]) << _U8) | (np.uint64(buf[q + _U2]) << _U16)
            | (np.uint64(buf[q + _U3]) << _U24) | (np.uint64(buf[q + _U4]) << _U32)
            | (np.uint64(buf[q + _U5]) << _U40) | (np.uint64(buf[q + _U6]) << _U48)
            | (np.uint64(buf[q + _U7]) << _U56))


@njit(**JIT)
def _read32(buf, p):
    q = np.uint64(p)
    return (np.uint64(buf[q]) | (np.uint64(buf[q + _U1]) << _U8) | (np.uint64(buf[q + _U2]) << _U16)
            | (np.uint64(buf[q + _U3]) << _U24))


@njit(**JIT)
def _round(acc, lane):
    acc = acc + lane * P2
    acc = _rotl(acc, _U31)
    return acc * P1


@njit(**JIT)
def _merge(acc, val):
    acc = acc ^ _round(np.uint64(0), val)
    return acc * P1 + P4


# The tail's steps and the final mix, inline at numba's level: helpers of their own would
# add compiled specializations to a first call, and these are a few instructions each.
@njit(**JIT, inline="always")
def _lane8(h, lane):
    h = h ^ _round(np.uint64(0), lane)
    return _rotl(h, _U27) * P1 + P4


@njit(**JIT, inline="always")
def _lane4(h, lane):
    h = h ^ (lane * P1)
    return _rotl(h, _U23) * P2 + P3


@njit(**JIT, inline="always")
def _byte(h, b):
    h = h ^ (np.uint64(b) * P5)
    return _rotl(h, _U11) * P1


@njit(**JIT, inline="always")
def _avalanche(h):
    h = h ^ (h >> _U33)
    h = h * P2
    h = h ^ (h >> _U29)
    h = h * P3
    return h ^ (h >> _U32)


@njit(**JIT, inline="always")
def _pick(cond, x, y):
    """``x`` if ``cond`` else ``y``, by a mask rather than a branch."""
    m = np.uint64(0) - np.uint64(cond)
    return (x & m) | (y & ~m)


@njit(**JIT, inline="always")
def xxh64_short(buf, start, length, seed):
    """:func:`xxh64` of 8 to 31 bytes (a shingle's), without a branch.

    Every step a length below 32 may take after the first 8 bytes (2 more of 8 bytes,
    one of 4, 3 of 1) is computed on bytes read inside ``buf[start:start + length]`` (a
    step the length does not take reads bytes of the range again), and its result kept
    or dropped by a mask (:func:`_pick`). Shingle lengths vary from one to the next, so
    the branches of :func:`xxh64`'s tail loops were mispredicted a few times a shingle;
    without them the hashes of successive shingles overlap in the CPU's pipeline.
    ``inline`` at numba's level: as a call it costs as much as its body (LLVM does not
    inline it), and inlined with branches, numba's reference counting of ``buf`` stays
    in the caller's loop."""
    n = np.uint64(length)
    last8 = start + length - 8
    h = _lane8(np.uint64(seed) + P5 + n, read64(buf, start))
    h = _pick(length >= 16, _lane8(h, read64(buf, min(start + 8, last8))), h)
    h = _pick(length >= 24, _lane8(h, read64(buf, min(start + 16, last8))), h)
    q = start + (length & 24)
    h = _pick((length & 4) != 0, _lane4(h, _read32(buf, min(q, last8 + 4))), h)
    q += length & 4
    r = length & 3
    last = np.uint64(last8 + 7)
    h = _pick(r >= 1, _byte(h, buf[min(np.uint64(q), last)]), h)
    h = _pick(r >= 2, _byte(h, buf[min(np.uint64(q + 1), last)]), h)
    h = _pick(r >= 3, _byte(h, buf[min(np.uint64(q + 2), last)]), h)
    return _avalanche(h)


@njit(**JIT)
def xxh64(buf, start, length, seed):
    """XXH64 of ``buf[start:start + length]`` with ``seed`` (all uint64 arithmetic)."""
    p = start
    end = start + length
    seed = np.uint64(seed)
    if length >= 32:
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        limit = end - 32
        while p <= limit:
            v1 = _round(v1, read64(buf, p))
            v2 = _round(v2, read64(buf, p + 8))
            v3 = _round(v3, read64(buf, p + 16))
            v4 = _round(v4, read64(buf, p + 24))
            p += 32
        h = _rotl(v1, _U1) + _rotl(v2, _U7) + _rotl(v3, _U12) + _rotl(v4, _U18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + P5
    h = h + np.uint64(length)
    while p + 8 <= end:
        h = _lane8(h, read64(buf, p))
        p += 8
    if p + 4 <= end:
        h = _lane4(h, _read32(buf, p))
        p += 4
    while p < end:
        h = _byte(h, buf[np.uint64(p)])
        p += 1
    return _avalanche(h)


@njit(**JIT)
def xxh64_u16_run(values, start, count, seed):
    """XXH64 of ``count`` u16 values ``values[start:start+count]`` as little-endian bytes."""
    buf = np.empty(2 * count, dtype=np.uint8)
    for i in range(count):
        v = values[start + i]
        buf[2 * i] = np.uint8(v & 0xFF)
        buf[2 * i + 1] = np.uint8(v >> 8)
    return xxh64(buf, np.int64(0), 2 * count, seed)  # not a literal 0: one specialization of xxh64


class _Lanes:
    """LLVM IR on vectors of eight 64-bit lanes, for :func:`xxh64_short8`."""

    n = 8

    def __init__(self, builder, wide: bool = True):
        from llvmlite import ir

        self.ir, self.b, self.wide = ir, builder, wide
        self.i32, self.i64 = ir.IntType(32), ir.IntType(64)
        self.vec = ir.VectorType(self.i64, self.n)

    def const(self, c):
        c = int(c)
        return self.ir.Constant(self.vec, [self.ir.Constant(self.i64, c - (1 << 64) if c >= 1 << 63 else c)] * self.n)

    def splat(self, x):
        """Every lane ``x`` (an i64 value)."""
        ir = self.ir
        one = self.b.insert_element(ir.Constant(self.vec, ir.Undefined), x, ir.Constant(self.i32, 0))
        return self.b.shuffle_vector(one, ir.Constant(self.vec, ir.Undefined),
                                     ir.Constant(ir.VectorType(self.i32, self.n), [0] * self.n))

    def call(self, name, ret, args):
        from numba.core import cgutils

        fn = cgutils.get_or_insert_function(self.b.module, self.ir.FunctionType(ret, [a.type for a in args]), name)
        return self.b.call(fn, args)

    def rotl(self, x, r):
        return self.call(f"llvm.fshl.v{self.n}i64", self.vec, [x, x, self.const(r)])

    def mul(self, x, c):
        """``x * c`` (a constant), wrapping. Without a 64-bit multiply (``wide`` false) in
        two 32-bit ones: ``lo(x) * lo(c)`` to 64 bits, and the cross terms ``lo(x) * hi(c)
        + hi(x) * lo(c)`` (needed mod 2**32 only) from one multiply of ``x``'s halves by
        ``c``'s swapped; LLVM's own lowering takes three."""
        if self.wide:
            return self.b.mul(x, self.const(c))
        ir, b = self.ir, self.b
        c = int(c)
        lo, hi = c & 0xFFFFFFFF, c >> 32
        v32 = ir.VectorType(self.i32, 2 * self.n)

        def i32(v):
            return ir.Constant(self.i32, v - (1 << 32) if v >= 1 << 31 else v)

        swapped = ir.Constant(v32, [i32(hi), i32(lo)] * self.n)
        t = b.bitcast(b.mul(b.bitcast(x, v32), swapped), self.vec)
        cross = b.shl(b.add(t, b.lshr(t, self.const(32))), self.const(32))
        return b.add(b.mul(b.and_(x, self.const(0xFFFFFFFF)), self.const(lo)), cross)

    def lane8(self, h, lane):
        """:func:`_lane8` in every lane."""
        k = self.mul(self.rotl(self.mul(lane, P2), 31), P1)
        return self.b.add(self.mul(self.rotl(self.b.xor(h, k), 27), P1), self.const(P4))

    def below(self, count):
        """The lanes ``j < count`` (an i64 value), as an ``<8 x i1>`` mask."""
        ir = self.ir
        lanes = ir.Constant(self.vec, [ir.Constant(self.i64, j) for j in range(self.n)])
        return self.b.icmp_signed("<", lanes, self.splat(count))

    def avalanche(self, h):
        """XXH64's final mix in every lane."""
        b = self.b
        for shift, prime in ((33, P2), (29, P3)):
            h = self.mul(b.xor(h, b.lshr(h, self.const(shift))), prime)
        return b.xor(h, b.lshr(h, self.const(32)))

    def bytes_at(self, word, offset):
        """The bytes of ``word`` from byte ``offset`` (0 to 7; others give any value) on."""
        b = self.b
        return b.lshr(word, b.and_(b.mul(offset, self.const(8)), self.const(63)))


def _xxh64_lanes(v, seed, n, w0, w1, w2, tail):
    """:func:`xxh64_short` in every lane of ``v`` (:class:`_Lanes`) whose length ``n`` is 8 to
    31: ``w0``, ``w1``, ``w2`` the shingle's words at bytes 0, ``min(8, n - 8)`` and
    ``min(16, n - 8)``, ``tail`` its last 8 bytes. The 4-byte step reads bytes ``n & 24``
    on, ``8 - (n & 7)`` bytes into ``tail``; 1-byte step ``k`` byte ``8 - (n & 3) + k``."""
    b = v.b
    h = v.lane8(b.add(b.add(seed, v.const(P5)), n), w0)
    h = b.select(b.icmp_unsigned(">=", n, v.const(16)), v.lane8(h, w1), h)
    h = b.select(b.icmp_unsigned(">=", n, v.const(24)), v.lane8(h, w2), h)
    four = b.and_(v.bytes_at(tail, b.sub(v.const(8), b.and_(n, v.const(7)))), v.const(0xFFFFFFFF))
    step = b.add(v.mul(v.rotl(b.xor(h, v.mul(four, P1)), 23), P2), v.const(P3))
    h = b.select(b.icmp_unsigned("!=", b.and_(n, v.const(4)), v.const(0)), step, h)
    r = b.and_(n, v.const(3))
    for k in range(3):
        byte = b.and_(v.bytes_at(tail, b.add(b.sub(v.const(8), r), v.const(k))), v.const(0xFF))
        step = v.mul(v.rotl(b.xor(h, v.mul(byte, P5)), 11), P1)
        h = b.select(b.icmp_unsigned(">", r, v.const(k)), step, h)
    return v.avalanche(h)


def _short8_codegen(context, builder, signature, args):
    """The code of :func:`xxh64_short8`: loads, :func:`_xxh64_lanes`, the masked store."""
    from llvmlite import ir
    from numba.core import types

    ta = signature.args
    buf, starts, ends, dest = (context.make_array(ta[i])(context, builder, args[i]) for i in (0, 1, 2, 7))
    s0, w, count, pos = (context.cast(builder, args[i], ta[i], types.int64) for i in (3, 4, 5, 8))
    v = _Lanes(builder, target_has(context, *WIDE_MULTIPLY))
    i32, i64, vec = v.i32, v.i64, v.vec
    valid = v.below(count)
    st = v.call(f"llvm.masked.load.v{v.n}i64.p0", vec,
                [builder.gep(starts.data, [s0]), ir.Constant(i32, 8), valid, v.const(0)])
    en = v.call(f"llvm.masked.load.v{v.n}i64.p0", vec,
                [builder.gep(ends.data, [builder.add(s0, builder.sub(w, ir.Constant(i64, 1)))]),
                 ir.Constant(i32, 8), valid, v.const(0)])
    n = builder.sub(en, st)
    short = builder.and_(valid, builder.icmp_unsigned("<", builder.sub(n, v.const(8)), v.const(24)))
    base = v.splat(builder.ptrtoint(buf.data, i64))
    pointers = ir.VectorType(i64.as_pointer(), v.n)

    def word(offsets):  # the 8 bytes at buf[offsets], little-endian, in the short lanes
        at = builder.inttoptr(builder.add(base, offsets), pointers)
        return v.call(f"llvm.masked.gather.v{v.n}i64.v{v.n}p0", vec, [at, ir.Constant(i32, 1), short, v.const(0)])

    last8 = builder.add(st, builder.sub(n, v.const(8)))

    def word_at(k):
        return word(v.call(f"llvm.umin.v{v.n}i64", vec, [builder.add(st, v.const(k)), last8]))

    h = _xxh64_lanes(v, v.splat(context.cast(builder, args[6], ta[6], types.uint64)), n, word(st), word_at(8),
                     word_at(16), word(last8))
    v.call(f"llvm.masked.store.v{v.n}i64.p0", ir.VoidType(), [h, builder.gep(dest.data, [pos]), ir.Constant(i32, 8), valid])
    return builder.zext(builder.bitcast(builder.xor(valid, short), ir.IntType(v.n)), i64)


@intrinsic
def xxh64_short8(typingctx, buf, starts, ends, s0, w, count, seed, dest, pos):
    """:func:`xxh64_short` of up to eight shingles at once, in 8-lane vectors of 64-bit
    integers: shingle ``s0 + j`` (``j < count <= 8``) is ``buf[starts[s0 + j]:ends[s0 + j +
    w - 1]]`` and its hash goes to ``dest[pos + j]``. Returns a bit mask of the lanes whose
    shingle is shorter than 8 or longer than 31 bytes: their ``dest`` is not their hash
    (the caller takes :func:`xxh64` for them). Each lane reads its shingle's first three
    8-byte words and its last one (gathers, masked to the lanes that read); the last word
    holds the 4-byte and 1-byte steps of the tail, shifted out of it. Every step a length
    below 32 may take is computed, and kept by a lane select, as :func:`xxh64_short`
    does. Callers take it where the CPU has vectors of 64-bit lanes (``kernels/cpu.py:
    has_wide_multiply``, or ``has_vectors_256``, where each multiply takes two 32-bit
    ones: :meth:`_Lanes.mul`)."""
    from numba.core import types

    def arr(t, dtype, mutable=False):
        return (isinstance(t, types.Array) and t.dtype == dtype and t.ndim == 1 and t.layout == "C"
                and (t.mutable or not mutable))

    ok = (arr(buf, types.uint8) and arr(starts, types.int64) and arr(ends, types.int64)
          and arr(dest, types.uint64, mutable=True) and seed == types.uint64
          and all(isinstance(t, types.Integer) for t in (s0, w, count, pos)))
    if not ok:
        return None
    return types.int64(buf, starts, ends, s0, w, count, seed, dest, pos), _short8_codegen


def _pairs8_codegen(context, builder, signature, args):
    """The code of :func:`xxh64_16x8`: one masked load of 16 words, split into each
    range's first and second word, two 8-byte steps and the final mix in every lane."""
    from llvmlite import ir
    from numba.core import cgutils, types

    ta = signature.args
    buf, dest = (context.make_array(ta[i])(context, builder, args[i]) for i in (0, 5))
    r, start, count, pos = (context.cast(builder, args[i], ta[i], types.int64) for i in (1, 2, 3, 6))
    v = _Lanes(builder, target_has(context, *WIDE_MULTIPLY))
    i8, i32, i64 = ir.IntType(8), v.i32, v.i64

    def row_at(arr, index, itemsize):  # the address of arr[r, index] (bytes of strides)
        stride = cgutils.unpack_tuple(builder, arr.strides, 2)[0]
        base = builder.bitcast(arr.data, i8.as_pointer())
        return builder.gep(base, [builder.add(builder.mul(r, stride), builder.mul(index, ir.Constant(i64, itemsize)))])

    wide = ir.VectorType(i64, 2 * v.n)
    lane = ir.Constant(wide, [ir.Constant(i64, j // 2) for j in range(2 * v.n)])
    words_valid = builder.icmp_signed("<", lane, builder.shuffle_vector(
        v.splat(count), ir.Constant(v.vec, ir.Undefined), ir.Constant(ir.VectorType(i32, 2 * v.n), [0] * (2 * v.n))))
    words = v.call(f"llvm.masked.load.v{2 * v.n}i64.p0", wide,
                   [builder.bitcast(row_at(buf, start, 1), i64.as_pointer()), ir.Constant(i32, 1), words_valid,
                    ir.Constant(wide, [ir.Constant(i64, 0)] * (2 * v.n))])
    first = builder.shuffle_vector(words, words, ir.Constant(ir.VectorType(i32, v.n), list(range(0, 2 * v.n, 2))))
    second = builder.shuffle_vector(words, words, ir.Constant(ir.VectorType(i32, v.n), list(range(1, 2 * v.n, 2))))
    seed = v.splat(context.cast(builder, args[4], ta[4], types.uint64))
    h = v.avalanche(v.lane8(v.lane8(builder.add(seed, v.const(P5 + _U16)), first), second))
    v.call(f"llvm.masked.store.v{v.n}i64.p0", ir.VoidType(),
           [h, builder.bitcast(row_at(dest, pos, 8), i64.as_pointer()), ir.Constant(i32, 8), v.below(count)])
    return context.get_dummy_value()


@intrinsic
def xxh64_16x8(typingctx, buf, r, start, count, seed, dest, pos):
    """:func:`xxh64` of ``count`` (1 to 8) consecutive 16-byte ranges of row ``r`` of
    ``buf``, ``buf[r, start + 16 * j:start + 16 * j + 16]``, into ``dest[r, pos + j]``, in
    8-lane vectors (band keys' hashes where a band is 16 bytes: ``kernels/similarity.py``);
    rows addressed by their stride, no row views (``buf``'s rows must be contiguous). Callers take it where the CPU
    has vectors of 64-bit lanes (``kernels/cpu.py: has_wide_multiply`` or ``has_vectors_256``)."""
    from numba.core import types

    ok = (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.ndim == 2 and buf.layout in ("C", "A")
          and isinstance(dest, types.Array) and dest.dtype == types.uint64 and dest.ndim == 2
          and dest.layout == "C" and dest.mutable and seed == types.uint64
          and all(isinstance(t, types.Integer) for t in (r, start, count, pos)))
    if not ok:
        return None
    return types.none(buf, r, start, count, seed, dest, pos), _pairs8_codegen
