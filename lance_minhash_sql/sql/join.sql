-- The cross-dataset join, as a TEMP table macro over the _lms_join_* UDFs of
-- lance_minhash_sql/duck/cross_join.py. The datasets, columns and parameters must be constants.

-- Every pair of a live left row and a live right row that share a band key under the
-- index of right_dataset's column (right_column, default "column") and whose MinHash
-- similarity reaches threshold; left rows are signed with that index's parameters.
-- Each side's storage options reach only its own dataset. Runs shard by shard on DuckDB's
-- threads; memory_limit (bytes or '1GiB', default 256 MiB) sizes the shards, and bounds the
-- left rows signed in memory. verify := 'exact' (default 'estimate'): candidates down to 4
-- standard deviations of the estimate under threshold, kept iff jaccard (the exact shingle
-- Jaccard) >= threshold (as in minhash_pairs); otherwise jaccard is NULL. exact := true is
-- the older spelling of verify := 'exact'. executor := 'ray': each shard joined by a Ray task.
CREATE OR REPLACE TEMP MACRO minhash_join(left_dataset, right_dataset, "column", threshold := 0.8, exact := false,
                                          right_column := NULL, left_storage_options := NULL,
                                          right_storage_options := NULL, memory_limit := NULL,
                                          verify := 'estimate', executor := 'local',
                                          ray_address := NULL) AS TABLE
    SELECT * FROM query(_lms_join_plan(left_dataset, right_dataset, "column", right_column, _lms_number('minhash_join', 'threshold', threshold), exact,
                                       _lms_storage('minhash_join', left_dataset, to_json(left_storage_options)::VARCHAR, getvariable('_lms_connection')),
                                       _lms_storage('minhash_join', right_dataset, to_json(right_storage_options)::VARCHAR, getvariable('_lms_connection')),
                                       memory_limit::VARCHAR, verify, executor, ray_address::VARCHAR));
