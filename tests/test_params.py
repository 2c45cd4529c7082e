"""Parameter validation and the LSH math."""

from __future__ import annotations

import doctest
import math

import pytest

import lance_minhash_sql.core.banding as banding_module
import lance_minhash_sql.core.params as params_module
from lance_minhash_sql.core.errors import InvalidParameterError, LanceMinHashError
from lance_minhash_sql.core.banding import (false_negative_area, false_positive_area, lsh_probability, optimal_bands,
                                            recall_bands, scurve_threshold)
from lance_minhash_sql.core.params import MinHashParams, TokenizerParams


def test_defaults_are_lance_defaults():
    p = MinHashParams()
    assert (p.num_hashes, p.num_bands, p.shingle_size, p.rows_per_band) == (128, 16, 3, 8)
    t = p.tokenizer
    assert (t.base_tokenizer, t.max_token_length, t.lower_case, t.ascii_folding, t.stem, t.remove_stop_words) == \
        ("simple", 40, True, True, False, False)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(num_hashes=0), "1 <= num_hashes <= 4096"),
    (dict(num_hashes=4097), "1 <= num_hashes <= 4096"),
    (dict(num_hashes=8192), "1 <= num_hashes <= 4096"),
    (dict(num_bands=0), "1 <= num_bands <= 256"),
    (dict(num_hashes=512, num_bands=512), "1 <= num_bands <= 256"),
    (dict(num_bands=7), "multiple of num_bands"),
    (dict(num_hashes=100, num_bands=16), "multiple of num_bands"),
    (dict(shingle_size=0), "shingle_size=0 must be >= 1"),
    (dict(num_hashes="128"), "must be an integer"),
    (dict(num_hashes=True), "must be an integer"),
    (dict(num_hashes=12.5), "must be an integer"),
])
def test_invalid_parameters_name_value_and_rule(kwargs, fragment):
    with pytest.raises(InvalidParameterError) as info:
        MinHashParams(**kwargs)
    assert fragment in str(info.value)
    assert isinstance(info.value, LanceMinHashError) and isinstance(info.value, ValueError)


def test_divisor_suggestion():
    with pytest.raises(InvalidParameterError, match=r"num_bands in \[4, 8\]"):
        MinHashParams(num_hashes=128, num_bands=7)


@pytest.mark.parametrize("tok, fragment", [
    ({"base_tokenizer": "jieba/default"}, "refused by Lance's MinHash index"),
    ({"base_tokenizer": "nope"}, "unknown"),
    ({"max_token_length": 0}, ">= 1"),
    ({"min_ngram_length": 4, "max_ngram_length": 3}, "min_ngram_length <= max_ngram_length"),
    ({"lower_case": "yes"}, "true or false"),
    ({"custom_stop_words": ["a"]}, "not recorded in the index details"),
    ({"lowercase": True}, "unknown or unsupported"),
    ({"language": "Klingon"}, "unknown"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    (42, "JSON object"),
])
def test_invalid_tokenizers(tok, fragment):
    with pytest.raises(InvalidParameterError, match=fragment):
        TokenizerParams.parse(tok)


def test_tokenizer_parse_forms_agree():
    a = TokenizerParams.parse({"base_tokenizer": "whitespace", "max_token_length": None})
    b = TokenizerParams.parse('{"base_tokenizer": "whitespace", "max_token_length": null}')
    assert a == b == TokenizerParams(base_tokenizer="whitespace", max_token_length=None)
    assert TokenizerParams.parse(None) == TokenizerParams.parse("") == TokenizerParams()
    assert TokenizerParams.parse(a) is a


def test_params_hashable_and_equal():
    assert MinHashParams() == MinHashParams.create()
    assert len({MinHashParams(), MinHashParams.create(), MinHashParams(64, 8)}) == 2


def test_lance_config_round_trip():
    p = MinHashParams(64, 8, 5).with_tokenizer(base_tokenizer="ngram", min_ngram_length=2)
    cfg = p.to_lance_config()
    assert MinHashParams(cfg["num_hashes"], cfg["num_bands"], cfg["shingle_size"],
                         TokenizerParams.parse(cfg["tokenizer"])) == p


def test_s_curve_formula():
    for s in (0.0, 0.2, 0.5, 0.8, 1.0):
        assert lsh_probability(s, 16, 8) == pytest.approx(1 - (1 - s ** 8) ** 16)
    assert lsh_probability(1.0, 16, 8) == 1.0 and lsh_probability(0.0, 16, 8) == 0.0
    assert scurve_threshold(16, 8) == pytest.approx((1 / 16) ** (1 / 8))
    with pytest.raises(InvalidParameterError, match=r"in \[0, 1\]"):
        lsh_probability(1.5, 16, 8)
    with pytest.raises(InvalidParameterError, match=">= 1"):
        lsh_probability(0.5, 0, 8)


def test_areas_are_integrals():
    # closed form for b = 1, r = 1: P(s) = s
    assert false_positive_area(0.5, 1, 1) == pytest.approx(0.125)
    assert false_negative_area(0.5, 1, 1) == pytest.approx(0.125)


def brute_force_optimal(threshold, k, wfp=0.5, wfn=0.5):
    best = None
    for b in range(1, min(k, 256) + 1):
        if k % b == 0:
            r = k // b
            err = wfp * false_positive_area(threshold, b, r) + wfn * false_negative_area(threshold, b, r)
            if best is None or err < best[0]:
                best = (err, b, r)
    return best[1:]


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9, 0.95])
def test_optimal_bands(threshold):
    b, r = optimal_bands(threshold, 128)
    assert b * r == 128 and (b, r) == brute_force_optimal(threshold, 128)
    # the chosen S-curve's steep point lies near the target
    assert abs(scurve_threshold(b, r) - threshold) < 0.2


