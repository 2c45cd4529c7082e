"""Signatures and band keys against the known-answer vectors of docs/signatures.md, a slow
reference and Lance itself."""

from __future__ import annotations

import naive
import numpy as np
import pyarrow as pa
import pytest
import xxhash
from torture import TORTURE_TEXTS

from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index.sign import Signer, signatures_to_arrow
from lance_minhash_sql.kernels.minhash import coefficients
from lance_minhash_sql.kernels.xxh64 import xxh64


def hexes(values, width):
    return [f"{int(v):0{width}x}" for v in values]


def test_known_answer_coefficients():
    a, b, c = coefficients(4)
    assert hexes(a, 16) == ["bdd732262feb6e95", "47526757130f9f53", "09bc585a244823f3", "37e9671c45376d5d"]
    assert hexes(b, 16) == ["28efe333b266f103", "581ce1ff0e4ae394", "de4431fa3c80db06", "ccf635ee9e9e2fa4"]
    assert hexes(c, 16) == ["5705b8770b3d7dd5", "9e54d738297f77af", "3474724a775b19bf", "7e348a0e451650bf"]


def test_coefficients_prefix_property():
    a64, b64, c64 = coefficients(64)
    a128, b128, c128 = coefficients(128)
    assert (a64 == a128[:64]).all() and (b64 == b128[:64]).all()
    assert not (c64 == c128[:64]).all()
    ra, rb, rc = naive.splitmix_coefficients(128)
    assert a128.tolist() == ra and b128.tolist() == rb and c128.tolist() == rc


def test_known_answer_signatures_and_keys():
    signer = Signer(MinHashParams(num_hashes=4, num_bands=2, shingle_size=2))
    sigs, has = signer.sign(["The quick brown fox", "Fox"])
    assert has.all()
    assert hexes(sigs[0], 4) == ["b00f", "59d6", "511a", "cd2c"]
    assert hexes(sigs[1], 4) == ["2970", "d6db", "65f8", "adfc"]
    keys = signer.band_keys(sigs)
    assert hexes(keys[0], 16) == ["00f30f3501d458ea", "01aec5df28d04915"]
    assert hexes(keys[1], 16) == ["003cf6e803312eca", "017c5504fbc83f36"]


def test_xxh64_small_inputs_match_xxhash():
    """Every tail (32-byte stripes, 8-, 4- and 1-byte steps) at an offset, two seeds,
    and the u16 runs that band keys hash: small enough to run without the JIT, which the
    mutation run (scripts/mutation.sh) does."""
    from lance_minhash_sql.kernels.xxh64 import xxh64_u16_run

    buf = np.frombuffer(bytes(range(256)) * 2, dtype=np.uint8)[::-1].copy()
    for seed in (0, 2**64 - 1):
        for n in (0, 1, 3, 4, 5, 7, 8, 11, 12, 15, 31, 32, 33, 39, 63, 64, 71):
            assert int(xxh64(buf, 3, n, np.uint64(seed))) == xxhash.xxh64_intdigest(buf[3:3 + n].tobytes(), seed=seed)
    values = np.array([0, 1, 255, 256, 65535, 4660, 43981, 7], dtype=np.uint16)
    for count in (1, 3, 4, 7):
        want = xxhash.xxh64_intdigest(values[1:1 + count].astype("<u2").tobytes(), seed=42)
        assert int(xxh64_u16_run(values, 1, count, np.uint64(42))) == want


def test_xxh64_short_matches_xxhash_up_to_the_buffer_end():
    """The shingles' branch-free XXH64 (8 to 31 bytes) equals xxhash at every length and
    offset, on ranges that end at the buffer's last byte (its unused steps read inside
    the range only) and on ranges inside a longer buffer."""
    from lance_minhash_sql.kernels.xxh64 import xxh64_short

    rng = np.random.default_rng(11)
    for n in range(8, 32):
        for start in (0, 1, 5, 8):
            tight = rng.integers(0, 256, start + n, dtype=np.uint8)
            loose = np.concatenate([tight, rng.integers(0, 256, 40, dtype=np.uint8)])
            want = xxhash.xxh64_intdigest(tight[start:].tobytes(), seed=42)
            for buf in (tight, loose):
                assert int(xxh64_short(buf, start, n, np.uint64(42))) == want, (n, start, buf.size)


