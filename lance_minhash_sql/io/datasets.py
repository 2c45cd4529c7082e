"""Writing Lance datasets: the one place the corpus (and anything else) hands Arrow to Lance."""

from __future__ import annotations

import os
from typing import Iterable, Union

import lance
import pyarrow as pa

from lance_minhash_sql.core.checks import check_int
from lance_minhash_sql.core.errors import DatasetError, InvalidParameterError

__all__ = ["WRITE_MODES", "write_dataset"]

WRITE_MODES = ("create", "overwrite", "append")

BatchesOrReader = Union[pa.RecordBatchReader, pa.Table, Iterable[pa.RecordBatch]]


def write_dataset(
    uri: str,
    batches_or_reader: BatchesOrReader,
    schema: pa.Schema,
    *,
    mode: str = "create",
    max_rows_per_file: int | None = None,
) -> "lance.LanceDataset":
    """Write record batches (a reader, a table or an iterable) as a Lance dataset at ``uri``.

    ``mode`` is ``create`` (fails if the dataset exists), ``overwrite`` or ``append``;
    ``max_rows_per_file`` caps the rows of each fragment (``None``: Lance's default,
    1,048,576). Batches are streamed: only the batch being written is in memory.
    """
    if mode not in WRITE_MODES:
        raise InvalidParameterError(f"mode={mode!r} is not a write mode: use one of {WRITE_MODES}")
    if mode == "overwrite" and "://" not in str(uri) and not os.path.exists(str(uri)):
        mode = "create"  # the same result, without Lance's "No existing dataset ... will be created" WARN log
    kwargs = {}
    if max_rows_per_file is not None:
        kwargs["max_rows_per_file"] = check_int("max_rows_per_file", max_rows_per_file,
                                                "rows per fragment, e.g. 1_048_576, or None for Lance's default", lo=1)
        # a row group must not be larger than a file
        kwargs["max_rows_per_group"] = min(1024, max_rows_per_file)
    if isinstance(batches_or_reader, pa.Table):
        reader = batches_or_reader.to_reader()
    elif isinstance(batches_or_reader, pa.RecordBatchReader):
        reader = batches_or_reader
    else:
        reader = pa.RecordBatchReader.from_batches(schema, iter(batches_or_reader))
    try:
        return lance.write_dataset(reader, str(uri), schema=schema, mode=mode, **kwargs)
    except (OSError, ValueError) as exc:
        fix = {
            "create": "use mode='overwrite' to replace an existing dataset or 'append' to add to it",
            "append": "appended batches must have the dataset's schema; compare ds.schema with the batches'",
            "overwrite": "check that the path is writable",
        }[mode]
        raise DatasetError(
            f"cannot write Lance dataset {str(uri)!r} with mode={mode!r}: {exc}; {fix}"
        ) from exc
