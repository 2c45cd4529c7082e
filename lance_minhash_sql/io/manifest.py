"""MinHash LSH index segments in the dataset manifest (``docs/index-format.md``), and the
fragment-reuse index of a deferred compaction remap beside them (``io/rowids.py``).

A segment is registered as a ``lance.dataset.Index`` whose ``index_details`` is
``(TYPE_URL, details protobuf)``; its ``fragment_ids`` bitmap is authoritative (Lance does
not recompute MinHash coverage from the files). Commits are one ``CreateIndex``
transaction against the version the build read, so a replace is atomic: the old
segments and the new ones are swapped in a single manifest version, or nothing changes.
"""

from __future__ import annotations

import os
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

import lance
from lance.commit import CommitConflictError
from lance.dataset import Index, IndexFile, LanceOperation

from lance_minhash_sql.core.errors import (DatasetError, IndexNotFoundError, ParameterMismatchError,
                                           UnsupportedIndexError)
from lance_minhash_sql.core.params import INDEX_VERSION, MinHashParams
from lance_minhash_sql.io.details import TYPE_URL, encode_details
from lance_minhash_sql.io.scan import row_count
from lance_minhash_sql.io.segments import BANDS_FILE, SIGNATURES_FILE, open_segment
from lance_minhash_sql.io.store import is_remote, make_dir

__all__ = ["SegmentInfo", "NewSegment", "ColumnIndex", "column_index", "missing_index", "FragReuse", "frag_reuse",
           "FRAG_REUSE_NAME", "FRAG_REUSE_TYPE_URL",
           "minhash_segments", "segment_dir", "new_segment", "commit_segments",
           "default_index_name", "IndexEntry", "is_lance_dataset", "index_entries", "referenced_index_uuids",
           "fragment_ids", "commit_replacing", "check_same_params"]


@dataclass(frozen=True)
class SegmentInfo:
    """A committed MinHash segment as the manifest records it."""

    uuid: str
    name: str
    column: str
    field_id: int
    fragment_ids: frozenset
    dataset_version: int
    index_version: int
    size_bytes: int
    # the index's details as Lance parses them from the manifest (num_hashes, num_bands,
    # shingle_size, tokenizer options, signature_version); None if Lance gives none
    details: dict[str, Any] | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class NewSegment:
    """A segment written to ``_indices/<uuid>/`` and not yet committed."""

    uuid: str
    path: str
    fragment_ids: frozenset
    params: MinHashParams
    # file name -> size in bytes, as the file writers report it once closed (object
    # stores have no cheap stat; the writer knows the size it wrote)
    sizes: dict = field(default_factory=dict, compare=False)


def default_index_name(column: str) -> str:
    return f"{column}_idx"


def minhash_segments(ds: "lance.LanceDataset", column: str | None = None) -> list[SegmentInfo]:
    """Every MinHash LSH segment of the dataset (of one column if given), in manifest order."""
    return _segments(ds.describe_indices(), column)


def _segments(described: list, column: str | None) -> list[SegmentInfo]:
    """:func:`minhash_segments` of the manifest's indexes as ``describe_indices()`` lists them."""
    out: list[SegmentInfo] = []
    for desc in described:
        if desc.type_url != TYPE_URL:
            continue
        col = desc.field_names[0] if desc.field_names else ""
        if column is not None and col != column:
            continue
        for seg in desc.segments:
            out.append(SegmentInfo(
                uuid=str(seg.uuid), name=desc.name, column=col, field_id=int(desc.fields[0]),
                fragment_ids=frozenset(int(f) for f in seg.fragment_ids),
                dataset_version=int(seg.dataset_version_at_last_update),
                index_version=int(seg.index_version), size_bytes=int(seg.size_bytes or 0),
                details=getattr(desc, "details", None) or None))
    return out


FRAG_REUSE_NAME = "__lance_frag_reuse"
FRAG_REUSE_TYPE_URL = "/lance.table.FragmentReuseIndexDetails"


@dataclass(frozen=True)
class FragReuse:
    """The fragment-reuse index of a dataset version (``io/rowids.py``): its uuid changes
    with every round."""

    uuid: str
    dataset_version: int  # the version of its latest round


def frag_reuse(ds: "lance.LanceDataset") -> FragReuse | None:
    """The dataset version's fragment-reuse index, or None (no deferred remap pending)."""
    return _frag_reuse(ds.describe_indices())


def _frag_reuse(described: list) -> FragReuse | None:
    """:func:`frag_reuse` of the manifest's indexes as ``describe_indices()`` lists them."""
    for desc in described:
        if desc.type_url == FRAG_REUSE_TYPE_URL or desc.name == FRAG_REUSE_NAME:
            seg = desc.segments[0]
            return FragReuse(str(seg.uuid), int(seg.dataset_version_at_last_update))
    return None


