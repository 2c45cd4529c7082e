"""What ``lance-minhash demo`` runs: its synthetic corpus, then SQL over it, in order:
queries over the corpus table, then the index, a search and a batch search, then the
self-join (pairs, clusters, dedup). ``{uri}`` and ``{query}`` are filled in by the command.

On a fresh install both halves of the demo's first seconds are compiling: the corpus
generator's kernels, and the signing and exact-Jaccard kernels of the first queries.
numba compiles one kernel at a time per process, so :func:`write_demo_corpus` then
writes the corpus in a second process while this one compiles the SQL functions'
kernels (:data:`PREPARE_SQL`), and both land in numba's cache. With a warm cache the
corpus is written here: a second process would only add its start-up.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from lance_minhash_sql.io.outputs import replacing_dir

__all__ = ["BATCH_ROWS", "DEMO_QUERIES", "EVAL_ROWS", "INDEX_QUERIES", "PAIRS_QUERIES", "PREPARE_SQL", "CorpusWritten",
           "write_demo_corpus", "write_demo_neighbours"]

# the scalar functions of DEMO_QUERIES, on the same argument types (VARCHAR columns)
PREPARE_SQL = """SELECT minhash_similarity(minhash_signature(a), minhash_signature(b)), shingle_jaccard(a, b),
                        lsh_probability(0.5, 16, 8)
                 FROM (VALUES ('The corpus is written meanwhile.', 'The corpus is written.')) t(a, b)"""


class CorpusWritten:
    """How the demo corpus was written: ``seconds``; ``compile_seconds`` of them spent
    compiling the generator's kernels; ``beside``: in a second process, while this one
    spent ``prepare_seconds`` preparing (compiling) the SQL functions' kernels."""

    def __init__(self, seconds: float, compile_seconds: float, beside: bool, prepare_seconds: float = 0.0):
        self.seconds = seconds
        self.compile_seconds = compile_seconds
        self.beside = beside
        self.prepare_seconds = prepare_seconds

    def describe(self) -> str:
        """The demo's first line after ``wrote N synthetic rows to URI``."""
        from lance_minhash_sql.kernels.config import compiled_note

        line = f" in {self.seconds:.1f}s"
        if not self.beside:
            return line + compiled_note(self.compile_seconds)
        return (f"{line} by a second process{compiled_note(self.compile_seconds)}, while this one compiled the "
                f"SQL functions' kernels ({self.prepare_seconds:.1f}s, once per machine)")


def _write(uri: str, rows: int, mode: str, progress: bool) -> tuple[float, float]:
    """The corpus write, as the second process runs it: (seconds, compile seconds)."""
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.kernels.config import COMPILES

    COMPILES.notice = False  # the demo's own process announces the compilation
    t0 = time.perf_counter()
    write_corpus(uri, rows, mode=mode, with_truth=True, progress=progress)
    return time.perf_counter() - t0, COMPILES.seconds


def both_compile() -> bool:
    """Whether the generator's and the signing kernels are both missing from numba's cache."""
    from lance_minhash_sql.faces import corpus_kernels
    from lance_minhash_sql.kernels import minhash
    from lance_minhash_sql.kernels.config import in_cache

    return not in_cache(corpus_kernels.render_range) and not in_cache(minhash.sign_range)


def write_demo_corpus(uri: str, rows: int, mode: str, progress: bool, prepare: Callable[[], object],
                      beside: bool | None = None) -> CorpusWritten:
    """Write the demo corpus and run ``prepare()``: at once, with the corpus written by a
    second process, when ``beside`` (default: :func:`both_compile`); else one after the other here."""
    from lance_minhash_sql.faces.corpus import write_corpus
    from lance_minhash_sql.kernels.config import COMPILES

    if beside is None:
        beside = both_compile()
    if not beside:
        t0, c0 = time.perf_counter(), COMPILES.seconds
        write_corpus(uri, rows, mode=mode, with_truth=True, progress=progress)
        written = CorpusWritten(time.perf_counter() - t0, COMPILES.seconds - c0, False)
        prepare()
        return written
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as writer:
        future = writer.submit(_write, uri, rows, mode, progress)
        t0 = time.perf_counter()
        prepare()
        prepared = time.perf_counter() - t0
        seconds, compiled = future.result()
    return CorpusWritten(seconds, compiled, True, prepared)


