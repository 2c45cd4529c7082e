-- depends_on: {{ ref('corpus_ingest') }}
-- Keep the disk bounded: remove the corpus's versions older than the retention, and the
-- data files and index segments that only they use. The latest version always stays.
SELECT versions_removed, bytes_removed
FROM minhash_cleanup('{{ var("corpus") }}', older_than := '{{ var("retention") }}')
