"""PNG plots of an index report (optional: needs matplotlib, the ``plot`` extra).

>>> from lance_minhash_sql import report, save_plots  # doctest: +SKIP
>>> save_plots(report("corpus.lance", "text"), "report/")  # doctest: +SKIP
{'scurve': 'report/scurve.png', 'buckets': 'report/buckets.png', 'estimator': 'report/estimator.png'}

1. ``scurve.png``: the theoretical S-curve ``1 - (1 - J^r)^b``, the empirical candidate
   rate of each exact-Jaccard bin at the bin's mean Jaccard with a 95 % Wilson interval,
   the S-curve threshold (and the report's threshold when it differs) marked, and the
   false-positive / false-negative areas shaded;
2. ``buckets.png``: how many buckets have each size, log-log, with p99 and max marked;
3. ``estimator.png``: estimated (signature) against exact Jaccard of the sampled pairs,
   the line ``y = x`` and the theoretical 95 % band ``± 1.96 sqrt(J (1 - J) / k)``;
   candidates and non-candidates in two colours.

Figures are drawn on ``matplotlib.figure.Figure`` objects with the Agg canvas: no pyplot,
no global backend change, safe in threads and notebooks.
"""

from __future__ import annotations

import math
import os
from types import MappingProxyType

import numpy as np

from lance_minhash_sql.core.errors import InvalidParameterError, MissingDependencyError
from lance_minhash_sql.core.banding import scurve
from lance_minhash_sql.diagnostics.intervals import Z95, wilson
from lance_minhash_sql.io.outputs import prepare_output, written_beside

__all__ = ["FIGSIZE", "DPI", "PLOT_FILES", "PLOT_INSTALL", "require_matplotlib", "save_plots"]

FIGSIZE = (8.0, 5.0)  # inches
DPI = 120  # 960 x 600 pixels
PLOT_FILES = MappingProxyType({"scurve": "scurve.png", "buckets": "buckets.png", "estimator": "estimator.png"})


# the package installs from its repository (README), so the hint names matplotlib itself
PLOT_INSTALL = "pip install 'matplotlib>=3.7' (in a clone of this repository: pip install -e '.[plot]')"