def segment_dir(ds: "lance.LanceDataset", seg_uuid: str) -> str:
    return os.path.join(ds.uri, "_indices", seg_uuid)


@dataclass(frozen=True)
class ColumnIndex:
    """What a dataset version records of one column's MinHash LSH index: its segments in
    manifest order (at least one), each segment's folder, and the fragment-reuse index of a
    deferred compaction remap (None when none is pending)."""

    segments: tuple[SegmentInfo, ...]
    dirs: tuple[str, ...]
    reuse: FragReuse | None


def column_index(ds: "lance.LanceDataset", column: str, uri: str = "") -> ColumnIndex:
    """The column's index as the manifest records it (its list of indexes read once). A
    column without segments is refused (:func:`missing_index`), and so is a segment of
    another index version than this package reads."""
    described = ds.describe_indices()
    segments = tuple(_segments(described, column))
    if not segments:
        raise missing_index(ds, uri or ds.uri, column)
    for info in segments:
        if info.index_version != INDEX_VERSION:
            raise UnsupportedIndexError(
                f"segment {info.uuid} of the MinHash LSH index on {column!r} has index_version "
                f"{info.index_version}, but this package reads version {INDEX_VERSION} (pylance 14.0.x); "
                f"rebuild it with minhash_build('{uri}', '{column}')")
    return ColumnIndex(segments, tuple(segment_dir(ds, s.uuid) for s in segments), _frag_reuse(described))


def missing_index(ds, uri: str, column: str, purpose: str = "") -> Exception:
    """The error for a column without a MinHash index: build one, or, when the dataset has
    no rows (a build would refuse it), add rows first."""
    if row_count(ds) == 0:
        return DatasetError(f"dataset {uri!r} has no rows, so column {column!r} has no MinHash LSH index "
                            f"{purpose or 'to answer from'} and nothing to index: add rows first, then build the index "
                            f"with SELECT * FROM minhash_build('{uri}', '{column}')")
    return IndexNotFoundError(
        f"column {column!r} of dataset {uri!r} has no MinHash LSH index{' ' + purpose if purpose else ''}; "
        f"build one with SELECT * FROM minhash_build('{uri}', '{column}') (or Lance's "
        f"create_scalar_index('{column}', 'MINHASHLSH'))")


def new_segment(ds: "lance.LanceDataset", fragment_ids, params: MinHashParams,
                seg_uuid: str | None = None) -> NewSegment:
    """A fresh segment folder under ``_indices/`` (invisible to readers until committed);
    ``seg_uuid`` names it (default: a new random uuid)."""
    seg_uuid = str(uuidlib.uuid4()) if seg_uuid is None else str(uuidlib.UUID(seg_uuid))
    path = segment_dir(ds, seg_uuid)
    make_dir(path)
    return NewSegment(seg_uuid, path, frozenset(int(f) for f in fragment_ids), params)


def segment_file_size(seg: NewSegment, name: str) -> int:
    """Size of a written segment file: what its writer reported, else (a local file) a stat."""
    if name in seg.sizes:
        return int(seg.sizes[name])
    if is_remote(seg.path):
        raise DatasetError(f"segment file {name} of {seg.uuid} has no recorded size; write it with the segment writers")
    return os.path.getsize(os.path.join(seg.path, name))


def _index(seg_uuid: str, name: str, field_id: int, version: int, fragment_ids, params: MinHashParams,
           files: list[IndexFile] | None) -> Index:
    return Index(uuid=seg_uuid, name=name, fields=[field_id], dataset_version=version,
                 fragment_ids=set(fragment_ids), index_version=INDEX_VERSION, files=files,
                 index_details=(TYPE_URL, encode_details(params)))


def check_same_params(ds: "lance.LanceDataset", name: str, column: str, new: list[NewSegment],
                      removed: list[SegmentInfo] = (), storage_options: dict | None = None) -> None:
    """Refuse a commit after which the index's segments would not share identical parsed
    parameters (the new segments among themselves, and against the segments it keeps)."""
    gone = {s.uuid for s in removed}
    kept = [s for s in minhash_segments(ds, column) if s.name == name and s.uuid not in gone]
    ref = [(f"segment {s.uuid} (already in the index)",
            open_segment(segment_dir(ds, s.uuid), storage_options).params) for s in kept[:1]]
    ref += [(f"new segment {s.uuid}", s.params) for s in new[:1]] if not ref else []
    if not ref:
        return
    what, params = ref[0]
    for seg in new:
        diff = seg.params.differences(params)
        if diff:
            raise ParameterMismatchError(
                f"cannot commit new segment {seg.uuid} to the MinHash LSH index {name!r} on {column!r} of "
                f"{ds.uri!r}: its parameters differ from {what}: {'; '.join(diff)}. Rule: all segments of "
                "a MinHash LSH index must share identical parameters (Lance refuses such an index at commit "
                "and query time). Fix: write the segment with the index's own parameters (minhash_optimize "
                f"does), or rebuild the whole index with minhash_build('{ds.uri}', '{column}', replace := true)")


