"""The synthetic corpus: determinism, statistics, ground truth, writing to Lance, validation."""

from __future__ import annotations

import re
from collections import Counter

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_minhash_sql.core.errors import DatasetError, InvalidParameterError
from lance_minhash_sql.faces.corpus import (EDIT_KINDS, CorpusSpec, boilerplate_phrases, corpus_schema,
                                            generate_batches, generate_texts, giant_cluster, ground_truth, vocabulary,
                                            write_corpus)

N = 50_000
SPEC = CorpusSpec(seed=11)


@pytest.fixture(scope="module")
def corpus():
    """(texts as str list, word counts, truth columns as numpy) of ids [0, N) of SPEC."""
    texts = generate_texts(0, N, SPEC).to_pylist()
    truth = ground_truth(0, N, SPEC)
    cols = {name: truth[name].to_numpy(zero_copy_only=False) for name in truth.column_names}
    words = np.array([len(t.split()) for t in texts])
    return texts, words, cols


def _tokens(text: str) -> list[str]:
    return text.split(" ")


# ---------------------------------------------------------------- determinism


def test_same_spec_gives_identical_texts_and_other_seed_differs():
    a = generate_texts(0, 2000, CorpusSpec(seed=3))
    b = generate_texts(0, 2000, CorpusSpec(seed=3))
    c = generate_texts(0, 2000, CorpusSpec(seed=4))
    assert a.equals(b)
    assert isinstance(a, pa.StringArray) and a.null_count == 0
    assert sum(x != y for x, y in zip(a.to_pylist(), c.to_pylist())) > 1900
    assert ground_truth(0, 2000, CorpusSpec(seed=3)).equals(ground_truth(0, 2000, CorpusSpec(seed=3)))


def test_a_range_generated_standalone_equals_the_slice_of_a_larger_range():
    whole = generate_texts(0, 1000, SPEC)
    part = generate_texts(500, 600, SPEC)
    assert part.to_pylist() == whole[500:600].to_pylist()
    assert ground_truth(500, 600, SPEC).equals(ground_truth(0, 1000, SPEC).slice(500, 100))
    assert generate_texts(700, 700, SPEC).to_pylist() == []


def test_far_ids_are_pure_functions_of_the_id_and_copy_their_source():
    start = 10**12
    far = generate_texts(start, start + 400, SPEC).to_pylist()
    assert generate_texts(start + 250, start + 260, SPEC).to_pylist() == far[250:260]
    truth = ground_truth(start, start + 400, SPEC).to_pydict()
    exact = [i for i, e in enumerate(truth["edit"]) if e == "exact"]
    assert exact, "400 rows should hold an exact copy"
    for i in exact:
        j = truth["source_id"][i]
        assert j < start + i
        assert generate_texts(j, j + 1, SPEC)[0].as_py() == far[i]
        assert ground_truth(j, j + 1, SPEC)["edit"][0].as_py() == "original"


def test_batches_concatenate_to_the_texts_and_carry_the_truth():
    batches = list(generate_batches(2500, SPEC, batch_rows=1000, with_truth=True, start=100))
    assert [b.num_rows for b in batches] == [1000, 1000, 500]
    assert all(b.schema == corpus_schema(with_truth=True) for b in batches)
    table = pa.Table.from_batches(batches)
    assert table["id"].to_pylist() == list(range(100, 2600))
    assert table["text"].to_pylist() == generate_texts(100, 2600, SPEC).to_pylist()
    assert table.select(ground_truth(0, 1, SPEC).column_names).equals(
        ground_truth(100, 2600, SPEC), check_metadata=False
    )
    plain = next(generate_batches(10, SPEC))
    assert plain.schema.names == ["id", "text"]


# ---------------------------------------------------------------- vocabulary


def test_vocabulary_is_distinct_lowercase_pseudo_words_short_ones_frequent():
    words = vocabulary(SPEC).to_pylist()
    assert len(words) == 50_000 and len(set(words)) == 50_000
    assert all(re.fullmatch(r"[a-z]{2,12}", w) for w in words)
    lengths = np.array([len(w) for w in words])
    assert lengths.min() == 2 and lengths.max() == 12
    assert lengths[:100].mean() < lengths.mean() - 2
    assert vocabulary(CorpusSpec(seed=12)).to_pylist() != words


