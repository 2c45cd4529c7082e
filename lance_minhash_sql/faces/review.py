"""A page to review what dedup drops: one self-contained HTML file (no network, no script).

:func:`review` runs the dedup plan of ``(dataset, column, threshold, keep, order_by,
clustering, verify)`` (:func:`lance_minhash_sql.api.entries.keep_flags`) and writes what a
reviewer needs to trust it or to change a parameter:

* the parameters, and the index's S-curve (the probability that a pair of a given
  similarity becomes a candidate) drawn as inline SVG, with the threshold marked;
* how many clusters there are of each size, and how many rows dedup drops;
* a sample of clusters: the largest, the borderline ones (a dropped member least similar
  to the row it is dropped for) and random ones. Each shows every member's text side by
  side (up to ``max_members``), named by the dataset's own id column, the words a member
  has that its kept row lacks highlighted and those it lacks struck through, its exact
  Jaccard to that kept row (the index's own tokenizer and shingle size), and which row
  ``keep`` keeps and why. With ``clustering="components"`` a dropped row may be far from
  the kept row: the page shows the chain of verified links that put them in one cluster
  (``faces/chains.py``), each link with its exact Jaccard. With ``clustering="star"`` a
  dropped row is compared with its twin, the kept row it is similar to;
* a dry run at thresholds either side of the page's (``faces/estimate_section.py``).

The borderline and random clusters are chosen among clusters drawn at random with ``seed``,
at most :data:`DRAWN_ROWS` clustered rows in all (all of them on smaller data).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lance_minhash_sql.api.entries import keep_flags
from lance_minhash_sql.core.checks import check_bool, check_clustering_verify, check_int
from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.core.banding import lsh_probability
from lance_minhash_sql.faces.chains import CHAIN_ROWS, chains
from lance_minhash_sql.faces.estimate_section import section_html, section_table
from lance_minhash_sql.faces.sinks import Ticker
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.io.outputs import prepare_output, written_beside
from lance_minhash_sql.io.handles import options_for
from lance_minhash_sql.io.scan import schema_of
from lance_minhash_sql.io.takes import take_rows
from lance_minhash_sql.selfjoin.dedup import check_keep

__all__ = ["DRAWN_ROWS", "ID_NAMES", "ROWID", "id_column_of", "Member", "ReviewCluster", "Review", "review",
           "Page", "PAGE_STYLE", "marked_html", "words_of", "scurve_svg"]

DRAWN_ROWS = 50_000  # clustered rows whose Jaccard is computed to find borderline clusters
ID_NAMES = ("id", "doc_id", "document_id", "uuid", "uid", "key")  # then any other column named *_id
ROWID = "_rowid"  # id_column="_rowid": rows named by their row id
_WORD = re.compile(r"\S+")
_FOLD = re.compile(r"[^\w]+")


@dataclass(frozen=True)
class Member:
    """One row of a reviewed cluster."""

    rowid: int
    id: object  # the row's value of the id column (its row id without one)
    text: str | None
    kept: bool
    jaccard: float  # exact shingle Jaccard to its kept row (1.0 for a kept row; nan without shingles)
    twin_rowid: int | None = None  # the kept row it is dropped for (None for a kept row)
    twin_id: object = None
    twin_text: str | None = None
    chain: tuple = ()  # components: ((id, id, similarity, jaccard), ...) from the kept row to this one
    chained: bool = True  # False: the chain was not searched (a cluster over CHAIN_ROWS rows) or not found


@dataclass(frozen=True)
class ReviewCluster:
    """A sampled cluster: ``kind`` is ``largest``, ``borderline`` or ``random``."""

    cluster_id: int
    size: int
    kind: str
    members: tuple[Member, ...]  # the kept row (one a cluster), then the dropped ones by Jaccard to it (lowest first)
    why: str  # why the kept row is the one kept

    @property
    def kept(self) -> Member:
        return self.members[0]

    @property
    def min_jaccard(self) -> float:
        values = [m.jaccard for m in self.members if not m.kept and m.jaccard == m.jaccard]
        return min(values) if values else float("nan")


class Page:
    """An HTML page of a review: :meth:`html` the whole document around :meth:`fragment`
    (the body with its own scoped style), :meth:`save` writes it, notebooks display the
    fragment. A page class gives ``fragment()`` and ``title``."""

    title: str

    def fragment(self) -> str:
        raise NotImplementedError

    def html(self) -> str:
        """The whole page: one HTML document that needs nothing else."""
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(self.title)}"
                f"</title><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"></head>"
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


@dataclass
class Review(Page):
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
    clustering: str = "components"
    verify: str = "estimate"
    id_column: str = ROWID
    estimate: pa.Table | None = None  # the dry run at nearby thresholds (faces/estimate_section.py)

    @property
    def num_clusters(self) -> int:
        return sum(n for _, n in self.sizes)

    @property
    def title(self) -> str:
        return f"Near-duplicate review: {self.dataset} · {self.column}"

    def fragment(self) -> str:
        """The page's body, with its own scoped style (what a notebook shows)."""
        return _render(self)

    def describe(self) -> str:
        kinds = ", ".join(f"{sum(c.kind == k for c in self.clusters)} {k}" for k in _KINDS)
        return (f"{self.num_clusters:,} clusters hold {self.rows:,} rows; dedup (keep={self.keep!r}, "
                f"clustering={self.clustering!r}, verify={self.verify!r}) drops {self.dropped:,}; the page shows "
                f"{len(self.clusters)} clusters ({kinds})")


