"""Kernels of the synthetic corpus generator: vocabulary, document plans, text buffers.

Pure numpy + numba, no I/O; beside the generator (the corpus of the demo, the tests and
the benchmarks), not among the engine's kernels. The public wrapper is
:mod:`lance_minhash_sql.faces.corpus`, which validates the spec, caches the tables and
builds Arrow arrays from the buffers returned here.

Randomness is counter based, never a sequential stream: every draw is
``splitmix64(key(seed, stream, doc) + (counter + 1) * golden)``, so document ``i`` is a pure
function of ``(spec, i)`` and any id range can be generated without generating the ids
before it. The format rules, written once:

* **Vocabulary** (stream ``_S_VOCAB``): distinct pseudo-words of ``a``-``z``, lengths
  ``WORD_MIN_LEN..WORD_MAX_LEN`` (weights ``_LENGTH_WEIGHTS``), consonant/vowel alternation
  for readability. Rank ``r`` is ordered by ``length + 2.5 * u`` so that frequent words are
  short. Word ``r`` has Zipf weight ``(r + 1) ** -zipf_exponent``, sampled with an alias
  table (Vose): ``idx = hi32(h) * V >> 32``, keep ``idx`` if ``lo32(h) < prob[idx]`` else
  ``alias[idx]``.
* **Boilerplate** (stream ``_S_PHRASE``): ``num_boilerplate`` phrases of
  ``BOILERPLATE_MIN_WORDS..BOILERPLATE_MAX_WORDS`` Zipf words, fixed per seed.
* **Layout of an original** ``d``: a length class (``LENGTH_CLASSES``: snippet ``[6, 20)``
  30 %, paragraph ``[20, 80)`` 60 %, article ``[80, 240]`` 10 %; within a class
  ``n = lo + floor((hi - lo + 1) * u ** power)``), then with probability
  ``boilerplate_fraction`` one phrase at the start or the end. ``n`` counts every word of
  the text, boilerplate included (a text with a phrase of ``L`` words has ``n >= L + 2``).
* **Decoration**: body word ``q`` gets a trailing ``. ? ! , ;`` with the probabilities in
  ``_PUNCT_CUTS`` (the last body word always ``.``); a word is capitalised at ``q == 0`` or
  after ``. ? !``. A phrase is a sentence: capitalised first word, ``.`` after the last.
  Words are separated by one space; the text is ASCII.
* **Duplicates**: id ``i > 0`` is a near-duplicate with probability ``duplicate_fraction``.
  Its source is ``j = floor(i * u ** source_skew)`` (redrawn, up to ``MAX_SOURCE_DRAWS``
  times, until ``j`` is an original; else 0, always an original), a power-law preference
  for early ids that gives heavy-tailed cluster sizes (expected copies of ``j`` fall as
  ``j ** (1 / skew - 1)``). The copy renders the source's word positions with the source's
  decoration, then one edit (weights ``edit_weights``): ``exact``; ``replace`` --
  ``k = max(1, floor(f * n))`` positions, ``f ~ U(0, max_replace]``, those with the ``k``
  smallest draws ``u(p)``, get a fresh Zipf word different from the source's word, keeping
  the decoration; ``truncate`` -- drop ``k = max(1, floor(g * n))`` words,
  ``g ~ U(0, max_truncate]``, from the start or the end (keeping at least one word, so a
  truncated 6-word snippet has 5).
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.order import order_by_pair

__all__ = [
    "EDIT_ORIGINAL",
    "EDIT_EXACT",
    "EDIT_REPLACE",
    "EDIT_TRUNCATE",
    "EDIT_NAMES",
    "LENGTH_CLASSES",
    "WORD_MIN_LEN",
    "WORD_MAX_LEN",
    "BOILERPLATE_MIN_WORDS",
    "BOILERPLATE_MAX_WORDS",
    "MAX_SOURCE_DRAWS",
    "seed_key",
    "build_vocabulary",
    "build_alias",
    "zipf_alias",
    "build_boilerplate",
    "plan_documents",
    "plan_range",
    "render_texts",
    "render_range",
    "render_phrases",
]

EDIT_ORIGINAL = 0
EDIT_EXACT = 1
EDIT_REPLACE = 2
EDIT_TRUNCATE = 3
EDIT_NAMES = ("original", "exact", "replace", "truncate")

# (lowest words, highest words inclusive, share, power of the within-class draw)
LENGTH_CLASSES = ((6, 19, 0.3, 1.0), (20, 79, 0.6, 2.0), (80, 240, 0.1, 2.5))
_CLASS_LO = np.array([c[0] for c in LENGTH_CLASSES], dtype=np.int64)
_CLASS_HI = np.array([c[1] for c in LENGTH_CLASSES], dtype=np.int64)
_CLASS_CUM = np.cumsum(np.array([c[2] for c in LENGTH_CLASSES], dtype=np.float64))
_CLASS_POW = np.array([c[3] for c in LENGTH_CLASSES], dtype=np.float64)

WORD_MIN_LEN = 2
WORD_MAX_LEN = 12
_LENGTH_WEIGHTS = np.array([2, 5, 9, 12, 13, 13, 12, 10, 8, 6, 4], dtype=np.float64)
_LENGTH_CUM = np.cumsum(_LENGTH_WEIGHTS) / _LENGTH_WEIGHTS.sum()
_VOWELS = np.frombuffer(b"aeiou", dtype=np.uint8).copy()
_CONSONANTS = np.frombuffer(b"bcdfghjklmnpqrstvwxyz", dtype=np.uint8).copy()

BOILERPLATE_MIN_WORDS = 8
BOILERPLATE_MAX_WORDS = 15
MAX_SOURCE_DRAWS = 32
_MAX_NEW_WORD_DRAWS = 16

# cumulative probabilities of a body word's trailing mark; codes index _PUNCT_BYTES
_PUNCT_CUTS = np.array([0.070, 0.080, 0.088, 0.148, 0.156], dtype=np.float64)
_PUNCT_BYTES = np.frombuffer(b"?.?!,;", dtype=np.uint8).copy()  # code 0 = none (unused byte)
_P_NONE, _P_PERIOD = 0, 1

# random streams
_S_LENGTH, _S_BOILER, _S_DUP, _S_SOURCE, _S_EDIT = 1, 2, 3, 4, 5
_S_REPLACE, _S_NEWWORD, _S_WORD, _S_PUNCT, _S_VOCAB, _S_PHRASE = 6, 7, 8, 9, 10, 11

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_ONE = np.uint64(1)
_SH11 = np.uint64(11)
_SH27 = np.uint64(27)
_SH30 = np.uint64(30)
_SH31 = np.uint64(31)
_SH32 = np.uint64(32)
_LO32 = np.uint64(0xFFFFFFFF)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53


# ---------------------------------------------------------------- counter-based hashing


@njit(**JIT)
def _mix(z):
    """splitmix64's finaliser: a bijection of uint64."""
    z = (z ^ (z >> _SH30)) * _M1
    z = (z ^ (z >> _SH27)) * _M2
    return z ^ (z >> _SH31)


