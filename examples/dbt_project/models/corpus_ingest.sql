-- depends_on: {{ ref('ingest_plan') }}
-- Append the rows the plan keeps to the corpus (a Lance dataset, written in place as its
-- next version) and extend its index over them: a delta segment, never a rebuild. One row
-- recording what was done.
SELECT rows_offered, rows_appended, rows_dropped, dataset_version, index_action
FROM minhash_ingest('{{ var("corpus") }}', '{{ var("new_batch") }}', 'text',
                    threshold := {{ var("threshold") }}, verify := 'exact')
