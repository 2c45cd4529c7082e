"""Status lines: what a terminal shows while a wait without a progress bar runs.

Rule (every interface): anything a user may wait on for more than a second or two on a
terminal shows progress: a progress bar (``runtime/progress.py``) where the work counts
rows, else a :class:`StatusLine` (``  what ... 4s``, rewritten every second from the
first one), and nothing when not enabled (stderr is not a terminal, or the user asked
for quiet). A line is erased when its wait ends, or when a progress bar starts
(:func:`give_way`), which then shows the rest. When lines nest (a numba compilation,
``kernels/config.py``, inside a command's step), the latest one started is shown and the
others wait for it to end.
"""

from __future__ import annotations

import sys
import threading
import time

__all__ = ["StatusLine", "SHOWN", "give_way", "TICK_SECONDS", "on_terminal"]

TICK_SECONDS = 1.0  # a line appears after this long, and is rewritten as often
SHOWN: list["StatusLine"] = []  # the lines running, latest last (registered in runtime/cache.py)
_LOCK = threading.Lock()  # guards SHOWN and every line's writes


def on_terminal(stream=None) -> bool:
    """Whether ``stream`` (default: stderr) is a terminal, where status lines go."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed, or not a file
        return False


class StatusLine:
    """While a wait runs, one status line on ``stream`` (default stderr), rewritten every
    ``every`` seconds (default :data:`TICK_SECONDS`) with the seconds spent, so that the
    wait is never silent; erased when it ends or when a progress bar starts. Nothing when
    not ``enabled``, or for a wait shorter than ``every``. Use it as a context manager, or
    :meth:`start` and :meth:`stop`."""

    def __init__(self, what: str, enabled: bool, stream=None, every: float | None = None):
        self.what, self.enabled = what, bool(enabled)
        self.every = TICK_SECONDS if every is None else every
        self.stream = sys.stderr if stream is None else stream
        self.shown = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        t0 = time.perf_counter()
        while not self._stop.wait(self.every):
            line = f"  {self.what} ... {time.perf_counter() - t0:.0f}s"
            with _LOCK:
                if self._stop.is_set():
                    break
                if SHOWN and SHOWN[-1] is not self:  # a line started since shows instead
                    continue
                self.stream.write("\r" + line + "\033[K")
                self.stream.flush()
                self.shown = len(line)

    def start(self) -> "StatusLine":
        if self.enabled and self._thread is None:
            with _LOCK:
                SHOWN.append(self)
            self._thread = threading.Thread(target=self._run, name="lance-minhash-status", daemon=True)
            self._thread.start()
        return self

    def _erase(self) -> None:
        """Stop writing and erase what this line shows (under the lock)."""
        self._stop.set()
        if self.shown:
            self.stream.write("\r" + " " * self.shown + "\r")
            self.stream.flush()
            self.shown = 0

    def stop(self) -> None:
        """Stop ticking and erase the line (the wait's end, or a bar taking over)."""
        if self._thread is None:
            return
        with _LOCK:
            self._erase()
            if self in SHOWN:
                SHOWN.remove(self)
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> "StatusLine":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def give_way() -> None:
    """Erase and stop every status line shown: a progress bar starts on the terminal."""
    with _LOCK:
        for line in SHOWN:
            line._erase()
        SHOWN.clear()
