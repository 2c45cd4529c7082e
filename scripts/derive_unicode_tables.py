#!/usr/bin/env python
"""Derive Lance's per-code-point tokenizer tables from ``lance.tokenize``.

Lance's MinHash tokenizer (simple base tokenizer -> LowerCaser -> AsciiFoldingFilter) uses
character data compiled into the pylance binary (Rust std's ``char::is_alphanumeric`` and
``char::to_lowercase``, and lance-tokenizer's ASCII folding).  Python's own Unicode data is a
different Unicode version and cannot replace it, so this script probes the installed Lance
for every Unicode scalar value, exactly as contract section 1.3 prescribes
(``/work/shared/lance-minhash-contract.md``), with ``s = "x" + chr(cp) + "y"``:

1. alnum: simple tokenizer, no lower-casing, no folding, no length limit -> ``[s]`` when cp
   is alphanumeric, ``["x", "y"]`` otherwise (anything else aborts the script);
2. lower: whitespace tokenizer with only the LowerCaser -> ``["x" + L + "y"]``; L recorded
   when it differs from chr(cp);
3. fold: whitespace tokenizer with only the AsciiFoldingFilter -> ``["x" + F + "y"]``.

Steps 2-3 skip " \\t\\n\\x0c\\r", the separators of the whitespace tokenizer (checked to
split, and to map to themselves).  One ``lance.tokenize`` call per probe (~3.3 M calls, no
batching, so nothing depends on context-freeness assumptions); it takes ~10-20 s.

The result is checked against the sizes in the contract (149,106 alphanumeric code points in
844 ranges, 1,488 lower-case and 2,207 folding entries) and against the composition property
(the default MinHash token of "x"+c+"y" is "x" + fold(lower(c)) + "y", char by char), then
written as ``lance_minhash_sql/data/unicode_tables.npz`` (read by
``lance_minhash_sql.io.unicode_tables``).  Re-run after any Lance upgrade; if the sizes change,
review the differences before updating the EXPECTED_* constants here and in the tests.

Usage::

    /work/venv/bin/python scripts/derive_unicode_tables.py [--out PATH]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import lance
import numpy as np

from lance_minhash_sql.core.params import TokenizerParams

# Sizes for pylance 14.0.2 (contract section 1.3).
EXPECTED_LANCE_VERSION = "14.0.2"
EXPECTED_ALNUM = 149_106
EXPECTED_ALNUM_RANGES = 844
EXPECTED_LOWER = 1_488
EXPECTED_LOWER_ASCII = 26
EXPECTED_FOLD = 2_207
MAX_LOWER_LEN = 2
MAX_FOLD_LEN = 5

MAX_CP = 0x10FFFF
SURROGATES = range(0xD800, 0xE000)
WHITESPACE_SEPARATORS = " \t\n\x0c\r"  # Rust is_ascii_whitespace: split the whitespace tokenizer

# The MinHash tokenizer settings (contract section 1.2); every option passed explicitly,
# since None would mean the FTS profile default (stem/stop words on).
MINHASH_TOKENIZER = TokenizerParams().lance_tokenize_kwargs()

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "lance_minhash_sql" / "data" / "unicode_tables.npz"


class ProbeError(AssertionError):
    """lance.tokenize returned something the probe protocol does not expect."""


def scalar_values():
    """Every Unicode scalar value: 0..0x10FFFF without the surrogates."""
    yield from range(0, SURROGATES.start)
    yield from range(SURROGATES.stop, MAX_CP + 1)


def make_toks(**over):
    """A function text -> list of token texts, with MINHASH_TOKENIZER overridden by `over`."""
    kwargs = {**MINHASH_TOKENIZER, **over}
    tokenize = lance.tokenize

    def toks(text: str) -> list[str]:
        return [t.text for t in tokenize(text, **kwargs)]

    return toks


def unwrap(cp: int, tokens: list[str], what: str) -> str:
    """Return M from tokens == ["x" + M + "y"]; raise ProbeError for any other shape."""
    if len(tokens) != 1:
        raise ProbeError(f"{what} probe of U+{cp:04X}: expected one token 'x…y', got {tokens!r}")
    t = tokens[0]
    if len(t) < 2 or t[0] != "x" or t[-1] != "y":
        raise ProbeError(f"{what} probe of U+{cp:04X}: token {t!r} is not of the form 'x…y'")
    return t[1:-1]


def probe_alnum() -> np.ndarray:
    toks = make_toks(lower_case=False, ascii_folding=False, max_token_length=None)
    alnum = np.zeros(MAX_CP + 1, dtype=np.uint8)
    for cp in scalar_values():
        s = "x" + chr(cp) + "y"
        got = toks(s)
        if got == [s]:
            alnum[cp] = 1
        elif got != ["x", "y"]:
            raise ProbeError(f"alnum probe of U+{cp:04X}: expected [{s!r}] or ['x', 'y'], got {got!r}")
    return alnum


def probe_mapping(what: str, **over) -> dict[int, str]:
    toks = make_toks(base_tokenizer="whitespace", max_token_length=None, **over)
    skip = {ord(c) for c in WHITESPACE_SEPARATORS}
    for cp in sorted(skip):
        got = toks("x" + chr(cp) + "y")
        if got != ["x", "y"]:
            raise ProbeError(f"{what} probe: whitespace separator U+{cp:04X} gave {got!r}, expected ['x', 'y']")
    mapping: dict[int, str] = {}
    for cp in scalar_values():
        if cp in skip:
            continue
        c = chr(cp)
        m = unwrap(cp, toks("x" + c + "y"), what)
        if m != c:
            mapping[cp] = m
    return mapping


def to_ranges(alnum: np.ndarray) -> np.ndarray:
    """Maximal runs of 1s as inclusive [start, end] rows (int32, shape (n, 2))."""
    padded = np.concatenate(([0], alnum.astype(np.int8), [0]))
    d = np.diff(padded)
    starts = np.flatnonzero(d == 1)
    ends = np.flatnonzero(d == -1) - 1
    return np.ascontiguousarray(np.stack([starts, ends], axis=1).astype(np.int32))


def to_csr(mapping: dict[int, str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = sorted(mapping)
    offsets = [0]
    values: list[int] = []
    for k in keys:
        values.extend(ord(ch) for ch in mapping[k])
        offsets.append(len(values))
    return (
        np.asarray(keys, dtype=np.int32),
        np.asarray(offsets, dtype=np.int32),
        np.asarray(values, dtype=np.int32),
    )


def apply_per_char(mapping: dict[int, str], text: str) -> str:
    return "".join(mapping.get(ord(ch), ch) for ch in text)


def check_tables(alnum: np.ndarray, ranges: np.ndarray, lower: dict[int, str], fold: dict[int, str]) -> None:
    """Assert the contract's sizes and shape rules."""
    problems = []

    def expect(cond: bool, msg: str):
        if not cond:
            problems.append(msg)

    n_alnum = int(alnum.sum())
    expect(n_alnum == EXPECTED_ALNUM, f"alnum: {n_alnum} code points, expected {EXPECTED_ALNUM}")
    expect(len(ranges) == EXPECTED_ALNUM_RANGES, f"alnum: {len(ranges)} ranges, expected {EXPECTED_ALNUM_RANGES}")
    expect(not alnum[SURROGATES.start:SURROGATES.stop].any(), "alnum: surrogates marked alphanumeric")

    expect(len(lower) == EXPECTED_LOWER, f"lower: {len(lower)} entries, expected {EXPECTED_LOWER}")
    ascii_lower = {k: v for k, v in lower.items() if k < 128}
    expect(
        ascii_lower == {ord(c): c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
        f"lower: ASCII entries {sorted(map(chr, ascii_lower))} should be exactly A-Z -> a-z",
    )
    expect(len(ascii_lower) == EXPECTED_LOWER_ASCII, f"lower: {len(ascii_lower)} ASCII keys, expected {EXPECTED_LOWER_ASCII}")
    bad = {k: v for k, v in lower.items() if not 1 <= len(v) <= MAX_LOWER_LEN}
    expect(not bad, f"lower: outputs not 1..{MAX_LOWER_LEN} chars: {list(bad.items())[:10]}")

    expect(len(fold) == EXPECTED_FOLD, f"fold: {len(fold)} entries, expected {EXPECTED_FOLD}")
    expect(not any(k < 128 for k in fold), f"fold: ASCII keys {[chr(k) for k in fold if k < 128]}")
    bad = {k: v for k, v in fold.items() if not (1 <= len(v) <= MAX_FOLD_LEN and v.isascii())}
    expect(not bad, f"fold: outputs not 1..{MAX_FOLD_LEN} ASCII chars: {list(bad.items())[:10]}")

    if problems:
        raise AssertionError(
            "derived tables do not match the expected Lance 14.0.2 sizes (if Lance was upgraded, "
            "review the differences and update the EXPECTED_* constants):\n  " + "\n  ".join(problems)
        )


def check_composition(alnum: np.ndarray, lower: dict[int, str], fold: dict[int, str]) -> int:
    """For every alphanumeric c: default MinHash token of "x"+c+"y" == "x"+fold(lower(c))+"y"."""
    toks = make_toks()  # the MinHash defaults, max_token_length=40 (probe tokens are <= 6 bytes)
    failures = []
    cps = np.flatnonzero(alnum)
    for cp in cps.tolist():
        c = chr(cp)
        want = "x" + apply_per_char(fold, apply_per_char(lower, c)) + "y"
        got = toks("x" + c + "y")
        if got != [want]:
            failures.append((cp, got, want))
    if failures:
        sample = ", ".join(f"U+{cp:04X}: got {g!r} want {w!r}" for cp, g, w in failures[:10])
        raise AssertionError(f"composition property fails for {len(failures)} alphanumeric code points: {sample}")
    return len(cps)


def check_whitespace_composition(lower: dict[int, str], fold: dict[int, str]) -> int:
    """Extra check: the same composition with the whitespace tokenizer, for every non-separator."""
    toks = make_toks(base_tokenizer="whitespace", max_token_length=None)
    skip = {ord(c) for c in WHITESPACE_SEPARATORS}
    failures = []
    n = 0
    for cp in scalar_values():
        if cp in skip:
            continue
        n += 1
        c = chr(cp)
        want = apply_per_char(fold, apply_per_char(lower, c))
        got = unwrap(cp, toks("x" + c + "y"), "whitespace lower+fold")
        if got != want:
            failures.append((cp, got, want))
    if failures:
        sample = ", ".join(f"U+{cp:04X}: got {g!r} want {w!r}" for cp, g, w in failures[:10])
        raise AssertionError(f"whitespace lower+fold composition fails for {len(failures)} code points: {sample}")
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output .npz (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)

    version = lance.__version__
    if version != EXPECTED_LANCE_VERSION:
        print(
            f"WARNING: lance {version} installed; the expected sizes are for {EXPECTED_LANCE_VERSION}",
            file=sys.stderr,
        )

    t0 = time.perf_counter()
    alnum = probe_alnum()
    t1 = time.perf_counter()
    lower = probe_mapping("lower", lower_case=True, ascii_folding=False)
    t2 = time.perf_counter()
    fold = probe_mapping("fold", lower_case=False, ascii_folding=True)
    t3 = time.perf_counter()
    print(f"probed alnum {t1 - t0:.1f}s, lower {t2 - t1:.1f}s, fold {t3 - t2:.1f}s")

    ranges = to_ranges(alnum)
    check_tables(alnum, ranges, lower, fold)
    n_comp = check_composition(alnum, lower, fold)
    n_ws = check_whitespace_composition(lower, fold)
    t4 = time.perf_counter()
    print(f"composition holds on all {n_comp} alphanumeric code points (simple tokenizer, defaults)")
    print(f"and on all {n_ws} non-separator code points (whitespace tokenizer, lower+fold) [{t4 - t3:.1f}s]")

    lower_keys, lower_offsets, lower_values = to_csr(lower)
    fold_keys, fold_offsets, fold_values = to_csr(fold)
    arrays = dict(
        alnum_ranges=ranges,
        lower_keys=lower_keys,
        lower_offsets=lower_offsets,
        lower_values=lower_values,
        fold_keys=fold_keys,
        fold_offsets=fold_offsets,
        fold_values=fold_values,
        lance_version=np.array(version),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    with np.load(tmp, allow_pickle=False) as z:  # round trip
        if sorted(z.files) != sorted(arrays):
            raise AssertionError(f"round trip: arrays {sorted(z.files)} != {sorted(arrays)}")
        for name, arr in arrays.items():
            got = z[name]
            if got.dtype != arr.dtype or got.shape != arr.shape or not np.array_equal(got, arr):
                raise AssertionError(f"round trip: array {name} differs")
    tmp.replace(args.out)

    print(
        f"alnum {int(alnum.sum())} code points in {len(ranges)} ranges; lower {len(lower)} entries "
        f"({len(lower_values)} values); fold {len(fold)} entries ({len(fold_values)} values)"
    )
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) for lance {version} in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