@njit(**JIT)
def seed_key(seed):
    return _mix(np.uint64(seed) ^ _GOLDEN)


@njit(**JIT)
def _key(skey, stream, doc):
    return _mix(_mix(skey + np.uint64(stream) * _GOLDEN) ^ np.uint64(doc))


@njit(**JIT)
def _draw(key, counter):
    return _mix(key + (np.uint64(counter) + _ONE) * _GOLDEN)


@njit(**JIT)
def _unit(h):
    return np.float64(h >> _SH11) * _TO_UNIT


@njit(**JIT)
def _zipf(h, prob, alias):
    idx = ((h >> _SH32) * np.uint64(prob.shape[0])) >> _SH32
    if (h & _LO32) < prob[idx]:
        return np.int64(idx)
    return alias[idx]


# ---------------------------------------------------------------- tables


@njit(**JIT)
def build_alias(weights):
    """Vose alias table of ``weights`` as (uint64 thresholds on 32 bits, int64 aliases)."""
    n = weights.shape[0]
    total = 0.0
    for i in range(n):
        total += weights[i]
    p = np.empty(n, dtype=np.float64)
    alias = np.empty(n, dtype=np.int64)
    for i in range(n):  # loops, not array expressions: each of those compiles a ufunc loop
        p[i] = weights[i] * (n / total)
        alias[i] = i
    prob = np.empty(n, dtype=np.uint64)
    small = np.empty(n, dtype=np.int64)
    large = np.empty(n, dtype=np.int64)
    ns = 0
    nl = 0
    for i in range(n):
        if p[i] < 1.0:
            small[ns] = i
            ns += 1
        else:
            large[nl] = i
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        nl -= 1
        g = large[nl]
        prob[s] = np.uint64(p[s] * 4294967296.0)
        alias[s] = g
        p[g] = (p[g] + p[s]) - 1.0
        if p[g] < 1.0:
            small[ns] = g
            ns += 1
        else:
            large[nl] = g
            nl += 1
    for k in range(nl):
        prob[large[k]] = np.uint64(4294967296)
    for k in range(ns):  # only rounding leftovers
        prob[small[k]] = np.uint64(4294967296)
    return prob, alias


