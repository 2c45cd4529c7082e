"""A page to review an ingest plan before it runs: one self-contained HTML file (no
network, no script), in the style of the dedup review page (``faces/review.py``).

:func:`review_ingest` computes the plan of ``(corpus, batch, column, threshold, verify,
order_by)`` (:func:`lance_minhash_sql.api.entries.ingest_plan`) and shows:

* the parameters, the corpus index's S-curve with the threshold marked, and the plan's
  counts: rows offered, kept, dropped for a corpus row and for an earlier batch row;
* a sample of dropped batch rows, each beside its twin (the corpus row or the batch row
  kept before it that it duplicates), named by each dataset's own id column: the borderline
  ones (least similar to their twin) and random ones. Each shows both texts, the words the
  dropped row has that its twin lacks highlighted and those it lacks struck through, the
  exact shingle Jaccard of the two (the index's tokenizer and shingle size) and their
  MinHash similarity.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_minhash_sql.api.entries import ingest_plan
from lance_minhash_sql.core.checks import check_bool, check_int, check_threshold, check_verify
from lance_minhash_sql.faces.review import (PAGE_STYLE, ROWID, Page, id_column_of, marked_html, scurve_svg,
                                            words_of)
from lance_minhash_sql.faces.sinks import Ticker
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.io.handles import dataset_handle, options_for
from lance_minhash_sql.io.outputs import prepare_output
from lance_minhash_sql.io.scan import schema_of
from lance_minhash_sql.io.takes import take_rows

__all__ = ["DroppedRow", "IngestReview", "review_ingest"]


@dataclass(frozen=True)
class DroppedRow:
    """A dropped batch row beside its twin."""

    rowid: int
    id: object
    text: str | None
    twin_in: str  # "corpus" or "batch"
    twin_rowid: int
    twin_id: object
    twin_text: str | None
    similarity: float  # their MinHash similarity
    jaccard: float  # their exact shingle Jaccard (nan without shingles)
    kind: str  # "borderline" or "random"


@dataclass
class IngestReview(Page):
    """What :func:`review_ingest` found; :meth:`save` writes the page, notebooks display it."""

    corpus: str
    batch: str
    column: str
    threshold: float
    verify: str
    order_by: str | None
    params: object  # the corpus index's MinHashParams
    offered: int
    kept: int
    for_corpus: int  # rows dropped for a corpus row
    for_batch: int  # rows dropped for an earlier batch row
    rows: list[DroppedRow] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"Ingest review: {self.batch} into {self.corpus} · {self.column}"

    def fragment(self) -> str:
        return _render(self)

    def describe(self) -> str:
        return (f"{self.offered:,} batch rows offered: {self.kept:,} kept, {self.for_corpus:,} dropped for a corpus "
                f"row, {self.for_batch:,} for an earlier batch row; the page shows {len(self.rows)} dropped rows "
                "beside their twins")


def _named(ds, uri: str, column: str, id_column: str, rowids: np.ndarray) -> tuple[list, list]:
    """``(texts, ids)`` of ``rowids`` (ascending, unique) in that order."""
    if rowids.size == 0:
        return [], []
    cols = [column] + ([] if id_column == ROWID else [id_column])
    t = take_rows(ds, rowids, cols, "the ingest review", uri)
    ids = rowids.tolist() if id_column == ROWID else t.column(id_column).to_pylist()
    return t.column(column).to_pylist(), ids


def review_ingest(corpus, batch, column: str, threshold: float = 0.8, *, verify: str = "estimate",
                  order_by: str | None = None, memory_limit=None, id_column: str | None = None, sample: int = 12,
                  seed: int = 0, out: str | None = None, progress: bool = False,
                  corpus_storage_options: dict | None = None, batch_storage_options: dict | None = None
                  ) -> IngestReview:
    """Review the ingest plan of ``batch`` into ``corpus`` (the module doc): ``sample``
    dropped rows of each kind (borderline, random) beside their twins, rows named by
    ``id_column`` in both datasets (see :func:`..faces.review.id_column_of`). Writes the page
    to ``out`` when given (its folders created before the work)."""
    threshold = check_threshold(threshold)
    verify = check_verify(verify)
    sample = check_int("sample", sample, "dropped rows shown of each kind, e.g. 12", lo=1)
    seed = check_int("seed", seed, "any whole number, e.g. 0", lo=0)
    if out is not None:
        prepare_output(out, "out")
    copts = options_for(corpus, corpus_storage_options)
    bopts = options_for(batch, batch_storage_options)
    with Ticker("making the ingest plan and its sample", check_bool("progress", progress)):
        curi, cds = dataset_handle(corpus, copts)
        buri, bds = dataset_handle(batch, bopts)
        plan = ingest_plan(cds, bds, column, threshold, verify=verify, order_by=order_by, memory_limit=memory_limit,
                           corpus_storage_options=copts, batch_storage_options=bopts)
        result = _review(plan, cds, curi, bds, buri, column, threshold, verify, order_by, id_column, sample, seed,
                         open_index(cds, column, copts))
    if out is not None:
        result.save(out)
    return result


def _review(plan: pa.Table, cds, curi: str, bds, buri: str, column: str, threshold: float, verify: str, order_by,
            id_column, sample: int, seed: int, opened) -> IngestReview:
    keep = plan.column("keep").to_numpy(zero_copy_only=False)
    where = np.array(plan.column("twin_in").to_pylist(), dtype=object)
    result = IngestReview(curi, buri, column, threshold, verify, order_by, opened.params, plan.num_rows,
                          int(keep.sum()), int((where == "corpus").sum()), int((where == "batch").sum()))
    dropped = np.flatnonzero(~keep)
    if dropped.size == 0:
        return result
    score = (plan.column("jaccard") if verify == "exact" else plan.column("similarity")).to_numpy(
        zero_copy_only=False)[dropped]
    order = dropped[np.lexsort((dropped, score))]
    borderline = order[:sample]
    rest = np.setdiff1d(dropped, borderline)
    randoms = np.sort(np.random.default_rng(seed).permutation(rest)[:sample])
    picks = [(int(i), "borderline") for i in borderline] + [(int(i), "random") for i in randoms]
    rowid = plan.column("_rowid").to_numpy()
    twin = plan.column("twin_rowid").fill_null(0).to_numpy()
    sim = plan.column("similarity").fill_null(0.0).to_numpy()
    bid = id_column_of(schema_of(bds), column, id_column)
    cid = id_column_of(schema_of(cds), column, id_column)
    rows = {}
    for name, ds, uri, idc in (("batch", bds, buri, bid), ("corpus", cds, curi, cid)):
        want = [int(rowid[i]) for i, _ in picks] if name == "batch" else []
        want += [int(twin[i]) for i, _ in picks if where[i] == name]
        ids = np.unique(np.array(want, dtype=np.uint64))
        texts, names = _named(ds, uri, column, idc, ids)
        rows[name] = dict(zip(ids.tolist(), zip(texts, names)))
    texts_a = [rows["batch"][int(rowid[i])][0] for i, _ in picks]
    texts_b = [rows[where[i]][int(twin[i])][0] for i, _ in picks]
    n = len(picks)
    jac = opened.signer.pair_jaccard(pa.array(texts_a + texts_b, pa.large_string()), np.arange(n),
                                     np.arange(n, 2 * n))
    for (i, kind), j in zip(picks, jac.tolist()):
        text, name = rows["batch"][int(rowid[i])]
        ttext, tname = rows[where[i]][int(twin[i])]
        result.rows.append(DroppedRow(int(rowid[i]), name, text, str(where[i]), int(twin[i]), tname, ttext,
                                      float(sim[i]), float(j), kind))
    return result


def _pair_html(d: DroppedRow) -> str:
    twin_words = words_of(d.twin_text)
    mine = set(words_of(d.text))
    lost = list(dict.fromkeys(w for w in twin_words if w not in mine))
    missing = ('<div class="missing">not in this row: ' + " ".join(f"<del>{html.escape(w)}</del>" for w in lost[:30])
               + (" …" if len(lost) > 30 else "") + "</div>") if lost else ""
    score = "J = n/a (no shingles)" if d.jaccard != d.jaccard else f"J = {d.jaccard:.3f}"
    where = "corpus row" if d.twin_in == "corpus" else "batch row kept before it"
    twin_body = html.escape(d.twin_text) if d.twin_text is not None else "<em>NULL</em>"
    return (f'<article class="cluster" data-rowid="{d.rowid}" data-twin-rowid="{d.twin_rowid}" '
            f'data-twin-in="{d.twin_in}" data-kind="{d.kind}">'
            f'<h3>Batch id {html.escape(str(d.id))}<span class="kind {d.kind}">{d.kind}</span></h3>'
            f'<p class="why">Dropped for its twin, the {where} id {html.escape(str(d.twin_id))}: {score}, '
            f'MinHash similarity {d.similarity:.3f}.</p><div class="members">'
            f'<div class="member kept"><div class="head"><span>{d.twin_in} id {html.escape(str(d.twin_id))} · '
            f'<span class="badge">TWIN</span></span><span class="score">{d.twin_in}</span></div>'
            f'<div class="text">{twin_body}</div></div>'
            f'<div class="member dropped"><div class="head"><span>batch id {html.escape(str(d.id))} · '
            f'<span class="badge">DROPPED</span></span><span class="score">{score}</span></div>'
            f'<div class="text">{marked_html(d.text, set(twin_words))}</div>{missing}</div></div></article>')


def _render(r: IngestReview) -> str:
    p = r.params
    similar = ("exact shingle Jaccard" if r.verify == "exact" else "MinHash estimate") + f" >= {r.threshold:g}"
    order = f"ORDER BY {r.order_by}" if r.order_by else "row id"
    kv = [("corpus", r.corpus), ("batch", r.batch), ("column", r.column), ("threshold", f"{r.threshold:g}"),
          ("a duplicate", f"a shared LSH band and {similar}"),
          ("the rule", f"batch rows in {order}: a row is kept unless it duplicates a corpus row or a batch row "
                       "kept before it; its twin is the most similar of those"),
          ("index", f"num_hashes={p.num_hashes}, num_bands={p.num_bands} × rows_per_band={p.rows_per_band}, "
                    f"shingle_size={p.shingle_size}"),
          ("plan", f"{r.offered:,} offered, {r.kept:,} kept, {r.for_corpus:,} dropped for a corpus row, "
                   f"{r.for_batch:,} for an earlier batch row")]
    kv_html = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in kv)
    pairs = "".join(_pair_html(d) for d in r.rows) or "<p>Nothing is dropped: every batch row is new.</p>"
    return (f'<div class="lms-review"><style>{PAGE_STYLE}</style>'
            f'<h1>Ingest review</h1><p class="sub">{html.escape(r.batch)} into {html.escape(r.corpus)} · '
            f'{html.escape(r.column)} · threshold {r.threshold:g} · verify={r.verify!r}</p>'
            f'<section id="parameters"><h2>Parameters and the S-curve</h2><div class="top">'
            f'<table class="kv">{kv_html}</table><figure style="margin:0">{scurve_svg(p, r.threshold)}'
            f'<figcaption class="sub">The probability that a pair of a given similarity shares a band and becomes '
            f'a candidate.</figcaption></figure></div></section>'
            f'<section id="dropped"><h2>Dropped rows beside their twins</h2><p class="sub">The borderline (least '
            f'similar to their twin) and random ones. <mark>Highlighted</mark> words are not in the twin, '
            f'<del>struck</del> words are the twin\'s that the dropped row lacks.</p>{pairs}</section></div>')
