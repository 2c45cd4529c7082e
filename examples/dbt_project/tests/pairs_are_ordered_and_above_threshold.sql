-- Each pair once, left < right, both similarities at or above the threshold.
SELECT * FROM {{ ref('near_duplicate_pairs') }}
WHERE left_rowid >= right_rowid OR similarity < {{ var("threshold") }} OR jaccard < {{ var("threshold") }}
