"""What the CPU numba compiles for offers, as constants inside kernels.

A kernel with a route for a CPU feature asks one of these intrinsics (``if
has_byte_compress(): ...``): each is a constant of the compiled code, read from numba's
target machine (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` when set, else the host), so
LLVM drops the other branch, and numba's cache, keyed by the CPU, never hands code
compiled for one CPU to another.
"""

from __future__ import annotations

from lance_minhash_sql.kernels.config import intrinsic


def target_has(context, *features: str) -> bool:
    """True when the CPU numba compiles for (its target context ``context``) has every one
    of ``features`` (LLVM's names: ``"avx512vbmi2"``)."""
    flags = set((getattr(context.codegen(), "_tm_features", "") or "").split(","))
    return all(f"+{f}" in flags for f in features)


def _constant(features: tuple):
    """``(signature, codegen)`` of an intrinsic: the constant :func:`target_has` of ``features``."""
    from llvmlite import ir
    from numba.core import types

    def codegen(context, builder, signature, args):
        return ir.Constant(ir.IntType(1), int(target_has(context, *features)))

    return types.boolean(), codegen


BYTE_COMPRESS = ("avx512bw", "avx512vbmi2")  # vpcompressb on 64-byte vectors
WIDE_MULTIPLY = ("avx512f", "avx512dq")  # vpmullq: 64-bit multiplies, 8 lanes
VECTORS_256 = ("avx2",)  # integer arithmetic on 32-byte vectors (32 x 32 -> 64-bit vpmuludq, vpmulld)


@intrinsic
def has_byte_compress(typingctx):
    """Whether the CPU compresses the bytes of a 64-byte vector (:data:`BYTE_COMPRESS`)."""
    return _constant(BYTE_COMPRESS)


@intrinsic
def has_wide_multiply(typingctx):
    """Whether the CPU multiplies eight 64-bit lanes in one instruction (:data:`WIDE_MULTIPLY`)."""
    return _constant(WIDE_MULTIPLY)


@intrinsic
def has_vectors_256(typingctx):
    """Whether the CPU computes on 32-byte integer vectors (:data:`VECTORS_256`): 64-bit
    products there take 32-bit multiplies, so a route of 64-bit lanes pays where it has
    few multiplies a lane."""
    return _constant(VECTORS_256)