def zipf_alias(vocab_size: int, exponent: float):
    """Alias table of Zipf weights ``(r + 1) ** -exponent`` over ranks ``0..vocab_size-1``."""
    weights = np.arange(1, vocab_size + 1, dtype=np.float64) ** -float(exponent)
    return build_alias(weights)


# One kernel of this length on purpose: the vocabulary's words are drawn and written in one
# pass whose order fixes the corpus (a seed gives the same corpus on every machine).
@njit(**JIT)
def build_vocabulary(seed, vocab_size):
    """``vocab_size`` distinct pseudo-words as (int64 offsets[V + 1], uint8 bytes), by rank."""
    skey = seed_key(seed)
    key = _key(skey, _S_VOCAB, 0)
    size = 1
    while size < 2 * vocab_size:
        size <<= 1
    mask = np.uint64(size - 1)
    table = np.full(size, -1, dtype=np.int64)
    raw = np.empty(vocab_size * WORD_MAX_LEN, dtype=np.uint8)
    starts = np.empty(vocab_size, dtype=np.int64)
    lens = np.empty(vocab_size, dtype=np.int64)
    buf = np.empty(WORD_MAX_LEN, dtype=np.uint8)
    count = 0
    used = 0
    c = 0
    nv = np.uint64(_VOWELS.shape[0])
    nc = np.uint64(_CONSONANTS.shape[0])
    while count < vocab_size:
        h = _draw(key, c)
        c += 1
        u = _unit(h)
        length = WORD_MIN_LEN
        while length < WORD_MAX_LEN and u >= _LENGTH_CUM[length - WORD_MIN_LEN]:
            length += 1
        g = _mix(h)
        vowel = (g & _ONE) == _ONE
        for k in range(length):
            g = _mix(g + _GOLDEN)
            if k > 0:
                ug = _unit(g)
                vowel = ug < 0.15 if vowel else ug < 0.75
            if vowel:
                buf[k] = _VOWELS[(g >> _SH32) % nv]
            else:
                buf[k] = _CONSONANTS[(g >> _SH32) % nc]
        hk = _FNV_OFFSET
        for k in range(length):
            hk = (hk ^ np.uint64(buf[k])) * _FNV_PRIME
        slot = _mix(hk) & mask
        seen = False
        while table[slot] >= 0:
            w = table[slot]
            if lens[w] == length:
                same = True
                for k in range(length):
                    if raw[starts[w] + k] != buf[k]:
                        same = False
                        break
                if same:
                    seen = True
                    break
            slot = (slot + _ONE) & mask
        if seen:
            continue
        table[slot] = count
        starts[count] = used
        lens[count] = length
        for k in range(length):
            raw[used + k] = buf[k]
        used += length
        count += 1
    order_key = np.empty(vocab_size, dtype=np.float64)
    jkey = _key(skey, _S_VOCAB, 1)
    for w in range(vocab_size):
        order_key[w] = lens[w] + 2.5 * _unit(_draw(jkey, w))
    order = np.empty(vocab_size, dtype=np.int64)
    for w in range(vocab_size):
        order[w] = w
    order = order_by_pair(order, order_key, order)  # keys are distinct: np.argsort's order
    offsets = np.empty(vocab_size + 1, dtype=np.int64)
    data = np.empty(used, dtype=np.uint8)
    offsets[0] = 0
    pos = 0
    for r in range(vocab_size):
        w = order[r]
        for k in range(lens[w]):
            data[pos + k] = raw[starts[w] + k]
        pos += lens[w]
        offsets[r + 1] = pos
    return offsets, data


