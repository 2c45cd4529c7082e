"""A synthetic text corpus with known near-duplicates, for tests, the demo and benchmarks.

Modelled on the Lance MinHash design benchmark: Zipf word frequencies over a 50,000-word
pseudo-word vocabulary, texts of 6-240 words (30 % snippets, 60 % paragraphs, 10 %
articles, about 40 words on average), a third of the texts carrying one of 200 shared
boilerplate phrases, and 20 % near-duplicates of earlier originals with heavy-tailed
cluster sizes, exact copies, up to 30 % of words replaced, or a prefix or suffix of up to
20 % dropped. The exact rules are in :mod:`lance_minhash_sql.faces.corpus_kernels`.

Every document is a pure function of ``(spec, id)``: ``generate_texts(500, 600)`` equals
``generate_texts(0, 1000)[500:600]``, and the source of every near-duplicate is known
(:func:`ground_truth`) without reading any dataset, so exact Jaccard similarities can be
computed by regenerating both texts.

``giant_copies`` (of :func:`generate_batches` and :func:`write_corpus`) overwrites that
many rows, chosen at random, with one text found nowhere else (:func:`giant_cluster`):
a single duplicate cluster of exactly that size, the stress case of the self-join.

>>> spec = CorpusSpec(seed=7)
>>> generate_texts(0, 1000, spec)[500:600].equals(generate_texts(500, 600, spec))
True
>>> truth = ground_truth(0, 1000, spec).to_pydict()
>>> i = truth["edit"].index("exact")
>>> j = truth["source_id"][i]
>>> generate_texts(i, i + 1, spec)[0] == generate_texts(j, j + 1, spec)[0]
True
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_minhash_sql.runtime.cache import memoized
from lance_minhash_sql.core.arrays import readonly
from lance_minhash_sql.core.checks import check_int, check_real
from lance_minhash_sql.core.errors import InvalidParameterError
from lance_minhash_sql.faces import corpus_kernels as _k
from lance_minhash_sql.runtime.threads import run_chunks

__all__ = [
    "CorpusSpec",
    "EDIT_KINDS",
    "corpus_schema",
    "vocabulary",
    "boilerplate_phrases",
    "generate_texts",
    "ground_truth",
    "generate_batches",
    "giant_cluster",
    "write_corpus",
]

EDIT_KINDS = _k.EDIT_NAMES
MAX_VOCAB_SIZE = 10_000_000
MAX_BOILERPLATE = 1_000_000
MAX_DOC_ID = 2**62
_INT32_MAX = 2**31 - 1
GIANT_WORDS = 60  # words of the giant cluster's text
_GIANT_STREAM = 0x6A1A27  # seeds the giant cluster's rows and text, apart from the documents
_CHUNK_DOCS = 8192  # documents per kernel call when generating on several threads


@dataclass(frozen=True)
class CorpusSpec:
    """Parameters of a synthetic corpus; two equal specs generate identical corpora.

    ``seed`` fixes the vocabulary, the boilerplate phrases and every document.
    ``zipf_exponent`` shapes word frequencies (rank ``r`` has weight ``(r + 1) ** -s``).
    ``duplicate_fraction`` of the ids (> 0) are near-duplicates of an earlier original;
    ``source_skew`` >= 1 is the power-law preference for early sources (1 = uniform; larger
    = bigger clusters); ``edit_weights`` are the relative shares of (exact, replace,
    truncate) edits; ``max_replace_fraction`` and ``max_truncate_fraction`` bound them.
    """

    seed: int = 0
    vocab_size: int = 50_000
    zipf_exponent: float = 1.0
    num_boilerplate: int = 200
    boilerplate_fraction: float = 1 / 3
    duplicate_fraction: float = 0.2
    source_skew: float = 2.0
    edit_weights: tuple[float, float, float] = (0.2, 0.6, 0.2)
    max_replace_fraction: float = 0.3
    max_truncate_fraction: float = 0.2

    def __post_init__(self) -> None:
        seed = check_int("seed", self.seed, "use an integer in 0 .. 2**64 - 1, e.g. 0")
        if not 0 <= seed < 2**64:
            raise InvalidParameterError(f"seed={seed} is out of range: requires 0 <= seed < 2**64; e.g. 0")
        vocab = check_int("vocab_size", self.vocab_size, "e.g. 50_000")
        if not 2 <= vocab <= MAX_VOCAB_SIZE:
            raise InvalidParameterError(
                f"vocab_size={vocab} is out of range: requires 2 <= vocab_size <= {MAX_VOCAB_SIZE:_} "
                "(a replaced word must differ from the original); e.g. 50_000"
            )
        phrases = check_int("num_boilerplate", self.num_boilerplate, "e.g. 200")
        if not 0 <= phrases <= MAX_BOILERPLATE:
            raise InvalidParameterError(
                f"num_boilerplate={phrases} is out of range: requires 0 <= num_boilerplate <= "
                f"{MAX_BOILERPLATE:_}; e.g. 200, or 0 for no boilerplate"
            )
        zipf = check_real("zipf_exponent", self.zipf_exponent, "natural text is close to 1.0", 0.0, 10.0)
        bp = check_real("boilerplate_fraction", self.boilerplate_fraction, "e.g. 1/3", 0.0, 1.0)
        if bp > 0 and phrases == 0:
            raise InvalidParameterError(
                f"boilerplate_fraction={bp} needs phrases but num_boilerplate=0: set "
                "num_boilerplate >= 1 or boilerplate_fraction=0"
            )
        dup = check_real("duplicate_fraction", self.duplicate_fraction, "some originals must remain; e.g. 0.2",
                         0.0, 1.0, hi_open=True)
        skew = check_real("source_skew", self.source_skew, "1 picks sources uniformly, 2 (default) gives a few "
                          "clusters of hundreds at 1M rows", 1.0, 16.0)
        weights = self.edit_weights
        if (
            not isinstance(weights, (tuple, list))
            or len(weights) != 3
            or any(isinstance(w, bool) or not isinstance(w, numbers.Real) for w in weights)
        ):
            raise InvalidParameterError(
                f"edit_weights={weights!r} must be three numbers (exact, replace, truncate); "
                "e.g. (0.2, 0.6, 0.2)"
            )
        weights = tuple(float(w) for w in weights)
        if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
            raise InvalidParameterError(
                f"edit_weights={weights!r} is invalid: requires non-negative finite weights with a "
                "positive sum (exact, replace, truncate); e.g. (0.2, 0.6, 0.2)"
            )
        rep = check_real("max_replace_fraction", self.max_replace_fraction, "e.g. 0.3", 0.0, 1.0, lo_open=True)
        trunc = check_real("max_truncate_fraction", self.max_truncate_fraction, "e.g. 0.2", 0.0, 1.0,
                           lo_open=True, hi_open=True)
        for name, value in (
            ("seed", seed), ("vocab_size", vocab), ("num_boilerplate", phrases),
            ("zipf_exponent", zipf), ("boilerplate_fraction", bp), ("duplicate_fraction", dup),
            ("source_skew", skew), ("edit_weights", weights), ("max_replace_fraction", rep),
            ("max_truncate_fraction", trunc),
        ):
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class _Tables:
    word_offsets: np.ndarray
    word_bytes: np.ndarray
    prob: np.ndarray
    alias: np.ndarray
    bp_offsets: np.ndarray
    bp_words: np.ndarray


@memoized(8)
def _tables(seed: int, vocab_size: int, zipf_exponent: float, num_boilerplate: int) -> _Tables:
    word_offsets, word_bytes = _k.build_vocabulary(np.uint64(seed), vocab_size)
    prob, alias = _k.zipf_alias(vocab_size, zipf_exponent)
    bp_offsets, bp_words = _k.build_boilerplate(np.uint64(seed), num_boilerplate, prob, alias)
    return _Tables(*(readonly(a) for a in (word_offsets, word_bytes, prob, alias, bp_offsets, bp_words)))


def _spec_tables(spec: CorpusSpec) -> _Tables:
    return _tables(spec.seed, spec.vocab_size, spec.zipf_exponent, spec.num_boilerplate)


def _threshold(fraction: float) -> np.uint64:
    """``fraction`` of the uint64 range: a draw ``h < threshold`` has that probability."""
    return np.uint64(min(int(fraction * 2.0**64), 2**64 - 1))


def _check_spec(spec: Any) -> CorpusSpec:
    if not isinstance(spec, CorpusSpec):
        raise InvalidParameterError(f"spec={spec!r} must be a CorpusSpec; e.g. CorpusSpec(seed=0)")
    return spec


def _check_range(start: Any, stop: Any) -> tuple[int, int]:
    start = check_int("start", start, "use a document id >= 0")
    stop = check_int("stop", stop, "use a document id >= start")
    if not 0 <= start <= stop <= MAX_DOC_ID:
        raise InvalidParameterError(
            f"start={start}, stop={stop} is not a document id range: requires 0 <= start <= stop "
            f"<= 2**62; e.g. start=0, stop=1000"
        )
    return start, stop


def _run(fn, n: int) -> None:
    """``fn(first, last)`` over ranges of :data:`_CHUNK_DOCS` documents, on every core."""
    run_chunks(fn, n, _CHUNK_DOCS)


def _plan(start: int, stop: int, spec: CorpusSpec, tables: _Tables):
    w = np.asarray(spec.edit_weights, dtype=np.float64)
    edit_cum = np.cumsum(w / w.sum())
    return _k.plan_documents(
        np.uint64(spec.seed), start, stop, _threshold(spec.duplicate_fraction),
        _threshold(spec.boilerplate_fraction), spec.source_skew, edit_cum,
        spec.max_replace_fraction, spec.max_truncate_fraction, tables.bp_offsets, run=_run,
    )


def _texts(start: int, spec: CorpusSpec, tables: _Tables, plan) -> pa.Array:
    source, kind, _, lo, hi, below, _ = plan
    offsets, data = _k.render_texts(
        np.uint64(spec.seed), start, source, kind, lo, hi, below,
        _threshold(spec.boilerplate_fraction), tables.word_offsets, tables.word_bytes,
        tables.prob, tables.alias, tables.bp_offsets, tables.bp_words, run=_run,
    )
    n = len(source)
    if offsets[-1] <= _INT32_MAX:
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _truth_columns(start: int, plan) -> dict[str, pa.Array]:
    source, kind, words, lo, hi, _, replaced = plan
    words = words.astype(np.float64)
    edit = pa.DictionaryArray.from_arrays(pa.array(kind), pa.array(EDIT_KINDS, pa.string()))
    return {
        "source_id": pa.array(source),
        "edit": edit.cast(pa.string()),
        "replaced_fraction": pa.array((replaced / words).astype(np.float32)),
        "dropped_fraction": pa.array((1.0 - (hi - lo) / words).astype(np.float32)),
    }


_TRUTH_FIELDS = (
    pa.field("source_id", pa.int64()),
    pa.field("edit", pa.string()),
    pa.field("replaced_fraction", pa.float32()),
    pa.field("dropped_fraction", pa.float32()),
)


def corpus_schema(with_truth: bool = False) -> pa.Schema:
    """Schema of :func:`generate_batches`: ``id`` int64, ``text`` string (+ truth columns)."""
    fields = [pa.field("id", pa.int64()), pa.field("text", pa.string())]
    return pa.schema([*fields, *(_TRUTH_FIELDS if with_truth else ())])


def vocabulary(spec: CorpusSpec = CorpusSpec()) -> pa.StringArray:
    """The spec's words by frequency rank (rank 0 is the most frequent)."""
    t = _spec_tables(_check_spec(spec))
    n = len(t.word_offsets) - 1
    return pa.StringArray.from_buffers(
        n, pa.py_buffer(t.word_offsets.astype(np.int32)), pa.py_buffer(t.word_bytes)
    )


