"""Arrays in private temporary files, memory-mapped: what the self-join holds per index row
when it would take more than its share of the budget (:class:`FileArray`,
``selfjoin/parent.py``), and values it appends and reads back without holding them
(:class:`AppendedValues`, ``selfjoin/shingles.py``).

The file is made in a private folder under the system's temp folder (``$TMPDIR``; put it
on a disk, not a RAM file system) with its blocks reserved up front
(``posix_fallocate``: a full disk is an error here, not a crash on a later write), and
mapped shared and read-write, so the array is an ordinary ndarray to numpy and the
kernels. The pages the process touches count in its resident set until
:meth:`FileArray.hand_back` gives them back (``MADV_DONTNEED``, widened as
:func:`.mapped.hand_back` widens it): a shared file mapping's data stays in the file and
the OS page cache, so nothing is lost and the next touch maps the page again. The mapping
is advised ``MADV_RANDOM`` (no read-ahead: Linux then fills the page cache a page at a
time and maps at most its fault-around window, 64 KiB by default, around a touch, not a
whole large folio). :meth:`FileArray.close` removes the folder, whatever happened; an
array never closed has it removed when collected, or when the interpreter exits.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
import weakref

import numpy as np

from lance_minhash_sql.core.errors import ResourceLimitError
from lance_minhash_sql.core.sizes import format_bytes
from lance_minhash_sql.io.mapped import hand_back

__all__ = ["TEMP_PREFIX", "FileArray", "AppendedValues"]

TEMP_PREFIX = "lance-minhash-array-"
_RANDOM = getattr(mmap, "MADV_RANDOM", None)


class FileArray:
    """``size`` items of ``dtype`` in a temporary file (zeros), mapped: :attr:`array`;
    :attr:`handbacks` counts the calls of :meth:`hand_back`."""

    def __init__(self, size: int, dtype, folder: str | None = None):
        dtype = np.dtype(dtype)
        self.nbytes = max(int(size) * dtype.itemsize, 1)  # (a mapping of 0 bytes is refused)
        self.folder: str | None = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=folder)
        self._remove = weakref.finalize(self, shutil.rmtree, self.folder, True)
        self._map: mmap.mmap | None = None
        self.handbacks = 0
        try:
            fd = os.open(os.path.join(self.folder, "array"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                try:
                    os.posix_fallocate(fd, 0, self.nbytes)
                except OSError as exc:
                    raise ResourceLimitError(
                        f"no room for a {format_bytes(self.nbytes)} temporary file in {self.folder!r} ({exc.strerror}): "
                        "set TMPDIR to a folder on a disk with that much free space, or raise memory_limit so "
                        "the array is held in memory") from None
                self._map = mmap.mmap(fd, self.nbytes)  # shared, read-write
            finally:
                os.close(fd)
            if _RANDOM is not None:
                self._map.madvise(_RANDOM)
            self.array = np.frombuffer(self._map, dtype=dtype, count=int(size))
        except BaseException:
            self.close()
            raise

    def hand_back(self, lo: int = 0, hi: int | None = None) -> None:
        """Give the mapped pages of bytes ``[lo, hi)`` (all by default) back to the OS."""
        hand_back(self._map, lo, self.nbytes if hi is None else hi)
        self.handbacks += 1

    def close(self) -> None:
        """Unmap the array (when no view of it is left) and remove the file and its folder."""
        self.array = None
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a view is still referenced (a traceback's frame): unmapped when collected
                pass
            self._map = None
        if self.folder is not None:
            self._remove()  # (shutil.rmtree, once)
            self.folder = None

    def __enter__(self) -> "FileArray":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AppendedValues:
    """Values of one dtype appended to an unnamed temporary file (``$TMPDIR``; removed by
    the OS when closed, or when the process ends however it ends) and read back through a
    read-only memory map: file pages, which the OS page cache holds or drops, never the
    process's anonymous memory. Appends are written (a full disk is a
    :class:`ResourceLimitError` there, never a fault on a later read); :meth:`view` maps
    everything written so far. One writer at a time (the caller's lock); views stay
    valid while referenced, whatever is appended after them. The file is created by the
    first append: values never appended to hold no file to close, and values never closed
    have their file closed when they are collected, or when the interpreter exits."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.file = None
        self.size = 0  # values written
        self._view = np.empty(0, dtype=self.dtype)

    def append(self, values: np.ndarray) -> int:
        """Write ``values`` after those before; the position of the first of them."""
        start = self.size
        data = np.ascontiguousarray(values, dtype=self.dtype)
        try:
            if self.file is None:
                self.file = tempfile.TemporaryFile(prefix=TEMP_PREFIX)
                self._close_file = weakref.finalize(self, self.file.close)  # never closed: when collected, or at exit
            self.file.write(memoryview(data).cast("B"))
            self.file.flush()
        except OSError as exc:
            raise ResourceLimitError(
                f"no room to write {format_bytes(data.nbytes)} more to a temporary file in "
                f"{tempfile.gettempdir()!r} ({exc.strerror}): set TMPDIR to a folder on a disk with more free "
                "space") from None
        self.size += data.size
        return start

    def view(self) -> np.ndarray:
        """Every value written so far, read-only (a new mapping when more were written
        since the last view)."""
        if self._view.size != self.size:
            mapped = mmap.mmap(self.file.fileno(), self.size * self.dtype.itemsize, access=mmap.ACCESS_READ)
            self._view = np.frombuffer(mapped, dtype=self.dtype)
        return self._view

    def close(self) -> None:
        """Close the file (mapped views keep its pages until they are collected)."""
        self._view = np.empty(0, dtype=self.dtype)
        if self.file is not None:
            self._close_file()
