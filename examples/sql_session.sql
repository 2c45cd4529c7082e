-- A DuckDB SQL session over the demo corpus (`lance-minhash demo` writes demo/corpus.lance):
--     lance-minhash sql examples/sql_session.sql
-- Every statement runs with the package's functions installed.

-- the index Lance and this package share
SELECT * FROM minhash_build('demo/corpus.lance', 'text', threshold := 0.8);
SELECT segment_uuid, "rows", bytes FROM minhash_indexes('demo/corpus.lance');

-- nearest texts to document 0 without its last word, with the dataset's own columns
SELECT id, edit, left(text, 40) AS text, _distance
FROM minhash_search('demo/corpus.lance', 'text', 
    'Ege uu, mya axi ak ak. Iuwe. Joko izove iml low ilo ad ou sev sijaf ak. Ak en yore ras erop oseuuij, eq oz di calsaz sx gh qc oyxa ro fq bk yupumire adiq.', 5);

-- near-duplicate pairs, checked with the exact shingle Jaccard
SELECT count(*) AS pairs, round(min(jaccard), 3) AS min_jaccard, round(avg(similarity - jaccard), 4) AS mean_error
FROM minhash_pairs('demo/corpus.lance', 'text', threshold := 0.8, verify := 'exact');

-- cluster sizes, and what a dedup keeping the longest text removes
SELECT cluster_size, count(DISTINCT cluster_id) AS clusters
FROM minhash_clusters('demo/corpus.lance', 'text') GROUP BY cluster_size ORDER BY cluster_size LIMIT 5;
SELECT count(*) FILTER (WHERE NOT keep) AS rows_removed, count(DISTINCT cluster_id) AS clusters
FROM minhash_dedup('demo/corpus.lance', 'text', keep := 'longest');