def boilerplate_phrases(spec: CorpusSpec = CorpusSpec()) -> pa.StringArray:
    """The spec's shared phrases exactly as texts carry them (a sentence: ``Word ... word.``)."""
    t = _spec_tables(_check_spec(spec))
    offsets, data = _k.render_phrases(t.word_offsets, t.word_bytes, t.bp_offsets, t.bp_words)
    return pa.StringArray.from_buffers(
        len(offsets) - 1, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)
    )


def generate_texts(start: int, stop: int, spec: CorpusSpec = CorpusSpec()) -> pa.StringArray:
    """Texts of document ids ``start .. stop - 1`` (a ``LargeStringArray`` beyond 2 GiB)."""
    start, stop = _check_range(start, stop)
    spec = _check_spec(spec)
    tables = _spec_tables(spec)
    return _texts(start, spec, tables, _plan(start, stop, spec, tables))


def ground_truth(start: int, stop: int, spec: CorpusSpec = CorpusSpec()) -> pa.Table:
    """What each document of ``start .. stop - 1`` is, without generating any text.

    Columns: ``id``; ``source_id`` (the original it copies, itself for originals);
    ``edit`` (one of :data:`EDIT_KINDS`); ``replaced_fraction`` (replaced words / words,
    for ``replace``); ``dropped_fraction`` (dropped words / source words, for
    ``truncate``).
    """
    start, stop = _check_range(start, stop)
    spec = _check_spec(spec)
    tables = _spec_tables(spec)
    cols = _truth_columns(start, _plan(start, stop, spec, tables))
    ids = pa.array(np.arange(start, stop, dtype=np.int64))
    return pa.table({"id": ids, **cols}, schema=pa.schema([pa.field("id", pa.int64()), *_TRUTH_FIELDS]))


