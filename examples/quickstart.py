"""Quick start in Python: a corpus, Lance's MinHash index, search, pairs, clusters, dedup.

    python examples/quickstart.py [DIR]          # writes DIR/corpus.lance (default: ./quickstart)
"""

import os
import sys

import lance_minhash_sql as lms

folder = sys.argv[1] if len(sys.argv) > 1 else "quickstart"
uri = os.path.join(folder, "corpus.lance")
lms.write_corpus(uri, 5000, mode="overwrite")  # synthetic texts with planted near-duplicates

built = lms.build_index(uri, "text")  # Lance's own MINHASHLSH index, 128 hashes in 16 bands
print(f"indexed {built.rows_indexed:,} rows into {len(built.segment_uuids)} segment(s)")

# document 0 of the corpus without its last word
query = ("Ege uu, mya axi ak ak. Iuwe. Joko izove iml low ilo ad ou sev sijaf ak. Ak en yore ras erop oseuuij, "
         "eq oz di calsaz sx gh qc oyxa ro fq bk yupumire adiq.")
hits = lms.search(uri, "text", query, k=3, columns=["id"])
print("top 3 for the query:", list(zip(hits.column("id").to_pylist(), hits.column("_distance").to_pylist())))

pairs = sum(batch.num_rows for batch in lms.pairs(uri, "text", threshold=0.8))
clusters = lms.clusters(uri, "text", threshold=0.8)
print(f"{pairs:,} near-duplicate pairs; {clusters.num_rows:,} rows in "
      f"{len(set(clusters.column('cluster_id').to_pylist())):,} clusters")

plan = lms.dedup(uri, "text", threshold=0.8, keep="longest")  # a dry run: nothing is written
print(f"dedup would keep {plan.rows - plan.removed:,} of {plan.rows:,} rows")

con = lms.connect()  # the same in SQL
print(con.sql(f"SELECT count(*) AS pairs, round(avg(similarity), 3) AS mean_similarity "
              f"FROM minhash_pairs('{uri}', 'text', threshold := 0.8)").fetchall())
