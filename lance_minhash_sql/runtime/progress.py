"""Progress bars of long calls (build, optimize, dedup, the CLI's pairs)."""

from __future__ import annotations

from typing import Callable

from lance_minhash_sql.runtime.cache import register_state

__all__ = ["progress_bar", "when_a_bar_starts"]

_STARTING: list[Callable[[], None]] = []  # called as a bar starts: a status line gives way to it
register_state("status lines waiting for a progress bar", _STARTING)  # each removed by its own caller


def when_a_bar_starts(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback()`` when the next bars start (a status line on the same terminal
    erases itself); returns the function that stops it."""
    _STARTING.append(callback)
    return lambda: _STARTING.remove(callback) if callback in _STARTING else None


def progress_bar(enabled: bool, total: int | None, desc: str, unit: str = "rows", scale: bool = True):
    """A tqdm bar, or None when not ``enabled`` (tqdm is imported only then); ``scale``:
    counts shown as 1.2M (rows), else whole (shards)."""
    if not enabled:
        return None
    for callback in list(_STARTING):
        callback()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=scale, dynamic_ncols=True)
