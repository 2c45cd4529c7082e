-- depends_on: {{ ref('corpus_index') }}
-- Every pair of near-duplicates by the exact shingle Jaccard: candidates taken down to 4
-- standard deviations of the MinHash estimate under the threshold, kept when their
-- jaccard reaches it.
SELECT left_rowid, right_rowid, similarity, jaccard
FROM minhash_pairs('{{ var("corpus") }}', 'text', threshold := {{ var("threshold") }}, verify := 'exact')
