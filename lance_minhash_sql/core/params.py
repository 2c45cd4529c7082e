"""The index's parameters and limits, written once (``docs/parameters.md``).

The format's constants come from :mod:`.lance_format`, the argument checks from
:mod:`.checks` and the S-curve's arithmetic from :mod:`.banding`; all are re-used here,
not restated.

The index parameters and their validation follow pylance 14.0.2's
``MinHashLshIndexParams::validate()`` (``rust/lance-index/src/scalar/minhash_lsh/mod.rs``):
``1 <= num_hashes <= 4096``, ``1 <= num_bands <= 256``, ``num_hashes % num_bands == 0``,
``shingle_size >= 1``. The tokenizer options are the subset of Lance's FTS
``InvertedIndexParams`` that change MinHash signatures, with MinHash's defaults
(no stemming, no stop words).

An index's parameters against a threshold: :func:`warn_if_low_recall` warns when its
bands make a pair at the threshold a candidate too rarely, and :func:`threshold_cut`
resolves what a search keeps of its hits.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from lance_minhash_sql.core.banding import candidate_floor, recall_bands, scurve, scurve_threshold
from lance_minhash_sql.core.checks import check_bool, check_int, check_threshold
from lance_minhash_sql.core.errors import InvalidParameterError, LowRecallWarning, warn
from lance_minhash_sql.core.lance_format import (DEFAULT_PAGE_ROWS, DOC_ID_BYTES, INDEX_VERSION, MAX_NUM_BANDS,
                                                 MAX_NUM_HASHES, SHINGLE_SEPARATOR, SIGNATURE_VERSION, min_matches)
from lance_minhash_sql.core.lance_format import SEED as SIGNATURE_SEED

__all__ = [
    "KEEP_POLICIES",
    "MAX_NUM_HASHES",
    "MAX_NUM_BANDS",
    "SIGNATURE_SEED",
    "SHINGLE_SEPARATOR",
    "SIGNATURE_VERSION",
    "INDEX_VERSION",
    "DEFAULT_PAGE_ROWS",
    "MAX_SEGMENT_ROWS",
    "DEFAULT_MEMORY_BUDGET",
    "MIN_MEMORY_BUDGET",
    "DEFAULT_SELF_JOIN_MEMORY",
    "MIN_SELF_JOIN_MEMORY",
    "DEFAULT_MAX_TEMP_SIZE",
    "BASE_TOKENIZERS",
    "KERNEL_TOKENIZERS",
    "LANGUAGES",
    "TokenizerParams",
    "MinHashParams",
    "LOW_RECALL_PROBABILITY",
    "warn_if_low_recall",
    "ThresholdCut",
    "threshold_cut",
    "check_threshold",  # re-exported from checks: the one threshold rule
]

KEEP_POLICIES = ("first", "longest")  # which row of a near-duplicate cluster dedup keeps

MAX_SHINGLE_SIZE = 2**31 - 1
# a threshold at which a pair is a candidate less often than this warns LowRecallWarning
LOW_RECALL_PROBABILITY = 0.5
MAX_SEGMENT_ROWS = 1 << (8 * DOC_ID_BYTES)  # doc ids are u32
# band sort budget of a build without memory_limit; $LANCE_MEM_POOL_SIZE overrides. Small
# on purpose: above ~350k rows the band rows spill to temp files through the page cache,
# which RSS does not count (docs/scale.md, "Memory of a build")
DEFAULT_MEMORY_BUDGET = 64 << 20
MIN_MEMORY_BUDGET = 64 << 10
# what a self-join (pairs, clusters, dedup, join) may hold without memory_limit: its band
# rows, candidates' signatures and result buffers (docs/scale.md, "Memory of a
# self-join"); below the minimum a shard's fixed buffers would not fit
DEFAULT_SELF_JOIN_MEMORY = 256 << 20
MIN_SELF_JOIN_MEMORY = 4 << 20
DEFAULT_MAX_TEMP_SIZE = 100 << 30  # spill space of a build; $LANCE_MAX_TEMP_DIRECTORY_SIZE overrides

# Every base tokenizer Lance's MinHash index accepts. The first five are reproduced by the
# numba tokenizer (kernels/tokenize.py; code's identifier split on rows of ASCII text); the
# others' tokens come from Lance's tokenizer.
BASE_TOKENIZERS = ("simple", "whitespace", "raw", "ngram", "code", "icu", "icu/split")
KERNEL_TOKENIZERS = BASE_TOKENIZERS[:5]
# Tantivy's stemmer and stop-word languages (the values Lance's `language` accepts).
LANGUAGES = (
    "Arabic", "Danish", "Dutch", "English", "Finnish", "French", "German", "Greek",
    "Hungarian", "Italian", "Norwegian", "Portuguese", "Romanian", "Russian", "Spanish",
    "Swedish", "Tamil", "Turkish",
)
# Options of Lance's tokenizer that its MinHash index refuses, with Lance's reason and what to
# use instead (Lance 14.0.2, minhash_lsh/mod.rs validate_tokenizer).
_DICTIONARY_TOKENIZERS = ("jieba", "lindera")
_REFUSED_KEYS = MappingProxyType({
    "custom_stop_words": "custom_stop_words are not recorded in the index details, so Lance's MinHash "
                         "index refuses them; use remove_stop_words=true with a language instead",
    "lance_tokenizer": "lance_tokenizer is not recorded in the index details, so Lance's MinHash index "
                       "refuses it; use base_tokenizer instead",
})
# Lance's analyzer presets (the `analyzer` key): "code" means base_tokenizer "code" with the
# code tokenizer's defaults; "text" the others. Neither is recorded in the index details.
ANALYZERS = ("text", "code")
# The code tokenizer's options ("code analyzer flags"), with their defaults under it; Lance
# refuses any of them set to true under the text analyzer.
CODE_FLAGS = MappingProxyType({"split_identifiers": False, "split_on_numerics": True, "preserve_original": True,
              "index_operators": False})
# What a document is (Lance's `document_granularity`): Lance's MinHash index takes string
# columns only, so a row is one document under either; the value is recorded in the details.
GRANULARITIES = ("row", "list_element")
_BLOCK_SIZES = (128, 256)


@dataclass(frozen=True)
class TokenizerParams:
    """How text becomes tokens; the defaults are Lance's MinHash defaults.

    Pipeline (Lance's order): base tokenizer, then drop tokens of ``>= max_token_length``
    UTF-8 bytes (``None``: no limit), then lower-case, then stem (``stem``, Snowball for
    ``language``), then drop stop words (``remove_stop_words``, ``language``'s list), then
    ASCII folding. ``split_identifiers``, ``split_on_numerics``, ``preserve_original`` and
    ``index_operators`` are the ``code`` tokenizer's (:data:`CODE_FLAGS`; ``None``: its
    default; under any other base tokenizer they are all false, and true is refused as
    Lance refuses it). ``document_granularity`` is recorded, and changes no token.
    """

    base_tokenizer: str = "simple"
    language: str = "English"
    max_token_length: int | None = 40
    lower_case: bool = True
    ascii_folding: bool = True
    min_ngram_length: int = 3
    max_ngram_length: int = 3
    prefix_only: bool = False
    stem: bool = False
    remove_stop_words: bool = False
    with_position: bool = False
    block_size: int = 128
    index_operators: bool = False
    split_identifiers: bool | None = None
    split_on_numerics: bool | None = None
    preserve_original: bool | None = None
    document_granularity: str = "row"

    def __post_init__(self) -> None:
        bt = self.base_tokenizer
        if not isinstance(bt, str):
            raise InvalidParameterError(f"base_tokenizer={bt!r} must be a string, one of {BASE_TOKENIZERS}")
        if bt.split("/")[0] in _DICTIONARY_TOKENIZERS:
            raise InvalidParameterError(
                f"base_tokenizer={bt!r} is refused by Lance's MinHash index: the {bt} tokenizer loads a "
                "dictionary from LANCE_LANGUAGE_MODEL_HOME, outside Lance, so the index details cannot "
                "identify it; for Chinese, Japanese, Korean or Thai text use base_tokenizer='icu' "
                "(dictionary word segmentation built into Lance)"
            )
        if bt not in BASE_TOKENIZERS:
            raise InvalidParameterError(f"base_tokenizer={bt!r} is unknown; use one of {BASE_TOKENIZERS}")
        if self.language not in LANGUAGES:
            raise InvalidParameterError(f"language={self.language!r} is unknown; use one of {LANGUAGES}")
        if self.max_token_length is not None:
            n = check_int("max_token_length", self.max_token_length, "use a positive integer or null for no limit")
            if n < 1:
                raise InvalidParameterError(
                    f"max_token_length={n} must be >= 1 (tokens of >= max_token_length bytes are dropped); "
                    "use a positive integer or null for no limit"
                )
            object.__setattr__(self, "max_token_length", n)
        for name in ("lower_case", "ascii_folding", "prefix_only", "stem", "remove_stop_words", "with_position"):
            check_bool(name, getattr(self, name))
        for name, default in CODE_FLAGS.items():
            value = getattr(self, name)
            if value is None:
                value = default if bt == "code" else False
            check_bool(name, value)
            if value and bt != "code":
                raise _code_flag_refused(name, bt)
            object.__setattr__(self, name, value)
        if self.document_granularity not in GRANULARITIES:
            raise InvalidParameterError(
                f"document_granularity={self.document_granularity!r} is unknown: Lance's MinHash index expects "
                f"one of {GRANULARITIES} (a row of a string column is one document under either)")
        lo = check_int("min_ngram_length", self.min_ngram_length, "use a positive integer")
        hi = check_int("max_ngram_length", self.max_ngram_length, "use a positive integer")
        if lo < 1 or hi < lo:
            raise InvalidParameterError(
                f"min_ngram_length={lo}, max_ngram_length={hi}: require 1 <= min_ngram_length <= "
                "max_ngram_length; e.g. min_ngram_length=3, max_ngram_length=3"
            )
        object.__setattr__(self, "min_ngram_length", lo)
        object.__setattr__(self, "max_ngram_length", hi)
        bs = check_int("block_size", self.block_size, f"use one of {_BLOCK_SIZES}")
        if bs not in _BLOCK_SIZES:
            raise InvalidParameterError(f"block_size={bs} must be one of {_BLOCK_SIZES}")
        object.__setattr__(self, "block_size", bs)

    @classmethod
    def parse(cls, value: "TokenizerParams | Mapping[str, Any] | str | None") -> "TokenizerParams":
        """Accept ``None`` (defaults), a mapping, a JSON object string, or an instance."""
        if value is None:
            return cls()
        if isinstance(value, TokenizerParams):
            return value
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as exc:
                raise InvalidParameterError(
                    f"tokenizer={value!r} is not valid JSON ({exc.msg}); pass a JSON object such as "
                    '\'{"base_tokenizer": "whitespace"}\''
                ) from None
        if not isinstance(value, Mapping):
            raise InvalidParameterError(
                f"tokenizer={value!r} must be a JSON object / mapping of tokenizer options, "
                f"with keys among {sorted(_TOKENIZER_KEYS)}"
            )
        for key, reason in _REFUSED_KEYS.items():
            if key in value:
                raise InvalidParameterError(f"tokenizer option {key}={value[key]!r}: {reason}")
        value = _resolved_analyzer(value)
        if "document_granularity" in value:
            value["document_granularity"] = _granularity(value["document_granularity"])
        unknown = sorted(set(value) - _TOKENIZER_KEYS)
        if unknown:
            raise InvalidParameterError(
                f"tokenizer option(s) {unknown} are unknown or unsupported; valid keys are "
                f"{sorted(_TOKENIZER_KEYS)}"
            )
        return cls(**dict(value))

    def to_dict(self) -> dict[str, Any]:
        """All options, as Lance's ``IndexConfig("MINHASHLSH", {"tokenizer": ...})`` takes them."""
        return asdict(self)

    @property
    def lance_made(self) -> bool:
        """Whether the tokens come from Lance's tokenizer rather than the numba one: a
        base tokenizer the kernels do not reproduce, or stemming / stop-word removal."""
        return self.base_tokenizer not in KERNEL_TOKENIZERS or self.stem or self.remove_stop_words

    def lance_tokenize_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``lance.tokenize`` that run this exact pipeline (the
        ``code`` tokenizer of Lance's MinHash index does not split identifiers)."""
        kw: dict[str, Any] = dict(
            base_tokenizer=self.base_tokenizer, language=self.language,
            max_token_length=self.max_token_length, lower_case=self.lower_case, stem=self.stem,
            remove_stop_words=self.remove_stop_words, ascii_folding=self.ascii_folding,
        )
        if self.base_tokenizer == "ngram":
            kw.update(min_ngram_length=self.min_ngram_length, max_ngram_length=self.max_ngram_length,
                      prefix_only=self.prefix_only)
        if self.base_tokenizer == "code":
            kw.update({name: getattr(self, name) for name in CODE_FLAGS})
        return kw


_TOKENIZER_KEYS = frozenset(TokenizerParams.__dataclass_fields__)


def _code_flag_refused(name: str, base_tokenizer: Any) -> InvalidParameterError:
    return InvalidParameterError(
        f"{name}=True applies to base_tokenizer='code' only (base_tokenizer={base_tokenizer!r}): Lance's MinHash "
        f"index refuses it (\"code analyzer flags require analyzer='code'\"); set base_tokenizer='code' "
        f"(or analyzer='code') or drop {name}")


def _resolved_analyzer(value: dict[str, Any]) -> dict[str, Any]:
    """The options without ``analyzer``, resolved as Lance resolves the preset: ``"code"``
    sets ``base_tokenizer="code"`` and refuses another; ``"text"`` (the default, unless
    ``base_tokenizer`` is ``"code"``) refuses ``base_tokenizer="code"`` and the code flags."""
    value = dict(value)
    analyzer = value.pop("analyzer", None)
    base = value.get("base_tokenizer")
    if analyzer is not None and analyzer not in ANALYZERS:
        raise InvalidParameterError(
            f"analyzer={analyzer!r} is unknown: Lance's MinHash index expects 'text' or 'code' (or no analyzer)")
    if analyzer is None:
        analyzer = "code" if base == "code" else "text"
    if analyzer == "text" and base == "code":
        raise InvalidParameterError(
            "analyzer='text' with base_tokenizer='code': Lance's MinHash index refuses it (\"base_tokenizer='code' "
            "requires analyzer='code'\"); use analyzer='code' or drop analyzer")
    if analyzer == "code" and base is not None and base != "code":
        raise InvalidParameterError(
            f"analyzer='code' with base_tokenizer={base!r}: Lance's MinHash index refuses it (\"analyzer='code' "
            f"requires base_tokenizer='code'\"); drop base_tokenizer or analyzer")
    if analyzer == "text":
        for name in CODE_FLAGS:
            if value.get(name) is True:
                raise _code_flag_refused(name, base if base is not None else "simple")
    else:
        value["base_tokenizer"] = "code"
    return value


def _granularity(value: Any) -> str:
    """``document_granularity`` as Lance reads it: ``"row"`` or ``"list_element"``, a
    one-key mapping to null (``{"row": null}``), or null (``"row"``)."""
    if value is None:
        return "row"
    if isinstance(value, Mapping) and len(value) == 1 and next(iter(value.values())) is None:
        value = next(iter(value))
    if value not in GRANULARITIES:
        raise InvalidParameterError(
            f"document_granularity={value!r} is unknown: Lance's MinHash index expects one of {GRANULARITIES} "
            "(a row of a string column is one document under either)")
    return value


@dataclass(frozen=True)
class MinHashParams:
    """Index parameters: ``num_hashes`` (k), ``num_bands`` (b), ``shingle_size``, tokenizer."""

    num_hashes: int = 128
    num_bands: int = 16
    shingle_size: int = 3
    tokenizer: TokenizerParams = field(default_factory=TokenizerParams)

    def __post_init__(self) -> None:
        k = check_int("num_hashes", self.num_hashes, f"use 1..{MAX_NUM_HASHES}, e.g. 128")
        b = check_int("num_bands", self.num_bands, "use a divisor of num_hashes, e.g. 16")
        w = check_int("shingle_size", self.shingle_size, "use a positive integer, e.g. 3")
        if not 1 <= k <= MAX_NUM_HASHES:
            raise InvalidParameterError(
                f"num_hashes={k} is out of range: requires 1 <= num_hashes <= {MAX_NUM_HASHES}; e.g. 128"
            )
        if not 1 <= b <= MAX_NUM_BANDS:
            raise InvalidParameterError(
                f"num_bands={b} is out of range: requires 1 <= num_bands <= {MAX_NUM_BANDS} "
                "(the band id is one byte of the band key); e.g. 16"
            )
        if k % b:
            divisors = [d for d in range(1, min(k, MAX_NUM_BANDS) + 1) if k % d == 0]
            below = [d for d in divisors if d < b][-1:]
            above = [d for d in divisors if d > b][:1]
            near = below + above
            raise InvalidParameterError(
                f"num_bands={b} does not divide num_hashes={k}: requires num_hashes to be a multiple "
                f"of num_bands (rows per band = num_hashes / num_bands); use e.g. num_bands in {near}"
            )
        if w < 1:
            raise InvalidParameterError(f"shingle_size={w} must be >= 1 (tokens per shingle); e.g. 3")
        if w > MAX_SHINGLE_SIZE:
            raise InvalidParameterError(
                f"shingle_size={w} is out of range: requires shingle_size <= {MAX_SHINGLE_SIZE} (Lance stores it "
                "as a 32-bit value; a shingle longer than a text's token list is the whole list anyway); e.g. 3")
        if not isinstance(self.tokenizer, TokenizerParams):
            object.__setattr__(self, "tokenizer", TokenizerParams.parse(self.tokenizer))
        object.__setattr__(self, "num_hashes", k)
        object.__setattr__(self, "num_bands", b)
        object.__setattr__(self, "shingle_size", w)

    @classmethod
    def create(
        cls,
        num_hashes: int | None = 128,
        num_bands: int | None = None,
        shingle_size: int | None = 3,
        tokenizer: "TokenizerParams | Mapping[str, Any] | str | None" = None,
        threshold: float | None = None,
    ) -> "MinHashParams":
        """Validated parameters; with ``threshold`` and no ``num_bands``, (b, r) is chosen for it."""
        k = 128 if num_hashes is None else num_hashes
        if threshold is not None:
            if num_bands is not None:
                raise InvalidParameterError(
                    f"threshold={threshold!r} and num_bands={num_bands!r} were both given: threshold "
                    "chooses num_bands; pass one of them"
                )
            num_bands, _ = recall_bands(threshold, check_int("num_hashes", k, "e.g. 128"))
        return cls(
            num_hashes=k,
            num_bands=16 if num_bands is None else num_bands,
            shingle_size=3 if shingle_size is None else shingle_size,
            tokenizer=TokenizerParams.parse(tokenizer),
        )

    @property
    def rows_per_band(self) -> int:
        return self.num_hashes // self.num_bands

    @property
    def threshold(self) -> float:
        """Similarity at the S-curve's steep point, ``(1/b)**(1/r)``."""
        return scurve_threshold(self.num_bands, self.rows_per_band)

    def with_tokenizer(self, **options: Any) -> "MinHashParams":
        return replace(self, tokenizer=replace(self.tokenizer, **options))

    def differences(self, other: "MinHashParams") -> list[str]:
        """``name=value vs value`` for every parameter (tokenizer options included) that
        differs from ``other``.

        >>> MinHashParams(64, 8).differences(MinHashParams(128, 8))
        ['num_hashes=64 vs 128']
        """
        return _differences(self, other)

    def to_lance_config(self) -> dict[str, Any]:
        """Parameters for ``lance.indices.IndexConfig("MINHASHLSH", ...)``."""
        return {
            "num_hashes": self.num_hashes,
            "num_bands": self.num_bands,
            "shingle_size": self.shingle_size,
            "tokenizer": self.tokenizer.to_dict(),
        }


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    out = []
    for f in fields(a):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if is_dataclass(va) and is_dataclass(vb):
            out += _differences(va, vb, f"{prefix}{f.name}.")
        elif va != vb:
            out.append(f"{prefix}{f.name}={va!r} vs {vb!r}")
    return out


# --------------------------------------------------------------------------- an index against a threshold


def warn_if_low_recall(params: MinHashParams, threshold: float) -> None:
    """Warn (:class:`LowRecallWarning`) when a pair of similarity ``threshold`` shares a band
    with probability below :data:`LOW_RECALL_PROBABILITY` under the index's ``(b, r)``;
    ``threshold`` is checked already."""
    b, r = params.num_bands, params.rows_per_band
    p = scurve(threshold, b, r)
    if p >= LOW_RECALL_PROBABILITY or threshold >= 1.0:
        return
    b2, r2 = recall_bands(threshold, params.num_hashes)
    warn(LowRecallWarning(
        f"threshold := {threshold:g} lies far below the index's S-curve threshold {params.threshold:.3f} "
        f"({b} bands of {r} rows): a pair of similarity {threshold:g} shares a band, and so "
        f"becomes a candidate, with probability {p:.3f} only, so most such pairs are missed. For this "
        f"threshold rebuild the index with {b2} bands of {r2} rows (probability "
        f"{scurve(threshold, b2, r2):.3f}), e.g. "
        f"minhash_build(dataset, column, num_hashes := {params.num_hashes}, num_bands := {b2}) "
        f"or minhash_build(dataset, column, threshold := {threshold:g})"))


class ThresholdCut(NamedTuple):
    """What a search keeps of its hits, resolved once per search (:func:`threshold_cut`)
    from the index's parameters and the checked ``threshold`` and ``verify``."""

    threshold: float | None  # the similarity a hit must reach; None: every hit
    num_hashes: int  # k: a hit's equal signature values are ``(1 - _distance) * k``
    min_eq: int  # the equal values a hit's estimate must reach (0 without a threshold)
    exact: bool  # verify := 'exact': each hit's exact Jaccard is computed, and decides at the threshold


def threshold_cut(params: MinHashParams, threshold: float | None, verify: str) -> ThresholdCut:
    """The cut of a search of ``params``' index: a hit's estimate must reach ``threshold``,
    or under ``verify="exact"`` its floor (:func:`.banding.candidate_floor`: the exact Jaccard
    then decides), as :func:`min_matches` equal values; warns once when the index cannot
    reach such pairs (:func:`warn_if_low_recall`). ``threshold`` and ``verify`` are checked
    at the boundary already."""
    exact = verify == "exact"
    k = params.num_hashes
    if threshold is None:
        return ThresholdCut(None, k, 0, exact)
    warn_if_low_recall(params, threshold)
    return ThresholdCut(threshold, k, min_matches(candidate_floor(threshold, k, verify), k), exact)
