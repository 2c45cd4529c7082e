"""The review page's dry-run section (``faces/review.py``): what a dedup would drop at
thresholds around the page's own, with 95 % intervals, and what the full self-join would
cost, from :func:`lance_minhash_sql.diagnostics.estimate.estimate` (``docs/estimate.md``).
"""

from __future__ import annotations

import html

import pyarrow as pa

from lance_minhash_sql.diagnostics.estimate import estimate

__all__ = ["SECTION_STEP", "SECTION_SAMPLE_ROWS", "section_table", "section_html"]

SECTION_STEP = 0.1  # the section's thresholds: the page's, and this much below and above (within (0, 1])
SECTION_SAMPLE_ROWS = 2000


def section_table(dataset, column: str, threshold: float, storage_options: dict | None = None,
                  seed: int = 0, verify: str = "estimate", memory_limit=None) -> pa.Table:
    """The dry run at the page's threshold and :data:`SECTION_STEP` either side of it."""
    near = [round(threshold + d, 6) for d in (-SECTION_STEP, 0.0, SECTION_STEP)]
    return estimate(dataset, column, [t for t in near if 0 < t <= 1], SECTION_SAMPLE_ROWS, seed=seed,
                    verify=verify, memory_limit=memory_limit, storage_options=storage_options)


def _range(low: float, high: float, fmt: str) -> str:
    return f'<span class="ci">[{fmt.format(low)}, {fmt.format(high)}]</span>'


def section_html(table: pa.Table, threshold: float) -> str:
    """The section: one table row per threshold, the page's own in bold."""
    rows = []
    for r in table.to_pylist():
        own = ' style="font-weight:600"' if abs(r["threshold"] - threshold) < 1e-9 else ""
        rows.append(
            f"<tr{own}><td>{r['threshold']:g}</td>"
            f"<td>{r['duplicate_fraction']:.1%} "
            f"{_range(r['duplicate_fraction_low'], r['duplicate_fraction_high'], '{:.1%}')}</td>"
            f"<td>{r['rows_dropped_components']:,.0f} "
            f"{_range(r['rows_dropped_components_low'], r['rows_dropped_components_high'], '{:,.0f}')}</td>"
            f"<td>{r['rows_dropped_star']:,.0f} "
            f"{_range(r['rows_dropped_star_low'], r['rows_dropped_star_high'], '{:,.0f}')}</td>"
            f"<td>{r['pairs']:,.0f} {_range(r['pairs_low'], r['pairs_high'], '{:,.0f}')}</td>"
            f"<td>{r['seconds']:.1f} s · {r['peak_memory'] / 2**20:,.0f} MiB</td></tr>")
    first = table.to_pylist()[0] if table.num_rows else {"sampled_rows": 0, "live_rows": 0}
    return (f'<section id="estimate"><h2>Other thresholds: a dry run</h2><p class="sub">From '
            f'{first["sampled_rows"]:,} of {first["live_rows"]:,} rows drawn at random, each searched against the '
            f'index: the share of rows with a near-duplicate, the rows a dedup would drop (components, star: '
            f'keep the lowest row id), the pairs, each with its 95% interval, and what the full self-join '
            f'would take on this machine. Nothing is run on the whole dataset.</p>'
            f'<table class="sizes"><tr><th>threshold</th><th>rows with a near-duplicate</th><th>dropped '
            f'(components)</th><th>dropped (star)</th><th>pairs</th><th>full run</th></tr>{"".join(rows)}</table>'
            f'<p class="sub">{html.escape("Intervals: Wilson score (share, rows dropped), normal (pairs).")}</p>'
            f'</section>')
