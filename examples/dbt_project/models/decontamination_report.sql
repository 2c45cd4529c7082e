-- depends_on: {{ ref('corpus_ingest') }}
-- Decontamination: every row of the evaluation set that has a near-duplicate in the corpus
-- (through the corpus index; verified on the exact shingle Jaccard), with how many corpus
-- rows it matches and its closest one. Evaluation rows not listed are clean.
SELECT j.left_rowid AS eval_rowid,
       any_value(e.text) AS eval_text,
       count(*) AS corpus_matches,
       max(j.jaccard) AS best_jaccard,
       arg_max(j.right_rowid, j.jaccard) AS closest_corpus_rowid
FROM minhash_join('{{ var("eval_set") }}', '{{ var("corpus") }}', 'text',
                  threshold := {{ var("threshold") }}, verify := 'exact') AS j
JOIN {{ source('lance', 'eval_set') }} AS e ON e._rowid = j.left_rowid
GROUP BY j.left_rowid
