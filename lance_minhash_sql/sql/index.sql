-- Index build, listing and search: TEMP table macros over the _lms_* UDFs of
-- lance_minhash_sql/duck/tables.py.

-- Build Lance's MinHash LSH index on a text column (one row: what was built).
-- threshold := chooses num_bands for a target similarity (then num_bands stays NULL);
-- with neither, num_bands is 16.
CREATE OR REPLACE TEMP MACRO minhash_build(dataset, "column", num_hashes := 128, num_bands := NULL,
                                           shingle_size := 3, threshold := NULL, tokenizer := NULL,
                                           "replace" := true) AS TABLE
    SELECT unnest(_lms_build(dataset, "column", num_hashes, num_bands, shingle_size, threshold,
                             to_json(tokenizer)::VARCHAR, "replace"), recursive := true);

-- One row per MinHash index segment of the dataset.
CREATE OR REPLACE TEMP MACRO minhash_indexes(dataset) AS TABLE
    SELECT unnest(_lms_indexes(dataset), recursive := true);

-- Top-k rows by estimated Jaccard: the dataset's own columns with their real types, then
-- _rowid and _distance (= 1 - estimated Jaccard), ordered by (_distance, _rowid).
-- dataset, column, query, k, fast_search and filter must be constants; for a table of
-- queries use minhash_search_ids with LATERAL.
CREATE OR REPLACE TEMP MACRO minhash_search(dataset, "column", query, k := 10, fast_search := false,
                                            "filter" := NULL) AS TABLE
    SELECT * FROM query(_lms_search_plan(dataset, "column", query, k, fast_search, "filter"));

-- Top-k (_rowid, _distance) of a query; a fixed schema, so it works per row:
--   SELECT q.id, s.* FROM queries q, LATERAL minhash_search_ids('corpus.lance', 'text', q.text, 5) s
-- All queries of a statement are answered as one batch.
CREATE OR REPLACE TEMP MACRO minhash_search_ids(dataset, "column", query, k := 10, fast_search := false) AS TABLE
    SELECT unnest(_lms_search_ids(dataset, "column", query, k, fast_search), recursive := true);
