-- depends_on: {{ ref('corpus_index') }}
-- One kept row per cluster of near-duplicates: the longest text (ties: lowest row id).
SELECT _rowid, cluster_id, cluster_size, keep
FROM minhash_dedup('{{ var("corpus") }}', 'text', threshold := {{ var("threshold") }}, keep := 'longest')