def test_xxh64_matches_reference_for_every_length():
    rng = np.random.default_rng(7)
    for n in range(0, 101):
        for seed in (0, 42, 2**64 - 1):
            buf = rng.integers(0, 256, n + 9, dtype=np.uint8)
            assert int(xxh64(buf, 5, n, np.uint64(seed))) == xxhash.xxh64_intdigest(buf[5:5 + n].tobytes(), seed=seed)
    big = rng.integers(0, 256, 10_000, dtype=np.uint8)
    assert int(xxh64(big, 0, big.size, np.uint64(42))) == xxhash.xxh64_intdigest(big.tobytes(), seed=42)


PARAMS = [
    MinHashParams(),
    MinHashParams(64, 8, 5),
    MinHashParams(1, 1, 1),
    MinHashParams(256, 256, 2),
    MinHashParams(96, 16, 2).with_tokenizer(base_tokenizer="whitespace"),
    MinHashParams().with_tokenizer(lower_case=False, ascii_folding=False, max_token_length=None),
    MinHashParams().with_tokenizer(ascii_folding=False),
    MinHashParams().with_tokenizer(max_token_length=5),
    MinHashParams().with_tokenizer(base_tokenizer="raw"),
    MinHashParams(shingle_size=2).with_tokenizer(base_tokenizer="ngram", min_ngram_length=3, max_ngram_length=3),
    MinHashParams(32, 4, 1).with_tokenizer(base_tokenizer="ngram", min_ngram_length=2, max_ngram_length=4,
                                           prefix_only=True),
]


def _param_id(p):
    t = p.tokenizer
    return f"{p.num_hashes}-{p.num_bands}-{p.shingle_size}-{t.base_tokenizer}-{t.max_token_length}-" \
           f"{int(t.lower_case)}{int(t.ascii_folding)}"


def assert_matches_native(native, texts, params):
    """Our signatures and band keys equal the native index's, row for row."""
    signer = Signer(params)
    sigs, has = signer.sign(pa.array(texts, type=pa.string()))
    rowids = native.signatures.column("_rowid").to_numpy()
    native_sigs = np.stack(native.signatures.column("signature").to_numpy(zero_copy_only=False)) \
        if len(rowids) else np.zeros((0, params.num_hashes), np.uint16)
    # single fragment, no deletions: row id == row offset
    assert np.flatnonzero(has).tolist() == rowids.tolist()
    assert (sigs[has] == native_sigs).all()
    keys = signer.band_keys(sigs[has])
    doc = np.repeat(np.arange(keys.shape[0], dtype=np.uint32), params.num_bands)
    flat = keys.reshape(-1)
    order = np.lexsort((doc, flat))
    assert (flat[order] == native.bands.column("band_key").to_numpy()).all()
    assert (doc[order] == native.bands.column("doc_id").to_numpy()).all()


@pytest.mark.parametrize("params", PARAMS, ids=_param_id)
def test_torture_corpus_matches_lance(native_index, params):
    table = pa.table({"id": np.arange(len(TORTURE_TEXTS)), "text": pa.array(TORTURE_TEXTS, pa.string())})
    native = native_index(table, params)
    assert native.signatures.num_rows > 25
    assert_matches_native(native, TORTURE_TEXTS, params)


@pytest.mark.parametrize("params", PARAMS[:1] + PARAMS[4:5], ids=_param_id)
def test_torture_corpus_matches_naive_reference(params):
    sigs, has = Signer(params).sign(TORTURE_TEXTS)
    for i, text in enumerate(TORTURE_TEXTS):
        ref = naive.signature(text, params)
        assert has[i] == (ref is not None), text
        if ref is not None:
            assert sigs[i].tolist() == ref, text
            assert Signer(params).band_keys(sigs[i:i + 1])[0].tolist() == naive.band_keys(ref, params.num_bands)


