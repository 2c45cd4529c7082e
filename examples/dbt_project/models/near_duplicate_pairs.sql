-- depends_on: {{ ref('corpus_index') }}
-- Every pair of near-duplicates, verified on the full signatures and then on the exact
-- shingle Jaccard.
SELECT left_rowid, right_rowid, similarity, jaccard
FROM minhash_pairs('{{ var("corpus") }}', 'text', threshold := {{ var("threshold") }}, verify := 'exact')
