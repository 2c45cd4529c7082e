"""Lance 14.0.2's MinHash tokenizer over UTF-8 bytes, one document at a time.

Pipeline, in Lance's order: base tokenizer (``simple``: runs of alphanumeric code points;
``whitespace``: split on the bytes ``" \\t\\n\\x0c\\r"``; ``raw``: the whole text, even
empty; ``ngram``: character n-grams of the whole text; ``code``: identifiers, runs of
alphanumeric code points and ``_``, with operators and identifier parts as its flags ask
(:mod:`lance_minhash_sql.kernels.code_tokens`); ``TOKENS``: a final token stream Lance's tokenizer made, each
token a little-endian u32 byte length and its bytes, taken as it is), then drop tokens whose
*original* UTF-8 length is ``>= max_len`` bytes, then per-code-point lower-casing, then
per-code-point ASCII folding of the lower-cased token.

The final tokens are written into one byte buffer, each followed by the shingle
separator ``0x1F``, so the shingle of tokens ``s..s+w-1`` is the contiguous byte range
``out[tok_start[s]:tok_end[s+w-1]]``.

``cfg`` is a tuple ``(kind, max_len, lower, fold, ngram_min, ngram_max, prefix_only,
code_flags)`` (``max_len < 0``: no limit; ``code_flags``: the ``CODE_*`` bits below); ``tables`` is the tuple of arrays from
:mod:`lance_minhash_sql.io.unicode_tables`. Buffers are sized once per document and
returned, so the caller reuses them across documents.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.core import lance_format
from lance_minhash_sql.kernels.code_tokens import CODE_OPERATORS, CODE_SPLIT, IDENT_ASCII, UNDERSCORE, code_tokens
from lance_minhash_sql.kernels.config import JIT, intrinsic, njit
from lance_minhash_sql.kernels.cpu import BYTE_COMPRESS, VECTORS_256, has_byte_compress, has_vectors_256, target_has
from lance_minhash_sql.kernels.utf8 import decode, encode

SIMPLE = 0
WHITESPACE = 1
RAW = 2
NGRAM = 3
TOKENS = 4  # a token stream made by Lance's tokenizer (io/tokens.py): u32 length + bytes per token
CODE = 5
SEPARATOR = np.uint8(lance_format.SHINGLE_SEPARATOR)


@njit(**JIT, inline="always")
def _emit_folded(cp, fold, tables, out, q):
    fold_index, fold_offsets, fold_values = tables[4], tables[5], tables[6]
    if fold:
        e = fold_index[cp]
        if e >= 0:
            for j in range(fold_offsets[e], fold_offsets[e + 1]):
                out[q] = fold_values[j]
                q += 1
            return q
    return encode(cp, out, q)


@njit(**JIT, inline="always")
def grow(buf, need):
    """``buf``, or a new empty buffer of its type for at least ``need`` items (twice its
    size at the least, so a row loop grows it a few times, not per row)."""
    if need <= buf.size:
        return buf
    return np.empty(max(need, 2 * buf.size), dtype=buf.dtype)


@njit(**JIT)
def _transform_unicode(data, ts, te, lower, fold, tables, out, q):
    """Lower-case and fold ``data[ts:te]`` code point by code point; returns the new ``q``."""
    lower_index, lower_offsets, lower_values = tables[1], tables[2], tables[3]
    p = ts
    while p < te:
        cp, p = decode(data, p, te)
        if lower and lower_index[cp] >= 0:
            e = lower_index[cp]
            for j in range(lower_offsets[e], lower_offsets[e + 1]):
                q = _emit_folded(lower_values[j], fold, tables, out, q)
        else:
            q = _emit_folded(cp, fold, tables, out, q)
    return q


@njit(**JIT, inline="always")
def _all_ascii(data, s, e):
    for p in range(s, e):
        if data[p] >= 0x80:
            return False
    return True


@njit(**JIT, inline="always")
def _is_ascii_space(b):
    return b == 0x20 or b == 0x09 or b == 0x0A or b == 0x0C or b == 0x0D


@njit(**JIT, inline="always")
def _ascii_words(data, s, e, kind, max_len, lower, alnum, out, tok_start, tok_end):
    """:func:`tokenize_doc` for an all-ASCII text and the ``simple`` or ``whitespace``
    tokenizer, in one pass: on ASCII, lower-casing maps ``A-Z`` to ``a-z``, folding
    changes nothing and a token's length is its byte count, so each byte goes straight
    to ``out``. The loop has no data-dependent branch (word boundaries are
    unpredictable): every byte is stored at ``q`` (its lower-cased value inside a token,
    the separator outside) and ``q`` advances inside a token and on the byte that ends
    one; a token of ``>= max_len`` bytes is taken back by resetting ``q`` to its start.
    Token ``t`` starts one byte after token ``t - 1`` ends. The buffers are sized by the
    caller (``out``: ``nbytes + 1``, ``tok_start`` / ``tok_end``: one per possible token)."""
    limit = max_len if max_len >= 0 else e - s + 1
    low = 32 if lower else 0
    q = 0
    ntok = 0
    start = 0  # where the current (or next) token starts in out
    prev = 0  # the previous byte was inside a token
    for p in range(s, e):
        b0 = data[p]
        if kind == WHITESPACE:
            ins = 0 if _is_ascii_space(b0) else 1
        else:
            ins = 1 if alnum[b0] != 0 else 0
        upper = 1 if 65 <= b0 <= 90 else 0
        out[q] = (b0 + low * upper) if ins else SEPARATOR
        end = prev & (1 - ins)
        drop = end & (1 if q - start >= limit else 0)
        tok_end[ntok] = q
        ntok += end - drop
        q = start if drop else q + (ins | prev)
        start = start if ins else q
        prev = ins
    if prev:
        if q - start >= limit:
            q = start
        else:
            tok_end[ntok] = q
            out[q] = SEPARATOR
            ntok += 1
    for t in range(ntok):
        tok_start[t] = 0 if t == 0 else tok_end[t - 1] + 1
    return ntok


BLOCK = 64  # bytes of text one vector step of _ascii_simple reads
ASCII_OUT_SLACK = BLOCK  # bytes of out past a text's tokens that _ascii_simple's vector stores may write


@njit(**JIT, inline="always")
def _starts_within(ntok, max_len, tok_start, tok_end):
    """The ASCII routes' last step: each token starts after the previous one's separator
    (``tok_start`` from ``tok_end``); ``ntok``, or -1 when a token has ``max_len`` bytes or
    more (the general tokenizer then takes the text)."""
    longest = np.int64(0)
    for t in range(ntok):
        st = 0 if t == 0 else tok_end[t - 1] + 1
        tok_start[t] = st
        longest = max(longest, tok_end[t] - st)
    if max_len >= 0 and longest >= max_len:
        return np.int64(-1)
    return ntok


@intrinsic
def _bit_count(typingctx, x):
    """Set bits of the u64 ``x`` (``popcnt``)."""
    from numba.core import types

    if x != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return types.uint64(x), codegen


def _shuffle_compress(builder, mapped, keep, dest):
    """LLVM IR storing the bytes of the ``<64 x i8>`` ``mapped`` whose bit is set in the
    i64 ``keep`` at ``dest`` on, in order, without a byte compress: 8 bytes at a time, each
    group's kept bytes moved to its front by one ``pshufb`` (SSSE3) whose control is the
    entry of a 256-entry table for the group's mask byte, stored as 8 bytes, the next
    group's store starting after the kept ones (bytes past the kept ones of the last
    group are written too: callers keep 64 bytes of room)."""
    from llvmlite import ir
    from numba.core import cgutils

    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    v16 = ir.VectorType(i8, 16)
    module = builder.module
    name = "_lms_shuffle_compress_table"
    table = module.globals.get(name)
    if table is None:
        rows = []
        for k in range(256):
            idx = [j for j in range(8) if (k >> j) & 1]
            idx += [0x80] * (8 - len(idx))
            rows.append(ir.Constant(i64, int.from_bytes(bytes(idx), "little") - (1 << 64 if idx[7] >= 0x80 else 0)))
        table = ir.GlobalVariable(module, ir.ArrayType(i64, 256), name=name)
        table.initializer = ir.Constant(ir.ArrayType(i64, 256), rows)
        table.global_constant = True
        table.linkage = "linkonce_odr"
    pshufb = cgutils.get_or_insert_function(module, ir.FunctionType(v16, [v16, v16]), "llvm.x86.ssse3.pshuf.b.128")
    words = builder.bitcast(mapped, ir.VectorType(i64, BLOCK // 8))
    base = builder.ptrtoint(dest, i64)
    at = ir.Constant(i64, 0)
    for g in range(BLOCK // 8):
        k = builder.and_(builder.lshr(keep, ir.Constant(i64, 8 * g)), ir.Constant(i64, 0xFF))
        ctrl = builder.load(builder.gep(table, [ir.Constant(i32, 0), k]))
        word = builder.insert_element(ir.Constant(ir.VectorType(i64, 2), ir.Undefined),
                                      builder.extract_element(words, ir.Constant(i32, g)), ir.Constant(i32, 0))
        control = builder.insert_element(ir.Constant(ir.VectorType(i64, 2), ir.Undefined), ctrl, ir.Constant(i32, 0))
        moved = builder.call(pshufb, [builder.bitcast(word, v16), builder.bitcast(control, v16)])
        low = builder.extract_element(builder.bitcast(moved, ir.VectorType(i64, 2)), ir.Constant(i32, 0))
        builder.store(low, builder.inttoptr(builder.add(base, at), i64.as_pointer()), align=1)
        at = builder.add(at, builder.ctpop(k))


def _block_bytes(builder, da, p, src, valid, masked_only):
    """LLVM IR of :func:`_ascii_block`'s 64 bytes at ``src`` (``data[p:]``, ``da`` the
    array), those where ``valid`` is false read as 0: a masked load (no byte past them
    read) where ``masked_only``, else a plain load where ``data`` holds 64 bytes at ``p``
    and the masked one only where it ends sooner (a CPU without byte masks takes that one
    byte by byte)."""
    from llvmlite import ir
    from numba.core import cgutils

    i32, i64 = ir.IntType(32), ir.IntType(64)
    v8 = ir.VectorType(ir.IntType(8), BLOCK)
    zero = ir.Constant(v8, [ir.Constant(ir.IntType(8), 0)] * BLOCK)
    load = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [src.type, i32, valid.type, v8]),
                                          f"llvm.masked.load.v{BLOCK}i8.p0")
    if masked_only:
        return builder.call(load, [src, ir.Constant(i32, 1), valid, zero])
    size = cgutils.unpack_tuple(builder, da.shape, 1)[0]
    whole = builder.icmp_signed("<=", builder.add(p, ir.Constant(i64, BLOCK)), size)
    with builder.if_else(whole, likely=True) as (then, otherwise):
        with then:
            plain = builder.select(valid, builder.load(builder.bitcast(src, v8.as_pointer()), align=1), zero)
            then_bb = builder.block
        with otherwise:
            masked = builder.call(load, [src, ir.Constant(i32, 1), valid, zero])
            else_bb = builder.block
    x = builder.phi(v8)
    x.add_incoming(plain, then_bb)
    x.add_incoming(masked, else_bb)
    return x


@intrinsic
def _ascii_block(typingctx, data, p, count, carry, lower, underscore, out, q):
    """One :data:`BLOCK` of :func:`_ascii_simple`'s vector route: the ``count`` (1 to 64)
    bytes ``data[p:p + count]`` classified and mapped in one vector, the kept ones
    compressed into ``out[q:]``. Returns ``(inside, high)``, bit ``i`` of each for byte
    ``p + i``: inside a token (an ASCII letter or digit, or ``_`` when ``underscore``), and
    a byte ``>= 0x80``. A byte is kept when it or the one before it is inside a token
    (``carry``: the byte before the block was); a kept byte is its lower-cased value
    (``lower``) inside a token and the separator outside, so the block adds its tokens
    and one separator after each, and ``out[q:q + 64]`` is written (callers keep
    :data:`ASCII_OUT_SLACK` bytes of ``out`` past the tokens). Written as LLVM IR on a
    64-byte vector: a masked load (no byte past ``count`` read), compares, and
    ``llvm.x86.avx512.mask.compress`` into a register (the memory form is slow on
    some CPUs) where :func:`..kernels.cpu.has_byte_compress` holds; where only
    :func:`..kernels.cpu.has_vectors_256` does, a plain load with the bytes past
    ``count`` zeroed (the masked form only where ``data`` ends within 64 bytes of ``p``:
    a CPU without byte masks takes it byte by byte) and :func:`_shuffle_compress`."""
    from llvmlite import ir
    from numba.core import cgutils, types

    ok = (isinstance(data, types.Array) and data.dtype == types.uint8 and data.ndim == 1 and data.layout == "C"
          and isinstance(out, types.Array) and out.dtype == types.uint8 and out.ndim == 1 and out.layout == "C"
          and out.mutable and carry == types.uint64 and lower == types.boolean and underscore == types.boolean
          and all(isinstance(t, types.Integer) for t in (p, count, q)))
    if not ok:
        return None

    def codegen(context, builder, signature, args):
        data_v, p_v, count_v, carry_v, lower_v, us_v, out_v, q_v = args
        da = context.make_array(signature.args[0])(context, builder, data_v)
        oa = context.make_array(signature.args[6])(context, builder, out_v)
        i1, i8, i32, i64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
        v8 = ir.VectorType(i8, BLOCK)
        v1 = ir.VectorType(i1, BLOCK)

        def splat(c):
            return ir.Constant(v8, [ir.Constant(i8, c)] * BLOCK)

        def flag(b):
            return builder.select(b, ir.Constant(v1, [ir.Constant(i1, 1)] * BLOCK),
                                  ir.Constant(v1, [ir.Constant(i1, 0)] * BLOCK))

        p = context.cast(builder, p_v, signature.args[1], types.int64)
        count = context.cast(builder, count_v, signature.args[2], types.int64)
        q = context.cast(builder, q_v, signature.args[7], types.int64)
        src = builder.gep(da.data, [p])
        cnt = builder.insert_element(ir.Constant(v8, ir.Undefined), builder.trunc(count, i8), ir.Constant(i32, 0))
        cnt = builder.shuffle_vector(cnt, ir.Constant(v8, ir.Undefined),
                                     ir.Constant(ir.VectorType(i32, BLOCK), [0] * BLOCK))
        valid = builder.icmp_unsigned("<", ir.Constant(v8, [ir.Constant(i8, j) for j in range(BLOCK)]), cnt)
        compress = target_has(context, *BYTE_COMPRESS)
        x = _block_bytes(builder, da, p, src, valid, compress)
        high = builder.bitcast(builder.icmp_signed("<", x, splat(0)), i64)
        digit = builder.icmp_unsigned("<", builder.sub(x, splat(0x30)), splat(10))
        folded = builder.or_(x, splat(0x20))  # A-Z read as a-z
        letter = builder.icmp_unsigned("<", builder.sub(folded, splat(0x61)), splat(26))
        us = builder.and_(builder.icmp_unsigned("==", x, splat(UNDERSCORE)), flag(us_v))
        inside = builder.or_(builder.or_(digit, letter), us)
        lowered = builder.select(builder.and_(letter, flag(lower_v)), folded, x)
        mapped = builder.select(inside, lowered, splat(lance_format.SHINGLE_SEPARATOR))
        m = builder.bitcast(inside, i64)
        keep = builder.or_(m, builder.or_(builder.shl(m, ir.Constant(i64, 1)), carry_v))
        dest = builder.gep(oa.data, [q])
        if compress:
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8, v8, v1]),
                                                f"llvm.x86.avx512.mask.compress.v{BLOCK}i8")
            packed = builder.call(fn, [mapped, splat(0), builder.bitcast(keep, v1)])
            builder.store(packed, builder.bitcast(dest, v8.as_pointer()), align=1)
        elif target_has(context, *VECTORS_256):
            _shuffle_compress(builder, mapped, keep, dest)
        else:  # never run (has_byte_compress and has_vectors_256 are false), but valid IR for any CPU
            store = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [v8, dest.type, v1]),
                                                   f"llvm.masked.compressstore.v{BLOCK}i8")
            builder.call(store, [mapped, dest, builder.bitcast(keep, v1)])
        return context.make_tuple(builder, signature.return_type, [m, high])

    return types.UniTuple(types.uint64, 2)(data, p, count, carry, lower, underscore, out, q), codegen


@njit(**JIT, inline="always")
def _ascii_vector(data, s, e, max_len, lower, alnum, out, tok_start, tok_end):
    """:func:`_ascii_simple` by :func:`_ascii_block`, 64 bytes a step: token ``t`` ends
    where the ``t``-th falling edge of the inside-a-token bits falls in ``out``, the kept
    bytes before it in its block counted by ``popcnt``; so only the tokens loop, not the
    bytes."""
    n = e - s
    underscore = alnum[UNDERSCORE] != 0
    one = np.uint64(1)
    carry = np.uint64(0)
    high = np.uint64(0)
    q = np.uint64(0)
    ntok = 0
    for base in range(0, n, BLOCK):
        m, h = _ascii_block(data, s + base, min(BLOCK, n - base), carry, lower, underscore, out, q)
        high |= h
        before = (m << one) | carry
        keep = m | before
        ends = before & ~m
        while ends:
            tok_end[ntok] = q + _bit_count(keep & ((ends & (np.uint64(0) - ends)) - one))
            ntok += 1
            ends &= ends - one
        q += _bit_count(keep)
        carry = m >> np.uint64(BLOCK - 1)
    if high:
        return np.int64(-1)
    if carry:  # the text ends inside a token, at a block's end
        out[q] = SEPARATOR
        tok_end[ntok] = q
        ntok += 1
    return _starts_within(np.int64(ntok), max_len, tok_start, tok_end)


@njit(**JIT, inline="always")
def _ascii_bytes(data, s, e, max_len, lower, alnum, out, tok_start, tok_end):
    """:func:`_ascii_simple` in two branch-free passes over the bytes, where the CPU has
    neither a byte compress nor 32-byte integer vectors (``kernels/cpu.py``). First every byte goes to ``out[q]`` (its
    lower-cased value inside a token, the separator outside) and ``q`` advances when the
    byte or the one before it is inside a token, so a run of separators leaves one and the
    leading ones none. Then token ``t`` ends at the ``t``-th separator of ``out`` (no
    alphanumeric byte is the separator). Indices are unsigned: no negative-index
    wraparound per byte. Faster than :func:`_ascii_words` (``docs/performance.md``)."""
    q = np.uint64(0)
    prev = np.uint64(0)
    high = np.uint8(0)
    low = np.uint8(32) if lower else np.uint8(0)
    for p in range(np.uint64(s), np.uint64(e)):
        b = data[p]
        high |= b
        a = np.uint64(alnum[b])
        out[q] = (b + (low if np.uint8(b - np.uint8(65)) < np.uint8(26) else np.uint8(0))) if a else SEPARATOR
        q += a | prev
        prev = a
    if high >= 0x80:
        return np.int64(-1)
    if prev:
        out[q] = SEPARATOR
        q += np.uint64(1)
    ntok = np.uint64(0)
    for i in range(q):
        tok_end[ntok] = i
        ntok += np.uint64(1) if out[i] == SEPARATOR else np.uint64(0)
    return _starts_within(np.int64(ntok), max_len, tok_start, tok_end)


@njit(**JIT)
def _ascii_simple(data, s, e, max_len, lower, alnum, out, tok_start, tok_end):
    """:func:`tokenize_doc` for the ``simple`` tokenizer (and the ``code`` tokenizer without
    operators or splitting: ``alnum`` holds ``_``) on an all-ASCII text, or ``-1`` when the
    text is not all ASCII or some token has ``>= max_len`` bytes (the caller then takes
    the general path): by 64-byte vectors (:func:`_ascii_vector`) where the CPU compresses
    bytes or has 32-byte integer vectors (``kernels/cpu.py``), else by a loop over the
    bytes (:func:`_ascii_bytes`). Buffers: ``out`` ``nbytes
    + ASCII_OUT_SLACK``, ``tok_start`` / ``tok_end`` ``nbytes // 2 + 1``. A function of its
    own, not inlined: in a loop that also calls :func:`tokenize_doc` (which returns new
    buffers) the byte loop ran slower."""
    if has_byte_compress() or has_vectors_256():
        return _ascii_vector(data, s, e, max_len, lower, alnum, out, tok_start, tok_end)
    return _ascii_bytes(data, s, e, max_len, lower, alnum, out, tok_start, tok_end)


@njit(**JIT, inline="always")
def tokenize_row(data, s, e, cfg, tables, out, tok_start, tok_end, raw):
    """:func:`tokenize_doc`, with the all-ASCII texts of the ``simple`` tokenizer and of the
    ``code`` tokenizer without operators or splitting (runs of ASCII alphanumerics and
    ``_``) taken by :func:`_ascii_simple` first: a call of :func:`tokenize_doc` per row (a
    tuple of new buffers returned, inside one large function) cost more than tokenizing a
    short text."""
    plain_code = cfg[0] == CODE and (cfg[7] & (CODE_OPERATORS | CODE_SPLIT)) == 0
    if cfg[0] == SIMPLE or plain_code:
        nbytes = e - s
        out = grow(out, nbytes + ASCII_OUT_SLACK)
        tok_start = grow(tok_start, nbytes // 2 + 1)
        tok_end = grow(tok_end, nbytes // 2 + 1)
        ntok = _ascii_simple(data, s, e, cfg[1], cfg[2], IDENT_ASCII if plain_code else tables[0], out,
                             tok_start, tok_end)
        if ntok >= 0:
            return ntok, out, tok_start, tok_end, raw
    return tokenize_doc(data, s, e, cfg, tables, out, tok_start, tok_end, raw)


@njit(**JIT, inline="always")
def is_valid(valid, valid_offset, row):
    """True when ``row`` is not NULL: its bit in an Arrow validity bitmap ``valid`` that
    starts at bit ``valid_offset`` (an empty bitmap: no NULL rows)."""
    if valid.size == 0:
        return True
    i = valid_offset + row
    return (valid[i >> 3] >> (i & 7)) & 1 == 1


@njit(**JIT, inline="always")
def row_tokens(offsets, data, valid, valid_offset, r, cfg, tables, out, tok_start, tok_end, raw):
    """:func:`tokenize_row` of row ``r`` of Arrow string buffers (``offsets``, ``data``, the
    validity bitmap ``valid`` from bit ``valid_offset``): a NULL row has no tokens. The
    row loop of every kernel that tokenizes a batch."""
    if not is_valid(valid, valid_offset, r):
        return np.int64(0), out, tok_start, tok_end, raw
    return tokenize_row(data, offsets[r], offsets[r + 1], cfg, tables, out, tok_start, tok_end, raw)


@njit(**JIT, inline="always")
def ascii_buffers(offsets, lo, hi):
    """``(out, tok_start, tok_end)`` for :func:`ascii_row_tokens` on every row of
    ``lo:hi``: sized once for the longest of them, so the row loop never grows (nor swaps)
    a buffer."""
    longest = 0
    for r in range(lo, hi):
        longest = max(longest, offsets[r + 1] - offsets[r])
    return (np.empty(longest + ASCII_OUT_SLACK, dtype=np.uint8), np.empty(longest // 2 + 1, dtype=np.int64),
            np.empty(longest // 2 + 1, dtype=np.int64))


@njit(**JIT, inline="always")
def ascii_row_tokens(offsets, data, r, max_len, lower, alnum, out, tok_start, tok_end):
    """The ``simple`` tokenizer's ASCII route (:func:`_ascii_simple`) on row ``r`` of Arrow
    string buffers, into buffers from :func:`ascii_buffers` for a range of rows holding
    ``r``: ``ntok``, or ``-1`` for a row that route cannot take (a non-ASCII byte, or a
    token of ``>= max_len`` bytes). The row loop of the kernels that take ASCII rows
    without the general tokenizer (``kernels/minhash.py``); no array is created or
    returned per row (each would be reference-counted, an atomic operation)."""
    return _ascii_simple(data, offsets[r], offsets[r + 1], max_len, lower, alnum, out, tok_start, tok_end)



# One function of this length on purpose: a single pass over a document's bytes (decode,
# classify, fold, cut) whose state would otherwise travel through many small functions that
# numba types again at each call site; compiled once, called by every signing kernel
# (kernels/config.py explains the cost of inlining it).
@njit(**JIT)
def tokenize_doc(data, s, e, cfg, tables, out, tok_start, tok_end, raw):
    """Tokens of ``data[s:e]``: returns ``(ntok, out, tok_start, tok_end, raw)``.

    Token ``t`` is ``out[tok_start[t]:tok_end[t]]``; ``raw`` is scratch. Two phases: the
    base tokenizer records original byte ranges in ``raw`` (``raw[2t]``, ``raw[2t+1]``,
    the end stored as ``-end - 1`` when the token has non-ASCII bytes); then each range
    is filtered by length and transformed into ``out``. Everything stays in this one
    function: an inlined helper taking arrays pays reference counting per
    token. Buffers are sized once per document from a bound: an input code point of
    ``n >= 2`` bytes becomes at most 2 lower-cased code points, each folding to at most
    5 ASCII bytes or encoding to at most 4, so a token grows at most 5 times (+1 separator).
    """
    kind = cfg[0]
    max_len = cfg[1]  # tokens of >= max_len bytes (before any transformation) are dropped
    lower = cfg[2]
    nbytes = e - s
    nraw = 0
    if kind == NGRAM:
        lo = cfg[4]
        hi = cfg[5]
        max_tokens = (1 if cfg[6] else nbytes) * (hi - lo + 1)
        raw = grow(raw, 2 * max_tokens + nbytes + 1)
        cpos = raw[2 * max_tokens:]  # char start positions
        nchars = 0
        p = s
        while p < e:
            cpos[nchars] = p
            nchars += 1
            _, p = decode(data, p, e)
        cpos[nchars] = e
        for i in range(min(1 if cfg[6] else nchars, nchars)):
            for n in range(lo, hi + 1):
                if i + n > nchars:
                    break
                ts = cpos[i]
                te = cpos[i + n]
                raw[2 * nraw] = ts
                raw[2 * nraw + 1] = te if _all_ascii(data, ts, te) else -te - 1
                nraw += 1
        out = grow(out, max_tokens * (5 * min(nbytes, 4 * hi) + 1))
    elif kind == CODE:
        # split identifiers and their parts: at most twice the text's bytes, in twice the tokens
        times = 2 if (cfg[7] & CODE_SPLIT) != 0 else 1
        raw = grow(raw, times * (2 * nbytes + 2))
        out = grow(out, times * 6 * nbytes + 1)
        nraw = code_tokens(data, s, e, cfg[7], tables[0], raw)
    elif kind == TOKENS:
        raw = grow(raw, nbytes // 2 + 2)
        out = grow(out, nbytes + 1)
        p = s
        while p + 4 <= e:
            length = (np.int64(data[p]) | (np.int64(data[p + 1]) << 8) | (np.int64(data[p + 2]) << 16)
                      | (np.int64(data[p + 3]) << 24))
            raw[2 * nraw] = p + 4
            raw[2 * nraw + 1] = p + 4 + length  # copied as it is: cfg has no limit, no lower-casing
            nraw += 1
            p += 4 + length
    else:
        raw = grow(raw, 2 * nbytes + 2)
        out = grow(out, 6 * nbytes + 1)
        if kind != RAW and _all_ascii(data, s, e):
            tok_start = grow(tok_start, nbytes // 2 + 1)
            tok_end = grow(tok_end, nbytes // 2 + 1)
            ntok = _ascii_words(data, s, e, kind, max_len, lower, tables[0], out, tok_start, tok_end)
            return ntok, out, tok_start, tok_end, raw
        if kind == RAW:
            raw[0] = s
            raw[1] = e if _all_ascii(data, s, e) else -e - 1
            nraw = 1
        else:
            alnum = tables[0]
            ts = -1
            ascii = True
            p = s
            while p < e:
                b0 = data[p]
                if kind == WHITESPACE:
                    inside = not _is_ascii_space(b0)
                    nxt = p + 1
                elif b0 < 0x80:
                    inside = alnum[b0] != 0
                    nxt = p + 1
                else:
                    cp, nxt = decode(data, p, e)
                    inside = alnum[cp] != 0
                if inside:
                    if ts < 0:
                        ts = p
                        ascii = True
                    if b0 >= 0x80:
                        ascii = False
                elif ts >= 0:
                    raw[2 * nraw] = ts
                    raw[2 * nraw + 1] = p if ascii else -p - 1
                    nraw += 1
                    ts = -1
                p = nxt
            if ts >= 0:
                raw[2 * nraw] = ts
                raw[2 * nraw + 1] = e if ascii else -e - 1
                nraw += 1
    tok_start = grow(tok_start, nraw)
    tok_end = grow(tok_end, nraw)
    q = np.int64(0)  # not a literal: a literal 0 would compile a second _transform_unicode
    ntok = 0
    for t in range(nraw):
        ts = raw[2 * t]
        te = raw[2 * t + 1]
        ascii = te >= 0
        if not ascii:
            te = -te - 1
        if max_len >= 0 and te - ts >= max_len:
            continue
        tok_start[ntok] = q
        if not ascii:
            q = _transform_unicode(data, ts, te, lower, cfg[3], tables, out, q)
        elif lower:
            for p in range(ts, te):
                b0 = data[p]
                out[q] = b0 + 32 if 65 <= b0 <= 90 else b0
                q += 1
        else:
            for p in range(ts, te):
                out[q] = data[p]
                q += 1
        tok_end[ntok] = q
        out[q] = SEPARATOR
        q += 1
        ntok += 1
    return ntok, out, tok_start, tok_end, raw


@njit(**JIT)
def new_buffers():
    """Initial scratch buffers for :func:`tokenize_doc` (they grow as needed)."""
    return (np.empty(4096, dtype=np.uint8), np.empty(512, dtype=np.int64),
            np.empty(512, dtype=np.int64), np.empty(1024, dtype=np.int64))