@pytest.mark.parametrize("options", [{}, {"max_token_length": 5}])
def test_ascii_rows_and_the_others_of_one_batch_match_the_reference_on_threads(options):
    """With the ``simple`` tokenizer the ASCII rows are signed by their own kernel and the
    others (non-ASCII text, a token of ``max_token_length`` bytes or more) by the general
    one: in a batch large enough for several threads, every row has the reference
    signature (Lance's tokens, xxhash)."""
    from lance_minhash_sql.core.tuning import PARALLEL_MIN_ROWS

    params = MinHashParams().with_tokenizer(**options)
    distinct = list(TORTURE_TEXTS) + ["plain ascii words here", "x" * 50 + " tail words", "naïve café text"]
    texts = [distinct[i % len(distinct)] for i in range(PARALLEL_MIN_ROWS + 1000)]
    sigs, has = Signer(params).sign(texts)
    ascii_rows = 0
    for i, text in enumerate(distinct):
        ref = naive.signature(text, params)
        rows = range(i, len(texts), len(distinct))
        assert all(has[r] == (ref is not None) for r in rows), text
        if ref is not None:
            assert all(sigs[r].tolist() == ref for r in rows), text
            ascii_rows += text.isascii()
    assert 0 < ascii_rows < len(distinct)


def test_tokens_match_lance_tokenize():
    for params in PARAMS:
        signer = Signer(params)
        for text in TORTURE_TEXTS:
            if text is not None:
                assert signer.tokens(text) == naive.lance_tokens(text, params.tokenizer), (text, params.tokenizer)


def test_nulls_and_tokenless_rows_have_no_signature():
    sigs, has = Signer(MinHashParams()).sign([None, "", "   ", "!!! ???", "😀", "x" * 100, "ok"])
    assert has.tolist() == [False] * 6 + [True]
    arr = signatures_to_arrow(sigs, has)
    assert arr.null_count == 6 and len(arr[6].as_py()) == 128


def test_sliced_and_large_string_arrays():
    texts = pa.array(["zero one two", None, "three four five six", "seven"] * 50, pa.string())
    signer = Signer(MinHashParams())
    full, has = signer.sign(texts)
    sl, has_sl = signer.sign(texts.slice(3, 101))
    assert (sl == full[3:104]).all() and (has_sl == has[3:104]).all()
    lg, has_lg = signer.sign(texts.cast(pa.large_string()))
    assert (lg == full).all() and (has_lg == has).all()
    chunked = pa.chunked_array([texts.slice(0, 7), texts.slice(7)])
    ch, _ = signer.sign(chunked)
    assert (ch == full).all()


@pytest.mark.parametrize("params", [PARAMS[0], PARAMS[1], PARAMS[4], PARAMS[9]], ids=_param_id)
def test_synthetic_corpus_matches_lance(native_index, params):
    from lance_minhash_sql.faces.corpus import generate_texts

    texts = generate_texts(0, 4000)
    native = native_index(pa.table({"text": texts}), params)
    assert native.signatures.num_rows == 4000
    assert_matches_native(native, texts.to_pylist(), params)


_ALPHABET = ("aZ09 _-'.,!?\t\n\x0b\x0c\r\x1f\u00a0\u00adéÉßẞİıΣσςΩÆæŁøÞ½①ⅫⓐＡ𝔸ᴀ\u0301\u0307\u094d"
             "हिन्दी東京한국😀👨\u200d👩\u200b\u2003\u3000\u2028\u0085ﬁ℃K")