def _check_copies(copies: Any, num_rows: int) -> int:
    copies = check_int("giant_copies", copies, "use a row count >= 0, e.g. 5_000")
    if not 0 <= copies <= num_rows:
        raise InvalidParameterError(
            f"giant_copies={copies} is out of range: requires 0 <= giant_copies <= num_rows ({num_rows}); "
            "e.g. 5_000")
    return copies


def giant_cluster(start: int, stop: int, copies: int, spec: CorpusSpec = CorpusSpec()) -> tuple[np.ndarray, str]:
    """The giant cluster of ids ``start .. stop - 1``: its ``copies`` ids (ascending, drawn
    without replacement) and its text, ``GIANT_WORDS`` words drawn uniformly from the
    vocabulary, so no generated text comes near it. A pure function of its arguments.
    (A near-duplicate whose source is overwritten keeps that ``source_id``.)"""
    start, stop = _check_range(start, stop)
    copies = _check_copies(copies, stop - start)
    spec = _check_spec(spec)
    rng = np.random.default_rng([_GIANT_STREAM, spec.seed, start, stop, copies])
    ids = start + np.sort(rng.choice(stop - start, copies, replace=False)).astype(np.int64)
    words = vocabulary(spec).take(pa.array(rng.integers(0, spec.vocab_size, GIANT_WORDS))).to_pylist()
    return ids, " ".join(words).capitalize() + "."


