-- depends_on: {{ ref('corpus_ingest') }}
-- The corpus index after the day's ingest: one row per segment, with the fragments and
-- rows it covers.
SELECT index_name, segment_uuid, fragment_ids, rows, bytes
FROM minhash_indexes('{{ var("corpus") }}')
