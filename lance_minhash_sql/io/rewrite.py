"""Removing rows from a Lance dataset: a new dataset without them, or one delete commit.

Both operations are atomic: :func:`write_without` writes a new local dataset beside its
path and renames it onto the path once committed (``io/outputs.py``: a failed or killed
write leaves no dataset there, and its leftover is replaced by the next write; on an
object store Lance's commit of the first manifest is the step), and :func:`delete_rows` is a single ``Delete``
commit on top of the version the rows were read from, so the earlier versions stay
readable (``lance.dataset(uri, version=v)``).

Rows are named by ``_rowid`` (row addresses, or stable row ids when the dataset has them),
as the index and the self-join report them.
"""

from __future__ import annotations

import os
import shutil
from typing import Callable

import lance
import numpy as np
import pyarrow as pa

from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.core.tuning import SCAN_BATCH_ROWS
from lance_minhash_sql.io.datasets import write_dataset
from lance_minhash_sql.io.outputs import (clear_leftovers, is_local, prepare_output, publish_dir, temp_beside,
                                          uncommitted_lance)
from lance_minhash_sql.io.store import lance_message

__all__ = ["dataset_exists", "live_rows", "write_without", "delete_rows"]


def dataset_exists(uri: str) -> bool:
    """Whether a Lance dataset (or anything) already lives at ``uri`` (local paths only); a
    killed write's leftover (``io/outputs.py``: :func:`uncommitted_lance`) does not count:
    the next write replaces it."""
    return os.path.exists(uri) and not (os.path.isdir(uri) and uncommitted_lance(uri))


def live_rows(ds: "lance.LanceDataset") -> int:
    """Live rows of the dataset object's version."""
    return int(ds.count_rows())


def write_without(ds: "lance.LanceDataset", remove: np.ndarray, output: str,
                  progress: Callable[[int], None] | None = None) -> "lance.LanceDataset":
    """Write every live row of ``ds`` (its version) whose ``_rowid`` is not in the sorted
    ``remove`` to a new dataset at ``output``, streaming batch by batch; ``progress(n)``
    is called with the rows read from each batch. A local ``output`` is written beside
    and renamed onto its path when committed (``io/outputs.py``)."""
    local = is_local(output)
    if local:
        prepare_output(output, "output", "dataset")
        clear_leftovers(output)
    if dataset_exists(output):
        raise DatasetError(f"output {output!r} already exists; choose a new path (the output is never overwritten)")
    remove = np.asarray(remove, dtype=np.uint64)
    schema = ds.schema

    def batches():
        scanner = ds.scanner(with_row_id=True, batch_size=SCAN_BATCH_ROWS, scan_in_order=True)
        for batch in scanner.to_batches():
            if batch.num_rows == 0:
                continue
            rowids = batch.column("_rowid").to_numpy()
            keep = ~np.isin(rowids, remove, assume_unique=False) if remove.size else None
            data = batch.select(schema.names)
            if keep is not None and not keep.all():
                data = data.filter(pa.array(keep))
            if progress is not None:
                progress(batch.num_rows)
            if data.num_rows:
                yield data

    target = temp_beside(output) if local else output
    try:
        written = write_dataset(target, batches(), schema, mode="create")
        if not local:
            return written
        publish_dir(target, output)
    except BaseException:
        if os.path.isdir(target):
            shutil.rmtree(target, ignore_errors=True)
        raise
    return lance.dataset(output)


def delete_rows(ds: "lance.LanceDataset", remove: np.ndarray) -> int:
    """Delete the rows with the given (live, distinct) ``_rowid`` in one commit on top of
    ``ds``'s version; ``ds`` then is the new version. Returns the rows deleted.

    ``conflict_retries=0``: a concurrent commit that conflicts (e.g. a compaction that
    moved the rows) fails the delete instead of re-running its predicate on a version
    where the row ids may name other rows; a concurrent append does not conflict."""
    remove = np.asarray(remove, dtype=np.uint64)
    if remove.size == 0:
        return 0
    predicate = "_rowid IN (" + ",".join(map(str, remove.tolist())) + ")"
    try:
        result = ds.delete(predicate, conflict_retries=0)
    except (OSError, ValueError, RuntimeError) as exc:
        msg = lance_message(exc)
        raise DatasetError(
            f"cannot delete {remove.size:,} rows from {ds.uri!r} (version {ds.version}): {msg}; nothing was "
            "deleted; run the dedup again on the current version") from None
    return int(result["num_deleted_rows"])
