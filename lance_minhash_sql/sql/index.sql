-- Index build, listing and search: TEMP table macros over the _lms_* UDFs of
-- lance_minhash_sql/duck/tables.py.
--
-- storage_options (every dataset-taking macro, here and in the other files): Lance's
-- object-store options for an s3://, gs://, az://... dataset, as a MAP(VARCHAR, VARCHAR),
-- a STRUCT or JSON object text, e.g. MAP {'aws_region': 'us-east-1'}. NULL: for s3:// the
-- DuckDB S3 secret whose scope matches the dataset (CREATE SECRET ... TYPE s3), else none.
-- _lms_storage (lance_minhash_sql/duck/storage.py) resolves it once per statement into a
-- token that the working UDF takes instead of the values.

-- Build Lance's MinHash LSH index on a text column (one row: what was built).
-- threshold := chooses num_bands for a target similarity (then num_bands stays NULL);
-- with neither, num_bands is 16.
CREATE OR REPLACE TEMP MACRO minhash_build(dataset, "column", num_hashes := 128, num_bands := NULL,
                                           shingle_size := 3, threshold := NULL, tokenizer := NULL,
                                           "replace" := true, storage_options := NULL,
                                           memory_limit := NULL, executor := 'local',
                                           ray_address := NULL) AS TABLE
    SELECT unnest(_lms_build(dataset, "column", _lms_number('minhash_build', 'num_hashes', num_hashes), _lms_number('minhash_build', 'num_bands', num_bands), _lms_number('minhash_build', 'shingle_size', shingle_size), _lms_number('minhash_build', 'threshold', threshold),
                             to_json(tokenizer)::VARCHAR, "replace",
                             _lms_storage('minhash_build', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection')),
                             memory_limit::VARCHAR, executor, ray_address::VARCHAR),
                  recursive := true);

-- The rows of a Lance dataset's current version with their _rowid, the row ids every other
-- function returns (join them by _rowid): every column, or the list columns := ['id', 'text'].
-- Read fragment by fragment, one call each.
CREATE OR REPLACE TEMP MACRO minhash_rows(dataset, columns := NULL, storage_options := NULL) AS TABLE
    SELECT * FROM query(_lms_rows_plan(dataset, to_json(columns)::VARCHAR, to_json(storage_options)::VARCHAR,
                                       getvariable('_lms_connection')));

-- One row per MinHash index segment of the dataset.
CREATE OR REPLACE TEMP MACRO minhash_indexes(dataset, storage_options := NULL) AS TABLE
    SELECT unnest(_lms_indexes(dataset, _lms_storage('minhash_indexes', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection'))),
                  recursive := true);

-- Top-k rows by estimated Jaccard: the dataset's own columns with their real types, then
-- _rowid and _distance (= 1 - estimated Jaccard), ordered by (_distance, _rowid).
-- threshold := keeps only the rows at least that similar (1 - _distance >= threshold), and
-- k := NULL then means no limit. verify := 'exact' adds _jaccard (the exact shingle Jaccard)
-- and, with a threshold, keeps the rows whose estimate reaches the threshold minus 4
-- standard deviations of the estimate and whose _jaccard reaches the threshold; exact :=
-- true is its older spelling. dataset, column, query, k, threshold, verify, fast_search
-- and filter must be constants; for a table of queries use minhash_search_ids with LATERAL.
CREATE OR REPLACE TEMP MACRO minhash_search(dataset, "column", query, k := 10, threshold := NULL, exact := false,
                                            fast_search := false, "filter" := NULL, storage_options := NULL,
                                            verify := 'estimate') AS TABLE
    SELECT * FROM query(_lms_search_plan(dataset, "column", query, _lms_number('minhash_search', 'k', k), _lms_number('minhash_search', 'threshold', threshold), exact, verify, fast_search, "filter",
                                         to_json(storage_options)::VARCHAR, getvariable('_lms_connection')));

-- Top-k (_rowid, _distance, _jaccard) of a query; a fixed schema, so it works per row:
--   SELECT q.id, s.* FROM queries q, LATERAL minhash_search_ids('corpus.lance', 'text', q.text, 5) s
-- threshold, k := NULL and verify as for minhash_search; _jaccard is NULL unless
-- verify := 'exact' (exact := true, its older spelling).
-- All queries of a statement are answered as one batch; a NULL query gives no rows (for
-- minhash_search too), the other queries their answers.
CREATE OR REPLACE TEMP MACRO minhash_search_ids(dataset, "column", query, k := 10, threshold := NULL,
                                                exact := false, fast_search := false,
                                                storage_options := NULL, verify := 'estimate') AS TABLE
    SELECT unnest(_lms_search_ids(dataset, "column", query, _lms_number('minhash_search_ids', 'k', k), _lms_number('minhash_search_ids', 'threshold', threshold), exact, fast_search,
                                  _lms_storage('minhash_search_ids', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection')),
                                  verify),
                  recursive := true);