def test_tokenizer_fuzzed_against_lance_tokenize():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    configs = [MinHashParams().with_tokenizer(**kw) for kw in (
        {}, {"max_token_length": 5}, {"lower_case": False}, {"ascii_folding": False},
        {"base_tokenizer": "whitespace"}, {"base_tokenizer": "raw"},
        {"base_tokenizer": "ngram", "min_ngram_length": 1, "max_ngram_length": 3},
        {"base_tokenizer": "ngram", "min_ngram_length": 2, "max_ngram_length": 4, "prefix_only": True},
    )]
    signers = [Signer(p) for p in configs]
    text = st.text(alphabet=st.sampled_from(_ALPHABET), max_size=40) | st.text(max_size=30)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text)
    def check(t):
        for p, signer in zip(configs, signers):
            assert signer.tokens(t) == naive.lance_tokens(t, p.tokenizer)

    check()


@pytest.mark.parametrize("options", [
    {}, {"max_token_length": 3}, {"max_token_length": None, "lower_case": False},
    {"base_tokenizer": "whitespace", "max_token_length": 4},
    {"base_tokenizer": "whitespace", "lower_case": False, "max_token_length": None},
])
def test_ascii_texts_tokenize_as_the_general_path_does(options):
    """An all-ASCII text takes the one-pass tokenizer; the same text followed by a
    non-ASCII token takes the general two-phase one: the tokens must agree, and so must
    the signatures of the ASCII texts with Lance's own (``test_signatures_match_lance``)."""
    signer = Signer(MinHashParams().with_tokenizer(**options))
    rng = np.random.default_rng(7)
    alphabet = list("aZ9 _-.\t\n\r\x0c\x1f'xYQ0") + ["abcdefgh", "  ", "XXXXXX"]
    taken = 0
    for _ in range(400):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(0, 25))))
        got = signer.tokens(text)
        general = signer.tokens(text + " \u00e9")  # é: one token 'e' (folded) or 'é'
        assert got == general[:-1], (text, options)
        taken += len(got)
    assert taken > 300


@pytest.mark.parametrize("rows", [len(TORTURE_TEXTS), 5000], ids=["one-thread", "threaded"])
def test_shingle_sets_match_naive_reference(rows):
    """CSR shingle sets (exact Jaccard's input) equal the sorted distinct XXH64 hashes of
    the reference shingles, on one thread and cut into chunks on several (past
    PARALLEL_MIN_ROWS), with NULL and tokenless rows empty."""
    params = PARAMS[0]
    texts = [TORTURE_TEXTS[i % len(TORTURE_TEXTS)] for i in range(rows)]
    texts = [t if i % 7 else f"{t or ''} row {i} repeated repeated repeated" for i, t in enumerate(texts)]
    offsets, hashes = Signer(params).shingle_sets(pa.array(texts, pa.string()))
    assert offsets.shape == (rows + 1,) and offsets[-1] == hashes.size
    for i, text in enumerate(texts):
        ref = [] if text is None else naive.shingles(naive.lance_tokens(text, params.tokenizer), params.shingle_size)
        expect = sorted({xxhash.xxh64_intdigest(s, seed=42) for s in ref})
        assert hashes[offsets[i]:offsets[i + 1]].tolist() == expect, text


def test_shingle_sets_of_ascii_rows_equal_the_general_kernels():
    """``Signer.shingle_sets`` takes rows of ASCII text by a kernel of their own and the
    others (non-ASCII text, a token of max_token_length bytes or more) by the general
    one: the merged sets, in row order over several threads' chunks, equal those of the
    general kernel over every row."""
    from lance_minhash_sql.core.tuning import PARALLEL_MIN_ROWS
    from lance_minhash_sql.io.arrow import string_buffers
    from lance_minhash_sql.kernels import minhash

    signer = Signer(MinHashParams())
    long_word = "x" * 45  # past the default max_token_length of 40
    kinds = ["plain ascii words here and there", "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e", None, "",
             f"with a {long_word} token", "!!!", "one"]
    texts = pa.array([f"{kinds[i % len(kinds)] or ''} row {i}" if i % 11 else kinds[i % len(kinds)]
                      for i in range(PARALLEL_MIN_ROWS + 1500)], pa.string())
    offsets, hashes = signer.shingle_sets(texts)
    buf = string_buffers(texts)
    sizes, want = minhash.shingle_sets_range(buf.offsets, buf.data, buf.valid, buf.valid_offset, signer.cfg,
                                             signer.tables, signer.params.shingle_size, 0, len(texts))
    assert np.array_equal(np.diff(offsets), sizes)
    assert np.array_equal(hashes, want)
    assert (sizes > 0).sum() > len(texts) // 2 and (sizes == 0).any()