def test_word_frequencies_follow_zipf(corpus):
    texts, _, _ = corpus
    rank = {w: r for r, w in enumerate(vocabulary(SPEC).to_pylist())}
    counts = np.zeros(len(rank))
    for t in texts[:20_000]:
        for w in re.sub(r"[^a-z ]", "", t.lower()).split():
            counts[rank[w]] += 1
    # rank r has weight 1 / (r + 1): f(0) / f(99) = 100 (boilerplate and copies add noise)
    ratio = counts[0] / counts[99]
    assert 50 < ratio < 200, ratio
    top = counts[0] / counts.sum()
    assert 0.06 < top < 0.12, top  # 1 / H(50000) = 0.088


def test_texts_are_ascii_with_punctuation_and_capitals(corpus):
    texts, _, _ = corpus
    sample = texts[:2000]
    assert all(t.isascii() and t == t.strip() and "  " not in t for t in sample)
    joined = "".join(sample)
    for mark in ".,;?!":
        assert mark in joined
    assert all(re.fullmatch(r"[A-Za-z]+[.,;?!]?", tok) for t in sample for tok in _tokens(t))
    assert sum(t[0].isupper() for t in sample) > 1500


# ---------------------------------------------------------------- statistics


def test_length_mix_and_mean(corpus):
    _, words, cols = corpus
    original = cols["edit"] == "original"
    w = words[original]
    assert w.min() >= 6 and w.max() <= 240
    assert abs(np.mean(w < 20) - 0.3) < 0.015
    assert abs(np.mean((w >= 20) & (w < 80)) - 0.6) < 0.015
    assert abs(np.mean(w >= 80) - 0.1) < 0.01
    assert abs(words.mean() - 40) < 5
    assert words.min() >= 5  # a truncated 6-word snippet keeps 5 words


def test_a_third_of_the_texts_carry_a_boilerplate_phrase(corpus):
    texts, _, cols = corpus
    phrases = boilerplate_phrases(SPEC).to_pylist()
    assert len(phrases) == 200 and len(set(phrases)) == 200
    assert all(8 <= len(p.split()) <= 15 and p[0].isupper() and p.endswith(".") for p in phrases)
    by_words = {}
    for p in phrases:
        by_words.setdefault(len(p.split()), set()).add(p)

    def carries(text: str) -> bool:
        toks = _tokens(text)
        return any(
            " ".join(toks[:n]) in group or " ".join(toks[-n:]) in group
            for n, group in by_words.items()
            if len(toks) > n
        )

    original = np.flatnonzero(cols["edit"] == "original")[:20_000]
    share = np.mean([carries(texts[i]) for i in original])
    assert abs(share - 1 / 3) < 0.02, share
    none = generate_texts(0, 500, CorpusSpec(seed=11, boilerplate_fraction=0.0)).to_pylist()
    assert not any(carries(t) for t in none)


def test_duplicates_copy_earlier_originals_with_a_heavy_tail(corpus):
    _, _, cols = corpus
    ids = cols["id"]
    src = cols["source_id"]
    dup = src != ids
    assert abs(dup.mean() - 0.2) < 0.01
    assert set(cols["edit"][~dup]) == {"original"}
    assert set(cols["edit"][dup]) == set(EDIT_KINDS) - {"original"}
    assert np.all(src[dup] < ids[dup])
    assert np.all(src[src[dup]] == src[dup]), "a duplicate's source must be an original"
    share = {e: np.mean(cols["edit"][dup] == e) for e in ("exact", "replace", "truncate")}
    assert abs(share["exact"] - 0.2) < 0.02 and abs(share["replace"] - 0.6) < 0.02
    copies = np.bincount(src[dup], minlength=N)
    copies = copies[copies > 0]
    assert np.median(copies) == 1
    assert np.mean(copies == 1) > 0.6
    assert copies.max() >= 30 and copies.max() >= 20 * np.median(copies)
    uniform = ground_truth(0, N, CorpusSpec(seed=11, source_skew=1.0))
    usrc = uniform["source_id"].to_numpy()
    ucopies = np.bincount(usrc[usrc != ids])
    assert ucopies.max() < copies.max() / 3
    assert not np.any(ground_truth(0, 2000, CorpusSpec(seed=11, duplicate_fraction=0.0))["edit"].to_numpy(
        zero_copy_only=False) != "original")


