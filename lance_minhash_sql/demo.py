"""The SQL the ``lance-minhash demo`` command runs over its synthetic corpus, in order:
queries over the corpus table, then the index, a search and a batch search, then the
self-join (pairs, clusters, dedup). ``{uri}`` and ``{query}`` are filled in by the command."""

from __future__ import annotations

__all__ = ["DEMO_QUERIES", "INDEX_QUERIES", "PAIRS_QUERIES"]

DEMO_QUERIES = [
    ("The corpus: rows, near-duplicates by edit kind",
     """SELECT edit, count(*) AS rows, round(avg(replaced_fraction), 3) AS avg_replaced
        FROM corpus GROUP BY edit ORDER BY rows DESC"""),
    ("A MinHash signature is a USMALLINT[] of num_hashes values (first 6 shown)",
     """SELECT id, left(text, 48) AS text, minhash_signature(text)[1:6] AS signature_head
        FROM corpus ORDER BY id LIMIT 3"""),
    ("Near-duplicates against their sources: estimated vs exact shingle Jaccard",
     """SELECT d.id, d.source_id, d.edit,
               round(minhash_similarity(minhash_signature(d.text), minhash_signature(s.text)), 3) AS estimated,
               round(shingle_jaccard(d.text, s.text), 3) AS exact
        FROM corpus d JOIN corpus s ON s.id = d.source_id
        WHERE d.edit <> 'original' ORDER BY d.id LIMIT 8"""),
    ("Estimator error over all near-duplicate pairs (k = 128)",
     """WITH p AS (
          SELECT minhash_similarity(minhash_signature(d.text), minhash_signature(s.text)) AS est,
                 shingle_jaccard(d.text, s.text) AS exact
          FROM corpus d JOIN corpus s ON s.id = d.source_id WHERE d.edit <> 'original')
        SELECT count(*) AS pairs, round(avg(abs(est - exact)), 4) AS mean_abs_error,
               round(quantile_cont(abs(est - exact), 0.95), 4) AS p95_abs_error FROM p"""),
    ("The LSH S-curve for 16 bands of 8 rows: probability a pair becomes a candidate",
     """SELECT s AS similarity, round(lsh_probability(s, 16, 8), 4) AS candidate_probability
        FROM (SELECT unnest([0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]::DOUBLE[]) AS s)"""),
]


INDEX_QUERIES = [
    ("Build Lance's MinHash LSH index on the text column (our engine, Lance's format)",
     """SELECT index_name, num_hashes, num_bands, rows_per_band, rows_indexed, round(seconds, 2) AS seconds,
               bytes FROM minhash_build({uri}, 'text')"""),
    ("The index as the dataset manifest records it",
     "SELECT segment_uuid, fragment_ids, \"rows\", bytes FROM minhash_indexes({uri})"),
    ("Top-5 near-duplicates of document 14 (an edited copy of document 0), with the dataset's own columns",
     """SELECT id, source_id, edit, left(text, 40) AS text, _distance
        FROM minhash_search({uri}, 'text', {query}, 5)"""),
    ("Batch search: the best match of 5 documents besides themselves, one LATERAL statement "
     "(match_id NULL: no other row shares a band)",
     """WITH q AS (SELECT id, text FROM corpus WHERE id IN (7, 14, 20, 23, 32)),
             hits AS (
               SELECT q.id AS query_id, r.id AS match_id, round(1 - s._distance, 3) AS similarity
               FROM q, LATERAL minhash_search_ids({uri}, 'text', q.text, 3) s
               JOIN corpus_rows r ON r._rowid = s._rowid
               WHERE r.id <> q.id
               QUALIFY row_number() OVER (PARTITION BY q.id ORDER BY s._distance, r.id) = 1)
        SELECT q.id AS query_id, hits.match_id, hits.similarity
        FROM q LEFT JOIN hits ON hits.query_id = q.id ORDER BY q.id"""),
]


PAIRS_QUERIES = [  # corpus_rows: the corpus's id, source_id, edit and Lance _rowid
    ("Near-duplicate pairs (minhash_pairs; exact := true adds the exact Jaccard), joined to the rows by _rowid",
     """SELECT l.id AS left_id, r.id AS right_id, round(p.similarity, 3) AS similarity,
               round(p.jaccard, 3) AS jaccard, r.edit
        FROM minhash_pairs({uri}, 'text', threshold := 0.8, exact := true) p
        JOIN corpus_rows l ON l._rowid = p.left_rowid JOIN corpus_rows r ON r._rowid = p.right_rowid
        ORDER BY p.similarity, left_id, right_id LIMIT 6"""),
    ("Pairs at 0.8 against the generator's truth: share of pairs copied from one source, by edit kind",
     """SELECT r.edit, count(*) AS pairs, round(avg((l.source_id = r.source_id)::INTEGER), 3) AS same_source
        FROM minhash_pairs({uri}, 'text') p
        JOIN corpus_rows l ON l._rowid = p.left_rowid JOIN corpus_rows r ON r._rowid = p.right_rowid
        GROUP BY r.edit ORDER BY pairs DESC"""),
    ("Clusters by size (minhash_clusters): every cluster, small sizes one by one, larger ones in ranges",
     """WITH c AS (SELECT cluster_id, any_value(cluster_size) AS size
                   FROM minhash_clusters({uri}, 'text') GROUP BY cluster_id)
        SELECT CASE WHEN size < 6 THEN size::VARCHAR WHEN size < 10 THEN '6-9' WHEN size < 20 THEN '10-19'
                    ELSE '20+' END AS cluster_size,
               count(*) AS clusters, sum(size)::BIGINT AS rows, max(size) AS largest
        FROM c GROUP BY 1 ORDER BY min(size)"""),
    ("Dedup keeping the longest text of each cluster (minhash_dedup): what it would remove",
     """SELECT count(*) FILTER (WHERE keep) AS clusters, count(*) FILTER (WHERE NOT keep) AS duplicates,
               (SELECT count(*) FROM corpus) - count(*) FILTER (WHERE NOT keep) AS rows_after_dedup
        FROM minhash_dedup({uri}, 'text', keep := 'longest')"""),
    ("The deduplicated corpus as a query: every row but the duplicates (lance-minhash dedup writes it)",
     """SELECT edit, count(*) AS rows
        FROM corpus_rows ANTI JOIN (SELECT _rowid FROM minhash_dedup({uri}, 'text', keep := 'longest')
                                    WHERE NOT keep) d USING (_rowid)
        GROUP BY edit ORDER BY rows DESC"""),
]