_KINDS = ("largest", "borderline", "random")


def id_column_of(schema: pa.Schema, column: str, id_column: str | None) -> str:
    """The column that names rows on the page: ``id_column`` when given (``"_rowid"``: the
    row ids), else the first of :data:`ID_NAMES` in the schema, else the first other
    column named ``*_id``, else ``"_rowid"``."""
    names = [f.name for f in schema if f.name != column]
    if id_column is not None:
        if id_column != ROWID and id_column not in names:
            raise DatasetError(f"id_column := '{id_column}' is not a column of the dataset; use one of {names} "
                               f"or '{ROWID}' for the row ids")
        return id_column
    lower = {n.lower(): n for n in names}
    for want in ID_NAMES:
        if want in lower:
            return lower[want]
    return next((n for n in names if n.lower().endswith("_id")), ROWID)


def review(dataset, column: str, threshold: float = 0.8, *, keep: str = "first", order_by: str | None = None,
           clustering: str = "components", verify: str = "estimate", memory_limit=None,
           id_column: str | None = None, per_kind: int = 3, max_members: int = 8, seed: int = 0,
           out: str | None = None, progress: bool = False, storage_options: dict | None = None) -> Review:
    """Review the dedup plan of ``column`` at ``threshold`` with ``keep``, ``order_by``,
    ``clustering``, ``verify`` and ``memory_limit`` (as :func:`lance_minhash_sql.dedup`):
    ``per_kind`` clusters of each kind (largest, borderline, random), up to
    ``max_members`` rows each, named by ``id_column`` (see :func:`id_column_of`). Writes
    the page to ``out`` when given (its folders created before the work). ``progress``: a
    status line on stderr with the seconds spent, while the plan and the sample are made."""
    per_kind = check_int("per_kind", per_kind, "clusters shown of each kind, e.g. 3", lo=1)
    max_members = check_int("max_members", max_members, "rows shown per cluster, e.g. 8", lo=2)
    seed = check_int("seed", seed, "any whole number, e.g. 0", lo=0)
    keep, order_by = check_keep(keep, order_by)
    clustering, verify = check_clustering_verify(clustering, verify)
    if out is not None:
        prepare_output(out, "out")  # before the work
    with Ticker("making the dedup plan and its sample", check_bool("progress", progress)):
        result = _review(dataset, column, threshold, keep, order_by, clustering, verify, memory_limit, id_column,
                         per_kind, max_members, seed, storage_options)
    if out is not None:
        result.save(out)
    return result


def _review(dataset, column, threshold, keep, order_by, clustering, verify, memory_limit, id_column, per_kind,
            max_members, seed, storage_options) -> Review:
    storage_options = options_for(dataset, storage_options)
    opened = open_index(dataset, column, storage_options)
    ids_from = id_column_of(schema_of(opened.ds), column, id_column)
    flags = keep_flags(dataset, column, threshold, keep=keep, order_by=order_by, clustering=clustering,
                       verify=verify, memory_limit=memory_limit, storage_options=storage_options)
    plan = _Plan(opened, flags, float(threshold), clustering, verify, ids_from)
    ids, first = np.unique(plan.cluster, return_index=True)
    sizes = plan.size[first]
    values, counts = np.unique(sizes, return_counts=True)
    result = Review(str(opened.uri), column, float(threshold), keep, order_by, opened.params,
                    int(plan.rowid.size), int((~plan.kept).sum()), [(int(v), int(c)) for v, c in zip(values, counts)],
                    clustering=clustering, verify=verify, id_column=ids_from)
    if ids.size:
        picks = _sample(ids, sizes, plan, per_kind, seed)
        result.clusters = [_cluster(plan, cid, kind, keep, order_by, max_members) for cid, kind in picks]
    result.estimate = section_table(dataset, column, float(threshold), storage_options, seed, verify, memory_limit)
    return result