def require_matplotlib() -> None:
    """Raise :class:`MissingDependencyError` now, before any work, if matplotlib is missing."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            f"writing the report's PNG plots needs matplotlib, which is not installed; install it with "
            f"{PLOT_INSTALL} (the report's tables work without it)") from None


def _figure():
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    return fig, fig.subplots()


def _title(rep, what: str) -> str:
    p = rep.params
    name = os.path.basename(rep.uri.rstrip("/")) or rep.uri
    return f"{what}\n{name}:{rep.column}  (k={p.num_hashes}, b={p.num_bands}, r={p.rows_per_band})"


def _scurve(rep, path: str) -> None:
    fig, ax = _figure()
    b, r = rep.params.num_bands, rep.params.rows_per_band
    s = np.linspace(0.0, 1.0, 501)
    curve = scurve(s, b, r)
    t = rep.threshold
    ax.fill_between(s, 0, curve, where=s <= t, color="tab:red", alpha=0.12,
                    label=f"false-positive area {rep.metric('false_positive_area'):.3f}")
    ax.fill_between(s, curve, 1, where=s >= t, color="tab:orange", alpha=0.12,
                    label=f"false-negative area {rep.metric('false_negative_area'):.3f}")
    ax.plot(s, curve, color="tab:blue", lw=2, label=f"theory 1 - (1 - J^{r})^{b}")
    sc = rep.scurve.to_pydict()
    n = np.array(sc["pairs"], dtype=np.float64)
    has = n > 0
    if has.any():
        x = np.array([v for v, h in zip(sc["mean_jaccard"], has) if h])
        c = np.array(sc["candidates"], dtype=np.float64)[has]
        lo, hi = wilson(c, n[has])
        y = c / n[has]
        ax.errorbar(x, y, yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)], fmt="o", color="black", ms=4,
                    capsize=3, label=f"empirical: {int(n.sum()):,} sampled pairs, 95% interval")
    st = rep.metric("scurve_threshold")
    ax.axvline(st, color="tab:green", ls="--", label=f"S-curve threshold (1/b)^(1/r) = {st:.3f}")
    if abs(t - st) > 1e-9:
        ax.axvline(t, color="tab:purple", ls=":", label=f"threshold t = {t:.3f}")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("exact Jaccard similarity of the pair (shingle sets)")
    ax.set_ylabel("P(candidate) = P(pair shares >= 1 band key)")
    ax.set_title(_title(rep, "LSH S-curve: theory vs empirical candidate rate"))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.savefig(path)


def _buckets(rep, path: str) -> None:
    fig, ax = _figure()
    sizes = rep.bucket_sizes.column("size").to_numpy()
    counts = rep.bucket_sizes.column("buckets").to_numpy()
    if sizes.size:
        ax.plot(sizes, counts, "o-", color="tab:blue", ms=4, lw=1, label="buckets of this size")
        p99 = rep.metric("bucket_size_p99")
        ax.axvline(p99, color="tab:green", ls="--", label=f"p99 = {p99:,.0f}")
        ax.axvline(sizes[-1], color="tab:red", ls=":", label=f"max = {int(sizes[-1]):,}")
    ax.set_xscale("log")
    if sizes.size:
        ax.set_xlim(right=float(sizes[-1]) * 2)  # room right of the max line
    ax.set_yscale("log")
    ax.set_xlabel("bucket size (rows sharing one band key)")
    ax.set_ylabel("number of buckets")
    total = int(counts.sum()) if counts.size else 0
    multi = int(counts[sizes >= 2].sum()) if counts.size else 0
    ax.set_title(_title(rep, f"Bucket sizes: {total:,} buckets, {multi:,} with 2+ rows"))
    ax.grid(alpha=0.3, which="both")
    # counts fall with size: the lower left is empty, the max line is at the right
    ax.legend(loc="lower left", fontsize=8)
    fig.savefig(path)


def _estimator(rep, path: str) -> None:
    fig, ax = _figure()
    k = rep.params.num_hashes
    pairs = rep.pairs
    j = pairs.column("jaccard").to_numpy()
    est = pairs.column("estimated").to_numpy()
    cand = pairs.column("candidate").to_numpy(zero_copy_only=False)
    s = np.linspace(0.0, 1.0, 201)
    band = Z95 * np.sqrt(s * (1 - s) / k)
    ax.fill_between(s, s - band, s + band, color="tab:gray", alpha=0.2,
                    label=f"theory: ± 1.96 sqrt(J(1-J)/{k})")
    ax.plot([0, 1], [0, 1], color="black", lw=1, label="y = x")
    for sel, color, label in ((~cand, "tab:blue", "not a candidate"), (cand, "tab:red", "candidate")):
        if sel.any():
            ax.scatter(j[sel], est[sel], s=6, alpha=0.35, color=color, linewidths=0,
                       label=f"{label} ({int(sel.sum()):,} pairs)")
    mae = rep.metric("estimator_mean_abs_error")
    th = rep.metric("estimator_theoretical_mean_abs_error")
    what = "Estimated vs exact Jaccard"
    if mae is not None and th is not None and not (math.isnan(mae) or math.isnan(th)):
        what += f": mean |error| {mae:.4f} (theory {th:.4f})"
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("exact Jaccard similarity (shingle sets)")
    ax.set_ylabel("estimated similarity (equal signature values / k)")
    ax.set_title(_title(rep, what))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, markerscale=3)
    fig.savefig(path)


def save_plots(rep, out_dir: str) -> dict[str, str]:
    """Write ``scurve.png``, ``buckets.png`` and ``estimator.png`` of a
    :class:`~lance_minhash_sql.diagnostics.report.Report` into ``out_dir`` (created if needed);
    returns their paths. Raises :class:`MissingDependencyError` without matplotlib."""
    if not isinstance(out_dir, (str, os.PathLike)) or not os.fspath(out_dir):
        raise InvalidParameterError(f"out_dir={out_dir!r} must be a folder path for the PNG files")
    _figure()  # fail before creating anything when matplotlib is missing
    out_dir = os.fspath(out_dir)
    prepare_output(out_dir, "out_dir", "folder")
    paths = {name: os.path.join(out_dir, file) for name, file in PLOT_FILES.items()}
    for name, draw in (("scurve", _scurve), ("buckets", _buckets), ("estimator", _estimator)):
        with written_beside(paths[name]) as tmp:  # each file whole or absent
            draw(rep, tmp)
    return paths