def generate_batches(
    num_rows: int,
    spec: CorpusSpec = CorpusSpec(),
    batch_rows: int = 65_536,
    with_truth: bool = False,
    *,
    start: int = 0,
    giant_copies: int = 0,
) -> Iterator[pa.RecordBatch]:
    """Record batches of ids ``start .. start + num_rows - 1`` with :func:`corpus_schema`;
    ``giant_copies`` rows overwritten by :func:`giant_cluster` (their truth: copies of the
    first of them, ``exact``)."""
    num_rows = check_int("num_rows", num_rows, "use a row count >= 0")
    batch_rows = check_int("batch_rows", batch_rows, "e.g. 65_536")
    if num_rows < 0:
        raise InvalidParameterError(f"num_rows={num_rows} must be >= 0 (rows to generate)")
    if batch_rows < 1:
        raise InvalidParameterError(f"batch_rows={batch_rows} must be >= 1 (rows per batch); e.g. 65_536")
    start, stop = _check_range(start, check_int("start", start, "use a document id >= 0") + num_rows)
    spec = _check_spec(spec)
    giant = giant_cluster(start, stop, giant_copies, spec) if _check_copies(giant_copies, num_rows) else None
    schema = corpus_schema(with_truth)
    return _batches(start, stop, spec, batch_rows, with_truth, schema, giant)


