"""Lance 14.0.2's ``code`` tokenizer over ASCII identifiers: its flags, its tables and the
two kernels :func:`lance_minhash_sql.kernels.tokenize.tokenize_doc` calls for it.

An identifier is a run of alphanumeric code points and ``_``. :func:`code_tokens` cuts a
document's bytes into identifiers and, with ``index_operators``, Lance's operator tokens
(the longest of its multi-character operators at a position, else one operator
character); :func:`code_split` follows an identifier of several parts by its parts, cut
at ``_`` runs, letter-case changes and, with ``split_on_numerics``, where ASCII digits
start or stop. Letter case is read by ASCII's rules: a row with non-ASCII text under
``split_identifiers`` is left to Lance's tokenizer (``index/sign.py``). Both record
original byte ranges in ``raw`` as ``tokenize_doc``'s base tokenizers do.
"""

from __future__ import annotations

import numpy as np

from lance_minhash_sql.kernels.config import JIT, njit
from lance_minhash_sql.kernels.utf8 import decode

__all__ = ["CODE_OPERATORS", "CODE_SPLIT", "CODE_NUMERICS", "CODE_ORIGINAL", "UNDERSCORE", "IDENT_ASCII",
           "code_tokens", "code_split"]

# the code tokenizer's flags (Lance's "code analyzer flags"), bits of cfg[7]
CODE_OPERATORS = 1  # index_operators: operators are tokens (longest match among _OPERATORS, else one char)
CODE_SPLIT = 2  # split_identifiers: an identifier of several parts is followed by its parts
CODE_NUMERICS = 4  # split_on_numerics: a part ends where ASCII digits start or stop
CODE_ORIGINAL = 8  # preserve_original: a split identifier is kept before its parts
UNDERSCORE = 0x5F
# ASCII bytes of identifiers: the ASCII alphanumerics (Rust's char::is_alphanumeric on
# ASCII) and "_"; non-ASCII bytes 0 (the caller checks for them)
IDENT_ASCII = np.zeros(256, dtype=np.uint8)
for _b in b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_":
    IDENT_ASCII[_b] = 1
# Lance's operator characters, and its multi-character operators, longest first (the
# lance-tokenizer crate of pylance 14.0.2, CodeLexTokenizer): one per row, zero-padded
_OPERATOR_CHARS = np.zeros(256, dtype=np.uint8)
for _b in b"!%&*+-/:<=>?^|~":
    _OPERATOR_CHARS[_b] = 1
_OPERATOR_LIST = tuple(sorted([
    ">>>=", "<<=", ">>=", "&&=", "||=", "??=", "**=", "//=", "===", "!==", ">>>", "<=>", "::",
    "->", "=>", "==", "!=", "<=", ">=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=",
    "|=", "^=", "<<", ">>", "**", "//", "??", ":=", "<-", "|>", "~=",
], key=len, reverse=True))
_OPERATORS = np.zeros((len(_OPERATOR_LIST), 4), dtype=np.uint8)
_OPERATOR_LENGTHS = np.array([len(o) for o in _OPERATOR_LIST], dtype=np.int64)
for _i, _o in enumerate(_OPERATOR_LIST):
    _OPERATORS[_i, :len(_o)] = np.frombuffer(_o.encode(), dtype=np.uint8)
del _b, _i, _o


@njit(**JIT, inline="always")
def _is_digit(b):
    return 48 <= b <= 57


@njit(**JIT, inline="always")
def _is_lower(b):
    return 97 <= b <= 122


@njit(**JIT, inline="always")
def _is_upper(b):
    return 65 <= b <= 90


@njit(**JIT, inline="always")
def _operator_length(data, p, e):
    """Bytes of the operator token at ``data[p]`` (an operator character): the longest of
    ``_OPERATORS`` there, else 1."""
    for o in range(_OPERATORS.shape[0]):
        m = _OPERATOR_LENGTHS[o]
        if p + m <= e:
            same = True
            for j in range(m):
                if data[p + j] != _OPERATORS[o, j]:
                    same = False
                    break
            if same:
                return m
    return np.int64(1)


