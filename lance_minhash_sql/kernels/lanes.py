"""The pair kernel's first pass at k = 128 with 16 bands, as LLVM's own vectors.

:func:`verified_partners` compares a pool row with each of its partners in one
``<128 x i16>`` compare, whose 128-bit mask of equal positions gives both answers a visit
needs (the verification's count, a popcount of the mask, and which bands of 8 values are
equal, a byte of the mask each, all ones), with no loop over the values and no branch.
LLVM lowers the compare to the widest the CPU has (on AVX-512, four ``vpcmpeqw`` of
512 bits into mask registers; elsewhere the same IR in the CPU's own vector width), with
no vendor-specific flag. The loop over the partners is IR too,
so the row's own values are loaded once into registers for all its partners (numba's
loop reloads them every visit: it cannot tell that the list written meanwhile is other
memory). :func:`.bucket_pairs.pair_chunk` (``kernels/bucket_pairs.py``) and
:func:`.cross_pairs.join_chunk` (``kernels/cross_pairs.py``) call it.
"""

from __future__ import annotations

from lance_minhash_sql.kernels.config import intrinsic

__all__ = ["WIDTH", "BAND_VALUES", "verified_partners"]

WIDTH = 128  # values a row holds (u16 lanes of the pool)
BAND_VALUES = 8  # values a band holds (the default k = 128 with 16 bands)


def _compared(builder, a_row, b_row):
    """LLVM IR of two rows' ``(eq, bands)`` (i64): their equal values, counted, and the
    bands whose 8 values are all equal, bit ``j`` for band ``j``."""
    from llvmlite import ir

    i64 = ir.IntType(64)
    mask = builder.bitcast(builder.icmp_unsigned("==", a_row, b_row), ir.IntType(WIDTH))
    nb = WIDTH // BAND_VALUES
    band_vec = ir.VectorType(ir.IntType(BAND_VALUES), nb)
    full = ir.Constant(band_vec, [ir.Constant(ir.IntType(BAND_VALUES), -1)] * nb)
    whole = builder.icmp_unsigned("==", builder.bitcast(mask, band_vec), full)  # a mask byte per band
    return builder.trunc(builder.ctpop(mask), i64), builder.zext(builder.bitcast(whole, ir.IntType(nb)), i64)


@intrinsic
def verified_partners(typingctx, halves, docs, slot, s, ra, lo, hi, min_eq, earlier, passed, passed_miss):
    """The partners ``t`` in ``[lo, hi)`` of row ``ra`` of the pool ``halves``
    (``u16[P, 128]``) whose row ``rb`` (``docs[s + t]``, through ``slot`` unless it is
    empty) has at least ``min_eq`` of its 128 values equal to ``ra``'s and no equal band
    among those whose bit is set in ``earlier`` (bit ``j``: band ``j``, values ``8j .. 8j
    + 7``). Writes ``t`` to ``passed[n]`` and ``128 - eq`` (the mismatches) to
    ``passed_miss[n]`` at every partner and moves ``n`` on by one where it passes (no
    branch on the outcome); returns ``n``. The caller keeps the indices in bounds and
    ``passed`` / ``passed_miss`` at least ``hi - lo`` long; arrays are C-contiguous
    (typing refuses others). Rows are indices, not views ``halves[ra]``: a view per visit
    is a reference-counted object."""
    from llvmlite import ir
    from numba.core import types

    def c_array(t, dtype):
        return isinstance(t, types.Array) and t.dtype == dtype and t.ndim == 1 and t.layout == "C"

    ok = (isinstance(halves, types.Array) and halves.dtype == types.uint16 and halves.ndim == 2
          and halves.layout == "C" and c_array(docs, types.uint32) and c_array(slot, types.int32)
          and c_array(passed, types.int64) and c_array(passed_miss, types.int64)
          and all(isinstance(t, types.Integer) for t in (s, ra, lo, hi, min_eq, earlier)))
    if not ok:
        return None

    def codegen(context, builder, signature, args):
        h_v, docs_v, slot_v, s_v, ra_v, lo_v, hi_v, min_v, earlier_v, passed_v, miss_v = args
        ty = signature.args
        arrays = [context.make_array(t)(context, builder, v)
                  for t, v in ((ty[0], h_v), (ty[1], docs_v), (ty[2], slot_v), (ty[9], passed_v), (ty[10], miss_v))]
        h_a, docs_a, slot_a, passed_a, miss_a = arrays
        i64 = ir.IntType(64)

        def as_i64(v, t):
            return context.cast(builder, v, t, types.int64)

        s_v, ra_v, lo_v, hi_v = (as_i64(v, t) for v, t in ((s_v, ty[3]), (ra_v, ty[4]), (lo_v, ty[5]), (hi_v, ty[6])))
        min_v, earlier_v = as_i64(min_v, ty[7]), as_i64(earlier_v, ty[8])
        vec = ir.VectorType(ir.IntType(16), WIDTH)

        def row(r):
            start = builder.gep(h_a.data, [builder.mul(r, ir.Constant(i64, WIDTH))])
            return builder.load(builder.bitcast(start, vec.as_pointer()), align=2)

        a_row = row(ra_v)
        has_slot = builder.icmp_signed("!=", builder.extract_value(slot_a.shape, 0), ir.Constant(i64, 0))
        t_p = builder.alloca(i64)  # promoted to registers by LLVM
        n_p = builder.alloca(i64)
        builder.store(lo_v, t_p)
        builder.store(ir.Constant(i64, 0), n_p)
        done = builder.append_basic_block("partners.done")
        # two copies of the loop, with and without the slot map: no test of it per partner
        loops = []
        for mapped in (False, True):
            cond = builder.append_basic_block("partners.cond")
            body = builder.append_basic_block("partners.body")
            loops.append(cond)
            with builder.goto_block(cond):
                t = builder.load(t_p)
                builder.cbranch(builder.icmp_signed("<", t, hi_v), body, done)
            with builder.goto_block(body):
                t = builder.load(t_p)
                rb = builder.zext(builder.load(builder.gep(docs_a.data, [builder.add(s_v, t)])), i64)
                if mapped:
                    rb = builder.sext(builder.load(builder.gep(slot_a.data, [rb])), i64)
                eq, bands = _compared(builder, a_row, row(rb))
                n = builder.load(n_p)
                builder.store(t, builder.gep(passed_a.data, [n]))
                builder.store(builder.sub(ir.Constant(i64, WIDTH), eq), builder.gep(miss_a.data, [n]))
                ok = builder.and_(builder.icmp_signed(">=", eq, min_v),
                                  builder.icmp_signed("==", builder.and_(bands, earlier_v), ir.Constant(i64, 0)))
                builder.store(builder.add(n, builder.zext(ok, i64)), n_p)
                builder.store(builder.add(t, ir.Constant(i64, 1)), t_p)
                builder.branch(cond)
        builder.cbranch(has_slot, loops[1], loops[0])
        builder.position_at_end(done)
        return builder.load(n_p)

    return types.int64(halves, docs, slot, s, ra, lo, hi, min_eq, earlier, passed, passed_miss), codegen
