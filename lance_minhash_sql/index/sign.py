"""The signature engine: tokenizer tables, coefficients and kernels for one parameter set.

>>> from lance_minhash_sql.core.params import MinHashParams
>>> signer = Signer(MinHashParams(num_hashes=4, num_bands=2, shingle_size=2))
>>> signer.tokens("The Running Café ½")
['the', 'running', 'cafe', '12']
>>> sigs, has = signer.sign(["The quick brown fox", None])
>>> [f"{v:04x}" for v in sigs[0]], has.tolist()
(['b00f', '59d6', '511a', 'cd2c'], [True, False])
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import replace
from functools import cached_property
from types import MappingProxyType

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.errors import LanceMinHashError
from lance_minhash_sql.core.params import KERNEL_TOKENIZERS, MinHashParams, TokenizerParams
from lance_minhash_sql.core.tuning import SIGN_CHUNK_ROWS, TOKEN_MEMORY
from lance_minhash_sql.io.arrow import StringBuffers, as_string_array, string_buffers
from lance_minhash_sql.io.tokens import filtered_tokens, token_streams
from lance_minhash_sql.io.unicode_tables import load_tables
from lance_minhash_sql.index.numpy_sign import (NUMPY_SECONDS, band_key_seconds, band_keys_numpy, numpy_pays,
                                               sign_numpy, text_seconds)
from lance_minhash_sql.kernels import code_tokens, minhash, similarity, tokenize, vocab, vocab_sign
from lance_minhash_sql.runtime.cache import memoized
from lance_minhash_sql.runtime.threads import chunk_results, in_chunks

__all__ = ["Signer", "signer_for", "sign_by_cost", "tokenizer_config"]

if sys.byteorder != "little":  # band keys hash the u16 signature bytes as little-endian
    raise ImportError("lance_minhash_sql requires a little-endian machine")


_KINDS = MappingProxyType({"simple": tokenize.SIMPLE, "whitespace": tokenize.WHITESPACE,
          "raw": tokenize.RAW, "ngram": tokenize.NGRAM, "code": tokenize.CODE})
_TOKENS_CFG = (int(tokenize.TOKENS), -1, False, False, 1, 1, False, 0)


def tokenizer_config(tok: TokenizerParams) -> tuple:
    """The kernels' ``cfg`` tuple for a tokenizer; a tokenizer whose tokens Lance makes
    (``TokenizerParams.lance_made``) takes its final tokens as they are."""
    if tok.lance_made:
        return _TOKENS_CFG
    code = ((code_tokens.CODE_OPERATORS if tok.index_operators else 0)
            | (code_tokens.CODE_SPLIT if tok.split_identifiers else 0)
            | (code_tokens.CODE_NUMERICS if tok.split_on_numerics else 0)
            | (code_tokens.CODE_ORIGINAL if tok.preserve_original else 0))
    return (
        int(_KINDS[tok.base_tokenizer]),
        -1 if tok.max_token_length is None else int(tok.max_token_length),
        bool(tok.lower_case),
        bool(tok.ascii_folding),
        int(tok.min_ngram_length),
        int(tok.max_ngram_length),
        bool(tok.prefix_only),
        int(code),
    )


def _concatenated(parts: list[tuple[np.ndarray, np.ndarray]], valid: np.ndarray, valid_offset: int) -> StringBuffers:
    """One buffer of the ``(offsets, data)`` streams of consecutive row ranges."""
    offsets = [np.zeros(1, dtype=np.int64)]
    end = 0
    for off, data in parts:
        offsets.append(off[1:] + end)
        end += data.size
    offsets_all = np.concatenate(offsets)
    data_all = np.concatenate([d for _, d in parts]) if parts else np.empty(0, dtype=np.uint8)
    offsets_all, data_all = readonly(offsets_all), readonly(data_all)  # as the kernels take them
    return StringBuffers(offsets_all, data_all, valid, valid_offset)


def _grown(arr: np.ndarray, need: int) -> np.ndarray:
    """``arr``, or a copy at least twice as large when it holds fewer than ``need`` items."""
    if arr.size >= need:
        return arr
    out = np.empty(max(need, 2 * arr.size), dtype=arr.dtype)
    out[:arr.size] = arr
    return out


class _Vocabulary:
    """The distinct base tokens a signer has seen and their form after Lance's filters,
    across batches (``kernels/vocab.py``): token ``i`` is ``vocab[voff[i]:voff[i+1]]``, with
    a slot in the table ``slots`` and the record ``records[i]`` (``vocab.RECORD``: its hash
    and leading bytes, and its filtered form's, whose bytes are also in ``fbytes``). A
    corpus's vocabulary grows much more slowly than its rows, so each batch asks Lance
    about its new tokens only, under the signer's tokenizer options (``options``, as
    ``io/tokens.py: filtered_tokens`` takes them). Beyond ``TOKEN_MEMORY`` tokens it starts
    over. One batch at a time (:attr:`lock`): threads signing with one signer share it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.nv = 0
        self.slots = np.full(1 << 12, -1, dtype=np.int32)
        self.records = np.zeros((self.slots.size // 2, vocab.RECORD), dtype=np.uint64)
        self.vocab = np.empty(0, dtype=np.uint8)
        self.voff = np.zeros(1, dtype=np.int64)
        self.fbytes = np.empty(0, dtype=np.uint8)
        self.fused = 0  # bytes of fbytes in use

    def streams(self, buf: StringBuffers, cfg: tuple, tables: tuple, options: dict) -> tuple[np.ndarray, np.ndarray]:
        """``(offsets, data)``: each row's ``TOKENS`` stream of filtered tokens."""
        with self.lock:
            row_offsets, ids = self.add(buf, cfg, tables, options)
            return vocab.vocab_streams(row_offsets, ids, self.records, self.fbytes)

    def add(self, buf: StringBuffers, cfg: tuple, tables: tuple, options: dict) -> tuple[np.ndarray, np.ndarray]:
        """``(row_offsets, ids)``: each row's base tokens as vocabulary ids, the new ones
        added with their filtered form; the caller holds :attr:`lock`."""
        row_offsets, nbytes = vocab.count_tokens(buf.offsets, buf.data, buf.valid, buf.valid_offset, cfg, tables)
        total = int(row_offsets[-1])
        if self.nv > TOKEN_MEMORY:
            self.reset()
        nv = self.nv
        self.voff = _grown(self.voff, nv + total + 1)
        self.vocab = _grown(self.vocab, int(self.voff[nv]) + int(nbytes))
        ids = np.empty(total, dtype=np.int64)
        new_nv, self.slots, self.records = vocab.assign_ids(buf.offsets, buf.data, cfg, tables, row_offsets,
                                                            self.slots, ids, self.vocab, self.voff, self.records, nv)
        if new_nv > nv:
            self._map(nv, new_nv, options)
        self.nv = new_nv
        return row_offsets, ids

    def arrays(self) -> tuple:
        """The arrays :func:`..kernels.vocab_sign.sign_vocab_range` reads."""
        return self.slots, self.records, self.vocab, self.voff, self.fbytes

    def _map(self, lo: int, hi: int, options: dict) -> None:
        """Lance's filtered form of the new tokens ``lo:hi``."""
        base = int(self.voff[lo])
        raw = self.vocab[base:int(self.voff[hi])].tobytes()
        cuts = (self.voff[lo:hi + 1] - base).tolist()
        words = [raw[cuts[i]:cuts[i + 1]].decode("utf-8") for i in range(hi - lo)]
        found = [None if t is None else t.encode("utf-8") for t in filtered_tokens(words, options)]
        sizes = np.array([-1 if t is None else len(t) for t in found], dtype=np.int64)
        added = b"".join(t for t in found if t is not None)
        rec = self.records[lo:hi]
        rec[:, vocab.REC_FORM_WORD0:vocab.REC_FORM_WORD1 + 1] = np.frombuffer(b"".join((t or b"")[:vocab.INLINE].ljust(vocab.INLINE, b"\0") for t in found),
                                    dtype="<u8").reshape(-1, 2)
        rec[:, vocab.REC_FORM_LENGTH] = (sizes + 1).astype(np.uint64)
        rec[:, vocab.REC_FORM_START] = (self.fused + np.cumsum(np.maximum(sizes, 0)) - np.maximum(sizes, 0)).astype(np.uint64)
        self.fbytes = _grown(self.fbytes, self.fused + len(added))
        self.fbytes[self.fused:self.fused + len(added)] = np.frombuffer(added, dtype=np.uint8)
        self.fused += len(added)


class Signer:
    """Signs Arrow string arrays with one :class:`MinHashParams`.

    Where the tokens come from: the numba tokenizer for the ``simple``, ``whitespace``,
    ``raw``, ``ngram`` and ``code`` pipelines (``code`` with ``split_identifiers``: on rows
    of ASCII text); with stemming or stop-word removal after one of them (not a split
    ``code``), the numba base tokenizer and Lance's filter chain applied once per distinct
    token (remembered across batches); for ``icu`` and ``icu/split`` (rows of plain ASCII
    text as ``simple``) and the other rows, Lance's tokenizer per row
    (docs/signatures.md, "Where the tokens come from").
    """

    def __init__(self, params: MinHashParams):
        self.params = params
        tok = params.tokenizer
        # the route, resolved once: which rows the kernels tokenize, under which cfg
        self.cfg = tokenizer_config(tok)
        # icu rows the simple tokenizer segments alike (kernels/vocab.icu_simple_rows) take
        # the kernel route of the same options with the simple base tokenizer
        self.icu = tok.base_tokenizer in ("icu", "icu/split")
        # the kernels cut identifiers by ASCII letter case (kernels/code_tokens.py: code_tokens):
        # a split code tokenizer takes the kernel route on rows of ASCII text only
        code_split = tok.base_tokenizer == "code" and tok.split_identifiers
        kernel_tok = replace(tok, base_tokenizer="simple") if self.icu else tok
        self.per_token = ((tok.stem or tok.remove_stop_words) and kernel_tok.base_tokenizer in KERNEL_TOKENIZERS
                          and not code_split)
        # rows split between the kernels and Lance's tokenizer (_routed)
        self.routed = self.icu or (code_split and not tok.lance_made)
        if self.per_token:
            self.base_cfg = tokenizer_config(replace(kernel_tok, max_token_length=None, lower_case=False,
                                                     ascii_folding=False, stem=False, remove_stop_words=False))
            self.vocabulary = _Vocabulary()
        elif self.routed:
            self.kernel_cfg = tokenizer_config(kernel_tok)
            self.cfg = _TOKENS_CFG
        # where the kernels' input comes from (:meth:`inputs`), one route per signer
        # (the class's function, called with the signer: a bound method kept on the instance
        # makes the signer a reference cycle, left to the garbage collector)
        self._inputs = (Signer._routed_inputs if self.routed else Signer._mapped_inputs if self.per_token
                        else Signer._lance_inputs if tok.lance_made else Signer._text_inputs)
        # what every route reads: the signature coefficients and the options under which
        # Lance's own tokenizer (and its filters) run this pipeline (io/tokens.py)
        self.a, self.b, self.c = minhash.coefficients(params.num_hashes)
        self.lance_options = tok.lance_tokenize_kwargs()

    @cached_property
    def tables(self) -> tuple:
        """The tokenizer's code-point tables (``io/unicode_tables.py``), loaded on the first
        kernel call: signing a few queries with Lance's tokenizer needs none."""
        return tuple(load_tables())

    def inputs(self, texts) -> tuple[StringBuffers, tuple]:
        """``(buffers, cfg)``: what the kernels read for these texts, by the signer's one
        route: the texts' Arrow buffers (:meth:`_text_inputs`), or ``TOKENS`` streams of
        Lance's tokenizer (:meth:`_lance_inputs`), of base tokens mapped through Lance's
        filters (:meth:`_mapped_inputs`), or of rows split between the kernels and Lance
        (:meth:`_routed_inputs`)."""
        return self._inputs(self, texts)

    def _text_inputs(self, texts) -> tuple[StringBuffers, tuple]:
        """The texts' Arrow buffers under :attr:`cfg`: the kernels tokenize them."""
        return string_buffers(texts), self.cfg

    def _lance_inputs(self, texts) -> tuple[StringBuffers, tuple]:
        """A tokenizer whose tokens Lance makes: the token streams of Lance's tokenizer
        (``io/tokens.py``)."""
        return token_streams(texts, self.lance_options), self.cfg

    def _mapped_inputs(self, texts) -> tuple[StringBuffers, tuple]:
        """Stemming or stop-word removal after a kernel base tokenizer: :meth:`_mapped`."""
        return self._mapped(string_buffers(texts)), self.cfg

    def _routed_inputs(self, texts) -> tuple[StringBuffers, tuple]:
        """``icu`` / ``icu/split`` and a split ``code`` tokenizer: :meth:`_routed`, or,
        without stemming or stop words, when every row takes the kernel route
        (:meth:`_kernel_rows`), the texts themselves under the kernels' pipeline (no token
        streams to build)."""
        buf = string_buffers(texts)
        if not self.per_token and self._kernel_rows(buf).all():
            return buf, self.kernel_cfg
        return self._routed(texts, buf), self.cfg

    def _kernel_rows(self, buf: StringBuffers) -> np.ndarray:
        """``bool[n]``: the rows the kernels tokenize exactly as Lance: for ``icu``, rows of
        plain ASCII text whose words are the ``simple`` tokenizer's
        (``kernels/vocab.icu_simple_rows``); for a split ``code`` tokenizer, rows of ASCII text."""
        if self.icu:
            return vocab.icu_simple_rows(buf.offsets, buf.data, buf.valid, buf.valid_offset)
        return vocab.ascii_rows(buf.offsets, buf.data)

    def _routed(self, texts, buf: StringBuffers) -> StringBuffers:
        """``TOKENS`` streams for ``icu`` / ``icu/split`` and a split ``code`` tokenizer
        (``buf``: the texts' buffers): the kernel route for the rows :meth:`_kernel_rows`
        picks, Lance's tokenizer for the others."""
        kernel_rows = self._kernel_rows(buf)
        everyone = bool(kernel_rows.all())
        valid, offset = buf.valid, buf.valid_offset
        if not everyone:  # the kernel route skips the other rows as if they were NULL
            live = kernel_rows.copy()
            if buf.valid.size:
                rows = np.arange(kernel_rows.size) + buf.valid_offset
                live &= ((buf.valid[rows >> 3] >> (rows & 7)) & 1).astype(np.bool_)
            valid, offset = np.packbits(live, bitorder="little"), 0
            valid = readonly(valid)
        if self.per_token:
            mine = self._mapped(StringBuffers(buf.offsets, buf.data, valid, offset))
        else:
            def chunk(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
                return vocab.kernel_streams(buf.offsets[lo:hi + 1], buf.data, valid, offset + lo,
                                            self.kernel_cfg, self.tables)

            mine = _concatenated(chunk_results(chunk, len(buf.offsets) - 1), valid, offset)
        if everyone:
            return StringBuffers(mine.offsets, mine.data, buf.valid, buf.valid_offset)
        others = as_string_array(texts).take(pa.array(np.flatnonzero(~kernel_rows)))
        lances = token_streams(others, self.lance_options)
        kernel_rows = readonly(kernel_rows)
        off, data = vocab.merge_streams(mine.offsets, mine.data, lances.offsets, lances.data, kernel_rows)
        off, data = readonly(off), readonly(data)
        return StringBuffers(off, data, buf.valid, buf.valid_offset)

    def _mapped(self, buf: StringBuffers) -> StringBuffers:
        """``TOKENS`` streams of base tokens mapped through Lance's filters, each distinct
        token once (``kernels/vocab.py``, :class:`_Vocabulary`)."""
        off, data = self.vocabulary.streams(buf, self.base_cfg, self.tables, self.lance_options)
        off, data = readonly(off), readonly(data)
        return StringBuffers(off, data, buf.valid, buf.valid_offset)

    def sign(self, texts) -> tuple[np.ndarray, np.ndarray]:
        """``(signatures uint16[n, k], has_signature bool[n])`` of strings (NULL → no signature)."""
        if self.per_token and not self.icu:
            return self._sign_through_vocab(string_buffers(texts))
        buf, cfg = self.inputs(texts)
        n = len(buf.offsets) - 1
        sigs = np.zeros((n, self.params.num_hashes), dtype=np.uint16)
        has = np.zeros(n, dtype=np.bool_)
        rows = (buf.offsets, buf.data, buf.valid, buf.valid_offset)
        hashes = (self.params.shingle_size, self.a, self.b, self.c, sigs, has)
        if cfg[0] != tokenize.SIMPLE:
            in_chunks(lambda lo, hi: minhash.sign_range(*rows, cfg, self.tables, *hashes, lo, hi), n, SIGN_CHUNK_ROWS)
            return sigs, has
        todo = np.zeros(n, dtype=np.bool_)

        def ascii_first(lo: int, hi: int) -> None:
            """Rows ``lo:hi``: ASCII text by a kernel without the general tokenizer, then the
            rows it leaves (``todo``) by the general kernel, their bitmap starting at row ``lo``."""
            minhash.sign_ascii_range(*rows, cfg[1], cfg[2], self.tables[0], *hashes, todo, lo, hi)
            left = todo[lo:hi]
            if left.any():
                minhash.sign_range(buf.offsets, buf.data, readonly(np.packbits(left, bitorder="little")), -lo, cfg,
                                   self.tables, *hashes, lo, hi)

        in_chunks(ascii_first, n, SIGN_CHUNK_ROWS)
        return sigs, has

    def _sign_through_vocab(self, buf: StringBuffers) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sign` with stemming or stop-word removal after a kernel base tokenizer:
        rows signed straight from the vocabulary (``kernels/vocab_sign.py``) on every core; the
        rows with a token it lacks add their tokens (:meth:`_Vocabulary.add`, Lance's
        filters once per new token) and are signed again. One batch at a time holds the
        vocabulary, so no thread reads it while it grows."""
        n = len(buf.offsets) - 1
        sigs = np.zeros((n, self.params.num_hashes), dtype=np.uint16)
        has = np.zeros(n, dtype=np.bool_)
        words = self.vocabulary
        with words.lock:
            pending = self._sign_known(buf.offsets, buf.data, buf.valid, buf.valid_offset, sigs, has)
            if pending.any():
                live = np.packbits(pending, bitorder="little")
                live = readonly(live)
                words.add(StringBuffers(buf.offsets, buf.data, live, 0), self.base_cfg, self.tables, self.lance_options)
                if self._sign_known(buf.offsets, buf.data, live, 0, sigs, has).any():
                    raise LanceMinHashError("a token added to the vocabulary was not found in it: please report this")
        return sigs, has

    def _sign_known(self, offsets, data, valid, valid_offset, sigs, has) -> np.ndarray:
        """``pending bool[n]`` after signing, with the vocabulary as it is, every row whose
        tokens it holds (``kernels/vocab_sign.py``); the caller holds the vocabulary's lock."""
        n = len(offsets) - 1
        pending = np.zeros(n, dtype=np.bool_)
        args = (offsets, data, valid, valid_offset, self.base_cfg, self.tables, self.params.shingle_size,
                self.a, self.b, self.c, *self.vocabulary.arrays(), sigs, has, pending)
        in_chunks(lambda lo, hi: vocab_sign.sign_vocab_range(*args, lo, hi), n, SIGN_CHUNK_ROWS)
        return pending

    def sign_with_keys(self, texts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(signatures uint16[n, k], has_signature bool[n], band keys uint64[n, num_bands])``
        of strings: :meth:`sign`, then :meth:`band_keys`."""
        sigs, has = self.sign(texts)
        return sigs, has, self.band_keys(sigs)

    def band_keys(self, signatures: np.ndarray) -> np.ndarray:
        """``uint64[n, num_bands]`` band keys of a signature matrix: by the kernels, or by
        numpy (``index/numpy_sign.py``) while that costs less than loading numba (a small
        build's signatures, signed there)."""
        if numpy_pays(band_key_seconds(signatures.shape[0], self.params.num_bands)):
            t0 = time.thread_time()
            keys = band_keys_numpy(signatures, self.params.num_bands)
            NUMPY_SECONDS.add(time.thread_time() - t0)
            return keys
        sig = np.ascontiguousarray(signatures, dtype=np.uint16)
        rows = sig.view(np.uint8).reshape(sig.shape[0], -1)
        nb = self.params.num_bands
        keys = np.empty((rows.shape[0], nb), dtype=np.uint64)

        def chunk(lo: int, hi: int) -> None:
            keys[lo:hi] = similarity.band_keys_serial(rows[lo:hi], nb)

        in_chunks(chunk, rows.shape[0], SIGN_CHUNK_ROWS)
        return keys

    def shingle_sets(self, texts) -> tuple[np.ndarray, np.ndarray]:
        """Sorted distinct XXH64 shingle hashes per row as CSR ``(offsets int64[n+1], hashes)``.

        As :meth:`sign`, the ``simple`` tokenizer's rows of ASCII text first, by a kernel
        without the general tokenizer (``kernels/minhash.py: shingle_sets_ascii_range``);
        the rows it leaves then by the general kernel, and the two merged in row order."""
        buf, cfg = self.inputs(texts)
        rows = (buf.offsets, buf.data, buf.valid, buf.valid_offset)
        shingle = self.params.shingle_size
        n = len(buf.offsets) - 1
        if cfg[0] != tokenize.SIMPLE:
            return _csr(chunk_results(lambda lo, hi: minhash.shingle_sets_range(*rows, cfg, self.tables, shingle, lo, hi),
                                      n, SIGN_CHUNK_ROWS), n)
        todo = np.zeros(n, dtype=np.bool_)
        mine = _csr(chunk_results(lambda lo, hi: minhash.shingle_sets_ascii_range(
            *rows, cfg[1], cfg[2], self.tables[0], shingle, todo, lo, hi), n, SIGN_CHUNK_ROWS), n)
        if not todo.any():
            return mine
        rows = (buf.offsets, buf.data, readonly(np.packbits(todo, bitorder="little")), 0)  # only those rows
        rest = _csr(chunk_results(lambda lo, hi: minhash.shingle_sets_range(*rows, cfg, self.tables, shingle, lo, hi),
                                  n, SIGN_CHUNK_ROWS), n)
        return _merged_sets(mine, rest)

    def pair_jaccard(self, texts, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        """``float64[n]``: the exact Jaccard of the shingle sets (:meth:`shingle_sets`) of
        rows ``ia[i]`` and ``ib[i]`` of ``texts`` (``kernels/similarity.py: pair_jaccard``), NaN
        where either has no shingles."""
        offsets, hashes = self.shingle_sets(texts)
        return similarity.pair_jaccard(offsets, hashes, np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64))

    def tokens(self, text: str) -> list[str]:
        """The final token stream of one text, as Lance's tokenizer produces it."""
        buf, cfg = self.inputs(pa.array([text], type=pa.string()))
        ntok, out, starts, ends, _ = tokenize.tokenize_doc(
            buf.data, buf.offsets[0], buf.offsets[1], cfg, self.tables, *tokenize.new_buffers())
        raw = out.tobytes()
        return [raw[starts[t]:ends[t]].decode("utf-8") for t in range(ntok)]


def _csr(parts: list[tuple[np.ndarray, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets int64[n+1], hashes)`` of the ``(sizes, hashes)`` of consecutive row ranges."""
    if len(parts) == 1:
        sizes, hashes = parts[0]
    else:
        sizes = np.concatenate([p[0] for p in parts])
        hashes = np.concatenate([p[1] for p in parts])
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets, hashes


def _merged_sets(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One CSR of two over the same rows where each row's set is empty in one of them."""
    (ao, ah), (bo, bh) = a, b
    offsets = ao + bo
    hashes = np.empty(int(offsets[-1]), dtype=np.uint64)
    for off, vals in ((ao, ah), (bo, bh)):
        sizes = np.diff(off)
        row = np.repeat(np.arange(sizes.size), sizes)
        hashes[offsets[row] + np.arange(vals.size) - off[row]] = vals
    return offsets, hashes


@memoized(32)
def signer_for(params: MinHashParams) -> Signer:
    """A cached :class:`Signer` per parameter set."""
    return Signer(params)


def sign_by_cost(signer: Signer, texts, rows: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Signer.sign`'s values, signed by numpy (``index/numpy_sign.py``) while numba
    is not loaded and that costs less than loading it (``numpy_pays``), else by the kernels.
    ``rows``: how many rows the caller expects to sign in all, these included, priced at
    these texts' bytes a row (a build's scan: one too large for numpy takes the kernels
    from its first batch)."""
    n = len(texts)
    if numpy_pays(text_seconds(texts) * max(n, rows) / max(n, 1)):
        t0 = time.thread_time()
        signed = sign_numpy(signer, texts)
        NUMPY_SECONDS.add(time.thread_time() - t0)
        return signed
    return signer.sign(texts)


def signatures_to_arrow(signatures: np.ndarray, has: np.ndarray) -> pa.Array:
    """``list<uint16>`` array with NULL where a row has no signature."""
    n, k = signatures.shape
    values = pa.array(signatures.reshape(-1), type=pa.uint16())
    offsets = pa.array(np.arange(0, (n + 1) * k, k, dtype=np.int32))
    mask = pa.array(~has)
    return pa.ListArray.from_arrays(offsets, values, mask=mask)
