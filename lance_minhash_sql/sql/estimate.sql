-- The dry run of the self-join: TEMP table macro over the _lms_estimate UDF of
-- lance_minhash_sql/duck/estimate.py (computation: lance_minhash_sql/diagnostics/estimate.py).

-- One row per threshold: from sample_rows live rows drawn uniformly (seed fixes the draw),
-- each searched against the index with its own hit removed, the share of rows with a
-- near-duplicate (what minhash_pairs would report under verify) with a 95% interval, the
-- rows a dedup would drop (components and star) and the pairs, each with a 95% interval,
-- and the projected seconds, peak memory (bytes) and temporary disk (bytes) of the full
-- minhash_pairs at memory_limit (bytes or '1GiB', default 256 MiB). It never runs the
-- self-join: its time grows with sample_rows, not with the dataset.
--   SELECT threshold, duplicate_fraction, rows_dropped_components FROM minhash_estimate('corpus.lance', 'text')
CREATE OR REPLACE TEMP MACRO minhash_estimate(dataset, "column", thresholds := [0.7, 0.8, 0.9], sample_rows := 2000,
                                              verify := 'estimate', seed := 0, memory_limit := NULL,
                                              storage_options := NULL) AS TABLE
    SELECT unnest(_lms_estimate(dataset, "column", to_json(thresholds)::VARCHAR, _lms_number('minhash_estimate', 'sample_rows', sample_rows), verify, _lms_number('minhash_estimate', 'seed', seed),
                                _lms_storage('minhash_estimate', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection')),
                                memory_limit::VARCHAR),
                  recursive := true);
