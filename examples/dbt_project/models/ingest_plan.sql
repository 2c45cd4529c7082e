-- The day's decisions, before anything is written: for each row of the new batch, whether
-- the corpus takes it (no near-duplicate in the corpus, nor among the batch rows kept
-- before it), and for a dropped row its twin, verified on the exact shingle Jaccard.
SELECT p._rowid, p.keep, p.twin_rowid, p.twin_in, p.similarity, p.jaccard, b.id
FROM minhash_ingest_plan('{{ var("corpus") }}', '{{ var("new_batch") }}', 'text',
                         threshold := {{ var("threshold") }}, verify := 'exact') AS p
JOIN {{ source('lance', 'new_batch') }} AS b USING (_rowid)