def test_optimal_bands_weights_move_the_choice():
    fp_heavy = optimal_bands(0.7, 256, false_positive_weight=0.95, false_negative_weight=0.05)
    fn_heavy = optimal_bands(0.7, 256, false_positive_weight=0.05, false_negative_weight=0.95)
    assert scurve_threshold(*fp_heavy) > scurve_threshold(*fn_heavy)


def test_threshold_chooses_bands():
    p = MinHashParams.create(threshold=0.9)
    assert (p.num_bands, p.rows_per_band) == recall_bands(0.9, 128)
    with pytest.raises(InvalidParameterError, match="pass one of them"):
        MinHashParams.create(num_bands=16, threshold=0.8)
    for bad in (0, 1.2, -0.1, math.nan, True):
        with pytest.raises(InvalidParameterError, match="0 < threshold <= 1"):
            optimal_bands(bad)
        with pytest.raises(InvalidParameterError, match="0 < threshold <= 1"):
            recall_bands(bad)
    assert recall_bands(1, 128) == (1, 128)  # identical sets: one band of every hash finds them all


@pytest.mark.parametrize("k", [1, 64, 128, 4096])
def test_threshold_one_asks_for_identical_signatures(k):
    """At threshold 1 only identical signatures count; one band of all k rows makes every
    such pair a candidate (P(1) = 1) and no other pair shares a band more often."""
    assert recall_bands(1, k) == (1, k) == optimal_bands(1.0, k)
    p = MinHashParams.create(num_hashes=k, threshold=1)
    assert (p.num_bands, p.rows_per_band) == (1, k) and lsh_probability(1.0, 1, k) == 1.0


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, math.nan, math.inf, True, "0.8", None])
def test_one_threshold_rule_and_message_everywhere(bad):
    from lance_minhash_sql.core.checks import THRESHOLD_RULE, check_threshold

    calls = [lambda: check_threshold(bad), lambda: recall_bands(bad), lambda: optimal_bands(bad)]
    if bad is not None:  # None: no threshold, num_bands chooses
        calls.append(lambda: MinHashParams.create(threshold=bad))
    for call in calls:
        with pytest.raises(InvalidParameterError) as exc:
            call()
        msg = str(exc.value)
        assert THRESHOLD_RULE in msg and "e.g. 0.8" in msg, msg
        assert ("threshold is NULL" if bad is None else f"threshold={bad!r}") in msg, msg


def test_docstring_examples():
    for module in (params_module, banding_module):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