def commit_segments(ds: "lance.LanceDataset", name: str, column: str, new: list[NewSegment],
                    removed: list[SegmentInfo] = (), removed_params: MinHashParams | None = None,
                    storage_options: dict | None = None, detached_as: int | None = None) -> "lance.LanceDataset":
    """Register ``new`` (and unregister ``removed``) in one commit on top of ``ds.version``;
    ``detached_as``: as a detached version, outside the dataset's history, that will be
    published as version ``detached_as`` (``io/append.py``), the version the new segments record."""
    field = ds.lance_schema.field(column)
    if field is None:
        raise DatasetError(f"column {column!r} is not in dataset {ds.uri!r}")
    field_id = field.id()
    check_same_params(ds, name, column, new, removed, storage_options)
    new_indices = []
    for seg in new:
        files = [IndexFile(path=f, size_bytes=segment_file_size(seg, f)) for f in (SIGNATURES_FILE, BANDS_FILE)]
        made_at = ds.version if detached_as is None else detached_as
        new_indices.append(_index(seg.uuid, name, field_id, made_at, seg.fragment_ids, seg.params, files))
    old = [_index(s.uuid, s.name, s.field_id, s.dataset_version, s.fragment_ids,
                  removed_params or new[0].params, None) for s in removed]
    op = LanceOperation.CreateIndex(new_indices=new_indices, removed_indices=old)
    return lance.LanceDataset.commit(ds.uri, op, read_version=ds.version, storage_options=storage_options,
                                     detached=detached_as is not None)


# --------------------------------------------------------------------------- used by the build


@dataclass(frozen=True)
class IndexEntry:
    """Any index of the dataset (of any type), as ``describe_indices`` reports it."""

    name: str
    type_url: str
    index_type: str
    columns: tuple
    segment_uuids: tuple


def is_lance_dataset(obj) -> bool:
    return isinstance(obj, lance.LanceDataset)


def index_entries(ds: "lance.LanceDataset") -> list[IndexEntry]:
    """Every index of the dataset's manifest: name, type, columns, segment uuids."""
    return [IndexEntry(name=d.name, type_url=d.type_url, index_type=str(d.index_type),
                       columns=tuple(d.field_names or ()),
                       segment_uuids=tuple(str(s.uuid) for s in d.segments))
            for d in ds.describe_indices()]


def referenced_index_uuids(uri: str, since_version: int | None = None,
                           storage_options: dict | None = None) -> set[str]:
    """Index segment uuids (all types) referenced by the latest manifest of ``uri``, and by
    every version after ``since_version`` when given: what a cleanup must never delete."""
    latest = lance.dataset(uri, storage_options=storage_options)
    out = {u for e in index_entries(latest) for u in e.segment_uuids}
    if since_version is not None:
        for v in latest.versions():
            version = int(v["version"])
            if since_version < version < latest.version:
                old = lance.dataset(uri, version=version, storage_options=storage_options)
                out.update(u for e in index_entries(old) for u in e.segment_uuids)
    return out


def fragment_ids(ds: "lance.LanceDataset") -> list[int]:
    """Ids of every fragment of the dataset version ``ds`` is at."""
    return [int(f.fragment_id) for f in ds.get_fragments()]


def commit_replacing(ds: "lance.LanceDataset", name: str, column: str, new: list[NewSegment],
                     removed: list[SegmentInfo] = (), storage_options: dict | None = None,
                     detached_as: int | None = None) -> "lance.LanceDataset":
    """:func:`commit_segments`, with a conflicting concurrent commit as a :class:`DatasetError`."""
    try:
        return commit_segments(ds, name, column, new, removed=removed, storage_options=storage_options,
                               detached_as=detached_as)
    except CommitConflictError as exc:
        msg = str(exc).split(", /")[0]
        raise DatasetError(
            f"cannot commit the new index on {column!r} of {ds.uri!r}: another commit since version "
            f"{ds.version} conflicts with it ({msg}); nothing was changed: rebuild on the current version"
        ) from None