# --------------------------------------------------------------------------- data


class _Plan:
    """The dedup plan's rows: each clustered row, its cluster, whether it is kept and the
    kept row it is compared with (its cluster's kept row; with star, its twin)."""

    def __init__(self, opened, flags: pa.Table, threshold: float, clustering: str, verify: str, id_column: str):
        self.opened, self.threshold, self.clustering, self.verify = opened, threshold, clustering, verify
        self.id_column = id_column
        self.rowid = flags.column("_rowid").to_numpy()
        self.cluster = flags.column("cluster_id").to_numpy()
        self.size = flags.column("cluster_size").to_numpy()
        self.kept = flags.column("keep").to_numpy(zero_copy_only=False)
        if clustering == "star":
            twin = flags.column("twin_rowid").fill_null(0).to_numpy()
            self.ref = np.where(self.kept, self.rowid, twin)
        else:
            kept_of = dict(zip(self.cluster[self.kept].tolist(), self.rowid[self.kept].tolist()))
            self.ref = np.array([kept_of[c] for c in self.cluster.tolist()], dtype=np.uint64)

    def rows(self, rowids: np.ndarray) -> tuple[pa.Array, list]:
        """The texts and the ids of ``rowids``."""
        cols = [self.opened.column] + ([] if self.id_column == ROWID else [self.id_column])
        t = take_rows(self.opened.ds, rowids, cols, "the review", self.opened.uri)
        ids = rowids.tolist() if self.id_column == ROWID else t.column(self.id_column).to_pylist()
        return t.column(self.opened.column).combine_chunks(), ids

    def jaccard(self, texts: pa.Array, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
        """Exact shingle Jaccard of ``texts[ia[i]]`` and ``texts[ib[i]]``."""
        if ia.size == 0:
            return np.empty(0)
        return self.opened.signer.pair_jaccard(texts.cast(pa.large_string()), ia, ib)


def _sample(ids, sizes, plan: _Plan, per_kind: int, seed: int) -> list[tuple[int, str]]:
    """``(cluster id, kind)`` of the clusters to show: the largest, then the borderline
    (lowest Jaccard of a dropped member to its kept row) and random ones from a seeded draw."""
    by_size = np.lexsort((ids, -sizes))
    largest = [int(ids[i]) for i in by_size[:per_kind]]
    rng = np.random.default_rng(seed)
    order = rng.permutation(ids.size)
    rest = [i for i in order if int(ids[i]) not in largest]
    drawn, rows = [], 0
    for i in rest:
        if rows + sizes[i] > DRAWN_ROWS and drawn:
            break
        drawn.append(int(ids[i]))
        rows += int(sizes[i])
    picks = [(c, "largest") for c in largest]
    if drawn:
        in_drawn = np.isin(plan.cluster, drawn)
        prow, pcl, pkeep, pref = plan.rowid[in_drawn], plan.cluster[in_drawn], plan.kept[in_drawn], plan.ref[in_drawn]
        texts, _ = plan.rows(prow)
        at = {int(r): i for i, r in enumerate(prow.tolist())}
        ri = np.array([at[int(r)] for r in pref.tolist()], dtype=np.int64)
        j = plan.jaccard(texts, ri, np.arange(prow.size, dtype=np.int64))
        j = np.where(pkeep | np.isnan(j), np.inf, j)  # the kept rows themselves do not count
        low = {}
        for c, v in zip(pcl, j):
            low[int(c)] = min(low.get(int(c), np.inf), float(v))
        borderline = sorted(drawn, key=lambda c: (low[c], c))[:per_kind]
        picks += [(c, "borderline") for c in borderline]
        randoms = [c for c in drawn if c not in borderline][:per_kind]
        picks += [(c, "random") for c in randoms]
    return picks


def _why(keep: str, order_by: str | None, kept: Member, n: int, star: bool) -> str:
    """Why the kept row is kept: it comes first of its cluster in keep order (with star, a
    center comes before every row dropped for it, selfjoin/star.py)."""
    if order_by is not None:
        why = f"it comes first of the {n} by ORDER BY {order_by}"
    elif keep == "longest":
        length = len(kept.text) if kept.text is not None else 0
        why = f"it has the longest text of the {n} ({length:,} characters; ties: the first in the dataset)"
    else:
        why = f"it comes first in the dataset of the {n} (lowest row id)"
    if star:
        why += ", and each of the others is similar to it and to no row kept before it in that order"
    return f"id {kept.id}: {why}"


def _chains(plan: _Plan, texts: pa.Array, ids: list, k: int) -> dict[int, tuple]:
    found = chains(plan.opened.params, texts, k, plan.threshold, plan.verify)
    return {v: tuple((ids[x.left], ids[x.right], x.similarity, x.jaccard) for x in links)
            for v, links in found.items()}


def _cluster(plan: _Plan, cid: int, kind: str, keep, order_by, max_members: int) -> ReviewCluster:
    at = np.flatnonzero(plan.cluster == cid)
    rows, flags, ref = plan.rowid[at], plan.kept[at], plan.ref[at]
    texts, ids = plan.rows(rows)
    pos = {int(r): i for i, r in enumerate(rows.tolist())}
    ri = np.array([pos[int(r)] for r in ref.tolist()], dtype=np.int64)
    j = plan.jaccard(texts, ri, np.arange(rows.size, dtype=np.int64))
    (first,) = np.flatnonzero(flags).tolist()  # a cluster keeps one row (dedup.keep_flags)
    dropped = sorted((i for i in range(rows.size) if not flags[i]),
                     key=lambda i: (np.nan_to_num(j[i], nan=-1), rows[i]))
    shown = ([first] + dropped)[:max_members]
    searched = plan.clustering == "components" and rows.size <= CHAIN_ROWS
    links = _chains(plan, texts, ids, first) if searched else {}
    text_list = texts.to_pylist()
    members = []
    for i in shown:
        if flags[i]:
            members.append(Member(int(rows[i]), ids[i], text_list[i], True, 1.0))
            continue
        r = int(ri[i])
        members.append(Member(int(rows[i]), ids[i], text_list[i], False, float(j[i]), int(rows[r]), ids[r],
                              text_list[r], links.get(i, ()), i in links))
    members = tuple(members)
    why = _why(keep, order_by, members[0], int(rows.size), plan.clustering == "star")
    return ReviewCluster(cid, int(rows.size), kind, members, why)


# --------------------------------------------------------------------------- HTML

PAGE_STYLE = """
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
.lms-review .chain{font-size:12px;color:#3d4753;margin-top:6px;border-top:1px dashed #d9dee5;padding-top:4px}
.lms-review .chain .link{white-space:nowrap;color:#2c4a70}
.lms-review .twin{font-size:12px;color:#3d4753;margin-top:4px}
"""


def _fold(word: str) -> str:
    return _FOLD.sub("", word.lower())


def marked_html(text: str | None, kept_words: set[str]) -> str:
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


def words_of(text: str | None) -> list[str]:
    return [] if text is None else [w for w in (_fold(x) for x in _WORD.findall(text)) if w]


def scurve_svg(params, threshold: float) -> str:
    w, h, left, bottom, top, right = 600, 360, 64, 52, 16, 20
    pw, ph = w - left - right, h - top - bottom
    grey, red = "#5b6673", "#c62828"

    def x(s: float) -> float:
        return left + s * pw

    def y(p: float) -> float:
        return top + (1 - p) * ph

    b, r = params.num_bands, params.rows_per_band
    pts = " ".join(f"{x(s):.1f},{y(lsh_probability(s, b, r)):.1f}" for s in np.linspace(0, 1, 201))
    p_t = lsh_probability(threshold, b, r)
    grid = "".join(f'<line x1="{x(v):.1f}" y1="{top}" x2="{x(v):.1f}" y2="{top + ph}" stroke="#eef0f3"/>'
                   f'<text x="{x(v):.1f}" y="{top + ph + 18}" font-size="13" text-anchor="middle" '
                   f'fill="{grey}">{v:g}</text>' for v in (0, 0.2, 0.4, 0.6, 0.8, 1.0))
    grid += "".join(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + pw}" y2="{y(v):.1f}" stroke="#eef0f3"/>'
                    f'<text x="{left - 8}" y="{y(v) + 4:.1f}" font-size="13" text-anchor="end" fill="{grey}">{v:g}</text>'
                    for v in (0, 0.25, 0.5, 0.75, 1.0))
    titles = (f'<text x="{left + pw / 2:.1f}" y="{h - 8}" font-size="14" text-anchor="middle" fill="#1d232b">'
              f'Jaccard similarity of a pair</text>'
              f'<text x="16" y="{top + ph / 2:.1f}" font-size="14" text-anchor="middle" fill="#1d232b" '
              f'transform="rotate(-90 16 {top + ph / 2:.1f})">P(the pair is a candidate)</text>')
    # the legend sits in the top-left corner, above the curve (which is near 0 there)
    lx, ly = left + 12, top + 20
    legend = (f'<rect x="{lx - 6}" y="{ly - 14}" width="250" height="48" fill="#fff" fill-opacity="0.9" '
              f'stroke="#d9dee5"/>'
              f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 22}" y2="{ly - 4}" stroke="{red}" stroke-width="2" '
              f'stroke-dasharray="5 3"/>'
              f'<text x="{lx + 28}" y="{ly}" font-size="13" fill="{red}">threshold {threshold:g}: P = {p_t:.3f}</text>'
              f'<line x1="{lx}" y1="{ly + 18}" x2="{lx + 22}" y2="{ly + 18}" stroke="#9aa5b1" stroke-width="2" '
              f'stroke-dasharray="3 3"/>'
              f'<text x="{lx + 28}" y="{ly + 22}" font-size="13" fill="{grey}">the index\'s S-curve threshold '
              f'{params.threshold:.3f}</text>')
    return (f'<svg class="scurve" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'role="img" aria-label="S-curve of the index">{grid}'
            f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#b8c0ca"/>'
            f'<line x1="{x(params.threshold):.1f}" y1="{top}" x2="{x(params.threshold):.1f}" y2="{top + ph}" '
            f'stroke="#9aa5b1" stroke-width="1.5" stroke-dasharray="3 3"/>'
            f'<line x1="{x(threshold):.1f}" y1="{top}" x2="{x(threshold):.1f}" y2="{top + ph}" stroke="{red}" '
            f'stroke-width="1.5" stroke-dasharray="5 3"/>'
            f'<polyline points="{pts}" fill="none" stroke="#4c78a8" stroke-width="3"/>'
            f'<circle cx="{x(threshold):.1f}" cy="{y(p_t):.1f}" r="5" fill="{red}"/>'
            f'{legend}{titles}</svg>')


