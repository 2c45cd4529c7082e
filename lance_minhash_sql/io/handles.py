"""Dataset handles: a URI (with its storage options) opened once and kept, its latest
version checked on each use (:func:`open_version`, the one call every reader opens a
dataset through), and pinned versions for statements that must read exactly one version;
with them what a handle is made of: whether an object is a dataset (:func:`is_dataset`),
the storage options that reach its files (:func:`options_for`) and its latest version
(:func:`open_latest`).

The handles live in two bounded caches of ``runtime/cache.py`` (emptied by
``clear_cache()``); every index, search, self-join and report opens its dataset here.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import lance
import pyarrow as pa

from lance_minhash_sql.core.errors import DatasetError
from lance_minhash_sql.core.tuning import MAX_HANDLES, TAKE_READER_CACHE_BYTES
from lance_minhash_sql.io.scan import open_dataset, uri_of
from lance_minhash_sql.io.store import absolute_uri
from lance_minhash_sql.runtime.cache import ByteCache

__all__ = ["DatasetVersion", "open_version", "dataset_handle", "dataset_at", "options_key", "options_for", "is_dataset",
           "latest_of", "open_latest", "take_reader"]


_datasets = ByteCache.for_objects("opened datasets", MAX_HANDLES)  # (uri, options) -> latest handle
_pinned = ByteCache.for_objects("pinned dataset versions", MAX_HANDLES)  # (uri, options, version) -> dataset
_lock = threading.Lock()


def is_dataset(obj) -> bool:
    """True for an opened ``LanceDataset`` (or an object that reads like one)."""
    return isinstance(obj, lance.LanceDataset) or (hasattr(obj, "_take_rows") and hasattr(obj, "uri"))


def latest_of(ds):
    """``ds`` checked out at its dataset's latest version (``ds`` itself when it is the
    latest), or None when the version cannot be read (reopen the dataset then)."""
    try:
        latest = ds.latest_version
        return ds if latest == ds.version else ds.checkout_version(latest)
    except (ValueError, OSError, RuntimeError):
        return None


def open_latest(uri: str, held, storage_options: dict | None = None) -> "lance.LanceDataset":
    """The latest version of the dataset at ``uri``: ``held`` (an opened version of it, or
    None) checked out at it, or, when none is held or its version cannot be read, the
    dataset opened anew (:func:`open_dataset`)."""
    ds = None if held is None else latest_of(held)
    return open_dataset(uri, storage_options) if ds is None else ds


def options_for(dataset, storage_options: dict | None) -> dict | None:
    """The storage options to reach ``dataset``'s files: ``storage_options`` when given,
    else those a ``LanceDataset`` object was opened with (its index files live in the same
    store)."""
    if storage_options or not hasattr(dataset, "initial_storage_options"):
        return storage_options
    try:
        return dataset.initial_storage_options or None
    except (ValueError, OSError, RuntimeError):
        return None


def take_reader(ds):
    """A handle of its own of ``ds``'s version for a long run of takes of one column (exact
    verification's texts, ``selfjoin/shingles.py``): its metadata cache holds at most
    :data:`TAKE_READER_CACHE_BYTES` and its index cache nothing, where ``ds``'s caches would
    keep the page metadata of every data file the takes read for as long as ``ds`` is kept
    (``ds`` itself when it is not a ``LanceDataset``, or cannot be opened again)."""
    if not isinstance(ds, lance.LanceDataset):
        return ds
    try:
        return lance.dataset(uri_of(ds), version=int(ds.version), storage_options=options_for(ds, None),
                             metadata_cache_size_bytes=TAKE_READER_CACHE_BYTES, index_cache_size_bytes=0)
    except (ValueError, OSError, RuntimeError):
        return ds


def options_key(storage_options) -> Any:
    return None if not storage_options else tuple(sorted((str(k), str(v)) for k, v in storage_options.items()))


def dataset_handle(dataset, storage_options=None):
    """``(uri, LanceDataset)``: a dataset object as given, or the latest version of a URI
    (:func:`open_version`)."""
    handle = open_version(dataset, storage_options)
    return handle.uri, handle.ds


@dataclass(frozen=True)
class DatasetVersion:
    """A dataset as a reader holds it: its URI, the opened version and its number, and the
    storage options that reach its files (they may hold secrets: never in the repr, and
    held nowhere else by a reader)."""

    uri: str
    ds: Any = field(repr=False)
    version: int
    storage_options: dict | None = field(default=None, repr=False)

    @cached_property
    def schema(self) -> pa.Schema:
        """The version's Arrow schema, read on first use (a search of row ids needs none)."""
        return self.ds.schema

    @property
    def options_key(self) -> Any:
        """The storage options as a hashable key: with the URI and version, it names this
        view of the dataset in caches."""
        return options_key(self.storage_options)


def open_version(dataset, storage_options=None) -> DatasetVersion:
    """The latest version of ``dataset`` (a URI, or a ``LanceDataset`` as given) with the
    storage options its files need: those given, else, for a dataset object, the ones it
    was opened with (:func:`options_for`). An opened URI is kept (per absolute URI and
    options); each call checks it for a newer version. The version's ``uri`` is absolute
    (``io/store.py:absolute_uri``): it is what every reader, task and message names."""
    if isinstance(dataset, (str, os.PathLike)):
        key = (absolute_uri(os.fspath(dataset)), options_key(storage_options))
        with _lock:
            held = _datasets.get(key)
        ds = open_latest(key[0], held, storage_options)
        if ds is not held:
            with _lock:
                _datasets.put(key, ds)
    elif is_dataset(dataset):
        ds, storage_options = dataset, options_for(dataset, storage_options)
    else:
        raise DatasetError(f"dataset={dataset!r} must be a path or URI of a Lance dataset (or a LanceDataset)")
    return DatasetVersion(uri_of(ds), ds, int(ds.version), storage_options)


def dataset_at(dataset: str, version: int, storage_options=None):
    """The dataset at ``version``, without asking the store for a newer one: the opened
    handle when it is that version, else a checkout of it (kept, like opened handles).

    A SQL search plans its columns on one version and runs on exactly that version.
    """
    uri = absolute_uri(os.fspath(dataset))
    opts = options_key(storage_options)
    with _lock:
        ds = _datasets.get((uri, opts))
        if ds is not None and int(ds.version) == version:
            return ds
        ds = _pinned.get((uri, opts, version))
    if ds is None:
        ds = open_dataset(uri, storage_options=storage_options, version=version)
        with _lock:
            _pinned.put((uri, opts, version), ds)
    return ds
