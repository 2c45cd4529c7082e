"""A page to review what dedup drops: one self-contained HTML file (no network, no script).

:func:`review` runs the dedup plan of ``(dataset, column, threshold, keep, order_by)``
(:func:`lance_minhash_sql.selfjoin.dedup.keep_flags`) and writes what a reviewer needs to
trust it or to change a parameter:

* the parameters, and the index's S-curve (the probability that a pair of a given
  similarity becomes a candidate) drawn as inline SVG, with the threshold marked;
* how many clusters there are of each size, and how many rows dedup drops;
* a sample of clusters: the largest, the borderline ones (a member least similar to the
  row kept) and random ones. Each shows every member's text side by side (up to
  ``max_members``), the words a member has that the kept row lacks highlighted and those
  it lacks struck through, the exact Jaccard of the member's shingle set to the kept
  row's (the index's own tokenizer and shingle size), and which row ``keep`` keeps and why.

The borderline and random clusters are drawn from a pool of at most :data:`POOL_ROWS`
clustered rows (all of them on smaller data), chosen with ``seed``.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.checks import check_int
from lance_minhash_sql.core.params import lsh_probability
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.sign import signer_for
from lance_minhash_sql.io.outputs import prepare_output, written_beside
from lance_minhash_sql.io.scan import options_for
from lance_minhash_sql.io.takes import take_rows
from lance_minhash_sql.kernels.pairs import pair_jaccard
from lance_minhash_sql.selfjoin.dedup import check_keep, keep_flags

__all__ = ["POOL_ROWS", "Member", "ReviewCluster", "Review", "review"]

POOL_ROWS = 50_000  # clustered rows whose Jaccard is computed to find borderline clusters
_WORD = re.compile(r"\S+")
_FOLD = re.compile(r"[^\w]+")


@dataclass(frozen=True)
class Member:
    """One row of a reviewed cluster."""

    rowid: int
    text: str | None
    kept: bool
    jaccard: float  # exact shingle Jaccard to the kept row (1.0 for the kept row; nan without shingles)


@dataclass(frozen=True)
class ReviewCluster:
    """A sampled cluster: ``kind`` is ``largest``, ``borderline`` or ``random``."""

    cluster_id: int
    size: int
    kind: str
    members: tuple[Member, ...]  # the kept row first, then by Jaccard to it, lowest first
    why: str  # why the kept row is the one kept

    @property
    def kept(self) -> Member:
        return self.members[0]

    @property
    def min_jaccard(self) -> float:
        values = [m.jaccard for m in self.members[1:] if m.jaccard == m.jaccard]
        return min(values) if values else float("nan")


@dataclass
class Review:
    """What :func:`review` found; :meth:`save` writes the page, notebooks display it."""

    dataset: str
    column: str
    threshold: float
    keep: str
    order_by: str | None
    params: object  # the index's MinHashParams
    rows: int  # rows in a cluster
    dropped: int
    sizes: list[tuple[int, int]]  # (cluster size, clusters of that size), ascending
    clusters: list[ReviewCluster] = field(default_factory=list)

    @property
    def num_clusters(self) -> int:
        return sum(n for _, n in self.sizes)

    def fragment(self) -> str:
        """The page's body, with its own scoped style (what a notebook shows)."""
        return _render(self)

    def html(self) -> str:
        """The whole page: one HTML document that needs nothing else."""
        title = html.escape(f"Near-duplicate review: {self.dataset} · {self.column}")
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
                f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"></head>"
                f"<body style=\"margin:0;background:#fff\">{self.fragment()}</body></html>\n")

    def save(self, path: str) -> str:
        """Write the page to ``path`` (through a temporary file beside it: never half-written;
        missing folders are created)."""
        prepare_output(path, "out")
        with written_beside(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            fh.write(self.html())
        return path

    def _repr_html_(self) -> str:
        return self.fragment()

    def describe(self) -> str:
        kinds = ", ".join(f"{sum(c.kind == k for c in self.clusters)} {k}" for k in _KINDS)
        return (f"{self.num_clusters:,} clusters hold {self.rows:,} rows; dedup (keep={self.keep!r}) drops "
                f"{self.dropped:,}; the page shows {len(self.clusters)} clusters ({kinds})")


_KINDS = ("largest", "borderline", "random")


def review(dataset, column: str, threshold: float = 0.8, *, keep: str = "first", order_by: str | None = None,
           per_kind: int = 3, max_members: int = 8, seed: int = 0, out: str | None = None,
           storage_options: dict | None = None) -> Review:
    """Review the dedup plan of ``column`` at ``threshold`` with ``keep`` / ``order_by`` (as
    :func:`lance_minhash_sql.dedup`): ``per_kind`` clusters of each kind (largest, borderline,
    random), up to ``max_members`` rows each. Writes the page to ``out`` when given."""
    per_kind = check_int("per_kind", per_kind, "clusters shown of each kind, e.g. 3", lo=1)
    max_members = check_int("max_members", max_members, "rows shown per cluster, e.g. 8", lo=2)
    seed = check_int("seed", seed, "any whole number, e.g. 0", lo=0)
    keep, order_by = check_keep(keep, order_by)
    if out is not None:
        prepare_output(out, "out")  # before the work
    storage_options = options_for(dataset, storage_options)
    flags = keep_flags(dataset, column, threshold, keep=keep, order_by=order_by, storage_options=storage_options)
    opened = open_index(dataset, column, storage_options)
    rowid = flags.column("_rowid").to_numpy()
    cluster = flags.column("cluster_id").to_numpy()
    size = flags.column("cluster_size").to_numpy()
    kept = flags.column("keep").to_numpy(zero_copy_only=False)
    ids, first = np.unique(cluster, return_index=True)
    sizes = size[first]
    values, counts = np.unique(sizes, return_counts=True)
    result = Review(str(opened.uri), column, float(threshold), keep, order_by, opened.params,
                    int(rowid.size), int((~kept).sum()), [(int(v), int(c)) for v, c in zip(values, counts)])
    if ids.size:
        picks = _sample(ids, sizes, rowid, cluster, kept, opened, per_kind, seed)
        result.clusters = [_cluster(opened, cid, kind, rowid, cluster, kept, keep, order_by, max_members)
                           for cid, kind in picks]
    if out is not None:
        result.save(out)
    return result


# --------------------------------------------------------------------------- data


def _members_of(cid: int, rowid: np.ndarray, cluster: np.ndarray, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    at = np.flatnonzero(cluster == cid)
    return rowid[at], kept[at]


def _jaccard_to_kept(opened, texts: pa.Array, kept_index: np.ndarray, member_index: np.ndarray) -> np.ndarray:
    """Exact shingle Jaccard of ``texts[member_index[i]]`` and ``texts[kept_index[i]]``."""
    if member_index.size == 0:
        return np.empty(0)
    offsets, hashes = signer_for(opened.params).shingle_sets(texts.cast(pa.large_string()))
    return pair_jaccard(offsets, hashes, kept_index.astype(np.int64), member_index.astype(np.int64))


def _texts(opened, rowids: np.ndarray) -> pa.Array:
    t = take_rows(opened.ds, rowids, [opened.column], "the review", opened.uri)
    return t.column(opened.column).combine_chunks()


def _sample(ids, sizes, rowid, cluster, kept, opened, per_kind: int, seed: int) -> list[tuple[int, str]]:
    """``(cluster id, kind)`` of the clusters to show: the largest, then the borderline
    (lowest Jaccard of a member to its kept row) and random ones from a seeded pool."""
    by_size = np.lexsort((ids, -sizes))
    largest = [int(ids[i]) for i in by_size[:per_kind]]
    rng = np.random.default_rng(seed)
    order = rng.permutation(ids.size)
    rest = [i for i in order if int(ids[i]) not in largest]
    pool, rows = [], 0
    for i in rest:
        if rows + sizes[i] > POOL_ROWS and pool:
            break
        pool.append(int(ids[i]))
        rows += int(sizes[i])
    picks = [(c, "largest") for c in largest]
    if pool:
        in_pool = np.isin(cluster, pool)
        prow, pcl, pkeep = rowid[in_pool], cluster[in_pool], kept[in_pool]
        texts = _texts(opened, prow)
        kept_pos = {int(c): i for i, (c, k) in enumerate(zip(pcl, pkeep)) if k}
        ki = np.array([kept_pos[int(c)] for c in pcl], dtype=np.int64)
        j = _jaccard_to_kept(opened, texts, ki, np.arange(prow.size, dtype=np.int64))
        j = np.where(pkeep | np.isnan(j), np.inf, j)  # the kept rows themselves do not count
        low = {}
        for c, v in zip(pcl, j):
            low[int(c)] = min(low.get(int(c), np.inf), float(v))
        borderline = sorted(pool, key=lambda c: (low[c], c))[:per_kind]
        picks += [(c, "borderline") for c in borderline]
        randoms = [c for c in pool if c not in borderline][:per_kind]
        picks += [(c, "random") for c in randoms]
    return picks


def _why(keep: str, order_by: str | None, kept: Member, n: int) -> str:
    if order_by is not None:
        return f"row {kept.rowid}: it comes first of the {n} by ORDER BY {order_by}"
    if keep == "longest":
        length = len(kept.text) if kept.text is not None else 0
        return f"row {kept.rowid}: it has the longest text of the {n} ({length:,} characters; ties: the lowest row id)"
    return f"row {kept.rowid}: it has the lowest row id of the {n}"


def _cluster(opened, cid: int, kind: str, rowid, cluster, kept, keep, order_by, max_members: int) -> ReviewCluster:
    rows, flags = _members_of(cid, rowid, cluster, kept)
    k = int(np.flatnonzero(flags)[0])
    texts = _texts(opened, rows)
    j = _jaccard_to_kept(opened, texts, np.full(rows.size, k, dtype=np.int64), np.arange(rows.size, dtype=np.int64))
    others = sorted((i for i in range(rows.size) if i != k), key=lambda i: (np.nan_to_num(j[i], nan=-1), rows[i]))
    shown = [k] + others[:max_members - 1]
    text_list = texts.to_pylist()
    members = tuple(Member(int(rows[i]), text_list[i], i == k, 1.0 if i == k else float(j[i])) for i in shown)
    return ReviewCluster(cid, int(rows.size), kind, members, _why(keep, order_by, members[0], int(rows.size)))


# --------------------------------------------------------------------------- HTML

_STYLE = """
.lms-review{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d232b;max-width:1200px;
 margin:0 auto;padding:20px 24px}
.lms-review h1{font-size:22px;margin:0 0 4px}
.lms-review h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d9dee5;padding-bottom:4px}
.lms-review .sub{color:#5b6673;margin:0 0 12px}
.lms-review table.kv td{padding:2px 14px 2px 0;vertical-align:top}
.lms-review table.kv td:first-child{color:#5b6673;white-space:nowrap}
.lms-review .top{display:flex;gap:32px;flex-wrap:wrap;align-items:flex-start}
.lms-review table.sizes{border-collapse:collapse}
.lms-review table.sizes td,.lms-review table.sizes th{padding:2px 10px;text-align:right;border-bottom:1px solid #eef0f3}
.lms-review .bar{display:inline-block;height:10px;background:#4c78a8;vertical-align:middle}
.lms-review .cluster{border:1px solid #d9dee5;border-radius:8px;margin:14px 0;padding:10px 12px;background:#fafbfc}
.lms-review .cluster h3{font-size:15px;margin:0 0 2px}
.lms-review .kind{display:inline-block;font-size:11px;padding:1px 7px;border-radius:9px;margin-left:6px;
 background:#e8eef6;color:#2c4a70;text-transform:uppercase;letter-spacing:.04em}
.lms-review .kind.borderline{background:#fdeedd;color:#8a4b08}
.lms-review .kind.random{background:#e9f4ea;color:#27632a}
.lms-review .why{color:#3d4753;margin:0 0 8px}
.lms-review .members{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:10px}
.lms-review .member{background:#fff;border:1px solid #d9dee5;border-radius:6px;padding:8px 10px}
.lms-review .member.kept{border:2px solid #2e7d32}
.lms-review .member.dropped{border-left:4px solid #c62828}
.lms-review .head{display:flex;justify-content:space-between;font-size:12px;color:#5b6673;margin-bottom:4px}
.lms-review .badge{font-weight:600}
.lms-review .kept .badge{color:#2e7d32}
.lms-review .dropped .badge{color:#c62828}
.lms-review .text{white-space:pre-wrap;word-break:break-word}
.lms-review mark{background:#ffe08a;padding:0 1px}
.lms-review del{color:#a33;background:#fdecec}
.lms-review .missing{font-size:12px;color:#5b6673;margin-top:4px}
.lms-review .more{color:#5b6673;font-size:12px;margin-top:6px}
"""


def _fold(word: str) -> str:
    return _FOLD.sub("", word.lower())


def _marked(text: str | None, kept_words: set[str]) -> str:
    """``text`` as HTML, words the kept row lacks in <mark>."""
    if text is None:
        return "<em>NULL</em>"
    out, last = [], 0
    for m in _WORD.finditer(text):
        out.append(html.escape(text[last:m.start()]))
        w = m.group(0)
        f = _fold(w)
        out.append(f"<mark>{html.escape(w)}</mark>" if f and f not in kept_words else html.escape(w))
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def _words(text: str | None) -> list[str]:
    return [] if text is None else [w for w in (_fold(x) for x in _WORD.findall(text)) if w]


def _scurve_svg(params, threshold: float) -> str:
    w, h, left, bottom, top, right = 420, 230, 44, 30, 12, 12
    pw, ph = w - left - right, h - top - bottom

    def x(s: float) -> float:
        return left + s * pw

    def y(p: float) -> float:
        return top + (1 - p) * ph

    b, r = params.num_bands, params.rows_per_band
    pts = " ".join(f"{x(s):.1f},{y(lsh_probability(s, b, r)):.1f}" for s in np.linspace(0, 1, 121))
    p_t = lsh_probability(threshold, b, r)
    grid = "".join(f'<line x1="{x(v):.1f}" y1="{top}" x2="{x(v):.1f}" y2="{top + ph}" stroke="#eef0f3"/>'
                   f'<text x="{x(v):.1f}" y="{h - 12}" font-size="10" text-anchor="middle" fill="#5b6673">{v:g}</text>'
                   for v in (0, 0.2, 0.4, 0.6, 0.8, 1.0))
    grid += "".join(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + pw}" y2="{y(v):.1f}" stroke="#eef0f3"/>'
                    f'<text x="{left - 6}" y="{y(v) + 3:.1f}" font-size="10" text-anchor="end" fill="#5b6673">{v:g}</text>'
                    for v in (0, 0.5, 1.0))
    return (f'<svg class="scurve" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'role="img" aria-label="S-curve of the index">{grid}'
            f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#b8c0ca"/>'
            f'<line x1="{x(params.threshold):.1f}" y1="{top}" x2="{x(params.threshold):.1f}" y2="{top + ph}" '
            f'stroke="#9aa5b1" stroke-dasharray="3 3"/>'
            f'<line x1="{x(threshold):.1f}" y1="{top}" x2="{x(threshold):.1f}" y2="{top + ph}" stroke="#c62828" '
            f'stroke-dasharray="5 3"/>'
            f'<polyline points="{pts}" fill="none" stroke="#4c78a8" stroke-width="2.5"/>'
            f'<circle cx="{x(threshold):.1f}" cy="{y(p_t):.1f}" r="4" fill="#c62828"/>'
            f'<text x="{x(threshold) + (-6 if threshold > 0.5 else 6):.1f}" y="{y(p_t) + 16:.1f}" font-size="11" '
            f'fill="#c62828" text-anchor="{"end" if threshold > 0.5 else "start"}">'
            f'P = {p_t:.3f} at {threshold:g}</text>'
            f'<text x="{left + pw / 2:.1f}" y="{h - 1}" font-size="10" text-anchor="middle" fill="#5b6673">'
            f'Jaccard similarity of a pair</text></svg>')


def _member_html(m: Member, kept_words: set[str], kept_list: list[str]) -> str:
    cls = "kept" if m.kept else "dropped"
    badge = "KEPT" if m.kept else "DROPPED"
    score = "kept row" if m.kept else ("J = n/a (no shingles)" if m.jaccard != m.jaccard else f"J = {m.jaccard:.3f}")
    body = html.escape(m.text) if m.kept and m.text is not None else _marked(m.text, kept_words)
    missing = ""
    if not m.kept:
        mine = set(_words(m.text))
        lost = list(dict.fromkeys(w for w in kept_list if w not in mine))
        if lost:
            missing = ('<div class="missing">not in this row: '
                       + " ".join(f"<del>{html.escape(w)}</del>" for w in lost[:30])
                       + (" …" if len(lost) > 30 else "") + "</div>")
    jaccard = "" if m.kept or m.jaccard != m.jaccard else f' data-jaccard="{m.jaccard:.6f}"'
    return (f'<div class="member {cls}" data-rowid="{m.rowid}"{jaccard}><div class="head">'
            f'<span>row {m.rowid} · <span class="badge">{badge}</span></span><span class="score">{score}</span></div>'
            f'<div class="text">{body}</div>{missing}</div>')


def _cluster_html(c: ReviewCluster) -> str:
    kept_list = _words(c.kept.text)
    kept_words = set(kept_list)
    members = "".join(_member_html(m, kept_words, kept_list) for m in c.members)
    more = (f'<div class="more">{c.size - len(c.members)} more rows of this cluster are not shown '
            f'(the {len(c.members) - 1} least similar to the kept row are)</div>' if c.size > len(c.members) else "")
    low = c.min_jaccard
    low_text = "" if low != low else f"; lowest Jaccard to the kept row {low:.3f}"
    return (f'<article class="cluster" data-cluster-id="{c.cluster_id}" data-kind="{c.kind}" data-size="{c.size}">'
            f'<h3>Cluster {c.cluster_id} · {c.size} rows<span class="kind {c.kind}">{c.kind}</span></h3>'
            f'<p class="why">Keeps {html.escape(c.why)}; drops the other {c.size - 1}{low_text}.</p>'
            f'<div class="members">{members}</div>{more}</article>')


def _render(r: Review) -> str:
    p = r.params
    policy = f"keep={r.keep!r}" + (f", order_by={r.order_by!r}" if r.order_by else "")
    rule = {"first": "the lowest row id of each cluster", "longest": "the longest text of each cluster"}[r.keep]
    if r.order_by:
        rule = f"the first row of each cluster by ORDER BY {r.order_by}"
    kv = [("dataset", r.dataset), ("column", r.column), ("threshold", f"{r.threshold:g}"),
          ("keeps", f"{policy}: {rule}"),
          ("index", f"num_hashes={p.num_hashes}, num_bands={p.num_bands} × rows_per_band={p.rows_per_band}, "
                    f"shingle_size={p.shingle_size}; S-curve threshold {p.threshold:.3f}"),
          ("clusters", f"{r.num_clusters:,} clusters hold {r.rows:,} rows"),
          ("dedup drops", f"{r.dropped:,} rows (keeps one of each cluster)")]
    kv_html = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in kv)
    top = max((n for _, n in r.sizes), default=1)
    sizes = "".join(f'<tr><td>{s:,}</td><td>{n:,}</td><td>{s * n:,}</td><td style="text-align:left">'
                    f'<span class="bar" style="width:{max(2, round(160 * n / top))}px"></span></td></tr>'
                    for s, n in r.sizes)
    clusters = "".join(_cluster_html(c) for c in r.clusters) or "<p>No near-duplicates at this threshold.</p>"
    return (f'<div class="lms-review"><style>{_STYLE}</style>'
            f'<h1>Near-duplicate review</h1><p class="sub">{html.escape(r.dataset)} · {html.escape(r.column)} · '
            f'threshold {r.threshold:g} · {html.escape(policy)}</p>'
            f'<section id="parameters"><h2>Parameters and the S-curve</h2><div class="top">'
            f'<table class="kv">{kv_html}</table>'
            f'<figure style="margin:0">{_scurve_svg(p, r.threshold)}<figcaption class="sub">The probability '
            f'that a pair of a given similarity shares a band and becomes a candidate; red: the threshold, grey: '
            f'the index\'s S-curve threshold.</figcaption></figure></div></section>'
            f'<section id="sizes"><h2>Cluster sizes</h2><table class="sizes"><tr><th>size</th><th>clusters</th>'
            f'<th>rows</th><th></th></tr>{sizes}</table></section>'
            f'<section id="clusters"><h2>A sample of clusters</h2><p class="sub">The largest, the borderline (a '
            f'member least similar to the row kept) and random ones. Each member shows its exact Jaccard to the '
            f'kept row; <mark>highlighted</mark> words are not in the kept row, <del>struck</del> words are '
            f'the kept row\'s that this row lacks.</p>{clusters}</section></div>')
