-- The corpus without its near-duplicates: every row except the clustered rows not kept.
SELECT c.*
FROM {{ source('lance', 'corpus') }} AS c
ANTI JOIN (SELECT _rowid FROM {{ ref('dedup_flags') }} WHERE NOT keep) AS removed USING (_rowid)