# ---------------------------------------------------------------- ground truth vs text


def test_exact_copies_are_byte_identical(corpus):
    texts, _, cols = corpus
    exact = np.flatnonzero(cols["edit"] == "exact")
    assert len(exact) > 1000
    assert all(texts[i] == texts[cols["source_id"][i]] for i in exact)
    assert np.all(cols["replaced_fraction"][exact] == 0) and np.all(cols["dropped_fraction"][exact] == 0)


def test_replaced_fraction_matches_a_word_level_diff(corpus):
    texts, _, cols = corpus
    replace = np.flatnonzero(cols["edit"] == "replace")
    assert len(replace) > 4000
    fractions = []
    for i in replace:
        a = _tokens(texts[cols["source_id"][i]])
        b = _tokens(texts[i])
        assert len(a) == len(b)
        diff = sum(x != y for x, y in zip(a, b))
        assert diff >= 1
        assert np.float32(diff / len(a)) == cols["replaced_fraction"][i]
        fractions.append(diff / len(a))
    fractions = np.array(fractions)
    assert fractions.max() <= 0.3 + 1e-9
    assert 0.12 < fractions.mean() < 0.18  # f ~ U(0, 0.3], floor(f * n) words, at least one
    assert np.all(cols["dropped_fraction"][replace] == 0)


def test_truncations_drop_a_prefix_or_suffix(corpus):
    texts, _, cols = corpus
    trunc = np.flatnonzero(cols["edit"] == "truncate")
    assert len(trunc) > 1000
    sides = Counter()
    for i in trunc:
        a = _tokens(texts[cols["source_id"][i]])
        b = _tokens(texts[i])
        drop = len(a) - len(b)
        assert 1 <= drop <= max(1, int(0.2 * len(a)))
        if b == a[drop:]:
            sides["prefix"] += 1
        else:
            assert b == a[: len(b)]
            sides["suffix"] += 1
        assert np.float32(1.0 - len(b) / len(a)) == cols["dropped_fraction"][i]
    assert min(sides.values()) > 0.4 * len(trunc)
    assert np.all(cols["replaced_fraction"][trunc] == 0)


# ---------------------------------------------------------------- Lance


def test_write_corpus_reads_back_with_rows_fragments_and_schema(tmp_path):
    uri = str(tmp_path / "corpus.lance")
    assert write_corpus(uri, 5000, SPEC, rows_per_fragment=2000, progress=True) == uri
    ds = lance.dataset(uri)
    assert ds.count_rows() == 5000
    assert [f.count_rows() for f in ds.get_fragments()] == [2000, 2000, 1000]
    assert ds.schema == corpus_schema()
    table = ds.to_table()
    assert table["id"].to_pylist() == list(range(5000))
    assert table["text"].to_pylist() == generate_texts(0, 5000, SPEC).to_pylist()

    with pytest.raises(DatasetError, match="already exists"):
        write_corpus(uri, 10, SPEC)
    write_corpus(uri, 1000, SPEC, mode="append", start=5000)
    ds = lance.dataset(uri)
    assert ds.count_rows() == 6000 and len(ds.get_fragments()) == 4
    assert ds.to_table(columns=["id"])["id"].to_pylist() == list(range(6000))


def test_write_corpus_with_truth(tmp_path):
    uri = str(tmp_path / "truth.lance")
    write_corpus(uri, 3000, SPEC, with_truth=True, mode="overwrite")
    ds = lance.dataset(uri)
    assert ds.schema == corpus_schema(with_truth=True)
    truth = ds.to_table(columns=ground_truth(0, 1, SPEC).column_names)
    assert truth.equals(ground_truth(0, 3000, SPEC), check_metadata=False)
    assert len(ds.get_fragments()) == 1


