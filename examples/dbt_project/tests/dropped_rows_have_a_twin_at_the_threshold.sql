-- Every dropped batch row names its twin, in the corpus or earlier in the batch, and their
-- exact shingle Jaccard reaches the threshold; a kept row names none.
SELECT *
FROM {{ ref('ingest_plan') }}
WHERE (NOT keep AND (twin_rowid IS NULL OR twin_in NOT IN ('corpus', 'batch') OR jaccard < {{ var("threshold") }}))
   OR (keep AND twin_rowid IS NOT NULL)
