-- Kept rows plus removed rows are exactly the corpus.
SELECT *
FROM (SELECT count(*) AS total FROM {{ source('lance', 'corpus') }}) t,
     (SELECT count(*) AS kept FROM {{ ref('deduplicated_corpus') }}) k,
     (SELECT count(*) AS removed FROM {{ ref('dedup_flags') }} WHERE NOT keep) r
WHERE t.total <> k.kept + r.removed
