"""Progress bars of long calls (build, optimize, dedup, the CLI's pairs)."""

from __future__ import annotations

__all__ = ["progress_bar"]


def progress_bar(enabled: bool, total: int | None, desc: str, unit: str = "rows"):
    """A tqdm bar, or None when not ``enabled`` (tqdm is imported only then)."""
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, dynamic_ncols=True)