EVAL_ROWS, BATCH_ROWS = 1000, 2000  # the evaluation set and the new batch beside the corpus


def write_demo_neighbours(folder: str, rows: int) -> tuple[str, str, str]:
    """Write ``eval.lance``, ``batch.lance`` and ``batch2.lance`` beside the demo corpus:
    the generator's next rows after the corpus's ``rows`` (some are near-duplicates of
    corpus rows and of each other): the evaluation set that examples/dbt_project checks
    against the corpus, and the batches of two days that its pipeline ingests. Returns
    their paths."""
    from lance_minhash_sql.faces.corpus import write_corpus

    paths = tuple(os.path.join(folder, f) for f in ("eval.lance", "batch.lance", "batch2.lance"))
    for path, n, start in ((paths[0], EVAL_ROWS, rows), (paths[1], BATCH_ROWS, rows + EVAL_ROWS),
                           (paths[2], BATCH_ROWS, rows + EVAL_ROWS + BATCH_ROWS)):
        with replacing_dir(path) as tmp:  # a fresh dataset each run: the same row ids, no old versions
            write_corpus(tmp, n, start=start, with_truth=True)  # the corpus's columns: the batches are appended to it
    return paths


DEMO_QUERIES = (
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
)


INDEX_QUERIES = (
    ("Build Lance's MinHash LSH index on the text column (our engine, Lance's format)",
     """SELECT index_name, num_hashes, num_bands, rows_per_band, rows_indexed, round(seconds, 2) AS seconds,
               bytes FROM minhash_build({uri}, 'text')"""),
    ("The index as the dataset manifest records it",
     "SELECT segment_uuid, fragment_ids, \"rows\", bytes FROM minhash_indexes({uri})"),
    ("Top-5 near-duplicates of document 14 (an edited copy of document 0), with the dataset's own columns; "
     "the first is document 14 itself (distance 0)",
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
)


PAIRS_QUERIES = (  # corpus_rows: the corpus's id, source_id, edit and Lance _rowid
    ("A sample of near-duplicate pairs (minhash_pairs; verify := 'exact' adds the exact Jaccard), joined to the "
     "rows by _rowid; right_edit: how the pair's right row was made",
     """SELECT * FROM (
          SELECT l.id AS left_id, r.id AS right_id, round(p.similarity, 3) AS similarity,
                 round(p.jaccard, 3) AS jaccard, r.edit AS right_edit
          FROM minhash_pairs({uri}, 'text', threshold := 0.8, verify := 'exact') p
          JOIN corpus_rows l ON l._rowid = p.left_rowid JOIN corpus_rows r ON r._rowid = p.right_rowid
          ORDER BY hash(left_id, right_id) LIMIT 6)
        ORDER BY similarity DESC, left_id, right_id"""),
    ("Pairs at 0.8 against the generator's truth, by how the right row was made: same_source = both rows "
     "come from one original; right_edit 'original' = two different originals that share long passages "
     "(their exact Jaccard is high too: true near-duplicates, not false positives)",
     """SELECT r.edit AS right_edit, count(*) AS pairs,
               round(avg((l.source_id = r.source_id)::INTEGER), 3) AS same_source,
               round(avg(shingle_jaccard(lt.text, rt.text)), 3) AS mean_exact_jaccard
        FROM minhash_pairs({uri}, 'text') p
        JOIN corpus_rows l ON l._rowid = p.left_rowid JOIN corpus_rows r ON r._rowid = p.right_rowid
        JOIN corpus lt ON lt.id = l.id JOIN corpus rt ON rt.id = r.id
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
    ("A day's batch (batch.lance beside the corpus): which of its rows the corpus takes (minhash_ingest_plan; "
     "minhash_ingest appends them and extends the index in one new version, lance-minhash ingest from the shell)",
     """SELECT CASE WHEN keep THEN 'kept: new' ELSE 'dropped: a near-duplicate in the ' || twin_in END AS decision,
               count(*) AS rows, round(min(similarity), 3) AS min_similarity
        FROM minhash_ingest_plan({uri}, {batch}, 'text', threshold := 0.8)
        GROUP BY ALL ORDER BY rows DESC"""),
)
