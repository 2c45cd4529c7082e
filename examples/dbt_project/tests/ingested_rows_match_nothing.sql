-- Checked another way, by threshold search: no ingested row has a corpus row, or an earlier
-- row of the batch, at or above the threshold.
SELECT b._rowid, 'corpus' AS matched_in, s._rowid AS match
FROM {{ ref('ingest_batch') }} AS b,
     LATERAL minhash_search_ids('{{ var("corpus") }}', 'text', b.text, k := NULL, threshold := {{ var("threshold") }}) AS s
UNION ALL
SELECT b._rowid, 'batch', s._rowid
FROM {{ ref('ingest_batch') }} AS b,
     LATERAL minhash_search_ids('{{ var("new_batch") }}', 'text', b.text, k := NULL, threshold := {{ var("threshold") }}) AS s
WHERE s._rowid < b._rowid