@njit(**JIT)
def build_boilerplate(seed, num_phrases, prob, alias):
    """``num_phrases`` phrases of Zipf word ranks as (int64 offsets[P + 1], int64 words)."""
    skey = seed_key(seed)
    span = BOILERPLATE_MAX_WORDS - BOILERPLATE_MIN_WORDS + 1
    offsets = np.empty(num_phrases + 1, dtype=np.int64)
    offsets[0] = 0
    for b in range(num_phrases):
        h = _draw(_key(skey, _S_PHRASE, b), 0)
        offsets[b + 1] = offsets[b] + BOILERPLATE_MIN_WORDS + np.int64((h >> _SH32) % np.uint64(span))
    words = np.empty(offsets[num_phrases], dtype=np.int64)
    for b in range(num_phrases):
        key = _key(skey, _S_PHRASE, b)
        for k in range(offsets[b + 1] - offsets[b]):
            words[offsets[b] + k] = _zipf(_draw(key, k + 1), prob, alias)
    return offsets, words


# ---------------------------------------------------------------- document plans


@njit(**JIT, inline="always")
def _layout(skey, doc, bp_threshold, bp_offsets):
    """(words, phrase or -1, phrase at start, phrase words) of original ``doc``."""
    key = _key(skey, _S_LENGTH, doc)
    u = _unit(_draw(key, 0))
    c = 0
    while c < _CLASS_CUM.shape[0] - 1 and u >= _CLASS_CUM[c]:
        c += 1
    lo = _CLASS_LO[c]
    hi = _CLASS_HI[c]
    n = lo + np.int64((hi - lo + 1) * _unit(_draw(key, 1)) ** _CLASS_POW[c])
    if n > hi:
        n = hi
    phrase = -1
    at_start = False
    plen = 0
    num_phrases = bp_offsets.shape[0] - 1
    if num_phrases > 0:
        bkey = _key(skey, _S_BOILER, doc)
        if _draw(bkey, 0) < bp_threshold:
            h = _draw(bkey, 1)
            phrase = np.int64((h >> _SH32) % np.uint64(num_phrases))
            at_start = (h & _ONE) == _ONE
            plen = bp_offsets[phrase + 1] - bp_offsets[phrase]
            if n < plen + 2:
                n = plen + 2
    return n, phrase, at_start, plen


@njit(**JIT, inline="always")
def _is_duplicate(skey, doc, dup_threshold):
    return doc > 0 and _draw(_key(skey, _S_DUP, doc), 0) < dup_threshold


@njit(**JIT, inline="always")
def _source(skey, doc, dup_threshold, skew):
    key = _key(skey, _S_SOURCE, doc)
    for a in range(MAX_SOURCE_DRAWS):
        j = np.int64(doc * _unit(_draw(key, a)) ** skew)
        if j >= doc:
            j = doc - 1
        if not _is_duplicate(skey, j, dup_threshold):
            return j
    return np.int64(0)


def plan_documents(seed, start, stop, dup_threshold, bp_threshold, skew, edit_cum,
                   max_replace, max_truncate, bp_offsets, run=None):
    """Plans of docs ``start..stop-1``: what each text renders (see the module docstring).

    Returns ``(source, kind, source_words, lo, hi, replace_below, replaced)``: the text is
    source positions ``lo..hi-1``; with ``kind == EDIT_REPLACE`` position ``p`` is replaced
    iff ``u(p) <= replace_below`` (the ``replaced``-th smallest draw), else
    ``replace_below`` is -1. ``run(fn, n)`` calls ``fn(first, last)`` over disjoint ranges
    covering ``[0, n)`` (on several threads: :func:`plan_range` releases the GIL); by
    default one range on the calling thread.
    """
    n = stop - start
    out = (np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int8), np.empty(n, dtype=np.int32),
           np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32), np.full(n, -1.0, dtype=np.float64),
           np.zeros(n, dtype=np.int32))
    args = (np.uint64(seed), np.int64(start), dup_threshold, bp_threshold, float(skew), edit_cum,
            float(max_replace), float(max_truncate), bp_offsets) + out
    (run or _one_range)(lambda first, last: plan_range(*args, np.int64(first), np.int64(last)), n)
    return out


