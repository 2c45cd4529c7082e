"""A dry run of the self-join: what dedup would drop at each threshold, and what the full
run would cost, from a sample of rows (``docs/estimate.md``).

>>> import lance_minhash_sql as lms  # doctest: +SKIP
>>> lms.estimate("corpus.lance", "text", thresholds=[0.7, 0.8, 0.9], sample_rows=2000)  # doctest: +SKIP

**Sample.** ``sample_rows`` of the version's ``N`` live rows, drawn uniformly without
replacement (``seed`` fixes the draw), by position among the live rows (a Lance take).
Each is searched against the index with threshold search, its own hit removed
(:mod:`.neighbours`): its neighbours are exactly its pairs in ``minhash_pairs`` at each
threshold under ``verify``.

**Columns, per threshold** (the statistics: ``docs/estimate.md``):

* ``duplicate_fraction``: the share of sampled rows with at least one neighbour, an
  unbiased estimate of the share of the ``N`` rows that appear in ``minhash_pairs``;
  ``duplicate_fraction_low`` / ``_high``: the Wilson score interval with continuity
  correction and the finite-population correction, 95 %;
* ``rows_dropped_components``: ``N`` times the mean over sampled rows of
  ``1 - 1 / s`` (``s`` the size of the row's component in the graph of the pairs; 0
  outside one): the sum of ``1 - 1 / s`` over all rows is exactly the rows a dedup over
  those components drops (a component of ``s`` rows keeps one). ``minhash_dedup``'s
  clusters refine them (links to each bucket's representatives,
  :mod:`lance_minhash_sql.selfjoin.links`), so it drops at most that many, and the rows it
  clusters are at most those in a pair; equal when every bucket's verified pairs form
  disjoint cliques, and with ``verify="exact"`` (whose components link every exact pair)
  (``docs/estimate.md``, *What the dry run counts*). The component is walked breadth first from the sampled row up to
  :data:`~lance_minhash_sql.core.tuning.ESTIMATE_COMPONENT_ROWS` rows; a larger one counts
  ``1 - 1 / cap`` (a bias of at most ``1 / cap`` per row of such components, downwards);
* ``rows_dropped_star``: ``N`` times the share of sampled rows the star walk drops
  (keep ``'first'``: the component's rows walked by row id, a row dropped when similar to
  a kept row before it), decided on the walked component of the pairs (``minhash_dedup``
  walks its own clusters' components: the same where those are the same);
* both with the Wilson interval as above (for ``components`` the values lie in
  ``[0, 1]``, and the interval uses the largest variance of such a mean);
* ``pairs``: ``N / 2`` times the sampled rows' mean number of neighbours, with the normal
  interval of a mean (sample standard deviation, finite-population corrected);
* ``seconds``, ``peak_memory``, ``temp_disk``: the full ``minhash_pairs`` at this threshold
  and ``memory_limit``, projected by :mod:`.costs`: its work counted on the sampled rows'
  buckets (:mod:`.workload`), priced at the rates of its steps measured on a few small
  shards of this index; ``busy_factor``: how much longer a thread's work takes now than
  on an idle machine; ``clusters_temp_disk``: the temporary file ``minhash_clusters`` and
  ``minhash_dedup`` write under ``memory_limit`` (their union-find, once in its file);
  ``clusters_seconds``, ``clusters_peak_memory``, ``dedup_seconds``,
  ``dedup_peak_memory``: the same projection of ``minhash_clusters`` (components) and of
  a ``minhash_dedup`` that only counts (keep ``'first'``): the clusters' self-join's work
  on the same buckets, its links to each bucket's representatives, and its one-thread
  steps (the union-find of every row, the clustered rows' table; dedup's keep order).

It never runs the self-join on the dataset: its work is the sample's searches, the
components' walks around the sampled rows, and the self-join's steps on a fixed number of
small shards.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.budget import Budget
from lance_minhash_sql.core.checks import check_int, check_threshold, check_verify
from lance_minhash_sql.core.errors import DatasetError, InvalidParameterError
from lance_minhash_sql.core.tuning import ESTIMATE_COMPONENT_ROWS
from lance_minhash_sql.diagnostics.calibration import calibrate
from lance_minhash_sql.diagnostics.costs import clusters_temp_bytes, project, work
from lance_minhash_sql.diagnostics.intervals import mean_interval, wilson
from lance_minhash_sql.diagnostics.machine_load import busy_factor
from lance_minhash_sql.diagnostics.neighbours import Neighbourhoods
from lance_minhash_sql.diagnostics.workload import sampled_loads
from lance_minhash_sql.index.opened import open_index
from lance_minhash_sql.index.results import ESTIMATE_SCHEMA
from lance_minhash_sql.io.handles import options_for
from lance_minhash_sql.io.scan import row_count, take_offsets
from lance_minhash_sql.selfjoin.shards import plan_for

__all__ = ["ESTIMATE_SCHEMA", "DEFAULT_THRESHOLDS", "DEFAULT_SAMPLE_ROWS", "MAX_SAMPLE_ROWS", "estimate",
           "check_thresholds", "sample_offsets", "describe"]

DEFAULT_THRESHOLDS = (0.7, 0.8, 0.9)
DEFAULT_SAMPLE_ROWS = 2000
MAX_SAMPLE_ROWS = 1_000_000



def check_thresholds(thresholds: Any) -> list[float]:
    """A non-empty list of thresholds, each ``0 < t <= 1`` (sorted, duplicates removed)."""
    if isinstance(thresholds, (int, float)) and not isinstance(thresholds, bool):
        thresholds = [thresholds]
    if not isinstance(thresholds, (list, tuple)) or not thresholds:
        raise InvalidParameterError(
            f"thresholds={thresholds!r} must be a non-empty list of similarity thresholds in (0, 1], "
            "e.g. [0.7, 0.8, 0.9]")
    return sorted({check_threshold(t, "thresholds") for t in thresholds})


def sample_offsets(population: int, n: int, seed: int) -> np.ndarray:
    """The positions among the ``population`` live rows of the ``n`` rows sampled with
    ``seed``: drawn uniformly without replacement, in ascending order."""
    return np.sort(np.random.default_rng(seed).choice(population, n, replace=False))


def _sample_rows(sample_rows: Any) -> int:
    return check_int("sample_rows", sample_rows, "e.g. 2000 (rows searched; the interval narrows as 1 / sqrt(rows))",
                     lo=1, hi=MAX_SAMPLE_ROWS)


def _seed(seed: Any) -> int:
    return check_int("seed", seed, "e.g. 0 (the same seed draws the same rows)", lo=0, hi=2**63 - 1)


def estimate(dataset, column: str, thresholds=DEFAULT_THRESHOLDS, sample_rows: int = DEFAULT_SAMPLE_ROWS, *,
             verify: str = "estimate", seed: int = 0, memory_limit=None,
             storage_options: dict | None = None) -> pa.Table:
    """One row per threshold (:data:`ESTIMATE_SCHEMA`): the share of rows with a near-duplicate
    and its 95 % interval, the rows a dedup would drop (components and star), the pairs,
    and the projected seconds, peak memory and temporary disk of the full
    ``minhash_pairs``; see the module doc."""
    ts = check_thresholds(thresholds)
    n_asked = _sample_rows(sample_rows)
    verify = check_verify(verify)
    seed = _seed(seed)
    budget = Budget.parse(memory_limit)
    t0 = time.perf_counter()
    opened = open_index(dataset, column, options_for(dataset, storage_options))
    population = row_count(opened.ds)
    if population == 0:
        raise DatasetError(f"dataset {opened.uri!r} has no live rows: there is nothing to estimate; add rows first")
    n = min(n_asked, population)
    offsets = sample_offsets(population, n, seed)
    rowids, texts = take_offsets(opened.ds, opened.column, offsets)
    hoods = Neighbourhoods(opened, ts, verify, seed)
    candidates = hoods.add(rowids, texts)
    stats = [_at(hoods, rowids, t, population) for t in ts]
    # a row's buckets are looked up again only when its candidates hold a row besides itself
    loads = sampled_loads(opened, texts, among=candidates > 1)
    sample_seconds = time.perf_counter() - t0
    rates = calibrate(opened, ts[0], verify, budget, loads, ts)
    # with verify="exact" the self-join writes each candidate row's shingle set (8 bytes a shingle)
    set_bytes = np.array([8 * hoods.sets[r].size for r in rowids.tolist()], dtype=np.float64) if hoods.exact else None
    busy = busy_factor()
    clusters_temp = clusters_temp_bytes(plan_for(opened).total_docs, budget)
    cols: dict[str, list] = {f.name: [] for f in ESTIMATE_SCHEMA}
    for t, s in zip(ts, stats):
        # with verify="exact" every candidate at the exact floor is emitted and verified
        pairs = s.pop("floor_pairs") if hoods.exact else s["pairs"]
        w = work(opened, population, loads, pairs, pairs if hoods.exact else 0.0, budget, set_bytes)
        at = rates.at(t)
        cost = project(w, at, population, budget)
        # the clusters' self-join (components): the rows in a pair are those in a cluster
        wc = work(opened, population, loads, pairs, pairs if hoods.exact else 0.0, budget, set_bytes,
                  clustered=population * s["duplicate_fraction"])
        clusters, dedup = project(wc, at, population, budget), project(wc, at, population, budget, dedup=True)
        s.update(threshold=t, verify=verify, live_rows=population, sampled_rows=n, seconds=cost.seconds,
                 peak_memory=cost.peak_memory, temp_disk=cost.temp_disk, clusters_temp_disk=clusters_temp,
                 clusters_seconds=clusters.seconds, clusters_peak_memory=clusters.peak_memory,
                 dedup_seconds=dedup.seconds, dedup_peak_memory=dedup.peak_memory, busy_factor=busy,
                 sample_seconds=sample_seconds)
        for name in cols:
            cols[name].append(s[name])
    return pa.Table.from_pydict(cols, schema=ESTIMATE_SCHEMA)


def _at(hoods: Neighbourhoods, rowids: np.ndarray, t: float, population: int) -> dict:
    """The statistics of one threshold (see the module doc)."""
    n = rowids.size
    degree, within = hoods.degree(rowids, t)
    dup = degree > 0
    lo, hi = wilson(dup.sum(), n, population=population, continuity=True)
    out = {"duplicate_rows": int(dup.sum()), "duplicate_fraction": float(dup.mean()),
           "duplicate_fraction_low": float(lo), "duplicate_fraction_high": float(hi)}
    starts = rowids[dup]
    comps = hoods.explore(starts, lambda r: hoods.pair_links(r, t), ESTIMATE_COMPONENT_ROWS)
    weight = np.zeros(n)
    weight[dup] = [1.0 - 1.0 / c.members.size for c in comps]
    if hoods.exact:  # star's components are linked down to the exact floor: walked again
        comps = hoods.explore(starts, lambda r: hoods.star_links(r, t), ESTIMATE_COMPONENT_ROWS)
    dropped = np.zeros(n, dtype=bool)
    dropped[dup] = [hoods.star_dropped(int(r), c, t) for r, c in zip(starts.tolist(), comps)]
    for name, values in (("components", weight), ("star", dropped)):
        total = float(values.sum())
        lo, hi = wilson(total, n, population=population, continuity=True)
        out[f"rows_dropped_{name}"] = population * total / n
        out[f"rows_dropped_{name}_low"] = population * float(lo)
        out[f"rows_dropped_{name}_high"] = population * float(hi)
    if hoods.exact:
        out["floor_pairs"] = population * float(hoods.degree(rowids, t, star=True)[0].mean()) / 2
    mean, lo, hi = mean_interval(degree, population=population, within=within)
    out.update(pairs=population * mean / 2, pairs_low=max(0.0, population * lo / 2), pairs_high=population * hi / 2)
    return out


def describe(table: pa.Table) -> list[str]:
    """One line per threshold of an :func:`estimate` table, in words."""
    out = []
    for r in table.to_pylist():
        n = r["live_rows"]
        out.append(
            f"threshold {r['threshold']:g} ({r['verify']}, {r['sampled_rows']:,} of {n:,} rows sampled): "
            f"{r['duplicate_fraction']:.1%} of rows have a near-duplicate [{r['duplicate_fraction_low']:.1%}, "
            f"{r['duplicate_fraction_high']:.1%}]; dedup drops ~{r['rows_dropped_components']:,.0f} rows "
            f"[{r['rows_dropped_components_low']:,.0f}, {r['rows_dropped_components_high']:,.0f}] with components, "
            f"~{r['rows_dropped_star']:,.0f} [{r['rows_dropped_star_low']:,.0f}, {r['rows_dropped_star_high']:,.0f}] "
            f"with star; ~{r['pairs']:,.0f} pairs [{r['pairs_low']:,.0f}, {r['pairs_high']:,.0f}]; the full "
            f"minhash_pairs: ~{r['seconds']:.1f} s, peak ~{r['peak_memory'] / 2**20:,.0f} MiB, "
            f"temporary disk {r['temp_disk'] / 2**20:,.0f} MiB; minhash_clusters ~{r['clusters_seconds']:.1f} s, "
            f"minhash_dedup ~{r['dedup_seconds']:.1f} s, peak ~{r['dedup_peak_memory'] / 2**20:,.0f} MiB")
    return out
