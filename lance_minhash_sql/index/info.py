"""What a dataset's MinHash indexes are: segments, parameters, coverage, sizes."""

from __future__ import annotations

import json
import os

import pyarrow as pa

from lance_minhash_sql.core.records import record_dict
from lance_minhash_sql.index.results import IndexSegment
from lance_minhash_sql.io.handles import options_for
from lance_minhash_sql.io.manifest import minhash_segments, segment_dir
from lance_minhash_sql.io.scan import open_dataset, schema_of, text_field, version_of
from lance_minhash_sql.io.segments import BANDS_FILE, SIGNATURES_FILE, open_segment

__all__ = ["index_segments", "search_target"]


def _dataset(dataset, storage_options=None):
    return dataset if hasattr(dataset, "describe_indices") else open_dataset(dataset, storage_options)


def index_segments(dataset, storage_options=None) -> list[dict]:
    """One dict of :class:`.results.IndexSegment` per MinHash LSH segment (every column), in manifest order."""
    storage_options = options_for(dataset, storage_options)
    ds = _dataset(dataset, storage_options)
    out = []
    for seg in minhash_segments(ds):
        path = segment_dir(ds, seg.uuid)
        files = open_segment(path, storage_options)
        p = files.params
        size = seg.size_bytes or sum(os.path.getsize(os.path.join(path, f)) for f in (SIGNATURES_FILE, BANDS_FILE)
                                     if os.path.exists(os.path.join(path, f)))
        out.append(record_dict(IndexSegment(
            index_name=seg.name, column=seg.column, segment_uuid=seg.uuid, num_hashes=p.num_hashes,
            num_bands=p.num_bands, rows_per_band=p.rows_per_band, shingle_size=p.shingle_size,
            tokenizer=json.dumps(p.tokenizer.to_dict()), fragment_ids=tuple(sorted(seg.fragment_ids)),
            rows=files.num_docs, bytes=size, dataset_version=seg.dataset_version)))
    return out


def search_target(dataset, column: str, storage_options=None) -> tuple[str, int, pa.Schema]:
    """``(uri, version, schema)`` of the dataset's latest version, checking the column:
    what a SQL search plans its result columns on and then runs against."""
    from lance_minhash_sql.io.handles import dataset_handle

    uri, ds = dataset_handle(dataset, storage_options)
    text_field(ds, column, uri)
    return uri, version_of(ds), schema_of(ds)
