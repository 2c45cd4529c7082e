"""datatrove's MinhashDedup stages on parquet files, for benchmarks/quality.py --datatrove.

Runs in datatrove's own virtual environment (quality.py creates it and starts this file
with that environment's python), never in the package's:

    python datatrove_minhash.py PARQUET_DIR WORK_DIR --tasks 2 --workers 2

Stages: MinhashDedupSignature (one task per parquet file, its rank = the file's place in
sorted order), MinhashDedupBuckets (one task per band), MinhashDedupCluster
(save_cluster_id); 3-word shingles, 16 bands x 8 rows = 128 hashes, datatrove's default
text normalisation and English word tokenizer. The result is WORK_DIR/remove_ids:
``{rank:06d}.remove`` (the documents each rank drops) and ``{rank:06d}.clusters``
((document, cluster) uint32 pairs of every clustered document), document = its index in
its rank's file.
"""

from __future__ import annotations

import argparse
import os

from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import ParquetReader

BANDS, ROWS, SHINGLE = 16, 8, 3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("parquet_dir")
    ap.add_argument("work_dir")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    config = MinhashConfig(n_grams=SHINGLE, num_buckets=BANDS, hashes_per_bucket=ROWS)
    sigs, buckets, out = (os.path.join(a.work_dir, d) for d in ("signatures", "buckets", "remove_ids"))
    logs = os.path.join(a.work_dir, "logs")
    LocalPipelineExecutor(
        pipeline=[ParquetReader(a.parquet_dir, text_key="text", id_key="id"),
                  MinhashDedupSignature(output_folder=sigs, config=config, language="en")],
        tasks=a.tasks, workers=a.workers, logging_dir=f"{logs}/signatures",
    ).run()
    LocalPipelineExecutor(
        pipeline=[MinhashDedupBuckets(input_folder=sigs, output_folder=buckets, config=config)],
        tasks=BANDS, workers=a.workers, logging_dir=f"{logs}/buckets",
    ).run()
    LocalPipelineExecutor(
        pipeline=[MinhashDedupCluster(input_folder=buckets, output_folder=out, config=config, save_cluster_id=True)],
        tasks=1, logging_dir=f"{logs}/clusters",
    ).run()


if __name__ == "__main__":
    main()