@pytest.mark.parametrize("k", [1, 64, 128, 4096])
@pytest.mark.parametrize("threshold", [0.05, 0.3, 0.5, 0.7, 0.8, 0.9, 0.97])
def test_recall_bands_are_the_fewest_reaching_the_probability(k, threshold):
    b, r = recall_bands(threshold, k)
    assert b * r == k and b <= 256
    reaching = [d for d in range(1, min(k, 256) + 1) if k % d == 0 and lsh_probability(threshold, d, k // d) >= 0.9]
    if reaching:
        assert b == reaching[0] and lsh_probability(threshold, b, r) >= 0.9
    else:  # none reaches it: the most bands
        assert b == max(d for d in range(1, min(k, 256) + 1) if k % d == 0)


def test_docstring_examples_of_the_shared_rules():
    from lance_minhash_sql.core import checks, lance_format, sizes

    for module in (checks, sizes, lance_format):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


# --------------------------------------------------------------------------- rules, value by value
# Boundaries, normalised values and the exact messages: each message names the parameter
# and its value, the rule and the fix.


def _message(call) -> str:
    with pytest.raises(InvalidParameterError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("call, message", [
    (lambda: MinHashParams(num_hashes="x"), "num_hashes='x' must be an integer; use 1..4096, e.g. 128"),
    (lambda: MinHashParams(num_bands="x"), "num_bands='x' must be an integer; use a divisor of num_hashes, e.g. 16"),
    (lambda: MinHashParams(shingle_size="x"), "shingle_size='x' must be an integer; use a positive integer, e.g. 3"),
    (lambda: MinHashParams(num_hashes=2.5), "num_hashes=2.5 must be an integer; use 1..4096, e.g. 128"),
    (lambda: MinHashParams(num_hashes=True), "num_hashes=True must be an integer; use 1..4096, e.g. 128"),
    (lambda: lsh_probability(2.0, 16, 8), "similarity=2.0 must be a number in [0, 1]; e.g. 0.8"),
    (lambda: lsh_probability(True, 16, 8), "similarity=True must be a number in [0, 1]; e.g. 0.8"),
    (lambda: lsh_probability(0.5, "x", 8), "num_bands='x' must be an integer; use a positive integer"),
    (lambda: lsh_probability(0.5, 16, "x"), "rows_per_band='x' must be an integer; use a positive integer"),
    (lambda: recall_bands(2, 128), "threshold=2 is out of range: requires 0 < threshold <= 1 (the MinHash "
     "similarity a pair must reach; 1: identical signatures); e.g. 0.8"),
    (lambda: recall_bands(0.0, 128), "threshold=0.0 is out of range: requires 0 < threshold <= 1 (the MinHash "
     "similarity a pair must reach; 1: identical signatures); e.g. 0.8"),
    (lambda: recall_bands(0.8, "x"), "num_hashes='x' must be an integer in 1..4096; e.g. 128"),
    (lambda: recall_bands(0.8, 0), "num_hashes=0 must be an integer in 1..4096; e.g. 128"),
    (lambda: recall_bands(0.8, 128, probability=1.5), "probability=1.5 must be a number in [0, 1]; e.g. 0.8"),
    (lambda: optimal_bands(0.8, 128, false_positive_weight=-1),
     "false_positive_weight=-1 is out of range: requires 0 <= false_positive_weight; e.g. 0.5"),
    (lambda: optimal_bands(0.8, 128, false_negative_weight=float("inf")),
     "false_negative_weight=inf is out of range: requires a finite number (0 <= false_negative_weight); "
     "e.g. 0.5"),
    (lambda: TokenizerParams(max_token_length="x"),
     "max_token_length='x' must be an integer; use a positive integer or null for no limit"),
    (lambda: TokenizerParams(max_token_length=0), "max_token_length=0 must be >= 1 (tokens of >= max_token_length "
     "bytes are dropped); use a positive integer or null for no limit"),
    (lambda: TokenizerParams(min_ngram_length="x"), "min_ngram_length='x' must be an integer; use a positive integer"),
    (lambda: TokenizerParams(max_ngram_length="x"), "max_ngram_length='x' must be an integer; use a positive integer"),
    (lambda: TokenizerParams(block_size="x"), "block_size='x' must be an integer; use one of (128, 256)"),
    (lambda: TokenizerParams(block_size=64), "block_size=64 must be one of (128, 256)"),
    (lambda: TokenizerParams(lower_case=1), "lower_case=1 must be true or false"),
    (lambda: TokenizerParams(base_tokenizer=7),
     "base_tokenizer=7 must be a string, one of ('simple', 'whitespace', 'raw', 'ngram', 'code', 'icu', "
     "'icu/split')"),
    (lambda: TokenizerParams.parse("{nope"), "tokenizer='{nope' is not valid JSON (Expecting property name enclosed "
     "in double quotes); pass a JSON object such as '{\"base_tokenizer\": \"whitespace\"}'"),
])
def test_messages_name_the_value_the_rule_and_the_fix(call, message):
    assert _message(call) == message


def test_bounds_are_inclusive():
    from lance_minhash_sql.core.params import MAX_NUM_BANDS, MAX_NUM_HASHES, MAX_SHINGLE_SIZE

    p = MinHashParams(1, 1, 1)
    assert (p.num_hashes, p.num_bands, p.shingle_size, p.rows_per_band) == (1, 1, 1, 1)
    assert MinHashParams(MAX_NUM_HASHES, MAX_NUM_BANDS).rows_per_band == MAX_NUM_HASHES // MAX_NUM_BANDS
    assert MinHashParams(shingle_size=MAX_SHINGLE_SIZE).shingle_size == MAX_SHINGLE_SIZE
    for bad in (dict(num_hashes=0, num_bands=1), dict(num_hashes=MAX_NUM_HASHES + 1, num_bands=1),
                dict(num_bands=0), dict(num_hashes=2 * MAX_NUM_BANDS + 2, num_bands=MAX_NUM_BANDS + 1),
                dict(shingle_size=0), dict(shingle_size=MAX_SHINGLE_SIZE + 1)):
        with pytest.raises(InvalidParameterError):
            MinHashParams(**bad)
    assert "num_hashes=0 is out of range" in _message(lambda: MinHashParams(0, 1))
    assert f"num_hashes={MAX_NUM_HASHES + 1} is out of range" in _message(lambda: MinHashParams(MAX_NUM_HASHES + 1, 1))
    assert "num_bands=0 is out of range" in _message(lambda: MinHashParams(num_bands=0))
    assert "shingle_size=0" in _message(lambda: MinHashParams(shingle_size=0))
    assert f"shingle_size={MAX_SHINGLE_SIZE + 1}" in _message(lambda: MinHashParams(shingle_size=MAX_SHINGLE_SIZE + 1))
    t = TokenizerParams(base_tokenizer="ngram", max_token_length=1, min_ngram_length=1, max_ngram_length=1)
    assert (t.max_token_length, t.min_ngram_length, t.max_ngram_length) == (1, 1, 1)
    assert "min_ngram_length=0, max_ngram_length=3" in _message(lambda: TokenizerParams(min_ngram_length=0))
    assert "min_ngram_length=4, max_ngram_length=3" in _message(lambda: TokenizerParams(min_ngram_length=4))
    assert TokenizerParams(block_size=128).block_size == 128


def test_integral_values_are_stored_as_int():
    import numpy as np

    p = MinHashParams(np.int64(64), 8.0, np.uint8(2))
    assert (p.num_hashes, p.num_bands, p.shingle_size) == (64, 8, 2)
    assert all(type(v) is int for v in (p.num_hashes, p.num_bands, p.shingle_size))
    t = TokenizerParams(base_tokenizer="ngram", max_token_length=np.int32(7), min_ngram_length=2.0,
                        max_ngram_length=np.int16(3), block_size=256.0)
    assert (t.max_token_length, t.min_ngram_length, t.max_ngram_length, t.block_size) == (7, 2, 3, 256)
    assert all(type(v) is int for v in (t.max_token_length, t.min_ngram_length, t.max_ngram_length, t.block_size))
    assert MinHashParams(tokenizer={"base_tokenizer": "whitespace"}).tokenizer == \
        TokenizerParams(base_tokenizer="whitespace")
    assert MinHashParams(tokenizer='{"lower_case": false}').tokenizer == TokenizerParams(lower_case=False)


@pytest.mark.parametrize("k, b, near", [(128, 7, [4, 8]), (9, 2, [1, 3]), (6, 4, [3, 6]), (12, 5, [4, 6])])
def test_a_band_count_that_does_not_divide_suggests_the_nearest_divisors(k, b, near):
    assert _message(lambda: MinHashParams(k, b)).endswith(f"use e.g. num_bands in {near}")


@pytest.mark.parametrize("name", ["lindera/ipadic", "jieba/default", "jieba"])
def test_dictionary_tokenizers_are_refused_by_name_with_lances_reason(name):
    assert _message(lambda: TokenizerParams(base_tokenizer=name)).startswith(
        f"base_tokenizer={name!r} is refused by Lance's MinHash index: the {name} tokenizer loads a dictionary")


def test_create_fills_defaults_and_chooses_bands_for_a_threshold():
    assert MinHashParams.create(None, None, None) == MinHashParams()
    assert MinHashParams.create(64) == MinHashParams(64, 16)
    assert MinHashParams.create(num_hashes=64, threshold=0.8) == MinHashParams(64, recall_bands(0.8, 64)[0])
    assert MinHashParams.create(num_hashes=None, threshold=0.5).num_bands == recall_bands(0.5, 128)[0] == 64
    assert _message(lambda: MinHashParams.create(threshold=0.8, num_bands=16)) == (
        "threshold=0.8 and num_bands=16 were both given: threshold chooses num_bands; pass one of them")


def test_with_tokenizer_and_differences():
    p = MinHashParams(64, 8).with_tokenizer(lower_case=False, base_tokenizer="whitespace")
    assert p.tokenizer == TokenizerParams(lower_case=False, base_tokenizer="whitespace") and p.num_hashes == 64
    assert p.differences(MinHashParams(64, 8)) == ["tokenizer.base_tokenizer='whitespace' vs 'simple'",
                                                   "tokenizer.lower_case=False vs True"]
    assert MinHashParams(64, 8).differences(MinHashParams(128, 8)) == ["num_hashes=64 vs 128"]


def test_recall_bands_edges():
    assert recall_bands(0.8) == recall_bands(0.8, 128) == (16, 8)  # 128 hashes by default
    # a threshold no band count reaches with the probability: the most bands, r as an int
    assert recall_bands(0.01, 128) == (128, 1) and all(type(x) is int for x in recall_bands(0.01, 128))
    # exactly reaching the probability counts: with r = 1, P = 1 - (1 - t)^b
    assert recall_bands(0.5, 4, probability=0.4375) == (2, 2)  # 1 - (1 - 0.5^2)^2, exactly
    assert recall_bands(0.5, 2, probability=0.75) == (2, 1)
    assert recall_bands(0.5, 300)[0] <= 256  # b never above MAX_NUM_BANDS
    assert lsh_probability(0.5, 2, 1) == 0.75


def test_areas_of_an_empty_interval_are_zero():
    assert false_positive_area(0.0, 16, 8) == 0.0
    assert false_negative_area(1.0, 16, 8) == 0.0
    assert false_positive_area(1.0, 1, 1) == pytest.approx(0.5)  # integral of s over [0, 1]


def test_rules_at_the_edges_of_the_band_range():
    from lance_minhash_sql.core.params import MAX_SHINGLE_SIZE

    assert _message(lambda: MinHashParams(num_bands=0)) == (
        "num_bands=0 is out of range: requires 1 <= num_bands <= 256 (the band id is one byte of the band key); "
        "e.g. 16")
    assert _message(lambda: MinHashParams(shingle_size=MAX_SHINGLE_SIZE + 1)) == (
        f"shingle_size={MAX_SHINGLE_SIZE + 1} is out of range: requires shingle_size <= {MAX_SHINGLE_SIZE} (Lance "
        "stores it as a 32-bit value; a shingle longer than a text's token list is the whole list anyway); e.g. 3")
    # 514 = 2 * 257: its divisor 257 is above the band limit, never suggested nor chosen
    assert _message(lambda: MinHashParams(514, 255)).endswith("use e.g. num_bands in [2]")
    assert recall_bands(0.01, 514) == (2, 257)
    assert optimal_bands(0.05, 514) == (2, 257)


def test_create_passes_every_argument_through():
    assert MinHashParams.create(num_hashes=64, threshold=0.9) == MinHashParams(64, 8)  # 128 hashes would give 16
    assert MinHashParams.create(shingle_size=2).shingle_size == 2
    tok = {"base_tokenizer": "whitespace"}
    assert MinHashParams.create(tokenizer=tok).tokenizer == TokenizerParams(base_tokenizer="whitespace")
    assert _message(lambda: MinHashParams.create(num_hashes="x", threshold=0.8)) == (
        "num_hashes='x' must be an integer; e.g. 128")


def test_optimal_bands_weights_and_band_range():
    assert optimal_bands(0.8) == optimal_bands(0.8, 128) == (8, 16)
    assert optimal_bands(0.99, 4, false_positive_weight=1, false_negative_weight=0) == (1, 4)  # b = 1 considered
    assert optimal_bands(0.1, 4) == (4, 1)  # b = num_hashes considered
    assert optimal_bands(0.8, 128, false_positive_weight=0) == optimal_bands(0.8, 128, 0, 1)  # 0 is a weight
    assert _message(lambda: optimal_bands(0.8, 128, false_positive_weight=True)) == (
        "false_positive_weight=True must be a number (0 <= false_positive_weight); e.g. 0.5")
    assert _message(lambda: optimal_bands(0.8, 128, 0, 0)) == (
        "false_positive_weight and false_negative_weight must not both be 0")


@pytest.mark.parametrize("options, text, tokens", [
    ({}, "Héllo WORLD a-b", ["hello", "world", "a", "b"]),
    ({"lower_case": False}, "Héllo WORLD", ["Hello", "WORLD"]),
    ({"ascii_folding": False}, "Héllo WORLD", ["héllo", "world"]),
    ({"max_token_length": 6}, "hello world running", ["hello", "world"]),  # tokens of >= 6 bytes dropped
    ({"max_token_length": None}, "a" * 50 + " b", ["a" * 50, "b"]),
    ({"base_tokenizer": "whitespace"}, "a-b C", ["a-b", "c"]),
    ({"base_tokenizer": "raw"}, "a B", ["a b"]),
    ({"base_tokenizer": "ngram"}, "abcd", ["abc", "bcd"]),
    ({"base_tokenizer": "ngram", "min_ngram_length": 2, "max_ngram_length": 3}, "abcd",
     ["ab", "abc", "bc", "bcd", "cd"]),
    ({"base_tokenizer": "ngram", "min_ngram_length": 2, "max_ngram_length": 3, "prefix_only": True}, "abcd",
     ["ab", "abc"]),
    ({"base_tokenizer": "ngram", "min_ngram_length": 2, "max_ngram_length": 4}, "abcde",  # Lance's default max is 3
     ["ab", "abc", "abcd", "bc", "bcd", "bcde", "cd", "cde", "de"]),
])
def test_lance_tokenize_kwargs_run_the_options_in_lance(options, text, tokens):
    """Lance's own tokenizer, given these keyword arguments, applies each option."""
    import lance

    kwargs = TokenizerParams(**options).lance_tokenize_kwargs()
    assert [t.text for t in lance.tokenize(text, **kwargs)] == tokens


def test_optimal_bands_keeps_the_fewest_bands_on_a_tie_within_rounding():
    """With only false positives weighed, the error of every band count is a tiny area
    (the S-curve is flat near 0): all within 1e-15 of each other up to some b. The
    documented tie rule keeps the first (fewest bands), which is also the true minimum
    here: the area at threshold t, ``integral_0^t 1 - (1 - s^r)^b ds``, computed by scipy
    for every divisor b, is smallest at b = 1."""
    from scipy.integrate import quad

    t, k = 0.05, 128
    # 1 - (1 - x)^b written as -expm1(b log1p(-x)): exact for the tiny x here
    areas = {b: quad(lambda s: -math.expm1(b * math.log1p(-s ** (k // b))), 0, t, epsabs=0, limit=200)[0]
             for b in range(1, k + 1) if k % b == 0}
    assert min(areas, key=areas.get) == 1
    assert areas[2] < 1e-15  # a tie within the rounding tolerance
    assert optimal_bands(t, k, false_positive_weight=1.0, false_negative_weight=0.0) == (1, 128)
