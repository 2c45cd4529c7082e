-- Every evaluation row reported as contaminated has a corpus match at or above the threshold.
SELECT * FROM {{ ref('decontamination_report') }} WHERE best_jaccard < {{ var("threshold") }}