def _chain_html(m: Member) -> str:
    if not m.chain:
        why = ("the chain is searched in clusters of at most "
               f"{CHAIN_ROWS:,} rows" if not m.chained else "no chain of verified links found")
        return f'<div class="chain">chain to the kept row: {why}</div>'
    hops = " ".join(f'<span class="link">→ id {html.escape(str(b))} (J = {j:.3f}, est. {s:.3f})</span>'
                    for _, b, s, j in m.chain)
    return (f'<div class="chain" data-links="{len(m.chain)}">chain of {len(m.chain)} verified '
            f'link{"s" if len(m.chain) > 1 else ""}: id {html.escape(str(m.chain[0][0]))} {hops}</div>')


def _member_html(m: Member, star: bool) -> str:
    cls = "kept" if m.kept else "dropped"
    badge = "KEPT" if m.kept else "DROPPED"
    score = "kept row" if m.kept else ("J = n/a (no shingles)" if m.jaccard != m.jaccard else f"J = {m.jaccard:.3f}")
    ref_list = words_of(m.twin_text)
    body = html.escape(m.text) if m.kept and m.text is not None else marked_html(m.text, set(ref_list))
    extra = ""
    if not m.kept:
        mine = set(words_of(m.text))
        lost = list(dict.fromkeys(w for w in ref_list if w not in mine))
        if lost:
            extra = ('<div class="missing">not in this row: '
                     + " ".join(f"<del>{html.escape(w)}</del>" for w in lost[:30])
                     + (" …" if len(lost) > 30 else "") + "</div>")
        extra += (f'<div class="twin">dropped for its twin, id {html.escape(str(m.twin_id))} (kept)</div>' if star
                  else _chain_html(m))
    jaccard = "" if m.kept or m.jaccard != m.jaccard else f' data-jaccard="{m.jaccard:.6f}"'
    twin = "" if m.kept else f' data-twin-rowid="{m.twin_rowid}"'
    return (f'<div class="member {cls}" data-rowid="{m.rowid}" data-id="{html.escape(str(m.id))}"{twin}{jaccard}>'
            f'<div class="head"><span>id {html.escape(str(m.id))} · <span class="badge">{badge}</span></span>'
            f'<span class="score">{score}</span></div><div class="text">{body}</div>{extra}</div>')


