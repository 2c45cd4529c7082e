-- Index lifecycle: optimize and prewarm. TEMP table macros over the _lms_* UDFs of
-- lance_minhash_sql/duck/lifecycle.py.

-- Bring the MinHash index of a column up to date, as Lance's optimize_indices() does
-- (one row: what was added or merged). merge := 0 adds a delta segment for the fragments
-- no segment covers; N (default 1) rewrites the newest N segments with those rows into
-- one segment, from the stored signatures; 'all' every segment; a list of segment uuids
-- (from minhash_indexes) a chosen group. New rows are signed with the index's parameters.
CREATE OR REPLACE TEMP MACRO minhash_optimize(dataset, "column", "merge" := 1, storage_options := NULL) AS TABLE
    SELECT unnest(_lms_optimize(dataset, "column", to_json("merge")::VARCHAR,
                                _lms_storage('minhash_optimize', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection'))),
                  recursive := true);

-- Load the index of a column into the process cache (signatures first, then band pages)
-- up to the cache's capacity; cache_bytes := sets the capacity first (bytes or '512MiB').
CREATE OR REPLACE TEMP MACRO minhash_prewarm(dataset, "column", cache_bytes := NULL, storage_options := NULL) AS TABLE
    SELECT unnest(_lms_prewarm(dataset, "column", cache_bytes::VARCHAR,
                               _lms_storage('minhash_prewarm', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection'))),
                  recursive := true);