@pytest.mark.parametrize("options", [
    {}, {"lower_case": False}, {"max_token_length": 6}, {"max_token_length": None},
])
def test_ascii_route_tokens_match_lance_across_vector_blocks(options):
    """The ``simple`` tokenizer's ASCII route (``kernels/tokenize.py: ascii_row_tokens``,
    64 bytes a step where the CPU has a vector route, kernels/cpu.py) gives Lance's tokens on texts of 0 to
    300 bytes, tokens crossing the 64-byte blocks and texts ending on one; a text it
    cannot take (a non-ASCII byte, a token too long) answers -1."""
    from lance_minhash_sql.io.arrow import string_buffers
    from lance_minhash_sql.kernels.tokenize import ascii_buffers, ascii_row_tokens

    params = MinHashParams().with_tokenizer(**options)
    unlimited = params.with_tokenizer(max_token_length=None).tokenizer
    signer = Signer(params)
    cfg = signer.cfg
    rng = np.random.default_rng(5)
    alphabet = list("aZ9 _-.\t\x1f\x7f@[`{/:0Yq") + ["abcdefgh", "  ", "XXXXXXXXXXX", ", "]
    texts = ["", "a", "x" * 64, "y" * 63 + " ", " " + "z" * 64, "ab " * 43, "Q" * 128, "é", "ok é"]
    while len(texts) < 300:
        t = "".join(rng.choice(alphabet, size=int(rng.integers(0, 60))))[:300]
        texts.append(t[:int(rng.choice([len(t), 64, 128, 192]))])
    buf = string_buffers(pa.array(texts, type=pa.string()))
    out, starts, ends = ascii_buffers(buf.offsets, 0, len(texts))
    taken = 0
    for r, text in enumerate(texts):
        ntok = ascii_row_tokens(buf.offsets, buf.data, r, cfg[1], cfg[2], signer.tables[0], out, starts, ends)
        want = naive.lance_tokens(text, params.tokenizer)
        limit = cfg[1] if cfg[1] >= 0 else len(text) + 1
        if not text.isascii() or any(len(t) >= limit for t in naive.lance_tokens(text, unlimited)):
            assert ntok == -1, text
            continue
        raw = out.tobytes()
        assert [raw[starts[t]:ends[t]].decode() for t in range(ntok)] == want, text
        assert all(raw[ends[t]] == 0x1F for t in range(ntok)), text
        taken += ntok
    assert taken > 100


def test_shingle_hashes_match_xxhash_for_every_length():
    """The shingles' hashes (``kernels/minhash.py: shingle_hashes_into``, eight at a time
    where the CPU multiplies 64-bit lanes) equal xxhash's XXH64 for shingles of 1 to 60
    bytes, in every lane of a block of eight and in a last block of fewer, with nothing
    written outside ``dest[pos:pos + count]``."""
    from lance_minhash_sql.kernels.minhash import shingle_hashes_into

    rng = np.random.default_rng(13)
    for trial in range(400):
        ntok = int(rng.integers(1, 21))
        lengths = rng.integers(1, 16 if trial % 2 else 6, ntok)
        out = rng.integers(0, 256, int(lengths.sum()) + ntok, dtype=np.uint8)
        ends = np.cumsum(lengths + 1) - 1
        starts = ends - lengths
        shingle = int(rng.integers(1, 5))
        w = min(shingle, ntok)
        count = ntok - w + 1
        dest = np.zeros(count + 4, dtype=np.uint64)
        assert shingle_hashes_into(out, starts, ends, ntok, shingle, dest, np.int64(2)) == 2 + count
        want = [xxhash.xxh64_intdigest(out[starts[s]:ends[s + w - 1]].tobytes(), seed=42) for s in range(count)]
        assert [int(v) for v in dest[2:2 + count]] == want, trial
        assert not dest[:2].any() and not dest[2 + count:].any()