def _one_range(fn, n):
    fn(0, n)


@njit(**JIT)
def plan_range(seed, start, dup_threshold, bp_threshold, skew, edit_cum, max_replace, max_truncate,
               bp_offsets, source, kind, source_words, lo, hi, below, replaced, first, last):
    """:func:`plan_documents` of docs ``start + first .. start + last - 1`` into its arrays
    (a serial kernel run on ranges by threads: numba's ``parallel=True`` compiled for
    seconds on a fresh install)."""
    skey = seed_key(seed)
    for t in range(first, last):
        doc = start + t
        if not _is_duplicate(skey, doc, dup_threshold):
            src = doc
            k = EDIT_ORIGINAL
        else:
            src = _source(skey, doc, dup_threshold, skew)
            u = _unit(_draw(_key(skey, _S_EDIT, doc), 0))
            k = EDIT_EXACT
            while k < EDIT_TRUNCATE and u >= edit_cum[k - 1]:
                k += 1
        words = _layout(skey, src, bp_threshold, bp_offsets)[0]
        source[t] = src
        kind[t] = k
        source_words[t] = words
        lo[t] = 0
        hi[t] = words
        if k == EDIT_REPLACE:
            ekey = _key(skey, _S_EDIT, doc)
            f = max_replace * (1.0 - _unit(_draw(ekey, 1)))  # in (0, max_replace]
            count = max(1, np.int64(f * words))
            rkey = _key(skey, _S_REPLACE, doc)
            draws = np.empty(words, dtype=np.float64)
            for p in range(words):  # insertion sort: at most 240 draws, cheap to compile
                x = _unit(_draw(rkey, p))
                m = p
                while m > 0 and draws[m - 1] > x:
                    draws[m] = draws[m - 1]
                    m -= 1
                draws[m] = x
            below[t] = draws[count - 1]
            actual = count
            while actual < words and draws[actual] <= below[t]:  # ties: never in practice
                actual += 1
            replaced[t] = actual
        elif k == EDIT_TRUNCATE:
            ekey = _key(skey, _S_EDIT, doc)
            g = max_truncate * (1.0 - _unit(_draw(ekey, 1)))
            drop = max(1, np.int64(g * words))
            if drop > words - 1:
                drop = words - 1
            if (_draw(ekey, 2) & _ONE) == _ONE:
                lo[t] = drop
            else:
                hi[t] = words - drop


# ---------------------------------------------------------------- text buffers


@njit(**JIT, inline="always")
def _render(skey, doc, src, kind, lo, hi, below, bp_threshold, word_offsets,
            word_bytes, prob, alias, bp_offsets, bp_words, out, pos, write):
    """Write (if ``write``) the text of ``doc`` at ``out[pos:]``; return its byte length."""
    words, phrase, at_start, plen = _layout(skey, src, bp_threshold, bp_offsets)
    body = words - plen
    body_start = plen if (phrase >= 0 and at_start) else 0
    body_stop = body_start + body
    wkey = _key(skey, _S_WORD, src)
    pkey = _key(skey, _S_PUNCT, src)
    replace = kind == EDIT_REPLACE
    rkey = _key(skey, _S_REPLACE, doc)
    nkey = _key(skey, _S_NEWWORD, doc)
    vocab = prob.shape[0]
    start = pos
    prev_end = False  # whether body word q - 1 ends a sentence, valid when prev_body
    prev_body = False
    for p in range(lo, hi):
        if p < body_start or p >= body_stop:
            k = p if p < body_start else p - body_stop
            w = bp_words[bp_offsets[phrase] + k]
            cap = k == 0
            mark = _P_PERIOD if k == plen - 1 else _P_NONE
            prev_body = False
        else:
            q = p - body_start
            w = _zipf(_draw(wkey, q), prob, alias)
            if q == 0:
                cap = True
            elif prev_body:
                cap = prev_end
            else:
                cap = _unit(_draw(pkey, q - 1)) < _PUNCT_CUTS[2]
            u = _unit(_draw(pkey, q))
            prev_end = u < _PUNCT_CUTS[2]  # . ? !
            prev_body = True
            if q == body - 1:
                mark = _P_PERIOD
            else:
                mark = 0
                while mark < _PUNCT_CUTS.shape[0] and u >= _PUNCT_CUTS[mark]:
                    mark += 1
                mark = mark + 1 if mark < _PUNCT_CUTS.shape[0] else _P_NONE
        if replace and _unit(_draw(rkey, p)) <= below:
            new = w
            for a in range(_MAX_NEW_WORD_DRAWS):
                new = _zipf(_draw(nkey, p * _MAX_NEW_WORD_DRAWS + a), prob, alias)
                if new != w:
                    break
            if new == w:
                new = (w + 1) % vocab
            w = new
        a0 = word_offsets[w]
        length = word_offsets[w + 1] - a0
        if write:  # unsigned indices: no negative-index wraparound checks in the copy
            for k in range(length):
                out[np.uint64(pos + k)] = word_bytes[np.uint64(a0 + k)]
            if cap:
                out[np.uint64(pos)] -= 32
        pos += length
        if mark != _P_NONE:
            if write:
                out[np.uint64(pos)] = _PUNCT_BYTES[mark]
            pos += 1
        if p < hi - 1:
            if write:
                out[np.uint64(pos)] = 32
            pos += 1
    return pos - start


