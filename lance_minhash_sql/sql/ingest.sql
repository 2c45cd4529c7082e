-- The pipeline of a growing corpus: plan an ingest, ingest, clean up old versions. TEMP
-- table macros over the _lms_* UDFs of lance_minhash_sql/duck/ingest.py.

-- One row per live row of batch: keep (true: the corpus takes it), and for a dropped row
-- its twin: the most similar row among the corpus's rows and the batch rows kept before
-- it (batch row id order, or order_by over the batch's columns), twin_in 'corpus' or
-- 'batch', their MinHash similarity and, with verify := 'exact', their exact shingle
-- Jaccard. The corpus's index (its parameters and tokenizer) signs the batch; the batch
-- needs no index. executor := 'ray': the join with the corpus runs as Ray tasks.
CREATE OR REPLACE TEMP MACRO minhash_ingest_plan(corpus, batch, "column", threshold := 0.8, verify := 'estimate',
                                                 order_by := NULL, memory_limit := NULL,
                                                 corpus_storage_options := NULL, batch_storage_options := NULL,
                                                 executor := 'local', ray_address := NULL) AS TABLE
    SELECT unnest(_lms_ingest_plan(corpus, batch, "column", _lms_number('minhash_ingest_plan', 'threshold', threshold), verify, order_by, memory_limit::VARCHAR,
                                   _lms_storage('minhash_ingest_plan', corpus, to_json(corpus_storage_options)::VARCHAR, getvariable('_lms_connection')),
                                   _lms_storage('minhash_ingest_plan', batch, to_json(batch_storage_options)::VARCHAR, getvariable('_lms_connection')),
                                   executor, ray_address::VARCHAR),
                  recursive := true);

-- Append the rows minhash_ingest_plan keeps (every column) to corpus and extend its index
-- over them (a delta segment, or a merge of the small segments), as one new version of
-- corpus: whole or absent. One row: rows_offered, rows_appended, rows_dropped,
-- dataset_version, index_action ('none', 'delta', 'merge'; 'build' when the corpus had
-- no index), seconds.
CREATE OR REPLACE TEMP MACRO minhash_ingest(corpus, batch, "column", threshold := 0.8, verify := 'estimate',
                                            order_by := NULL, memory_limit := NULL,
                                            corpus_storage_options := NULL, batch_storage_options := NULL,
                                            executor := 'local', ray_address := NULL) AS TABLE
    SELECT unnest(_lms_ingest(corpus, batch, "column", _lms_number('minhash_ingest', 'threshold', threshold), verify, order_by, memory_limit::VARCHAR,
                              _lms_storage('minhash_ingest', corpus, to_json(corpus_storage_options)::VARCHAR, getvariable('_lms_connection')),
                              _lms_storage('minhash_ingest', batch, to_json(batch_storage_options)::VARCHAR, getvariable('_lms_connection')),
                              executor, ray_address::VARCHAR),
                  recursive := true);

-- Remove the versions of dataset older than older_than (an INTERVAL, or a text such as
-- '7 days') and the files only they use (replaced index segments included), through
-- Lance's own cleanup; the latest version is never removed. One row: versions_removed,
-- bytes_removed.
CREATE OR REPLACE TEMP MACRO minhash_cleanup(dataset, older_than := INTERVAL '7 days', storage_options := NULL) AS TABLE
    SELECT unnest(_lms_cleanup(dataset, epoch(older_than::INTERVAL),
                               _lms_storage('minhash_cleanup', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection'))),
                  recursive := true);
