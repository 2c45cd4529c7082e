-- Index diagnostics: TEMP table macros over the _lms_* UDFs of
-- lance_minhash_sql/duck/report.py (computation: lance_minhash_sql/report/diagnostics.py).
--
-- sample: query rows drawn uniformly, and the most (query row, row) pairs kept per
-- exact-Jaccard bin; threshold: where the false-positive / false-negative areas, recall
-- and precision are taken (NULL: the index's S-curve threshold (1/b)^(1/r)); seed fixes
-- the random draws. minhash_report and minhash_scurve with the same arguments share one
-- computation per dataset version.

-- One row per metric: parameters, S-curve threshold and areas, empirical recall and
-- precision, bucket-size percentiles, candidates per query, estimator error vs theory.
--   SELECT value FROM minhash_report('corpus.lance', 'text') WHERE metric = 'recall_at_threshold'
CREATE OR REPLACE TEMP MACRO minhash_report(dataset, "column", sample := 2000, threshold := NULL,
                                            seed := 0, storage_options := NULL) AS TABLE
    SELECT unnest(_lms_report(dataset, "column", _lms_number('minhash_report', 'sample', sample), _lms_number('minhash_report', 'threshold', threshold), _lms_number('minhash_report', 'seed', seed),
                              _lms_storage('minhash_report', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection'))),
                  recursive := true);

-- One row per exact-Jaccard bin of width 0.05: sampled pairs, candidates, empirical and
-- theoretical candidate probability, binomial standard error, estimator error.
CREATE OR REPLACE TEMP MACRO minhash_scurve(dataset, "column", sample := 2000, threshold := NULL,
                                            seed := 0, storage_options := NULL) AS TABLE
    SELECT unnest(_lms_scurve(dataset, "column", _lms_number('minhash_scurve', 'sample', sample), _lms_number('minhash_scurve', 'threshold', threshold), _lms_number('minhash_scurve', 'seed', seed),
                              _lms_storage('minhash_scurve', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection'))),
                  recursive := true);

-- The largest buckets (runs of equal band keys in the sorted band rows), largest first,
-- with one member's row id and text.
CREATE OR REPLACE TEMP MACRO minhash_buckets(dataset, "column", top := 10, storage_options := NULL) AS TABLE
    SELECT unnest(_lms_buckets(dataset, "column", _lms_number('minhash_buckets', 'top', top),
                               _lms_storage('minhash_buckets', dataset, to_json(storage_options)::VARCHAR, getvariable('_lms_connection'))),
                  recursive := true);
