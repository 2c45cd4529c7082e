-- The ingest appended exactly the rows its plan keeps, and dropped the others.
SELECT i.*
FROM {{ ref('corpus_ingest') }} AS i,
     (SELECT count(*) AS offered, count(*) FILTER (WHERE keep) AS kept FROM {{ ref('ingest_plan') }}) AS p
WHERE i.rows_offered <> p.offered OR i.rows_appended <> p.kept OR i.rows_dropped <> p.offered - p.kept
