"""Tests of lance_minhash_sql.io.unicode_tables against docs/signatures.md and against lance.tokenize."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from lance_minhash_sql.core.errors import LanceMinHashError
from lance_minhash_sql.core.params import TokenizerParams
from lance_minhash_sql.io import unicode_tables as ut
from lance_minhash_sql.io.unicode_tables import UnicodeTables, load_tables, table_sizes
from lance_minhash_sql.runtime.cache import clear_cache

NUM_CP = 0x110000
EXPECTED_SIZES = {"alnum": 149_106, "alnum_ranges": 844, "lower": 1_488, "fold": 2_207}
WHITESPACE_SEPARATORS = " \t\n\x0c\r"
MINHASH_TOKENIZER = TokenizerParams().lance_tokenize_kwargs()


@pytest.fixture(scope="module")
def tables() -> UnicodeTables:
    return load_tables()


def lookup(index, offsets, values, cp: int) -> str:
    e = int(index[cp])
    if e < 0:
        return chr(cp)
    return "".join(chr(v) for v in values[offsets[e] : offsets[e + 1]])


def lower_of(t: UnicodeTables, c: str) -> str:
    return lookup(t.lower_index, t.lower_offsets, t.lower_values, ord(c))


def fold_of(t: UnicodeTables, c: str) -> str:
    return lookup(t.fold_index, t.fold_offsets, t.fold_values, ord(c))


def is_alnum(t: UnicodeTables, c: str) -> bool:
    return bool(t.alnum[ord(c)])


# ---------------------------------------------------------------------------------------------
# Shape, dtype, sizes


def test_sizes():
    assert table_sizes() == EXPECTED_SIZES


def test_dtypes_and_shapes(tables):
    assert isinstance(tables, UnicodeTables)
    assert tables._fields == (
        "alnum", "lower_index", "lower_offsets", "lower_values", "fold_index", "fold_offsets", "fold_values",
    )
    expected = {
        "alnum": (np.uint8, (NUM_CP,)),
        "lower_index": (np.int32, (NUM_CP,)),
        "lower_offsets": (np.int32, (EXPECTED_SIZES["lower"] + 1,)),
        "fold_index": (np.int32, (NUM_CP,)),
        "fold_offsets": (np.int32, (EXPECTED_SIZES["fold"] + 1,)),
    }
    for name, (dtype, shape) in expected.items():
        arr = getattr(tables, name)
        assert arr.dtype == dtype, name
        assert arr.shape == shape, name
    for name in tables._fields:
        arr = getattr(tables, name)
        assert isinstance(arr, np.ndarray), name
        assert arr.flags.c_contiguous, name
        assert arr.ndim == 1, name
    assert tables.lower_values.dtype == np.int32 and tables.fold_values.dtype == np.int32
    assert set(np.unique(tables.alnum).tolist()) == {0, 1}


def test_cached(tables):
    assert load_tables() is tables


def test_csr_consistency(tables):
    for prefix, n, max_len in (("lower", EXPECTED_SIZES["lower"], 2), ("fold", EXPECTED_SIZES["fold"], 5)):
        index = getattr(tables, f"{prefix}_index")
        offsets = getattr(tables, f"{prefix}_offsets")
        values = getattr(tables, f"{prefix}_values")
        assert offsets[0] == 0 and offsets[-1] == len(values)
        lengths = np.diff(offsets)
        assert lengths.min() >= 1 and lengths.max() <= max_len, prefix
        # Every entry is referenced by exactly one code point, in ascending code-point order.
        keys = np.flatnonzero(index >= 0)
        assert len(keys) == n, prefix
        assert np.array_equal(index[keys], np.arange(n)), prefix
        assert index.min() == -1
        assert not np.any(index[0xD800:0xE000] >= 0), prefix
        # No entry maps a code point to itself.
        for k in keys.tolist():
            assert lookup(index, offsets, values, k) != chr(k), (prefix, hex(k))


def test_lower_ascii_and_fold_ascii(tables):
    ascii_lower = {cp: lower_of(tables, chr(cp)) for cp in range(128) if tables.lower_index[cp] >= 0}
    assert ascii_lower == {ord(c): c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    assert not np.any(tables.fold_index[:128] >= 0)
    assert tables.fold_values.max() < 128 and tables.fold_values.min() >= 0
    assert not np.any(tables.alnum[0xD800:0xE000])


def test_lance_version_recorded():
    assert ut.tables_lance_version() == "14.0.2"


# ---------------------------------------------------------------------------------------------
# Spot checks (docs/signatures.md, Tokenizer)


def test_spot_checks(tables):
    t = tables
    # İ: lower "i" + U+0307, fold "I"
    assert is_alnum(t, "İ")
    assert lower_of(t, "İ") == "i\u0307"
    assert fold_of(t, "İ") == "I"
    # Ⅻ: alphanumeric (Nl), lower ⅻ, fold XII
    assert is_alnum(t, "Ⅻ")
    assert lower_of(t, "Ⅻ") == "ⅻ"
    assert fold_of(t, "Ⅻ") == "XII"
    assert fold_of(t, "ⅻ") == "xii"
    # fractions, circled digits, NBSP
    assert fold_of(t, "½") == "12"
    assert fold_of(t, "①") == "1"
    assert fold_of(t, "\u00a0") == " "
    assert not is_alnum(t, "\u00a0")
    # small capital A not folded; math double-struck A folded keeping case
    assert fold_of(t, "ᴀ") == "ᴀ"
    assert fold_of(t, "𝔸") == "A"
    assert lower_of(t, "𝔸") == "𝔸"
    # separators
    assert not is_alnum(t, "\u0301")
    assert fold_of(t, "\u0301") == "\u0301"
    assert not is_alnum(t, "_")
    assert not is_alnum(t, "😀")
    assert is_alnum(t, "Ⓐ")
    assert not is_alnum(t, "\u094d")  # Devanagari virama
    assert is_alnum(t, "ि")  # U+093F, Other_Alphabetic vowel sign is kept
    # letter table beyond NFKD
    assert fold_of(t, "ß") == "ss" and fold_of(t, "ẞ") == "SS" and fold_of(t, "Æ") == "AE"
    assert fold_of(t, "Ł") == "L" and fold_of(t, "Þ") == "TH"
    assert fold_of(t, "Ɓ") == "Ɓ"
    # no final-sigma rule: Σ always lower-cases to σ
    assert lower_of(t, "Σ") == "σ"
    # ASCII letters/digits
    assert all(is_alnum(t, c) for c in "azAZ09")
    assert not any(is_alnum(t, c) for c in " -'.\t\x00\x7f")


def test_missing_file_raises(monkeypatch):
    monkeypatch.setattr(ut, "DATA_FILE", "data/__no_such_unicode_tables__.npz")
    clear_cache()  # the memoized reads and tables
    try:
        with pytest.raises(LanceMinHashError, match="missing"):
            ut.load_tables()
    finally:
        monkeypatch.undo()
        clear_cache()
    assert table_sizes() == EXPECTED_SIZES


def test_loader_does_not_import_lance():
    code = (
        "import sys\n"
        "from lance_minhash_sql.io.unicode_tables import load_tables\n"
        "load_tables()\n"
        "assert 'lance' not in sys.modules, sorted(m for m in sys.modules if m.startswith('lance'))\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# ---------------------------------------------------------------------------------------------
# Differential check against lance.tokenize


@pytest.fixture(scope="module")
def toks():
    import lance

    def toks(text: str, **over) -> list[str]:
        return [t.text for t in lance.tokenize(text, **{**MINHASH_TOKENIZER, **over})]

    return toks


def _sample_code_points(tables: UnicodeTables) -> list[int]:
    rng = np.random.default_rng(20240514)
    parts = [
        np.arange(0, 0x300),
        rng.integers(0x300, 0x10000, 7000),  # rest of the BMP
        rng.integers(0x10000, 0x20000, 4000),  # SMP
        rng.integers(0x20000, 0x30000, 2500),  # SIP (CJK ext.)
        rng.integers(0x30000, 0x40000, 2500),  # TIP (CJK ext. G/H/J)
        rng.integers(0x40000, 0x110000, 4000),  # planes 4-16 (unassigned, tags, private use)
    ]
    # Table boundaries, where an off-by-one would show: range edges and their neighbours,
    # and every lower/fold key.
    ranges = np.flatnonzero(np.diff(np.concatenate(([0], tables.alnum.astype(np.int8), [0]))))
    parts.append(np.concatenate([ranges - 1, ranges]))
    parts.append(np.flatnonzero(tables.lower_index >= 0))
    parts.append(np.flatnonzero(tables.fold_index >= 0))
    cps = np.unique(np.concatenate(parts))
    cps = cps[(cps >= 0) & (cps < NUM_CP) & ~((cps >= 0xD800) & (cps <= 0xDFFF))]
    return cps.tolist()


def test_differential_against_lance(tables, toks):
    cps = _sample_code_points(tables)
    assert len(cps) > 20_000
    skip = {ord(c) for c in WHITESPACE_SEPARATORS}
    mismatches = []
    n_alnum = n_lower = n_fold = 0
    for cp in cps:
        c = chr(cp)
        s = "x" + c + "y"
        got = toks(s, lower_case=False, ascii_folding=False, max_token_length=None)
        assert got in ([s], ["x", "y"]), (hex(cp), got)
        lance_alnum = got == [s]
        n_alnum += lance_alnum
        if lance_alnum != bool(tables.alnum[cp]):
            mismatches.append(("alnum", hex(cp), lance_alnum))
        if cp in skip:
            continue
        for what, over, ours in (
            ("lower", dict(lower_case=True, ascii_folding=False), lower_of(tables, c)),
            ("fold", dict(lower_case=False, ascii_folding=True), fold_of(tables, c)),
        ):
            got = toks(s, base_tokenizer="whitespace", max_token_length=None, **over)
            assert len(got) == 1 and len(got[0]) >= 2 and got[0][0] == "x" and got[0][-1] == "y", (what, hex(cp), got)
            theirs = got[0][1:-1]
            if what == "lower":
                n_lower += theirs != c
            else:
                n_fold += theirs != c
            if theirs != ours:
                mismatches.append((what, hex(cp), theirs, ours))
    assert not mismatches, mismatches[:20]
    # The sample really exercised all three tables (all keys were included).
    assert n_lower == EXPECTED_SIZES["lower"]
    assert n_fold == EXPECTED_SIZES["fold"]
    assert n_alnum > 10_000


def test_whitespace_separators_split(toks):
    for c in WHITESPACE_SEPARATORS:
        assert toks("x" + c + "y", base_tokenizer="whitespace", max_token_length=None) == ["x", "y"]
    # ... and nothing else does (U+000B, NBSP, U+3000 stay inside the token)
    for c in "\x0b\u00a0\u3000\u2028":
        got = toks("x" + c + "y", base_tokenizer="whitespace", lower_case=False, ascii_folding=False)
        assert got == ["x" + c + "y"]


def test_composition_default_pipeline(tables, toks):
    """Default MinHash token of "x"+c+"y" == "x" + fold(lower(c)) + "y" on a sample of alnum chars."""
    rng = np.random.default_rng(7)
    alnum_cps = np.flatnonzero(tables.alnum)
    sample = set(rng.choice(alnum_cps, 5000, replace=False).tolist())
    sample |= {cp for cp in np.flatnonzero(tables.lower_index >= 0).tolist() if tables.alnum[cp]}
    sample |= {cp for cp in np.flatnonzero(tables.fold_index >= 0).tolist() if tables.alnum[cp]}
    failures = []
    for cp in sorted(sample):
        c = chr(cp)
        want = "x" + "".join(fold_of(tables, ch) for ch in lower_of(tables, c)) + "y"
        got = toks("x" + c + "y")
        if got != [want]:
            failures.append((hex(cp), got, want))
    assert not failures, failures[:20]
    assert toks("xⅫy") == ["xxiiy"]
