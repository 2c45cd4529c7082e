"""The Arrow schemas of the index report's tables (:mod:`.report`).

Kept apart from the computation so that the SQL layer can declare its UDF return types
without importing the numba engine.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "SUMMARY_SCHEMA",
    "SCURVE_SCHEMA",
    "PAIRS_SCHEMA",
    "BUCKET_SIZES_SCHEMA",
    "LARGEST_BUCKETS_SCHEMA",
    "CANDIDATES_SCHEMA",
]

SUMMARY_SCHEMA = pa.schema([
    pa.field("metric", pa.string(), nullable=False),
    pa.field("value", pa.float64()),
    pa.field("detail", pa.string()),
])
SCURVE_SCHEMA = pa.schema([
    pa.field("similarity_bin", pa.int32(), nullable=False),
    pa.field("similarity_lo", pa.float64(), nullable=False),
    pa.field("similarity_hi", pa.float64(), nullable=False),
    pa.field("population_pairs", pa.int64(), nullable=False),
    pa.field("pairs", pa.int64(), nullable=False),
    pa.field("candidates", pa.int64(), nullable=False),
    pa.field("mean_jaccard", pa.float64()),
    pa.field("empirical_probability", pa.float64()),
    pa.field("theoretical_probability", pa.float64()),
    pa.field("standard_error", pa.float64()),
    pa.field("mean_estimated", pa.float64()),
    pa.field("estimator_rmse", pa.float64()),
    pa.field("theoretical_rmse", pa.float64()),
])
PAIRS_SCHEMA = pa.schema([
    pa.field("similarity_bin", pa.int32(), nullable=False),
    pa.field("query_rowid", pa.uint64(), nullable=False),
    pa.field("other_rowid", pa.uint64(), nullable=False),
    pa.field("jaccard", pa.float64(), nullable=False),
    pa.field("estimated", pa.float64(), nullable=False),
    pa.field("candidate", pa.bool_(), nullable=False),
])
BUCKET_SIZES_SCHEMA = pa.schema([
    pa.field("size", pa.int64(), nullable=False),
    pa.field("buckets", pa.int64(), nullable=False),
])
LARGEST_BUCKETS_SCHEMA = pa.schema([
    pa.field("segment", pa.string(), nullable=False),
    pa.field("band", pa.int32(), nullable=False),
    pa.field("band_key", pa.uint64(), nullable=False),
    pa.field("size", pa.int64(), nullable=False),
    pa.field("sample_rowid", pa.uint64(), nullable=False),
    pa.field("sample_text", pa.string()),
])
CANDIDATES_SCHEMA = pa.schema([
    pa.field("query_rowid", pa.uint64(), nullable=False),
    pa.field("candidates", pa.int64(), nullable=False),
])
