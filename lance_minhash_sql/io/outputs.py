"""Outputs that appear whole or not at all: a file or a new dataset is written under a
temporary name beside its path, then renamed onto it in one step.

The rules, the same for every output (``dedup --output``, ``pairs``/``clusters``/``join
--output``, ``sql --output``, ``review --out``, ``report --out``, ``dedup(output=...)``,
``review(out=...)``, ``save_plots``):

* a missing folder on the way to a local output is created, before any work starts
  (:func:`prepare_output`); a folder that cannot be created is refused with its reason;
* the output is written to ``.NAME.partial-PID`` beside ``NAME`` (:func:`temp_beside`) and
  renamed onto ``NAME`` when whole (:func:`written_beside`, :func:`publish_dir`): a run
  that fails removes its temporary, and a run killed at any moment leaves ``NAME`` absent
  or whole, never half-written;
* what a killed run leaves behind is recognised and replaced by the next write to the same
  path (:func:`clear_leftovers`): a temporary beside it whose process is gone, and a folder
  at the path holding only a Lance write that never committed (data files, no
  ``_versions`` manifest: what a write straight into the path leaves when killed).

Object-store URIs (``s3://...``) have no rename; Lance writes them in place, and a dataset
is there only once its manifest is committed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from types import MappingProxyType
from typing import Iterator

from lance_minhash_sql.core.errors import DatasetError

__all__ = ["is_local", "prepare_output", "temp_beside", "written_beside", "publish_dir", "replacing_dir",
           "clear_leftovers", "uncommitted_lance"]

_PARTIAL = ".partial-"
_LANCE_PARTS = MappingProxyType({"data": re.compile(r"(.*\.lance|\.tmp.*)"), "_transactions": re.compile(r".*\.txn"),
                                  "_deletions": re.compile(r".*"), "_indices": re.compile(r".*")})


def is_local(path: str) -> bool:
    """Whether ``path`` is a local path (no ``scheme://``)."""
    return "://" not in str(path) or str(path).startswith("file://")


def _local(path: str) -> str:
    path = os.fspath(path)
    return path[len("file://"):] if path.startswith("file://") else path


def prepare_output(path: str, option: str, kind: str = "file") -> None:
    """Create the missing folders on the way to the local output ``path``; ``kind`` is
    ``file`` (an existing folder at ``path`` is refused), ``dataset`` (a new Lance
    dataset's folder) or ``folder`` (the output is a folder of files, created too).
    ``option`` names the argument in messages (``--output``, ``out=``). A folder that
    cannot be created raises :class:`DatasetError`."""
    if not is_local(path):
        return
    path = _local(path)
    where = os.path.abspath(path) if kind == "folder" else os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(where, exist_ok=True)
    except OSError as exc:
        raise DatasetError(f"{option} {path!r}: cannot create the folder {where!r} ({exc.strerror or exc}); "
                           "choose a path in a folder you can write to") from None
    if kind == "file" and os.path.isdir(path):
        raise DatasetError(f"{option} {path!r} is a folder; name a file in it, e.g. {os.path.join(path, 'out')!r}")


def temp_beside(path: str) -> str:
    """The temporary name of ``path`` while it is written: ``.NAME.partial-PID`` in the same
    folder, with ``NAME``'s extension kept (writers that choose a format by it still do)."""
    path = _local(path)
    folder, name = os.path.split(os.path.abspath(path))
    ext = os.path.splitext(name)[1]
    return os.path.join(folder, f".{name}{_PARTIAL}{os.getpid()}{ext}")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


@contextlib.contextmanager
def written_beside(path: str) -> Iterator[str]:
    """``with written_beside(path) as tmp:`` write the file ``tmp``; when the block ends
    without an error, ``tmp`` replaces ``path`` in one rename; otherwise ``tmp`` is removed.
    An object-store ``path`` is yielded as it is."""
    if not is_local(path):
        yield path
        return
    clear_leftovers(path)
    tmp = temp_beside(path)
    try:
        yield tmp
        os.replace(tmp, _local(path))
    finally:
        _remove(tmp)


def publish_dir(tmp: str, path: str) -> None:
    """Rename the finished folder ``tmp`` onto ``path`` in one step (``path`` must be absent,
    or a recognised leftover, which is removed first)."""
    path = _local(path)
    if os.path.isdir(path) and uncommitted_lance(path):
        shutil.rmtree(path)
    os.rename(tmp, path)


@contextlib.contextmanager
def replacing_dir(path: str) -> Iterator[str]:
    """``with replacing_dir(path) as tmp:`` write a new folder (a dataset) at ``tmp``; when
    the block ends without an error, whatever was at the local ``path`` is removed and
    ``tmp`` renamed onto it: a fresh dataset (its first version, fragment ids from 0), not
    a new version on top of the old one. Otherwise ``tmp`` is removed and ``path`` kept."""
    path = _local(path)
    clear_leftovers(path)
    tmp = temp_beside(path)
    try:
        yield tmp
        _remove(path)
        os.rename(tmp, path)
    finally:
        _remove(tmp)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def uncommitted_lance(path: str) -> bool:
    """Whether the folder ``path`` holds only what a killed Lance write leaves: data (or
    transaction) files and no ``_versions`` manifest, so Lance cannot open it."""
    try:
        entries = os.listdir(path)
    except OSError:
        return False
    if not entries or "_versions" in entries or not set(entries) <= set(_LANCE_PARTS):
        return False
    for part in entries:
        for _, _, files in os.walk(os.path.join(path, part)):
            if not all(_LANCE_PARTS[part].fullmatch(f) for f in files):
                return False
    return True


def clear_leftovers(path: str) -> None:
    """Remove what killed writes to the local ``path`` left: temporaries beside it whose
    process is gone, and an uncommitted Lance write at ``path`` itself."""
    if not is_local(path):
        return
    path = _local(path)
    folder, name = os.path.split(os.path.abspath(path))
    prefix = f".{name}{_PARTIAL}"
    with contextlib.suppress(OSError):
        for entry in os.listdir(folder):
            if entry.startswith(prefix):
                pid = entry[len(prefix):].split(".", 1)[0]
                if pid.isdigit() and not _alive(int(pid)):
                    _remove(os.path.join(folder, entry))
    if os.path.isdir(path) and uncommitted_lance(path):
        shutil.rmtree(path, ignore_errors=True)