def _overwrite_giant(cols: dict, s: int, e: int, giant: tuple[np.ndarray, str]) -> None:
    ids, text = giant
    rows = ids[np.searchsorted(ids, s):np.searchsorted(ids, e)] - s
    if rows.size == 0:
        return
    mask = np.zeros(e - s, dtype=np.bool_)
    mask[rows] = True
    mask = pa.array(mask)
    cols["text"] = pc.if_else(mask, pa.scalar(text, cols["text"].type), cols["text"])
    if "source_id" not in cols:
        return
    first = pa.array(np.arange(s, e) == ids[0])
    zero = pa.scalar(0.0, pa.float32())
    cols.update(
        source_id=pc.if_else(mask, pa.scalar(int(ids[0]), pa.int64()), cols["source_id"]),
        edit=pc.if_else(first, EDIT_KINDS[_k.EDIT_ORIGINAL], pc.if_else(mask, EDIT_KINDS[_k.EDIT_EXACT], cols["edit"])),
        replaced_fraction=pc.if_else(mask, zero, cols["replaced_fraction"]),
        dropped_fraction=pc.if_else(mask, zero, cols["dropped_fraction"]))


def _batches(start, stop, spec, batch_rows, with_truth, schema, giant=None) -> Iterator[pa.RecordBatch]:
    tables = _spec_tables(spec)
    for s in range(start, stop, batch_rows):
        e = min(s + batch_rows, stop)
        plan = _plan(s, e, spec, tables)
        cols = {"id": pa.array(np.arange(s, e, dtype=np.int64)), "text": _texts(s, spec, tables, plan)}
        if with_truth:
            cols.update(_truth_columns(s, plan))
        if giant is not None:
            _overwrite_giant(cols, s, e, giant)
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


def write_corpus(
    uri: str,
    num_rows: int,
    spec: CorpusSpec = CorpusSpec(),
    rows_per_fragment: int | None = None,
    mode: str = "create",
    with_truth: bool = False,
    progress: bool = False,
    *,
    start: int = 0,
    batch_rows: int = 65_536,
    giant_copies: int = 0,
) -> str:
    """Generate ids ``start .. start + num_rows - 1`` and write them as a Lance dataset.

    ``rows_per_fragment`` caps the rows per fragment (``None``: Lance's default of
    1,048,576); ``mode`` is ``create``, ``overwrite`` or ``append`` (use ``start`` to give
    appended rows fresh ids); ``giant_copies`` adds one cluster of that many identical
    rows (:func:`giant_cluster`). Returns ``uri``.
    """
    from lance_minhash_sql.io.datasets import WRITE_MODES, write_dataset  # lance only when writing

    if mode not in WRITE_MODES:
        raise InvalidParameterError(f"mode={mode!r} is not a write mode: use one of {WRITE_MODES}")
    if rows_per_fragment is not None:
        rows_per_fragment = check_int("rows_per_fragment", rows_per_fragment, "e.g. 100_000, or None")
        if rows_per_fragment < 1:
            raise InvalidParameterError(
                f"rows_per_fragment={rows_per_fragment} must be >= 1; e.g. 100_000, or None for Lance's default"
            )
    batches = generate_batches(num_rows, spec, batch_rows, with_truth, start=start, giant_copies=giant_copies)
    schema = corpus_schema(with_truth)
    if progress:
        from tqdm.auto import tqdm

        batches = _with_progress(batches, tqdm(total=num_rows, unit="rows", desc="corpus"))
    write_dataset(uri, batches, schema, mode=mode, max_rows_per_file=rows_per_fragment)
    return str(uri)


def _with_progress(batches: Iterator[pa.RecordBatch], bar) -> Iterator[pa.RecordBatch]:
    with bar:
        for batch in batches:
            yield batch
            bar.update(batch.num_rows)