@njit(**JIT)
def code_tokens(data, s, e, flags, alnum, raw):
    """The ``code`` base tokenizer's tokens of ``data[s:e]`` as ranges in ``raw`` (the
    layout of :func:`~lance_minhash_sql.kernels.tokenize.tokenize_doc`'s first phase; ``raw`` holds ``2 * (e - s) + 2``
    items, twice that under :data:`CODE_SPLIT`): returns their count.

    Lance's ``CodeLexTokenizer``: an identifier is a maximal run of alphanumeric code
    points and ``_``; with :data:`CODE_OPERATORS`, an operator character starts a token of
    the longest operator of ``_OPERATORS`` there, else of that character alone; all else
    separates. With :data:`CODE_SPLIT` the tokens go to ``raw`` from entry
    ``base = e - s + 1`` on, and :func:`code_split` rewrites them from entry 0."""
    split = (flags & CODE_SPLIT) != 0
    base = e - s + 1 if split else 0
    n = base
    ts = -1
    ascii = True
    p = s
    while p < e:
        b0 = data[p]
        if b0 < 0x80:
            ident = IDENT_ASCII[b0] != 0
            nxt = p + 1
        else:
            cp, nxt = decode(data, p, e)
            ident = alnum[cp] != 0
        if ident:
            if ts < 0:
                ts = p
                ascii = True
            if b0 >= 0x80:
                ascii = False
            p = nxt
            continue
        if ts >= 0:
            raw[2 * n] = ts
            raw[2 * n + 1] = p if ascii else -p - 1
            n += 1
            ts = -1
        if (flags & CODE_OPERATORS) != 0 and b0 < 0x80 and _OPERATOR_CHARS[b0] != 0:
            nxt = p + _operator_length(data, p, e)
            raw[2 * n] = p
            raw[2 * n + 1] = nxt
            n += 1
        p = nxt
    if ts >= 0:
        raw[2 * n] = ts
        raw[2 * n + 1] = e if ascii else -e - 1
        n += 1
    return code_split(data, raw, base, n, flags) if split else n


@njit(**JIT)
def code_split(data, raw, base, n, flags):
    """Lance's ``WordDelimiterFilter`` on the ``code`` tokens ``raw`` entries
    ``base..n``, written from entry 0: returns their new count.

    An identifier is cut at ``_`` into segments, and a segment before a character where
    ASCII digits start or stop (:data:`CODE_NUMERICS`), where an upper-case letter follows
    a lower-case one, or where an upper-case letter followed by a lower-case one follows
    an upper-case one (``XMLHttp``: ``XML``, ``Http``). An identifier of at most one part
    stays whole; one of several becomes itself (:data:`CODE_ORIGINAL`) and then its parts;
    an operator stays as it is. Letter case is read by the ASCII rules: an identifier
    with a non-ASCII character raises (``index/sign.py`` hands such rows to Lance's
    tokenizer). An identifier of ``L`` bytes becomes at most ``L + 1`` tokens and the
    tokens up to the ``i``-th span at most ``base - 1`` bytes, so the entries written for
    it stay at or below ``base + i``, the one just read."""
    numerics = (flags & CODE_NUMERICS) != 0
    original = (flags & CODE_ORIGINAL) != 0
    w = 0
    for i in range(base, n):
        ts = raw[2 * i]
        te = raw[2 * i + 1]
        b0 = data[ts]
        if b0 < 0x80 and IDENT_ASCII[b0] == 0:  # an operator: no identifier character
            raw[2 * w] = ts
            raw[2 * w + 1] = te
            w += 1
            continue
        if te < 0:
            raise ValueError("split_identifiers reads letter case by ASCII rules: an identifier with a "
                             "non-ASCII character goes to Lance's tokenizer")
        k = w  # the original's entry; the parts from k + 1
        parts = 0
        q = ts
        while q < te:
            if data[q] == UNDERSCORE:
                q += 1
                continue
            seg = q
            while q < te and data[q] != UNDERSCORE:
                q += 1
            piece = seg
            for j in range(seg + 1, q):
                prev = data[j - 1]
                cur = data[j]
                cut = numerics and _is_digit(prev) != _is_digit(cur)
                cut = cut or (_is_lower(prev) and _is_upper(cur))
                cut = cut or (_is_upper(prev) and _is_upper(cur) and j + 1 < q and _is_lower(data[j + 1]))
                if cut:
                    raw[2 * (k + 1 + parts)] = piece
                    raw[2 * (k + 1 + parts) + 1] = j
                    parts += 1
                    piece = j
            raw[2 * (k + 1 + parts)] = piece
            raw[2 * (k + 1 + parts) + 1] = q
            parts += 1
        if parts <= 1 or original:
            raw[2 * k] = ts
            raw[2 * k + 1] = te
            w = k + 1 + (parts if parts > 1 else 0)
        else:
            for j in range(parts):
                raw[2 * (k + j)] = raw[2 * (k + 1 + j)]
                raw[2 * (k + j) + 1] = raw[2 * (k + 1 + j) + 1]
            w = k + parts
    return w

