-- Build (or rebuild) Lance's MinHash LSH index on the text column, with the bands chosen
-- for the pipeline's similarity threshold; one row recording what was built.
SELECT index_name, num_hashes, num_bands, rows_per_band, rows_indexed, rows_without_tokens, dataset_version
FROM minhash_build('{{ var("corpus") }}', 'text', threshold := {{ var("threshold") }})
