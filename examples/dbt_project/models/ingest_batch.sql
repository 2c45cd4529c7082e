-- depends_on: {{ ref('corpus_index') }}
-- depends_on: {{ ref('new_batch_index') }}
-- Ingestion dedup: the rows of the new batch to append to the corpus, i.e. those that match
-- no corpus row and are not a near-duplicate of an earlier row (lower row id) of the batch.
SELECT b.*
FROM {{ source('lance', 'new_batch') }} AS b
ANTI JOIN (
    SELECT left_rowid AS _rowid
    FROM minhash_join('{{ var("new_batch") }}', '{{ var("corpus") }}', 'text', threshold := {{ var("threshold") }})
    UNION
    SELECT right_rowid AS _rowid  -- the later row of each pair (left_rowid < right_rowid)
    FROM minhash_pairs('{{ var("new_batch") }}', 'text', threshold := {{ var("threshold") }})
) AS dropped USING (_rowid)
