"""Appending rows to a Lance dataset together with what indexes them, in one visible step;
and removing old versions.

An ingest appends rows and extends the index over them: two Lance commits (an
``Append``, then a ``CreateIndex``). Committed one after the other on the dataset, a run
killed between them would leave a version whose rows no index segment covers. So both
are committed *detached* (:func:`append_detached`, and the index's commit with
``detached_as``, ``io/manifest.py``): versions outside the dataset's history, which no reader sees. The
last of them becomes the dataset's next version in one ``Restore`` commit
(:func:`publish`): readers see the version before the ingest, or the one after it with
rows and index together. A run killed before that step leaves the dataset as it was (the
detached versions' files are removed by a later :func:`cleanup_versions`).

Lance rebases a ``Restore`` over any commit that lands after the version read, dropping
that commit's changes, so :func:`publish` refuses to restore unless the version read is
still the latest, and ingests of one local dataset take :func:`ingest_lock` for their
whole run: a second ingest waits for the first and then plans on the version it made.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from datetime import timedelta
from typing import Iterable, Iterator

import lance
import pyarrow as pa
from lance import LanceOperation

from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.io.outputs import is_local
from lance_minhash_sql.io.store import lance_message

__all__ = ["check_appendable", "ingest_lock", "append_detached", "publish", "latest_version", "cleanup_versions"]

_LOCK = ".{name}.ingest-lock"


def check_appendable(target: pa.Schema, source: pa.Schema, target_uri: str, source_uri: str) -> list[str]:
    """The column names of ``target`` (in its order) when rows of ``source`` can be
    appended to it: the same column names with the same types. Otherwise a
    :class:`DatasetError` naming the missing, extra and differing columns."""
    tnames, snames = target.names, source.names
    missing = [n for n in tnames if n not in snames]
    extra = [n for n in snames if n not in tnames]
    differ = [f"{n} ({source.field(n).type} in the batch, {target.field(n).type} in the corpus)"
              for n in tnames if n in snames and source.field(n).type != target.field(n).type]
    if missing or extra or differ:
        parts = ([f"missing from the batch: {missing}"] if missing else []) + \
                ([f"not in the corpus: {extra}"] if extra else []) + \
                ([f"of another type: {', '.join(differ)}"] if differ else [])
        raise DatasetError(
            f"cannot append the rows of {source_uri!r} to {target_uri!r}: their columns differ ({'; '.join(parts)}). "
            "Rule: appended rows must have exactly the corpus's columns and types. Fix: select or cast the "
            "batch's columns to the corpus's schema before the ingest; nothing was written")
    return list(tnames)


@contextlib.contextmanager
def ingest_lock(uri: str) -> Iterator[None]:
    """Hold the ingest lock of the local dataset ``uri`` (``.NAME.ingest-lock`` beside its
    folder, an ``flock``: released by the system when the process ends, however it ends);
    waits while another process holds it. Object-store datasets have no lock: there a
    concurrent commit makes :func:`publish` fail instead."""
    if not is_local(uri):
        yield
        return
    path = os.path.abspath(str(uri).removeprefix("file://")).rstrip("/")
    folder, name = os.path.split(path)
    fd = os.open(os.path.join(folder, _LOCK.format(name=name)), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def append_detached(ds: "lance.LanceDataset", batches: Iterable[pa.RecordBatch], schema: pa.Schema,
                    storage_options: dict | None = None) -> "lance.LanceDataset":
    """Write ``batches`` (of ``schema``, the dataset's) as new fragments and commit their
    ``Append`` on top of ``ds.version`` as a detached version (seen by no reader)."""
    reader = pa.RecordBatchReader.from_batches(schema, batches)
    try:
        fragments = lance.fragment.write_fragments(reader, ds.uri, schema=schema, storage_options=storage_options)
        return lance.LanceDataset.commit(ds.uri, LanceOperation.Append(fragments), read_version=ds.version,
                                         storage_options=storage_options, detached=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise DatasetError(f"cannot append rows to {ds.uri!r}: {lance_message(exc)}; the dataset is unchanged "
                           f"(still version {ds.version})") from None


def latest_version(uri: str, storage_options: dict | None = None) -> int:
    """The latest version of the dataset at ``uri``."""
    return int(lance.dataset(uri, storage_options=storage_options).version)


def publish(uri: str, read_version: int, detached: int, storage_options: dict | None = None) -> "lance.LanceDataset":
    """Make the detached version number ``detached`` the next version of the dataset at ``uri``,
    which must still be at ``read_version`` (else :class:`DatasetError`: another commit
    landed since; nothing was changed, and a rerun plans on the new version)."""
    latest = latest_version(uri, storage_options)
    if latest != read_version:
        raise DatasetError(
            f"{uri!r} changed while the ingest ran: it was read at version {read_version} and is now at version "
            f"{latest} (another write). Nothing was appended; run the ingest again: it plans on the new version")
    return lance.LanceDataset.commit(uri, LanceOperation.Restore(int(detached)), read_version=read_version,
                                     storage_options=storage_options)


def cleanup_versions(ds: "lance.LanceDataset", older_than: timedelta) -> tuple[int, int]:
    """Lance's own cleanup: remove the versions older than ``older_than`` (never the
    latest) and every file (data, deletions, index segments) that no remaining version
    uses. Tagged versions are kept. Returns ``(versions removed, bytes removed)``."""
    stats = ds.cleanup_old_versions(older_than=older_than, error_if_tagged_old_versions=False)
    return int(stats.old_versions), int(stats.bytes_removed)
