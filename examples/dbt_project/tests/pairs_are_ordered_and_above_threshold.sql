-- Each pair once, left < right, its exact Jaccard at or above the threshold.
SELECT * FROM {{ ref('near_duplicate_pairs') }}
WHERE left_rowid >= right_rowid OR jaccard IS NULL OR jaccard < {{ var("threshold") }}
