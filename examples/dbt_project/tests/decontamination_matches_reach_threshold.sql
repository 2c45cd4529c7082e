-- Every reported evaluation row has a corpus match at or above the threshold.
SELECT * FROM {{ ref('decontamination_report') }}
WHERE corpus_matches < 1 OR best_jaccard < {{ var("threshold") }}
