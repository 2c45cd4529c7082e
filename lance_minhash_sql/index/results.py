"""What the index functions return, each described once: records (one row: a build, an
optimize, a prewarm, an index segment) and the Arrow schemas of result tables (search
hits, pairs, clusters, dedup flags).

Kept apart from the computation, like :mod:`..diagnostics.tables`, so that the SQL layer derives
its UDF return types from these (``record_schema``, ``duck/results.py``) without importing
the numba engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lance_minhash_sql.core.records import Int32, UInt32List

__all__ = [
    "BuildResult",
    "OptimizeResult",
    "PrewarmResult",
    "IndexSegment",
    "SEARCH_IDS_SCHEMA",
    "SEARCH_IDS_EXACT_SCHEMA",
    "PAIRS_SCHEMA",
    "PAIRS_EXACT_SCHEMA",
    "CLUSTERS_SCHEMA",
    "DEDUP_SCHEMA",
    "DEDUP_STAR_SCHEMA",
    "JOIN_SCHEMA",
    "ESTIMATE_SCHEMA",
    "INGEST_PLAN_SCHEMA",
    "IngestResult",
    "CleanupResult",
]


@dataclass(frozen=True)
class BuildResult:
    """What ``minhash_build`` returns as one row."""

    index_name: str
    column: str
    num_hashes: Int32
    num_bands: Int32
    rows_per_band: Int32
    shingle_size: Int32
    tokenizer: str  # JSON of the tokenizer options
    segments: Int32
    rows_indexed: int
    rows_without_tokens: int
    seconds: float
    bytes: int
    dataset_version: int
    segment_uuids: tuple[str, ...]
    spilled_bytes: int  # band rows written to temporary files (0: sorted in memory)


@dataclass(frozen=True)
class OptimizeResult:
    """What ``minhash_optimize`` returns as one row."""

    index_name: str
    column: str
    action: str  # "none" (nothing to do), "delta" (a segment for new fragments) or "merge"
    segments_before: Int32
    segments_after: Int32
    merged_segments: Int32  # existing segments rewritten into the new one
    new_fragments: UInt32List  # fragments indexed for the first time
    rows_indexed: int  # docs in the new segment
    rows_added: int  # of which new rows (signed now)
    rows_dropped: int  # stored rows dropped: deleted, or dropped by a compaction
    rows_without_tokens: int  # new rows without a signature (NULL, no tokens)
    segment_uuid: str | None
    seconds: float
    bytes: int
    dataset_version: int


@dataclass(frozen=True)
class PrewarmResult:
    """What ``minhash_prewarm`` returns as one row."""

    column: str
    segments: Int32
    bytes_loaded: int  # added to the cache by this call
    cache_bytes: int  # the cache's usage afterwards
    cache_capacity: int
    signatures_loaded: int  # docs (row id + signature) now cached, of
    signatures_total: int
    band_pages_loaded: int  # band pages now cached, of
    band_pages_total: int
    complete: bool  # every segment whole in the cache
    seconds: float


@dataclass(frozen=True)
class IndexSegment:
    """One MinHash LSH segment of a dataset: what ``minhash_indexes`` returns per row."""

    index_name: str
    column: str
    segment_uuid: str
    num_hashes: Int32
    num_bands: Int32
    rows_per_band: Int32
    shingle_size: Int32
    tokenizer: str  # JSON of the tokenizer options
    fragment_ids: UInt32List
    rows: int
    bytes: int
    dataset_version: int


SEARCH_IDS_SCHEMA = pa.schema([
    pa.field("query_index", pa.int64(), nullable=False),
    pa.field("_rowid", pa.uint64(), nullable=False),
    pa.field("_distance", pa.float32(), nullable=False),
])
# with exact := true: the exact shingle Jaccard (NaN when the query or the row has no shingles)
SEARCH_IDS_EXACT_SCHEMA = SEARCH_IDS_SCHEMA.append(pa.field("_jaccard", pa.float64()))
PAIRS_SCHEMA = pa.schema([
    pa.field("left_rowid", pa.uint64(), nullable=False),
    pa.field("right_rowid", pa.uint64(), nullable=False),
    pa.field("similarity", pa.float64(), nullable=False),
])
PAIRS_EXACT_SCHEMA = PAIRS_SCHEMA.append(pa.field("jaccard", pa.float64(), nullable=False))
# a row of a cluster of two or more. clustering='components': a linked component, cluster_id its
# smallest row id; clustering='star': one kept row and the rows dropped for it (selfjoin/star.py,
# star_members), cluster_id the kept row's id, cluster_size 1 + the rows dropped for it
CLUSTERS_SCHEMA = pa.schema([
    pa.field("_rowid", pa.uint64(), nullable=False),
    pa.field("cluster_id", pa.uint64(), nullable=False),
    pa.field("cluster_size", pa.int64(), nullable=False),
])
# the clusters of CLUSTERS_SCHEMA (the same clusters as minhash_clusters with the same arguments
# and keep='first'), each with exactly one keep = true
DEDUP_SCHEMA = CLUSTERS_SCHEMA.append(pa.field("keep", pa.bool_(), nullable=False))
# star clustering (selfjoin/star.py): a dropped row's twin, the kept row it duplicates (its
# cluster_id), their MinHash similarity and (verify='exact') their exact Jaccard; NULL for a kept row
DEDUP_STAR_SCHEMA = DEDUP_SCHEMA.append(pa.field("twin_rowid", pa.uint64())).append(
    pa.field("twin_similarity", pa.float64())).append(pa.field("twin_jaccard", pa.float64()))

# minhash_join: a left row and a right row, their MinHash similarity, and (exact) their Jaccard
JOIN_SCHEMA = pa.schema([
    pa.field("left_rowid", pa.uint64(), nullable=False),
    pa.field("right_rowid", pa.uint64(), nullable=False),
    pa.field("similarity", pa.float64(), nullable=False),
    pa.field("jaccard", pa.float64()),
])

# the ingest plan (selfjoin/ingest.py): one row per live batch row, in row id order; the
# twin's columns are NULL for a kept row, jaccard also without exact verification
INGEST_PLAN_SCHEMA = pa.schema([
    pa.field("_rowid", pa.uint64(), nullable=False),
    pa.field("keep", pa.bool_(), nullable=False),
    pa.field("twin_rowid", pa.uint64()),
    pa.field("twin_in", pa.string()),
    pa.field("similarity", pa.float64()),
    pa.field("jaccard", pa.float64()),
])


@dataclass(frozen=True)
class IngestResult:
    """What ``minhash_ingest`` returns as one row."""

    rows_offered: int  # the batch's live rows
    rows_appended: int  # the plan's kept rows, appended to the corpus
    rows_dropped: int  # the plan's dropped rows
    dataset_version: int  # the corpus's version after the ingest (the version read when nothing changed)
    index_action: str  # "none", "delta", "merge", or "build" (the corpus had no index)
    seconds: float


@dataclass(frozen=True)
class CleanupResult:
    """What ``minhash_cleanup`` returns as one row."""

    versions_removed: int
    bytes_removed: int


# the dry run of the self-join (diagnostics/estimate.py): one row per threshold
ESTIMATE_SCHEMA = pa.schema([
    pa.field("threshold", pa.float64(), nullable=False),
    pa.field("verify", pa.string(), nullable=False),
    pa.field("live_rows", pa.int64(), nullable=False),
    pa.field("sampled_rows", pa.int64(), nullable=False),
    pa.field("duplicate_rows", pa.int64(), nullable=False),
    pa.field("duplicate_fraction", pa.float64(), nullable=False),
    pa.field("duplicate_fraction_low", pa.float64(), nullable=False),
    pa.field("duplicate_fraction_high", pa.float64(), nullable=False),
    pa.field("rows_dropped_components", pa.float64(), nullable=False),
    pa.field("rows_dropped_components_low", pa.float64(), nullable=False),
    pa.field("rows_dropped_components_high", pa.float64(), nullable=False),
    pa.field("rows_dropped_star", pa.float64(), nullable=False),
    pa.field("rows_dropped_star_low", pa.float64(), nullable=False),
    pa.field("rows_dropped_star_high", pa.float64(), nullable=False),
    pa.field("pairs", pa.float64(), nullable=False),
    pa.field("pairs_low", pa.float64(), nullable=False),
    pa.field("pairs_high", pa.float64(), nullable=False),
    pa.field("seconds", pa.float64(), nullable=False),
    pa.field("peak_memory", pa.int64(), nullable=False),
    pa.field("temp_disk", pa.int64(), nullable=False),
    pa.field("clusters_temp_disk", pa.int64(), nullable=False),
    pa.field("clusters_seconds", pa.float64(), nullable=False),
    pa.field("clusters_peak_memory", pa.int64(), nullable=False),
    pa.field("dedup_seconds", pa.float64(), nullable=False),
    pa.field("dedup_peak_memory", pa.int64(), nullable=False),
    pa.field("busy_factor", pa.float64(), nullable=False),
    pa.field("sample_seconds", pa.float64(), nullable=False),
])
