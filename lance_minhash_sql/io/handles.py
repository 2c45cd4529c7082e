"""Dataset handles: a URI (with its storage options) opened once and kept, its latest
version checked on each use, and pinned versions for statements that must read exactly
one version.

The handles live in two bounded caches of ``runtime/cache.py`` (emptied by
``clear_cache()``); every index, search, self-join and report opens its dataset here.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.core.tuning import MAX_HANDLES
from lance_minhash_sql.io.scan import is_dataset, latest_of, open_dataset, options_for, uri_of, version_of
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = ["DatasetVersion", "open_version", "dataset_handle", "dataset_at", "options_key"]


_datasets = ByteCache.for_objects("opened datasets", MAX_HANDLES)  # (uri, options) -> latest handle
_pinned = ByteCache.for_objects("pinned dataset versions", MAX_HANDLES)  # (uri, options, version) -> dataset
_lock = threading.Lock()


def options_key(storage_options) -> Any:
    return None if not storage_options else tuple(sorted((str(k), str(v)) for k, v in storage_options.items()))


def dataset_handle(dataset, storage_options=None):
    """``(uri, LanceDataset)``: a dataset object as given, or the latest version of a URI.

    Opened URIs are kept; each call checks for a newer version.
    """
    if is_dataset(dataset):
        return str(uri_of(dataset)).rstrip("/"), dataset
    if not isinstance(dataset, (str, os.PathLike)):
        raise DatasetError(f"dataset={dataset!r} must be a path or URI of a Lance dataset (or a LanceDataset)")
    uri = os.fspath(dataset)
    key = (uri, options_key(storage_options))
    with _lock:
        ds = _datasets.get(key)
    if ds is not None:
        ds = latest_of(ds)
    if ds is None:
        ds = open_dataset(uri, storage_options=storage_options)
    with _lock:
        _datasets.put(key, ds)
    return str(uri_of(ds)).rstrip("/"), ds


class DatasetVersion:
    """A dataset as a reader holds it: its URI, the opened version, the storage options that
    reach its files (they may hold secrets: not in the repr), and a key naming that view of
    it for caches (the options as a hashable tuple)."""

    __slots__ = ("uri", "ds", "version", "storage_options", "options_key")

    def __init__(self, uri: str, ds, version: int, storage_options: dict | None, options_key: Any):
        self.uri = uri
        self.ds = ds
        self.version = version
        self.storage_options = storage_options
        self.options_key = options_key

    def __repr__(self) -> str:
        return f"DatasetVersion(uri={self.uri!r}, version={self.version})"


def open_version(dataset, storage_options=None) -> DatasetVersion:
    """The latest version of ``dataset`` (a URI, or a ``LanceDataset`` as given) with the
    storage options its files need: those given, else the ones the dataset object was
    opened with (:func:`.scan.options_for`)."""
    storage_options = options_for(dataset, storage_options)
    uri, ds = dataset_handle(dataset, storage_options)
    return DatasetVersion(uri, ds, version_of(ds), storage_options, options_key(storage_options))


def dataset_at(dataset: str, version: int, storage_options=None):
    """The dataset at ``version``, without asking the store for a newer one: the opened
    handle when it is that version, else a checkout of it (kept, like opened handles).

    A SQL search plans its columns on one version and runs on exactly that version.
    """
    uri = os.fspath(dataset)
    opts = options_key(storage_options)
    with _lock:
        ds = _datasets.get((uri, opts))
        if ds is not None and version_of(ds) == version:
            return ds
        ds = _pinned.get((uri, opts, version))
    if ds is None:
        ds = open_dataset(uri, storage_options=storage_options, version=version)
        with _lock:
            _pinned.put((uri, opts, version), ds)
    return ds