@pytest.mark.parametrize("num_bands,num_hashes", [(16, 128), (20, 160), (8, 64), (5, 40), (3, 48)])
def test_band_keys_match_xxhash(num_bands, num_hashes):
    """Band keys (bands of 16 bytes eight at a time where the CPU multiplies 64-bit lanes,
    a last block of fewer, other widths one at a time) equal Lance's rule over xxhash, on
    contiguous rows and on rows of a wider matrix."""
    from lance_minhash_sql.kernels import similarity

    rng = np.random.default_rng(num_bands)
    wide = rng.integers(0, 256, (60, 2 * num_hashes + 10), dtype=np.uint8)
    for rows in (np.ascontiguousarray(wide[:, :2 * num_hashes]), wide[:, 10:]):
        w = rows.shape[1] // num_bands
        want = np.array([[(j << 56) | (xxhash.xxh64_intdigest(rows[i, j * w:(j + 1) * w].tobytes(), seed=42)
                                       & 0x00FFFFFFFFFFFFFF) for j in range(num_bands)] for i in range(len(rows))],
                        dtype=np.uint64)
        assert (similarity.band_keys_serial(rows, num_bands) == want).all()
        assert (similarity.band_keys(rows, num_bands) == want).all()


_OTHER_CPU = r"""
import sys
import numpy as np
import pyarrow as pa
from numba.core.registry import cpu_target
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index.sign import Signer
from lance_minhash_sql.kernels.cpu import BYTE_COMPRESS, VECTORS_256, WIDE_MULTIPLY, target_has

routes = [target_has(cpu_target.target_context, *f) for f in (BYTE_COMPRESS, WIDE_MULTIPLY, VECTORS_256)]
texts = np.load(sys.argv[1], allow_pickle=True)["texts"].tolist()
out = {}
for name, options in (("simple", {}), ("stem", {"stem": True, "remove_stop_words": True})):
    signer = Signer(MinHashParams().with_tokenizer(**options))
    sigs, has = signer.sign(pa.array(texts, type=pa.string()))
    out[name + "_sigs"], out[name + "_has"], out[name + "_keys"] = sigs, has, signer.band_keys(sigs[has])
np.savez(sys.argv[2], routes=np.array(routes), **out)
"""


def _host_features_without(*prefixes: str) -> str:
    """The host CPU's LLVM feature string with every feature starting with one of
    ``prefixes`` turned off."""
    from llvmlite import binding

    return ",".join(("-" + f[1:]) if any(f[1:].startswith(p) for p in prefixes) else f
                    for f in binding.get_host_cpu_features().flatten().split(","))


@pytest.mark.parametrize("cpu,off,routes", [
    ("haswell", ("avx512", "amx", "evex512"), [False, False, True]),  # AVX2 only: the 32-byte routes
    ("x86-64", ("avx", "amx", "evex512", "fma", "f16c", "vaes", "vpclmulqdq"), [False, False, False]),  # no AVX
], ids=["avx2", "sse"])
def test_cpus_without_avx512_sign_the_same(cpu, off, routes):
    """The vector routes (``kernels/cpu.py``: the 64-byte tokenizer blocks, the eight-lane
    shingle and band key hashes) are compiled only for a CPU that has their features; a
    process compiled for an AVX2-only CPU (``NUMBA_CPU_NAME=haswell``, every AVX-512
    feature off: the routes of 32-byte vectors) or for one without AVX (the scalar
    routes, and the minima's LLVM vectors on 16-byte registers) must give the same
    signatures and band keys as this process, on mixed ASCII and non-ASCII texts, with
    and without stemming."""
    import os
    import subprocess
    import sys
    import tempfile

    rng = np.random.default_rng(17)
    words = ["the", "quick", "brown", "fox", "Jumps", "over", "lazy", "dogs", "naïve", "café", "東京", "x" * 70,
             "running", "runs", "a", "it's", "e-mail", "42", "über", "data_set"]
    texts = [" ".join(rng.choice(words, int(rng.integers(0, 60)))) for _ in range(3000)]
    texts += [t for t in TORTURE_TEXTS if isinstance(t, str)]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "texts.npz"), os.path.join(tmp, "other.npz")
        np.savez(src, texts=np.array(texts, dtype=object))
        env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=_host_features_without(*off))
        subprocess.run([sys.executable, "-c", _OTHER_CPU, src, dst], check=True, env=env)
        other = dict(np.load(dst))
    assert other["routes"].tolist() == routes  # the routes compiled there
    for name, options in (("simple", {}), ("stem", {"stem": True, "remove_stop_words": True})):
        signer = Signer(MinHashParams().with_tokenizer(**options))
        sigs, has = signer.sign(pa.array(texts, type=pa.string()))
        assert np.array_equal(has, other[name + "_has"]) and has.sum() > 2500
        assert np.array_equal(sigs[has], other[name + "_sigs"][has])
        assert np.array_equal(signer.band_keys(sigs[has]), other[name + "_keys"])