def _cluster_html(c: ReviewCluster, number: int, star: bool) -> str:
    members = "".join(_member_html(m, star) for m in c.members)
    more = (f'<div class="more">{c.size - len(c.members)} more rows of this cluster are not shown '
            f'(the dropped rows least similar to their kept row are)</div>' if c.size > len(c.members) else "")
    low = c.min_jaccard
    low_text = "" if low != low else f"; lowest Jaccard of a dropped row to its kept row {low:.3f}"
    return (f'<article class="cluster" data-cluster-id="{c.cluster_id}" data-kind="{c.kind}" data-size="{c.size}">'
            f'<h3>Cluster {number} · {c.size} rows<span class="kind {c.kind}">{c.kind}</span></h3>'
            f'<p class="why">Keeps {html.escape(c.why)}; drops the other {c.size - 1}{low_text}.</p>'
            f'<div class="members">{members}</div>{more}</article>')


def _render(r: Review) -> str:
    p = r.params
    policy = (f"keep={r.keep!r}" + (f", order_by={r.order_by!r}" if r.order_by else "")
              + f", clustering={r.clustering!r}, verify={r.verify!r}")
    rule = {"first": "the first row of each cluster in the dataset", "longest": "the longest text of each cluster"}[r.keep]
    if r.order_by:
        rule = f"the first row of each cluster by ORDER BY {r.order_by}"
    if r.clustering == "star":
        rule += ("; then, in that order, every row not similar to a row kept before it (star: each dropped row "
                 "has a kept twin)")
    similar = ("exact shingle Jaccard" if r.verify == "exact" else "MinHash estimate") + f" >= {r.threshold:g}"
    names = "row ids" if r.id_column == ROWID else f"the column {r.id_column!r}"
    kv = [("dataset", r.dataset), ("column", r.column), ("threshold", f"{r.threshold:g}"),
          ("keeps", f"{policy}: {rule}"), ("a link", f"a shared LSH band and {similar}"),
          ("rows named by", names),
          ("index", f"num_hashes={p.num_hashes}, num_bands={p.num_bands} × rows_per_band={p.rows_per_band}, "
                    f"shingle_size={p.shingle_size}; S-curve threshold {p.threshold:.3f}"),
          ("clusters", f"{r.num_clusters:,} clusters hold {r.rows:,} rows"),
          ("dedup drops", f"{r.dropped:,} rows")]
    kv_html = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in kv)
    top = max((n for _, n in r.sizes), default=1)
    sizes = "".join(f'<tr><td>{s:,}</td><td>{n:,}</td><td>{s * n:,}</td><td style="text-align:left">'
                    f'<span class="bar" style="width:{max(2, round(160 * n / top))}px"></span></td></tr>'
                    for s, n in r.sizes)
    star = r.clustering == "star"
    clusters = ("".join(_cluster_html(c, i, star) for i, c in enumerate(r.clusters, 1))
                or "<p>No near-duplicates at this threshold.</p>")
    compared = ("its twin (the kept row it is dropped for)" if star else
                "the kept row, and the chain of verified links that joins them")
    return (f'<div class="lms-review"><style>{PAGE_STYLE}</style>'
            f'<h1>Near-duplicate review</h1><p class="sub">{html.escape(r.dataset)} · {html.escape(r.column)} · '
            f'threshold {r.threshold:g} · {html.escape(policy)}</p>'
            f'<section id="parameters"><h2>Parameters and the S-curve</h2><div class="top">'
            f'<table class="kv">{kv_html}</table>'
            f'<figure style="margin:0">{scurve_svg(p, r.threshold)}<figcaption class="sub">The probability '
            f'that a pair of a given similarity shares a band and becomes a candidate.</figcaption></figure>'
            f'</div></section>'
            f'<section id="sizes"><h2>Cluster sizes</h2><table class="sizes"><tr><th>size</th><th>clusters</th>'
            f'<th>rows</th><th></th></tr>{sizes}</table></section>'
            f'<section id="clusters"><h2>A sample of clusters</h2><p class="sub">The largest, the borderline (a '
            f'dropped row least similar to its kept row) and random ones. Each dropped row shows its exact Jaccard '
            f'J to {compared}; <mark>highlighted</mark> words are not in its kept row, <del>struck</del> words are '
            f'the kept row\'s that it lacks.</p>{clusters}</section>'
            f'{section_html(r.estimate, r.threshold) if r.estimate is not None else ""}</div>')