def test_giant_cluster_overwrites_exactly_its_rows_with_one_new_text(tmp_path):
    ids, text = giant_cluster(100, 3100, 700, SPEC)
    assert ids.size == np.unique(ids).size == 700 and (np.diff(ids) > 0).all()
    assert ids[0] >= 100 and ids[-1] < 3100
    again, same = giant_cluster(100, 3100, 700, SPEC)
    assert np.array_equal(again, ids) and same == text
    assert len(text.split()) == 60 and text not in generate_texts(0, 3100, SPEC).to_pylist()
    uri = str(tmp_path / "giant.lance")
    write_corpus(uri, 3000, SPEC, with_truth=True, start=100, batch_rows=1000, giant_copies=700)
    got = lance.dataset(uri).to_table()
    plain = pa.Table.from_batches(list(generate_batches(3000, SPEC, with_truth=True, start=100)))
    inside = np.isin(got["id"].to_numpy(), ids)
    assert inside.sum() == 700
    assert got.filter(pa.array(~inside)).equals(plain.filter(pa.array(~inside)))
    giant = got.filter(pa.array(inside)).to_pydict()
    assert set(giant["text"]) == {text} and set(giant["source_id"]) == {ids[0]}
    assert giant["edit"] == ["original"] + ["exact"] * 699
    assert set(giant["replaced_fraction"]) == set(giant["dropped_fraction"]) == {0.0}
    with pytest.raises(InvalidParameterError, match=re.escape("giant_copies=11")):
        generate_batches(10, SPEC, giant_copies=11)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"seed": -1}, "seed=-1"),
        ({"seed": 2**64}, "seed="),
        ({"seed": 1.5}, "must be an integer"),
        ({"vocab_size": 1}, "vocab_size=1"),
        ({"vocab_size": True}, "must be an integer"),
        ({"num_boilerplate": -3}, "num_boilerplate=-3"),
        ({"num_boilerplate": 0}, "needs phrases"),
        ({"boilerplate_fraction": 1.5}, "boilerplate_fraction=1.5"),
        ({"duplicate_fraction": 1.0}, "duplicate_fraction=1.0"),
        ({"duplicate_fraction": float("nan")}, "duplicate_fraction=nan"),
        ({"zipf_exponent": -1}, "zipf_exponent=-1"),
        ({"source_skew": 0.5}, "source_skew=0.5"),
        ({"edit_weights": (1, 2)}, "three numbers"),
        ({"edit_weights": (0, 0, 0)}, "positive sum"),
        ({"edit_weights": (1, -1, 1)}, "non-negative"),
        ({"max_replace_fraction": 0}, "max_replace_fraction=0"),
        ({"max_truncate_fraction": 1}, "max_truncate_fraction=1"),
        ({"zipf_exponent": "1"}, "must be a number"),
    ],
)
def test_bad_specs_raise(kwargs, match):
    with pytest.raises(InvalidParameterError, match=re.escape(match)):
        CorpusSpec(**kwargs)


def test_good_spec_is_normalised_and_hashable():
    spec = CorpusSpec(seed=np.int64(5), edit_weights=[1, 1, 0], num_boilerplate=0,
                      boilerplate_fraction=0)
    assert spec.seed == 5 and type(spec.seed) is int
    assert spec.edit_weights == (1.0, 1.0, 0.0)
    assert hash(spec) == hash(CorpusSpec(seed=5, edit_weights=(1, 1, 0), num_boilerplate=0,
                                         boilerplate_fraction=0))
    truth = ground_truth(0, 3000, spec)["edit"].to_pylist()
    assert "truncate" not in truth and "exact" in truth


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: generate_texts(10, 5), "start=10, stop=5"),
        (lambda: generate_texts(-1, 5), "start=-1"),
        (lambda: generate_texts(0, 5.5), "stop=5.5 must be an integer"),
        (lambda: ground_truth(0, 5, spec={"seed": 1}), "must be a CorpusSpec"),
        (lambda: generate_batches(10, SPEC, batch_rows=0), "batch_rows=0"),
        (lambda: generate_batches(-5, SPEC), "num_rows=-5"),
        (lambda: write_corpus("/nonexistent/x.lance", 10, SPEC, mode="replace"), "mode='replace'"),
        (lambda: write_corpus("/nonexistent/x.lance", 10, SPEC, rows_per_fragment=0),
         "rows_per_fragment=0"),
    ],
)
def test_bad_arguments_raise(call, match):
    with pytest.raises(InvalidParameterError, match=re.escape(match)):
        call()