_AVX512_COMPILE = r"""
import json
import numba
import numpy as np
import pyarrow as pa
from numba.core.registry import cpu_target
from lance_minhash_sql.core.params import MinHashParams
from lance_minhash_sql.index.sign import Signer
from lance_minhash_sql.kernels import minhash, similarity
from lance_minhash_sql.kernels.config import load_numba
from lance_minhash_sql.kernels.cpu import BYTE_COMPRESS, VECTORS_256, WIDE_MULTIPLY, target_has

load_numba()
signer = Signer(MinHashParams())
buf, cfg = signer.inputs(pa.array(["The quick brown fox"], type=pa.string()))
sigs, has = np.zeros((1, 128), np.uint16), np.zeros(1, np.bool_)
sign_args = (buf.offsets, buf.data, buf.valid, buf.valid_offset, cfg[1], cfg[2], signer.tables[0], 3,
             signer.a, signer.b, signer.c, sigs, has, np.zeros(1, np.bool_), 0, 1)
rows = np.zeros((1, 256), np.uint8)
found = {}
for name, kernel, args in (("sign", minhash.sign_ascii_range, sign_args),
                           ("keys", similarity.band_keys_serial, (rows, 16))):
    sig = tuple(numba.typeof(a) for a in args)
    kernel.compile(sig)  # compiled only: this CPU may lack the instructions
    asm = kernel.inspect_asm(sig)
    found[name] = sorted(op for op in ("vpcompressb", "vpmullq") if op in asm)
routes = [target_has(cpu_target.target_context, *f) for f in (BYTE_COMPRESS, WIDE_MULTIPLY, VECTORS_256)]
print(json.dumps({"routes": routes, **found}))
"""


def test_avx512_routes_compile_for_an_avx512_cpu():
    """The AVX-512 routes (``kernels/cpu.py``: the tokenizer's ``vpcompressb`` blocks, the
    ``vpmullq`` lanes of the shingle and band key hashes) compile for an AVX-512 CPU
    (``NUMBA_CPU_NAME=icelake-server``) on any machine: compiled in a process of its own,
    never run (this machine may lack them; the other tests run the route of its own CPU),
    and their instructions are in the code."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    features = "+avx2,+avx512f,+avx512dq,+avx512bw,+avx512vl,+avx512vbmi2"
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CPU_NAME="icelake-server", NUMBA_CPU_FEATURES=features, NUMBA_CACHE_DIR=cache,
                   LANCE_MINHASH_COMPILE_AHEAD="0", LANCE_MINHASH_COMPILE_NOTICE="0")
        proc = subprocess.run([sys.executable, "-c", _AVX512_COMPILE], check=True, env=env, capture_output=True,
                              text=True)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["routes"] == [True, True, True]
    assert got["sign"] == ["vpcompressb", "vpmullq"]
    assert got["keys"] == ["vpmullq"]
