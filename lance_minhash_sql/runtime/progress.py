"""Progress bars of long calls (build, optimize, dedup, the CLI's pairs); a bar takes the
place of any status line shown (``core/status.py``)."""

from __future__ import annotations

from lance_minhash_sql.core.status import give_way

__all__ = ["progress_bar"]


def progress_bar(enabled: bool, total: int | None, desc: str, unit: str = "rows", scale: bool = True):
    """A tqdm bar, or None when not ``enabled`` (tqdm is imported only then); ``scale``:
    counts shown as 1.2M (rows), else whole (shards). The status lines shown are erased
    first (:func:`~lance_minhash_sql.core.status.give_way`): the bar shows the rest."""
    if not enabled:
        return None
    give_way()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=scale, dynamic_ncols=True)