def render_texts(seed, start, source, kind, lo, hi, below, bp_threshold, word_offsets,
                 word_bytes, prob, alias, bp_offsets, bp_words, run=None):
    """Texts of docs ``start..start+len(source)-1`` as (int64 offsets[n + 1], uint8 bytes).

    Two passes over the planned words: byte lengths, then the bytes at their offsets
    (``run`` as in :func:`plan_documents`).
    """
    n = source.shape[0]
    run = run or _one_range
    offsets = np.zeros(n + 1, dtype=np.int64)
    args = (np.uint64(seed), np.int64(start), source, kind, lo, hi, below, bp_threshold, word_offsets, word_bytes,
            prob, alias, bp_offsets, bp_words)
    empty = np.empty(0, dtype=np.uint8)
    run(lambda first, last: render_range(*args, empty, offsets, False, np.int64(first), np.int64(last)), n)
    np.cumsum(offsets, out=offsets)
    data = np.empty(offsets[n], dtype=np.uint8)
    run(lambda first, last: render_range(*args, data, offsets, True, np.int64(first), np.int64(last)), n)
    return offsets, data


@njit(**JIT)
def render_range(seed, start, source, kind, lo, hi, below, bp_threshold, word_offsets, word_bytes, prob, alias,
                 bp_offsets, bp_words, out, offsets, write, first, last):
    """Docs ``first..last-1`` of a batch: with ``write``, their texts into ``out`` at
    ``offsets[t]``; else their byte lengths into ``offsets[t + 1]``."""
    skey = seed_key(seed)
    for t in range(first, last):
        pos = offsets[t] if write else np.int64(0)
        length = _render(skey, start + t, source[t], kind[t], lo[t], hi[t], below[t], bp_threshold, word_offsets,
                         word_bytes, prob, alias, bp_offsets, bp_words, out, pos, write)
        if not write:
            offsets[t + 1] = length


@njit(**JIT)
def render_phrases(word_offsets, word_bytes, bp_offsets, bp_words):
    """The boilerplate phrases as they appear in texts: (int64 offsets[P + 1], uint8 bytes)."""
    num = bp_offsets.shape[0] - 1
    offsets = np.empty(num + 1, dtype=np.int64)
    offsets[0] = 0
    for b in range(num):
        size = 0
        for k in range(bp_offsets[b], bp_offsets[b + 1]):
            w = bp_words[k]
            size += word_offsets[w + 1] - word_offsets[w] + 1  # a space or the final "."
        offsets[b + 1] = offsets[b] + size
    data = np.empty(offsets[num], dtype=np.uint8)
    for b in range(num):
        pos = offsets[b]
        for k in range(bp_offsets[b], bp_offsets[b + 1]):
            w = bp_words[k]
            for c in range(word_offsets[w], word_offsets[w + 1]):
                data[pos] = word_bytes[c]
                pos += 1
            data[pos] = 32 if k < bp_offsets[b + 1] - 1 else _PUNCT_BYTES[_P_PERIOD]
            pos += 1
        data[offsets[b]] -= 32
    return offsets, data
